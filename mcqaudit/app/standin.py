"""Serving the stand-in judge (`mcqaudit standin-judge`): a documented heuristic behind the judge's API,
for demos and tests, never an LLM (:mod:`mcqaudit.standin.server`, docs/standin.md).

What the faces call, so that they import nothing below ``app/``.
"""

from __future__ import annotations

from mcqaudit.standin.server import BatchKnobs, StandinOptions, serve

__all__ = ["BatchKnobs", "StandinOptions", "serve"]
