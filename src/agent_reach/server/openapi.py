"""The OpenAPI document, including `POST /v1/invoke`, which bypasses FastAPI's router."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import TypeAdapter

from agent_reach.model.invocations import InvokeRequest, InvokeResult

_ERROR = {"description": '`{"error": {"code", "message", ...}}`'}


def add_invoke_operation(api: FastAPI) -> None:
    """Make `api.openapi()` describe the fast-path endpoint like any other."""

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is not None:
            return api.openapi_schema
        schema = get_openapi(title=api.title, version=api.version, routes=api.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for name, adapter in (
            ("InvokeRequest", TypeAdapter(InvokeRequest)),
            ("InvokeResult", TypeAdapter(InvokeResult)),
        ):
            body = adapter.json_schema(ref_template="#/components/schemas/{model}")
            components.update(body.pop("$defs", {}))
            components[name] = body
        schema["paths"]["/v1/invoke"] = {
            "post": {
                "tags": ["invoke"],
                "summary": "Route and deliver",
                "operationId": "invoke",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref("InvokeRequest")}},
                },
                "responses": {
                    "200": {
                        "description": "delivered; with `Accept: text/event-stream`, the "
                        "agent's events as they come, then `reach.end` (the answer) or "
                        "`reach.error`",
                        "content": {
                            "application/json": {"schema": _ref("InvokeResult")},
                            "text/event-stream": {"schema": {"type": "string"}},
                        },
                    },
                    **{str(s): _ERROR for s in (400, 404, 413, 422, 502, 503, 504, 508)},
                },
            }
        }
        api.openapi_schema = schema
        return schema

    api.openapi = openapi  # type: ignore[method-assign]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}
