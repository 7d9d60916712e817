"""Which rows a row list shows (docs/design.md §8): the Review page's filters and the cells of the Parsers vs
judge matrices, as frozen values the dashboard keeps in its session and the store turns into SQL
(:mod:`mcqaudit.store.rows`). Pure."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mcqaudit.vocab import VERDICTS

NO_VERDICT = "no verdict yet"  # filter value, not a verdict: rows the judge has not graded (pending or error)
VERDICT_FILTER_VALUES = (*VERDICTS, NO_VERDICT)

# What two or more reviewers of a row said, read from each person's latest review in force (retracted ones
# left out; verdicts compared, not letters, as reviewer agreement counts them):
# - "reviewers disagree": their latest verdicts differ and no one has settled it yet: the row's latest review
#   is by one of the people who disagree (the reviews before it agree with each other), so a third person's
#   review is wanted; being the latest, it is the row's final verdict;
# - "settled": their latest verdicts differ, and the row's latest review came after reviews by other people
#   that disagreed with each other (a third person, or a later word, decided).
REVIEWERS_DISAGREE = "reviewers disagree"
REVIEWERS_SETTLED = "settled"
REVIEWER_FILTER_VALUES = (REVIEWERS_DISAGREE, REVIEWERS_SETTLED)


@dataclass(frozen=True)
class ConfusionCell:
    """One cell of a parser-vs-verdict confusion matrix: rows whose verdict is ``verdict`` and whose
    ``parser`` letter gives ``parser_verdict``."""

    parser: str
    verdict: str
    parser_verdict: str

    def describe(self) -> str:
        return f"verdict {self.verdict} where the {self.parser} parser says {self.parser_verdict}"


NO_LETTER = "none"  # a letter cell's "no letter" (the reference of an OTHER row, a parser that read none)


@dataclass(frozen=True)
class LetterCell:
    """One cell of a parser's letter confusion (``parser_letters``): graded rows whose reference letter (the
    picked letter, ``none`` for OTHER; rows answered without a picked letter have none known) is
    ``reference`` and whose ``parser`` letter is ``letter`` (``none``: no letter, or one beyond the displayed
    options)."""

    parser: str
    reference: str
    letter: str

    def describe(self) -> str:
        return f"reference letter {self.reference} where the {self.parser} parser reads {self.letter}"


Cell = ConfusionCell | LetterCell  # a cell of either matrix of Parsers vs judge


def cell_of(d: dict[str, Any]) -> Cell:
    """A cell from its :func:`dataclasses.asdict` form (a letter cell has a ``reference``)."""
    return LetterCell(**d) if "reference" in d else ConfusionCell(**d)


@dataclass(frozen=True)
class RowFilter:
    """Which rows a list shows. Empty tuples mean "any"; every condition is ANDed."""

    arms: tuple[str, ...] = ()
    orientations: tuple[str, ...] = ()
    verdicts: tuple[str, ...] = ()  # final verdicts CORRECT / INCORRECT / OTHER, and/or NO_VERDICT
    judge_statuses: tuple[str, ...] = ()
    disagree_parser: str | None = None  # rows where this parser's verdict differs from the final verdict
    reviewed: bool | None = None  # True: has an effective review; False: has none
    reviewers: str | None = None  # one of REVIEWER_FILTER_VALUES: what the row's reviewers said
    search: str = ""  # case-insensitive substring of question, generation or item_id; or an exact row_id
    queue_id: int | None = None  # only the rows of this spot-check queue, in queue order
    cell: Cell | None = None  # the rows of one cell of a verdict or a letter confusion matrix

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RowFilter:
        d = dict(d)
        cell = d.pop("cell", None)
        for k in ("arms", "orientations", "verdicts", "judge_statuses"):
            d[k] = tuple(d.get(k) or ())
        return cls(**d, cell=cell_of(cell) if cell else None)
