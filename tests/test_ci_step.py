"""The README's GitHub Actions job (issue 22, "Gate CI on the flags"): valid YAML, and every `mcqaudit` line in
it a real command with real options, so the documented job cannot drift from the CLI. The exit codes it
relies on are held by tests/test_check.py (a real process on a study whose flags fire and on a clean one)."""

from __future__ import annotations

import re
import shlex
from typing import Any

import typer.main
import yaml

from mcqaudit.app.check import KNOWN_FLAGS
from mcqaudit.cli import app
from tests.helpers import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def _job() -> dict[str, object]:
    section = README.split("### Gate CI on the flags", 1)[1].split("\n## ", 1)[0]
    m = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert m, "the CI section has a yaml block"
    return yaml.safe_load(m.group(1))


def _mcqaudit_lines(job: dict[str, object]) -> list[list[str]]:
    steps = job["jobs"]["audit"]["steps"]
    script = "\n".join(s.get("run", "") for s in steps)
    lines = [ln.split("|")[0].split("#")[0].strip() for ln in script.splitlines()]
    return [shlex.split(ln)[1:] for ln in lines if ln.startswith("mcqaudit ")]


def _command(words: list[str]) -> tuple[Any, list[str]]:
    """The command a line names (through the sub-command groups) and the rest of its words."""
    cmd: Any = typer.main.get_group(app)
    while getattr(cmd, "commands", None) and words and words[0] in cmd.commands:
        cmd, words = cmd.commands[words[0]], words[1:]
    return cmd, words


def test_the_job_is_yaml_and_each_mcqaudit_line_is_a_real_command() -> None:
    job = _job()
    assert job.get("on") or job.get(True)  # YAML 1.1 reads `on` as True
    lines = _mcqaudit_lines(job)
    assert [ln[0] for ln in lines] == ["ingest", "ingest", "grade", "report", "check"]
    for words in lines:
        cmd, rest = _command(words)
        assert not getattr(cmd, "commands", None), words
        known = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}
        given = [w for w in rest if w.startswith("--")]
        assert set(given) <= known, (words[0], set(given) - known)
        ctx = cmd.make_context(words[0], list(rest), resilient_parsing=False)  # parses: types, required
        assert ctx.params
    check = lines[-1]
    names = check[check.index("--fail-on") + 1].split(",")
    assert set(names) <= set(KNOWN_FLAGS) and "suspected_parser_artifact" in names
    assert "--json" in check
