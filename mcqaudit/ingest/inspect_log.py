"""Inspect AI logs (`.eval` and `.json`) → generation rows (docs/design.md §3), one per sample and epoch.

An `.eval` log is a zip of JSON members (`header.json`, `samples/<id>_epoch_<n>.json`, ...) that recent
Inspect versions compress with Zstandard. It is read with the standard library, plus `zstandard` for those
members, rather than with `inspect_ai` itself: the format is plain JSON in a zip, and a grading tool
should not pull in an evaluation framework to read one.

What a row takes from a sample (and its last model event, the call that produced the answer; the calls a
scorer makes, in the sample's `scorers` span, such as mcq_scorer's judge, are not it):

- `options`: the order of the prompt the model was sent, found as Inspect's `multiple_choice` solver
  writes it (`A) text` lines); when no such block is there, the sample's `choices` (refused if the log
  shows a shuffle). A solver-level shuffle rewrites the logged messages and completion back to the dataset
  order; the model event keeps what the model saw.
- `generation`: that model event's raw output, never the rewritten completion; `prompt`: the last user
  message it was sent; `question`: the sample's `input`.
- `gold` and `parsed_letter` (the `choice()` scorer's `answer`, shown as parser `user`) are letters over
  the sample's `choices`; both are mapped through the option text into the displayed order.
- `reasoning`: the `ContentReasoning` blocks of that output's message, joined by a blank line (a redacted
  block gives its readable `summary`, or `[redacted reasoning]` when it has none); only when the message has
  such blocks, and then `generation` (its text content) is the answer as it is. A sample without them is
  left to ingest, which splits a leading `<think>` block off (docs/design.md §3).
- `finish_reason`: the output's `stop_reason` (`max_tokens` and `model_length` read as `length`; others
  kept as given; Inspect's `unknown`, its word for none, is left out); `usage`: its `input_tokens` and
  `output_tokens` as `prompt_tokens` and `completion_tokens`.
- `item_id`: the sample's `metadata.item_id`, else the sample id; `orientation`: from `metadata.orientation`
  (both written by `mcqaudit.inspect.orientations`; the label is of the sample's `choices`, and becomes the
  label of the order shown); without one ingest derives it; `sample`: epoch − 1; `model` (and the arm,
  without `--arm`): the eval's model; `metadata`: the sample's metadata.
- beside the row (`Record.scored`): the metadata of each `mcq_scorer` score of the sample (marked by
  `SCORE_KEY`), which ingest stores as judge verdicts (`app/scored.py`); `Record.sample_id`: the sample's
  id, for `reviews export --inspect`.
"""

from __future__ import annotations

import io
import json
import re
import struct
import zipfile
import zlib
from pathlib import Path
from typing import Any

from mcqaudit import orient
from mcqaudit.ingest.errors import InputError, Problem
from mcqaudit.ingest.fields import Record
from mcqaudit.reasoning import normalise_finish_reason
from mcqaudit.vocab import LETTERS

JsonObject = dict[str, Any]  # a JSON object as json.loads gives it

UNIT = "sample"
_ZSTD = 93  # zip compression method of Zstandard
_ATTACHMENT = "attachment://"
_SAMPLE_MEMBER = re.compile(r"^samples/(.+)_epoch_(\d+)\.json$")
_JSON_LOG_HEAD = re.compile(rb'^\s*\{\s*"version"\s*:\s*\d+\s*,\s*"status"\s*:')
REDACTED = "[redacted reasoning]"  # a redacted ContentReasoning block with no readable summary
_STOP_UNKNOWN = "unknown"  # Inspect's stop_reason when the provider gave none


class _Bad(Exception):
    """A sample that cannot give a row: (field, reason)."""

    def __init__(self, field: str, reason: str):
        super().__init__(reason)
        self.field = field
        self.reason = reason


def looks_like_json_log(path: Path) -> bool:
    """True for an Inspect `.json` log (one JSON document, which Inspect starts with version and status)."""
    try:
        with path.open("rb") as fh:
            return bool(_JSON_LOG_HEAD.match(fh.read(256)))
    except OSError:
        return False


