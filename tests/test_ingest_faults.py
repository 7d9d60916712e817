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


HEADER = "item_id,arm,question,options,gold,generation\n"
GOOD_CSV = 'q{i},base,Q?,"[""a"",""b""]",A,A\n'

BROKEN_CSV: list[tuple[str, bytes, str]] = [
    (
        "unterminated-quote",
        (
            HEADER + GOOD_CSV.format(i=1) + 'q2,base,Q?,"[""a"",""b""]",A,"oops\n' + GOOD_CSV.format(i=3)
        ).encode(),
        ":3: line: Value with unterminated quote found",
    ),
    (
        "ragged",
        (
            HEADER + GOOD_CSV.format(i=1) + 'q2,base,Q?,"[""a"",""b""]",A,A,extra\n' + GOOD_CSV.format(i=3)
        ).encode(),
        ":3: line: Expected Number of Columns: 6 Found: 7",
    ),
    ("truncated", (HEADER + GOOD_CSV.format(i=1) + 'q2,base,Q?,"[""a"",""b"').encode(), ":3: line: "),
    (
        "not-utf8",
        (HEADER + GOOD_CSV.format(i=1)).encode() + b'q2,base,Q\xff?,"[""a"",""b""]",A,A\n',
        ":3: line: not valid UTF-8 (byte 0xff at column 10)",
    ),
    ("latin-1-header", "item_id,arm,quéstion\n".encode("latin-1"), ":1: line: not valid UTF-8 (byte 0xe9"),
]


@pytest.mark.parametrize(("name", "data", "says"), BROKEN_CSV, ids=[b[0] for b in BROKEN_CSV])
def test_a_broken_csv_names_its_broken_line(tmp_path: Path, name: str, data: bytes, says: str) -> None:
    src = tmp_path / f"{name}.csv"
    src.write_bytes(data)
    study = Study(tmp_path / "s.duckdb", create=True)
    with pytest.raises(InputError) as exc:
        ingest_file(study, src)
    msg = str(exc.value)
    assert msg.startswith(f"{src}{says}"), msg
    assert "missing required field" not in msg and "Possible fixes" not in msg
    assert study.query("SELECT count(*) FROM gen_rows") == [(0,)]


def test_csv_with_a_5_mb_generation_crlf_and_a_quoted_header(tmp_path: Path) -> None:
    big = "x" * 5_000_000
    src = tmp_path / "big.csv"
    src.write_bytes(
        (
            '\ufeff"item_id",arm,question,options,gold,"generation"\r\n'
            + f'q1,base,Q?,"[""a"",""b""]",A,"{big}"\r\n'
            + 'q2,base,"Q, two?","[""a"",""b""]",B,"line\r\nbreak"\r\n'
        ).encode()
    )
    study = Study(tmp_path / "s.duckdb", create=True)
    res = ingest_file(study, src)
    assert res.loaded == 2
    got = study.query("SELECT item_id, length(generation), question FROM gen_rows ORDER BY item_id")
    assert got == [("q1", 5_000_000, "Q?"), ("q2", len("line\r\nbreak"), "Q, two?")]


def test_a_30_mb_generation_ingests(tmp_path: Path) -> None:
    import json

    big = "y" * 30_000_000
    rows = [
        {"item_id": "a", "arm": "x", "question": "Q?", "options": ["p", "q"], "gold": "A", "generation": big},
        {"item_id": "b", "arm": "x", "question": "Q?", "options": ["p", "q"], "gold": "A", "generation": "A"},
    ]
    src = tmp_path / "big.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    study = Study(tmp_path / "s.duckdb", create=True)
    res = ingest_file(study, src)
    assert res.loaded == 2
    assert study.query("SELECT item_id, length(generation) FROM gen_rows ORDER BY 1") == [
        ("a", 30_000_000),
        ("b", 1),
    ]


@pytest.fixture
def tiny_disk(tmp_path: Path):
    """A 2 MB tmpfs where the test may mount one (root), else None."""
    import os
    import subprocess

    mnt = tmp_path / "tiny"
    mnt.mkdir()
    if os.geteuid() != 0:
        yield None
        return
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True
    ).returncode:
        yield None
        return
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _rows_file(path: Path, n: int) -> Path:
    import json

    path.write_text(
        "\n".join(
            json.dumps(
                {
                    "item_id": f"q{i}",
                    "arm": "base",
                    "question": f"Question {i}? " * 5,
                    "options": [f"alpha {i}", f"beta {i}", f"gamma {i}", f"delta {i}"],
                    "gold": "A",
                    "generation": f"Reasoning about item {i}, at some length. " * 8 + "So A.",
                }
            )
            for i in range(n)
        )
        + "\n"
    )
    return path


