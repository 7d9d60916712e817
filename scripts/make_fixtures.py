"""Produce the framework logs in tests/fixtures/ with the real frameworks, offline (not run by the tests).

    python scripts/make_fixtures.py inspect   # in a venv with inspect-ai (see tests/fixtures/README.md)
    python scripts/make_fixtures.py lmeval    # in a venv with lm-eval

Every log comes from the framework's own runner; only the model is a stand-in (a fixed answer per item),
because no LLM can run offline. The stand-in reads the options *as displayed* in the prompt it receives and
answers with the displayed letter of the option it is scripted to pick, so a log's letters follow the order
that the model actually saw (which is what the importer tests check).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"

# (id, question, options in canonical order, gold index, what the stand-in model does)
#   ("pick", TEXT, TEMPLATE): answer with TEMPLATE.format(L=displayed letter of TEXT)
#   ("say", TEXT): answer TEXT verbatim
ITEMS = [
    (
        "geo-fr",
        "What is the capital of France?",
        ["Paris", "Rome", "Berlin", "Madrid"],
        0,
        ("pick", "Paris", "ANSWER: {L}"),
    ),
    (
        "arith-7",
        "What is 3 + 4?",
        ["5", "6", "7", "8"],
        2,
        ("pick", "7", "3 + 4 = 7, so the option that says 7 is right.\n\nANSWER: {L}"),
    ),
    (
        "planet-red",
        "Which planet is known as the Red Planet?",
        ["Venus", "Mars", "Jupiter", "Saturn"],
        1,
        ("pick", "Venus", "ANSWER: {L}"),
    ),
    ("tf-boil", "Water boils at 100 °C at sea level.", ["True", "False"], 0, ("pick", "True", "{L}")),
    (
        "tf-sun",
        "The Sun orbits the Earth.",
        ["True", "False"],
        1,
        ("say", "I would rather not answer questions about astronomy."),
    ),
]
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def scripted_answer(prompt: str) -> str:
    """The stand-in model: find the item by its question, then the displayed letter of the scripted option."""
    for _id, question, _options, _gold, act in ITEMS:
        if question in prompt:
            if act[0] == "say":
                return act[1]
            shown = dict(re.findall(r"^\(?([A-Z])[).:]\s*(.+?)\s*$", prompt, flags=re.M))
            letter = next(k for k, v in shown.items() if v == act[1])
            return act[2].format(L=letter)
    raise ValueError(f"stand-in model got an unknown prompt: {prompt[:80]!r}")


# ------------------------------------------------------------------------------------------------ Inspect
def make_inspect() -> None:
    from random import Random

    from inspect_ai import Task, eval
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ModelOutput, ModelUsage, get_model
    from inspect_ai.scorer import choice
    from inspect_ai.solver import multiple_choice

    def dataset(name: str) -> MemoryDataset:
        return MemoryDataset(
            [
                Sample(
                    id=item_id,
                    input=question,
                    choices=list(options),
                    target=LETTERS[gold],
                    metadata={"source": "mcqaudit fixture", "n_options": len(options)},
                )
                for item_id, question, options, gold, _ in ITEMS
            ],
            name=name,
        )

    def model():  # type: ignore[no-untyped-def]
        def generate(messages, tools, tool_choice, config):  # type: ignore[no-untyped-def]
            prompt = messages[-1].text
            out = ModelOutput.from_content(model="mockllm/model", content=scripted_answer(prompt))
            # usage set, or mockllm counts tokens with a tokenizer it would download
            out.usage = ModelUsage(
                input_tokens=len(prompt.split()), output_tokens=5, total_tokens=len(prompt.split()) + 5
            )
            return out

        return get_model("mockllm/model", custom_outputs=generate)

    out = FIXTURES / "inspect"
    out.mkdir(parents=True, exist_ok=True)
    runs = {
        # plain: options as in the dataset, two epochs
        "plain.eval": (
            Task(dataset=dataset("mcq_plain"), solver=multiple_choice(), scorer=choice(), epochs=2),
            "eval",
        ),
        # solver-level shuffle: the model sees a shuffled order, and Inspect rewrites the logged
        # completion and messages back to the canonical order (the model event keeps the real ones)
        "solver_shuffle.eval": (
            Task(
                dataset=dataset("mcq_solver_shuffle"),
                solver=multiple_choice(shuffle=Random(7)),
                scorer=choice(),
            ),
            "eval",
        ),
    }
    shuffled = dataset("mcq_dataset_shuffle")
    shuffled.shuffle_choices(seed=3)  # dataset-level shuffle: the sample itself carries the displayed order
    runs["dataset_shuffle.json"] = (Task(dataset=shuffled, solver=multiple_choice(), scorer=choice()), "json")
    for name, (task, fmt) in runs.items():
        with tempfile.TemporaryDirectory() as tmp:
            [log] = eval(task, model=model(), log_dir=tmp, log_format=fmt, display="none")  # type: ignore[arg-type]
            assert log.status == "success", log.error
            shutil.copyfile(log.location, out / name)
        print(f"wrote {out / name} ({(out / name).stat().st_size} bytes)")


# ------------------------------------------------------------------------------------------------ lm-eval
TASK_YAML = """\
task: {task}
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
repeats: {repeats}
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
  - name: flexible-extract
    filter:
      - function: multi_choice_regex
        group_select: 0
        ignore_case: true
        ignore_punctuation: true
        regex_pattern: "(\\\\([A-J]\\\\))"
      - function: take_first
