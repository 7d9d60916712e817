"""Ingest under hostile input and faults (issue 13): every failure is a clear `FILE[:LINE]: field: reason`, never a
traceback, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcqaudit.ingest import ingest_file
from mcqaudit.ingest.errors import InputError
from mcqaudit.store import Study
from tests.conftest import run_cli


@pytest.mark.parametrize("name", ["run.jsonl", "logs", "table.csv"])
@pytest.mark.parametrize("fmt", [None, "jsonl", "csv", "parquet"])
def test_a_folder_is_a_clear_error(tmp_path: Path, name: str, fmt: str | None) -> None:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"item_id": "x"}\n')
    study = Study(tmp_path / "s.duckdb", create=True)
    with pytest.raises(InputError) as exc:
        ingest_file(study, folder, fmt=fmt)
    assert str(exc.value).startswith(f"{folder}: file: is a folder"), str(exc.value)
    assert study.query("SELECT count(*) FROM gen_rows") == [(0,)]


def test_a_folder_on_the_command_line(tmp_path: Path) -> None:
    folder = tmp_path / "run.jsonl"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"item_id": "x"}\n')
    db = tmp_path / "s.duckdb"
    for args in ([str(folder)], [str(folder), "--format", "jsonl"]):
        p = run_cli("ingest", *args, "--db", str(db), "--quiet")
        assert p.returncode in (1, 2), p.stderr
        assert "Traceback" not in p.stderr and "IsADirectoryError" not in p.stderr, p.stderr
        assert str(folder) in p.stderr
    assert not db.exists()


def test_parquet_binary_generation_is_decoded_or_refused(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    base = {
        "item_id": ["a", "b", "c"],
        "arm": ["x", "x", "x"],
        "question": ["Q?", "Q?", "Q?"],
        "options": [["p", "q"], ["p", "q"], ["p", "q"]],
        "gold": ["A", "A", "A"],
    }
    good = tmp_path / "good.parquet"
    pq.write_table(
        pa.table({**base, "generation": pa.array([b"B", "café".encode(), b""], pa.binary())}), good
    )
    study = Study(tmp_path / "s.duckdb", create=True)
    ingest_file(study, good)
    assert study.query("SELECT generation FROM gen_rows ORDER BY item_id") == [("B",), ("café",), ("",)]

    bad = tmp_path / "bad.parquet"
    gens = pa.array([b"A", b"\xff\xfe broken", b"\xc3"], pa.binary())
    pq.write_table(pa.table({**base, "item_id": ["d", "e", "f"], "generation": gens}), bad)
    with pytest.raises(InputError) as exc:
        ingest_file(study, bad)
    assert [str(p) for p in exc.value.problems] == [
        f"{bad}:row 2: generation: not valid UTF-8 text (a binary value)",
        f"{bad}:row 3: generation: not valid UTF-8 text (a binary value)",
    ]
    assert study.query("SELECT count(*) FROM gen_rows") == [(3,)]
    assert "\\x" not in str(study.query("SELECT list(generation) FROM gen_rows"))
