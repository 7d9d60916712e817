"""What the metrics are computed from: study facts and one narrow row of integer codes per generation.

:mod:`mcqaudit.store.frames` fills these from a study file in DuckDB; tests and simulations build them in
memory. Pure dataclasses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd


@dataclass
class StudyInfo:
    """Study-level facts the metrics need besides the frames."""

    path: str
    created: str | None
    unaudited: bool
    arms: list[str]  # in ingest order (arms.ordinal); index = the frames' ``ai``
    orientations: list[str]  # index = the frames' ``oi``
    stored_control: str | None
    n_items: int  # index = the frames' ``ii``
    rows_by_arm: dict[str, int]
    judge_configs: dict[str, dict[str, Any]]  # fingerprint -> model, shape, temperature, standin
    arm_fingerprints: dict[str, dict[str, int]]  # arm -> fingerprint -> rows with an ok judge verdict
    n_reviews: int
    uniform_spot_check_rows: int
    parsers: list[str]  # strict, naive, user (when any row has a user letter), then the frameworks
    frameworks: list[str] = field(default_factory=list)


@dataclass
class StudyFrames:
    """One narrow row of integer codes per generation (see :mod:`mcqaudit.store.frames`).

    ``rows`` columns: ``ai ii oi sample gold_pos n_opt verdict pick_pos auto_verdict human strict_pos
    naive_pos user_pos fp uniform``. Verdict codes: 0 CORRECT, 1 INCORRECT, 2 OTHER, -1 none (ungraded;
    for ``human``, the review verdict: not reviewed). Positions are 0-based displayed letters, -1 for none.
    ``verdict`` and ``pick_pos`` are those of the chosen view (``verdicts``); ``auto_verdict`` is the
    automated one (judge, else pre-filter, else rule: the final verdict with reviews taken out).
    ``framework``: ``row`` (index into rows), ``parser`` (index into ``info.frameworks``), ``pos``.
    ``logprob``: ``row``, ``lp_pos`` (argmax of option_logprobs).
    """

    info: StudyInfo
    verdicts: str  # "final" or "judge"
    rows: pd.DataFrame
    framework: pd.DataFrame | None = None
    logprob: pd.DataFrame | None = None
