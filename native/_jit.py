"""How every kernel in this package is compiled: Numba, cached on disk, lazily.

``numba.njit`` without signatures compiles on the first call for the argument types it sees;
``cache=True`` stores the machine code next to the source so later processes load it instead
of compiling. Importing a kernel module therefore compiles nothing. The public wrappers coerce
their inputs to the exact dtypes and layouts used by :func:`combee_fast.native.warmup`, so a
call after warm-up never meets a new signature.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])

MIN_ITEMS_PER_CHUNK = 16_384
"""Default least number of items per chunk: below it, threads cost more than they save."""


def kernel(*, parallel: bool = False, fastmath: bool | set[str] = False) -> Callable[[F], F]:
    """Decorator for a lazily compiled, disk-cached, GIL-free Numba kernel."""
    return numba.njit(cache=True, nogil=True, parallel=parallel, fastmath=fastmath)  # type: ignore[no-any-return]


def helper() -> Callable[[F], F]:
    """Decorator for a helper called only from other kernels (LLVM inlines it there)."""
    return numba.njit(cache=True, nogil=True)  # type: ignore[no-any-return]


def chunk_count(n_items: int, chunks: int | None = None, min_items: int = MIN_ITEMS_PER_CHUNK) -> int:
    """Chunks for a pass over ``n_items``: ``chunks`` if given, else one per thread, but never
    so many that a chunk holds fewer than ``min_items`` items.

    Every entry point runs a serial kernel when this is 1: a parallel kernel wakes all its
    threads even for one chunk, which costs a scheduler time slice (milliseconds) whenever the
    other cores are busy.
    """
    if chunks is not None:
        if chunks < 1:
            raise ValueError(f"chunks must be >= 1, got {chunks}")
        return chunks
    return max(1, min(numba.get_num_threads(), n_items // min_items))
