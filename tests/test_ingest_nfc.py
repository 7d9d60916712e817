"""The NFC guard of the options' look-alike check (store/loading.py ``_NFC_STABLE``): a text of ASCII and the
listed characters only is in NFC, so DuckDB's nfc_normalize() is asked only about other texts."""

from __future__ import annotations

import random
import re
import unicodedata

import duckdb

from mcqaudit.store.loading import _NFC_STABLE, _NFC_UNSURE


def _stable_chars() -> list[int]:
    out = []
    for lo, hi in re.findall(r"\\x\{([0-9a-f]+)\}(?:-\\x\{([0-9a-f]+)\})?", _NFC_STABLE):
        out += range(int(lo, 16), int(hi or lo, 16) + 1)
    return out


def _composition_seconds() -> set[int]:
    """The second characters of canonical compositions (NFC_Quick_Check Maybe), Hangul jamo included."""
    seconds = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for cp in range(0x30000):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<") and len(d.split()) == 2:
            seconds.add(int(d.split()[1], 16))
    return seconds


def test_every_listed_character_is_an_nfc_stable_starter() -> None:
    seconds = _composition_seconds()
    chars = _stable_chars()
    assert len(chars) > 40_000
    for cp in chars:
        c = chr(cp)
        assert unicodedata.category(c) not in ("Cn", "Cs", "Co"), hex(cp)
        assert unicodedata.combining(c) == 0, hex(cp)
        assert unicodedata.normalize("NFC", c) == c, hex(cp)
        assert cp not in seconds, hex(cp)


def test_duckdb_leaves_texts_of_listed_characters_as_they_are() -> None:
    chars = _stable_chars()
    rng = random.Random(3)
    texts = []
    for cp in chars:
        c = chr(cp)
        texts += [c, "e" + c + "z", c + chr(rng.choice(chars)), chr(rng.choice(chars)) + c]
    for _ in range(5000):
        texts.append(
            "".join(
                chr(rng.choice(chars)) if rng.random() < 0.6 else chr(rng.randrange(32, 127))
                for _ in range(rng.randrange(1, 12))
            )
        )
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT unnest(?) AS s", [texts])
    got = con.execute(
        f"SELECT count(*) FILTER (nfc_normalize(s) <> s), count(*) FILTER (regexp_matches(s, '{_NFC_UNSURE}')) FROM t"
    ).fetchone()
    assert got == (0, 0)


def test_the_guard_keeps_every_text_nfc_changes() -> None:
    """Texts with characters from everywhere (combining marks, singletons, jamo, unassigned code points): the
    guard is true wherever nfc_normalize() changes the text."""
    rng = random.Random(5)
    pool = [
        0x301,
        0x327,
        0x212B,
        0x2126,
        0x1161,
        0x11A8,
        0xF900,
        0x0CD5,
        0x09BE,
        0x0340,
        0x0387,
        0x110BA,
        0x1D15E,
    ]
    texts = []
    for _ in range(20000):
        texts.append(
            "".join(
                chr(rng.choice(pool))
                if rng.random() < 0.2
                else chr(rng.randrange(0xA0, 0x30000))
                if rng.random() < 0.5
                else chr(rng.randrange(32, 127))
                for _ in range(rng.randrange(1, 8))
            )
        )
    texts = [t for t in texts if not any(0xD800 <= ord(c) < 0xE000 for c in t)]
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT unnest(?) AS s", [texts])
    changed, missed = con.execute(
        f"SELECT count(*) FILTER (nfc_normalize(s) <> s), "
        f"count(*) FILTER (nfc_normalize(s) <> s AND NOT regexp_matches(s, '{_NFC_UNSURE}')) FROM t"
    ).fetchone()  # type: ignore[misc]
    assert changed > 100 and missed == 0
