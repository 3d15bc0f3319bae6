"""Context documents as callers see them: ids, list names, and one JSON object per read.

Stored, a context is its document plus appended lists kept apart in segments; read,
each loaded list appears in the document as a top-level array of its live items.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

import orjson

from agent_reach.backends.protocols import StoredContext
from agent_reach.errors import NotFound, ValidationFailed

CONTEXT_ID_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
ID_BYTES = 16  # 128 random bits: an id cannot be guessed, so it is no way in by itself
LIST_NAME = re.compile(r"[^\x00-\x1f\x7f.,]{1,64}")  # one field-path key, at most 64 characters


@dataclass(frozen=True, slots=True)
class ContextView:
    """A context's version and remaining life, and the document (or projection) when read."""

    context_id: str
    version: int
    expires_in_s: float
    document: dict[str, Any] | None = None


def new_context_id() -> str:
    return f"ctx-{secrets.token_hex(ID_BYTES)}"


def unknown_context() -> NotFound:
    """404 for a context that is missing, expired, or not the one a token opens.

    The message names no id, so the answer is the same whichever it was.
    """
    return NotFound("no such context, or it has expired", code="unknown_context")


def check_list_name(name: str) -> str:
    if not LIST_NAME.fullmatch(name):
        raise ValidationFailed(
            f"{name[:64]!r} cannot name a list: 1 to 64 characters, no '.', ',' or control "
            "characters",
            code="invalid_list_name",
        )
    return name


def encode(value: Any) -> bytes:
    """The stored bytes; 422 for what JSON parsing accepts but cannot be kept (huge ints)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as exc:
        raise ValidationFailed(f"the document cannot be stored as JSON: {exc}") from None


def assemble(stored: StoredContext) -> dict[str, Any]:
    """The stored document with each loaded list in it as an array of its live items."""
    document: dict[str, Any] = orjson.loads(stored.document)
    for name, items in stored.lists.items():
        document[name] = orjson.loads(b"[" + b",".join(items) + b"]")
    return document
