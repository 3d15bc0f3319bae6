"""API keys: minted once, shown once, stored only as a digest, verified in constant time.

A key reads ``ar_<key_id>_<secret>``: the id finds the record, the secret (32 random
bytes) is checked against the stored SHA-256 digest with `hmac.compare_digest`.
A fast hash is right here: the secret has 256 bits of entropy, so there is nothing
for a slow password hash to protect.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from agent_reach.model.keys import KeyRecord, Role

KEY_PREFIX = "ar"
_KEY = re.compile(r"^ar_([0-9a-f]{16})_([A-Za-z0-9_-]{43})$")
BOOTSTRAP_KEY_ID = "bootstrap-admin"  # the record made from AR_ADMIN_KEY
MIN_BOOTSTRAP_KEY_CHARS = 24  # an operator-chosen admin key shorter than this is refused


def mint_key(
    principal: str,
    domain: str | None,
    role: Role,
    now: float,
    capabilities: tuple[str, ...] = (),
) -> tuple[str, KeyRecord]:
    """A new key and its record (granting `capabilities`); the key string exists only in
    the return value."""
    key_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    record = KeyRecord(
        key_id, digest(secret), principal, domain, role, now, capabilities=capabilities
    )
    return f"{KEY_PREFIX}_{key_id}_{secret}", record


def bootstrap_record(admin_key: str, now: float) -> KeyRecord:
    """The record of the operator's first admin key (`AR_ADMIN_KEY`)."""
    if len(admin_key) < MIN_BOOTSTRAP_KEY_CHARS:
        raise ValueError(f"AR_ADMIN_KEY must be at least {MIN_BOOTSTRAP_KEY_CHARS} characters")
    return KeyRecord(BOOTSTRAP_KEY_ID, digest(admin_key), "admin", "admin", "admin", now)


def split_key(key: str) -> tuple[str, str]:
    """(key_id, secret) of a minted key, or (BOOTSTRAP_KEY_ID, key) for any other string."""
    match = _KEY.match(key)
    if match is None:
        return BOOTSTRAP_KEY_ID, key
    return match[1], match[2]


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def matches(record: KeyRecord, secret: str) -> bool:
    """Constant-time comparison of a presented secret with the stored digest."""
    return hmac.compare_digest(record.digest, digest(secret))
