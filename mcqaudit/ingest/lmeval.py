"""lm-evaluation-harness `samples_<task>_<time>.jsonl` files (`--log_samples`) → generation rows (docs/design.md §3).

The file has one line per (doc, filter), each repeating the doc and its raw responses (`resps`) beside
that filter's result (`filtered_resps`). A row is one generation of one doc:

- `generation`: each raw response of the doc's generate_until request (`resps[0]`; `repeats: k` gives k,
  numbered `sample` 0..k-1). Loglikelihood tasks generate no text and are refused.
- `parsed_letter` (the `user` parser): the chosen filter's result as one option letter (`B`, `(B)`, `B.`)
  or an option's exact text; lm-eval's `[invalid]` and anything else is none. The filter is `filter_name`
  (`--lm-eval-filter`), else the file's first. Every filter's raw result is kept in the row's metadata.
- `options`: the doc's `choices` (a list, or ARC's `{"text": [...]}`) or `options`, in the order given,
  which is the order that lm-eval's prompt shows (it never reorders options itself).
- `gold`: lm-eval's `target` (a letter, `(B)`, an index or an option text; one that names no option is
  refused), else, only when the record has no target, the doc's `answer`/`label`.
- `item_id`: the doc's `item_id`/`id`/`question_id`/`qid`, else lm-eval's `doc_id`; `question`: the doc's
  `question`/`query`/`input`/`problem`/`stem`, else the whole prompt lm-eval sent.
- `model` (and the arm, without `--arm`): `model_name` of the `results_<time>.json` beside the file.

Reasoning models: a response is kept verbatim, `<think>` block and all; ingest splits a leading block off as
the row's reasoning (docs/design.md §3), and one that never closes marks the row truncated. lm-eval records
no finish reason, token usage or separate reasoning in its sample records (0.4.13: `resps` is the text
alone), so the rows carry none: an API model's reasoning (`reasoning_content`) is not in the log, and a
reply that ran out of tokens while thinking (content null) is logged as an empty response. With the model
argument `think_end_token` (vLLM, Hugging Face, OpenAI-compatible and other models) lm-eval has already cut
the thinking off before it logs the response.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mcqaudit.ingest.errors import InputError, Problem
from mcqaudit.ingest.fields import Record
from mcqaudit.vocab import LETTERS

JsonObject = dict[str, Any]  # a JSON object as json.loads gives it

UNIT = "record"
_KEYS = ("doc_id", "doc", "resps", "filtered_resps")
ID_FIELDS = ("item_id", "id", "question_id", "qid")
QUESTION_FIELDS = ("question", "query", "input", "problem", "stem")
GOLD_FIELDS = ("answer", "label", "gold")
_SAMPLES_NAME = re.compile(r"^samples_.+_(?P<time>[^_]+)\.jsonl$")
_WRAP = " \t\n()[]{}*.:"


class _Bad(Exception):
    def __init__(self, field: str, reason: str):
        super().__init__(reason)
        self.field = field
        self.reason = reason


def looks_like_samples(path: Path) -> bool:
    """True when the file's first line is an lm-eval sample record."""
    try:
        with path.open("rb") as fh:
            first = fh.readline(4 << 20)
        obj = json.loads(first)
    except (OSError, ValueError, RecursionError):  # a line nested too deeply for Python is no sample record
        return False
    return isinstance(obj, dict) and all(k in obj for k in _KEYS)


