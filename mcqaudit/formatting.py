"""How numbers and names read in words: the one home of the formatters the flags' evidence, the findings,
the Markdown / HTML report and the dashboard share. Pure presentation, no statistics.

Numbers come in two families, kept apart because their output is part of the golden reports: ``fmt_*``
write units into every number (``+2.1 pp [+0.3 pp, +3.9 pp]``, used in flag evidence), ``pct`` / ``num`` /
``pp`` write a table cell or a sentence (``+2.1 [0.3, 3.9]``, ``+2.1 pp [+0.3, +3.9]``).

Words that follow the data: :func:`pairing_words` (paired or unpaired Δs) and :func:`naive_range` (the
naive parser's letter range, from the study's option counts).

Names are text. An arm, queue, reviewer or model name is user input, shown as text in every medium, each
with one escaper: :func:`md_text` (Markdown: the dashboard's and the Markdown report's), :func:`html_text`
(the HTML report) and :func:`plotly_text` (plotly labels, which plotly.js reads as a little HTML). A
sentence of ours that quotes names and marks commands as `code` is cut by :func:`text_runs`, so that only
our own backticks become code: :func:`md_rich` and :func:`html_rich` write it.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Iterable, Mapping
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


# --- words that follow the data ---------------------------------------------------------------------------
def pairing_words(deltas: Mapping[str, Mapping[str, Any] | None]) -> str:
    """How the Δs of a ``{arm: delta entry}`` map (``delta_accuracy`` or one row of ``pairwise_delta``)
    were compared, in words: ``paired on shared items``, ``unpaired (the arms share no items)``, or both,
    naming the unpaired arms."""
    by = {a: (d or {}).get("pairing") for a, d in deltas.items() if d}
    unpaired = [a for a, p in by.items() if p == "unpaired"]
    if not unpaired:
        return "paired on shared items"
    if len(unpaired) == len(by):
        return "unpaired (the arms share no items)"
    return f"paired on shared items; unpaired for {', '.join(unpaired)} (no items shared)"


def option_counts(report: Mapping[str, Any]) -> list[int]:
    """The study's numbers of options per item, ascending: from its orientation labels (one letter per
    displayed option) and its design's gold shares (keyed by option count)."""
    st = report.get("study") or {}
    counts = {len(o) for o in st.get("orientations") or [] if o}
    counts |= {int(k) for k in ((report.get("design") or {}).get("gold_position_share") or {})}
    return sorted(counts)


def naive_range(counts: Iterable[int]) -> str:
    """The naive parser's letters for these option counts (docs/design.md §4): ``[A-Da-d]`` for one count,
    ``[A-Ba-b] for 2-option items, [A-Ga-g] for 7-option items`` for several; ``[A-Za-z] within the
    option range`` when none is known."""
    ns = sorted({int(n) for n in counts if 1 <= int(n) <= 26})

    def rng(n: int) -> str:
        last = chr(64 + n)
        return f"[A{'-' + last if n > 1 else ''}a{'-' + last.lower() if n > 1 else ''}]"

    if not ns:
        return "[A-Za-z] within the option range"
    if len(ns) == 1:
        return rng(ns[0])
    return ", ".join(f"{rng(n)} for {n}-option items" for n in ns)


def naive_words(report: Mapping[str, Any]) -> str:
    """What the naive parser is, in one phrase naming this study's range: ``the first letter within the
    option range, in either case, anywhere in the text: [A-Da-d]``."""
    return f"the first letter within the option range, in either case, anywhere in the text: {naive_range(option_counts(report))}"


# --- names as text, one escaper per medium ------------------------------------------------------------------
WORD_JOINER = "\u2060"
# Markdown renderers find links, emoji, icons and Streamlit's directives in the *text* (after escapes are
# resolved): `http://`, `//host`, `www.`, `a@b.c`, `:smile:`, `:material/flag:`, `:red[…]`. An invisible
# word joiner after the colon, between two slashes, between `www` and its dot and before the `@` breaks
# each pattern without changing what one reads.
_DEFUSE = re.compile(r"(?<=:)(?=\S)|(?<=/)(?=/)|(?i:(?<=www))(?=\.)|(?<=[\w.+-])(?=@)|^(?=@)")
_MD_ALWAYS = frozenset("\\`*<>&|~$")
_MD_LINE_START = frozenset("#>+-=[")
_ORDERED = re.compile(r"\d{1,9}(?=[.)])")


