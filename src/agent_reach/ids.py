"""Identifiers: unguessable request ids without a system call per request.

`os.urandom` per request costs a syscall on the hot path; reading the kernel's
randomness 4 KiB at a time keeps request ids just as unguessable (they name task
records a caller may poll) at a fraction of the cost.
"""

from __future__ import annotations

import os

_CHUNK_BYTES = 4096  # 256 ids per read
_ID_BYTES = 16  # 128 bits: collisions are not a practical concern

_buffer = b""
_offset = 0


def new_request_id() -> str:
    """32 hex digits from the kernel's CSPRNG."""
    global _buffer, _offset
    if _offset + _ID_BYTES > len(_buffer):
        _buffer, _offset = os.urandom(_CHUNK_BYTES), 0
    start = _offset
    _offset += _ID_BYTES
    return _buffer[start:_offset].hex()
