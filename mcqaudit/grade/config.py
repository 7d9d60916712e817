"""A grade run's configuration: options and their checks, the API key's lookup, the exemplar file, exit codes.

The API key is never held here: only the name of its environment variable, read when a run starts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mcqaudit.endpoint import Interrupted, api_key_for, looks_like_env_name, valid_env_name
from mcqaudit.endpoint import key_in_env as key_in_env  # re-exported: the CLI scrubs with it
from mcqaudit.judge.prompts import Exemplar, JudgeConfig, legal_values
from mcqaudit.store import judging
from mcqaudit.store.db import Study

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_ROW_ERRORS = 3


def run_exit_code(*, aborted: object, errors: int, not_attempted: int) -> int:
    """The exit status of a run against an endpoint (grade, generate): 1 when it stopped (a fatal endpoint
    status, an interruption), 3 when some rows ended in error or were never sent, else 0."""
    if aborted is not None:
        return EXIT_FAILURE
    return EXIT_ROW_ERRORS if errors or not_attempted else EXIT_OK

DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"
ENV_MODEL = "MCQAUDIT_JUDGE_MODEL"
ENV_BASE_URL = "MCQAUDIT_JUDGE_BASE_URL"

NO_JUDGE_MESSAGE = (
    "no judge configured. The judge is part of the metric, so mcqaudit never picks one: choose it with "
    f"--judge-model and --judge-base-url (or {ENV_MODEL} / {ENV_BASE_URL}) and put the API key in the "
    "environment variable named by --judge-api-key-env (default OPENAI_API_KEY). A local OpenAI-compatible "
    "server works too (`mcqaudit standin-judge` serves a heuristic stand-in for demos). To grade with the "
    "strict pre-filter alone, pass --no-judge: the study is then marked unaudited."
)

class GradeUsageError(Exception):
    """Bad flags, no judge configured, bad exemplar file, unknown arm: exit status 2."""


# The run was stopped by a signal; what had arrived is saved, and a re-run continues.
GradeInterrupted = Interrupted


@dataclass(frozen=True)
class GradeOptions:
    """Everything a grade run needs besides the study. The API key is not here: only its variable's name."""

    config: JudgeConfig
    base_url: str | None = None
    api_key_env: str = DEFAULT_API_KEY_ENV
    concurrency: int = 16
    timeout_s: float = 60.0
    max_retries: int = 5
    arms: tuple[str, ...] = ()
    limit: int | None = None
    reask: int = 1
    panel: bool = False  # `grade --panel`: a panel judge, beside the primary (docs/design.md §5)
    # this many requests refused in a row with the same 4xx status and message stop the run (grade/run.py)
    refusals_to_stop: int = 10
    # tuning (tests use small values)
    backoff_base_s: float = 0.5
    flush_every: int = 64
    flush_interval_s: float = 0.5
    # the journal is fdatasync'ed at most this often (None: never); a kill loses nothing either way, a
    # power cut at most this interval's replies (store/journal.py)
    journal_fsync_s: float | None = 1.0

    def validate(self) -> None:
        if self.concurrency < 1:
            raise GradeUsageError("--concurrency must be at least 1")
        if self.max_retries < 0:
            raise GradeUsageError("--max-retries must be 0 or more")
        if self.timeout_s <= 0:
            raise GradeUsageError("--timeout must be positive")
        if self.limit is not None and self.limit < 1:
            raise GradeUsageError("--limit must be at least 1")
        if not valid_env_name(self.api_key_env):
            # Never echo the value: a user may have pasted the key itself here.
            raise GradeUsageError(
                "--judge-api-key-env takes the *name* of an environment variable, not a key"
            )


def resolve_api_key(env_name: str, base_url: str | None) -> str:
    """The key from the named environment variable, read now. Local servers may go without one."""
    key = api_key_for(env_name, base_url)
    if key is not None:
        return key
    if not looks_like_env_name(env_name):  # a pasted key is never repeated (docs/design.md §5)
        raise GradeUsageError(
            "the judge API key is read from the environment variable that --judge-api-key-env names, and the "
            "value given is not set and does not read as a variable name (it is not repeated here, in case it "
            "is a key); give the variable's name, e.g. --judge-api-key-env OPENAI_API_KEY"
        )
    raise GradeUsageError(
        f"the judge API key is read from the environment variable {env_name}, which is not set "
        "(name another one with --judge-api-key-env)"
    )


def check_arms(study: Study, arms: Sequence[str]) -> None:
    if not arms:  # every arm: nothing to check (and no query of the study)
        return
    known = judging.known_arms(study)
    unknown = [a for a in arms if a not in known]
    if unknown:
        raise GradeUsageError(
            f"unknown arm(s): {', '.join(unknown)}; the study has: {', '.join(known) or '(no rows yet)'}"
        )


def load_exemplars(path: str | Path, shape: str) -> tuple[Exemplar, ...]:
    """Few-shot exemplars from JSONL: ``{"question", "options", "generation", "answer", "gold"?}`` a line.

    ``answer`` is what the judge should reply: a letter or OTHER (extract), or a verdict (gold, which also
    needs the exemplar's ``gold`` letter). They go into the prompt and the fingerprint.
    """
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise GradeUsageError(f"{p}: cannot read the exemplar file ({exc.strerror})") from None
    out: list[Exemplar] = []
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{p}:{no}"
        try:
            obj = json.loads(line)
        except ValueError:
            raise GradeUsageError(f"{where}: not a JSON object") from None
        if not isinstance(obj, dict):
            raise GradeUsageError(f"{where}: not a JSON object")
        answer = obj.get("answer", obj.get("expected"))
        for name, value in (("question", obj.get("question")), ("generation", obj.get("generation"))):
            if not isinstance(value, str):
                raise GradeUsageError(f"{where}: field {name!r} must be a string")
        options = obj.get("options")
        if not (isinstance(options, list) and len(options) >= 2 and all(isinstance(o, str) for o in options)):
            raise GradeUsageError(f"{where}: field 'options' must be a list of at least 2 strings")
        legal = legal_values(shape, len(options))
        if not isinstance(answer, str) or answer.strip().upper() not in legal:
            raise GradeUsageError(
                f"{where}: field 'answer' must be one of {', '.join(legal)} for the {shape} shape"
            )
        gold = obj.get("gold")
        if shape == "gold":
            if not (
                isinstance(gold, str) and gold.strip().upper() in legal_values("extract", len(options))[:-1]
            ):
                raise GradeUsageError(
                    f"{where}: the gold shape needs field 'gold', a letter within the options"
                )
            gold = gold.strip().upper()
        else:
            gold = None
        out.append(
            Exemplar(
                question=obj["question"],
                options=tuple(options),
                generation=obj["generation"],
                answer=answer.strip().upper(),
                gold=gold,
            )
        )
    if not out:
        raise GradeUsageError(f"{p}: the exemplar file has no exemplars")
    return tuple(out)
