"""Building many Python objects at once (the rows a grade run targets, their rendered prompts).

CPython's cyclic garbage collector runs after every 700 net new container objects and, as they survive,
looks again at the older ones: building a list of 700,000 rows (a tuple and a list of options each) runs it
thousands of times over a heap that only grows. :func:`paused_gc` holds it off while such a list is built:
measured on a 1,000,000-row study, `grade --dry-run`'s fetch of the 727,770 rows that need the judge took
3.0 s with it running and 1.2 s without. Nothing built there is a cycle, so nothing is left for it to free.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic collector held off within (reference counting still frees everything else); on again after,
    when it was on before (nested, the outer one turns it back on)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
