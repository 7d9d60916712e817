"""`mcqaudit export --format parquet|jsonl|csv` (issue 22): graded_rows with each row's reviews and panel
verdicts as nested columns, read back by a second engine (pyarrow.dataset) and by pandas, written whole or
not at all.

The study is graded for real: a primary judge and two panel judges (`grade --panel`, scripted servers on
127.0.0.1 through the real `openai` client), reviews added and retracted through the review use case. What
the export must hold is read from the study's own tables (reviews, judge_verdicts, panel_judges) with plain
SQL, never from the export's query."""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from mcqaudit.app import reviews as rv
from mcqaudit.app.analysis import graded_rows, read_study
from mcqaudit.app.rows import export_rows
from mcqaudit.files import WriteFailed
from mcqaudit.store import Study
from mcqaudit.store import export as store_export
from tests.helpers import REPO, judge_rows, mounted_tmpfs, process_env, run_cli
from tests.judge_servers import Call, Reply, ScriptedJudge, add_rows, heuristic

N = 30
ORDER = "ORDER BY arm, item_id, orientation, sample"
REVIEW_KEYS = ["review_id", "action", "verdict", "letter", "note", "reviewer", "time", "retracts"]
PANEL_KEYS = ["fingerprint", "model", "status", "verdict", "letter"]
HOSTILE = '"B"\n\t=HYPERLINK("x")\u2028 naïve — 日本 \\ end'


def _take(call: Call) -> int:
    return int(call.user.split("(take ")[1].split(")")[0])


def contrary(call: Call) -> Reply:
    """The second judge: OTHER on every row whose take is a multiple of 5, else the heuristic's letter."""
    reply = heuristic(call)
    assert isinstance(reply, Reply)
    return Reply("OTHER") if _take(call) % 5 == 0 else reply


def failing(call: Call) -> Reply:
    """The third judge: an illegal reply (status error) on every row whose take is a multiple of 3."""
    reply = heuristic(call)
    assert isinstance(reply, Reply)
    return Reply("??") if _take(call) % 3 == 0 else reply


def _grade(db: Path, url: str, model: str, *extra: str) -> None:
    proc = run_cli("grade", "--db", str(db), "--judge-model", model, "--judge-base-url", url, *extra)
    assert proc.returncode in (0, 3), proc.stderr  # 3: the failing panel judge left rows in error


def build_study(db: Path) -> dict[str, int]:
    """The study of these tests; the review ids it wrote, by name."""
    study = Study(db, create=True)
    rows = judge_rows(N)
    for k, r in enumerate(rows):
        r["arm"] = "base" if k % 2 == 0 else "steered"
    rows.append(
        dict(row_id="hostile", item_id="item-h", options=["x", "y"], generation=HOSTILE, strict_letter="B")
    )
    add_rows(study, rows)
    with (
        ScriptedJudge(heuristic) as one,
        ScriptedJudge(contrary, model="second") as two,
        ScriptedJudge(failing, model="third") as three,
    ):
        _grade(db, one.base_url, "scripted")
        _grade(db, two.base_url, "second", "--panel")
        _grade(db, three.base_url, "third", "--panel")
    ids = {
        "ann": rv.add_review(
            study, "r00001", reviewer="ann", verdict="OTHER", note="=1+1 — naïve\nsecond line"
        ),
        "bo": rv.add_review(study, "r00001", reviewer="bo", verdict="CORRECT", picked_letter="A"),
        "confirm": rv.add_review(study, "r00002", reviewer="ann", action="confirm"),
        "hostile": rv.add_review(study, "hostile", reviewer="ann", verdict="INCORRECT", picked_letter="B"),
    }
    ids["retract"] = rv.retract_review(study, ids["confirm"], reviewer="bo", note="misclick")
    return ids


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    db = tmp_path_factory.mktemp("export") / "study.duckdb"
    return db, build_study(db)


@pytest.fixture
def db(built: tuple[Path, dict[str, int]], tmp_path: Path) -> Path:
    copy = tmp_path / "study.duckdb"
    shutil.copy(built[0], copy)
    return copy


# --- what the export must hold, read from the tables ----------------------------------------------------------
def view_rows(db: Path) -> list[dict[str, Any]]:
    return Study(db).query_df(f"SELECT * FROM graded_rows {ORDER}").to_dict("records")


