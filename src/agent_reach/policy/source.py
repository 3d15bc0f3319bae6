"""The policy in force: kept in the policy store, followed by every coordinator.

The store (memory, or Redis shared by all coordinators) holds the policy and the audit
log of its changes. A policy file, when given, is the starting point: at start and on
every edit (the file is polled every `reload_s`) its content goes to the store unless
the store already took that content, so a restart does not undo run-time changes.
`PUT /v1/policy` replaces the policy through `replace` (compare-and-set on the
version). Each coordinator reads the store every `reload_s` and swaps the policy whole;
an invalid file edit is logged and the previous policy stays.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson
import structlog
from pydantic import ValidationError

from agent_reach.backends.protocols import PolicyChange, PolicyStore
from agent_reach.cancellation import honour_cancel
from agent_reach.clock import Clock
from agent_reach.config import load_mapping
from agent_reach.errors import Conflict, InvalidRequest, ReachError
from agent_reach.policy.factor_defaults import with_factor_defaults
from agent_reach.policy.policy import Policy

log = structlog.get_logger("agent_reach.policy")

DEFAULT_RELOAD_S = 1.0  # an edit is in force within about a second


@dataclass(frozen=True, slots=True)
class PolicyStatus:
    """What `GET /v1/policy` shows: the policy in force and where it came from."""

    version: str
    revision: int
    source: str
    changed_by: str | None
    loaded_at: float
    policy: Policy
    last_error: str | None


class PolicySource:
    """Holds the current `Policy`; calling it returns the policy in force.

    Until `attach` it serves the file's policy (or the defaults) from memory alone,
    which is all `agent-reach acl check` needs.
    """

    def __init__(
        self, clock: Clock, path: Path | None = None, factors_on: Sequence[str] | None = None
    ) -> None:
        self.clock = clock
        self.path = path
        self.factors_on = factors_on  # AR_ROUTE_AFFINITY_DEFAULT
        self.current = Policy.model_validate(with_factor_defaults({}, factors_on))
        self.revision = 0
        self.source = "defaults"
        self.changed_by: str | None = None
        self.loaded_at = clock.wall()
        self.last_error: str | None = None
        self.store: PolicyStore | None = None
        self._digest: str | None = None
        self._seen: tuple[int, str] | None = None  # the stored (revision, version) last read
        if path is not None:
            content = path.read_bytes()
            self.current = _parse(path, content, factors_on)
            self._digest = hashlib.sha256(content).hexdigest()
            self.source = str(path)

    def __call__(self) -> Policy:
        return self.current

    def status(self) -> PolicyStatus:
        return PolicyStatus(
            version=self.current.version,
            revision=self.revision,
            source=self.source,
            changed_by=self.changed_by,
            loaded_at=self.loaded_at,
            policy=self.current,
            last_error=self.last_error,
        )

    async def attach(self, store: PolicyStore) -> None:
        """Follow `store`: give it the file's policy (or, when empty, the defaults), then
        adopt what it holds."""
        self.store = store
        if self._digest is not None:
            await self._offer(self.current, "file", f"file:{self.path}", file_digest=self._digest)
        elif await store.get() is None:
            await self._offer(self.current, "defaults", "coordinator", expected_revision=0)
        await self.sync()

    async def replace(self, policy: Policy, *, by: str, if_match: str | None) -> PolicyChange:
        """Make `policy` the one in force everywhere; `Conflict` (409 `version_conflict`)
        when `if_match` names a version that is no longer in force."""
        policy = self._with_factor_defaults(policy)
        await self.sync()
        if if_match is not None and if_match != self.current.version:
            raise _stale(if_match, self.current.version)
        stored_revision = self._seen[0] if self._seen else 0
        change = await self._offer(policy, "api", by, expected_revision=stored_revision)
        if change is None:  # another coordinator changed it between our read and write
            await self.sync()
            raise _stale(if_match or self.current.version, self.current.version)
        await self.sync()
        return change

    def _with_factor_defaults(self, policy: Policy) -> Policy:
        """`policy` with `AR_ROUTE_AFFINITY_DEFAULT` applied as to the file's: a body that
        sets no `weights` gets the preset's weights of the factors on, like the file."""
        if self.factors_on is None or "weights" in policy.model_fields_set:
            return policy
        data = policy.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return Policy.model_validate(with_factor_defaults(data, self.factors_on))

    async def changes(self, limit: int) -> list[PolicyChange]:
        """The newest audit records, newest first."""
        return [] if self.store is None else await self.store.changes(limit)

    async def sync(self) -> bool:
        """Adopt the stored policy when its revision moved; True when a new one is in force.

        A store that lost the policy (a Redis restarted empty) gets this one back.
        """
        if self.store is None:
            return False
        stored = await self.store.get()
        if stored is None and self.revision > 0:
            await self._offer(self.current, "restored", "coordinator", expected_revision=0)
            stored = await self.store.get()
        if stored is None:
            return False
        # the version too: a store that lost everything counts revisions from 1 again
        seen = (stored.revision, stored.version)
        if seen == self._seen:
            return False
        self._seen = seen  # an invalid revision is reported once, not at every poll
        try:
            policy = Policy.model_validate(orjson.loads(stored.document))
        except (ValidationError, orjson.JSONDecodeError) as exc:
            return self._reject(f"the stored policy revision {stored.revision} is invalid: {exc}")
        previous = self.current.version
        changes = await self.store.changes(1)
        last = changes[0] if changes and changes[0].revision == stored.revision else None
        self.current, self.revision = policy, stored.revision
        self.loaded_at, self.last_error = self.clock.wall(), None
        if last is not None:
            self.changed_by = last.by
            self.source = last.by.removeprefix("file:") if last.source == "file" else last.source
        if previous != policy.version:
            log.info(
                "policy_changed", previous=previous, version=policy.version, by=self.changed_by
            )
        return True

    def reload(self) -> Policy | None:
        """Re-read the file; the new, valid policy when its content changed, else None.

        An empty file is an edit in progress (a write that truncated it first), not an
        edit: it is read again at the next poll. Only the file at startup may be empty.
        """
        if self.path is None:
            return None
        try:
            content = self.path.read_bytes()
        except OSError as exc:
            self._reject(f"cannot read the policy file: {exc.strerror}")
            return None
        if not content.strip():
            return None
        digest = hashlib.sha256(content).hexdigest()
        if digest == self._digest:
            return None
        self._digest = digest
        try:
            policy = _parse(self.path, content, self.factors_on)
        except InvalidRequest as exc:
            self._reject(exc.message)
            return None
        self.last_error = None
        return policy

    async def watch(self, reload_s: float = DEFAULT_RELOAD_S) -> None:
        """Push file edits to the store and follow the store, until cancelled."""
        while True:
            await asyncio.sleep(reload_s)
            try:
                edited = self.reload()
                if edited is not None and self._digest is not None:
                    await self._offer(edited, "file", f"file:{self.path}", file_digest=self._digest)
                await self.sync()
            except ReachError as exc:  # the store is down: keep the policy, try again
                log.warning("policy_sync_failed", error=exc.message, kept=self.current.version)
            honour_cancel()

    async def _offer(
        self,
        policy: Policy,
        source: str,
        by: str,
        *,
        expected_revision: int | None = None,
        file_digest: str | None = None,
    ) -> PolicyChange | None:
        assert self.store is not None
        document = orjson.dumps(policy.model_dump(mode="json", by_alias=True))
        change = PolicyChange(0, self.clock.wall(), by, source, None, policy.version)
        done = await self.store.replace(
            document,
            policy.version,
            change=change,
            expected_revision=expected_revision,
            file_digest=file_digest,
        )
        if done is not None:
            report = log.debug if source == "defaults" else log.info
            report("policy_replaced", by=by, source=source, before=done.before, after=done.after)
        return done

    def _reject(self, message: str) -> bool:
        self.last_error = message
        log.error("policy_rejected", source=self.source, error=message, kept=self.current.version)
        return False


def _stale(if_match: str, current: str) -> Conflict:
    return Conflict(
        f"If-Match names version {if_match}, but {current} is in force: "
        "read the policy again and re-apply your change",
        code="version_conflict",
        version=current,
    )


def _parse(path: Path, content: bytes, factors_on: Sequence[str] | None) -> Policy:
    """A policy from TOML/YAML bytes; any problem is one `InvalidRequest` with the reason."""
    try:
        data = load_mapping(path, content.decode("utf-8"))
        return Policy.model_validate(with_factor_defaults(data, factors_on))
    except UnicodeDecodeError as exc:
        raise InvalidRequest(f"{path}: not UTF-8 text") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise InvalidRequest(f"{path}: {problems}") from exc