def read_log(path: Path, *, arm: str | None = None) -> tuple[str, list[Record]]:
    """(unit, one record per sample). Records count samples from 1 in the log's order (epoch, then dataset
    order), labelled `id arith-7, epoch 1`. Raises InputError for a log that cannot be read at all."""
    source = str(path)
    if path.suffix.lower() == ".eval":
        header, samples = _read_eval(path)
    else:
        header, samples = _read_json(path)
    ev = _obj(header.get("eval"))
    model = ev.get("model") if isinstance(ev.get("model"), str) else None
    ids = _obj(ev.get("dataset")).get("sample_ids")
    if not isinstance(ids, list):
        ids = []
    shuffled_plan = _plan_shuffles(header)
    order = {str(i): k for k, i in enumerate(ids)}
    if not samples:
        raise InputError(
            [
                Problem(
                    source,
                    None,
                    "file",
                    "the log has no samples (written with log_samples=False, or no sample finished)",
                )
            ]
        )
    if arm is None and not (model and model.strip()):
        raise InputError(
            [
                Problem(
                    source, None, "--arm", "the log names no model, so its rows have no arm: pass --arm NAME"
                )
            ]
        )
    samples.sort(
        key=lambda s: (_int(s.get("epoch"), 1), order.get(str(s.get("id")), len(order)), str(s.get("id")))
    )
    out: list[Record] = []
    for n, s in enumerate(samples, start=1):
        label = f"id {s.get('id')}, epoch {s.get('epoch')}"
        sid = s.get("id") if isinstance(s.get("id"), str | int) else None
        try:
            row = _row(s, model=model, arm=arm, shuffled_plan=shuffled_plan)
            out.append(Record(n, label, row, sample_id=sid, scored=_scored(s)))
        except _Bad as bad:
            out.append(Record(n, label, None, bad.field, bad.reason, sample_id=sid))
    return UNIT, out


# ------------------------------------------------------------------------------------------- reading
def _read_json(path: Path) -> tuple[JsonObject, list[JsonObject]]:
    try:
        with path.open("rb") as fh:
            doc = json.load(fh)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InputError(
            [Problem(str(path), None, "file", f"not a readable Inspect JSON log: {why}")]
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("eval"), dict):
        raise InputError([Problem(str(path), None, "file", "not an Inspect log (no `eval` object)")])
    samples = doc.pop("samples", None) or []
    if not isinstance(samples, list) or not all(isinstance(s, dict) for s in samples):
        raise InputError([Problem(str(path), None, "file", "`samples` is not a list of sample objects")])
    return doc, samples


def _read_eval(path: Path) -> tuple[JsonObject, list[JsonObject]]:
    source = str(path)
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError([Problem(source, None, "file", f"cannot be read: {exc}")]) from None
    with fh:
        try:
            zf = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, OSError) as exc:
            raise InputError(
                [
                    Problem(
                        source, None, "file", f"not a readable Inspect .eval log (not a zip archive: {exc})"
                    )
                ]
            ) from None
        with zf:
            names = {i.filename: i for i in zf.infolist()}
            head_name = "header.json" if "header.json" in names else "_journal/start.json"
            if head_name not in names:
                raise InputError(
                    [
                        Problem(
                            source,
                            None,
                            "file",
                            "not an Inspect .eval log (no header.json or _journal/start.json)",
                        )
                    ]
                )
            header = _member_json(zf, fh, names[head_name], source)
            samples = []
            for name, info in names.items():
                if _SAMPLE_MEMBER.match(name):
                    s = _member_json(zf, fh, info, source)
                    if not isinstance(s, dict):
                        raise InputError([Problem(source, None, "file", f"{name} is not a sample object")])
                    samples.append(s)
    if not isinstance(header, dict):
        raise InputError([Problem(source, None, "file", f"{head_name} is not a JSON object")])
    return header, samples


def _member_json(zf: zipfile.ZipFile, fh: io.BufferedReader, info: zipfile.ZipInfo, source: str) -> Any:
    try:
        data = _member_bytes(zf, fh, info)
        return json.loads(data)
    except RecursionError:
        raise InputError(
            [Problem(source, None, "file", f"{info.filename} is nested too deeply to read")]
        ) from None
    except (OSError, ValueError, zipfile.BadZipFile, NotImplementedError, EOFError) as exc:
        # json.JSONDecodeError and UnicodeDecodeError are ValueErrors; zlib.error is not
        raise InputError([Problem(source, None, "file", f"{info.filename} cannot be read: {exc}")]) from None
    except zlib.error as exc:
        raise InputError([Problem(source, None, "file", f"{info.filename} cannot be read: {exc}")]) from None


