"""Input problems, reported as ``FILE:LINE: field: reason`` (or ``FILE:row N`` for tables)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    source: str
    line: int | None
    field: str
    reason: str
    unit: str = "line"  # 'line' for JSONL, 'row' for CSV/Parquet

    def __str__(self) -> str:
        if self.line is None:
            where = self.source
        elif self.unit == "line":
            where = f"{self.source}:{self.line}"
        else:
            where = f"{self.source}:row {self.line}"
        return f"{where}: {self.field}: {self.reason}"


class InputError(Exception):
    """Bad input: every problem found (up to a cap), and the total count."""

    def __init__(self, problems: list[Problem], total: int | None = None, note: str = ""):
        self.problems = problems
        self.total = total if total is not None else len(problems)
        shown = "\n".join(str(p) for p in problems)
        more = f"\n... and {self.total - len(problems)} more problems" if self.total > len(problems) else ""
        super().__init__(f"{shown}{more}{note}")


class UsageError(ValueError):
    """A command line that cannot work (a bad `--map`, a mapped column the file lacks): exit 2, not a row
    problem."""
