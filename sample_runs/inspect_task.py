"""An Inspect AI task audited by mcqaudit (README, "Inside Inspect"): every question in every orientation of
its options, and three-way verdicts (CORRECT / INCORRECT / OTHER) from mcqaudit's pre-filter and judge.

    pip install 'mcqaudit[inspect]'
    inspect eval sample_runs/inspect_task.py --model openai/gpt-4o-mini --model-role grader=openai/gpt-4o
    mcqaudit ingest logs/ --db study.duckdb      # every orientation, the judge's verdicts taken as they are
    mcqaudit report --db study.duckdb            # accuracy per orientation, the flags
    mcqaudit dashboard --db study.duckdb

`-T scheme=all` (or swap, random:4) picks another orientation scheme. For a real benchmark, give
`orientations()` any Inspect dataset whose samples have `choices` and a letter `target` (e.g.
`hf_dataset("cais/mmlu", ...)` with a `record_to_sample`). The tests run this task offline
(tests/test_inspect_extension.py), with Inspect's `mockllm` as both the model and the grader.
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.solver import multiple_choice

from mcqaudit.inspect import mcq_scorer, orientations

QUESTIONS = MemoryDataset(
    [
        Sample(
            id="capital-fr",
            input="What is the capital of France?",
            choices=["Paris", "Rome", "Berlin", "Madrid"],
            target="A",
        ),
        Sample(
            id="red-planet",
            input="Which planet is known as the Red Planet?",
            choices=["Venus", "Mars", "Jupiter", "Saturn"],
            target="B",
        ),
        Sample(
            id="boiling",
            input="At sea level, at what temperature does water boil?",
            choices=["50 °C", "75 °C", "100 °C", "125 °C"],
            target="C",
        ),
        Sample(
            id="spider-legs",
            input="How many legs does a spider have?",
            choices=["Six", "Eight", "Ten", "Twelve"],
            target="B",
            metadata={"subject": "biology"},
        ),
        Sample(id="sun-orbit", input="The Earth orbits the Sun.", choices=["True", "False"], target="A"),
        Sample(id="ice-cold", input="Is ice colder than boiling water?", choices=["Yes", "No"], target="A"),
    ],
    name="mcq_sample",
)


@task
def mcq_audit(scheme: str = "cyclic") -> Task:
    """The questions in every orientation of ``scheme``, answered and graded as mcqaudit grades."""
    return Task(
        dataset=orientations(QUESTIONS, scheme=scheme),
        solver=multiple_choice(),
        scorer=mcq_scorer(),  # the judge: the `grader` role (--model-role grader=...), or mcq_scorer(model=...)
    )