def read_samples(
    path: Path, *, arm: str | None = None, filter_name: str | None = None
) -> tuple[str, list[Record]]:
    """(unit, one record per generation), numbered from 1 in file order and labelled with the line and
    doc_id they come from. Raises InputError for a file that is not an lm-eval samples file."""
    source = str(path)
    docs: dict[Any, list[tuple[int, JsonObject]]] = {}
    broken: list[tuple[int, Record]] = []
    filters: list[str] = []
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError([Problem(source, None, "file", f"cannot be read: {exc}")]) from None
    with fh:
        for line_no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except (ValueError, RecursionError) as exc:  # also bad UTF-8
                detail = "nested too deeply" if isinstance(exc, RecursionError) else getattr(exc, "msg", exc)
                why = f"not a JSON sample record, truncated or damaged ({detail})"
                broken.append((line_no, Record(0, f"line {line_no}", None, "line", why)))
                continue
            if not isinstance(rec, dict) or not all(k in rec for k in _KEYS):
                missing = [k for k in _KEYS if not isinstance(rec, dict) or k not in rec]
                if line_no == 1:
                    raise InputError(
                        [
                            Problem(
                                source,
                                None,
                                "file",
                                "not an lm-eval samples file (the first line lacks "
                                + ", ".join(missing)
                                + ")",
                            )
                        ]
                    )
                why = "not an lm-eval sample record: lacks " + ", ".join(missing)
                broken.append((line_no, Record(0, f"line {line_no}", None, "line", why)))
                continue
            name = rec["filter"] if isinstance(rec.get("filter"), str) else ""
            if name not in filters:
                filters.append(name)
            docs.setdefault(_key(rec["doc_id"]), []).append((line_no, rec))
    if filter_name is not None and filter_name not in filters:
        raise InputError(
            [
                Problem(
                    source,
                    None,
                    "--lm-eval-filter",
                    f"no filter {filter_name!r} in the file (it has: {', '.join(repr(f) for f in filters) or 'none'})",
                )
            ]
        )
    chosen = filter_name if filter_name is not None else (filters[0] if filters else "")
    model = _model_name(path)
    if model is None and arm is None and docs:
        # one line, not one "arm: missing required field" per sample
        raise InputError(
            [
                Problem(
                    source,
                    None,
                    "--arm",
                    "no results_<time>.json with a model_name beside the samples file, so the rows have no "
                    "arm: pass --arm NAME (or put the run's results file beside it)",
                )
            ]
        )
    out: list[tuple[int, Record]] = list(broken)
    for lines in docs.values():
        first_line, first = lines[0]
        where = f"line {first_line}, doc_id {first['doc_id']}"
        try:
            rows = _rows(lines, chosen=chosen, model=model, arm=arm)
        except _Bad as bad:
            out.append((first_line, Record(0, where, None, bad.field, bad.reason)))
            continue
        for k, row in enumerate(rows):
            out.append((first_line, Record(0, f"{where}, repeat {k}" if len(rows) > 1 else where, row)))
    out.sort(key=lambda t: t[0])  # file order (stable: repeats keep theirs)
    return UNIT, [r._replace(number=n) for n, (_, r) in enumerate(out, start=1)]


def _key(doc_id: Any) -> Any:
    return json.dumps(doc_id, sort_keys=True) if isinstance(doc_id, dict | list) else doc_id


def _model_name(path: Path) -> str | None:
    """`model_name` from the run's results file beside the samples file (same timestamp), if any."""
    m = _SAMPLES_NAME.match(path.name)
    if not m:
        return None
    results = path.with_name(f"results_{m['time']}.json")
    try:
        doc = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = doc.get("model_name") if isinstance(doc, dict) else None
    return name if isinstance(name, str) and name.strip() else None


def _rows(
    lines: list[tuple[int, JsonObject]], *, chosen: str, model: str | None, arm: str | None
) -> list[JsonObject]:
    _, rec = lines[0]
    doc = rec.get("doc")
    if not isinstance(doc, dict):
        raise _Bad("options", "the record's doc is not an object")
    options = _options(doc)
    prompt = _prompt(rec.get("arguments"))
    gens = _generations(rec.get("resps"))
    by_filter = {
        (r.get("filter") if isinstance(r.get("filter"), str) else ""): r.get("filtered_resps")
        for _, r in lines
    }
    picked = by_filter.get(chosen)
    if not isinstance(picked, list):
        picked = [picked]
    letters: list[str | None] = [None] * len(gens)
    # a filter that keeps one result per generation maps one to one; one that reduces several generations
    # to one (take_first, majority_vote) cannot be given to any single row
    if len(picked) == len(gens):
        letters = [_letter(v, options) for v in picked]
    item = next(
        (doc[k] for k in ID_FIELDS if isinstance(doc.get(k), str | int) and not isinstance(doc.get(k), bool)),
        None,
    )
    question = next((doc[k] for k in QUESTION_FIELDS if isinstance(doc.get(k), str) and doc[k].strip()), None)
    if question is None:
        if prompt is None:
            raise _Bad(
                "question", "the doc has no question field (" + ", ".join(QUESTION_FIELDS) + ") and no prompt"
            )
        question = prompt
    gold = _gold(rec.get("target"), doc, options)
    meta: dict[str, Any] = {
        "lm_eval": {
            "doc_id": rec.get("doc_id"),
            "filter": chosen,
            "filtered_resps": by_filter,
        }
    }
    rows = []
    for k, (gen, letter) in enumerate(zip(gens, letters, strict=True)):
        row: dict[str, Any] = {
            "item_id": str(item if item is not None else rec.get("doc_id")),
            "question": question,
            "options": options,
            "gold": gold,
            "generation": gen,
            "sample": k,
            "parsed_letter": letter,
            "metadata": meta,
        }
        if prompt is not None:
            row["prompt"] = prompt
        if model is not None:
            row["model"] = model
            if arm is None:
                row["arm"] = model
        rows.append(row)
    return rows


