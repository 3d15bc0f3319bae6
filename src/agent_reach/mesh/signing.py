"""The coordinators' signing keys for delegation tokens: Ed25519, rotated, shared.

Time is cut into epochs of `rotate_s`; the first coordinator to sign in an epoch makes
its key and stores it atomically (`KeySetStore.put_new`), every other coordinator of
the same backend adopts that one, so any of them verifies any token. A token verifies
with its epoch's key while that epoch is the current or the previous one: keys rotate
out after two epochs, and a token replayed after that is refused. The public keys are
served at `GET /.well-known/jwks.json` for agents to verify their deliveries.

The private key lives in the shared store, as the context tokens' HMAC key does: the
store is inside the trust boundary of the coordinators.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from typing import Any

import orjson
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from agent_reach.backends.protocols import KeySetStore
from agent_reach.clock import Clock

STORE_PREFIX = "mesh-signing:"
ALGORITHM = "EdDSA"  # Ed25519: the fastest signature `cryptography` offers, 64-byte signatures


@dataclass(frozen=True, slots=True)
class SigningKey:
    """One epoch's key: its id (`<epoch>.<random>`) and the key pair."""

    kid: str
    epoch: int
    private: Ed25519PrivateKey
    public: Ed25519PublicKey

    def public_jwk(self) -> dict[str, Any]:
        raw = self.public.public_bytes(Encoding.Raw, PublicFormat.Raw)
        return {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": _b64(raw),
            "kid": self.kid,
            "use": "sig",
            "alg": ALGORITHM,
        }


class SigningKeys:
    """This backend's signing key of each epoch, made once and shared."""

    def __init__(self, store: KeySetStore, clock: Clock, rotate_s: float) -> None:
        self._store = store
        self._clock = clock
        self.rotate_s = rotate_s
        self._by_epoch: dict[int, SigningKey] = {}

    def epoch(self) -> int:
        return int(self._clock.wall() // self.rotate_s)

    def current(self) -> SigningKey | None:
        """The current epoch's key when it is held already (no wait); else None."""
        return self._by_epoch.get(self.epoch())

    async def signing_key(self) -> SigningKey:
        """The current epoch's key: held, adopted from the store, or made and stored."""
        epoch = self.epoch()
        key = self._by_epoch.get(epoch)
        if key is None:
            key = await self._key_of(epoch, create=True)
            assert key is not None  # created when missing
        return key

    async def verifying_key(self, kid: str) -> Ed25519PublicKey | None:
        """The public key `kid` names, while its epoch is the current or the previous one."""
        epoch_text, _, _ = kid.partition(".")
        if not epoch_text.isdigit() or int(epoch_text) not in (self.epoch(), self.epoch() - 1):
            return None
        key = self._by_epoch.get(int(epoch_text)) or await self._key_of(int(epoch_text))
        return key.public if key is not None and key.kid == kid else None

    async def jwks(self) -> dict[str, Any]:
        """The public keys a token may be verified with now (current and previous epoch)."""
        await self.signing_key()
        keys = [
            key.public_jwk()
            for epoch in (self.epoch(), self.epoch() - 1)
            if (key := self._by_epoch.get(epoch) or await self._key_of(epoch)) is not None
        ]
        return {"keys": keys}

    async def _key_of(self, epoch: int, *, create: bool = False) -> SigningKey | None:
        name = f"{STORE_PREFIX}{epoch}"
        if create:
            private = Ed25519PrivateKey.generate()
            made = {"kid": f"{epoch}.{secrets.token_hex(4)}", "d": _b64(_raw(private))}
            # Kept for three epochs: the current, the next (as the previous), and slack.
            stored = await self._store.put_new(name, orjson.dumps(made), 3 * self.rotate_s)
        else:
            found = await self._store.get(name)
            if found is None:
                return None
            stored = found
        document = orjson.loads(stored)
        private = Ed25519PrivateKey.from_private_bytes(_unb64(document["d"]))
        key = SigningKey(document["kid"], epoch, private, private.public_key())
        self._by_epoch[epoch] = key
        for old in [e for e in self._by_epoch if e < epoch - 1]:
            del self._by_epoch[old]
        return key


def _raw(private: Ed25519PrivateKey) -> bytes:
    return private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
