"""The Inspect AI extension (DESIGN §10, docs/design.md §10): mcqaudit's audit inside an Inspect task.

    from mcqaudit.inspect import orientations, mcq_scorer

    Task(dataset=orientations(dataset), solver=multiple_choice(), scorer=mcq_scorer())

- :func:`orientations` expands a multiple-choice dataset into every orientation of a scheme (mcqaudit's own
  `orient` module): each sample once per order of its choices, the target remapped, ``metadata`` ``item_id``
  and ``orientation`` (the canonical letters in displayed order, as everywhere in mcqaudit).
- :func:`mcq_scorer` grades as `mcqaudit grade` does (docs/design.md §4, §5): a blank answer is OTHER by
  rule; the strict pre-filter resolves a bare answer; anything else goes to the three-way judge with the same
  system prompt, template, reply parsing and fingerprint (`judge/prompts.py`, `judge/replies.py`), on the
  model given as ``model=``, else on the model of Inspect's ``grader`` role (required: the judge is part of
  the metric, so it is never the model under evaluation by default). An illegal reply is re-asked once, as
  `grade` does; still illegal, it is not a verdict: the score is Inspect's *unscored* score
  (``Score.unscored``, value NaN, ``reason`` ``grader_failed``), which Inspect's metrics leave out, with
  ``judge_status`` ``error`` and the raw replies in its metadata. Nothing is coerced.
- The scorer reads the model's *answer*: the completion (a reasoning model's ``ContentReasoning`` is not in
  it), with a leading ``<think>`` block split off when the message has no reasoning content
  (`reasoning.split_reasoning`), exactly as `mcqaudit ingest` reads the same sample.

A score's value is ``C``, ``I`` or ``N`` (Inspect's NOANSWER, for OTHER), its ``answer`` the picked letter,
its ``explanation`` the judge's reply (or what decided without one), and its ``metadata`` everything
`mcqaudit ingest` needs to store the verdict as a judge verdict under its fingerprint, with no second
grading (see :data:`SCORE_VERSION` and :func:`_metadata`).

The package registers this module as an Inspect extension (entry point group ``inspect_ai``, name
``mcqaudit``), so ``inspect score LOG --scorer mcqaudit/mcq_scorer`` and task files that name
``mcqaudit/mcq_scorer`` find it. A face (tests/test_layers.py): the pure core and Inspect only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

try:
    from inspect_ai.dataset import Dataset, MemoryDataset, Sample
    from inspect_ai.model import (
        ChatMessage,
        ChatMessageSystem,
        ChatMessageUser,
        ContentReasoning,
        GenerateConfig,
        Model,
        ModelOutput,
        get_model,
    )
    from inspect_ai.scorer import (
        CORRECT as INSPECT_CORRECT,
    )
    from inspect_ai.scorer import (
        INCORRECT as INSPECT_INCORRECT,
    )
    from inspect_ai.scorer import (
        NOANSWER,
        Metric,
        SampleScore,
        Score,
        Scorer,
        Target,
        accuracy,
        metric,
        scorer,
        stderr,
        value_to_float,
    )
    from inspect_ai.solver import TaskState
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError(
        "mcqaudit.inspect is the Inspect AI extension and needs Inspect AI: pip install 'mcqaudit[inspect]'"
    ) from exc

from mcqaudit import orient
from mcqaudit.judge.prompts import SYSTEM_PROMPT, JudgeConfig, prompt_hash, render
from mcqaudit.judge.replies import ParsedReply, cut_off, judged, parse_reply
from mcqaudit.parsers import strict
from mcqaudit.reasoning import is_truncated, normalise_finish_reason, split_reasoning
from mcqaudit.vocab import (
    CORRECT,
    ERROR,
    INCORRECT,
    LETTERS,
    OK,
    OTHER,
    SKIPPED,
    SOURCE_JUDGE,
    SOURCE_PREFILTER,
    SOURCE_RULE,
    is_blank,
)

__all__ = ["SCORE_VERSION", "accuracy_by_orientation", "mcq_scorer", "orientations"]

# The layout of an mcq_scorer score's metadata; `mcqaudit ingest` finds the scorer's scores by this key.
SCORE_VERSION = 1
SCORE_KEY = "mcqaudit_score"
# the sample's id in each orientation: "<id>@<orientation>" (a label holds only letters, so it stays unique)
ID_SEPARATOR = "@"
_VALUE = {CORRECT: INSPECT_CORRECT, INCORRECT: INSPECT_INCORRECT, OTHER: NOANSWER}


# ------------------------------------------------------------------------------------------ orientations
def orientations(
    dataset: Dataset | Iterable[Sample], scheme: str = "cyclic", *, seed: int = 0
) -> MemoryDataset:
    """Every multiple-choice sample of ``dataset`` in every orientation of ``scheme`` (cyclic, swap, all,
    random:K; `mcqaudit orient --scheme`), as a new dataset.

    The choices as the dataset gives them are the item's canonical order. Each new sample has its choices
    reordered, its target remapped to the displayed letter of the same option, the id
    ``<id>@<orientation>`` (a sample without an id counts from 1, as Inspect does) and ``metadata``
    ``item_id`` (the sample's id, or an ``item_id`` its metadata already has) and ``orientation`` (e.g.
    ``BCDA``). Raises ``orient.OrientationError`` (a ValueError) naming the sample for a sample without
    choices, with choices that repeat, with a target that is not one option letter, that is already
    oriented, or whose ids would collide.
    """
    out: list[Sample] = []
    for k, sample in enumerate(dataset, start=1):
        out.extend(_oriented(sample, k, scheme, seed))
    seen: set[str] = set()
    for s in out:
        if str(s.id) in seen:
            raise orient.OrientationError(
                f"sample id {s.id!r} occurs twice after orientation: ids must be unique"
            )
        seen.add(str(s.id))
    return MemoryDataset(
        out,
        name=getattr(dataset, "name", None),
        location=getattr(dataset, "location", None),
        shuffled=bool(getattr(dataset, "shuffled", False)),
    )


def _oriented(sample: Sample, k: int, scheme: str, seed: int) -> list[Sample]:
    base = sample.id if sample.id is not None else k
    where = f"sample {base!r}"
    choices = list(sample.choices or [])
    if not choices:
        raise orient.OrientationError(f"{where}: no choices (not a multiple-choice sample)")
    if len(set(choices)) != len(choices):
        raise orient.OrientationError(
            f"{where}: its choices repeat, so an orientation could not be told from the order shown"
        )
    gold = _target_letter(sample.target, len(choices))
    if gold is None:
        raise orient.OrientationError(
            f"{where}: target {sample.target!r} is not one option letter in "
            f"{LETTERS[0]}..{LETTERS[len(choices) - 1]}"
        )
    metadata = dict(sample.metadata or {})
    if "orientation" in metadata:
        raise orient.OrientationError(
            f"{where}: already has an orientation ({metadata['orientation']!r}): orientations() was applied twice"
        )
    item_id = str(metadata.get("item_id", base))
    try:
        labels = orient.scheme_labels(len(choices), scheme, seed)
    except orient.OrientationError as exc:
        raise orient.OrientationError(f"{where}: {exc}") from None
    oriented = []
    for label in labels:
        letter = orient.displayed_letter(gold, label)
        oriented.append(
            sample.model_copy(
                update={
                    "id": f"{base}{ID_SEPARATOR}{label}",
                    "choices": orient.apply(choices, label),
                    "target": [letter] if isinstance(sample.target, list) else letter,
                    "metadata": {**metadata, "item_id": item_id, "orientation": label},
                }
            )
        )
    return oriented


def _target_letter(target: str | list[str], n: int) -> str | None:
    values = target if isinstance(target, list) else [target]
    if len(values) != 1 or not isinstance(values[0], str):
        return None
    letter = values[0].strip().upper()
    return letter if len(letter) == 1 and letter in LETTERS[:n] else None


# ---------------------------------------------------------------------------------------------- metrics
_TO_FLOAT = value_to_float()


@metric
def accuracy_by_orientation() -> Metric:
    """Accuracy per orientation label (sample ``metadata.orientation``), over the samples that have one.

    Read from the score values as Inspect's ``accuracy()`` reads them, so it holds under any epoch reducer.
    (An OTHER rate is not offered here: a reducer such as the default mean turns ``N`` and ``I`` alike into 0;
    `mcqaudit report` on the ingested log has it per arm and orientation.)"""

    def compute(scores: list[SampleScore]) -> dict[str, float]:
        groups: dict[str, list[float]] = {}
        for s in scores:
            label = (s.sample_metadata or {}).get("orientation")
            value = _TO_FLOAT(s.score.value)
            if isinstance(label, str) and not math.isnan(value):
                groups.setdefault(label, []).append(value)
        return {label: sum(v) / len(v) for label, v in sorted(groups.items())}

    return compute


# ----------------------------------------------------------------------------------------------- scorer
@dataclass(frozen=True)
class _Row:
    """What a sample gives the grading: the question, the options as shown, the gold letter, the answer."""

    question: str
    options: list[str]
    gold: str
    answer: str
    truncated: bool


@scorer(metrics=[accuracy(), stderr(), accuracy_by_orientation()])
def mcq_scorer(
    model: str | Model | None = None,
    shape: str = "extract",
    *,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    seed: int | None = 0,
    rationale: bool = False,
    reask: int = 1,
) -> Scorer:
    """mcqaudit's grading as an Inspect scorer: the strict pre-filter, else the three-way judge (§5).

    Args:
      model: the judge; default the model of the ``grader`` role (``eval(..., model_roles={"grader": ...})``
        or ``--model-role grader=...``), which must then be bound.
      shape: ``extract`` (the judge names the picked letter or OTHER; compared with the target here) or
        ``gold`` (the judge is told the target and answers CORRECT / INCORRECT / OTHER).
      temperature, max_tokens, seed, rationale: the judge configuration, as `mcqaudit grade` takes it; all
        of it is in the fingerprint.
      reask: how many times an illegal reply is asked again (`grade` asks once).
    """
    # a bad shape or temperature is refused here, before any sample runs
    JudgeConfig(
        model="-", shape=shape, temperature=temperature, max_tokens=max_tokens, seed=seed, rationale=rationale
    )
    if reask < 0:
        raise ValueError("reask must be 0 or more")

    async def score(state: TaskState, target: Target) -> Score:
        # the judge first, for every sample: a task without one fails at once, not at its first prose answer
        grader = get_model(model) if model is not None else get_model(role="grader", required=True)
        row = _row_of(state, target)
        if is_blank(row.answer):
            return _decided(row, None, SOURCE_RULE)
        letter = strict(row.answer, row.options)
        if letter is not None:
            return _decided(row, letter, SOURCE_PREFILTER)
        config = JudgeConfig(
            model=str(grader),
            shape=shape,
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            rationale=rationale,
        )
        return await _judge(grader, config, row, reask)

    return score


def _row_of(state: TaskState, target: Target) -> _Row:
    options = [c.value for c in state.choices]
    if len(options) < 2:
        raise ValueError(
            f"sample {state.sample_id!r}: mcq_scorer grades multiple-choice samples (no choices)"
        )
    if any(c.original_position != i for i, c in enumerate(state.choices)):
        raise ValueError(
            f"sample {state.sample_id!r}: the solver shuffled the choices and rewrote the answer back to the "
            "dataset's order, so what the model picked cannot be read; use orientations() instead"
        )
    gold = _target_letter(list(target.target), len(options))
    if gold is None:
        raise ValueError(f"sample {state.sample_id!r}: target {target.text!r} is not one option letter")
    answer, closed = _answer(state.output)
    finish = normalise_finish_reason(state.output.stop_reason)
    return _Row(_question(state.input), options, gold, answer, is_truncated(finish, closed))


def _question(value: str | list[ChatMessage]) -> str:
    """The sample's input as `mcqaudit ingest` reads it: the text, or the last user message's text parts."""
    if isinstance(value, str):
        return value
    for message in reversed(value):
        if message.role == "user":
            if isinstance(message.content, str):
                return message.content
            return "\n".join(c.text for c in message.content if c.type == "text")
    raise ValueError("the sample's input has no user message")


def _answer(output: ModelOutput) -> tuple[str, bool]:
    """(the answer, whether its reasoning block closed): the completion; a message with reasoning content
    keeps it as it is, else a leading <think> block is split off (docs/design.md §3)."""
    text = output.completion or ""
    message = output.choices[0].message if output.choices else None
    content = message.content if message is not None else ""
    if not isinstance(content, str) and any(isinstance(c, ContentReasoning) for c in content):
        return text, True
    split = split_reasoning(text)
    return split.answer, split.closed


def _decided(row: _Row, letter: str | None, source: str) -> Score:
    """A verdict without the judge: the pre-filter's letter, or OTHER by rule for a blank answer."""
    verdict = OTHER if letter is None else (CORRECT if letter == row.gold else INCORRECT)
    why = (
        f"the strict pre-filter read {letter}"
        if letter is not None
        else "OTHER by rule: the answer is blank" + (" (cut off by the token limit)" if row.truncated else "")
    )
    return Score(
        value=_VALUE[verdict],
        answer=letter,
        explanation=why,
        metadata=_metadata(
            verdict=verdict, letter=letter, source=source, status=SKIPPED, truncated=row.truncated
        ),
    )


