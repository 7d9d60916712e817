"""What the command line prints reaches the screen as the characters it is: the one helper for it. Pure.

A terminal acts on some characters instead of showing them: an escape sequence (ESC) recolours, moves the
cursor or retitles the window, a bidi override (U+202E) shows what follows reversed, zero-width and other
format characters hide, a line separator breaks the line, and a no-break space looks like a space. A name
from a study (arm, model, reviewer, queue) or a message quoting one is printed with each such character
written as its Python escape (``\\u202e``, ``\\x1b``), so ``base`` and ``base\\u200b`` read differently on
screen, as they are in the study.
"""

from __future__ import annotations


def _escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str, keep: str = "\n\t") -> str:
    """``text`` with every character a terminal would act on or not show written as its escape: what
    :meth:`str.isprintable` calls non-printable (controls, format and bidi characters, separators and spaces
    other than the ASCII space, unassigned code points), except those in ``keep`` (a message's own line
    breaks and tabs; pass ``keep=""`` for a single name)."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else _escape(ch) for ch in text)
