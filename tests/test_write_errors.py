"""Output files under disk and permission errors (issue 13): `report --out`, `reviews export --out` and
`orient --out` on a full disk (a real 2 MB tmpfs, filled) and in a read-only folder (the command runs
without root's CAP_DAC_OVERRIDE, through `setpriv`). Each must say what failed in one line, exit 1, leave
no partial or temporary file, keep an earlier file of that name unchanged, and leave the study as it was.

Both need root (mount; dropping a capability root has): they skip cleanly otherwise. The helper itself,
:func:`mcqaudit.files.write_atomic`, is also tested without root (an injected error at the write)."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcqaudit.files import WriteFailed, write_atomic
from tests.helpers import mounted_tmpfs

ROOT = Path(__file__).resolve().parent.parent
ITEMS = ROOT / "sample_runs" / "items.jsonl"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
SETPRIV = shutil.which("setpriv")
NO_DAC = [SETPRIV or "setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all"]
OLD = "an earlier file that must survive\n"


def mcqaudit(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [*prefix, sys.executable, "-m", "mcqaudit", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def listing(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in folder.iterdir()}


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs with no space left, holding one earlier file per output name."""
    with mounted_tmpfs(tmp_path / "full", "2m") as mnt:
        for name in ("report.md", "reviews.csv", "prompts.jsonl"):
            (mnt / name).write_text(OLD, encoding="utf-8")
        with (mnt / "filler").open("wb") as fh, pytest.raises(OSError) as exc:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        assert exc.value.errno == errno.ENOSPC
        yield mnt


@pytest.fixture
def readonly_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder the command cannot write to (mode 555; the command runs without CAP_DAC_OVERRIDE)."""
    if not IS_ROOT or SETPRIV is None:
        pytest.skip("dropping root's CAP_DAC_OVERRIDE needs root and setpriv")
    folder = tmp_path / "readonly"
    folder.mkdir()
    for name in ("report.md", "reviews.csv", "prompts.jsonl"):
        (folder / name).write_text(OLD, encoding="utf-8")
        (folder / name).chmod(0o444)
    folder.chmod(0o555)
    try:
        yield folder
    finally:
        folder.chmod(0o755)


def commands(study: Path, folder: Path) -> dict[str, tuple[str, ...]]:
    return {
        "report.md": ("report", "--db", str(study), "--format", "md", "--bootstrap", "20", "--out", str(folder / "report.md")),
        "reviews.csv": ("reviews", "export", "--db", str(study), "--out", str(folder / "reviews.csv")),
        "prompts.jsonl": ("orient", str(ITEMS), "--out", str(folder / "prompts.jsonl")),
    }  # fmt: skip


def assert_clean_failure(proc: subprocess.CompletedProcess, out: Path, reason: str) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert f"error: cannot write {out}: {reason}; nothing was written" in proc.stderr, proc.stderr
    assert out.read_text(encoding="utf-8") == OLD  # the earlier file is untouched


def test_full_disk(ui_db: Path, full_disk: Path) -> None:
    before, study_before = listing(full_disk), digest(ui_db)
    for name, args in commands(ui_db, full_disk).items():
        assert_clean_failure(mcqaudit(*args), full_disk / name, "no space left on the device")
        assert listing(full_disk) == before, "a partial or temporary file was left behind"
    assert digest(ui_db) == study_before
    # with room again, the same commands write their files whole
    (full_disk / "filler").unlink()
    for name, args in commands(ui_db, full_disk).items():
        proc = mcqaudit(*args)
        assert proc.returncode == 0, proc.stderr
        assert (full_disk / name).read_text(encoding="utf-8") != OLD
    assert not [p for p in full_disk.iterdir() if p.name.endswith(".tmp")]


def test_readonly_folder(ui_db: Path, readonly_dir: Path) -> None:
    before, study_before = listing(readonly_dir), digest(ui_db)
    for name, args in commands(ui_db, readonly_dir).items():
        assert_clean_failure(mcqaudit(*args, prefix=tuple(NO_DAC)), readonly_dir / name, "permission denied")
        assert listing(readonly_dir) == before
    assert digest(ui_db) == study_before


def test_missing_folder_and_a_folder_as_target(ui_db: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "report.md"
    proc = mcqaudit("report", "--db", str(ui_db), "--format", "md", "--bootstrap", "0", "--out", str(missing))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"cannot write {missing}: its folder does not exist; nothing was written" in proc.stderr
    proc = mcqaudit("reviews", "export", "--db", str(ui_db), "--out", str(tmp_path))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"cannot write {tmp_path}: it is a folder" in proc.stderr


# ---- the helper, without root -------------------------------------------------------------------------


def test_write_atomic_replaces_whole_files(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    write_atomic(target, "one\n")
    write_atomic(target, ["two\n", "three\n"])
    assert target.read_text(encoding="utf-8") == "two\nthree\n"
    write_atomic(target, b"\x00bytes")
    assert target.read_bytes() == b"\x00bytes"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    assert oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EDQUOT, errno.EIO])
def test_write_atomic_cleans_up_after_an_error_mid_write(tmp_path: Path, err: int) -> None:
    target = tmp_path / "out.txt"
    target.write_text(OLD, encoding="utf-8")

    def failing(fh) -> None:  # half written, then the disk refuses
        fh.write("half a file")
        fh.flush()
        raise OSError(err, os.strerror(err))

    with pytest.raises(WriteFailed) as exc:
        write_atomic(target, failing)
    assert str(exc.value).startswith(f"cannot write {target}: ") and "nothing was written" in str(exc.value)
    assert target.read_text(encoding="utf-8") == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_write_atomic_cleans_up_after_an_interrupt(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"

    def interrupted(fh) -> None:
        fh.write("partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, interrupted)
    assert list(tmp_path.iterdir()) == []


def _inspect_study(tmp_path: Path) -> tuple[Path, Path]:
    """A study ingested from a real Inspect log, with one review to export as a score edit."""
    pytest.importorskip("inspect_ai.log")
    from mcqaudit.app.reviews import add_review
    from mcqaudit.store import Study

    log = tmp_path / "plain.eval"
    shutil.copy(ROOT / "tests" / "fixtures" / "inspect" / "plain.eval", log)
    db = tmp_path / "inspect.duckdb"
    assert mcqaudit("ingest", str(log), "--db", str(db), "--quiet").returncode == 0
    study = Study(db)
    row_id = study.query("SELECT row_id FROM graded_rows ORDER BY row_id LIMIT 1")[0][0]
    add_review(study, row_id, reviewer="ann", verdict="OTHER", note="refuses")
    return db, log


def test_inspect_export_on_a_full_disk_and_in_a_readonly_folder(
    tmp_path: Path, full_disk: Path, readonly_dir: Path
) -> None:
    db, log = _inspect_study(tmp_path)
    log_before, study_before = digest(log), digest(db)
    for folder, prefix, reason in (
        (full_disk, (), "no space left on the device"),
        (readonly_dir, tuple(NO_DAC), "permission denied"),
    ):
        before = listing(folder)
        out = folder / "audited.eval"
        proc = mcqaudit(
            "reviews", "export", "--db", str(db), "--inspect", str(log), "--out", str(out), prefix=prefix
        )
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert f"error: cannot write {out}: {reason}; nothing was written" in proc.stderr, proc.stderr
        assert listing(folder) == before  # no partial log, no temporary file
    assert (digest(log), digest(db)) == (log_before, study_before)
