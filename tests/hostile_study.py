"""A study whose every user-supplied text is hostile: HTML, script, Markdown, links and LaTeX in generations,
questions, options, item ids, arm names, reviewer names, review notes and a spot-check queue's name: its rows
and labels, which ``tests.builders.build_hostile_study`` builds through the real path (``ingest_file``,
``grade`` against the stand-in judge, ``reviews import``, ``reviews queue``) for tests/test_hostile_dashboard.py.

Each payload would, if it were ever rendered as HTML or Markdown, leave a trace the test can see: a global
``window.__pwned``, a console line ``PWNED``, a dialog, an element marked ``hinj`` / text ``HBOLD``, a link
to ``hlink`` or ``phish``, code ``HCODE``, a Material icon ``bug_report`` or an emoji 😄 (issue 18: an arm
named ``[Session expired - log in again](http://127.0.0.1:8799/phish)`` was a live link on every page)."""

from __future__ import annotations

from typing import Any

# one line of each kind; the tests look for these traces
PAYLOAD = (
    "<img src=x class=hinj onerror=\"window.__pwned=1;console.log('PWNED');alert('PWNED')\">"
    "<script>window.__pwned=2;console.log('PWNED')</script>"
    "<svg class=hinj onload=\"window.__pwned=3;alert('PWNED')\"></svg>"
    "<b class=hinj>HTAG</b> **HBOLD** __HBOLD__ [HLINK](javascript:alert('PWNED')) "
    "<a class=hinj href=\"javascript:alert('PWNED')\">HA</a> $$HLATEX^2$$ `HCODE` :red[HRED] "
    "<iframe class=hinj src=\"javascript:alert('PWNED')\"></iframe>"
)
SHORT = "<img src=x class=hinj onerror=\"window.__pwned=9;alert('PWNED')\">**HBOLD**"
PHISH = "[Session expired - log in again](http://127.0.0.1:8799/phish)"
ARMS = (
    "base",
    "<b class=hinj>steer</b>**HBOLD** `HCODE`",
    f"ft $$HLATEX$$ [HLINK](javascript:alert(1)) {PHISH} www.hlink.com a@hlink.com :material/bug_report: :smile:",
)
QUEUE = f'{PHISH} **HBOLD** `HCODE` <img src=x class=hinj onerror="window.__pwned=8">'
REVIEWER = '<img src=x class=hinj onerror="window.__pwned=7">**HBOLD**rev'
NOTE = "note " + PAYLOAD


def rows(n_items: int = 24) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    items: list[dict[str, Any]] = []
    gens: list[dict[str, Any]] = []
    for i in range(n_items):
        options = [f"opt{i}-{k} " + (SHORT if k == 1 else f"<i class=hinj>{k}</i>") for k in range(4)]
        item_id = f"item{i:02d}<b class=hinj>x</b>**HBOLD**"
        question = f"Q{i}: which? " + PAYLOAD
        items.append({"item_id": item_id, "question": question, "options": options, "gold": i % 4})
        for orient in ("ABCD", "BCDA"):
            shown = [options["ABCD".index(c)] for c in orient]
            gold = "ABCD"[orient.index("ABCD"[i % 4])]
            for a, arm in enumerate(ARMS):
                pick = gold if (i + a) % 3 else "ABCD"[("ABCD".index(gold) + 1) % 4]
                generation = (
                    f"The answer is {pick}. " + PAYLOAD
                    if (i + a) % 2
                    else f"{PAYLOAD}\nAt first, maybe {pick}."
                )
                gens.append({
                    "item_id": item_id, "arm": arm, "question": question, "options": shown, "gold": gold,
                    "orientation": orient, "generation": generation, "parsed_letter": pick,
                    "prompt": question, "model": "m " + SHORT, "metadata": {"note": PAYLOAD, SHORT: "k"},
                })  # fmt: skip
    return items, gens



def labels(row_ids: list[str]) -> list[dict[str, str]]:
    """Reviews of ``row_ids`` with the hostile reviewer name and note, for ``reviews import``."""
    return [
        {"row_id": rid, "verdict": ("CORRECT", "INCORRECT", "OTHER")[k % 3], "note": NOTE, "reviewer": REVIEWER}
        for k, rid in enumerate(row_ids)
    ]