async def _judge(grader: Model, config: JudgeConfig, row: _Row, reask: int) -> Score:
    user = render(
        config.shape,
        row.question,
        row.options,
        row.answer,
        gold_letter=row.gold if config.shape == "gold" else None,
        rationale=config.rationale,
    )
    messages: list[ChatMessage] = [ChatMessageSystem(content=SYSTEM_PROMPT), ChatMessageUser(content=user)]
    generate = GenerateConfig(temperature=config.temperature, max_tokens=config.max_tokens, seed=config.seed)
    replies: list[dict[str, Any]] = []
    parsed = ParsedReply(value=None)
    for _ in range(1 + reask):
        out = await grader.generate(messages, config=generate)
        text = None if out.error and not out.completion else out.completion
        parsed = parse_reply(text, config.shape, len(row.options))
        if normalise_finish_reason(out.stop_reason) == "length":
            parsed = cut_off(parsed, config.max_tokens or 0)
        usage = out.usage
        replies.append(
            {
                "reply": text,
                "value": parsed.value,
                "rationale": parsed.rationale,
                "error": None if parsed.ok else f"{parsed.kind}: {parsed.error}",
                "tokens_in": usage.input_tokens if usage else None,
                "tokens_out": usage.output_tokens if usage else None,
                "received_at": datetime.now(UTC).isoformat(),
            }
        )
        if parsed.ok:
            break
    judge = {
        "fingerprint": config.fingerprint,
        "prompt_hash": prompt_hash(SYSTEM_PROMPT, user),
        "config": _config_fields(config),
        "replies": replies,
        "reply": replies[-1]["reply"],
        "rationale": parsed.rationale,
        "error": replies[-1]["error"],
    }
    if parsed.value is None:
        return Score.unscored(
            reason="grader_failed",
            explanation=f"the judge's reply is not a verdict ({replies[-1]['error']}): {replies[-1]['reply']!r}",
            metadata=_metadata(
                verdict=None,
                letter=None,
                source=SOURCE_JUDGE,
                status=ERROR,
                truncated=row.truncated,
                judge=judge,
            ),
        )
    letter, verdict = judged(config.shape, parsed.value, row.gold)
    return Score(
        value=_VALUE[verdict],
        answer=letter if config.shape == "extract" else (row.gold if verdict == CORRECT else None),
        explanation=replies[-1]["reply"],
        metadata=_metadata(
            verdict=verdict,
            letter=letter,
            source=SOURCE_JUDGE,
            status=OK,
            truncated=row.truncated,
            judge=judge,
        ),
    )