def _member_bytes(zf: zipfile.ZipFile, fh: io.BufferedReader, info: zipfile.ZipInfo) -> bytes:
    if info.compress_type != _ZSTD:
        return zf.read(info)  # stored or deflated (older Inspect versions)
    try:
        import zstandard
    except ImportError:
        try:
            return zf.read(info)  # Python >= 3.14 reads Zstandard members itself
        except NotImplementedError:
            raise ValueError(
                "the member is Zstandard-compressed and the `zstandard` package is not installed"
            ) from None
    if info.flag_bits & 0x1:
        raise ValueError("encrypted member")
    # read the compressed bytes after the local header and decompress them ourselves; a member may hold
    # several Zstandard frames (Inspect caps the input per frame)
    fh.seek(info.header_offset)
    local = fh.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise zipfile.BadZipFile("bad local file header")
    name_len, extra_len = struct.unpack("<HH", local[26:30])
    fh.seek(info.header_offset + 30 + name_len + extra_len)
    raw = fh.read(info.compress_size)
    if len(raw) != info.compress_size:
        raise EOFError("the archive is truncated")
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True) as r:
            data = r.read()
    except zstandard.ZstdError as exc:
        raise ValueError(f"corrupt Zstandard data ({exc})") from None
    if zlib.crc32(data) != info.CRC or len(data) != info.file_size:
        raise ValueError("CRC or size check failed (the archive is damaged)")
    return data


# ------------------------------------------------------------------------------------------- a sample
def _row(s: JsonObject, *, model: str | None, arm: str | None, shuffled_plan: bool) -> JsonObject:
    if s.get("error"):
        err = s["error"]
        msg = err.get("message") if isinstance(err, dict) else err
        raise _Bad("generation", f"the sample ended in an error: {str(msg)[:200]}")
    sid = s.get("id")
    if not isinstance(sid, str | int) or isinstance(sid, bool) or str(sid).strip() == "":
        raise _Bad("item_id", "the sample has no id")
    choices = s.get("choices")
    if not choices:
        raise _Bad("options", "the sample has no choices (not a multiple-choice sample)")
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise _Bad("options", "the sample's choices are not a list of strings")
    if len(choices) > len(LETTERS):
        raise _Bad("options", f"at most {len(LETTERS)} options, got {len(choices)}")
    attachments = _obj(s.get("attachments"))
    question = _question(s.get("input"), attachments)

    # the model call: what the model was sent and what it said
    event = _last_model_event(s)
    sent: list[JsonObject] = _event_input(event, s, attachments) if event is not None else []
    user_texts = [_text(m, attachments) for m in sent if isinstance(m, dict) and m.get("role") == "user"]
    shown = None
    for text in reversed(user_texts):
        shown = _displayed_order(text, choices)
        if shown is not None:
            break
    shuffled = shuffled_plan or _score_says_shuffled(s)
    if shown is None:
        if shuffled:
            raise _Bad(
                "options",
                "the choices were shuffled, and the prompt sent to the model does not list them as Inspect's "
                "multiple_choice solver does ('A) text' lines), so the order the model saw is unknown",
            )
        shown = list(choices)
    if event is not None:
        output = event.get("output")
    elif not shuffled:
        output = s.get("output")
    else:
        raise _Bad("generation", "no model call in the sample's events (the logged completion was rewritten)")
    generation = _completion(output, attachments)
    if generation is None:
        raise _Bad("generation", "the model call has no output text")

    gold_letter = _single_letter(s.get("target"))
    if gold_letter is None:
        raise _Bad("gold", f"target {s.get('target')!r} is not one option letter")
    gold_index = LETTERS.index(gold_letter)
    if gold_index >= len(choices):
        raise _Bad("gold", f"target {gold_letter!r} is out of range for {len(choices)} choices")

    meta = s.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    row: dict[str, Any] = {
        "item_id": _item_id(meta, sid),
        "question": question,
        "options": shown,
        "gold": shown.index(choices[gold_index]) if choices[gold_index] in shown else gold_index,
        "generation": generation,
        "sample": max(_int(s.get("epoch"), 1) - 1, 0),
        "parsed_letter": _choice_answer(s, choices, shown),
    }
    if arm is None and model:
        row["arm"] = model
    if model:
        row["model"] = model
    if user_texts:
        row["prompt"] = user_texts[-1]
    row.update(_output_extras(_obj(output), attachments))
    orientation = _orientation(meta.get("orientation"), choices, shown)
    if orientation is not None:
        row["orientation"] = orientation
    if meta:
        row["metadata"] = meta
    return row


