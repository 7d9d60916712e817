"""`mcqaudit orient`: schemes, templates, bad items files."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import run_cli, write_jsonl

ITEMS = [
    {
        "item_id": "s1",
        "question": "Which is a primary colour?",
        "options": ["Red", "Green-blue", "Brown", "Grey"],
        "gold": "A",
    },
    {
        "item_id": "s2",
        "question": "Is ice cold?",
        "options": ["Yes", "No"],
        "gold": 0,
        "metadata": {"topic": "x"},
    },
]


def test_orient_cyclic(tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", ITEMS)
    out = tmp_path / "p.jsonl"
    p = run_cli("orient", str(items), "--out", str(out))
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["orientation"] for r in rows] == ["ABCD", "BCDA", "CDAB", "DABC", "AB", "BA"]
    assert [r["gold"] for r in rows] == ["A", "D", "C", "B", "A", "B"]
    for r in rows:
        assert r["options"][ord(r["gold"]) - 65] in ("Red", "Yes")
        assert set(r) >= {"item_id", "question", "options", "gold", "orientation", "prompt"}
        assert "arm" not in r and "generation" not in r
    assert "B. Green-blue" in rows[0]["prompt"] and "A. Green-blue" in rows[1]["prompt"]
    assert rows[4]["metadata"] == {"topic": "x"}


def test_orient_schemes_and_template(tmp_path: Path) -> None:
    items = write_jsonl(tmp_path / "items.jsonl", ITEMS)
    out = tmp_path / "p.jsonl"
    assert run_cli("orient", str(items), "--out", str(out), "--scheme", "all").returncode == 0
    assert len(out.read_text().splitlines()) == 24 + 2
    tmpl = tmp_path / "t.txt"
    tmpl.write_text("Q: {question}\n{options}\nLetter:")
    assert (
        run_cli(
            "orient",
            str(items),
            "--out",
            str(out),
            "--scheme",
            "random:3",
            "--seed",
            "7",
            "--template",
            str(tmpl),
        ).returncode
        == 0
    )
    first = out.read_text()
    assert (
        run_cli(
            "orient",
            str(items),
            "--out",
            str(out),
            "--scheme",
            "random:3",
            "--seed",
            "7",
            "--template",
            str(tmpl),
        ).returncode
        == 0
    )
    assert out.read_text() == first
    rows = [json.loads(x) for x in first.splitlines()]
    assert len(rows) == 3 + 2 and rows[0]["prompt"].startswith("Q: Which is a primary colour?\nA. ")
    p = run_cli("orient", str(items), "--out", str(out), "--scheme", "bogus")
    assert p.returncode == 2 and "unknown scheme" in p.stderr


def test_orient_refuses_all_above_six(tmp_path: Path) -> None:
    items = write_jsonl(
        tmp_path / "items.jsonl", [{"item_id": "big", "question": "?", "options": list("abcdefg"), "gold": 0}]
    )
    p = run_cli("orient", str(items), "--out", str(tmp_path / "p.jsonl"), "--scheme", "all")
    assert p.returncode == 2 and "refused above 6 options" in p.stderr


def test_orient_bad_items(tmp_path: Path) -> None:
    items = write_jsonl(
        tmp_path / "items.jsonl",
        [
            ITEMS[0],
            "{x",
            {"item_id": "d", "question": "?", "options": ["a", "a"], "gold": "A"},
            {"item_id": "e", "question": "?", "options": ["a", "b"], "gold": "C"},
        ],
    )
    p = run_cli("orient", str(items), "--out", str(tmp_path / "p.jsonl"))
    assert p.returncode == 1
    assert "items.jsonl:2: line: not valid JSON" in p.stderr
    assert "items.jsonl:3: options: duplicate option texts: a" in p.stderr
    assert "items.jsonl:4: gold: gold 'C' is not a letter in A..B" in p.stderr
    assert not (tmp_path / "p.jsonl").exists()
