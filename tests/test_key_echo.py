"""A key pasted where its variable's NAME belongs is never printed back (issues 13 and 18).

`--judge-api-key-env` (grade) and `--api-key-env` (generate) take the name of an environment variable. A
key with a `-` in it is no variable name and was always refused without being repeated; a key without
one (`sk1234…`, an AWS key id, `hf_…`, a 16-character hex key) *is* a valid name, and the "not set"
message used to name it ("the environment variable a1b2c3d4e5f6a7b8, which is not set").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcqaudit.endpoint import looks_like_env_name

ROOT = Path(__file__).resolve().parent.parent
REMOTE = "https://example.invalid/v1"  # never reached: the check comes first
PASTED = [
    "sk1234567890abcdefABCDEF1234567890abcd",
    "skprojAbC123dEf456GhI789jKl012MnO345",
    "AKIAIOSFODNN7EXAMPLE",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345",
    "gsk_0123456789abcdefABCDEF0123456789",
    "a" * 80,
    "a1b2c3d4e5f6a7b8",  # 16 hex characters: under 20, no prefix, one case (issue 18)
    "A1B2C3D4E5F6A7B8",
    "deadbeefcafef00d",
    "0123456789abcdef"[::-1],
    "AbCdEfGhIjKlMnOp",  # base64-ish letters
    "x9Zq8Wv7Lm2Np4Rs",
    "Zx81kQ_p0aB7mN2v",  # an underscore in a key does not make it a name
    "tok_4f3a9b2c1d8e7f60",
    "qwhfkjsdhfkjshdf",
]
NAMES = [
    "OPENAI_API_KEY", "MY_KEY", "judge_key", "TOGETHER_API_KEY", "KEY", "AZURE_OPENAI_API_KEY_2",
    "ANTHROPIC_API_KEY", "GROQ_API_KEY", "HF_TOKEN", "OpenAI_KEY", "V2_KEY", "AWS_SECRET_ACCESS_KEY",
    "MCQ_TEST_UNSET_KEY", "MCQAUDIT_UNSET_KEY_VAR",
]  # fmt: skip
HEX_KEY = "a1b2c3d4e5f6a7b8"


def mcqaudit(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCQAUDIT_JUDGE_")}
    env["PYTHONPATH"] = str(ROOT)
    for k in PASTED:  # not set, whatever the caller's environment holds
        env.pop(k, None)
    return subprocess.run(
        [sys.executable, "-m", "mcqaudit", *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.parametrize("name", NAMES)
def test_names_people_write_are_shown(name: str) -> None:
    assert looks_like_env_name(name)


@pytest.mark.parametrize("key", PASTED)
def test_keys_are_not_names_to_show(key: str) -> None:
    assert not looks_like_env_name(key)


@pytest.mark.parametrize("key", [*PASTED[:3], HEX_KEY])
def test_grade_does_not_echo_a_pasted_key(ui_db: Path, key: str) -> None:
    proc = mcqaudit(
        "grade",
        "--db",
        str(ui_db),
        "--judge-model",
        "m",
        "--judge-base-url",
        REMOTE,
        "--judge-api-key-env",
        key,
    )
    assert proc.returncode == 2, proc.stderr
    out = proc.stdout + proc.stderr
    assert key not in out and key[:12] not in out
    assert "--judge-api-key-env takes the NAME of an environment variable" in proc.stderr
    assert "not repeated here" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("key", [*PASTED[:3], HEX_KEY])
def test_generate_does_not_echo_a_pasted_key(tmp_path: Path, key: str) -> None:
    prompts = tmp_path / "prompts.jsonl"
    orient = mcqaudit("orient", str(ROOT / "sample_runs" / "items.jsonl"), "--out", str(prompts))
    assert orient.returncode == 0, orient.stderr
    out = tmp_path / "gen.jsonl"
    proc = mcqaudit(
        "generate",
        str(prompts),
        "--model",
        "m",
        "--base-url",
        REMOTE,
        "--out",
        str(out),
        "--api-key-env",
        key,
    )
    assert proc.returncode == 2, proc.stderr
    assert key not in proc.stdout + proc.stderr and key[:12] not in proc.stdout + proc.stderr
    assert "--api-key-env takes the NAME of an environment variable" in proc.stderr and not out.exists()


def test_an_unset_name_is_still_named(ui_db: Path) -> None:
    """A name that reads as one is shown: the user needs to know which variable to set."""
    proc = mcqaudit(
        "grade", "--db", str(ui_db), "--judge-model", "m", "--judge-base-url", REMOTE,
        "--judge-api-key-env", "MCQ_TEST_UNSET_KEY",
    )  # fmt: skip
    assert proc.returncode == 2 and "MCQ_TEST_UNSET_KEY" in proc.stderr


def test_a_pasted_key_that_is_set_as_a_variable_is_used_quietly(ui_db: Path) -> None:
    """Odd, but legal: a variable whose name looks like a key, set, works (dry run: nothing is sent)."""
    key = PASTED[0]
    env = {**os.environ, "PYTHONPATH": str(ROOT), key: "the-real-key"}
    proc = subprocess.run(
        [sys.executable, "-m", "mcqaudit", "grade", "--db", str(ui_db), "--judge-model", "m",
         "--judge-base-url", REMOTE, "--judge-api-key-env", key, "--dry-run"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "the-real-key" not in proc.stdout + proc.stderr


def test_generate_api_does_not_echo_a_pasted_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same through the Python API (no CLI check in front): the error names no key."""
    from mcqaudit.generate import GenerateOptions, GenerateUsageError, generate

    key = PASTED[0]
    monkeypatch.delenv(key, raising=False)
    prompts = tmp_path / "prompts.jsonl"
    assert (
        mcqaudit("orient", str(ROOT / "sample_runs" / "items.jsonl"), "--out", str(prompts)).returncode == 0
    )
    with pytest.raises(GenerateUsageError) as exc:
        generate(
            prompts, tmp_path / "gen.jsonl", GenerateOptions(model="m", base_url=REMOTE, api_key_env=key)
        )
    assert key not in str(exc.value) and "given by --api-key-env" in str(exc.value)


@pytest.mark.parametrize("key", PASTED)
def test_grade_api_does_not_echo_a_pasted_key(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The grading API's own check (no CLI in front): a pasted key given as the variable's name is refused
    without being repeated; a variable name that is unset is still named."""
    from mcqaudit.grade.config import GradeUsageError, resolve_api_key

    monkeypatch.delenv(key, raising=False)
    with pytest.raises(GradeUsageError) as exc:
        resolve_api_key(key, REMOTE)
    assert key not in str(exc.value) and "--judge-api-key-env" in str(exc.value)
    monkeypatch.delenv("MCQAUDIT_UNSET_KEY_VAR", raising=False)
    with pytest.raises(GradeUsageError, match="MCQAUDIT_UNSET_KEY_VAR"):
        resolve_api_key("MCQAUDIT_UNSET_KEY_VAR", REMOTE)