def expected_reviews(db: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in Study(db).query(
        "SELECT row_id, review_id, action, verdict, picked_letter, note, reviewer, created_at, retracts "
        "FROM reviews ORDER BY created_at, review_id"
    ):
        out[r[0]].append(dict(zip(REVIEW_KEYS, r[1:], strict=True)))
    return out


def expected_panel(db: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in Study(db).query(
        """SELECT v.row_id, v.fingerprint, c.model, v.status, v.verdict, v.letter
           FROM judge_verdicts v JOIN panel_judges p USING (fingerprint) JOIN judge_configs c USING (fingerprint)
           ORDER BY p.added_at, v.fingerprint"""
    ):
        out[r[0]].append(dict(zip(PANEL_KEYS, r[1:], strict=True)))
    return out


def _plain(v: Any) -> Any:
    """A value as the tables give it (pandas' missing values as None, arrays as lists)."""
    if isinstance(v, list | tuple) or hasattr(v, "tolist"):
        return [_plain(x) for x in (v.tolist() if hasattr(v, "tolist") else v)]
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if v is None or (isinstance(v, float) and v != v) or v is pd.NaT:
        return None
    if isinstance(v, pd.Timestamp):
        return v.to_pydatetime()
    return v


def _export(db: Path, out: Path, *extra: str) -> str:
    proc = run_cli("export", "--db", str(db), "--out", str(out), *extra)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr


# --- the round trips -----------------------------------------------------------------------------------------
def test_parquet_holds_every_column_and_the_nested_history(
    db: Path, built: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    out = tmp_path / "rows.parquet"
    said = _export(db, out)
    rows = view_rows(db)
    assert said.strip() == f"wrote {out} (parquet; {len(rows)} rows, {said.split(', ')[-1].strip()}"
    table = ds.dataset(out, format="parquet").to_table()  # the second engine
    view_cols = list(rows[0])
    assert table.column_names == [*view_cols, "reviews", "panel_verdicts"]
    reviews_t, panel_t = table.schema.field("reviews").type, table.schema.field("panel_verdicts").type
    assert pa.types.is_list(reviews_t) and [f.name for f in reviews_t.value_type] == REVIEW_KEYS
    assert reviews_t.value_type.field("time").type == pa.timestamp("us", tz="UTC")
    assert pa.types.is_list(panel_t) and [f.name for f in panel_t.value_type] == PANEL_KEYS
    got = table.to_pylist()
    assert [r["row_id"] for r in got] == [r["row_id"] for r in rows]  # every row, in the CSV's order
    for mine, want in zip(got, rows, strict=True):
        assert {c: _plain(mine[c]) for c in view_cols} == {c: _plain(want[c]) for c in view_cols}, want[
            "row_id"
        ]
    reviews, panel = expected_reviews(db), expected_panel(db)
    assert {r["row_id"]: r["reviews"] for r in got} == {
        r["row_id"]: reviews.get(r["row_id"], []) for r in rows
    }
    assert {r["row_id"]: r["panel_verdicts"] for r in got} == {
        r["row_id"]: panel.get(r["row_id"], []) for r in rows
    }
    # by hand: the history of the rows reviewed, the panel's verdicts beside the final one
    ids = built[1]
    by_id = {r["row_id"]: r for r in got}
    assert [(x["reviewer"], x["action"], x["verdict"], x["letter"]) for x in by_id["r00001"]["reviews"]] == [
        ("ann", "override", "OTHER", None),
        ("bo", "override", "CORRECT", "A"),
    ]
    assert by_id["r00001"]["reviews"][0]["note"] == "=1+1 — naïve\nsecond line"  # exact, never neutralised
    assert [(x["review_id"], x["action"], x["retracts"]) for x in by_id["r00002"]["reviews"]] == [
        (ids["confirm"], "confirm", None),
        (ids["retract"], "retract", ids["confirm"]),
    ]
    assert by_id["r00002"]["review_verdict"] is None  # the confirm was withdrawn
    r0 = by_id["r00000"]  # take 0: the second judge says OTHER, the third's reply is illegal
    assert [(p["model"], p["status"], p["verdict"]) for p in r0["panel_verdicts"]] == [
        ("second", "ok", "OTHER"),
        ("third", "error", None),
    ]
    assert r0["final_verdict"] == r0["judge_verdict"] == "CORRECT"  # a panel verdict is never final
    assert by_id["hostile"]["generation"] == HOSTILE and by_id["hostile"]["panel_verdicts"] == []
    assert sum(len(r["panel_verdicts"]) for r in got) == 2 * N


def test_pandas_reads_the_parquet_and_the_api_gives_the_same_frame(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.pq"
    _export(db, out)  # .pq: Parquet by its suffix
    df = pd.read_parquet(out)
    api = graded_rows(db, history=True)
    assert list(df.columns) == list(api.columns)
    assert len(df) == len(api) == N + 1
    for col in ("reviews", "panel_verdicts"):
        assert [_plain(v) for v in df[col]] == [_plain(v) for v in api[col]]
    plain = graded_rows(db)
    assert list(plain.columns) == list(df.columns[:-2])
    assert plain["row_id"].tolist() == df["row_id"].tolist()
    reviewed = df.set_index("row_id").loc["r00001"]
    assert reviewed["review_verdict"] == "CORRECT" and [x["reviewer"] for x in reviewed["reviews"]] == [
        "ann",
        "bo",
    ]


def test_jsonl_holds_the_same_rows_as_objects(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    said = _export(db, out)
    assert f"wrote {out} (jsonl; {N + 1} rows" in said
    text = out.read_text(encoding="utf-8")
    assert text.endswith("\n") and "\r" not in text
    # one line per row for every line reader: no raw U+2028 (str.splitlines would end a line there)
    assert "\u2028" not in text and len(text.splitlines()) == N + 1
    lines = [json.loads(line) for line in text.splitlines()]
    rows = view_rows(db)
    assert [x["row_id"] for x in lines] == [r["row_id"] for r in rows]
    reviews, panel = expected_reviews(db), expected_panel(db)

    def as_json(v: Any) -> Any:
        v = _plain(v)
        if isinstance(v, dt.datetime):
            return v.astimezone(dt.UTC).isoformat(timespec="microseconds")
        return v

    for line, want in zip(lines, rows, strict=True):
        assert list(line) == [*want, "reviews", "panel_verdicts"]
        assert {c: line[c] for c in want} == {c: as_json(v) for c, v in want.items()}, want["row_id"]
        assert line["reviews"] == [
            {k: as_json(v) for k, v in x.items()} for x in reviews.get(want["row_id"], [])
        ]
        assert line["panel_verdicts"] == panel.get(want["row_id"], [])
    # ISO-8601 in UTC, as the review log writes its times
    first = next(x for x in lines if x["row_id"] == "r00001")["reviews"][0]["time"]
    assert first.endswith("+00:00") and dt.datetime.fromisoformat(first).tzinfo is not None
    # a second engine: pyarrow's JSON reader, nested arrays of objects as lists of structs
    table = ds.dataset(out, format="json").to_table()
    assert table.num_rows == N + 1
    got = {r["row_id"]: r for r in table.to_pylist()}
    assert [x["reviewer"] for x in got["r00001"]["reviews"]] == ["ann", "bo"]
    assert [p["model"] for p in got["r00000"]["panel_verdicts"]] == ["second", "third"]
    assert got["hostile"]["generation"] == HOSTILE
    # and pandas
    df = pd.read_json(out, lines=True, dtype=False)
    assert df["row_id"].tolist() == [r["row_id"] for r in rows]
    assert df.set_index("row_id").loc["r00002", "reviews"][1]["action"] == "retract"


def test_csv_keeps_the_view_alone(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.csv"
    _export(db, out)
    df = pd.read_csv(out, keep_default_na=False)
    assert list(df.columns) == list(view_rows(db)[0])  # no nested columns in CSV
    assert len(df) == N + 1
    assert df.set_index("row_id").loc["hostile", "generation"] == HOSTILE  # starts with a quote already: kept


def test_datasets_parquet_loader_reads_it(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")  # not a dependency: checked where it is installed
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    out = tmp_path / "rows.parquet"
    _export(db, out)
    loaded = datasets.load_dataset("parquet", data_files=str(out), split="train")
    assert loaded.num_rows == N + 1
    assert [x["reviewer"] for x in loaded[[r["row_id"] for r in loaded].index("r00001")]["reviews"]] == [
        "ann",
        "bo",
    ]


# --- the command ---------------------------------------------------------------------------------------------
def test_format_from_the_suffix_and_usage_errors(db: Path, tmp_path: Path) -> None:
    for name, fmt in (("a.ndjson", "jsonl"), ("b.PARQUET", "parquet"), ("c.txt", "csv")):
        extra = ("--format", "csv") if name == "c.txt" else ()
        assert f"({fmt}; {N + 1} rows" in _export(db, tmp_path / name, *extra)
    proc = run_cli("export", "--db", str(db), "--out", str(tmp_path / "rows.txt"))
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == "error: --format: cannot tell the format from 'rows.txt': name one of csv, parquet, jsonl"
    )
    proc = run_cli("export", "--db", str(db), "--out", str(tmp_path / "rows.x"), "--format", "xlsx")
    assert proc.returncode == 2 and "the format must be one of csv, parquet, jsonl, not 'xlsx'" in proc.stderr
    proc = run_cli("export", "--db", str(tmp_path / "none.duckdb"), "--out", str(tmp_path / "rows.csv"))
    assert (
        proc.returncode == 1
        and proc.stderr.strip() == f"error: {tmp_path / 'none.duckdb'}: no such study file"
    )
    assert not (tmp_path / "rows.txt").exists() and not (tmp_path / "rows.csv").exists()


def test_an_earlier_file_is_replaced_whole(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "rows.parquet"
    out.write_text("an earlier file\n", encoding="utf-8")
    _export(db, out)
    assert ds.dataset(out, format="parquet").count_rows() == N + 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.parquet", "study.duckdb", "study.duckdb.lock"]


def test_a_read_only_study_exports(db: Path, tmp_path: Path) -> None:
    study = read_study(db)
    assert study.read_only
    res = export_rows(study, tmp_path / "rows.jsonl")
    assert (res.format, res.rows, res.bytes) == ("jsonl", N + 1, (tmp_path / "rows.jsonl").stat().st_size)


def test_progress_is_said_after_each_batch(db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_export, "BATCH_ROWS", 8)
    for fmt in ("parquet", "jsonl"):
        seen: list[tuple[int, int]] = []
        export_rows(db, tmp_path / f"rows.{fmt}", fmt, lambda done, total: seen.append((done, total)))  # noqa: B023
        assert seen == [(8, N + 1), (16, N + 1), (24, N + 1), (N + 1, N + 1)], fmt


def test_a_terminal_sees_the_progress_bar(db: Path, tmp_path: Path) -> None:
    """In a terminal (a real pseudo-terminal), `export` draws its bar on stderr; in a log, one line only."""
    out = tmp_path / "rows.parquet"
    main, child = pty.openpty()
    env = {**process_env(), "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcqaudit", "export", "--db", str(db), "--out", str(out)],
        stdin=child, stdout=child, stderr=child, env=env, cwd=REPO,
    )  # fmt: skip
    os.close(child)
    seen = b""
    deadline = time.monotonic() + 120
    with contextlib.suppress(OSError):  # EIO once the child has closed the terminal
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1)
            if ready:
                chunk = os.read(main, 65536)
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
    os.close(main)
    assert proc.wait(timeout=60) == 0, seen.decode(errors="replace")
    screen = seen.decode(errors="replace")
    assert "export parquet" in screen and f"{N + 1}/{N + 1}" in screen and "rows" in screen, screen
    assert f"wrote {out} (parquet; {N + 1} rows" in screen


# --- failures: nothing written -------------------------------------------------------------------------------
def _big_study(db: Path, rows: int = 3000) -> None:
    """Rows whose generations do not compress (hex digests): each export is a few MB."""
    import hashlib

    gens = [
        {
            "row_id": f"b{k:05d}",
            "item_id": f"item{k}",
            "options": ["p", "q"],
            "generation": "".join(hashlib.sha256(f"{k}:{j}".encode()).hexdigest() for j in range(16)),
            "strict_letter": "A",
        }
        for k in range(rows)
    ]
    add_rows(Study(db, create=True), gens)


@pytest.fixture(scope="module")
def big_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("big") / "big.duckdb"
    _big_study(db)
    return db


@pytest.mark.parametrize("fmt", ["parquet", "jsonl", "csv"])
def test_a_full_disk_leaves_no_file_and_one_line(big_db: Path, tmp_path: Path, fmt: str) -> None:
    db = big_db
    with mounted_tmpfs(tmp_path / "disk", "2m") as disk:
        out = disk / f"rows.{fmt}"
        proc = run_cli("export", "--db", str(db), "--out", str(out))
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.splitlines() == [
            f"error: cannot write {out}: no space left on the device; nothing was written"
        ]
        assert list(disk.iterdir()) == []  # no partial file, no temporary file
        # an earlier file of that name is kept as it was
        out.write_text("earlier\n", encoding="utf-8")
        assert run_cli("export", "--db", str(db), "--out", str(out)).returncode == 1
        assert [p.name for p in disk.iterdir()] == [out.name] and out.read_text(
            encoding="utf-8"
        ) == "earlier\n"


def test_an_interrupted_export_leaves_no_file(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_export, "BATCH_ROWS", 8)
    folder = tmp_path / "out"
    folder.mkdir()
    for fmt in ("parquet", "jsonl"):

        def stop(done: int, total: int) -> None:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            export_rows(db, folder / f"rows.{fmt}", fmt, stop)
        assert list(folder.iterdir()) == []
    with pytest.raises(WriteFailed) as exc:
        export_rows(db, tmp_path / "missing" / "rows.parquet")
    assert str(exc.value).endswith("its folder does not exist; nothing was written")
    assert exc.value.errno == errno.ENOENT