metadata:
  version: 1.0
"""

LL_TASK_YAML = """\
task: mcq_ll
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: answer
metric_list:
  - metric: acc
metadata:
  version: 1.0
"""


def make_lmeval() -> None:
    import os

    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from lm_eval.__main__ import cli_evaluate
    from lm_eval.api.model import LM
    from lm_eval.api.registry import register_model

    @register_model("mcqaudit-scripted")
    class ScriptedLM(LM):  # type: ignore[misc]
        """A stand-in for an LLM: the scripted answer for the prompt (see `scripted_answer`)."""

        def __init__(self, **kwargs):  # type: ignore[no-untyped-def]
            super().__init__()  # ignores batch_size, device, ... that the runner passes

        def generate_until(self, requests, disable_tqdm: bool = False):  # type: ignore[no-untyped-def]
            return [scripted_answer(r.arguments[0]) for r in requests]

        def loglikelihood(self, requests, disable_tqdm: bool = False):  # type: ignore[no-untyped-def]
            # only for mcq_ll, which shows that a loglikelihood task has no text to grade
            return [(-float(len(r.arguments[1])), False) for r in requests]

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):  # type: ignore[no-untyped-def]
            raise NotImplementedError

    out = FIXTURES / "lmeval"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        # each item in two orientations (canonical and rotated by one), as a user controlling for
        # position would prepare the data set: lm-eval itself never reorders options
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
        with (t / "items_tf.jsonl").open("w", encoding="utf-8") as fh:
            for item_id, question, options, gold, _ in ITEMS:
                if len(options) == 2:
                    fh.write(
                        json.dumps({"id": item_id, "question": question, "choices": options, "answer": gold})
                        + "\n"
                    )
        # mcq_gen: every item in two orientations, one generation each;
        # mcq_gen_rep: the two-option items, two generations each (repeats: 2)
        for task, data, repeats in (("mcq_gen", "items.jsonl", 1), ("mcq_gen_rep", "items_tf.jsonl", 2)):
            (t / "tasks" / f"{task}.yaml").write_text(
                TASK_YAML.format(task=task, data=t / data, repeats=repeats)
            )
        # mcq_ll: the two-option items as a loglikelihood (multiple_choice) task, which generates no text
        (t / "tasks" / "mcq_ll.yaml").write_text(LL_TASK_YAML.format(data=t / "items_tf.jsonl"))
        sys.argv = [
            "lm-eval",
            "run",
            "--model",
            "mcqaudit-scripted",
            "--model_args",
            "pretrained=scripted-stand-in",
            "--tasks",
            "mcq_gen",
            "mcq_gen_rep",
            "mcq_ll",
            "--include_path",
            str(t / "tasks"),
            "--log_samples",
            "--output_path",
            str(t / "out"),
        ]
        cli_evaluate()
        for old in [*out.glob("samples_*.jsonl"), *out.glob("results_*.json")]:
            old.unlink()
        for f in sorted((t / "out").rglob("*.json*")):
            shutil.copyfile(f, out / f.name)
            print(f"wrote {out / f.name} ({f.stat().st_size} bytes)")


if __name__ == "__main__":
    what = sys.argv[1:] or ["inspect", "lmeval"]
    for w in what:
        {"inspect": make_inspect, "lmeval": make_lmeval}[w]()
