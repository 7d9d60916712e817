"""Real Inspect AI runs of mcqaudit's own extension (`mcqaudit.inspect`), made offline for
tests/test_inspect_extension.py.

    python -m tests.inspect_runs audit OUT_DIR   # OUT_DIR/audit.eval: sample_runs/inspect_task.py, as it is
    python -m tests.inspect_runs bare OUT_DIR    # OUT_DIR/bare.eval: the same questions, bare letters, choice()
    python -m tests.inspect_runs nograder OUT_DIR  # OUT_DIR/nograder.eval: the sample task with no grader role

Inspect's own runner does everything (`orientations()`, the `multiple_choice()` solver, `mcq_scorer()` with
its judge on the `grader` role); only the two models are stand-ins, `mockllm/model` with `custom_outputs`
functions, each output with `usage` set (or mockllm downloads a tokenizer to count tokens and the sample
ends in an error). The tests run this in a subprocess with HOME pointed at a temporary folder, so that
Inspect's traces and caches stay out of the real home and its logging out of the test process.

**The model** answers each question by the displayed letter of a scripted option (`SCRIPT`, over the options
as the prompt lists them): half the samples with a bare letter (one of them a reasoning model's, with
`ContentReasoning` naming another option), half in prose (one of them after an inline `<think>` block that
names another option), and one blank.

**The grader** reads the judge prompt it is sent (`parse_rendered`) and names the option whose text the
response contains (OTHER for none or several); for `ice-cold` it replies prose, which is not a verdict:
in orientation AB both times (the first ask and the re-ask), in BA only the first time.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LETTERS = "ABCDEFGHIJ"
ILLEGAL = "Probably the first one, I suppose?"
THINKING = "Insects have six legs, so maybe {L:Six}?"

# item id -> (kind, text): "bare" a letter, "prose" a sentence, "reasoning" ContentReasoning + a letter,
# "think" an inline <think> block + a sentence; "{L:text}" is the displayed letter of option `text`
SCRIPT: dict[str, tuple[str, str]] = {
    "capital-fr": ("bare", "{L:Paris}"),
    "red-planet": ("prose", "It is Mars, the red one."),
    "boiling": ("reasoning", "{L:100 °C}"),
    "spider-legs": ("think", "A spider has ten legs."),
    "sun-orbit": ("bare", "{L:True}"),  # blank in orientation BA
    "ice-cold": ("prose", "Hmm, I would say yes."),
}


def _fill(text: str, shown: list[str]) -> str:
    return re.sub(r"\{L:([^}]+)\}", lambda m: LETTERS[shown.index(m.group(1))], text)


def _usage(out: Any, prompt: str, tokens: int) -> Any:
    from inspect_ai.model import ModelUsage

    n_in = len(prompt.split())
    out.usage = ModelUsage(input_tokens=n_in, output_tokens=tokens, total_tokens=n_in + tokens)
    return out


def solver_output(prompt: str, questions: dict[str, str]) -> Any:
    """The stand-in model's answer to one `multiple_choice()` prompt."""
    from inspect_ai.model import (
        ChatCompletionChoice,
        ChatMessageAssistant,
        ContentReasoning,
        ContentText,
        ModelOutput,
    )

    item = next(i for i, q in questions.items() if q in prompt)
    shown = [m for _, m in re.findall(r"^([A-J])\) (.+?)\s*$", prompt, flags=re.M)]
    kind, text = SCRIPT[item]
    content: Any = _fill(text, shown)
    if item == "sun-orbit" and shown[0] == "False":
        content = ""
    elif kind == "reasoning":
        thought = "Option {L:50 °C} seems low; at sea level it is 100 °C."
        content = [ContentReasoning(reasoning=_fill(thought, shown)), ContentText(text=content)]
    elif kind == "think":
        content = f"<think>{_fill(THINKING, shown)}</think>\n{content}"
    message = ChatMessageAssistant(content=content, model="mockllm/model", source="generate")
    out = ModelOutput(
        model="mockllm/model", choices=[ChatCompletionChoice(message=message, stop_reason="stop")]
    )
    return _usage(out, prompt, 8)