def md_text(text: object, *, line_start: bool = True, after: str = "") -> str:
    """``text`` as Markdown that every renderer (GitHub's, Streamlit's, markdown-it's) shows literally: no
    emphasis, code, link, image, HTML, entity, table, math, emoji, icon or block starts from it. Only what
    could start markup is escaped, so numbers and brackets read as they are in the source: the characters
    that always could (``\\ ` * < > & | ~ $``), ``_`` unless inside a word, ``[`` right after a word, ``]`` before ``(``/``[`` and
    ``!``/``^`` before ``[`` (or at the end, unless ``after``, what follows the text, says otherwise), and at the start of a line (``line_start``: the text may begin one) ``# > + - = [``, an
    ordered-list number's ``.``/``)`` and indentation. Newlines become hard line breaks."""
    s = _DEFUSE.sub(WORD_JOINER, str(text).replace("\r\n", "\n").replace("\r", "\n"))
    out: list[str] = []
    at_start = line_start
    k, n = 0, len(s)
    while k < n:
        c = s[k]
        if c == "\n":
            out.append("  \n")
            at_start, k = True, k + 1
            continue
        if at_start:
            at_start = False
            m = _ORDERED.match(s, k)
            if m:
                out.append(m.group(0) + "\\")
                k = m.end()
                continue
            if c in " \t":
                out.append("&#32;" if c == " " else "&#9;")
                k += 1
                continue
            if c in _MD_LINE_START:
                out.append("\\" + c)
                k += 1
                continue
        prev, nxt = s[k - 1] if k else "", s[k + 1] if k + 1 < n else after[:1]
        if (
            c in _MD_ALWAYS
            or (c == "_" and not (prev.isalnum() and nxt.isalnum()))
            or (c == "]" and nxt in ("(", "[", ""))
            or (c == "[" and (prev.isalnum() or prev in "_:!^" + WORD_JOINER))  # Streamlit's :red[…]
            or (c in "!^" and nxt in ("[", ""))
        ):
            out.append("\\" + c)
        else:
            out.append(c)
        k += 1
    return "".join(out)


def html_text(text: object) -> str:
    """``text`` as HTML text or attribute value: every ``& < > " '`` escaped."""
    return html.escape(str(text), quote=True)


def plotly_text(text: object) -> str:
    """``text`` for a plotly label, title, legend or hover text: plotly.js reads ``<b>``, ``<a href>``,
    ``<br>`` and entities in them, so ``& < >`` are escaped (:mod:`mcqaudit.svgplot` unescapes them)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


LABEL_CHARS = 32  # a name longer than this is cut on a plot's axis, legend or panel title (whole in its hover)


def short_label(text: str, limit: int = LABEL_CHARS, head: int | None = None) -> str:
    """``text`` cut in the middle to ``limit`` characters, ``…`` in place of what is left out: an arm name's start
    and its end (where the settings that tell arms apart often sit: ``…-alpha0.5-layer14``) both stay; ``head``
    characters of the start (default: two thirds)."""
    if len(text) <= limit:
        return text
    keep = limit - 1 - (limit - 1) // 3 if head is None else min(max(head, 1), limit - 2)
    tail = limit - 1 - keep
    return text[:keep] + "…" + text[len(text) - tail :]


def short_labels(names: Iterable[str], limit: int = LABEL_CHARS) -> dict[str, str]:
    """Each of ``names`` with its :func:`short_label`, told apart: where two would read alike, every label is
    longer, until none does (the names themselves, at the longest). Where the names share a long start (one
    model, several steering settings: ``qwen2.5-7b-instruct_steer-…``), a label keeps little of it and more of
    the end, which tells them apart."""
    unique = list(dict.fromkeys(names))
    common = len(os.path.commonprefix(unique)) if len(unique) > 1 else 0
    while True:
        head = 6 if common >= limit // 2 else None
        out = {n: short_label(n, limit, head) for n in unique}
        if len(set(out.values())) == len(unique):
            return out
        limit += 8


def text_runs(text: str, names: Iterable[str] = ()) -> list[tuple[str, bool]]:
    """A sentence of ours cut into runs of text and of code (``True``): a pair of backticks marks a command
    as code, but a backtick inside one of ``names`` (the names the sentence quotes) is the name's own and
    stays text, so a name never becomes code. With an unpaired backtick the whole sentence is text."""
    inside: set[int] = set()
    for name in names:
        if not name or "`" not in name:
            continue
        at = text.find(name)
        while at >= 0:
            inside.update(range(at, at + len(name)))
            at = text.find(name, at + 1)
    ticks = [k for k, c in enumerate(text) if c == "`" and k not in inside]
    if not ticks or len(ticks) % 2:
        return [(text, False)] if text else []
    runs: list[tuple[str, bool]] = []
    last = 0
    for a, b in zip(ticks[::2], ticks[1::2], strict=True):
        if a > last:
            runs.append((text[last:a], False))
        runs.append((text[a + 1 : b], True))
        last = b + 1
    if last < len(text):
        runs.append((text[last:], False))
    return runs


def _md_code(s: str) -> str:
    fence = "`" * (max((len(m) for m in re.findall(r"`+", s)), default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def md_rich(text: str, names: Iterable[str] = (), *, line_start: bool = True, end: str = "") -> str:
    """A sentence of ours as Markdown: its text by :func:`md_text`, its commands as code spans (``end``:
    what follows it, ``"\\n"`` at the end of a line or a table cell's ``" "``)."""
    out: list[str] = []
    runs = text_runs(text, list(names))
    for k, (run, code) in enumerate(runs):
        after = "`" if k + 1 < len(runs) else end
        out.append(_md_code(run) if code else md_text(run, line_start=line_start and k == 0, after=after))
    return "".join(out)


def html_rich(text: str, names: Iterable[str] = ()) -> str:
    """A sentence of ours as HTML: its text escaped, its commands in ``<code>``."""
    return "".join(
        f"<code>{html_text(run)}</code>" if code else html_text(run)
        for run, code in text_runs(text, list(names))
    )
