"""Exception handlers: every failure becomes `{"error": {...}}`, never a traceback."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from agent_reach.errors import InvalidRequest, ReachError, ValidationFailed
from agent_reach.model.invocations import ONE_OF_TYPE
from agent_reach.server.responses import error_response

log = structlog.get_logger("agent_reach.server")

_OUTSIDE_THE_BODY = {("path",), ("query",), ("header",), ("cookie",)}
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def invalid_body(errors: Sequence[Any]) -> ReachError:
    """Malformed JSON is 400 `invalid_json`; a well-formed body that breaks the schema is 422."""
    if any(e.get("type") == "json_invalid" for e in errors):
        return InvalidRequest("the body is not valid JSON", code="invalid_json")
    problems = [{"field": field, "problem": e.get("msg")} for e in errors for field in _fields(e)]
    outside = any(tuple(e.get("loc", ()))[:1] in _OUTSIDE_THE_BODY for e in errors)
    where = "the request" if outside else "the body"
    return ValidationFailed(f"{where} does not match the schema", problems=problems)


def _fields(error: Any) -> list[str]:
    """Where a problem is: its field's dotted path; for a body lacking every one of
    several alternatives (`missing_one_of`), each of them."""
    path = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
    if error.get("type") == ONE_OF_TYPE:
        return [".".join(filter(None, (path, name))) for name in error["ctx"]["fields"]]
    return [path]


def install_error_handlers(app: FastAPI) -> None:
    """Map ReachError, validation errors, HTTP errors and anything unexpected."""

    @app.exception_handler(ReachError)
    async def _reach(_: Request, exc: ReachError) -> Response:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _request_validation(_: Request, exc: RequestValidationError) -> Response:
        return error_response(invalid_body(exc.errors()))

    @app.exception_handler(ValidationError)
    async def _validation(_: Request, exc: ValidationError) -> Response:
        return error_response(invalid_body(exc.errors()))

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> Response:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return error_response(ReachError(str(exc.detail), code=code, status=exc.status_code))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> Response:
        log.exception("request_failed", path=request.url.path)
        return error_response(ReachError("internal error; the coordinator log has details"))
