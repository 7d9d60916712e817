"""Real Inspect AI and lm-eval logs of a stand-in *reasoning* model, made offline for
tests/test_importers_reasoning.py.

    python -m tests.reasoning_logs inspect OUT_DIR   # writes OUT_DIR/reasoning.eval and OUT_DIR/reasoning.json
    python -m tests.reasoning_logs lmeval            # writes tests/fixtures/lmeval_reasoning/ (by hand)

Inspect (a dev dependency) runs in the tests, in a subprocess; lm-eval is not installed in the project's
environment, so its log is committed (tests/fixtures/lmeval_reasoning/README.md says how it was made).

**Inspect.**
The log comes from Inspect's own runner (`multiple_choice()` solver, `choice()` scorer); only the model is a
stand-in, `mockllm/model` with `custom_outputs`. Its outputs carry `ContentReasoning` blocks and the stop
reasons a reasoning model gives (`max_tokens` when the token budget ran out while it thought). Every output
has `usage` set, or mockllm would download a tokenizer to count tokens and the sample would end in an error.
The tests run this in a subprocess with HOME pointed at a temporary folder, so that Inspect's traces and
caches stay out of the real home and its logging out of the test process.

**lm-eval.** `lm-eval run --log_samples` of a `generate_until` task over the same items, each in two
orientations (as given and rotated by one), with a registered stand-in model whose responses hold the
thinking inline (`<think>…</think>`, other tags and cases, one block that never closes): what a reasoning
model served without a reasoning parser returns, and what lm-eval logs as it is (`resps`).

Either stand-in answers by the displayed letter of a scripted option (the options as the prompt lists them),
so letters follow the order the model saw.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

LETTERS = "ABCDEFGHIJ"
LONG_THOUGHT = "Let me weigh each option in turn. " * 60  # over Inspect's attachment threshold

# (id, question, options, gold index, scripted output). The output: a list of parts, each
#   ("think", TEXT) | ("redacted", SUMMARY or None) | ("text", TEXT) | ("raw", TEXT: the whole content as a
#   string, no blocks), then ("stop", STOP_REASON) and ("tokens", OUTPUT_TOKENS). "{L:text}" in a TEXT is the
#   displayed letter of the option `text`.
ITEMS: list[tuple[str, str, list[str], int, list[tuple[str, Any]]]] = [
    (
        "think-then-answer",
        "What is the capital of France?",
        ["Paris", "Rome", "Berlin", "Madrid"],
        0,
        [
            ("think", "Option {L:Rome} is the capital of Italy, not France. So {L:Rome} is out."),
            ("text", "ANSWER: {L:Paris}"),
            ("stop", "stop"),
            ("tokens", 41),
        ],
    ),
    (
        "two-blocks",
        "What is 3 + 4?",
        ["5", "6", "7", "8"],
        2,
        [
            ("think", "3 + 4 = 7."),
            ("redacted", None),
            ("redacted", "Checked the sum again: {L:7}."),
            ("text", "{L:7}"),
            ("stop", "stop"),
            ("tokens", 30),
        ],
    ),
    (
        "cut-in-thinking",
        "Which planet is known as the Red Planet?",
        ["Venus", "Mars", "Jupiter", "Saturn"],
        1,
        [
            ("think", "Venus is bright, so ANSWER: {L:Venus}? Wait, the red one is"),
            ("stop", "max_tokens"),
            ("tokens", 64),
        ],
    ),
    (
        "cut-after-answer",
        "Which gas do plants take in for photosynthesis?",
        ["Oxygen", "Nitrogen", "Carbon dioxide", "Helium"],
        2,
        [
            ("think", LONG_THOUGHT),
            ("text", "ANSWER: {L:Carbon dioxide}"),
            ("stop", "max_tokens"),
            ("tokens", 64),
        ],
    ),
    (
        "context-full",
        "How many legs does a spider have?",
        ["Six", "Eight", "Ten", "Twelve"],
        1,
        [("think", "Insects have six; spiders"), ("stop", "model_length"), ("tokens", 12)],
    ),
    (
        "think-then-prose",  # an answer the pre-filter defers: the judge must be sent it, not the thinking
        "Which ocean is the largest?",
        ["Atlantic", "Pacific", "Indian", "Arctic"],
        1,
        [
            ("think", "The Atlantic is large, but the Pacific is larger."),
            ("text", "It is the Pacific Ocean."),
            ("stop", "stop"),
            ("tokens", 22),
        ],
    ),
    (
        "plain",
        "Water boils at 100 °C at sea level.",
        ["True", "False"],
        0,
        [("text", "{L:True}"), ("stop", "stop"), ("tokens", 1)],
    ),
    (
        "inline-think",
        "The Sun orbits the Earth.",
        ["True", "False"],
        1,
        [
            ("raw", "<think>People once thought so ({L:True}).</think>\n\n{L:False}"),
            ("stop", "stop"),
            ("tokens", 14),
        ],
    ),
    (
        "filtered",
        "Is the sky blue on a clear day?",
        ["Yes", "No"],
        0,
        [("text", ""), ("stop", "content_filter"), ("tokens", 0)],
    ),
]


def _fill(text: str, shown: list[str]) -> str:
    return re.sub(r"\{L:([^}]+)\}", lambda m: LETTERS[shown.index(m.group(1))], text)


def _output(prompt: str) -> Any:
    from inspect_ai.model import (
        ChatCompletionChoice,
        ChatMessageAssistant,
        ContentReasoning,
        ContentText,
        ModelOutput,
        ModelUsage,
    )

    item = next(i for i in ITEMS if i[1] in prompt)
    shown = [m for _, m in re.findall(r"^([A-J])\) (.+?)\s*$", prompt, flags=re.M)]
    parts = dict(item[4][-2:])
    content: Any = []
    for kind, value in item[4][:-2]:
        if kind == "think":
            content.append(ContentReasoning(reasoning=_fill(value, shown)))
        elif kind == "redacted":
            summary = _fill(value, shown) if value else None
            content.append(ContentReasoning(reasoning="c2lnbmF0dXJl", summary=summary, redacted=True))
        elif kind == "text":
            content.append(ContentText(text=_fill(value, shown)))
        else:
            content = _fill(value, shown)
    message = ChatMessageAssistant(content=content, model="mockllm/model", source="generate")
    out = ModelOutput(
        model="mockllm/model", choices=[ChatCompletionChoice(message=message, stop_reason=parts["stop"])]
    )
    # usage set, or mockllm counts tokens with a tokenizer it would download
    n_in = len(prompt.split())
    out.usage = ModelUsage(
        input_tokens=n_in, output_tokens=parts["tokens"], total_tokens=n_in + parts["tokens"]
    )
    return out


def make(out_dir: Path) -> list[Path]:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import get_model
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice

    dataset = MemoryDataset(
        [
            Sample(id=item_id, input=question, choices=list(options), target=LETTERS[gold])
            for item_id, question, options, gold, _ in ITEMS
        ],
        name="mcq_reasoning",
    )

    def generate(messages, tools, tool_choice, config):  # type: ignore[no-untyped-def]
        return _output(messages[-1].text)

    written = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for fmt in ("eval", "json"):
        task = Task(dataset=dataset, solver=multiple_choice(), scorer=choice())
        model = get_model("mockllm/model", custom_outputs=generate)
        with tempfile.TemporaryDirectory() as tmp:
            [log] = eval(task, model=model, log_dir=tmp, log_format=fmt, display="none")  # type: ignore[arg-type]
            if log.status != "success":
                raise SystemExit(f"the Inspect run failed: {log.error}")
            target = out_dir / f"reasoning.{fmt}"
            shutil.copyfile(log.location, target)
            written.append(target)
    return written


def make_in_subprocess(out_dir: Path) -> dict[str, Path]:
    """The two Inspect logs ({"eval": ..., "json": ...}), made by `make` in a subprocess whose HOME is a folder
    under ``out_dir`` (Inspect's traces and caches go there; its logging stays out of the caller)."""
    import os
    import subprocess

    home = out_dir / "home"
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "tests.reasoning_logs", "inspect", str(out_dir / "logs")],
        cwd=Path(__file__).resolve().parents[1], env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"making the Inspect logs failed:\n{proc.stderr[-3000:]}")
    return {"eval": out_dir / "logs" / "reasoning.eval", "json": out_dir / "logs" / "reasoning.json"}


