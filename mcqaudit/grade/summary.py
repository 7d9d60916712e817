"""What a grade run did (:class:`GradeSummary`: lines for people, :func:`summary_json` for scripts), and
the progress sink a run reports to (:class:`Reporter`; the CLI's rich progress bar is one).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from mcqaudit.grade.config import run_exit_code
from mcqaudit.grade.plan import Work
from mcqaudit.judge.client import redact_url
from mcqaudit.vocab import STANDIN_MODEL

STANDIN_NOTE = (
    f"note: the judge endpoint reports itself as {STANDIN_MODEL!r}, the stand-in judge: its verdicts come "
    "from a heuristic, not an LLM."
)


@dataclass
class GradeSummary:
    """What a grade run did; ``exit_code`` is the CLI's exit status (docs/design.md §5)."""

    fingerprint: str
    model: str
    shape: str
    temperature: float
    base_url: str | None
    rationale: bool = False  # the judge was asked for a rationale (`--rationale`)
    panel: bool = False  # a panel judge's run (`--panel`): in scope are the rows the primary judge graded
    in_scope: int = 0  # rows in scope that need a judge
    already_ok: int = 0  # of those, already ok under this fingerprint (skipped)
    targeted: int = 0  # rows this run set out to grade
    graded: int = 0  # targeted rows that got an ok verdict
    from_cache: int = 0  # ... answered by an earlier legal reply to the same prompt
    shared: int = 0  # ... answered by another row's request in this run (same prompt)
    errors: int = 0  # targeted rows that ended in error
    not_attempted: int = 0  # targeted rows left pending (run stopped early)
    errors_by_kind: Counter[str] = field(default_factory=Counter)
    retries_by_kind: Counter[str] = field(default_factory=Counter)
    requests: int = 0  # HTTP requests sent
    prompts_sent: int = 0  # distinct prompts sent
    tokens_in: int = 0
    tokens_out: int = 0
    elapsed_s: float = 0.0
    standin: bool = False
    aborted: str | None = None
    recovered: int = 0  # outcomes an earlier, killed run had journalled, written to the study at this open
    journal_failed: str | None = None  # the journal could not hold a reply, even in its reserve

    def begin(self, work: Work) -> None:
        """What the run sets out to do (the rows in scope, targeted, already ok; a stand-in fingerprint)."""
        self.already_ok = work.already_ok
        self.in_scope = work.in_scope
        self.targeted = len(work.targets)
        self.standin = self.standin or work.standin

    @property
    def exit_code(self) -> int:
        return run_exit_code(aborted=self.aborted, errors=self.errors, not_attempted=self.not_attempted)

    @property
    def rows_per_s(self) -> float:
        return (self.graded + self.errors) / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def lines(self) -> list[str]:
        out = [
            f"judge {self.fingerprint}: {self.model}, {self.shape} shape, temperature {self.temperature:g}"
            + (", with rationale" if self.rationale else "")
            + (", a panel judge (its verdicts are kept beside the final ones)" if self.panel else "")
            + (f", at {self.base_url}" if self.base_url else ""),
            f"{'rows the primary judge graded' if self.panel else 'rows needing the judge'}: {self.in_scope} "
            f"(already graded under this fingerprint: {self.already_ok}); this run: {self.targeted}",
            f"graded: {self.graded} (from earlier replies: {self.from_cache}; sharing a prompt with another row: "
            f"{self.shared})",
        ]
        if self.recovered:
            out.insert(
                1,
                f"recovered: {self.recovered} replies that an earlier run received but had not yet written "
                "(it was killed); replayed from the study's journal",
            )
        retries = ", ".join(f"{k} ×{n}" for k, n in sorted(self.retries_by_kind.items()))
        out.append(
            f"requests: {self.requests} for {self.prompts_sent} prompts"
            + (f" (retries: {retries})" if retries else "")
        )
        if self.errors:
            kinds = ", ".join(f"{k} ×{n}" for k, n in self.errors_by_kind.most_common())
            out.append(
                f"errors: {self.errors} rows have no verdict ({kinds}); their raw replies are kept; "
                "re-run `mcqaudit grade` to retry them"
            )
        else:
            out.append("errors: 0")
        if self.not_attempted:
            out.append(
                f"not attempted: {self.not_attempted} rows (the run stopped early); re-run to grade them"
            )
        out.append(f"tokens: {self.tokens_in} in, {self.tokens_out} out")
        out.append(f"elapsed: {self.elapsed_s:.1f} s ({self.rows_per_s:.1f} rows/s)")
        if self.standin:
            out.append(STANDIN_NOTE)
        if self.journal_failed and not self.aborted:  # a stopped run's line says it already
            out.append(f"warning: {self.journal_failed}")
        if self.aborted:
            out.append(f"stopped: {self.aborted}")
        return out


class Reporter(Protocol):
    """Progress sink for a grade run (the CLI's is a rich progress bar; tests pass none)."""

    def start(self, total: int, done: int) -> None: ...
    def advance(self, rows: int, errors: int, tokens: int) -> None: ...
    def note(self, text: str) -> None: ...
    def stop(self) -> None: ...


class NullReporter:
    def start(self, total: int, done: int) -> None: ...
    def advance(self, rows: int, errors: int, tokens: int) -> None: ...
    def note(self, text: str) -> None: ...
    def stop(self) -> None: ...


def summary_json(summary: GradeSummary) -> dict[str, Any]:
    """The summary as plain JSON-able data (for scripts)."""
    return {
        "fingerprint": summary.fingerprint,
        "model": summary.model,
        "shape": summary.shape,
        "temperature": summary.temperature,
        "rationale": summary.rationale,
        "panel": summary.panel,
        "base_url": redact_url(summary.base_url),
        "in_scope": summary.in_scope,
        "already_ok": summary.already_ok,
        "targeted": summary.targeted,
        "graded": summary.graded,
        "from_cache": summary.from_cache,
        "shared": summary.shared,
        "errors": summary.errors,
        "errors_by_kind": dict(summary.errors_by_kind),
        "not_attempted": summary.not_attempted,
        "requests": summary.requests,
        "prompts_sent": summary.prompts_sent,
        "retries_by_kind": dict(summary.retries_by_kind),
        "tokens_in": summary.tokens_in,
        "tokens_out": summary.tokens_out,
        "elapsed_s": round(summary.elapsed_s, 3),
        "standin": summary.standin,
        "aborted": summary.aborted,
        "recovered": summary.recovered,
        "journal_failed": summary.journal_failed,
        "exit_code": summary.exit_code,
    }
