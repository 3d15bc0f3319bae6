"""The C allocator, set for big answers: on glibc, a fixed mmap threshold.

glibc serves an allocation of M_MMAP_THRESHOLD bytes or more (128 KiB at start) with
its own mmap, returned to the kernel when freed. But the threshold is dynamic: freeing
such a block raises it to the block's size (up to 32 MiB on 64-bit), so after the first
2 MB answer is freed, every later one is carved from the heap, where freed 2 MB holes
between live small objects cannot be returned. 150 distinct 2 MB answers grew the
coordinator by 170 MB that never came back (bench/memory.py). Setting the threshold
explicitly turns the adjustment off (mallopt(3)): every buffer of 128 KiB or more, an
agent's answer read off the socket, its JSON for the caller, is mapped and unmapped on
its own. Other C libraries (musl, macOS) are left as they are; so is an operator's own
MALLOC_MMAP_THRESHOLD_.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform

import structlog

log = structlog.get_logger("agent_reach.server")

M_MMAP_THRESHOLD = -3  # <malloc.h>
# glibc's own initial threshold (DEFAULT_MMAP_THRESHOLD_MIN), now fixed: smaller would map
# many medium buffers (a syscall each), larger would let 2 MB answers into the heap again.
MMAP_THRESHOLD_BYTES = 128 * 1024
_OPERATOR_SETTING = "MALLOC_MMAP_THRESHOLD_"


def fix_mmap_threshold() -> bool:
    """Fix glibc's mmap threshold at MMAP_THRESHOLD_BYTES; True when it was set here.

    Does nothing (False) on another C library, or when the operator set the threshold
    through the environment (that setting already fixes it)."""
    if platform.libc_ver()[0] != "glibc" or _OPERATOR_SETTING in os.environ:
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if not libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES):
        log.warning("mmap_threshold_not_set", errno=ctypes.get_errno())
        return False
    return True
