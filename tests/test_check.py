"""`mcqaudit check` (docs/design.md §7): a CI gate over the report's flags — exit 1 when a named flag fires,
0 when none does, 2 for usage errors; `--fail-on` narrows the flags, `--json` is for scripts. Studies are
written with tests/builders.py; the CLI runs in-process (typer's CliRunner), one call in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mcqaudit.app.check import KNOWN_FLAGS, UnknownFlag, check, fail_on_names
from mcqaudit.cli import app
from tests.builders import StudyBuilder

BOOT = ["--bootstrap", "200"]


def two_arm_study(path: Path, *, steered_other: bool, reviewed: bool) -> Path:
    """base and steered, 30 two-option items shown as AB and BA (a balanced design), every answer right in
    base. ``steered_other``: steered answers OTHER on 12 of the 30 items (other_rate_rise fires), else like
    base. ``reviewed``: every row is reviewed (confirmed) in a uniform spot check (judge_unaudited does not
    fire), else none is."""
    b = StudyBuilder(path)
    ids: list[str] = []
    for k in range(30):
        item = b.item(f"q{k:02d}", n=2, gold=0)
        for lab in ("AB", "BA"):
            gold = b.gold_letter(item, lab)
            ids.append(b.row("base", item, lab, gold))
            ids.append(b.row("steered", item, lab, "OTHER" if steered_other and k < 12 else gold))
    if reviewed:
        for rid in ids:
            r = next(r for r in b.rows if r["row_id"] == rid)
            pick = r["pick"]
            b.review(rid, "OTHER" if pick == "OTHER" else "CORRECT", None if pick == "OTHER" else pick)
        b.spot.append(("uniform", ids))
    b.build()
    return path


@pytest.fixture
def fired_db(tmp_path: Path) -> Path:
    return two_arm_study(tmp_path / "fired.duckdb", steered_other=True, reviewed=False)


@pytest.fixture
def clean_db(tmp_path: Path) -> Path:
    return two_arm_study(tmp_path / "clean.duckdb", steered_other=False, reviewed=True)


def run(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, res.stdout, res.stderr


def fail_names(out: str) -> list[str]:
    """The flag names of the `FAIL name (arm): evidence` lines."""
    return [line[5:].split(":")[0].split(" (")[0] for line in out.splitlines() if line.startswith("FAIL ")]


def test_flags_that_fire_fail_the_check_with_their_evidence(fired_db: Path) -> None:
    code, out, _ = run("check", "--db", str(fired_db), *BOOT)
    assert code == 1
    fail = [line for line in out.splitlines() if line.startswith("FAIL ")]
    names = fail_names(out)
    assert "other_rate_rise" in names and "judge_unaudited" in names
    rise = next(line for line in fail if line.startswith("FAIL other_rate_rise (steered): "))
    assert "OTHER" in rise and "items 30" in rise  # the evidence and its n
    assert out.splitlines()[-1] == f"check failed: {len(fail)} flags fired ({', '.join(dict.fromkeys(names))})"


def test_a_clean_study_passes(clean_db: Path) -> None:
    code, out, _ = run("check", "--db", str(clean_db), *BOOT)
    assert code == 0, out
    assert "FAIL" not in out
    assert out.strip() == "check passed: no flag checked fired (checked: every flag)"


def test_fail_on_narrows_the_flags_checked(fired_db: Path) -> None:
    code, out, _ = run("check", "--db", str(fired_db), "--fail-on", "other_rate_rise", *BOOT)
    assert code == 1
    assert fail_names(out) == ["other_rate_rise"]
    # flags that fire but are not named do not fail the check; the last line says they fired
    code, out, _ = run("check", "--db", str(fired_db), "--fail-on", " logprob_mismatch , orientation_instability", *BOOT)
    assert code == 0, out
    assert "FAIL" not in out
    last = out.splitlines()[-1]
    assert last.startswith("check passed: no flag checked fired (checked: orientation_instability, logprob_mismatch)")
    assert last.endswith("; fired but not checked: other_rate_rise, judge_unaudited")


def test_json_shape(fired_db: Path, clean_db: Path) -> None:
    code, out, _ = run("check", "--db", str(fired_db), "--fail-on", "other_rate_rise,judge_unaudited", "--json", *BOOT)
    assert code == 1
    doc = json.loads(out)
    assert list(doc) == ["study", "fail_on", "fired", "not_checked", "exit_code"]
    assert doc["study"] == str(fired_db) and doc["exit_code"] == 1
    assert doc["fail_on"] == ["other_rate_rise", "judge_unaudited"]  # in the report's flag order
    assert [f["name"] for f in doc["fired"]] == ["other_rate_rise", "judge_unaudited"]
    for f in doc["fired"] + doc["not_checked"]:
        assert {"name", "arm", "evidence", "items", "rows", "page"} <= set(f)
    assert all(f["name"] not in doc["fail_on"] for f in doc["not_checked"])
    code, out, _ = run("check", "--db", str(clean_db), "--json", *BOOT)
    assert code == 0
    doc = json.loads(out)
    assert doc["fired"] == [] and doc["not_checked"] == [] and doc["exit_code"] == 0
    assert doc["fail_on"] == list(KNOWN_FLAGS)


@pytest.mark.parametrize("value", ["no_such_flag", "other_rate_rise,typo_flag", " , "])
def test_a_bad_flag_name_is_a_usage_error_naming_the_known_ones(fired_db: Path, value: str) -> None:
    code, out, err = run("check", "--db", str(fired_db), "--fail-on", value)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: --fail-on: ")
    assert "; the flags are: " + ", ".join(KNOWN_FLAGS) in err
    if "typo" in value:
        assert "unknown flag 'typo_flag'" in err


def test_usage_and_input_errors(tmp_path: Path, fired_db: Path) -> None:
    code, _, err = run("check", "--db", str(tmp_path / "missing.duckdb"))
    assert code == 1 and err.strip() == f"error: {tmp_path / 'missing.duckdb'}: no such study file"
    code, _, err = run("check", "--db", str(fired_db), "--control", "nobody", *BOOT)
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err
    code, _, err = run("check", "--db", str(fired_db), "--verdicts", "mine")
    assert code == 2 and err.strip() == "error: --verdicts must be final or judge, not 'mine'"


def test_the_use_case_directly(fired_db: Path, clean_db: Path) -> None:
    res = check(fired_db, ["judge_unaudited"], n_boot=200)
    assert res.exit_code == 1 and [f["name"] for f in res.fired] == ["judge_unaudited"]
    assert "other_rate_rise" in [f["name"] for f in res.not_checked]
    assert check(clean_db, n_boot=200).exit_code == 0
    assert fail_on_names(None) == KNOWN_FLAGS
    assert fail_on_names("judge_unaudited,suspected_parser_artifact") == ("suspected_parser_artifact", "judge_unaudited")
    with pytest.raises(UnknownFlag, match="unknown flag 'x'; the flags are: suspected_parser_artifact, "):
        fail_on_names(["x"])


def test_exit_codes_in_a_real_process(fired_db: Path, clean_db: Path) -> None:
    """The exit status a CI runner sees, from `python -m mcqaudit` itself."""
    def status(db: Path) -> int:
        cmd = [sys.executable, "-m", "mcqaudit", "check", "--db", str(db), "--bootstrap", "100"]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120).returncode

    assert (status(fired_db), status(clean_db)) == (1, 0)