def _options(doc: JsonObject) -> list[str]:
    for key in ("choices", "options"):
        value = doc.get(key)
        if isinstance(value, dict) and isinstance(
            value.get("text"), list
        ):  # ARC: {"text": [...], "label": [...]}
            value = value["text"]
        if isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise _Bad("options", f"the doc's {key} are not all strings")
            return value
    raise _Bad("options", "the doc has no `choices` or `options` list")


def _prompt(arguments: Any) -> str | None:
    # lm-eval >= 0.4.4: {"gen_args_0": {"arg_0": context, "arg_1": gen_kwargs}}; earlier: [[context, kwargs]]
    if isinstance(arguments, dict) and arguments:
        first = next(iter(arguments.values()))
        if isinstance(first, dict) and isinstance(first.get("arg_0"), str):
            return str(first["arg_0"])
    if isinstance(arguments, list) and arguments and isinstance(arguments[0], list | tuple):
        context = arguments[0][0] if arguments[0] else None
        if isinstance(context, str):
            return context
    return None


def _generations(resps: Any) -> list[str]:
    if not isinstance(resps, list) or not resps:
        raise _Bad("generation", "the record has no responses (resps)")
    if len(resps) > 1 or not (isinstance(resps[0], list) and all(isinstance(r, str) for r in resps[0])):
        raise _Bad(
            "generation",
            "resps hold no generated text (a loglikelihood / multiple_choice task?): "
            "only generate_until tasks can be graded from their text",
        )
    if not resps[0]:
        raise _Bad("generation", "the record has no responses (resps)")
    return list(resps[0])


def _as_letter(value: str, n: int) -> str | None:
    s = value.strip(_WRAP).upper()  # upper-case first: a ligature such as 'ﬆ' becomes two letters
    return s if len(s) == 1 and s in LETTERS[:n] else None


def _letter(value: Any, options: list[str]) -> str | None:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str):
        return None
    got = _as_letter(value, len(options))
    if got is None and value.strip() in options:
        got = LETTERS[options.index(value.strip())]
    return got


def _gold(target: Any, doc: JsonObject, options: list[str]) -> str | int:
    """lm-eval's `target`, else (only when it has none) the doc's answer/label/gold: a target that names no
    option is refused, never replaced by the doc's own field, which may say something else."""
    n = len(options)
    given = (target,) if target is not None else tuple(doc.get(k) for k in GOLD_FIELDS)
    for value in given:
        if isinstance(value, list) and len(value) == 1:
            value = value[0]
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < n:
            return value
        if isinstance(value, str):
            letter = _as_letter(value, n)
            if letter is not None:
                return letter
            if value.strip() in options:
                return options.index(value.strip())
            if value.strip().isdigit() and int(value.strip()) < n:
                return int(value.strip())
    if target is not None:
        raise _Bad(
            "gold",
            f"target {target!r} is neither an option letter (A..{LETTERS[n - 1]}), an index nor an option text",
        )
    raise _Bad(
        "gold", "the record has no target, and the doc's " + "/".join(GOLD_FIELDS) + " names no option"
    )
