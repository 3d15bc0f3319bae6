"""Who a context belongs to: its creator, and the principals it was shared with.

Recorded once, at creation, and never changed, so checking it and then acting on the
context cannot race with a change of owner. The store keeps it as opaque bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import orjson
from pydantic import BeforeValidator, StringConstraints

from agent_reach.model.keys import Principal
from agent_reach.security.ownership import may_use

MAX_SHARES = 32  # principals and domains one context is shared with


def _fold(text: object) -> object:
    return text.strip().lower() if isinstance(text, str) else text


# A principal's name (as keys name it) or "domain:<domain>"
ShareEntry = Annotated[
    str,
    BeforeValidator(_fold),
    StringConstraints(pattern=r"^(domain:[a-z0-9._-]{1,64}|[a-z0-9][a-z0-9._:-]{0,127})$"),
]


@dataclass(frozen=True, slots=True)
class ContextAccess:
    """The owner (None: made before contexts had owners, so only admins) and the shares."""

    owner: str | None
    share_with: tuple[str, ...] = ()

    def admits(self, principal: Principal) -> bool:
        """May read, write or delete the whole document on the caller path."""
        return may_use(principal, self.owner, self.share_with)

    def encode(self) -> bytes:
        return orjson.dumps({"owner": self.owner, "share_with": self.share_with})

    @classmethod
    def decode(cls, raw: bytes) -> ContextAccess:
        """The stored record; b"" (a context from before owners) belongs to no one."""
        if not raw:
            return cls(None)
        fields = orjson.loads(raw)
        return cls(fields["owner"], tuple(fields["share_with"]))


def created_by(principal: Principal, share_with: list[str] | None = None) -> ContextAccess:
    """The access record of a context `principal` creates now."""
    return ContextAccess(principal.name, tuple(dict.fromkeys(share_with or ())))
