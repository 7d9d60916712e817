"""The report's two CI methods against straightforward computations on the fixture studies.

- the item bootstrap (weights × item sums, no loop over resamples) against a plain loop that re-draws each
  replicate's items and sums them;
- the normal method (replicates of the item sums drawn from their normal approximation, with the item
  bootstrap's exact covariance; used from NORMAL_MIN_ITEMS items) against that covariance computed by a
  loop over items, against the closed-form clustered SE of a ratio from a per-item loop over the frames'
  rows, and against the bootstrap itself on the fixture studies (tests/review_study.py, tests/ui_study.py);
- the report says which method gave its CIs (JSON, Markdown, HTML).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from mcqaudit.app.report import load_frames, report_from_frames
from mcqaudit.metrics import ItemBootstrap
from mcqaudit.metrics.inputs import StudyFrames, column
from mcqaudit.metrics.rules import NORMAL_MIN_ITEMS, ci_method
from mcqaudit.report import to_html, to_markdown


@pytest.fixture(scope="module")
def review_frames(tmp_path_factory: pytest.TempPathFactory) -> StudyFrames:
    from tests.builders import build_review_study

    return load_frames(build_review_study(tmp_path_factory.mktemp("ci-review") / "s.duckdb"))


def test_bootstrap_equals_a_plain_loop_over_resamples() -> None:
    """Replicate b draws n items with replacement from the generator seeded (seed, b // 64): summing the
    drawn items' values one replicate at a time gives the same sums as the weight-matrix product."""
    rng = np.random.default_rng(7)
    n, n_boot, seed = 37, 150, 5  # three chunks, the last one partial
    cols = {("c", k): rng.integers(0, 4, n).astype(np.float64) for k in range(5)}
    cols[("frac",)] = rng.random(n)
    cols[("dup",)] = cols[("c", 0)].copy()  # summed once, read under both names
    cols[("zero",)] = np.zeros(n)
    boot = ItemBootstrap(n, n_boot, seed)
    for name, v in cols.items():
        boot.add(name, v)
    S = boot.run()
    draws = []
    for b in range(n_boot):
        chunk, k = divmod(b, ItemBootstrap.CHUNK)
        m = min(ItemBootstrap.CHUNK, n_boot - chunk * ItemBootstrap.CHUNK)
        draws.append(np.random.default_rng([seed, chunk]).integers(0, n, size=(m, n), dtype=np.int32)[k])
    for name, v in cols.items():
        want = [float(v.sum())] + [sum(float(v[i]) for i in d) for d in draws]
        assert np.allclose(S[name], want, rtol=0, atol=1e-9), name


def _item_accuracy(frames: StudyFrames) -> dict[tuple[int, int], float]:
    """(arm, item) -> mean over the item's orientations with a graded row of the CORRECT share (a loop)."""
    cells: dict[tuple[int, int, int], list[int]] = defaultdict(lambda: [0, 0])
    r = frames.rows
    for ai, ii, oi, v in zip(
        column(r, "ai"), column(r, "ii"), column(r, "oi"), column(r, "verdict"), strict=True
    ):
        if v >= 0:
            c = cells[(int(ai), int(ii), int(oi))]
            c[0] += v == 0
            c[1] += 1
    per: dict[tuple[int, int], list[float]] = defaultdict(list)
    for (ai, ii, _), (correct, graded) in cells.items():
        per[(ai, ii)].append(correct / graded)
    return {k: sum(v) / len(v) for k, v in per.items()}


def _ratio_se(num: list[float], den: list[float]) -> tuple[float, float]:
    """Σnum/Σden and its clustered (delta-method) SE under the item bootstrap: √Σ(num_i − r·den_i)² / Σden."""
    r = sum(num) / sum(den)
    return r, math.sqrt(sum((a - r * b) ** 2 for a, b in zip(num, den, strict=True))) / sum(den)


def test_normal_replicates_have_the_item_bootstraps_covariance() -> None:
    """The normal method's replicates of the sums have mean S₀ and covariance Σ_i (x_i − x̄)(x_i − x̄)ᵀ —
    the item bootstrap's, computed here by a loop over items — up to Monte Carlo error."""
    rng = np.random.default_rng(11)
    n, n_boot = 60, 40_000
    cols = [rng.integers(0, 4, n).astype(np.float64), rng.random(n), (rng.random(n) < 0.1).astype(np.float64)]
    cols.append(cols[0] + 2 * cols[1])  # linearly dependent on two others: a rank-deficient covariance
    boot = ItemBootstrap(n, n_boot, 0, method="normal")
    for k, v in enumerate(cols):
        boot.add(("c", k), v)
    S = boot.run()
    assert S.method == "normal"
    reps = np.stack([S[("c", k)][1:] for k in range(len(cols))], axis=1)
    means = [sum(v) / n for v in cols]
    want = np.array(
        [[sum((a[i] - means[p]) * (b[i] - means[q]) for i in range(n)) for q, b in enumerate(cols)]
         for p, a in enumerate(cols)]
    )  # fmt: skip
    got = np.cov(reps, rowvar=False)
    scale = np.sqrt(np.outer(np.diag(want), np.diag(want)))
    assert np.all(np.abs(got - want) <= 0.03 * scale)
    sd = np.sqrt(np.diag(want))
    assert np.all(np.abs(reps.mean(axis=0) - [v.sum() for v in cols]) <= 0.03 * sd)
    assert [S.point(("c", k)) for k in range(len(cols))] == [float(v.sum()) for v in cols]
    again = ItemBootstrap(n, n_boot, 0, method="normal")
    for k, v in enumerate(cols):
        again.add(("c", k), v)
    assert np.array_equal(again.run()[("c", 1)], S[("c", 1)])  # seeded: the same replicates


def test_normal_method_gives_the_clustered_standard_error(review_frames: StudyFrames) -> None:
    """Δaccuracy's se under the normal method against the closed-form clustered SE of a ratio, from a
    per-item loop over the frames' rows; point values exactly those computed without replicates."""
    rep = report_from_frames(review_frames, n_boot=20_000, ci="normal")
    plain = report_from_frames(review_frames, n_boot=0)
    assert rep["bootstrap"]["method"] == "normal" and rep["bootstrap"]["resamples"] == 20_000
    info = review_frames.info
    acc = _item_accuracy(review_frames)
    for a, arm in enumerate(info.arms):
        got = rep["metrics"][arm]["accuracy"]
        num = [acc.get((a, i), 0.0) for i in range(info.n_items)]
        den = [1.0 if (a, i) in acc else 0.0 for i in range(info.n_items)]
        assert got["value"] == pytest.approx(_ratio_se(num, den)[0], abs=1e-6)
        assert got["value"] == plain["metrics"][arm]["accuracy"]["value"]
    c = info.arms.index(rep["control_arm"])
    checked = 0
    for t, arm in enumerate(info.arms):
        if t == c:
            continue
        both = [i for i in range(info.n_items) if (t, i) in acc and (c, i) in acc]
        r, se = _ratio_se([acc[(t, i)] - acc[(c, i)] for i in both], [1.0] * len(both))
        got = rep["delta_accuracy"][arm]["overall"]
        assert got["value"] == pytest.approx(r, abs=1e-6)
        assert got["se"] == pytest.approx(se, rel=0.03), arm  # Monte Carlo error of 20,000 draws: ~0.5 %
        assert got["mde"] == pytest.approx(2.8 * got["se"], rel=1e-4)
        checked += 1
    assert checked >= 1


def _metric_pairs(a: Any, b: Any, path: str = "") -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    out = []
    if isinstance(a, dict) and isinstance(b, dict):
        if "ci_low" in a and "value" in a:
            out.append((path, a, b))
        for k in a:
            if k in b:
                out += _metric_pairs(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        for k, (x, y) in enumerate(zip(a, b, strict=False)):
            out += _metric_pairs(x, y, f"{path}[{k}]")
    return out


def _agreement(frames: StudyFrames, tol: float) -> None:
    """Every CI of the normal method within ``tol`` × the bootstrap CI's width of the bootstrap's (both with
    20,000 replicates, so Monte Carlo error is small), every point value equal, the same flags."""
    normal = report_from_frames(frames, n_boot=20_000, ci="normal")
    boot = report_from_frames(frames, n_boot=20_000, ci="bootstrap", seed=3)
    checked = 0
    for path, a, b in _metric_pairs(normal, boot):
        assert a["value"] == b["value"], path  # point estimates never depend on the method
        assert (a["ci_low"] is None) == (b["ci_low"] is None), path
        if b["ci_low"] is None or b["ci_high"] <= b["ci_low"]:
            continue
        width = b["ci_high"] - b["ci_low"]
        off = max(abs(a["ci_low"] - b["ci_low"]), abs(a["ci_high"] - b["ci_high"])) / width
        assert off <= tol, (path, a, b)
        if b.get("se"):
            assert a["se"] == pytest.approx(b["se"], rel=tol), path
        checked += 1
    assert checked >= 20
    assert [(f["name"], f["arm"]) for f in normal["flags"]] == [(f["name"], f["arm"]) for f in boot["flags"]]


def test_normal_method_agrees_with_the_bootstrap_on_the_review_fixture(review_frames: StudyFrames) -> None:
    # 40 items (the method is used from 10,000): already within a sixth of the CI's width
    _agreement(review_frames, tol=0.16)


def test_normal_method_agrees_with_the_bootstrap_on_the_dashboard_fixture(ui_template: Path) -> None:
    # 12 items with 0/1 verdicts per cell: the bootstrap's percentiles are lumpy, the agreement looser
    _agreement(load_frames(ui_template), tol=0.45)


def test_method_by_size_and_the_report_says_which(review_frames: StudyFrames) -> None:
    assert ci_method(NORMAL_MIN_ITEMS - 1, 2000) == "bootstrap"
    assert ci_method(NORMAL_MIN_ITEMS, 2000) == "normal"
    assert ci_method(NORMAL_MIN_ITEMS, 0) == "none"
    assert ci_method(10, 100, "normal") == "normal"
    with pytest.raises(ValueError, match="CI method"):
        ci_method(10, 100, "jackknife")
    boot = report_from_frames(review_frames, n_boot=200)
    assert boot["bootstrap"] == {
        "resamples": 200,
        "seed": 0,
        "unit": "item",
        "ci_level": 0.95,
        "method": "bootstrap",
    }
    assert "200 bootstrap resamples of items (seed 0)" in to_markdown(boot)
    normal = report_from_frames(review_frames, n_boot=200, ci="normal")
    assert normal["bootstrap"]["method"] == "normal"
    for text in (to_markdown(normal), to_html(normal)):
        assert "200 replicates of the item sums drawn from their normal approximation" in text
        assert "bootstrap resamples of items" not in text
    assert report_from_frames(review_frames, n_boot=0)["bootstrap"]["method"] == "none"


def test_process_settings_are_restored() -> None:
    """The report's numpy/OpenBLAS settings (one BLAS thread, no huge pages) hold only inside their block."""
    from mcqaudit.native import _openblas, no_hugepages, one_blas_thread

    setter = np._core.multiarray._set_madvise_hugepage
    before = setter(True)
    with no_hugepages():
        assert setter(False) is False  # off inside the block
    assert setter(before) is True  # back on after it
    blas = _openblas()
    if blas is not None:
        threads = blas[1]()
        with one_blas_thread():
            assert blas[1]() == 1
        assert blas[1]() == threads
