"""The check use case: a gate for CI (docs/design.md §7, ``mcqaudit check``).

It builds the study's report (:func:`mcqaudit.app.report.build_report`, the same flags ``mcqaudit report``
shows, CIs included) and keeps the flags named to fail on (all of them by default): the check fails (exit
code 1) when one of them fires, and passes (0) when none does. Which names exist is
:data:`mcqaudit.metrics.rules.FLAG_ORDER`; an unknown name is a usage error (:class:`UnknownFlag`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

from mcqaudit.metrics.results import Flag, Report
from mcqaudit.metrics.rules import FLAG_ORDER

if TYPE_CHECKING:
    from mcqaudit.store.db import Study
    from mcqaudit.vocab import VerdictView

KNOWN_FLAGS: tuple[str, ...] = FLAG_ORDER  # every flag a check can fail on, most important first


class UnknownFlag(ValueError):
    """A flag name to fail on that no diagnostic has; the message names the known ones."""


class CheckJson(TypedDict):
    """``mcqaudit check --json``: the study, the flags checked, those of them that fired (each as in the
    report's ``flags``), the flags that fired but were not checked, and the exit code."""

    study: str
    fail_on: list[str]
    fired: list[Flag]
    not_checked: list[Flag]
    exit_code: Literal[0, 1]


@dataclass(frozen=True)
class CheckResult:
    study: str
    fail_on: tuple[str, ...]  # the flag names checked, in FLAG_ORDER
    fired: tuple[Flag, ...]  # the checked flags that fired, most important first
    not_checked: tuple[Flag, ...]  # flags that fired whose names were not checked

    @property
    def exit_code(self) -> Literal[0, 1]:
        """1 when a checked flag fired, else 0."""
        return 1 if self.fired else 0

    def as_json(self) -> CheckJson:
        return {
            "study": self.study,
            "fail_on": list(self.fail_on),
            "fired": list(self.fired),
            "not_checked": list(self.not_checked),
            "exit_code": self.exit_code,
        }


def fail_on_names(names: str | Iterable[str] | None) -> tuple[str, ...]:
    """The flag names to fail on, from ``--fail-on`` (``"a,b"``, or a list of names), in
    :data:`KNOWN_FLAGS` order; ``None``: all of them. Blanks around names are ignored; an unknown name, or a
    list that names none, raises :class:`UnknownFlag`."""
    if names is None:
        return KNOWN_FLAGS
    given = names.split(",") if isinstance(names, str) else list(names)
    wanted = [n.strip() for n in given if n.strip()]
    unknown = [n for n in wanted if n not in KNOWN_FLAGS]
    if unknown or not wanted:
        what = f"unknown flag {', '.join(map(repr, unknown))}" if unknown else "no flag named"
        raise UnknownFlag(f"{what}; the flags are: {', '.join(KNOWN_FLAGS)}")
    return tuple(n for n in KNOWN_FLAGS if n in wanted)


def check(
    study: str | Path | Study,
    fail_on: str | Iterable[str] | None = None,
    *,
    control: str | None = None,
    verdicts: VerdictView = "final",
    n_boot: int = 2000,
    seed: int = 0,
) -> CheckResult:
    """Check a study's flags: those named in ``fail_on`` (all by default, see :func:`fail_on_names`) that
    fire make the check fail. The flags are the report's (:func:`~mcqaudit.app.report.build_report` with
    the same options), so a check and ``mcqaudit report`` agree. Raises :class:`UnknownFlag` before any
    work for an unknown name, and what ``build_report`` raises (``ValueError`` for an unknown control arm).
    A report kept beside the study with these options (a ``mcqaudit report`` before) is read, not computed
    (:func:`~mcqaudit.app.report.build_report`); the command line looks for it before importing this
    function's dependencies and then checks it with :func:`check_report`."""
    from mcqaudit.app.report import build_report  # numpy and the metrics: not for `check_report` alone

    names = fail_on_names(fail_on)
    return check_report(build_report(study, control, verdicts, n_boot, seed), names)


def check_report(report: Report, names: tuple[str, ...]) -> CheckResult:
    """The check of a report's flags against ``names`` (from :func:`fail_on_names`)."""
    flags = report["flags"]
    return CheckResult(
        study=report["study"]["path"],
        fail_on=names,
        fired=tuple(f for f in flags if f["name"] in names),
        not_checked=tuple(f for f in flags if f["name"] not in names),
    )