# ------------------------------------------------------------------------------------------------ lm-eval
LMEVAL_DIR = Path(__file__).resolve().parent / "fixtures" / "lmeval_reasoning"
# the raw response per item ("{L:text}": the displayed letter of the option `text`)
LMEVAL_RESPONSES = {
    "think-then-answer": "<think>Option {L:Rome} is the capital of Italy, not France. So {L:Rome} is out.</think>"
    "\n\nANSWER: {L:Paris}",
    "two-blocks": "<think>3 + 4 = 7.</think>\n<think>Checked the sum again.</think>\n{L:7}",
    # cut off while thinking; lm-eval's own strict-match filter reads the letter in the thinking
    "cut-in-thinking": "<think>Venus is bright, so ANSWER: {L:Venus}? Wait, the red one is",
    "cut-after-answer": "<Thinking>" + LONG_THOUGHT + "</Thinking>ANSWER: {L:Carbon dioxide}",
    "context-full": "<reasoning>Insects have six; spiders",
    "think-then-prose": "<think>The Atlantic is large, but the Pacific is larger.</think>\nIt is the Pacific Ocean.",
    "plain": "{L:True}",
    "inline-think": "  <think>People once thought so ({L:True}).</think>\n\n{L:False}",
    "filtered": "",  # what lm-eval's API models log for a reply with no content
}
LMEVAL_TASK = """\
task: mcq_think
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}\\n{{% for c in choices %}}{{{{ 'ABCDEFGHIJ'[loop.index0] }}}}. {{{{ c }}}}\\n{{% endfor %}}Answer:"
doc_to_target: "{{{{ 'ABCDEFGHIJ'[answer] }}}}"
generation_kwargs:
  until: ["Question:"]
  do_sample: false
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: true
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "ANSWER: ([A-J])"
      - function: take_first
metadata:
  version: 1.0
"""


