"""Ingest's fast path against its line-level diagnosis (store/loading.py): on files of mixed good and bad rows,
in JSONL, CSV and Parquet, the one-pass flag marks exactly the rows the diagnosis gives a reason for, and the
values the fast path would store are the ones the line-level path stores."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import mcqaudit.app.ingest as ingest_mod
from mcqaudit.app.ingest import ingest_file
from mcqaudit.ingest.jsonl import JsonlLines, scan_lines
from mcqaudit.store import Study
from mcqaudit.store import loading as sql
from mcqaudit.store.loader import Loader
from mcqaudit.store.schema import MIGRATIONS
from tests.helpers import BAD_LINES, row

VALUE_COLUMNS = (
    "line, item_id, arm, question, options, n_opt, gold_letter, generation, given_orientation, prompt, sample, "
    "user_letter, option_logprobs::VARCHAR, model, metadata::VARCHAR"
)

GOOD: list[dict] = [
    row(item_id="g1"),
    row(item_id="g2", options={"A": "Paris", "B": "Rome"}, gold=1, generation="B. Rome"),
    row(item_id="g3", arm="steered", generation='Ünïcödé 東京 «quoted» \\ "esc" \t tab', sample=3),
    row(item_id="g4", orientation=None, prompt=None, model=None, metadata=None, parsed_letter=None),
    row(item_id="g5", metadata={"k": [1, {"z": "ü"}]}, option_logprobs={"A": -0.5, "B": -1}, model="m"),
    row(item_id="g6", generation="", parsed_letter="c", prompt="P\r\nQ"),
    row(item_id="g7", options=["x", "y", "z", "w", "v"], gold="e", generation="The answer is (E)"),
]
# JSONL only: what no table format can carry
JSON_ONLY_BAD = [
    json.dumps(row(item_id="n1", generation=None)),  # null for a required field
    json.dumps(row(item_id="n2", arm=None)),
    json.dumps(row(item_id="n3", options=None)),
    json.dumps(row(item_id="n4", sample=2.5)),
    json.dumps(row(item_id="n5", gold=1e3)),
    "",  # a blank line
    "   ",
    '{"item_id": "t1", "arm": "a"} trailing',
    "[]",
    '"just a string"',
]


def _mixed_jsonl(path: Path) -> Path:
    lines: list[str] = []
    bad = [t for t, _, _ in BAD_LINES] + JSON_ONLY_BAD
    for i in range(max(len(GOOD), len(bad))):
        if i < len(GOOD):
            lines.append(json.dumps(GOOD[i], ensure_ascii=i % 2 == 0))
        if i < len(bad):
            lines.append(bad[i])
    path.write_bytes(("\r\n".join(lines) + "\n").encode())
    return path


def _clean_jsonl(path: Path) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in GOOD) + "\n")
    return path


def _csv_rows() -> list[dict]:
    def c(**kw) -> dict:
        r = {k: (json.dumps(v) if isinstance(v, (list, dict)) else v) for k, v in row(**kw).items()}
        return {k: ("" if v is None else str(v)) for k, v in r.items()}

    return [
        c(item_id="c1"),
        c(item_id="c2", options="not json"),
        c(item_id="c3", gold="E"),
        c(item_id="c4", gold="9"),
        c(item_id="c5", options={"A": "Paris", "B": "Rome"}, gold="1", generation="B"),
        c(item_id="c6", question=""),
        c(item_id="c7", options=["a", 1]),
        c(item_id="c8", generation=""),
        c(item_id="c9", options={"B": "x", "A": "y"}),
        {**c(item_id="c10"), "sample": "-1"},
        {**c(item_id="c11"), "sample": "one"},
        {**c(item_id="c12"), "metadata": "[1]"},
        {**c(item_id="c13"), "option_logprobs": '{"A": "high"}'},
        {**c(item_id="c14"), "orientation": "ABCE"},
        {**c(item_id="c15"), "parsed_letter": "F"},
        {**c(item_id="c16", generation="Ünïcödé 東京"), "metadata": '{"k": "ü"}', "sample": "2"},
        {**c(item_id=""), "arm": "  "},
    ]


def _parquet_frame() -> pd.DataFrame:
    rows = []
    for i, (opts, gold, sample, question, meta) in enumerate(
        [
            (["Paris", "Rome"], "A", 0, "Q?", None),
            (["Paris", "Rome"], "E", 0, "Q?", None),
            (["Paris"], "A", 0, "Q?", None),
            (["Paris", "Paris"], "A", 0, "Q?", None),
            (["Paris", "Rome"], "B", -1, "Q?", None),
            (["Paris", "Rome"], "A", 0, None, None),
            (["Paris", "Rome"], "A", 0, "Q?", "not an object"),
            (["Größe", "東京", "x"], "c", 2, "Ü?", None),
            ([], "A", 0, "Q?", None),
        ]
    ):
        rows.append(
            {
                "item_id": f"p{i}",
                "arm": "base",
                "question": question,
                "options": opts,
                "gold": gold,
                "generation": "A" if i % 2 else "I pick Rome",
                "sample": sample,
                "metadata": meta,
            }
        )
    return pd.DataFrame(rows)


def _values(con: duckdb.DuckDBPyConnection, where: str = "") -> dict[int, tuple]:
    return {r[0]: r for r in con.execute(f"SELECT {VALUE_COLUMNS} FROM parsed {where}").fetchall()}


def _study_connection() -> duckdb.DuckDBPyConnection:
    """An in-memory connection with a study's tables (flagged() resolves a clean file's items)."""
    con = duckdb.connect()
    for migration in MIGRATIONS:
        con.execute(migration)
    return con


def _diagnosed(con: duckdb.DuckDBPyConnection) -> tuple[set[int], dict[int, tuple]]:
    sql.create_errors(con)
    sql.flagged(con, None)
    sql.diagnose(con, None)
    sql.typed_rows(con)
    errs = {int(r[0]) for r in con.execute("SELECT DISTINCT line FROM errs").fetchall()}
    return errs, _values(con)


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_flag_and_reasons_agree_and_values_match(tmp_path: Path, kind: str) -> None:
    con = _study_connection()
    if kind == "jsonl":
        path = _mixed_jsonl(tmp_path / "mixed.jsonl")
        counted: list[int] = [scan_lines(path)[0]]
        # the fast path would hand a file with blank lines to the line-level path; read the rest of it so
        # that the flag is compared on every line it does stage
        nonblank = tmp_path / "nonblank.jsonl"
        nonblank.write_bytes(b"\n".join(ln for ln in path.read_bytes().split(b"\n") if ln.strip()) + b"\n")
        counted.append(scan_lines(nonblank)[0])
        assert sql.stage_jsonl_fast(con, str(nonblank), lambda: counted[1], None)
        assert not sql.stage_jsonl_fast(
            con, str(path), lambda: counted[0], None
        )  # blank lines: not one to one
        assert sql.stage_jsonl_fast(con, str(nonblank), lambda: counted[1], None)
        sql.create_errors(con)
        n_flagged = sql.flagged(con, None)
        fast_bad = {int(r[0]) for r in con.execute("SELECT line FROM parsed WHERE bad").fetchall()}
        fast_values = _values(con, "WHERE NOT bad")
        # the line-level path over the same file
        slow = _study_connection()
        Loader(slow).stage_lines(JsonlLines(nonblank))
        errs, slow_values = _diagnosed(slow)
    else:
        path = tmp_path / f"mixed.{kind}"
        if kind == "csv":
            pd.DataFrame(_csv_rows()).to_csv(path, index=False)
            sql.stage_csv(con, str(path))
        else:
            _parquet_frame().to_parquet(path)
            sql.stage_parquet(con, str(path))
        sql.create_errors(con)
        n_flagged = sql.flagged(con, None)
        fast_bad = {int(r[0]) for r in con.execute("SELECT line FROM parsed WHERE bad").fetchall()}
        fast_values = _values(con, "WHERE NOT bad")
        errs, slow_values = _diagnosed(con)
    assert n_flagged == len(fast_bad) > 0
    assert fast_bad == errs  # every flagged row has a reason, and every reason was flagged
    assert fast_values and fast_values == slow_values  # the same stored values for the good rows


def _snapshot(study: Study) -> dict[str, list]:
    return {
        "gen_rows": study.query(
            "SELECT * EXCLUDE (ingest_id, metadata, option_logprobs), metadata::VARCHAR, option_logprobs::VARCHAR "
            "FROM gen_rows ORDER BY row_id"
        ),
        "parser_letters": study.query("SELECT * FROM parser_letters ORDER BY row_id, parser"),
        "items": study.query("SELECT * EXCLUDE (metadata) FROM items ORDER BY item_id"),
        "rejected": study.query("SELECT line, field, reason, raw FROM rejected_rows ORDER BY line, field"),
    }


@pytest.mark.parametrize("make", [_clean_jsonl, _mixed_jsonl], ids=["clean", "mixed"])
def test_fast_and_line_level_ingest_store_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make
) -> None:
    src = make(tmp_path / "g.jsonl")
    fast = Study(tmp_path / "fast.duckdb", create=True)
    res_fast = ingest_file(fast, src, skip_bad=True)
    monkeypatch.setattr(ingest_mod, "_stage_jsonl_fast", lambda *a, **k: False)
    slow = Study(tmp_path / "slow.duckdb", create=True)
    res_slow = ingest_file(slow, src, skip_bad=True)
    assert (res_fast.loaded, res_fast.rejected) == (res_slow.loaded, res_slow.rejected)
    assert res_fast.loaded == len(GOOD)
    assert [str(p) for p in res_fast.problems] == [str(p) for p in res_slow.problems]
    assert _snapshot(fast) == _snapshot(slow)


def test_cross_row_problems_on_the_fast_path_keep_lines_and_raw_text(tmp_path: Path) -> None:
    """A file whose every line is well-formed takes the fast path to the end; problems between rows still
    name their lines, and --skip-bad keeps each rejected line's text."""
    rows = [
        row(),
        row(arm="x", gold="B"),
        row(),
        row(generation="C"),
        row(arm="y", options=["Paris", "Oslo", "Rome", "Madrid"]),
    ]
    src = tmp_path / "g.jsonl"
    src.write_text("\ufeff" + "\r\n".join(json.dumps(r) for r in rows) + "\r\n")
    study = Study(tmp_path / "s.duckdb", create=True)
    res = ingest_file(study, src, skip_bad=True)
    assert (res.loaded, res.rejected, res.duplicates_in_file) == (1, 3, 1)
    got = study.query("SELECT line, field, raw FROM rejected_rows ORDER BY line")
    assert [(g[0], g[1]) for g in got] == [(2, "gold"), (4, "generation"), (5, "options")]
    assert [g[2] for g in got] == [json.dumps(rows[1]), json.dumps(rows[3]), json.dumps(rows[4])]
    assert "first seen at line 1" in str(res.problems[-1])


