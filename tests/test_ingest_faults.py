"""Ingest under hostile input and faults (issue 13): every failure is a clear `FILE[:LINE]: field: reason`, never a
traceback, and nothing is written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcqaudit.app.ingest import ingest_file
from mcqaudit.ingest.errors import InputError
from mcqaudit.store import Study
from tests.helpers import run_cli


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


@pytest.mark.parametrize("sep", ["\n", "\n\n"], ids=["fast-path", "blank-line-so-line-by-line"])
def test_a_30_mb_generation_ingests(tmp_path: Path, sep: str) -> None:
    """A line of tens of MB raises DuckDB's memory limit for its file (issue 23: the line-by-line path, taken
    for a blank line, needs several times the line; at the 650MB default it ran out of memory)."""
    import json

    big = "y" * 30_000_000
    rows = [
        {"item_id": "a", "arm": "x", "question": "Q?", "options": ["p", "q"], "gold": "A", "generation": big},
        {"item_id": "b", "arm": "x", "question": "Q?", "options": ["p", "q"], "gold": "A", "generation": "A"},
    ]
    src = tmp_path / "big.jsonl"
    src.write_text(sep.join(json.dumps(r) for r in rows) + "\n")
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


# --- clear errors, never a traceback (issue 18) ------------------------------------------------------------
@pytest.fixture
def read_only_study(tmp_path: Path):
    """A study on a read-only disk (root: a tmpfs remounted read-only), else in a read-only folder."""
    import os
    import subprocess

    folder = tmp_path / "ro"
    folder.mkdir()
    mounted = (
        os.geteuid() == 0
        and not subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], capture_output=True
        ).returncode
    )
    db = folder / "s.duckdb"
    run_cli("ingest", str(_rows_file(tmp_path / "small.jsonl", 5)), "--db", str(db), "--quiet", check=True)
    if mounted:
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
    else:
        db.chmod(0o444)
        folder.chmod(0o555)
        if os.access(db, os.W_OK):
            pytest.skip("running as root without mount: permissions do not make a study read-only")
    try:
        yield db
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)
        else:
            folder.chmod(0o755)


def test_ingest_and_grade_on_a_read_only_study_say_so_in_one_line(
    tmp_path: Path, read_only_study: Path
) -> None:
    rows = _rows_file(tmp_path / "more.jsonl", 3)
    # the study, its lock and info's cache (the ingest that made the study kept it): the failures below add none
    before = sorted(f.name for f in read_only_study.parent.iterdir())
    assert before == ["s.duckdb", "s.duckdb.info.json", "s.duckdb.lock"]
    for args in (
        ("ingest", str(rows), "--db", str(read_only_study), "--quiet"),
        ("grade", "--no-judge", "--db", str(read_only_study)),
    ):
        p = run_cli(*args)
        assert p.returncode == 1, p.stderr
        assert "Traceback" not in p.stderr and "StudyReadOnly" not in p.stderr, p.stderr
        assert p.stderr.strip().count("\n") == 0 and "read-only" in p.stderr, p.stderr
    new = read_only_study.with_name("new.duckdb")
    p = run_cli("ingest", str(rows), "--db", str(new), "--quiet")
    assert p.returncode == 1 and "cannot create the study" in p.stderr and "read-only" in p.stderr, p.stderr
    assert sorted(f.name for f in read_only_study.parent.iterdir()) == before


DEEP_ROW = (
    '{"item_id": "q", "arm": "a", "question": "Q?", "options": ["x", "y"], "gold": "A", "generation": "A"'
)


@pytest.mark.parametrize(
    ("first", "says"),
    [
        ("[" * 100_000 + "]" * 100_000, ":1: line: not a JSON object (got an array)"),
        (DEEP_ROW + ', "metadata": ' + '{"k": ' * 5_000 + "{}" + "}" * 5_000 + "}", None),
    ],
    ids=["array-100000-deep", "metadata-5000-deep"],
)
def test_a_first_line_nested_deeply_is_no_traceback(tmp_path: Path, first: str, says: str | None) -> None:
    from mcqaudit.ingest import lmeval

    src = tmp_path / "deep.jsonl"
    src.write_text(first + "\n" + DEEP_ROW + ', "sample": 1}\n')
    assert lmeval.looks_like_samples(src) is False
    db = tmp_path / "s.duckdb"
    p = run_cli("ingest", str(src), "--db", str(db), "--quiet")
    assert "Traceback" not in p.stderr and "RecursionError" not in p.stderr, p.stderr[-2000:]
    if says is None:  # a deep but valid metadata object is kept
        assert p.returncode == 0, p.stderr
    else:
        assert p.returncode == 1 and f"{src}{says}" in p.stderr, p.stderr


def test_a_deep_line_in_an_lm_eval_file_is_that_records_problem(tmp_path: Path) -> None:
    from mcqaudit.ingest import lmeval

    good = {"doc_id": 0, "doc": {"question": "Q?", "choices": ["x", "y"], "answer": 0}, "target": "A"}
    good |= {"resps": [["A"]], "filtered_resps": ["A"], "filter": "none"}
    src = tmp_path / "samples_t_2026.jsonl"
    src.write_text(json.dumps(good) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n")
    unit, records = lmeval.read_samples(src, arm="a")
    assert [(r.row is None, r.reason) for r in records] == [
        (False, ""),
        (True, "not a JSON sample record, truncated or damaged (nested too deeply)"),
    ]


def _special_inputs(tmp_path: Path) -> list[tuple[str, str, dict]]:
    import os

    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(tmp_path / "loop2.jsonl")
    (tmp_path / "loop2.jsonl").symlink_to(loop)
    return [
        (str(fifo), "is a pipe (a FIFO, or a shell's <(command)), not a regular file", {}),
        ("/dev/zero", "is a device, not a regular file", {"--format": "jsonl"}),
        ("/dev/urandom", "is a device, not a regular file", {"--format": "jsonl"}),
        (str(loop), "a symbolic link loop", {}),
        (str(tmp_path / "missing.jsonl"), "no such file", {}),
    ]


def test_a_pipe_a_device_or_a_symlink_loop_is_named_before_any_study_exists(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    for path, says, opts in _special_inputs(tmp_path):
        flags = [x for kv in opts.items() for x in kv]
        p = run_cli("ingest", path, "--db", str(db), "--quiet", *flags, timeout=60)
        assert p.returncode == 1, (path, p.stderr)
        assert p.stderr.strip() == f"error: {path}: file: {says}" + p.stderr.strip().split(says, 1)[1], (
            p.stderr
        )
        assert "Traceback" not in p.stderr and "the file is empty" not in p.stderr
        assert not list(tmp_path.glob("s.duckdb*")), path


def test_process_substitution_is_a_pipe(tmp_path: Path) -> None:
    """`mcqaudit ingest <(cat file)`: the shell passes /dev/fd/N, the read end of a pipe."""
    import os
    import subprocess
    import sys

    src = _rows_file(tmp_path / "rows.jsonl", 3)
    db = tmp_path / "s.duckdb"
    r, w = os.pipe()
    try:
        os.write(w, src.read_bytes()[:4096])
        p = subprocess.run(
            [sys.executable, "-m", "mcqaudit", "ingest", f"/dev/fd/{r}", "--db", str(db), "--quiet"],
            pass_fds=(r,),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        os.close(r)
        os.close(w)
    assert p.returncode == 1 and "is a pipe" in p.stderr and "empty" not in p.stderr, p.stderr
    assert not list(tmp_path.glob("s.duckdb*"))


def test_parquet_list_of_binary_options_refuses_bad_bytes(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    def table(options: list[list[bytes]], prefix: str) -> pa.Table:
        n = len(options)
        return pa.table(
            {
                "item_id": [f"{prefix}{k}" for k in range(n)],
                "arm": ["x"] * n,
                "question": ["Q?"] * n,
                "options": pa.array(options, pa.list_(pa.binary())),
                "gold": ["A"] * n,
                "generation": ["A"] * n,
            }
        )

    study = Study(tmp_path / "s.duckdb", create=True)
    good = tmp_path / "good.parquet"
    pq.write_table(table([[b"alpha", "b\u00e9t".encode()]], "good"), good)
    ingest_file(study, good)
    assert study.query("SELECT options FROM gen_rows") == [(["alpha", "b\u00e9t"],)]
    bad = tmp_path / "bad.parquet"
    pq.write_table(table([[b"p", b"q"], [b"alpha", b"be\xfft"]], "bad"), bad)
    with pytest.raises(InputError) as exc:
        ingest_file(study, bad)
    assert [str(p) for p in exc.value.problems] == [
        f"{bad}:row 2: options: not valid UTF-8 text (a binary value)"
    ]
    assert study.query("SELECT count(*) FROM gen_rows") == [(1,)]


@pytest.mark.parametrize(("delim", "name"), [(";", "semicolons"), ("\t", "tabs")])
def test_a_csv_with_another_delimiter_says_so(tmp_path: Path, delim: str, name: str) -> None:
    src = tmp_path / "t.csv"
    cols = ["item_id", "arm", "question", "options", "gold", "generation"]
    src.write_text(
        delim.join(cols) + "\n" + delim.join(["q1", "base", "Q?", '"[""a"",""b""]"', "A", "A"]) + "\n"
    )
    study = Study(tmp_path / "s.duckdb", create=True)
    with pytest.raises(InputError) as exc:
        ingest_file(study, src)
    assert str(exc.value) == (
        f"{src}:1: line: the header has no comma but 5 {name}: the delimiter looks wrong; mcqaudit reads "
        "comma-separated CSV (save the file with commas, or as JSONL)"
    )


def test_a_50_mb_generation_ingests_and_a_line_over_the_limit_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcqaudit.ingest import jsonl as ingest_mod

    rows = [
        {"item_id": "a", "arm": "x", "question": "Q?", "options": ["p", "q"], "gold": "A", "generation": "A"},
        {
            "item_id": "b",
            "arm": "x",
            "question": "Q?",
            "options": ["p", "q"],
            "gold": "A",
            "generation": "y" * 50_000_000,
        },
        {"item_id": "c", "arm": "x", "question": "Q?", "options": ["p", "q"], "gold": "B", "generation": "B"},
    ]
    src = tmp_path / "big.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    study = Study(tmp_path / "s.duckdb", create=True)
    assert ingest_file(study, src).loaded == 3  # DuckDB's read_json alone stops at ~32 MB per line
    assert study.query("SELECT max(length(generation)) FROM gen_rows") == [(50_000_000,)]
    # over the limit (256 MB; lowered here so that the test stays small): the line is named, and
    # --skip-bad rejects just it
    monkeypatch.setattr(ingest_mod, "MAX_LINE_BYTES", 40 << 20)
    other = Study(tmp_path / "t.duckdb", create=True)
    with pytest.raises(InputError) as exc:
        ingest_file(other, src)
    assert [str(p) for p in exc.value.problems] == [
        f"{src}:2: line: the line is 48 MB, over the 40 MB one row may have"
    ]
    res = ingest_file(other, src, skip_bad=True)
    assert (res.loaded, res.rejected) == (2, 1)
    assert other.query("SELECT line, field FROM rejected_rows") == [(2, "line")]


def test_a_full_disk_while_spilling_says_the_disk_is_full(tmp_path: Path) -> None:
    import os
    import subprocess

    disk = tmp_path / "small-disk"
    disk.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(disk)], capture_output=True
        ).returncode
    ):
        pytest.skip("needs root to mount a small tmpfs")
    try:
        db = disk / "s.duckdb"
        run_cli(
            "ingest", str(_rows_file(tmp_path / "small.jsonl", 20)), "--db", str(db), "--quiet", check=True
        )
        before = sorted(f.name for f in disk.iterdir())  # the study, its lock and info's cache
        big = _rows_file(tmp_path / "big.jsonl", 50_000)
        p = run_cli(
            "ingest", str(big), "--db", str(db), "--quiet", env={"MCQAUDIT_INGEST_MEMORY_LIMIT": "100MB"}
        )
        assert p.returncode == 1, p.stderr
        assert "no space left on the device" in p.stderr and "nothing was written" in p.stderr, p.stderr
        assert "Out of Memory" not in p.stderr and "Traceback" not in p.stderr, p.stderr
        assert sorted(f.name for f in disk.iterdir()) == before == ["s.duckdb", "s.duckdb.info.json", "s.duckdb.lock"]
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
