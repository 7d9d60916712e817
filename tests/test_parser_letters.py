"""The letter-level parser audit (docs/design.md §7 ``parser_letters``), the log-prob cross-check read on rows
(``logprob_mismatch``) and the counts-only rule of judge vs human, on small studies counted by hand.

Studies are written by :class:`StudyBuilder` into a real DuckDB study file; the naive parser's letters are the
real parser's on each generation (checked against the letter written by hand beside it), and every expected
count below is a hand count of the table in the fixture, not the code's output read back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcqaudit.formatting import md_text
from mcqaudit.metrics import compute
from mcqaudit.report import findings, to_markdown
from mcqaudit.review.filters import LetterCell, RowFilter
from mcqaudit.store.frames import load_frames
from mcqaudit.store.rows import count_rows, row_ids
from tests.builders import StudyBuilder, hand_study


def report_of(b: StudyBuilder, verdicts: str = "final", **kw: Any) -> dict[str, Any]:
    return dict(compute(load_frames(b.build(), verdicts), **{"n_boot": 200, "seed": 0, **kw}))  # type: ignore[arg-type]


def test_letter_counts_match_the_hand_count(tmp_path: Path) -> None:
    r = report_of(hand_study(tmp_path))
    naive = r["metrics"]["base"]["parser_letters"]["naive"]
    # known references: the 10 HAND rows and the strict row (the reviewed row without a letter is left out)
    assert naive["misread"]["n"] == 11
    # misread: I'd go with B, Answer, Clearly, I'd say C (another letter), Both, cannot (made up), Option 4 (missed)
    assert naive["misread"]["value"] == pytest.approx(7 / 11, rel=1e-5)
    assert naive["wrong_letter"]["value"] == pytest.approx(4 / 11, rel=1e-5)
    assert naive["fabricated"]["value"] == pytest.approx(2 / 11, rel=1e-5)
    assert naive["missed"]["value"] == pytest.approx(1 / 11, rel=1e-5)
    for k in ("misread", "wrong_letter", "fabricated", "missed"):
        m = naive[k]
        assert m["n"] == 11 and m["ci_low"] <= m["value"] <= m["ci_high"]
    z = dict.fromkeys("ABCD", 0) | {"none": 0}
    assert naive["confusion"] == {
        "A": z | {"A": 1, "C": 1},
        "B": z | {"B": 2, "D": 1},
        "C": z | {"A": 1, "D": 1},
        "D": z | {"none": 1},
        "none": z | {"B": 1, "C": 1, "none": 1},
    }
    assert naive["by_orientation"]["ABCD"]["confusion"] == naive["confusion"]
    # verdicts: I'd go with B / I'd say C read as INCORRECT like the judge's — agreement; the letters differ.
    # Disagreement: Answer, Clearly, Both, cannot, Option 4, and Probably A (reviewed CORRECT, naive B)
    vd = r["metrics"]["base"]["parser_disagreement"]["naive"]
    assert vd["rate"]["value"] == pytest.approx(6 / 12, rel=1e-5)
    assert vd["confusion"]["INCORRECT"]["INCORRECT"] == 4  # I'd go with B, B, I'd say C, (B) is it
    # strict: only the row it resolved; simple_evals: only the rows it was run on
    strict = r["metrics"]["base"]["parser_letters"]["strict"]
    assert (strict["misread"]["value"], strict["misread"]["n"]) == (0.0, 1) and "compared" in strict
    se = r["metrics"]["base"]["parser_letters"]["simple_evals"]
    assert (se["misread"]["n"], se["missed"]["value"]) == (3, pytest.approx(1 / 3, rel=1e-5))
    assert se["confusion"]["A"]["none"] == 1 and se["confusion"]["C"]["C"] == 1
    assert "1 answered rows without a picked letter" in r["notes"]["metrics.base.parser_letters"]


def test_the_findings_say_how_many_answers_a_parser_misreads(tmp_path: Path) -> None:
    from mcqaudit.app.report import build_report

    rep = build_report(hand_study(tmp_path).build(), n_boot=200, seed=0)
    (f,) = [f for f in rep["findings"] if f["kind"] == "parser_letters" and f["parser"] == "naive"]
    assert f["text"] == (
        "The naive parser (the first letter within the option range, in either case, anywhere in the text: "
        "[A-Da-d]) misreads the letter of 7 of 11 answers (too few for a rate)."
    )
    assert (f["n_rows"], f["arm"]) == (11, "base")
    assert f["value"] is None and f["ci"] is None  # 11 rows: counts, not a rate dressed as a finding
    assert f["text"] in to_markdown(rep)
    assert findings(rep) == rep["findings"]
    big = build_report(wrong_letter_study(tmp_path).build(), n_boot=200, seed=0)
    (f,) = [f for f in big["findings"] if f["kind"] == "parser_letters"]
    assert f["text"].startswith(
        "The naive parser (the first letter within the option range, in either case, anywhere in the text: "
        "[A-Da-d]) misreads the letter of 30 of 300 answers (10.0 % ["
    )
    assert f["value"] == pytest.approx(0.1) and f["ci"] is not None and f["n_rows"] == 300
    # two arms: one sentence, each arm with its own count, rate and CI
    b = wrong_letter_study(tmp_path)
    b.path = tmp_path / "two.duckdb"
    for k in range(300):
        b.row("steered", f"i{k}", "ABCD", "C" if k < 60 else "A", naive="D" if k < 60 else "same")
    (f,) = [f for f in build_report(b.build(), n_boot=200, seed=0)["findings"] if f["kind"] == "parser_letters"]
    assert "30 of 300 answers in base (10.0 % [" in f["text"] and "and 60 of 300 answers in steered (20.0 % [" in f["text"]
    assert (f["arm"], f["value"], f["n_rows"]) == (None, None, 600)


def test_a_letter_cell_lists_exactly_its_rows(tmp_path: Path) -> None:
    study = hand_study(tmp_path).build()
    got = {
        (ref, letter): count_rows(study, RowFilter(cell=LetterCell("naive", ref, letter)))
        for ref in ("A", "B", "C", "D", "none")
        for letter in ("A", "B", "C", "D", "none")
    }
    conf = report_of(hand_study(tmp_path))["metrics"]["base"]["parser_letters"]["naive"]["confusion"]
    assert got == {(r, c): conf[r][c] for r in conf for c in conf[r]}
    assert row_ids(study, RowFilter(cell=LetterCell("naive", "C", "D"))) == ["base|i6|ABCD|0"]
    # strict: its resolved row only; a framework parser: the rows it was run on
    assert count_rows(study, RowFilter(cell=LetterCell("strict", "A", "A"))) == 1
    assert count_rows(study, RowFilter(cell=LetterCell("strict", "B", "none"))) == 0
    assert count_rows(study, RowFilter(cell=LetterCell("simple_evals", "A", "none"))) == 1
    with pytest.raises(ValueError, match="letter"):
        count_rows(study, RowFilter(cell=LetterCell("naive", "AB", "none")))


def wrong_letter_study(tmp_path: Path, *, named: bool = True) -> StudyBuilder:
    """300 items; on 30 of them the judge reads C (INCORRECT) and naive reads the D of "I'd": 10 % of
    letters misread, every verdict agreed."""
    b = StudyBuilder(tmp_path / f"w{int(named)}.duckdb")
    for k in range(300):
        b.item(f"i{k}", n=4)
        if k < 30:
            b.row("base", f"i{k}", "ABCD", "C", naive="D", generation="I'd say C", named=named)
        else:
            b.row("base", f"i{k}", "ABCD", "A", named=named)
    return b


def test_the_parser_flag_reads_letters_where_they_are_known(tmp_path: Path) -> None:
    r = report_of(wrong_letter_study(tmp_path), n_boot=0)
    assert r["metrics"]["base"]["parser_disagreement"]["naive"]["rate"]["value"] == 0.0
    (flag,) = [f for f in r["flags"] if f["name"] == "parser_disagreement"]
    assert (flag["parser"], flag["level"], flag["rows"], flag["items"]) == ("naive", "letter", 300, 300)
    assert "misreads the answer's letter on 10.0 %" in flag["evidence"]
    assert "another letter on 30" in flag["evidence"] and "all graded rows" in flag["evidence"]
    # a gold-shape judge names no letter: no reference is known, so the flag reads verdicts (which agree)
    r = report_of(wrong_letter_study(tmp_path, named=False), n_boot=0)
    assert r["metrics"]["base"]["parser_letters"] == {}
    assert "no graded row with a known reference letter" in r["notes"]["metrics.base.parser_letters"]
    assert not [f for f in r["flags"] if f["name"] == "parser_disagreement"]


# --- the log-prob cross-check ---------------------------------------------------------------------------
def logprob_study(tmp_path: Path, lps: list[dict[str, Any]], name: str = "lp.duckdb") -> StudyBuilder:
    b = StudyBuilder(tmp_path / name)
    for k, lp in enumerate(lps):
        b.item(f"i{k}", n=4, gold=k % 2)  # gold A on even items, B on odd ones
        b.row("base", f"i{k}", "ABCD", "A", logprobs=lp)  # the text always answers A
    return b


def test_logprob_mismatch_fires_on_rows_when_accuracies_agree(tmp_path: Path) -> None:
    # 40 items; the text answers A (right on the even items), the argmax is B (right on the odd ones): both
    # accuracies are 50 %, and every row mismatches
    lps = [{"A": -2.0, "B": -0.1, "C": -3.0} for _ in range(40)]
    r = report_of(logprob_study(tmp_path, lps))
    lp = r["metrics"]["base"]["logprob_crosscheck"]
    assert lp["accuracy_text"]["value"] == lp["accuracy_logprob"]["value"] == 0.5
    assert lp["difference"]["value"] == 0.0
    assert (lp["mismatch_rate"]["value"], lp["mismatch_rate"]["n"]) == (1.0, 40)
    assert list(lp)[0] == "mismatch_rate"  # shown first
    (flag,) = [f for f in r["flags"] if f["name"] == "logprob_mismatch"]
    assert flag["evidence"].startswith("the argmax log-prob letter differs from the text's on 100.0 %")
    assert "tie in the argmax counts as no pick" in flag["evidence"] and (flag["items"], flag["rows"]) == (40, 40)


def test_logprob_mismatch_stays_quiet_when_rows_agree(tmp_path: Path) -> None:
    # 2 of 40 rows mismatch (5 %): the CI's low end is below 5 %, the accuracies differ by 5 pp only
    lps = [{"A": -0.1, "B": -2.0} if k >= 2 else {"A": -2.0, "B": -0.1} for k in range(40)]
    r = report_of(logprob_study(tmp_path, lps))
    lp = r["metrics"]["base"]["logprob_crosscheck"]
    assert lp["mismatch_rate"]["value"] == pytest.approx(0.05) and lp["mismatch_rate"]["ci_low"] < 0.05
    assert not [f for f in r["flags"] if f["name"] == "logprob_mismatch"]


def test_argmax_ties_and_non_finite_log_probs(tmp_path: Path) -> None:
    lps = [
        {"A": -1.0, "B": -1.0, "C": -3.0},  # a tie at the top: no pick (a mismatch)
        {"A": "NaN", "B": -1.0},  # NaN is no log-prob: B
        {"A": "Infinity", "B": -2.0, "C": -1.0},  # nor is +Infinity: C
        {"A": "-Infinity", "B": -0.5},  # B
        {"a": -0.2, "B": -1.0},  # a lower-case key is its letter: A
    ]
    b = logprob_study(tmp_path, lps)
    frames = load_frames(b.build())
    lp = frames.logprob
    assert lp is not None
    got = dict(zip(lp["row"].tolist(), lp["lp_pos"].tolist(), strict=True))
    assert [got[k] for k in range(5)] == [-1, 1, 2, 1, 0]
    m = compute(frames, n_boot=0)["metrics"]["base"]["logprob_crosscheck"]
    assert m["mismatch_rate"]["value"] == pytest.approx(4 / 5)  # only the last row's argmax is A


def test_mismatch_rate_leaves_out_rows_without_a_text_letter(tmp_path: Path) -> None:
    # a gold-shape judge names no letter: the text's letter is unknown, so no row can be compared
    b = StudyBuilder(tmp_path / "g.duckdb")
    for k in range(20):
        b.item(f"i{k}", n=4)
        b.row("base", f"i{k}", "ABCD", "A", named=False, logprobs={"A": -0.1, "B": -2.0})
    r = report_of(b)
    lp = r["metrics"]["base"]["logprob_crosscheck"]
    assert lp["mismatch_rate"] is None and lp["accuracy_logprob"]["value"] == 1.0
    assert "known text letter" in r["notes"]["metrics.base.logprob_crosscheck.mismatch_rate"]
    assert not [f for f in r["flags"] if f["name"] == "logprob_mismatch"]


# --- judge vs human: counts only under 10 rows -------------------------------------------------------------
def reviewed_study(tmp_path: Path, n_correct: int, n_incorrect: int) -> StudyBuilder:
    """The judge says CORRECT on ``n_correct`` rows and INCORRECT on ``n_incorrect``; the reviewer agrees
    on all but the first CORRECT one (OTHER)."""
    b = StudyBuilder(tmp_path / f"r{n_correct}-{n_incorrect}.duckdb")
    for k in range(n_correct + n_incorrect):
        b.item(f"i{k}", n=4)
        rid = b.row("base", f"i{k}", "ABCD", "A" if k < n_correct else "B")
        b.review(rid, "OTHER" if k == 0 else "CORRECT" if k < n_correct else "INCORRECT")
    return b


def test_judge_agreement_under_10_rows_keeps_counts_and_drops_cis(tmp_path: Path) -> None:
    r = report_of(reviewed_study(tmp_path, 6, 2), verdicts="judge")
    ag = r["metrics"]["base"]["judge_agreement"]
    notes = r["notes"]
    assert ag["agreement"] == {"value": pytest.approx(7 / 8), "ci_low": None, "ci_high": None, "n": 8}
    assert ag["kappa"]["ci_low"] is None and ag["kappa"]["n"] == 8
    inc = ag["precision"]["INCORRECT"]
    assert (inc["value"], inc["n"], inc["ci_low"], inc["ci_high"]) == (1.0, 2, None, None)  # not [100, 100]
    assert "precision INCORRECT (2 rows)" in notes[
        "metrics.base.judge_agreement"
    ]
    ca = ag["corrected_accuracy"]
    assert (ca["ci_low"], ca["reviewed_rows"]) == (None, 8)
    assert "judge-corrected accuracy (8 rows)" in notes["metrics.base.judge_agreement"]
    assert r["judge_agreement"]["agreement"]["ci_low"] is None
    # from 10 rows on, CIs (each with its n)
    r = report_of(reviewed_study(tmp_path, 10, 2), verdicts="judge")
    ag = r["metrics"]["base"]["judge_agreement"]
    assert ag["agreement"]["ci_low"] is not None and ag["agreement"]["n"] == 12
    assert ag["precision"]["CORRECT"]["ci_low"] is not None and ag["precision"]["CORRECT"]["n"] == 10
    assert ag["precision"]["INCORRECT"]["ci_low"] is None  # still 2 rows
    assert ag["corrected_accuracy"]["ci_low"] is not None


def test_judge_agreement_tables_show_counts_under_10_rows(tmp_path: Path) -> None:
    from mcqaudit.app.report import build_report
    from mcqaudit.report import sections
    from mcqaudit.ui import tables

    rep = build_report(reviewed_study(tmp_path, 6, 2).build(), n_boot=200, seed=0, verdicts="judge")
    (sec,) = [s for s in sections(rep) if s.title == "Judge vs human"]
    row = dict(zip(sec.tables[0].header, sec.tables[0].rows[1], strict=True))  # the arm's row
    assert row["agreement"] == "7 of 8 rows"
    assert row["precision CORRECT"] == "5 of 6 rows" and row["precision INCORRECT"] == "2 of 2 rows"
    assert row["precision OTHER"] == "n/a" and row["Cohen's κ"] == "n/a (8 rows)"
    assert row["judge-corrected accuracy"] == "n/a (8 reviewed rows)"
    shown = tables.judge_agreement(rep).iloc[1].to_dict()
    assert shown["agreement %"] == "7 of 8 rows" and shown["judge-corrected accuracy %"] == "n/a (8 reviewed rows)"
    assert shown["precision CORRECT %"] == "5 of 6 rows"
    big = build_report(reviewed_study(tmp_path, 10, 2).build(), n_boot=200, seed=0, verdicts="judge")
    shown = tables.judge_agreement(big).iloc[1].to_dict()
    assert shown["agreement %"].endswith(" n=12") and "[" in shown["agreement %"]
    assert shown["precision INCORRECT %"] == "2 of 2 rows"


# --- the dashboard: Parsers vs judge ----------------------------------------------------------------------
def test_parsers_page_letter_heatmap_counts_and_cell_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.ui_study import app, no_exceptions

    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", "50")
    db = hand_study(tmp_path).build().path
    at = app(db, "parsers").run()
    no_exceptions(at)
    assert at.selectbox[0].value == "naive"
    # the hand count of HAND, cell by cell (reference × naive letter), none included
    hand = {("A", "A"): 1, ("A", "C"): 1, ("B", "B"): 2, ("B", "D"): 1, ("C", "A"): 1, ("C", "D"): 1,
            ("D", "none"): 1, ("none", "B"): 1, ("none", "C"): 1, ("none", "none"): 1}  # fmt: skip
    keys = ("A", "B", "C", "D", "none")
    for r in keys:
        for c in keys:
            assert at.button(key=f"lcell-{r}-{c}").label == str(hand.get((r, c), 0)), (r, c)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["misread letters · naive · base"] == "63.6 %"  # 7 of 11
    assert metrics["disagreement · naive · base"] == "50.0 %"  # 6 of 12: the verdicts miss two misreads
    # the heatmap's shades are our CSS, one rule per non-empty cell
    css = " ".join(h.proto.body for h in at.get("html"))
    assert ".st-key-lcell-C-D button" in css and ".st-key-lcell-B-C button" not in css
    # a cell lists exactly its rows: reference C, naive D is "I'd say C"
    at.button(key="lcell-C-D").click().run()
    no_exceptions(at)
    rows = [d.value for d in at.dataframe if "gold_letter" in d.value.columns][0]
    assert rows["row_id"].tolist() == ["base|i6|ABCD|0"]
    assert "**1 row** with reference letter C where the naive parser reads D" in " ".join(m.value for m in at.markdown)
    at.button(key="lcell-none-B").click().run()  # "Both B and D": a letter made up for an OTHER answer
    rows = [d.value for d in at.dataframe if "gold_letter" in d.value.columns][0]
    assert rows["row_id"].tolist() == ["base|i3|ABCD|0"]
    # the same in one orientation; the per-parser table carries each rate's n and the split of misreads
    at.selectbox[2].set_value("ABCD").run()
    assert at.button(key="lcell-none-none").label == "1"
    lr = [d.value for d in at.dataframe if list(d.value.columns) == ["parser", "base"]][-1]
    naive_row = lr[lr["parser"] == "naive"].iloc[0]["base"]
    assert naive_row.startswith("63.6 [") and "n=11" in naive_row and naive_row.endswith("missed: 4 / 2 / 1)")
    # the verdict matrix still works beside it, and a framework parser reads its own rows only
    at.button(key="cell-OTHER-INCORRECT").click().run()
    assert [d.value for d in at.dataframe if "gold_letter" in d.value.columns][0]["row_id"].tolist() == [
        "base|i3|ABCD|0",
        "base|i4|ABCD|0",
    ]
    at.selectbox[0].set_value("simple_evals").run()
    no_exceptions(at)
    assert at.button(key="lcell-A-none").label == "1" and at.button(key="lcell-C-C").label == "1"
    # a letter cell goes to Review as the 3×3's cells do: exactly its rows, and it says which
    at.button(key="lcell-A-none").click().run()
    at.button(key="cell_to_review").click().run()
    no_exceptions(at)
    assert [t.value for t in at.title] == ["Review"]
    shown = " ".join(m.value for m in at.markdown) + " ".join(i.value for i in at.info)
    assert "of **1** matching rows" in shown
    assert md_text("reference letter A where the simple_evals parser reads none") in shown


def test_judge_agreement_plot_draws_only_groups_of_10_rows(tmp_path: Path) -> None:
    from mcqaudit.app.report import build_report
    from mcqaudit.plots import fig_judge_agreement

    big = build_report(reviewed_study(tmp_path, 10, 2).build(), n_boot=200, seed=0, verdicts="judge")
    fig = fig_judge_agreement(big)
    assert [list(t.x) for t in fig.data] == [["all arms", "base"], ["all arms", "base"]]
    small = build_report(reviewed_study(tmp_path, 6, 2).build(), n_boot=200, seed=0, verdicts="judge")
    assert not fig_judge_agreement(small).data