def _item_id(meta: JsonObject, sid: str | int) -> str:
    """The item: ``metadata.item_id`` (what mcqaudit.inspect.orientations writes), else the sample id."""
    given = meta.get("item_id")
    if isinstance(given, str | int) and not isinstance(given, bool) and str(given).strip():
        return str(given)
    return str(sid)


def _orientation(label: Any, choices: list[str], shown: list[str]) -> str | None:
    """The orientation of the order the model saw, from ``metadata.orientation`` (the label of the sample's
    ``choices``, as mcqaudit.inspect.orientations writes it); None when the metadata has none. A label that
    does not fit the choices is kept as given, for ingest to refuse with its reason."""
    if not isinstance(label, str) or not label.strip():
        return None
    try:
        return orient.derive(orient.unapply(choices, label), shown)
    except orient.OrientationError:
        return label


def _question(value: Any, attachments: JsonObject) -> str:
    if isinstance(value, str):
        return _resolve(value, attachments)
    if isinstance(value, list):
        users = [_text(m, attachments) for m in value if isinstance(m, dict) and m.get("role") == "user"]
        if users:
            return users[-1]
    raise _Bad("question", "the sample's input is neither text nor a list of messages with a user message")


def _last_model_event(s: JsonObject) -> JsonObject | None:
    """The last model call of the solvers: a scorer's own calls (a model-graded scorer's, mcq_scorer's judge)
    are in a `scorers` span and are not the answer."""
    events = s.get("events")
    if not isinstance(events, list):
        return None
    spans = {
        e.get("id"): (e.get("type"), e.get("parent_id"))
        for e in events
        if isinstance(e, dict) and e.get("event") == "span_begin"
    }
    for e in reversed(events):
        if isinstance(e, dict) and e.get("event") == "model" and not _in_scoring(e.get("span_id"), spans):
            return e
    return None


def _in_scoring(span: Any, spans: dict[Any, tuple[Any, Any]]) -> bool:
    seen: set[Any] = set()
    while span is not None and span in spans and span not in seen:
        seen.add(span)
        kind, span = spans[span]
        if kind in ("scorers", "scorer"):
            return True
    return False


# how mcqaudit.inspect's mcq_scorer marks its scores' metadata (mcqaudit/inspect.py SCORE_KEY)
SCORE_KEY = "mcqaudit_score"


def _scored(s: JsonObject) -> tuple[JsonObject, ...]:
    """The metadata of each mcq_scorer score of the sample, by score name."""
    scores = s.get("scores")
    if not isinstance(scores, dict):
        return ()
    out = []
    for name in sorted(scores, key=str):
        meta = _obj(_obj(scores[name]).get("metadata"))
        if meta.get(SCORE_KEY) is not None:
            out.append({**meta, "score_name": str(name)})
    return tuple(out)


def _event_input(event: JsonObject, s: JsonObject, attachments: JsonObject) -> list[JsonObject]:
    """The messages of a model event; recent Inspect versions store them once per sample in
    `events_data.messages` and give each event ranges into that pool (`input_refs`)."""
    given = event.get("input")
    refs = event.get("input_refs")
    if refs and not given:
        pool = _obj(s.get("events_data")).get("messages")
        if not isinstance(pool, list):
            pool = []
        out: list[JsonObject] = []
        for ref in refs:
            if isinstance(ref, list | tuple) and len(ref) == 2:
                out.extend(m for m in pool[int(ref[0]) : int(ref[1])] if isinstance(m, dict))
        return out
    return [m for m in given or [] if isinstance(m, dict)]


def _resolve(text: str, attachments: JsonObject) -> str:
    # long texts are stored once per sample under `attachments` and referenced as attachment://<hash>
    if text.startswith(_ATTACHMENT):
        got = attachments.get(text[len(_ATTACHMENT) :])
        if isinstance(got, str):
            return got
    return text


def _text(message: JsonObject, attachments: JsonObject) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return _resolve(content, attachments)
    if isinstance(content, list):
        return "\n".join(
            _resolve(c["text"], attachments)
            for c in content
            if isinstance(c, dict) and c.get("type") == "text" and isinstance(c.get("text"), str)
        )
    return ""


def _completion(output: Any, attachments: JsonObject) -> str | None:
    if not isinstance(output, dict):
        return None
    done = output.get("completion")
    if isinstance(done, str):
        return _resolve(done, attachments)
    choices = output.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        msg = choices[0].get("message")
        if isinstance(msg, dict):
            return _text(msg, attachments)
    return None