def _config_fields(config: JudgeConfig) -> dict[str, Any]:
    """What rebuilds the JudgeConfig (and so its fingerprint) at ingest."""
    payload = config.fingerprint_payload()
    return {
        "model": config.model,
        "shape": config.shape,
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "seed": config.seed,
        "rationale": config.rationale,
        "template_version": payload["template_version"],
    }


def _metadata(
    *,
    verdict: str | None,
    letter: str | None,
    source: str,
    status: str,
    truncated: bool,
    judge: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A score's metadata: ``verdict`` (CORRECT / INCORRECT / OTHER, or None when the judge's reply was not
    one), ``letter`` (the picked displayed letter), ``source`` (prefilter / rule / judge), ``judge_status``
    (skipped / ok / error), ``truncated``, and for a judged row ``fingerprint``, ``judge_reply`` (the last raw
    reply) and ``judge`` (the configuration, prompt hash and every reply received)."""
    judge = judge or {}
    return {
        SCORE_KEY: SCORE_VERSION,
        "verdict": verdict,
        "letter": letter,
        "source": source,
        "judge_status": status,
        "truncated": truncated,
        "fingerprint": judge.get("fingerprint"),
        "judge_reply": judge.get("reply"),
        "judge_error": judge.get("error"),
        "judge": judge or None,
    }
