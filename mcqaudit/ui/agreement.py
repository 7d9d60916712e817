"""What the Review page shows and offers about agreement (issue 21), apart from the page itself: every judge's
verdict of the row on screen (the primary judge and each panel judge, `grade --panel`), the "Reviewers"
filter (rows whose reviewers disagree, or settled), and the queue form's second-review options.

Blind mode hides all of it that tells a verdict: the page draws the judges' table only where it draws the
judge (:func:`render_judges`), and a second review's queue is opened blind. Replies are untrusted text: they
are shown as dataframe cells (plain text), never as Markdown.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from mcqaudit.review.filters import REVIEWER_FILTER_VALUES, REVIEWERS_DISAGREE
from mcqaudit.review.queues import SECOND_REVIEW
from mcqaudit.ui import state

NOT_GRADED = "not graded yet"
ANY_ROW = "(any row)"


def judges_frame(row: Mapping[str, Any]) -> pd.DataFrame | None:
    """The row's judges as a table (the primary first): role, model, verdict, letter, whether the verdict is
    the primary's, status, reply and fingerprint; None when no panel judge is listed (a study with one judge
    shows nothing more than today)."""
    judges = list(row.get("judges") or [])
    if not any(j["role"] == "panel" for j in judges):
        return None
    primary = next((j["verdict"] for j in judges if j["role"] == "primary" and j["status"] == "ok"), None)

    def agrees(j: Mapping[str, Any]) -> str:
        if j["role"] == "primary" or j["status"] != "ok" or primary is None:
            return "—"
        return "same" if j["verdict"] == primary else "differs"

    return pd.DataFrame(
        {
            "judge": [j["role"] for j in judges],
            "model": [
                (j["model"] or "?") + (" (stand-in, not an LLM)" if j["standin"] else "") for j in judges
            ],
            "verdict": [j["verdict"] or "—" for j in judges],
            "letter": [j["letter"] or "—" for j in judges],
            "vs primary": [agrees(j) for j in judges],
            "status": [j["status"] or NOT_GRADED for j in judges],
            "reply": [j["reply"] if j["reply"] is not None else "" for j in judges],
            "fingerprint": [j["fingerprint"] for j in judges],
        }
    )


def render_judges(row: Mapping[str, Any]) -> None:
    """Under the judge's verdict: every judge's verdict and letter for this row, when the study has a panel
    judge (drawn only where the page shows the judge, so blind mode hides it)."""
    df = judges_frame(row)
    if df is None:
        return
    differ = int((df["vs primary"] == "differs").sum())
    panel = int((df["judge"] == "panel").sum())
    st.markdown(
        f"**Every judge** (the primary, whose verdict is final unless reviewed, and {panel} panel "
        f"judge{'s' if panel != 1 else ''}"
        + (f"; {differ} differ{'s' if differ == 1 else ''} from the primary" if differ else "")
        + ")"
    )
    st.dataframe(df, hide_index=True, key="judges")


def render_reviewers_filter(on_change: Callable[[str], None]) -> None:
    """The Review filter on what the row's reviewers said (:data:`REVIEWER_FILTER_VALUES`)."""
    st.selectbox(
        "Reviewers",
        [None, *REVIEWER_FILTER_VALUES],
        format_func=lambda v: ANY_ROW if v is None else v,
        key=state.bind(state.F_REVIEWERS),
        on_change=on_change,
        args=(state.F_REVIEWERS,),
        help=f"{REVIEWERS_DISAGREE}: two or more people reviewed the row and their latest verdicts differ, and "
        "no one has settled it yet: a third person's review settles it (the latest review is the final "
        "verdict). settled: they differed, and a later review by someone else decided.",
    )


@dataclass(frozen=True)
class SecondReview:
    """The queue form's second-review options: whose rows, and which queue's (None: any)."""

    of_reviewer: str | None
    of_queue: int | None

    def options(self, strategy: str) -> dict[str, Any]:
        """What a draw with ``strategy`` takes of them: both for a second review, nothing otherwise."""
        if strategy != SECOND_REVIEW:
            return {}
        return {"of_reviewer": self.of_reviewer, "of_queue": self.of_queue}


def second_review_inputs(reviewers: Mapping[str, int], queues: pd.DataFrame) -> SecondReview:
    """The queue form's second-review options (used with the second_review strategy only): whose rows
    (``reviewers``: each person with rows they alone reviewed, and how many), and which queue's; neither
    draws from every row one person alone reviewed."""
    c1, c2 = st.columns(2)
    names = list(reviewers)
    who = c1.selectbox(
        "Second review of",
        [None, *names],
        format_func=lambda n: "(anyone's rows)" if n is None else f"{n} ({reviewers[n]} rows)",
        key="q_of_reviewer",
        help=f"{SECOND_REVIEW} only: the rows this person alone has reviewed (how many, in brackets); the queue "
        "opens in blind mode.",
    )
    labels = {int(r.queue_id): f"#{r.queue_id} {r.name}" for r in queues.itertuples()}
    queue = c2.selectbox(
        "Of queue",
        [None, *labels],
        format_func=lambda q: "(any rows)" if q is None else labels[q],
        key="q_of_queue",
        help=f"{SECOND_REVIEW} only: draw only from this queue's reviewed rows.",
    )
    return SecondReview(who, queue)


def is_second_review(queues: pd.DataFrame, queue_id: int | None) -> bool:
    """Whether ``queue_id`` is a second_review queue of the listed ``queues``."""
    if queue_id is None or not len(queues):
        return False
    hit = queues.loc[queues["queue_id"] == int(queue_id), "strategy"]
    return bool(len(hit)) and str(hit.iloc[0]) == SECOND_REVIEW


def second_review_notice(queues: pd.DataFrame, queue_id: int | None) -> None:
    """Above a second review's rows: what counts as done, and a warning while blind mode is off."""
    if not is_second_review(queues, queue_id):
        return
    text = "A second review: a row counts as reviewed once a second person has reviewed it."
    if st.session_state.get(state.BLIND):
        st.caption(text + " Blind mode keeps the first review hidden until you have decided.")
    else:
        st.warning(
            text
            + " Turn on **Blind mode** (sidebar) to keep the first review and the judge hidden until you "
            "have decided.",
            icon=":material/visibility_off:",
        )


def drawn(strategy: str) -> None:
    """After a draw: a second review is worked blind."""
    if strategy == SECOND_REVIEW:
        state.set_value(state.BLIND, True)
