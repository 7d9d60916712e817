"""sample_runs/explore.ipynb (issue 22): executed in a real Jupyter kernel (nbclient + ipykernel, on
127.0.0.1; nothing else is reached) against a demo study built for the test, and checked against the study
read with plain SQL. The committed notebook carries no outputs, so its diff stays clean."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mcqaudit.store import Study
from tests.helpers import REPO

NOTEBOOK = REPO / "sample_runs" / "explore.ipynb"
PLOTLY = "application/vnd.plotly.v1+json"


def test_the_committed_notebook_has_no_outputs() -> None:
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "the notebook has code cells"
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert set(nb["metadata"]) <= {"kernelspec", "language_info"}  # no widget state, no editor leftovers
    assert NOTEBOOK.read_text(encoding="utf-8").endswith("\n")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mcqaudit.demo import build_demo

    return Path(build_demo(tmp_path_factory.mktemp("demo") / "demo.duckdb"))


def _run(study: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    import nbclient  # the dev extra's (pyproject.toml): a notebook runs as Jupyter runs it
    import nbformat

    monkeypatch.setenv("MCQAUDIT_STUDY", str(study))
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the kernel imports this checkout's mcqaudit
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # nothing written to the home folder
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=300, resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    )
    client.execute()  # a cell that raises fails here (CellExecutionError, with the cell's traceback)
    return nb


def _values(v: Any) -> list[Any]:
    """A trace's array as a list: plotly writes numbers as typed arrays (``{"dtype", "bdata"}``, base64)."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"]).tolist()
    return list(v)


def test_the_notebook_runs_and_draws_the_accuracy_figure(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = hashlib.sha256(demo.read_bytes()).hexdigest()
    nb = _run(demo, tmp_path, monkeypatch)
    assert hashlib.sha256(demo.read_bytes()).hexdigest() == before  # read-only: the study is unchanged
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    study = Study(demo, read_only=True)
    n_rows, n_items = study.query("SELECT count(*), count(DISTINCT item_id) FROM graded_rows")[0]
    assert f"{n_rows} rows, {n_items} items, arms: base, steered, thinking" in text
    # the one figure, against the study read with SQL: share of graded rows CORRECT, per arm, both readings
    figures = [o for o in outputs if PLOTLY in o.get("data", {})]
    assert len(figures) == 1
    fig = figures[0]["data"][PLOTLY]
    want = {
        arm: (naive, final, n)
        for arm, naive, final, n in study.query(
            """SELECT arm, avg(coalesce(naive_letter = gold_letter, false)::INT),
                      avg((final_verdict = 'CORRECT')::INT), count(*)
               FROM graded_rows WHERE final_verdict IS NOT NULL GROUP BY arm"""
        )
    }
    traces = {t["name"]: {k: _values(t[k]) for k in ("x", "y", "text")} for t in fig["data"]}
    assert set(traces) == {"naive [A-D] first match", "final verdict"}
    for name, k in (("naive [A-D] first match", 0), ("final verdict", 1)):
        t = traces[name]
        assert t["x"] == ["base", "steered", "thinking"]
        assert [round(y, 6) for y in t["y"]] == [round(want[a][k], 6) for a in t["x"]]
        assert t["text"] == [f"{want[a][k]:.1%} (n={want[a][2]})" for a in t["x"]]  # every share with its n
    # the demo's point, as the figure shows it: the naive parser halves steered's accuracy, the verdicts do not
    naive, final = (
        dict(zip(traces[n]["x"], traces[n]["y"], strict=True))
        for n in ("naive [A-D] first match", "final verdict")
    )
    assert final["steered"] - naive["steered"] > 0.3 and abs(final["steered"] - final["base"]) < 0.05
    # the report cell printed findings and listed the flags
    assert "- steered vs base: Δaccuracy" in text