TRICKY = [
    "(A)(B)",
    "(A) then (B) and finally (C",
    "answer: A: B",
    "choice:\n\n C and :D",
    "A B C",
    "I think A. Then B, or maybe J.",
    "Ça (B) 東京 (C) 答案是D",
    "x:A:B:",
    "(AB) (c) (D)",
    "The answer is (B); (C) would be wrong",
    "Answer: Answer: B",
    "",
    "no letters here",
    "ABCD",
    "\u00a0:\u3000B",
]


@pytest.mark.parametrize("n", [2, 4, 10])
def test_framework_sql_matches_python_on_tricky_texts(n: int) -> None:
    """The SQL chains (CASE, literal guards, ASCII skip, last-match rewrite) give the Python parsers' letters."""
    from mcqaudit import parsers

    con = duckdb.connect()
    con.execute("CREATE TABLE t (row_id VARCHAR, generation VARCHAR, n_opt INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(str(i), g, n) for i, g in enumerate(TRICKY)])
    patterns = {name: fp.patterns for name, fp in parsers.FRAMEWORK_PARSERS.items()}
    q, params = sql.framework_letters_sql(patterns, "t")
    got = {(r[0], r[1]): r[2] for r in con.execute(q, params).fetchall()}
    for i, g in enumerate(TRICKY):
        for name, fp in parsers.FRAMEWORK_PARSERS.items():
            assert got[(str(i), name)] == fp.parse(g, n), (g, name)


def test_key_mentions_never_count_below_the_names_in_the_file(tmp_path: Path, monkeypatch) -> None:
    """The fast path's duplicate-key screen (issue 23: counted over the quotes with numpy) counts each key's
    quoted name at least as often as a plain substring count does, on names inside texts, escaped quotes,
    non-ASCII and one-letter names, and across chunk boundaries; and a key said twice is still refused."""
    from mcqaudit.ingest import jsonl

    lines = [
        '{"item_id": "a", "item_id": "b", "note": "he said \\"arm\\": x", "arm": "arm"}',
        '{"ü": "\\"ü\\"", "a": "\\"a\\"\\"a\\"", "gold": "gold", "x": ["gold", "generation"]}',
        '"arm"',
        '{"options":["options","Options","optionz","opt\\"ions"],"a":"","": ""}',
        '{"k": "' + "q" * 5000 + '", "prompt":"' + '"prompt"' * 0 + 'p"}',
    ]
    path = tmp_path / "k.jsonl"
    path.write_text("\n".join(lines * 40) + "\n", encoding="utf-8")
    keys = ["item_id", "arm", "ü", "a", "gold", "generation", "options", "prompt", "", "missing", 'q"t']
    raw = path.read_bytes()
    plain = {k: raw.count(json.dumps(k, ensure_ascii=False).encode()) for k in keys}
    for chunk in (64, 1000, jsonl.KEY_CHUNK_BYTES):
        monkeypatch.setattr(jsonl, "KEY_CHUNK_BYTES", chunk)
        got: dict[str, int] = {}
        jsonl.key_mentions(path, keys, got)
        assert all(got[k] >= plain[k] for k in keys), (chunk, got, plain)
        assert got["missing"] == 0 and got["item_id"] == plain["item_id"] == 80
    study = Study(tmp_path / "s.duckdb", create=True)
    good = json.dumps(row(item_id="z"))
    dup = good[:-1] + ', "gold": "A"}'
    path.write_text(good + "\n" + dup + "\n")
    with pytest.raises(Exception) as exc:
        ingest_file(study, path)
    assert 'k.jsonl:2: line: duplicate key "gold"' in str(exc.value)


def test_fast_path_lines_are_the_file_lines_when_duckdb_reads_in_parallel(tmp_path: Path) -> None:
    """The fast path numbers its rows by their place in the staged table, not by a window (issue 23): on a
    file big enough for DuckDB to read in parallel (several 16 MB buffers, lines of varied length), every
    stored row's source_line is its line in the file."""
    src = tmp_path / "many.jsonl"
    con = duckdb.connect()
    con.execute(
        f"""
        COPY (SELECT 'i' || i AS item_id, 'base' AS arm, 'Q' || i || '?' AS question, ['yes', 'no'] AS options,
                     'A' AS gold, repeat('x', (i * 7919) % 900) || ' so A' AS generation
              FROM range(1, 120001) t(i) ORDER BY i) TO '{src}' (FORMAT JSON)
        """
    )
    con.close()
    assert src.stat().st_size > 48 << 20
    study = Study(tmp_path / "s.duckdb", create=True)
    assert ingest_file(study, src).loaded == 120_000
    assert study.query(
        "SELECT count(*), count(*) FILTER (WHERE source_line <> CAST(substr(item_id, 2) AS BIGINT)) FROM gen_rows"
    ) == [(120_000, 0)]
