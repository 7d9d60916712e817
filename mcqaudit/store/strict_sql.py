"""The strict pre-filter in SQL: the twin of :func:`mcqaudit.parsers.strict` that ingest runs in DuckDB (RE2).

Same rule, step by step (docs/design.md §4): strip, the length bound, the lead-in, the head (an optional
``Option``, wrappers, the letter), then either the trailing closers (with the ``a``/``i`` rule and "the letter
is another option's text") or a separator and exactly the letter's own option text; the whole answer must not
be another option's text. The patterns are :data:`mcqaudit.parsers.STRICT_RE2`, the RE2 spellings of
strict's own.

The one step RE2 has no twin for is ``parsers._norm``'s ``unicodedata.normalize("NFKC", ...).casefold()``.
Here it is ``lower()`` (after three explicit folds: ß and ẞ to ``ss``, final sigma to sigma), which is exact
on the *foldable* characters (:data:`FOLDABLE`):

- characters whose NFKC quick check is Yes with canonical combining class 0 and that never compose with a
  character before them (no combining marks, no second halves of a canonical composition, no Hangul medial
  or final jamo): by UAX #15's quick check every string of them is already NFKC, so NFKC leaves it as it is;
- whose case fold DuckDB's ``lower()`` (with the three folds) gives exactly, one by one;
- and the whitespace characters (:data:`mcqaudit.vocab.WHITESPACE`), which NFKC maps to whitespace and
  ``_norm`` collapses to one space anyway.

A row whose answer or option texts hold any other character (a combining accent, a fullwidth letter, a
ligature, Cherokee) is decided by Python's ``strict`` itself, so the letters are strict's on every row.
:data:`FOLDABLE` is computed from ``unicodedata`` and DuckDB (:func:`foldable_ranges`) and stored below; a
Python with other Unicode tables, or a DuckDB whose ``lower()`` folds one of them differently, falls back to
ASCII alone (:func:`foldable_class`), and ``tests/test_strict_sql.py`` regenerates the table.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

import duckdb

from mcqaudit.parsers import STRICT_RE2
from mcqaudit.vocab import LETTERS, MAX_OPTIONS, WHITESPACE

__all__ = [
    "WS_CLASS",
    "FOLDABLE",
    "FOLDABLE_DUCKDB",
    "FOLDABLE_UNIDATA",
    "fold_sql",
    "foldable_class",
    "foldable_ranges",
    "folded_sql",
    "norms_sql",
    "sql_text",
    "strict_letters_sql",
]

# case folds lower() does not make (Python's casefold: full folding, and final sigma folds to sigma)
_FOLDS: tuple[tuple[int, str], ...] = ((0x1E9E, "ss"), (0xDF, "ss"), (0x3C2, "\u03c3"))


def sql_text(text: str) -> str:
    """A SQL expression for a text, in printable ASCII (``chr()`` for the other characters)."""
    parts = [f"chr({ord(c)})" if not " " <= c <= "~" else "'" + c.replace("'", "''") + "'" for c in text]
    return " || ".join(parts) if parts else "''"


def _lit(pattern: str) -> str:
    return "'" + pattern.replace("'", "''") + "'"


def fold_sql(expr: str) -> str:
    """SQL: ``expr`` case-folded as Python's ``str.casefold`` folds it, on the foldable characters."""
    for cp, to in _FOLDS:
        expr = f"replace({expr}, chr({cp}), {sql_text(to)})"
    return f"lower({expr})"


def _re2_body(chars: str) -> str:
    return "".join(f"\\x{{{ord(c):x}}}" for c in chars)


_WS_BODY = _re2_body(WHITESPACE)
WS_CLASS = f"[{_WS_BODY}]"  # what str.strip() strips, in ASCII
_WS_RUN = f"{WS_CLASS}+"
_BOTH = _re2_body(STRICT_RE2.edge_both)
_ALL = _re2_body(STRICT_RE2.edge_both + STRICT_RE2.edge_trail)


# ---------------------------------------------------------------------------------------------------------
# the foldable characters