def lmeval_response(prompt: str) -> str:
    """The stand-in thinker: the item whose question the prompt holds, answered over the displayed options."""
    item = next(i for i in ITEMS if i[1] in prompt)
    shown = [m for _, m in re.findall(r"^([A-J])\. (.+?)\s*$", prompt, flags=re.M)]
    return _fill(LMEVAL_RESPONSES[item[0]], shown)


def make_lmeval() -> None:
    import json
    import os

    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lm_eval.__main__ import cli_evaluate
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model

    @register_model("mcqaudit-thinker")
    class ThinkerLM(LM):  # type: ignore[misc]
        """A stand-in for a reasoning LLM served without a reasoning parser (see `lmeval_response`)."""

        def __init__(self, **kwargs):  # type: ignore[no-untyped-def]
            super().__init__()

        def generate_until(self, requests, disable_tqdm: bool = False):  # type: ignore[no-untyped-def]
            return [lmeval_response(r.arguments[0]) for r in requests]

        def loglikelihood(self, requests, disable_tqdm: bool = False):  # type: ignore[no-untyped-def]
            raise NotImplementedError

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    LMEVAL_DIR.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        with (t / "items.jsonl").open("w", encoding="utf-8") as fh:
            for item_id, question, options, gold, _ in ITEMS:
                for k in (0, 1):
                    shown = options[k:] + options[:k]
                    doc = {
                        "id": item_id,
                        "question": question,
                        "choices": shown,
                        "answer": shown.index(options[gold]),
                    }
                    fh.write(json.dumps(doc, ensure_ascii=False) + "\n")
        (t / "tasks").mkdir()
        (t / "tasks" / "mcq_think.yaml").write_text(LMEVAL_TASK.format(data=t / "items.jsonl"))
        sys.argv = [
            "lm-eval", "run", "--model", "mcqaudit-thinker", "--model_args", "pretrained=scripted-thinker",
            "--tasks", "mcq_think", "--include_path", str(t / "tasks"), "--log_samples", "--output_path", str(t / "out"),
        ]  # fmt: skip
        cli_evaluate()
        for old in [*LMEVAL_DIR.glob("samples_*.jsonl"), *LMEVAL_DIR.glob("results_*.json")]:
            old.unlink()
        for f in sorted((t / "out").rglob("*.json*")):
            shutil.copyfile(f, LMEVAL_DIR / f.name)
            print(LMEVAL_DIR / f.name)


if __name__ == "__main__":
    if sys.argv[1:2] == ["lmeval"]:
        make_lmeval()
    elif sys.argv[1:2] == ["inspect"] and len(sys.argv) == 3:
        for path in make(Path(sys.argv[2])):
            print(path)
    else:
        raise SystemExit("usage: python -m tests.reasoning_logs inspect OUT_DIR | lmeval")
