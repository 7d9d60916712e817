"""The dashboard tests' fixture study (a helper module, not a test module; its pytest fixtures `ui_template` and
`ui_db` live in conftest.py): the rows of a small, deterministic generations file, which
``tests.builders.build_ui_study`` ingests and grades through the real path (``ingest_file`` + ``grade``
against the stand-in judge on 127.0.0.1), built once per session and copied per test (each test gets its
own file, so ``st.cache_resource`` keyed by path never leaks between tests). Also the AppTest helpers the
page tests share.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcqaudit.metrics.results import Report
from mcqaudit.store import Study

ARMS = ("base", "steered")
ORIENTATIONS = ("ABCD", "BCDA")
N_ITEMS = 12
XSS = "<script>alert(1)</script> <img src=x onerror=alert(1)> ![x](http://127.0.0.1:9/x.png) **B**"
XSS_ITEM = "q05"


def items() -> list[dict[str, Any]]:
    out = []
    for i in range(N_ITEMS):
        opts = [f"opt{i}-{k}" for k in "wxyz"]
        out.append(
            {
                "item_id": f"q{i:02d}",
                "question": f"Which is right for question {i}?",
                "options": opts,
                "gold": i % 4,
            }
        )
    return out


def _generation(arm: str, i: int, orient: str, gold: str, options: list[str]) -> tuple[str, str | None]:
    """(generation, the user's parsed letter) for one row: strict answers, prose the judge must read,
    refusals, and one generation full of markup."""
    wrong = "ABCD"[("ABCD".index(gold) + 1) % 4]
    first = "A"
    if arm == "base":
        if i % 4 == 3:
            return f"At first I hesitated, but the answer is {gold}. {options['ABCD'.index(gold)]}", "A"
        if i % 6 == 5 and orient == "BCDA":
            return wrong, wrong
        return gold, gold
    # steered: prose with misleading openers, refusals, the markup row
    if i == 5 and orient == "ABCD":
        return XSS, "B"
    if i % 3 == 0:
        return "I cannot answer that question.", "I"[0:0] or None
    if i % 3 == 1:
        return f"A valid choice here is {gold}, {options['ABCD'.index(gold)]}.", first
    return f"The answer is {wrong}.", wrong


def generations() -> list[dict[str, Any]]:
    rows = []
    for it in items():
        canon = it["options"]
        for orient in ORIENTATIONS:
            shown = [canon["ABCD".index(c)] for c in orient]
            gold = "ABCD"[orient.index("ABCD"[it["gold"]])]
            for arm in ARMS:
                gen, user = _generation(arm, int(it["item_id"][1:]), orient, gold, shown)
                rows.append(
                    {
                        "item_id": it["item_id"],
                        "arm": arm,
                        "question": it["question"],
                        "options": shown,
                        "gold": gold,
                        "orientation": orient,
                        "generation": gen,
                        "parsed_letter": user,
                    }
                )
    return rows


# --- AppTest helpers ----------------------------------------------------------------------------------------
BOOT = 200  # bootstrap resamples in the dashboard under test (and in the reports the tests compare with)


def _script(default: str) -> None:
    from mcqaudit.ui.app import main

    main(default=default)


def app(db: Path, page: str, *, reviewer: str | None = None, **state: Any) -> Any:
    """An AppTest of the dashboard opened on ``page`` for study ``db`` (not yet run)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_script, kwargs={"default": page}, default_timeout=60)
    at.session_state["db_path"] = str(db)
    if reviewer is not None:
        at.session_state["reviewer"] = reviewer
    for k, v in state.items():
        at.session_state[k] = v
    return at


def report_of(db: Path) -> Report:
    from mcqaudit.app.report import build_report

    return build_report(Study(db), n_boot=BOOT, seed=0)


def no_exceptions(at: Any) -> None:
    assert not at.exception, [e.value for e in at.exception]


def find(elements: Any, pred: Callable[[Any], bool]) -> Any:
    hits = [e for e in elements if pred(e)]
    assert hits, "no element matched"
    return hits[0]


def page_links(at: Any) -> list[tuple[str, str]]:
    """(label, url path) of every st.page_link on the page."""
    out: list[tuple[str, str]] = []

    def walk(node: Any) -> None:
        for child in getattr(node, "children", {}).values():
            if getattr(child, "type", "") == "page_link":
                out.append((child.proto.label, child.proto.page))
            walk(child)

    walk(at.main)
    return out