def grader_output(prompt: str, asked: Counter[str]) -> Any:
    """The stand-in judge's reply to one mcqaudit judge prompt."""
    from inspect_ai.model import ModelOutput

    from mcqaudit.judge.prompts import parse_rendered

    p = parse_rendered(prompt)
    asked[prompt] += 1
    if p.question.startswith("Is ice colder") and (p.options[0] == "Yes" or asked[prompt] == 1):
        reply = ILLEGAL
    else:
        said = p.generation.lower()
        hits = [LETTERS[k] for k, o in enumerate(p.options) if o.lower() in said]
        reply = hits[0] if len(hits) == 1 else "OTHER"
    return _usage(ModelOutput.from_content("mockllm/model", reply), prompt, 1)


def _task_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("inspect_task", ROOT / "sample_runs" / "inspect_task.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make(kind: str, out_dir: Path) -> Path:
    from inspect_ai import Task, eval
    from inspect_ai.model import get_model
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice

    sample_task = _task_module()
    questions = {str(s.id): str(s.input) for s in sample_task.QUESTIONS}
    asked: Counter[str] = Counter()

    def answer(messages, tools, tool_choice, config):  # type: ignore[no-untyped-def]
        return solver_output(messages[-1].text, questions)

    def bare(messages, tools, tool_choice, config):  # type: ignore[no-untyped-def]
        shown = [m for _, m in re.findall(r"^([A-J])\) (.+?)\s*$", messages[-1].text, flags=re.M)]
        from inspect_ai.model import ModelOutput

        return _usage(
            ModelOutput.from_content("mockllm/model", LETTERS[len(shown) - 1]), messages[-1].text, 1
        )

    def judge(messages, tools, tool_choice, config):  # type: ignore[no-untyped-def]
        return grader_output(messages[-1].text, asked)

    roles = {"grader": get_model("mockllm/model", custom_outputs=judge)}
    if kind in ("audit", "nograder"):
        task, model = sample_task.mcq_audit(), get_model("mockllm/model", custom_outputs=answer)
        if kind == "nograder":
            roles = {}
    else:
        task = Task(dataset=sample_task.QUESTIONS, solver=multiple_choice(), scorer=choice())
        model = get_model("mockllm/model", custom_outputs=bare)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        [log] = eval(task, model=model, model_roles=roles, log_dir=tmp, display="none")  # type: ignore[arg-type]
        if log.status != "success" and kind != "nograder":
            raise SystemExit(f"the Inspect run failed: {log.error}")
        target = out_dir / f"{kind}.eval"
        shutil.copyfile(log.location, target)
    return target


def subprocess_env(home: Path) -> dict[str, str]:
    """The environment of an Inspect subprocess: HOME (and XDG folders) under ``home``; the package is
    imported as installed (editable, by the Makefile), or from a PYTHONPATH already set. The checkout is not
    put on the path: setuptools leaves ``mcqaudit.egg-info`` in it, which importlib.metadata would then find
    first, without the editable install's direct_url.json, and Inspect would not see an installed package
    (its registry names the scorer ``mcq_scorer`` instead of ``mcqaudit/mcq_scorer``)."""
    import os

    return {
        **os.environ,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home / "cache"),
    }


def make_in_subprocess(kind: str, out_dir: Path) -> Path:
    """The log of run ``kind``, made by :func:`make` in a subprocess whose HOME is a folder under ``out_dir``."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", "tests.inspect_runs", kind, str(out_dir / "logs")],
        cwd=ROOT, env=subprocess_env(out_dir / "home"), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"making the Inspect log failed:\n{proc.stderr[-3000:]}")
    return out_dir / "logs" / f"{kind}.eval"


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("audit", "bare", "nograder"):
        raise SystemExit(__doc__)
    print(make(sys.argv[1], Path(sys.argv[2])))
