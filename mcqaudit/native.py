"""Process settings that make large-array numpy fast on a small, busy machine (not part of the pure core:
they read the process's memory map and call into OpenBLAS through ctypes). The use cases that run the
metrics (:mod:`mcqaudit.app.report`) wrap them in :func:`fast_arrays`.

- :func:`one_blas_thread`: OpenBLAS's threads spin waiting for each other when other processes hold the
  cores; the bootstrap's products took 5–20× longer on two threads than on one on a loaded two-core machine,
  and at most ~1.5× less when it was idle.
- :func:`no_hugepages`: numpy asks the kernel for transparent huge pages on every large array
  (``madvise``); where the kernel compacts memory to serve them (``defrag = madvise``, as here) that cost the
  1,000,000-row report ~0.7 s of system time per run, more than its whole bootstrap.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Callable, Iterator

import numpy as np

_BLAS: tuple[Callable[[int], None], Callable[[], int]] | None | bool = False  # False: not looked up yet


def _openblas() -> tuple[Callable[[int], None], Callable[[], int]] | None:
    """numpy's OpenBLAS thread setter and getter, or None (another BLAS, another platform)."""
    global _BLAS
    if _BLAS is False:
        _BLAS = None
        try:
            with open("/proc/self/maps", encoding="utf-8") as f:
                libs = {
                    ln.split()[-1] for ln in f if "openblas" in ln.lower() and ln.rstrip().endswith(".so")
                }
            for path in sorted(libs):
                lib = ctypes.CDLL(path)
                for stem in ("scipy_openblas", "openblas"):
                    for suffix in ("64_", "_64_", ""):
                        set_ = getattr(lib, f"{stem}_set_num_threads{suffix}", None)
                        get_ = getattr(lib, f"{stem}_get_num_threads{suffix}", None)
                        if set_ is not None and get_ is not None:
                            set_.argtypes, get_.restype = [ctypes.c_int], ctypes.c_int
                            _BLAS = (set_, get_)
                            return _BLAS
        except (OSError, AttributeError):
            _BLAS = None
    return _BLAS if isinstance(_BLAS, tuple) else None


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block's matrix products on one OpenBLAS thread. On a busy two-core machine OpenBLAS's
    threads spin waiting for each other: the bootstrap's products took 5–20× longer on two threads than on
    one while other processes held the cores, and at most ~1.5× less when the machine was idle."""
    blas = _openblas()
    if blas is None:
        yield
        return
    set_, get_ = blas
    before = int(get_())
    set_(1)
    try:
        yield
    finally:
        set_(before)


@contextlib.contextmanager
def no_hugepages() -> Iterator[None]:
    """Within the block numpy does not ``madvise`` its large arrays into huge pages (restored after)."""
    setter = getattr(getattr(np, "_core", None), "multiarray", None)
    setter = getattr(setter, "_set_madvise_hugepage", None)
    if setter is None:
        yield
        return
    before = bool(setter(False))
    try:
        yield
    finally:
        setter(before)


@contextlib.contextmanager
def fast_arrays() -> Iterator[None]:
    """Both settings for a block of large-array work (the report's frames, metrics and bootstrap)."""
    with no_hugepages(), one_blas_thread():
        yield