def test_a_full_disk_is_a_clear_error_and_leaves_the_study_intact(
    tmp_path: Path, tiny_disk: Path | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = _rows_file(tmp_path / "small.jsonl", 20)
    big = _rows_file(tmp_path / "big.jsonl", 20_000)
    if tiny_disk is None:  # no tmpfs here: the same path with the write failing as a full disk does
        import errno

        study = Study(tmp_path / "s.duckdb", create=True)
        ingest_file(study, small)
        real = Study.write

        def full(self):  # type: ignore[no-untyped-def]
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))

        monkeypatch.setattr(Study, "write", full)
        with pytest.raises(InputError, match="cannot be written: No space left on device"):
            ingest_file(study, big)
        monkeypatch.setattr(Study, "write", real)
        assert study.query("SELECT count(*) FROM gen_rows") == [(20,)]
        return
    db = tiny_disk / "s.duckdb"
    # a new study that does not fit: a clear error and no file left
    p = run_cli("ingest", str(big), "--db", str(db), "--quiet")
    assert p.returncode == 1, p.stderr
    assert (
        "Traceback" not in p.stderr
        and "No space left on device" in p.stderr
        and "nothing was written" in p.stderr
    )
    assert list(tiny_disk.iterdir()) == []
    # an existing study: the failed ingest changes nothing and leaves no temporary file
    run_cli("ingest", str(small), "--db", str(db), "--quiet", check=True)
    p = run_cli("ingest", str(big), "--db", str(db), "--quiet")
    assert p.returncode == 1 and "Traceback" not in p.stderr and "No space left on device" in p.stderr, (
        p.stderr
    )
    assert not [f for f in tiny_disk.iterdir() if f.suffix == ".tmp"]
    info = run_cli("info", "--db", str(db))
    assert info.returncode == 0 and "20 rows, 20 items" in info.stdout, info.stdout + info.stderr


def test_a_killed_ingest_leaves_no_spill_files_and_no_growth_after_the_next_open(tmp_path: Path) -> None:
    """SIGKILL mid-ingest (issue 18): DuckDB's spill files in STUDY.duckdb.tmp/ and the blocks the killed
    transaction wrote past the study's end are removed by the next command that opens the study."""
    import os
    import signal
    import subprocess
    import sys
    import time

    small = _rows_file(tmp_path / "small.jsonl", 20)
    big = _rows_file(tmp_path / "big.jsonl", 50_000)
    db = tmp_path / "s.duckdb"
    run_cli("ingest", str(small), "--db", str(db), "--quiet", check=True)
    before = db.stat().st_size
    spill = tmp_path / "s.duckdb.tmp"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcqaudit", "ingest", str(big), "--db", str(db), "--quiet"],
        env={**os.environ, "MCQAUDIT_INGEST_MEMORY_LIMIT": "100MB"},  # spills early, as a big file does
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    spilled = grew = 0
    deadline = time.monotonic() + 300
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if spill.is_dir():
                spilled = max(spilled, sum(f.stat().st_size for f in spill.iterdir() if f.is_file()))
            grew = db.stat().st_size - before
            if spilled and grew > 4 << 20:  # the load's blocks are being written into the study
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the ingest finished before it could be killed mid-write"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert spilled > 0 and grew > 4 << 20
    assert [f for f in spill.iterdir() if f.name.startswith("duckdb_temp_")]  # what the kill left
    info = run_cli("info", "--db", str(db))
    assert info.returncode == 0 and "20 rows, 20 items" in info.stdout, info.stdout + info.stderr
    assert not spill.exists()
    assert db.stat().st_size <= before
    # the study is whole: the big file loads in full afterwards
    p = run_cli("ingest", str(big), "--db", str(db), "--quiet")
    assert p.returncode == 0, p.stderr
    assert Study(db).query("SELECT count(*) FROM gen_rows") == [(50_000,)]
