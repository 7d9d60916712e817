"""How numbers read in words: the one home of the formatters the flags' evidence, the findings, the
Markdown / HTML report and the dashboard's tables share. Pure presentation, no statistics.

Two families, kept apart because their output is part of the golden reports: ``fmt_*`` write units into
every number (``+2.1 pp [+0.3 pp, +3.9 pp]``, used in flag evidence), ``pct`` / ``num`` / ``pp`` write a
table cell or a sentence (``+2.1 [0.3, 3.9]``, ``+2.1 pp [+0.3, +3.9]``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def fmt_value(x: float | None, pct: bool = False, sign: bool = False) -> str:
    """``0.712``, ``71.2 %``, ``+0.012`` or ``+1.2 pp``; ``n/a`` for none."""
    if x is None:
        return "n/a"
    if pct:
        return f"{x * 100:+.1f} pp" if sign else f"{x * 100:.1f} %"
    return f"{x:+.3f}" if sign else f"{x:.3f}"


def fmt_metric(m: Mapping[str, Any] | None, *, pct: bool = False, sign: bool = False) -> str:
    """``0.712 [0.661, 0.758]`` (or percentages / signed) for evidence strings and tables."""
    if m is None:
        return "n/a"
    s = fmt_value(m.get("value"), pct, sign)
    if m.get("ci_low") is not None and m.get("ci_high") is not None:
        s += f" [{fmt_value(m['ci_low'], pct, sign)}, {fmt_value(m['ci_high'], pct, sign)}]"
    return s


def pp(m: Mapping[str, Any] | None) -> str:
    """``-2.7 pp [-7.3, +2.3]`` (a Δ in a sentence)."""
    if m is None or m.get("value") is None:
        return "n/a"
    s = f"{m['value'] * 100:+.1f} pp"
    if m.get("ci_low") is not None and m.get("ci_high") is not None:
        s += f" [{m['ci_low'] * 100:+.1f}, {m['ci_high'] * 100:+.1f}]"
    return s


def pct(m: Mapping[str, Any] | None, *, sign: bool = False, ci: bool = True) -> str:
    """A metric in percent (or percentage points) with its CI: ``71.2 [66.1, 75.8]``; ``n/a`` when missing."""
    if m is None or m.get("value") is None:
        return "n/a"
    f = "{:+.1f}" if sign else "{:.1f}"
    s = f.format(m["value"] * 100)
    if ci and m.get("ci_low") is not None and m.get("ci_high") is not None:
        s += f" [{f.format(m['ci_low'] * 100)}, {f.format(m['ci_high'] * 100)}]"
    return s


def num(m: Mapping[str, Any] | None, digits: int = 2, scale: float = 1.0) -> str:
    """A metric as a plain number with its CI: ``0.41 [0.20, 0.63]``."""
    if m is None or m.get("value") is None:
        return "n/a"
    s = f"{m['value'] * scale:.{digits}f}"
    if m.get("ci_low") is not None and m.get("ci_high") is not None:
        s += f" [{m['ci_low'] * scale:.{digits}f}, {m['ci_high'] * scale:.{digits}f}]"
    return s


def with_chance(m: Mapping[str, Any] | None) -> str:
    """:func:`pct` followed by the metric's chance level, when it has one."""
    s = pct(m)
    if m is not None and m.get("chance") is not None:
        s += f" (chance {m['chance'] * 100:.1f})"
    return s


def plural(n: int, word: str) -> str:
    """``1 shared item``, ``2 shared items``."""
    return f"{n} {word}" + ("" if n == 1 else "s")
