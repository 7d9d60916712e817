"""The pure parts of ingest's readers, directly: the fields and `--map` (ingest/fields.py) and the JSONL line
reader (ingest/jsonl.py), which hands the loader its batches."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcqaudit.ingest import jsonl
from mcqaudit.ingest.errors import InputError, UsageError
from mcqaudit.ingest.fields import FIELDS, REQUIRED, check_columns, columns, field_keys, parse_maps


def test_parse_maps_reads_specs_and_refuses_bad_ones() -> None:
    assert parse_maps([" generation = llm_output ", "arm=model"]) == {
        "generation": "llm_output",
        "arm": "model",
    }
    for spec, says in [
        ("generation", "write FIELD=COLUMN"),
        ("answer=x", "unknown field 'answer'"),
        ('gold="x"', "double quote"),
    ]:
        with pytest.raises(UsageError, match=says):
            parse_maps([spec])
    with pytest.raises(UsageError, match=r"two maps onto gold \(gold=a, gold=b\)"):
        parse_maps(["gold=a", "gold=b"])


def test_columns_and_keys_follow_the_maps() -> None:
    assert columns(None) == {f: f for f in FIELDS}
    got = columns({"generation": "out", "model": "out"})
    assert got["generation"] == got["model"] == "out" and got["arm"] == "arm"
    keys = field_keys({"generation": "out", "model": "out"})
    assert keys.count("out") == 1 and "generation" not in keys and len(keys) == len(FIELDS) - 1


def test_check_columns_suggests_maps_for_missing_required_fields() -> None:
    header = ["id", "model", "question", "choices", "answer", "response"]
    with pytest.raises(InputError) as exc:
        check_columns("f.csv", header, {}, None)
    (problem,) = exc.value.problems
    assert problem.field == "fields"
    assert problem.reason == (
        "missing required fields item_id, arm (or pass --arm), options, gold, generation; the file's columns: "
        f"{', '.join(header)}; try --map item_id=id --map arm=model --map options=choices --map gold=answer "
        "--map generation=response"
    )
    # --arm supplies the arm; a complete header passes
    check_columns("f.csv", list(REQUIRED), {}, None)
    check_columns("f.csv", [f for f in REQUIRED if f != "arm"], {}, "base")
    with pytest.raises(UsageError, match=r"--map gold=key: f.csv has no column 'key'"):
        check_columns("f.csv", list(REQUIRED), {"gold": "key"}, None)


def test_check_columns_asks_the_other_records_of_a_jsonl_file() -> None:
    first = [f for f in REQUIRED if f != "generation"]
    check_columns("f.jsonl", first, {}, None, elsewhere=lambda key: key == "generation")
    with pytest.raises(InputError, match="missing required field generation"):
        check_columns("f.jsonl", first, {}, None, elsewhere=lambda key: False)
    check_columns("f.jsonl", None, {}, None)  # the first line is not an object: its own error says so


def _read(path: Path) -> tuple[list[tuple[int, str | None, str | None]], int]:
    lines = jsonl.JsonlLines(path)
    got = [(n, t, e) for b in lines for n, t, e in zip(b.lines, b.texts, b.pre_errors, strict=True)]
    return got, lines.blank_lines


def test_jsonl_lines_keep_line_numbers_across_blank_lines_bom_and_bad_bytes(tmp_path: Path) -> None:
    clean = tmp_path / "clean.jsonl"
    clean.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n{"a": 2}\n{"a": 3}')
    assert _read(clean) == ([(1, '{"a": 1}', None), (2, '{"a": 2}', None), (3, '{"a": 3}', None)], 0)
    careful = tmp_path / "careful.jsonl"
    careful.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n\n  \n{"a": \xff}\n{"a": 5}\n')
    assert _read(careful) == (
        [
            (1, '{"a": 1}', None),
            (4, None, "not valid UTF-8 (byte 0xff at column 7)"),
            (5, '{"a": 5}', None),
        ],
        2,
    )


def test_jsonl_lines_come_in_batches_and_raw_lines_read_them_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl, "BATCH_LINES", 2)
    src = tmp_path / "g.jsonl"
    src.write_text("\n".join(["{}", "", "[1]", "2", "3"]) + "\n")
    batches = list(jsonl.JsonlLines(src))
    assert [list(b.lines) for b in batches] == [[1, 3], [4, 5]]
    assert jsonl.raw_lines(src, [4, 1]) == {1: "{}", 4: "2"}
    assert jsonl.scan_lines(src) == (5, 0)
