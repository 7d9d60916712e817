"""What the metrics are computed from: study facts and one narrow row of integer codes per generation.

:mod:`mcqaudit.store.frames` fills these from a study file in DuckDB; tests and simulations build them in
memory. Pure dataclasses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


class Columns:
    """Equal-length named numpy columns: a frame without pandas (the CLI need not import it).

    Supports what the metrics read off a frame — ``len(t)`` (rows), ``t[name]`` (a numpy array) — so a
    :class:`pandas.DataFrame` with the same columns serves too (tests build those in memory).
    """

    def __init__(self, cols: Mapping[str, Any]) -> None:
        self.cols: dict[str, np.ndarray] = {k: np.asarray(v) for k, v in cols.items()}

    def __len__(self) -> int:
        return len(next(iter(self.cols.values()))) if self.cols else 0

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def __setitem__(self, name: str, values: Any) -> None:
        self.cols[name] = np.asarray(values)

    def __contains__(self, name: object) -> bool:
        return name in self.cols

    def pop(self, name: str) -> np.ndarray:
        return self.cols.pop(name)

    def take(self, index: np.ndarray) -> Columns:
        """The rows at ``index`` (a boolean mask or positions), as a new table."""
        return Columns({k: v[index] for k, v in self.cols.items()})

    def to_pandas(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.cols)


Frame = Union["pd.DataFrame", Columns]  # noqa: UP007 (a string forward reference inside the union)


def column(frame: Frame, name: str) -> np.ndarray:
    """Column ``name`` of a frame as a numpy array (no copy when it already is one)."""
    return np.asarray(frame[name])


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
    # arm -> ungraded rows the judge has not answered yet (a failed request is not pending)
    pending_by_arm: dict[str, int] = field(default_factory=dict)
    # `grade --panel` configurations, in the order they were added (index = the ``panel`` frame's ``judge``)
    panel_judges: list[str] = field(default_factory=list)
    # the people who reviewed rows, by name (index = the ``reviewers`` frame's ``reviewer``)
    reviewers: list[str] = field(default_factory=list)


@dataclass
class Grouping:
    """Each row's value of one metadata key (``report --by metadata.KEY``, docs/design.md §7 ``by_group``):
    ``codes`` (one per row of ``StudyFrames.rows``, in its order) index ``labels``, the key's distinct values
    as text; -1: the row's metadata lacks the key (or holds null there)."""

    key: str
    labels: list[str]
    codes: np.ndarray


@dataclass
class StudyFrames:
    """One narrow row of integer codes per generation (see :mod:`mcqaudit.store.frames`).

    ``rows`` columns: ``ai ii oi sample gold_pos n_opt verdict pick_pos auto_verdict human strict_pos
    naive_pos user_pos fp uniform truncated`` (``truncated``: boolean, docs/design.md §3). Verdicts are :class:`~mcqaudit.vocab.VerdictCode` values (0 CORRECT,
    1 INCORRECT, 2 OTHER, -1 NONE: ungraded; for ``human``, the review verdict: not reviewed). Positions are 0-based displayed letters, -1 for none.
    ``verdict`` and ``pick_pos`` are those of the chosen view (``verdicts``); ``auto_verdict`` is the
    automated one (judge, else pre-filter, else rule: the final verdict with reviews taken out).
    ``framework``: ``row`` (index into rows), ``parser`` (index into ``info.frameworks``), ``pos``.
    ``logprob``: ``row``, ``lp_pos`` (argmax of option_logprobs). ``panel`` (when the study has panel
    judges): one row per (row, panel judge) verdict record: ``row``, ``judge`` (index into
    ``info.panel_judges``), ``verdict`` (a VerdictCode; NONE when that judge's request failed), ``pick_pos``
    (-1: none, or a gold-shape judge). Rows a panel judge has no record for are not in it.
    ``reviewers`` (when two or more people reviewed rows): one row per (row, person) with the review of that
    person in force (their latest that no retraction withdraws): ``row``, ``reviewer`` (index into
    ``info.reviewers``), ``verdict`` (a VerdictCode), ``k`` (1 for the newest of the row's, which is in force,
    2 for the one before, …). Each is a :class:`Columns` (what
    :mod:`mcqaudit.store.frames` returns) or a :class:`pandas.DataFrame` with those columns.
    """

    info: StudyInfo
    verdicts: str  # "final" or "judge"
    rows: Frame
    framework: Frame | None = None
    logprob: Frame | None = None
    panel: Frame | None = None
    reviewers: Frame | None = None
    groups: dict[str, Grouping] = field(default_factory=dict)
    # framework, logprob, panel and reviewers still being read (:mod:`mcqaudit.store.frames` reads them beside
    # the metrics that need the rows alone): :meth:`ready` waits for them and sets them, once
    pending: Callable[[], Mapping[str, Frame | None]] | None = field(default=None, repr=False, compare=False)
    _ready_lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def ready(self) -> StudyFrames:
        """These frames with ``framework``, ``logprob``, ``panel`` and ``reviewers`` read (waits for them when
        they are still being read; safe from several threads)."""
        if self.pending is not None:
            with self._ready_lock:
                if self.pending is not None:
                    for name, frame in self.pending().items():
                        setattr(self, name, frame)
                    self.pending = None
        return self
