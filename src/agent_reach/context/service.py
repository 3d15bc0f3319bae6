"""The context service: every context operation the API and the invoke path perform.

Each operation takes the `Grant` of whoever asks: the caller path opens the contexts its
principal owns or was shared (every one for an admin), a token only what it names.
Writes are compare-and-set by version; a merge that did not ask for a version reads,
merges and retries its compare-and-set until it lands, so concurrent writers never lose
each other's updates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from agent_reach.backends.protocols import ContextStore, ContextWrite
from agent_reach.clock import Clock
from agent_reach.config import Settings
from agent_reach.context.documents import (
    ContextView,
    assemble,
    check_list_name,
    encode,
    new_context_id,
    unknown_context,
)
from agent_reach.context.limits import ContextLimits
from agent_reach.context.ownership import ContextAccess
from agent_reach.context.patch import merge_patch, touched_paths
from agent_reach.context.projection import (
    check_field_path,
    covers,
    narrow,
    project,
    top_level,
)
from agent_reach.context.references import References
from agent_reach.context.sweeper import ContextSweeper
from agent_reach.context.tokens import Grant, TokenSigner, load_secret
from agent_reach.errors import Conflict, ValidationFailed
from agent_reach.model.agents import AgentSpec
from agent_reach.model.keys import Principal
from agent_reach.security.ownership import is_admin

# An unconditional merge retries its compare-and-set this often; losing every round
# means writers hammer one context, and the caller is told so rather than kept waiting.
MAX_MERGE_ROUNDS = 16


class ContextService:
    """Contexts for the HTTP API, and the context block of each delivery."""

    def __init__(self, store: ContextStore, signer: TokenSigner, settings: Settings) -> None:
        self.store = store
        self.signer = signer
        self.limits = ContextLimits.from_settings(settings)
        self.ttl_s = settings.ttl_default
        self.token_ttl_s = settings.context_token_ttl_s
        self.base_url = (settings.public_url or "").rstrip("/")
        self.references = References()
        self.sweeper = ContextSweeper(store, self.references, interval_s=settings.context_sweep_s)

    @classmethod
    async def open(cls, store: ContextStore, clock: Clock, settings: Settings) -> ContextService:
        """The service with the cluster's token secret loaded (one store call at most)."""
        return cls(store, TokenSigner(await load_secret(settings, store), clock), settings)

    async def create(
        self,
        document: dict[str, Any],
        ttl_s: float | None = None,
        access: ContextAccess | None = None,
    ) -> ContextView:
        """A new context holding `document`, living `ttl_s` (default `AR_TTL_DEFAULT`),
        owned as `access` says (None: by no one, so only admins and tokens open it)."""
        encoded = encode(document)
        self.limits.check_document(encoded, document)
        ttl_s = self.ttl_s if ttl_s is None else ttl_s
        stored_access = b"" if access is None else access.encode()
        context_id = new_context_id()
        while not await self.store.create(
            context_id, encoded, document.keys(), ttl_s, stored_access
        ):
            context_id = new_context_id()  # 128 random bits: practically never taken
        return ContextView(context_id, 1, ttl_s)

    async def check_use(self, principal: Principal, context_id: str) -> None:
        """`unknown_context` (the answer for a missing context) unless the principal may
        use the context: its owner, one it is shared with, or an admin."""
        if is_admin(principal):
            return
        raw = await self.store.access(context_id)
        if raw is None or not ContextAccess.decode(raw).admits(principal):
            raise unknown_context()

    async def read(
        self, context_id: str, grant: Grant, fields: Sequence[str] | None = None
    ) -> ContextView:
        """The document, or the part of it that both `fields` and the grant name."""
        await self._check_opens(grant, context_id)
        visible = narrow(grant.read, fields)
        stored = await self.store.read(context_id, None if visible is None else top_level(visible))
        if stored is None:
            raise unknown_context()
        document = assemble(stored)
        if visible is not None:
            document = project(document, visible)
        return ContextView(context_id, stored.version, stored.expires_in_s, document)

    async def merge(
        self,
        context_id: str,
        grant: Grant,
        patch: dict[str, Any],
        *,
        if_version: int | None = None,
    ) -> ContextView:
        """Apply a JSON merge patch (RFC 7386), only at `if_version` when given.

        ``null`` on an appended list deletes the list; any other value for it is
        refused (lists change by appending). Every field the patch changes must lie
        inside the grant's write fields.
        """
        await self._check_opens(grant, context_id)
        for _ in range(MAX_MERGE_ROUNDS):
            stored = await self.store.read(context_id, ())
            if stored is None:
                raise unknown_context()
            if if_version is not None and stored.version != if_version:
                raise version_conflict(stored.version)
            current = orjson.loads(stored.document)
            document_patch, dropped = _split_patch(current, patch, stored.list_names, grant.write)
            document = merge_patch(current, document_patch)
            encoded = encode(document)
            self.limits.check_document(encoded, document)
            outcome = await self.store.write(
                context_id, encoded, document.keys(), version=stored.version, drop_lists=dropped
            )
            if outcome.state != "conflict" or if_version is not None:
                return self._written(context_id, outcome)
        raise Conflict(
            f"the context changed under each of {MAX_MERGE_ROUNDS} attempts to merge; "
            "try again later",
            code="version_conflict",
        )

    async def append(
        self,
        context_id: str,
        grant: Grant,
        name: str,
        items: Sequence[Any],
        *,
        if_version: int | None = None,
    ) -> ContextView:
        """Append `items` to the list `name`, all or none, only at `if_version` when given."""
        await self._check_opens(grant, context_id)
        check_list_name(name)
        if not covers(grant.write, (name,)):
            raise not_writable(name)
        if not items:
            raise ValidationFailed("give at least one item to append", code="invalid_patch")
        encoded = [encode(item) for item in items]
        for item in encoded:
            self.limits.check_item(item)
        outcome = await self.store.append(
            context_id, name, encoded, version=if_version, policy=self.limits.segments
        )
        return self._written(context_id, outcome)

    async def delete(self, context_id: str, grant: Grant) -> None:
        """Delete the context with all its lists; `unknown_context` when there is none
        (or the grant does not open it)."""
        await self._check_opens(grant, context_id)
        if not await self.store.delete(context_id):
            raise unknown_context()

    async def delivery_context(
        self, context_id: str, spec: AgentSpec, *, request_id: str
    ) -> dict[str, Any] | None:
        """The delivery's ``{"id", "token", "url"}`` block, or None when the agent reads no field.

        The token opens `spec.context_fields` of this context for reading and writing,
        for `AR_CONTEXT_TOKEN_TTL_S`. From now until `release(request_id)` the request
        refers to the context, which therefore does not expire. `unknown_context` when
        the context is missing or expired.
        """
        if not spec.context_fields:
            return None
        fields = tuple(check_field_path(field) for field in spec.context_fields)
        if not await self.store.hold([context_id], self.sweeper.hold_s):
            raise unknown_context()
        self.references.take(request_id, context_id)
        token = self.signer.sign(Grant(context_id, fields, fields), self.token_ttl_s)
        return {"id": context_id, "token": token, "url": self.url(context_id)}

    async def release(self, request_id: str) -> None:
        """The request has ended: its context may expire again (after its own ttl)."""
        self.references.drop(request_id)

    def url(self, context_id: str) -> str:
        """Where agents fetch the context: relative to their coordinator unless `public_url`."""
        return f"{self.base_url}/v1/contexts/{context_id}"

    async def _check_opens(self, grant: Grant, context_id: str) -> None:
        """A token opens its one context; the caller path what its principal may use."""
        if grant.context_id is not None:
            if grant.context_id != context_id:
                raise unknown_context()
        elif grant.principal is not None:
            await self.check_use(grant.principal, context_id)

    def _written(self, context_id: str, outcome: ContextWrite) -> ContextView:
        if outcome.state == "written":
            return ContextView(context_id, outcome.version, outcome.expires_in_s)
        if outcome.state == "missing":
            raise unknown_context()
        if outcome.state == "conflict":
            raise version_conflict(outcome.version)
        if outcome.state == "not_a_list":
            raise ValidationFailed(
                "that name is a field of the document, not a list: merge into it instead",
                code="not_a_list",
            )
        raise self.limits.too_many_segments()


def version_conflict(current: int) -> Conflict:
    """409: the context is no longer at the version the writer read."""
    return Conflict(
        f"the context is at version {current}: read it again and retry",
        code="version_conflict",
        version=current,
    )


def not_writable(field: str) -> ValidationFailed:
    return ValidationFailed(
        f"the token may not write {field!r}", code="field_not_writable", field=field
    )


def _split_patch(
    current: dict[str, Any],
    patch: dict[str, Any],
    list_names: frozenset[str],
    writable: tuple[str, ...] | None,
) -> tuple[dict[str, Any], list[str]]:
    """The patch for the document and the appended lists it deletes; refuses what it may not do."""
    dropped = []
    for name in patch.keys() & list_names:
        if patch[name] is not None:
            raise ValidationFailed(
                f"{name!r} is an appended list: append to it, or set it to null to delete it",
                code="field_is_a_list",
                field=name,
            )
        dropped.append(name)
    document_patch = {k: v for k, v in patch.items() if k not in list_names}
    touched = [(name,) for name in dropped] + list(touched_paths(current, document_patch))
    for path in touched:
        if not covers(writable, path):
            raise not_writable(".".join(path))
    return document_patch, dropped
