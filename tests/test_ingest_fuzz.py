"""Hypothesis fuzzing of ingest (issue 13): JSONL, CSV and Parquet files of random rows, malformed lines, odd
Unicode, NUL, BOM, CRLF, big fields, wrong types and binary columns. Never a traceback: either the good rows
are stored as given, or an InputError whose every problem reads FILE[:LINE | :row N]: field: reason, with
nothing written. Bounded (max_examples) to stay well under a minute."""

from __future__ import annotations

import io
import json
import re
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcqaudit.app.ingest import ingest_file
from mcqaudit.ingest.errors import InputError
from mcqaudit.store import Study

ODD = st.sampled_from(
    [
        "",
        " ",
        "\x00",
        "\ufeff",
        "\r\n",
        "\n",
        "\u2028",
        "\ud7ff",
        "\U0001f600",
        "é",
        "東京",
        '"',
        "\\",
        ",",
        "A",
        "(B)",
    ]
)
TEXT = st.one_of(
    st.text(max_size=30),
    st.lists(ODD, max_size=6).map("".join),
    st.integers(0, 3).map(lambda k: "x" * (10**k * 3)),
)
VALUE = st.one_of(
    TEXT,
    st.integers(-3, 30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.lists(TEXT, max_size=5),
    st.dictionaries(st.sampled_from("ABCDz"), TEXT, max_size=4),
)
FIELDS = ("item_id", "arm", "question", "options", "gold", "generation", "orientation", "sample", "metadata")


@st.composite
def rows(draw) -> list[dict]:
    out = []
    for i in range(draw(st.integers(1, 6))):
        n = draw(st.integers(2, 5))
        r: dict = {
            "item_id": f"q{draw(st.sampled_from([i, i, i, 0]))}",  # now and then a second row of an item
            "arm": draw(st.sampled_from(["base", "steered"])),
            "question": draw(TEXT),
            "options": [f"o{k}{draw(ODD)}" for k in range(n)],
            "gold": draw(st.one_of(st.sampled_from("ABCDE"), st.integers(0, n))),
            "generation": draw(TEXT),
        }
        for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # now and then a wrong type somewhere
            r[draw(st.sampled_from(FIELDS))] = draw(VALUE)
        if draw(st.sampled_from([False, False, False, True])):
            r.pop(draw(st.sampled_from(FIELDS)), None)
        out.append(r)
    return out


PROBLEM = re.compile(r"^.+?(:(\d+|row \d+|sample \d+))?: [a-z_\-]+: .+", re.S)


def _check(src: Path, db: Path, generations: list | None = None) -> None:
    """``generations``: what each data row's stored generation must be, when it is accepted."""
    study = Study(db, create=True)
    try:
        res = ingest_file(study, src, skip_bad=False)
    except InputError as exc:
        assert exc.problems, str(exc)
        for p in exc.problems:
            assert PROBLEM.match(str(p)), str(p)
        assert study.query("SELECT count(*) FROM gen_rows") == [(0,)]
        return
    stored = study.query("SELECT count(*), count(*) FILTER (generation IS NULL) FROM gen_rows")[0]
    assert stored == (res.loaded, 0)
    if generations is not None:
        for line, gen in study.query("SELECT source_line, generation FROM gen_rows"):
            assert gen == generations[line - 1], (line, gen)


SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


@SETTINGS
@given(
    rows(),
    st.lists(
        st.sampled_from(["{oops", "[1]", "", "  ", "\x00", '{"item_id": "x"} {"a": 1}', "\udc80"]), max_size=3
    ),
    st.sampled_from(["\n", "\r\n"]),
    st.booleans(),
)
def test_fuzz_jsonl(data: list[dict], junk: list[str], newline: str, bom: bool) -> None:
    lines = [json.dumps(r, ensure_ascii=False) for r in data] + junk
    raw = ("\ufeff" if bom else "") + newline.join(lines) + newline
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "g.jsonl"
        src.write_bytes(raw.encode("utf-8", "surrogatepass"))
        _check(src, Path(d) / "s.duckdb", [r.get("generation") for r in data])


@SETTINGS
@given(rows(), st.booleans(), st.sampled_from([b"", b"\xff", b'"', b"a,b,c,d,e,f,g,h\n", b"\x00"]))
def test_fuzz_csv(data: list[dict], crlf: bool, tail: bytes) -> None:
    frame = pd.DataFrame(
        [
            {
                k: (json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v)
                for k, v in r.items()
            }
            for r in data
        ]
    )
    buf = io.StringIO()
    frame.to_csv(buf, index=False, lineterminator="\r\n" if crlf else "\n")
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "g.csv"
        src.write_bytes(buf.getvalue().encode("utf-8", "surrogatepass") + tail)
        _check(src, Path(d) / "s.duckdb")


@SETTINGS
@given(
    rows(),
    st.lists(
        st.one_of(st.binary(max_size=12), st.sampled_from([b"\xff\xfe", "é東".encode(), b"\xc3", b"A", b""])),
        min_size=1,
        max_size=6,
    ),
)
def test_fuzz_parquet(data: list[dict], blobs: list[bytes]) -> None:
    columns: dict[str, list] = {}
    for r in data:  # one type per column: the gold a letter (an index would make the column mixed)
        if not isinstance(r.get("gold"), str):
            r["gold"] = "A"
    for k in FIELDS:
        vals = [r.get(k) for r in data]
        # a Parquet column has one type: JSON text for mixed ones, the values themselves otherwise
        kinds = {type(v) for v in vals if v is not None}
        columns[k] = (
            vals
            if len(kinds) <= 1 and kinds <= {str, int, bool}
            else [None if v is None else json.dumps(v, ensure_ascii=False) for v in vals]
        )
    table = pa.table({k: pa.array(v) for k, v in columns.items() if k != "generation"})
    gens = [blobs[i % len(blobs)] for i in range(len(data))]
    table = table.append_column("generation", pa.array(gens, pa.binary()))
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "g.parquet"
        pq.write_table(table, src)
        _check(src, Path(d) / "s.duckdb", [g.decode("utf-8", "replace") for g in gens])
