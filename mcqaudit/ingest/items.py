"""Reading an items file (canonical order, gold): the input of `orient` and of `ingest --items`."""

from __future__ import annotations

import json
from pathlib import Path

from mcqaudit.ingest.errors import InputError, Problem
from mcqaudit.orient import Item, gold_index
from mcqaudit.vocab import MAX_OPTIONS


def read_items(path: str | Path, cap: int = 200) -> list[Item]:
    """All items of a JSONL items file, or an InputError listing every problem (``FILE:LINE: field: reason``)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise InputError([Problem(str(p), None, "file", exc.strerror or str(exc))]) from None
    problems: list[Problem] = []
    items: list[Item] = []
    seen: dict[str, int] = {}
    lines = raw.split(b"\n")
    if not raw.strip():
        raise InputError([Problem(str(p), None, "file", "the file is empty")])
    for no, bline in enumerate(lines, start=1):
        if not bline.strip():
            continue
        try:
            line = bline.decode("utf-8")
        except UnicodeDecodeError as exc:
            problems.append(
                Problem(
                    str(p),
                    no,
                    "line",
                    f"not valid UTF-8 (byte {bline[exc.start]:#04x} at column {exc.start + 1})",
                )
            )
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(Problem(str(p), no, "line", f"not valid JSON ({exc.msg} at column {exc.colno})"))
            continue
        except RecursionError:
            problems.append(Problem(str(p), no, "line", "nested too deeply to read"))
            continue
        if not isinstance(obj, dict):
            problems.append(Problem(str(p), no, "line", "not a JSON object"))
            continue
        before = len(problems)

        def bad(field: str, reason: str, _no: int = no) -> None:
            problems.append(Problem(str(p), _no, field, reason))

        item_id, question, options = obj.get("item_id"), obj.get("question"), obj.get("options")
        for name, val in (("item_id", item_id), ("question", question)):
            if val is None:
                bad(name, "missing required field")
            elif not isinstance(val, str) or not val.strip():
                bad(name, "must be a non-empty string")
        if options is None:
            bad("options", "missing required field")
        elif not isinstance(options, list) or not all(isinstance(o, str) for o in options):
            bad("options", "must be a list of option texts (strings)")
        elif len(options) < 2:
            bad("options", f"needs at least 2 options, got {len(options)}")
        elif len(options) > MAX_OPTIONS:
            bad("options", f"at most {MAX_OPTIONS} options, got {len(options)}")
        elif len(set(options)) < len(options):
            dups = sorted({o for o in options if options.count(o) > 1})
            bad("options", f"duplicate option texts: {', '.join(dups)}")
        elif any(not o.strip() for o in options):
            bad("options", "an option text is empty")
        if "gold" not in obj:
            bad("gold", "missing required field")
        metadata = obj.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            bad("metadata", "must be an object")
        if len(problems) > before:
            continue
        assert isinstance(item_id, str) and isinstance(question, str) and isinstance(options, list)
        try:
            gi = gold_index(obj["gold"], len(options))
        except ValueError as exc:
            bad("gold", str(exc))
            continue
        if item_id in seen:
            bad("item_id", f"duplicate item {item_id!r} (first at line {seen[item_id]})")
            continue
        seen[item_id] = no
        items.append(Item(item_id, question, tuple(options), gi, metadata))
        if len(problems) >= cap:
            break
    if problems:
        raise InputError(problems)
    return items
