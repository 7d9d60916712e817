"""Names reach the terminal as the characters they are (issue 18): an arm, model, reviewer or queue name with
a bidi override, an escape sequence or a zero-width character is printed escaped (``\\u202e``, ``\\x1b``) by
every CLI output that shows it — ingest, info, reviews, grade summaries, errors — through one helper
(``mcqaudit.terminal.visible``), never raw."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcqaudit.terminal import visible
from tests.helpers import run_cli

RLO, ESC, ZWSP, NBSP, TAG_A = "\u202e", "\x1b", "\u200b", "\u00a0", "\U000e0041"
# ingest refuses an arm name with an invisible character (U+202E, U+200B: it would look like another arm), so
# the arms here carry escape sequences, which it keeps; bidi overrides are in the model, queue and reviewer
ARMS = ["base", f"esc{ESC}[2Jcls", f"title{ESC}]0;pwned{ESC}\\"]
RAW = (RLO, ESC, ZWSP)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("base", "base"),
        (f"evil{RLO}esab", "evil\\u202eesab"),
        (f"{ESC}[31mred", "\\x1b[31mred"),
        (f"zw{ZWSP}", "zw\\u200b"),
        (f"a{NBSP}b", "a\\xa0b"),
        (f"tag{TAG_A}", "tag\\U000e0041"),
        ("line\u2028sep", "line\\u2028sep"),
        ("Zürich 東京 🙂 ×", "Zürich 東京 🙂 ×"),
    ],
)
def test_visible_escapes_what_a_terminal_acts_on(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_a_message_keeps_its_own_line_breaks_a_name_does_not() -> None:
    assert visible("one\ntwo\tthree") == "one\ntwo\tthree"
    assert visible("one\ntwo", keep="") == "one\\x0atwo"


@given(st.text())
def test_what_visible_prints_is_printable(text: str) -> None:
    shown = visible(text, keep="")
    assert shown.isprintable()
    assert visible(shown, keep="") == shown  # nothing is escaped twice
    if text.isprintable():
        assert shown == text


def mcqaudit(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)


def assert_shown_escaped(proc: subprocess.CompletedProcess[str], *names: str) -> None:
    out = proc.stdout + proc.stderr
    assert not any(ch in out for ch in RAW), ascii(out)
    for name in names:
        assert visible(name, keep="") in out, (name, out)


@pytest.fixture(scope="module")
def hostile_names(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("names")
    rows = [
        {"item_id": f"q{i}", "arm": arm, "question": "Capital of France?", "options": ["Paris", "Rome"],
         "gold": "A", "generation": "A" if i % 2 else "I think it is Rome", "model": f"m{RLO}dom"}
        for arm in ARMS for i in range(4)
    ]  # fmt: skip
    gen = tmp / "gen.jsonl"
    gen.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    db = tmp / "study.duckdb"
    ingest = mcqaudit("ingest", str(gen), "--db", str(db))
    assert ingest.returncode == 0, ingest.stderr
    assert_shown_escaped(ingest, *ARMS[1:])
    return db


def test_info_shows_names_escaped(hostile_names: Path) -> None:
    proc = mcqaudit("info", "--db", str(hostile_names))
    assert proc.returncode == 0, proc.stderr
    assert_shown_escaped(proc, *ARMS[1:])  # the arms line and every table


def test_reviews_queue_names_are_escaped(hostile_names: Path) -> None:
    name, who = f"spot{RLO}kcehc", f"ann{ESC}]0;pwned{ESC}\\"
    drawn = mcqaudit("reviews", "queue", "--db", str(hostile_names), "--size", "4", "--name", name,
                     "--reviewer", who)  # fmt: skip
    assert drawn.returncode == 0, drawn.stderr
    assert_shown_escaped(drawn, *ARMS[1:])
    listed = mcqaudit("reviews", "queues", "--db", str(hostile_names))
    assert listed.returncode == 0, listed.stderr
    assert_shown_escaped(listed, name, who, *ARMS[1:])


def test_grade_summaries_and_errors_show_names_escaped(hostile_names: Path) -> None:
    unknown = mcqaudit("grade", "--db", str(hostile_names), "--no-judge", "--arm", f"nope{RLO}")
    assert unknown.returncode == 2 and "unknown arm" in unknown.stderr
    assert_shown_escaped(unknown, f"nope{RLO}", *ARMS[1:])
    graded = mcqaudit("grade", "--db", str(hostile_names), "--no-judge", "--arm", ARMS[1])
    assert graded.returncode == 0, graded.stderr
    assert_shown_escaped(graded)


def _column(out: str, title: str, k: int, starts: int) -> list[str]:
    """Column ``k`` of the table titled ``title`` in ``out``, one value per table row: a table row begins on
    the line where column ``starts`` has text, and a value folded onto the lines below it is joined back."""
    lines = out.split(title, 1)[1].splitlines()[1:]
    values: list[str] = []
    for line in lines:
        if line.startswith("└"):
            break
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells[starts]:
            values.append(cells[k])
        else:
            values[-1] += cells[k]
    return values


def test_info_tables_fold_long_names_never_cut_them(tmp_path: Path) -> None:
    """Two steered arms named alike for 27 characters: in an 80-column terminal the tables' arm column is
    narrower than the names, and a cut name ("llama-3.1-8b+steer-hones…") would read the same for both. Every
    name folds onto the next line of its cell instead, whole."""
    arms = ["llama-3.1-8b", "llama-3.1-8b+steer-honesty-a0.5", "llama-3.1-8b+steer-honesty-a1.0"]
    rows = [
        {"item_id": f"q{i}", "arm": arm, "question": "Capital of France?", "options": ["Paris", "Rome"],
         "gold": "A", "generation": "A" if i % 2 else "I think it is Rome"}
        for arm in arms for i in range(4)
    ]  # fmt: skip
    gen = tmp_path / "gen.jsonl"
    gen.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    db = tmp_path / "study.duckdb"
    assert mcqaudit("ingest", str(gen), "--db", str(db)).returncode == 0
    proc = run_cli("info", "--db", str(db), env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    assert "…" not in proc.stdout
    by_source = _column(proc.stdout, "verdicts by source", 0, starts=1)
    assert sorted(set(by_source)) == arms and len(by_source) == 6  # two sources an arm, each name whole
    flagged = [a for a in _column(proc.stdout, "diagnostics", 1, starts=0) if a]
    assert set(flagged) <= set(arms) and set(arms[1:]) <= set(flagged)