def _output_extras(output: JsonObject, attachments: JsonObject) -> JsonObject:
    """`reasoning`, `finish_reason` and `usage` of a model output, each only when the log has it."""
    extras: JsonObject = {}
    choices = output.get("choices")
    choice0 = _obj(choices[0]) if isinstance(choices, list) and choices else {}
    reasoning = _reasoning(_obj(choice0.get("message")), attachments)
    if reasoning is not None:
        extras["reasoning"] = reasoning
    stop = choice0.get("stop_reason", output.get("stop_reason"))
    if isinstance(stop, str) and stop.strip() and stop.strip() != _STOP_UNKNOWN:
        extras["finish_reason"] = normalise_finish_reason(stop)
    usage = output.get("usage")
    if isinstance(usage, dict):
        counts = [usage.get("input_tokens"), usage.get("output_tokens")]
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts):
            raise _Bad("usage", f"input_tokens and output_tokens are not token counts: {counts}")
        extras["usage"] = {"prompt_tokens": counts[0], "completion_tokens": counts[1]}
    return extras


def _reasoning(message: JsonObject, attachments: JsonObject) -> str | None:
    """The message's `ContentReasoning` blocks as one text, in order, joined by a blank line; None when it
    has none. A redacted block is its readable summary, if Inspect kept one, else says it was redacted."""
    content = message.get("content")
    if not isinstance(content, list):
        return None
    blocks = [c for c in content if isinstance(c, dict) and c.get("type") == "reasoning"]
    if not blocks:
        return None
    parts: list[str] = []
    for block in blocks:
        text, summary = block.get("reasoning"), block.get("summary")
        text = _resolve(text, attachments) if isinstance(text, str) else ""
        summary = _resolve(summary, attachments) if isinstance(summary, str) else ""
        if block.get("redacted") is True:
            text = summary if summary.strip() else REDACTED
        elif not text.strip():
            text = summary
        if text.strip():
            parts.append(text.strip())
    return "\n\n".join(parts)


def _displayed_order(prompt: str, choices: list[str]) -> list[str] | None:
    """The options in the order a prompt lists them as `A) text` lines (Inspect's `answer_options`), or None.

    A depth-first search over which option stands at each letter: the block so far must occur in the prompt,
    and the last line must end there, so `C) 7` cannot match inside `C) 70`.
    """
    n = len(choices)

    def search(block: str, left: list[str]) -> list[str] | None:
        i = n - len(left)
        for k, text in enumerate(left):
            line = f"{LETTERS[i]}) {text}"
            cand = f"{block}\n{line}" if block else line
            if cand not in prompt:
                continue
            rest = left[:k] + left[k + 1 :]
            if not rest:
                if prompt.endswith(cand) or f"{cand}\n" in prompt:
                    return [text]
                continue
            tail = search(cand, rest)
            if tail is not None:
                return [text, *tail]
        return None

    if len(set(choices)) != n:
        return None
    return search("", list(choices))


def _plan_shuffles(header: JsonObject) -> bool:
    plan = header.get("plan")
    steps = plan.get("steps") if isinstance(plan, dict) else None
    for step in steps or []:
        params = step.get("params") if isinstance(step, dict) else None
        if isinstance(params, dict) and params.get("shuffle") not in (None, False, "False", "false"):
            return True
    return False


def _score_says_shuffled(s: JsonObject) -> bool:
    score = _choice_score(s)
    expl = score.get("explanation") if score else None
    return isinstance(expl, str) and expl.startswith("Choices were shuffled")


def _choice_score(s: JsonObject) -> JsonObject | None:
    scores = s.get("scores")
    if not isinstance(scores, dict):
        return None
    for name, score in scores.items():
        if (name == "choice" or name.endswith("/choice")) and isinstance(score, dict):
            return score
    return None


def _choice_answer(s: JsonObject, choices: list[str], shown: list[str]) -> str | None:
    """The letter Inspect's own `choice()` scorer read, in displayed order; None when it read none or several."""
    score = _choice_score(s)
    letter = _single_letter(score.get("answer")) if score else None
    if letter is None or LETTERS.index(letter) >= len(choices):
        return None
    text = choices[LETTERS.index(letter)]
    return LETTERS[shown.index(text)] if text in shown else None


def _single_letter(value: Any) -> str | None:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, str):
        s = value.strip().upper()  # upper-case first: a ligature such as 'ﬆ' becomes two letters
        if len(s) == 1 and s in LETTERS:
            return s
    return None


def _obj(value: Any) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
