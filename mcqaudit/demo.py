"""The demo study: ``sample_runs/demo.duckdb`` built from the committed demo inputs, on first use.

The build is the real path a user takes — ingest ``sample_runs/generations.jsonl`` with
``--items sample_runs/items.jsonl``, then ``grade`` against the stand-in judge (started in-process on
127.0.0.1), control arm ``base`` — so the demo shows exactly what the tool computes. The stand-in is a
heuristic, not an LLM, and the study says so everywhere its verdicts are shown.

Idempotent and safe to call from two processes at once: the study is built into a temporary file under an
exclusive file lock and renamed into place, and a finished study records the hash of the inputs it was
built from (and the judge fingerprint it was graded under), so it is rebuilt only when they change (or with
``force``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mcqaudit.store.sidecars import discard_study, info_cache_path, report_cache_path, wal_path
from mcqaudit.vocab import STANDIN_MODEL

if TYPE_CHECKING:
    from mcqaudit.grade import Reporter

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample_runs"
DEMO_DB = SAMPLE_DIR / "demo.duckdb"
GENERATIONS = SAMPLE_DIR / "generations.jsonl"
ITEMS = SAMPLE_DIR / "items.jsonl"
CONTROL_ARM = "base"

# study_meta keys the demo sets (the dashboard reads DEMO_KEY for its provenance banner)
DEMO_KEY = "demo"
DEMO_INPUTS_KEY = "demo_inputs"


class DemoError(Exception):
    """The demo study cannot be built (inputs missing, grading failed)."""


def inputs_hash(generations: Path = GENERATIONS, items: Path = ITEMS) -> str:
    """The inputs a demo study is built from: the two files and the stand-in's judge fingerprint, so that a
    new judge template (a new fingerprint) rebuilds a demo graded under the old one."""
    from mcqaudit.judge.prompts import JudgeConfig

    h = hashlib.sha256(JudgeConfig(model=STANDIN_MODEL).fingerprint.encode())
    for p in (generations, items):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def is_demo(study_meta: Mapping[str, str | None]) -> bool:
    return (study_meta.get(DEMO_KEY) or "").lower() == "true"


def _current(path: Path, digest: str) -> bool:
    if not path.exists():
        return False
    from mcqaudit.app.study import StudyError, open_study

    try:
        study = open_study(path)
        return study.get_meta(DEMO_INPUTS_KEY) == digest and study.get_meta(DEMO_KEY) == "true"
    except StudyError:
        return False


@contextlib.contextmanager
def _build_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on the study's folder (no lock file left behind in the checkout)."""
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def build_demo(
    path: str | Path = DEMO_DB,
    *,
    generations: str | Path = GENERATIONS,
    items: str | Path = ITEMS,
    force: bool = False,
    reporter: Reporter | None = None,
) -> Path:
    """Build the demo study at ``path`` unless an up-to-date one is there; return its path."""
    path = Path(path)
    gens, its = Path(generations), Path(items)
    for p in (gens, its):
        if not p.exists():
            raise DemoError(f"{p}: demo input missing (regenerate with `python sample_runs/simulate.py`)")
    digest = inputs_hash(gens, its)
    if not force and _current(path, digest):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(path):
        if not force and _current(path, digest):  # another process built it while we waited
            return path
        tmp = path.with_name(f".{path.stem}.building-{os.getpid()}.duckdb")
        discard_study(tmp)
        try:
            _build(tmp, gens, its, digest, reporter)
            os.replace(tmp, path)
            # the replaced study's WAL and caches (their stamp is that file's); its lock stays: others share it
            for p in (wal_path(path), info_cache_path(path), report_cache_path(path)):
                p.unlink(missing_ok=True)
        finally:  # nothing of the building file is left beside the study: its locks and caches neither
            discard_study(tmp)
    return path


def _build(path: Path, gens: Path, items: Path, digest: str, reporter: Reporter | None) -> None:
    from mcqaudit.app.grade import GradeOptions, JudgeConfig, grade
    from mcqaudit.app.ingest import ingest_file
    from mcqaudit.app.study import open_study
    from mcqaudit.standin.server import StandinOptions, StandinServer

    study = open_study(path, create=True)
    ingest_file(study, gens, items_path=items, control=CONTROL_ARM)
    with StandinServer(StandinOptions()) as judge:
        options = GradeOptions(
            config=JudgeConfig(model=STANDIN_MODEL, base_url=judge.base_url), base_url=judge.base_url
        )
        summary = grade(study, options, reporter=reporter)
    if summary.exit_code != 0:
        raise DemoError("grading the demo study failed:\n" + "\n".join(summary.lines()))
    with study.write() as con:
        from mcqaudit.store.db import set_meta

        set_meta(con, "control_arm", CONTROL_ARM)
        set_meta(con, DEMO_KEY, "true")
        set_meta(con, DEMO_INPUTS_KEY, digest)
    with study.connect() as con:
        con.execute("CHECKPOINT")