def _composes_after() -> set[int]:
    """Characters that can compose with the character before them (the second half of a canonical
    decomposition into two, and Hangul medial and final jamo): NFKC quick check Maybe, or more."""
    out = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for cp in range(0x110000):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<"):
            parts = d.split()
            if len(parts) == 2:
                out.add(int(parts[1], 16))
    return out


def _ranges(cps: Sequence[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for cp in cps:
        if out and out[-1][1] == cp - 1:
            out[-1] = (out[-1][0], cp)
        else:
            out.append((cp, cp))
    return out


def foldable_ranges(con: duckdb.DuckDBPyConnection) -> list[tuple[int, int]]:
    """Compute the foldable characters (see the module docstring) from this Python's ``unicodedata`` and this
    DuckDB's ``lower()``, as ranges of code points. Slow (about a second): the result is :data:`FOLDABLE`."""
    after = _composes_after()
    base = [
        cp
        for cp in range(0x110000)
        if not 0xD800 <= cp <= 0xDFFF
        and unicodedata.category(c := chr(cp)) != "Cn"
        and not unicodedata.combining(c)
        and cp not in after
        and unicodedata.normalize("NFKC", c) == c
    ]
    folded = _sql_folds(con, [chr(cp) for cp in base])
    keep = [cp for cp, f in zip(base, folded, strict=True) if f == chr(cp).casefold()]
    return _ranges(sorted(set(keep) | {ord(c) for c in WHITESPACE}))


def _sql_folds(con: duckdb.DuckDBPyConnection, chars: Sequence[str]) -> list[str]:
    rows = con.execute(f"SELECT list_transform(?, lambda c: {fold_sql('c')})", [list(chars)]).fetchall()
    return list(rows[0][0])


FOLDABLE_UNIDATA = "14.0.0"  # the unicodedata version FOLDABLE was computed with
FOLDABLE_DUCKDB = "2.0.1"  # and the DuckDB version
# (first, last) code points, hex; regenerate with tests/test_strict_sql.py's message when it says they differ
_FOLDABLE_HEX = """
0000-00a7 00a9-00a9 00ab-00ae 00b0-00b1 00b6-00b7 00bb-00bb 00bf-012f 0131-0131 0134-013e 0141-0148 014a-017e
0180-01c3 01cd-01ef 01f4-02af 02b9-02d7 02de-02df 02e5-02ff 034f-034f 0370-0373 0375-0377 037b-037d 037f-037f
0386-0386 0388-038a 038c-038c 038e-038f 0391-03a1 03a3-03af 03b1-03cf 03d7-03ef 03f3-03f3 03f6-03f8 03fa-0482
0488-052f 0531-0556 0559-0586 0588-058a 058d-058f 05be-05be 05c0-05c0 05c3-05c3 05c6-05c6 05d0-05ea 05ef-05f4
0600-060f 061b-064a 0660-066f 0671-0674 0679-06d5 06dd-06de 06e5-06e6 06e9-06e9 06ee-070d 070f-0710 0712-072f
074d-07b1 07c0-07ea 07f4-07fa 07fe-0815 081a-081a 0824-0824 0828-0828 0830-083e 0840-0858 085e-085e 0860-086a
0870-088e 0890-0891 08a0-08c9 08e2-08e2 0900-093b 093d-094c 094e-0950 0955-0957 0960-0983 0985-098c 098f-0990
0993-09a8 09aa-09b0 09b2-09b2 09b6-09b9 09bd-09bd 09bf-09c4 09c7-09c8 09cb-09cc 09ce-09ce 09e0-09e3 09e6-09fd
0a01-0a03 0a05-0a0a 0a0f-0a10 0a13-0a28 0a2a-0a30 0a32-0a32 0a35-0a35 0a38-0a39 0a3e-0a42 0a47-0a48 0a4b-0a4c
0a51-0a51 0a5c-0a5c 0a66-0a76 0a81-0a83 0a85-0a8d 0a8f-0a91 0a93-0aa8 0aaa-0ab0 0ab2-0ab3 0ab5-0ab9 0abd-0ac5
0ac7-0ac9 0acb-0acc 0ad0-0ad0 0ae0-0ae3 0ae6-0af1 0af9-0aff 0b01-0b03 0b05-0b0c 0b0f-0b10 0b13-0b28 0b2a-0b30
0b32-0b33 0b35-0b39 0b3d-0b3d 0b3f-0b44 0b47-0b48 0b4b-0b4c 0b55-0b55 0b5f-0b63 0b66-0b77 0b82-0b83 0b85-0b8a
0b8e-0b90 0b92-0b95 0b99-0b9a 0b9c-0b9c 0b9e-0b9f 0ba3-0ba4 0ba8-0baa 0bae-0bb9 0bbf-0bc2 0bc6-0bc8 0bca-0bcc
0bd0-0bd0 0be6-0bfa 0c00-0c0c 0c0e-0c10 0c12-0c28 0c2a-0c39 0c3d-0c44 0c46-0c48 0c4a-0c4c 0c58-0c5a 0c5d-0c5d
0c60-0c63 0c66-0c6f 0c77-0c8c 0c8e-0c90 0c92-0ca8 0caa-0cb3 0cb5-0cb9 0cbd-0cc1 0cc3-0cc4 0cc6-0cc8 0cca-0ccc
0cdd-0cde 0ce0-0ce3 0ce6-0cef 0cf1-0cf2 0d00-0d0c 0d0e-0d10 0d12-0d3a 0d3d-0d3d 0d3f-0d44 0d46-0d48 0d4a-0d4c
0d4e-0d4f 0d54-0d56 0d58-0d63 0d66-0d7f 0d81-0d83 0d85-0d96 0d9a-0db1 0db3-0dbb 0dbd-0dbd 0dc0-0dc6 0dd0-0dd4
0dd6-0dd6 0dd8-0dde 0de6-0def 0df2-0df4 0e01-0e32 0e34-0e37 0e3f-0e47 0e4c-0e5b 0e81-0e82 0e84-0e84 0e86-0e8a
0e8c-0ea3 0ea5-0ea5 0ea7-0eb2 0eb4-0eb7 0ebb-0ebd 0ec0-0ec4 0ec6-0ec6 0ecc-0ecd 0ed0-0ed9 0ede-0edf 0f00-0f0b
0f0d-0f17 0f1a-0f34 0f36-0f36 0f38-0f38 0f3a-0f42 0f44-0f47 0f49-0f4c 0f4e-0f51 0f53-0f56 0f58-0f5b 0f5d-0f68
0f6a-0f6c 0f7e-0f7f 0f85-0f85 0f88-0f92 0f94-0f97 0f99-0f9c 0f9e-0fa1 0fa3-0fa6 0fa8-0fab 0fad-0fb4 0fb6-0fb6
0fb8-0fb8 0fba-0fbc 0fbe-0fc5 0fc7-0fcc 0fce-0fda 1000-102d 102f-1036 1038-1038 103b-108c 108e-10c5 10c7-10c7
10cd-10cd 10d0-10fb 10fd-1160 1176-11a7 11c3-1248 124a-124d 1250-1256 1258-1258 125a-125d 1260-1288 128a-128d
1290-12b0 12b2-12b5 12b8-12be 12c0-12c0 12c2-12c5 12c8-12d6 12d8-1310 1312-1315 1318-135a 1360-137c 1380-1399
1400-169c 16a0-16f8 1700-1713 171f-1733 1735-1736 1740-1753 1760-176c 176e-1770 1772-1773 1780-17d1 17d3-17dc
17e0-17e9 17f0-17f9 1800-1819 1820-1878 1880-18a8 18aa-18aa 18b0-18f5 1900-191e 1920-192b 1930-1938 1940-1940
1944-196d 1970-1974 1980-19ab 19b0-19c9 19d0-19da 19de-1a16 1a19-1a1b 1a1e-1a5e 1a61-1a74 1a80-1a89 1a90-1a99
1aa0-1aad 1abe-1abe 1b00-1b33 1b36-1b43 1b45-1b4c 1b50-1b6a 1b74-1b7e 1b80-1ba9 1bac-1be5 1be7-1bf1 1bfc-1c36
1c3b-1c49 1c4d-1c7f 1c90-1cba 1cbd-1cc7 1cd3-1cd3 1ce1-1ce1 1ce9-1cec 1cee-1cf3 1cf5-1cf7 1cfa-1cfa 1d00-1d2b
1d2f-1d2f 1d3b-1d3b 1d4e-1d4e 1d6b-1d77 1d79-1d9a 1e00-1e95 1e9c-1f15 1f18-1f1d 1f20-1f45 1f48-1f4d 1f51-1f51
1f53-1f53 1f55-1f55 1f57-1f57 1f59-1f59 1f5b-1f5b 1f5d-1f5d 1f5f-1f70 1f72-1f72 1f74-1f74 1f76-1f76 1f78-1f78
1f7a-1f7a 1f7c-1f7c 1fb0-1fb1 1fb8-1fba 1fc8-1fc8 1fca-1fca 1fd0-1fd1 1fd8-1fda 1fe0-1fe1 1fe5-1fe5 1fe8-1fea
1fec-1fec 1ff8-1ff8 1ffa-1ffa 2000-2010 2012-2016 2018-2023 2027-2032 2035-2035 2038-203b 203d-203d 203f-2046
204a-2056 2058-2064 2066-206f 20a0-20a7 20a9-20c0 20dd-20e0 20e2-20e4 2104-2104 2108-2108 2114-2114 2117-2118
211e-211f 2123-2123 2125-2125 2127-2127 2129-2129 212e-212e 2132-2132 213a-213a 2141-2144 214a-214f 2180-2188
218a-218b 2190-222b 222e-222e 2231-2328 232b-2426 2440-244a 24eb-2a0b 2a0d-2a73 2a77-2adb 2add-2b73 2b76-2b95
2b97-2c7b 2c7e-2cee 2cf2-2cf3 2cf9-2d25 2d27-2d27 2d2d-2d2d 2d30-2d67 2d70-2d70 2d80-2d96 2da0-2da6 2da8-2dae
2db0-2db6 2db8-2dbe 2dc0-2dc6 2dc8-2dce 2dd0-2dd6 2dd8-2dde 2e00-2e5d 2e80-2e99 2e9b-2e9e 2ea0-2ef2 2ff0-2ffb
3000-3029 3030-3035 3037-3037 303b-303f 3041-3096 309d-309e 30a0-30fe 3105-312f 3190-3191 31a0-31e3 31f0-31ff
3248-324f 327f-327f 3400-a48c a490-a4c6 a4d0-a62b a640-a66e a670-a673 a67e-a69b a6a0-a6ef a6f2-a6f7 a700-a76f
a771-a7ca a7d0-a7d1 a7d3-a7d3 a7d5-a7d9 a7f5-a7f7 a7fa-a805 a807-a82b a830-a839 a840-a877 a880-a8c3 a8c5-a8c5
a8ce-a8d9 a8f2-a92a a92e-a952 a95f-a97c a980-a9b2 a9b4-a9bf a9c1-a9cd a9cf-a9d9 a9de-a9fe aa00-aa36 aa40-aa4d
aa50-aa59 aa5c-aaaf aab1-aab1 aab5-aab6 aab9-aabd aac0-aac0 aac2-aac2 aadb-aaf5 ab01-ab06 ab09-ab0e ab11-ab16
ab20-ab26 ab28-ab2e ab30-ab5b ab60-ab68 ab6a-ab6b abc0-abec abf0-abf9 ac00-d7a3 d7b0-d7c6 d7cb-d7fb e000-f8ff
fa0e-fa0f fa11-fa11 fa13-fa14 fa1f-fa1f fa21-fa21 fa23-fa24 fa27-fa29 fbb2-fbc2 fd3e-fd4f fdcf-fdcf fdfd-fe0f
fe45-fe46 fe73-fe73 feff-feff fff9-fffd 10000-1000b 1000d-10026 10028-1003a 1003c-1003d 1003f-1004d
10050-1005d 10080-100fa 10100-10102 10107-10133 10137-1018e 10190-1019c 101a0-101a0 101d0-101fc 10280-1029c
102a0-102d0 102e1-102fb 10300-10323 1032d-1034a 10350-10375 10380-1039d 1039f-103c3 103c8-103d5 10400-1049d
104a0-104a9 104b0-104d3 104d8-104fb 10500-10527 10530-10563 1056f-1057a 1057c-1058a 1058c-10592 10594-10595
10597-105a1 105a3-105b1 105b3-105b9 105bb-105bc 10600-10736 10740-10755 10760-10767 10780-10780 10800-10805
10808-10808 1080a-10835 10837-10838 1083c-1083c 1083f-10855 10857-1089e 108a7-108af 108e0-108f2 108f4-108f5
108fb-1091b 1091f-10939 1093f-1093f 10980-109b7 109bc-109cf 109d2-10a03 10a05-10a06 10a0c-10a0c 10a0e-10a0e
10a10-10a13 10a15-10a17 10a19-10a35 10a40-10a48 10a50-10a58 10a60-10a9f 10ac0-10ae4 10aeb-10af6 10b00-10b35
10b39-10b55 10b58-10b72 10b78-10b91 10b99-10b9c 10ba9-10baf 10c00-10c48 10c80-10cb2 10cc0-10cf2 10cfa-10d23
10d30-10d39 10e60-10e7e 10e80-10ea9 10ead-10ead 10eb0-10eb1 10f00-10f27 10f30-10f45 10f51-10f59 10f70-10f81
10f86-10f89 10fb0-10fcb 10fe0-10ff6 11000-11045 11047-1104d 11052-1106f 11071-11075 11080-110b8 110bb-110c2
110cd-110cd 110d0-110e8 110f0-110f9 11103-11126 11128-11132 11136-11147 11150-11172 11174-11176 11180-111bf
111c1-111c9 111cb-111df 111e1-111f4 11200-11211 11213-11234 11237-1123e 11280-11286 11288-11288 1128a-1128d
1128f-1129d 1129f-112a9 112b0-112e8 112f0-112f9 11300-11303 11305-1130c 1130f-11310 11313-11328 1132a-11330
11332-11333 11335-11339 1133d-1133d 1133f-11344 11347-11348 1134b-1134c 11350-11350 1135d-11363 11400-11441
11443-11445 11447-1145b 1145d-1145d 1145f-11461 11480-114af 114b1-114b9 114bb-114bc 114be-114c1 114c4-114c7
114d0-114d9 11580-115ae 115b0-115b5 115b8-115be 115c1-115dd 11600-1163e 11640-11644 11650-11659 11660-1166c
11680-116b5 116b8-116b9 116c0-116c9 11700-1171a 1171d-1172a 11730-11746 11800-11838 1183b-1183b 118a0-118f2
118ff-11906 11909-11909 1190c-11913 11915-11916 11918-1192f 11931-11935 11937-11938 1193b-1193c 1193f-11942
11944-11946 11950-11959 119a0-119a7 119aa-119d7 119da-119df 119e1-119e4 11a00-11a33 11a35-11a46 11a50-11a98
11a9a-11aa2 11ab0-11af8 11c00-11c08 11c0a-11c36 11c38-11c3e 11c40-11c45 11c50-11c6c 11c70-11c8f 11c92-11ca7
11ca9-11cb6 11d00-11d06 11d08-11d09 11d0b-11d36 11d3a-11d3a 11d3c-11d3d 11d3f-11d41 11d43-11d43 11d46-11d47
11d50-11d59 11d60-11d65 11d67-11d68 11d6a-11d8e 11d90-11d91 11d93-11d96 11d98-11d98 11da0-11da9 11ee0-11ef8
11fb0-11fb0 11fc0-11ff1 11fff-12399 12400-1246e 12470-12474 12480-12543 12f90-12ff2 13000-1342e 13430-13438
14400-14646 16800-16a38 16a40-16a5e 16a60-16a69 16a6e-16abe 16ac0-16ac9 16ad0-16aed 16af5-16af5 16b00-16b2f
16b37-16b45 16b50-16b59 16b5b-16b61 16b63-16b77 16b7d-16b8f 16e40-16e9a 16f00-16f4a 16f4f-16f87 16f8f-16f9f
16fe0-16fe4 17000-187f7 18800-18cd5 18d00-18d08 1aff0-1aff3 1aff5-1affb 1affd-1affe 1b000-1b122 1b150-1b152
1b164-1b167 1b170-1b2fb 1bc00-1bc6a 1bc70-1bc7c 1bc80-1bc88 1bc90-1bc99 1bc9c-1bc9d 1bc9f-1bca3 1cf00-1cf2d
1cf30-1cf46 1cf50-1cfc3 1d000-1d0f5 1d100-1d126 1d129-1d15d 1d16a-1d16c 1d173-1d17a 1d183-1d184 1d18c-1d1a9
1d1ae-1d1ba 1d1c1-1d1ea 1d200-1d241 1d245-1d245 1d2e0-1d2f3 1d300-1d356 1d360-1d378 1d800-1da8b 1da9b-1da9f
1daa1-1daaf 1df00-1df1e 1e100-1e12c 1e137-1e13d 1e140-1e149 1e14e-1e14f 1e290-1e2ad 1e2c0-1e2eb 1e2f0-1e2f9
1e2ff-1e2ff 1e7e0-1e7e6 1e7e8-1e7eb 1e7ed-1e7ee 1e7f0-1e7fe 1e800-1e8c4 1e8c7-1e8cf 1e900-1e943 1e94b-1e94b
1e950-1e959 1e95e-1e95f 1ec71-1ecb4 1ed01-1ed3d 1eef0-1eef1 1f000-1f02b 1f030-1f093 1f0a0-1f0ae 1f0b1-1f0bf
1f0c1-1f0cf 1f0d1-1f0f5 1f10b-1f10f 1f12f-1f12f 1f150-1f169 1f16d-1f18f 1f191-1f1ad 1f1e6-1f1ff 1f260-1f265
1f300-1f6d7 1f6dd-1f6ec 1f6f0-1f6fc 1f700-1f773 1f780-1f7d8 1f7e0-1f7eb 1f7f0-1f7f0 1f800-1f80b 1f810-1f847
1f850-1f859 1f860-1f887 1f890-1f8ad 1f8b0-1f8b1 1f900-1fa53 1fa60-1fa6d 1fa70-1fa74 1fa78-1fa7c 1fa80-1fa86
1fa90-1faac 1fab0-1faba 1fac0-1fac5 1fad0-1fad9 1fae0-1fae7 1faf0-1faf6 1fb00-1fb92 1fb94-1fbca 20000-2a6df
2a700-2b738 2b740-2b81d 2b820-2cea1 2ceb0-2ebe0 30000-3134a e0001-e0001 e0020-e007f e0100-e01ef f0000-ffffd
100000-10fffd
"""
FOLDABLE: tuple[tuple[int, int], ...] = tuple(
    (int(a, 16), int(b, 16)) for a, b in (r.split("-") for r in _FOLDABLE_HEX.split())
)


_USABLE: dict[str, bool] = {}  # DuckDB version -> whether FOLDABLE holds there (checked once per process)


def _usable(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether :data:`FOLDABLE` holds here: the same Unicode tables, and, on a DuckDB other than the one it was
    computed with, NFKC maps each whitespace character to whitespace that ``fold_sql`` keeps, and ``fold_sql``
    gives every foldable character's case fold (one query over them all, one a line: about 0.2 s)."""
    if unicodedata.unidata_version != FOLDABLE_UNIDATA or not FOLDABLE:
        return False
    if duckdb.__version__ == FOLDABLE_DUCKDB:
        return True  # tests/test_strict_sql.py recomputes FOLDABLE on it
    if not all(unicodedata.normalize("NFKC", w).casefold().isspace() for w in WHITESPACE):
        return False
    spaced = "\n".join("".join("".join(map(chr, range(a, b + 1))) for a, b in FOLDABLE))
    ((folded, ws_kept),) = con.execute(
        f"SELECT {fold_sql('$1')}, list_bool_and(list_transform($2, lambda c: "
        f"regexp_full_match({fold_sql('c')}, {_lit(_WS_RUN)})))",
        [spaced, list(WHITESPACE)],
    ).fetchall()
    return bool(folded == spaced.casefold() and ws_kept)


def foldable_class(con: duckdb.DuckDBPyConnection) -> str:
    """An RE2 class of the characters on which :func:`norms_sql` is ``parsers._norm``: :data:`FOLDABLE`, or
    ASCII alone where it does not hold (ASCII's NFKC and case folds never change)."""
    if duckdb.__version__ not in _USABLE:
        _USABLE[duckdb.__version__] = _usable(con)
    if not _USABLE[duckdb.__version__]:
        return r"[\x00-\x7f]"
    return (
        "[" + "".join(f"\\x{{{a:x}}}" if a == b else f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in FOLDABLE) + "]"
    )


# ---------------------------------------------------------------------------------------------------------
# strict


def _in_others(value: str) -> str:
    """SQL: ``value`` is the normalised text of an option other than the letter's (``nl``: the options'
    normalised texts, ``idx``: the letter's 0-based index)."""
    return (
        f"(len(list_filter(nl, lambda x: x = {value})) > CASE WHEN nl[idx + 1] = {value} THEN 1 ELSE 0 END)"
    )


# joins the texts norms_sql normalises in one go: a noncharacter, never foldable (so never in a text it reads)
_SEP = 0xFFFF
_SEP_RE = f"\\x{{{_SEP:x}}}"
# whitespace _norm changes: a run of two or more, or one that is not a space (a lone space stays)
_WS_TO_COLLAPSE = f"[{_WS_BODY}][{_WS_BODY}]+|[{_re2_body(WHITESPACE.replace(' ', ''))}]"
# _norm's edge loop at its fixed point, in each text: the both-ends set off its start, both sets off its end
_TEXT_START = f"(^|{_SEP_RE})[{_BOTH}]+"
_TEXT_END = f"[{_ALL}]+({_SEP_RE}|\\z)"
# joined folded texts that _norm leaves as they are: none starts with an edge character or ends with one, and
# no whitespace but single inner spaces (most option texts; one match, no replacing, tells)
_NOT_IN = f"{_WS_BODY}{_SEP_RE}"  # (an element's characters are never the separator)
_NORMAL = f"[^{_ALL}{_NOT_IN}]|[^{_BOTH}{_NOT_IN}](?: ?[^{_NOT_IN}])* ?[^{_ALL}{_NOT_IN}]"
_ALL_NORMAL = f"(?:{_NORMAL})?(?:{_SEP_RE}(?:{_NORMAL})?)*"


def folded_sql(texts: str) -> str:
    """SQL: a list of texts joined into one and case-folded, for :func:`norms_sql`."""
    return fold_sql(f"array_to_string({texts}, chr({_SEP}))")


def norms_sql(folded: str) -> str:
    """SQL: ``[parsers._norm(t) for t in texts]`` from ``folded`` (:func:`folded_sql` of ``texts``; a column,
    as it is read up to three times), exact when the texts hold only foldable characters: the joined texts
    are normalised at once (one collapse, one edge pass each way) and split again."""
    collapsed = f"regexp_replace({folded}, {_lit(_WS_TO_COLLAPSE)}, ' ', 'g')"
    starts = f"regexp_replace({collapsed}, {_lit(_TEXT_START)}, '\\1', 'g')"
    ends = f"regexp_replace({starts}, {_lit(_TEXT_END)}, '\\1', 'g')"
    return (
        f"string_split(CASE WHEN regexp_full_match({folded}, {_lit(_ALL_NORMAL)}) THEN {folded} ELSE {ends} END, "
        f"chr({_SEP}))"
    )


def strict_letters_sql(con: duckdb.DuckDBPyConnection, source: str, max_extra: int) -> str:
    """A SELECT of (row_id, letter, fallback, generation, options) over ``source`` (a subquery or table with
    row_id, generation, options; a name of this package's, never input): for each row either
    ``parsers.strict``'s letter (``fallback`` false; rows it defers on are left out) or ``fallback`` true
    with the row's generation and options, where a text holds a character :func:`norms_sql` cannot fold
    exactly (Python's strict decides those). strict's conditions are all needed for a letter, so they are
    tested cheapest first: the shape of the text, then the normalised texts."""
    p = STRICT_RE2
    ok_chars = _lit(foldable_class(con) + "*")
    ws = sql_text(WHITESPACE)
    letters = _lit(LETTERS)

    def foldable(expr: str) -> str:
        return f"(strlen({expr}) = length({expr}) OR regexp_full_match({expr}, {ok_chars}))"

    return f"""
    WITH a AS MATERIALIZED (
        SELECT row_id, generation, options, s,
            {foldable("s")} AND {foldable("array_to_string(options, chr(10))")} AS ok
        FROM (SELECT row_id, generation, options, trim(generation, {ws}) AS s FROM {source})
    ),
    b AS (
        SELECT *, instr({letters}, upper(l)) - 1 AS idx FROM (
            SELECT row_id, options, len(options) AS n, s, lead, body,
                h['l'] AS l, h['rest'] AS rest
            FROM (
                SELECT *, regexp_extract(body, {_lit(p.head)}, ['l', 'rest']) AS h FROM (
                    SELECT *, regexp_extract(s, {_lit(p.lead_in)}, 0) AS lead,
                        regexp_replace(s, {_lit(p.lead_in)}, '') AS body
                    FROM a
                    WHERE ok AND len(options) BETWEEN 1 AND {MAX_OPTIONS} AND s <> ''
                        AND length(s) <= list_max(list_transform(options, lambda o: length(o))) + {int(max_extra)}
                )
            )
        )
        WHERE l <> ''
    ),
    c AS (
        SELECT *, sp['punct'] = '' AND NOT regexp_matches(sp['sep'], '[*)\\]]') AS bare_space FROM (
            SELECT *, regexp_full_match(rest, {_lit(p.trail_only)}) AS trail,
                regexp_extract(rest, {_lit(p.sep)}, ['sep', 'punct', 'text']) AS sp
            FROM b WHERE idx < n
        )
    ),
    d AS (
        SELECT *, norms[1:n] AS nl, norms[n + 1] AS ns, norms[n + 2] AS nb, norms[n + 3] AS nt FROM (
            SELECT *, {norms_sql("folded")} AS norms FROM (
            SELECT *, {folded_sql("list_concat(options, [s, body, sp['text']])")} AS folded FROM c
            WHERE CASE WHEN trail
                -- "The answer is a" may be a truncated "The answer is a bit..."
                THEN NOT (l IN ('a', 'i') AND lead <> '' AND NOT contains(lead, ':') AND trim(rest, {ws}) = '')
                -- the letter runs into a word or another separator; a bare space cannot tell "a cat" or "A C"
                -- from a letter and its text
                ELSE sp['text'] <> '' AND NOT (bare_space AND l <> upper(l)) END
            )
        )
    ),
    e AS (
        SELECT row_id, CASE
            -- the whole answer is another option's text
            WHEN {_in_others("ns")} OR {_in_others("nb")} THEN NULL
            -- the letter is also another option's text
            WHEN trail THEN CASE WHEN {_in_others("lower(l)")} THEN NULL ELSE upper(l) END
            WHEN bare_space AND regexp_full_match(nt, '[A-Za-z]') THEN NULL
            -- not exactly its own option text, or two options read the same
            WHEN nt <> nl[idx + 1] OR {_in_others("nt")} THEN NULL
            ELSE upper(l) END AS letter
        FROM d
    )
    SELECT row_id, NULL::VARCHAR AS letter, true AS fallback, generation, options FROM a WHERE NOT ok
    UNION ALL
    SELECT row_id, letter, false, NULL, NULL FROM e WHERE letter IS NOT NULL
    """
