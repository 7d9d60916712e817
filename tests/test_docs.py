"""The README keeps its promises: the two-command Quickstart, every command documented, CI calls the tests."""

from __future__ import annotations

import re

import typer.main

from mcqaudit.cli import app
from tests.helpers import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def _command_names() -> list[str]:
    group = typer.main.get_group(app)
    names = []
    for name, cmd in group.commands.items():
        sub = getattr(cmd, "commands", None)
        names.extend(f"{name} {s}" for s in sub) if sub else names.append(name)
    return names


def test_quickstart_is_two_commands_in_one_sh_block() -> None:
    m = re.search(r"^## Quickstart\n\n```sh\n(.*?)\n```", README, re.S | re.M)
    assert m, "README needs '## Quickstart' directly followed by one ```sh block"
    lines = [ln for ln in m.group(1).splitlines() if ln.strip() and not ln.strip().startswith("#")]
    assert len(lines) == 2, lines
    assert "dashboard" in lines[0] and "test" in lines[1]
    # the test command is what CI runs
    assert (
        lines[1].strip() in (REPO / ".ci" / "run").read_text()
        or "make test" in (REPO / ".ci" / "run").read_text()
    )


def test_every_command_is_documented() -> None:
    names = _command_names()
    assert {"orient", "ingest", "info"} <= {n.split()[0] for n in names}
    missing = [n for n in names if f"mcqaudit {n}" not in README]
    assert not missing, f"commands missing from README: {missing}"


def test_every_command_has_help() -> None:
    group = typer.main.get_group(app)
    for name, cmd in group.commands.items():
        assert (cmd.help or "").strip(), f"`mcqaudit {name}` has no help text"


def test_graded_rows_columns_documented() -> None:
    import tempfile
    from pathlib import Path

    from mcqaudit.store import Study

    with tempfile.TemporaryDirectory() as d:
        cols = Study(Path(d) / "s.duckdb", create=True).query_df("SELECT * FROM graded_rows LIMIT 0").columns
    for c in cols:
        assert c in README, f"graded_rows column {c} is not in the README"
