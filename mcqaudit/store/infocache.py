"""``info``'s cache beside a study (``<study>.info.json``): what ``mcqaudit info`` last computed from the file,
valid only while the file is exactly as it was then. No duckdb: a hit is read without opening the study.

A study changes only through DuckDB, and every committed change writes the study file or its write-ahead
log (``<study>.wal``): their size, modification and change times and inode are the cache's *stamp*, taken
after the study was opened (migrated, its journal replayed) and before it was read, and checked again
after; a cache is written only when the two agree, and read only when the stamp still matches and the code
that wrote it is the code reading it (:func:`code_key`: the package's source files, by name, size and
modification time). A folder that cannot be written keeps no cache; anything unreadable is a miss.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import secrets
from pathlib import Path
from typing import Any

from mcqaudit.store.sidecars import info_cache_path, wal_path

FORMAT = 2
Stamp = list[list[int] | None]


def stamp(study_path: str | Path) -> Stamp:
    """The study file's and its write-ahead log's size, mtime, ctime (ns) and inode (None: no such file)."""
    out: Stamp = []
    p = Path(study_path)
    for f in (p, wal_path(p)):
        try:
            st = os.stat(f)
        except FileNotFoundError:
            out.append(None)
            continue
        out.append([st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
    return out


@functools.cache
def code_key() -> str:
    """The package's source files (relative name, size, mtime): any change to the code is a new key."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(str(FORMAT).encode())
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                st = os.stat(os.path.join(dirpath, name))
                h.update(
                    f"{os.path.relpath(os.path.join(dirpath, name), root)}:{st.st_size}:{st.st_mtime_ns};".encode()
                )
    return h.hexdigest()[:32]


def _read(study_path: str | Path, at: Stamp | None) -> dict[str, Any] | None:
    try:
        data = json.loads(info_cache_path(study_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("code") != code_key():
        return None
    if data.get("stamp") != (stamp(study_path) if at is None else at):
        return None
    return data


def load(study_path: str | Path) -> dict[str, Any] | None:
    """The cached payload, when the cache was written by this code for the study file as it is now."""
    data = _read(study_path, None)
    payload = data.get("payload") if data else None
    return payload if isinstance(payload, dict) else None


def load_state(study_path: str | Path, at: Stamp | None) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The cached payload and the counts it was made from (what a writer brings up to date), when the cache
    was written by this code for the study file at stamp ``at`` (None: not known, so no cache)."""
    if at is None:
        return None
    data = _read(study_path, at)
    if data is None:
        return None
    payload, state = data.get("payload"), data.get("state")
    return (payload, state) if isinstance(payload, dict) and isinstance(state, dict) else None


def save(
    study_path: str | Path, taken: Stamp, payload: dict[str, Any], state: dict[str, Any] | None = None
) -> bool:
    """Keep ``payload`` (and ``state``, the counts it was made from), computed from the study as it was at
    stamp ``taken``, unless the file has changed since (then nothing is kept). Written whole or not at all; a
    folder that cannot be written keeps none."""
    if stamp(study_path) != taken:
        return False
    return write_whole(
        info_cache_path(study_path), {"code": code_key(), "stamp": taken, "payload": payload, "state": state}
    )


def write_whole(path: Path, data: dict[str, Any]) -> bool:
    """``data`` as JSON at ``path``, written whole (a temporary file beside it, then renamed) or not at all:
    False when the folder cannot be written (nothing left behind). The temporary file is this call's own
    (two threads of one process, e.g. two dashboard sessions, may keep a report at once)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        return False
    return True


def drop(study_path: str | Path) -> None:
    """Remove the cache (a write that could not bring it up to date; its stamp would say so all the same)."""
    with contextlib.suppress(OSError):
        info_cache_path(study_path).unlink(missing_ok=True)
