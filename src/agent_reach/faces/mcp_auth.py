"""The MCP face as an OAuth 2.1 protected resource (the MCP authorization spec).

`GET /.well-known/oauth-protected-resource[/mcp]` (RFC 9728) names the resource
(`<coordinator>/mcp`) and the authorization servers (`AR_OIDC_ISSUER`); a request to
`/mcp` without a valid credential is a 401 whose `WWW-Authenticate` points there, so an
MCP client can run its OAuth flow; tokens must be issued for this resource (its URL as
the audience, RFC 8707) or carry `AR_OIDC_AUDIENCE`. API keys keep working.

Every refusal on `/mcp` is a JSON-RPC error (with the request's id when it has one) at
the HTTP status of the refusal: MCP clients show its message; `data` holds the REST
error body, so a plain HTTP client reads the same code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from fastapi import APIRouter, Request
from starlette.responses import Response

from agent_reach.config import Settings
from agent_reach.errors import NotFound, ReachError
from agent_reach.faces.handler import handler_of
from agent_reach.identity.origins import cannot_rebind
from agent_reach.wire.json_answers import JSON, json_response
from agent_reach.wire.rendering import error_headers

METADATA_PATH = "/.well-known/oauth-protected-resource"
MCP_PATH = "/mcp"
# JSON-RPC server errors (-32000..-32099) for refusals MCP does not name.
RPC_CODES = {401: -32001, 403: -32003, 429: -32029}
RPC_OTHER = -32000

router = APIRouter(tags=["mcp"])


def base_url(settings: Settings, scope: Mapping[str, Any]) -> str:
    """This coordinator's URL: `AR_PUBLIC_URL`, else the scheme and Host of the request."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    return f"{scope.get('scheme', 'http')}://{_host(scope)}"


def resource_audience(settings: Settings, scope: Mapping[str, Any]) -> str | None:
    """The MCP resource's URL as an audience its tokens may carry — only when no caller
    can choose it: named by `AR_PUBLIC_URL`, or under a loopback or IP-literal Host."""
    if settings.public_url or cannot_rebind(_host(scope)):
        return base_url(settings, scope) + MCP_PATH
    return None


def challenge(settings: Settings, scope: Mapping[str, Any], error: ReachError) -> str | None:
    """The 401's `WWW-Authenticate`, pointing at the resource metadata when OAuth is on."""
    value = error.challenge()
    if value is None or not settings.oidc_issuer:
        return value
    metadata = f"{base_url(settings, scope)}{METADATA_PATH}{MCP_PATH}"
    return f'{value}, resource_metadata="{metadata}"'


def refusal(
    settings: Settings, scope: Mapping[str, Any], error: ReachError, request_id: object
) -> Response:
    """A refusal an MCP client shows: a JSON-RPC error at the refusal's HTTP status."""
    body = error.to_body()["error"]
    document = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {
            "code": RPC_CODES.get(error.status, RPC_OTHER),
            "message": f"{error.code} (HTTP {error.status}): {error.message}",
            "data": {**body, "status": error.status},
        },
    }
    headers = dict(error_headers(error.retry_after(), challenge(settings, scope, error)))
    return Response(orjson.dumps(document), error.status, headers, media_type=JSON)


def request_id_of(body: bytes) -> object:
    """The id of a JSON-RPC request body, or None (a batch, a notification, not JSON)."""
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, str | int) else None


@router.get(METADATA_PATH, include_in_schema=False)
@router.get(METADATA_PATH + MCP_PATH, summary="OAuth protected resource metadata of /mcp")
async def protected_resource_metadata(request: Request) -> Response:
    """RFC 9728 metadata: the resource and the authorization servers that issue for it."""
    settings = handler_of(request).settings
    if not settings.oidc_issuer:
        raise NotFound(
            "OAuth is not configured: set AR_OIDC_ISSUER and AR_OIDC_AUDIENCE (API keys work "
            "on /mcp without it)",
            code="oauth_not_configured",
        )
    return json_response(
        {
            "resource": base_url(settings, request.scope) + MCP_PATH,
            "authorization_servers": settings.oidc_issuer,
            "bearer_methods_supported": ["header"],
            "resource_name": "Agent-Reach (the coordinator's capabilities as MCP tools)",
        }
    )


def _host(scope: Mapping[str, Any]) -> str:
    for name, value in scope.get("headers") or ():
        if name == b"host":
            return str(value.decode("latin-1")).strip().lower()
    server = scope.get("server") or ("127.0.0.1", 80)
    return f"{server[0]}:{server[1]}"
