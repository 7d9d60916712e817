"""Every dashboard page, run with Streamlit's AppTest on the fixture study: the values shown are the report's
(and the database's), not just "it rendered"."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from mcqaudit.formatting import md_text
from mcqaudit.report import STANDIN_BANNER
from mcqaudit.store import Study
from mcqaudit.ui import tables
from mcqaudit.vocab import VERDICTS
from tests.ui_study import BOOT, app, no_exceptions, page_links, report_of


@pytest.fixture(autouse=True)
def _bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", str(BOOT))


# st.dataframe keeps no key unless it is selectable: tables are told apart by their columns
COLUMNS = {
    "headline": ["arm", "rows", "accuracy %", "answered accuracy %"],
    "deltas": ["arm", "items", "pairing", "Δaccuracy (pp)", "MDE (pp)"],
    "fingerprints": ["fingerprint", "model"],
    "acc_by_orientation": ["arm", "ABCD", "BCDA"],
    "delta_by_orientation": ["arm", "overall", "ABCD", "BCDA"],
    "circular": ["arm", "circular accuracy %", "chance %"],
    "other_by_arm": ["arm", "OTHER rate %", "ungraded rate %", "accuracy %"],
    "rates_by_orientation": ["arm", "orientation", "rows", "correct"],
    "other_rows": ["row_id", "item_id", "orientation", "verdict_source", "judge_status", "answer", "truncated"],
    "cell_rows": ["row_id", "item_id", "orientation", "gold_letter", "picked_letter"],
    "parser_deltas": ["arm", "source", "Δaccuracy (pp)"],
    "disagreement_rates": ["parser", "base", "steered"],
    "position_picks": ["arm", "A", "B", "C", "D"],
    "bias_summary": ["arm", "first-position rate %", "RStd (pp)"],
    "recall_by_gold": ["arm", "A", "B", "C", "D"],
}


def frame(at, key: str) -> pd.DataFrame:
    want = COLUMNS[key]
    hits = [d.value for d in at.dataframe if list(d.value.columns[: len(want)]) == want]
    if key == "recall_by_gold":
        hits = hits[1:]  # position_picks comes first with the same columns
    assert hits, f"no dataframe {key!r}; have {[list(d.value.columns) for d in at.dataframe]}"
    return hits[0].reset_index(drop=True)


def same(shown: pd.DataFrame, expected: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(
        shown.astype(str), expected.reset_index(drop=True).astype(str), check_dtype=False
    )


def test_overview_shows_flags_first_headline_and_provenance(ui_db: Path) -> None:
    rep = report_of(ui_db)
    at = app(ui_db, "overview").run()
    no_exceptions(at)
    assert [t.value for t in at.title] == ["Overview"]
    assert STANDIN_BANNER in [w.value for w in at.warning]
    # findings first, then the flags grouped by name (one card each, a table of its instances), then the
    # headline table; each flag links to the page that shows its evidence
    subheaders = [s.value for s in at.subheader]
    names = list(dict.fromkeys(f["name"] for f in rep["flags"]))
    assert subheaders[:3] == [
        "Findings",
        f"Flags ({len(names)} kind{'' if len(names) == 1 else 's'}, {len(rep['flags'])} in all)",
        "Headline",
    ]
    assert rep["flags"], "the fixture study should fire flags"
    shown = " ".join(m.value for m in at.markdown)
    for name in names:
        assert shown.count(f"**{name}**") == 1  # one card per flag name
        n = sum(f["name"] == name for f in rep["flags"])
        if n > 1:
            tables_ = [
                d.value for d in at.dataframe if "evidence" in d.value.columns and len(d.value) == n
            ]
            assert tables_ and {"arm", "evidence", "items", "rows"} <= set(tables_[0].columns)
    links = page_links(at)
    assert {p for _, p in links} >= {
        {"Parsers vs judge": "parsers", "Orientations": "orientations", "OTHER by arm": "other", "Review": "review",
         "Overview": "overview", "Bias": "bias"}[f["page"]]
        for f in rep["flags"]
    }  # fmt: skip
    metrics = {m.label: m.value for m in at.metric}
    for arm in rep["arms"]:
        assert metrics[f"accuracy · {arm}"] == f"{rep['metrics'][arm]['accuracy']['value'] * 100:.1f} %"
        assert metrics[f"OTHER rate · {arm}"] == f"{rep['metrics'][arm]['other_rate']['value'] * 100:.1f} %"
    same(frame(at, "headline"), tables.headline(rep))
    same(frame(at, "deltas"), tables.deltas(rep))
    fps = frame(at, "fingerprints")
    assert list(fps["fingerprint"]) == list(rep["judge_fingerprints"])
    assert list(fps["stand-in (not an LLM)"]) == ["yes"]


@pytest.mark.parametrize("page", ["overview", "orientations", "parsers", "review"])
def test_the_control_arm_is_shown_and_changed_on_every_page(ui_db: Path, page: str) -> None:
    at = app(ui_db, page).run()
    box = at.sidebar.selectbox(key="control_arm_select")
    assert box.value == "base"
    box.set_value("steered").run()
    no_exceptions(at)
    assert Study(ui_db).get_meta("control_arm") == "steered"
    assert at.sidebar.selectbox(key="control_arm_select").value == "steered"
    if page == "overview":
        head = frame(at, "headline")
        assert list(head["arm"]) == ["base", "steered (control)"]
        assert list(frame(at, "deltas")["arm"]) == ["base"]


def test_orientations_page(ui_db: Path) -> None:
    rep = report_of(ui_db)
    at = app(ui_db, "orientations").run()
    no_exceptions(at)
    same(frame(at, "acc_by_orientation"), tables.accuracy_by_orientation(rep))
    same(frame(at, "delta_by_orientation"), tables.delta_by_orientation(rep))
    same(frame(at, "circular"), tables.circular(rep))
    acc = frame(at, "acc_by_orientation")
    # the base arm answers orientation ABCD perfectly in the fixture (strict or judged correct)
    assert acc.loc[0, "ABCD"].startswith(
        f"{rep['metrics']['base']['accuracy_by_orientation']['ABCD']['value'] * 100:.1f}"
    )
    assert len(at.get("plotly_chart")) == 2


def test_other_page_rates_and_rows_a_click_away(ui_db: Path) -> None:
    rep = report_of(ui_db)
    s = Study(ui_db)
    at = app(ui_db, "other").run()
    no_exceptions(at)
    same(frame(at, "other_by_arm"), tables.other_by_arm(rep))
    rates = frame(at, "rates_by_orientation")
    expected = s.query_df(
        "SELECT arm, orientation, count(*) FILTER (final_verdict = 'OTHER') AS other FROM graded_rows GROUP BY ALL"
    )
    merged = rates.merge(expected, on=["arm", "orientation"], suffixes=("", "_sql"))
    assert len(merged) == 4 and (merged["other"] == merged["other_sql"]).all()
    steered = rates[(rates.arm == "steered") & (rates.orientation == "ABCD")].iloc[0]
    assert steered["OTHER rate %"] == round(100 * steered["other"] / steered["rows"], 1)
    n_other = s.query("SELECT count(*) FROM graded_rows WHERE arm = 'steered' AND final_verdict = 'OTHER'")[
        0
    ][0]
    listed = frame(at, "other_rows")
    assert len(listed) == n_other > 0
    assert set(listed["row_id"]) == {
        r[0]
        for r in s.query("SELECT row_id FROM graded_rows WHERE arm = 'steered' AND final_verdict = 'OTHER'")
    }
    at.button(key="other_to_review").click().run()
    no_exceptions(at)
    assert [t.value for t in at.title] == ["Review"]
    assert f"of **{n_other}** matching rows" in " ".join(m.value for m in at.markdown)


def test_parsers_page_confusion_cell_lists_exactly_its_rows(ui_db: Path) -> None:
    rep = report_of(ui_db)
    s = Study(ui_db)
    at = app(ui_db, "parsers").run()
    no_exceptions(at)
    assert at.selectbox[0].value == "naive"
    at.selectbox[1].set_value("steered").run()
    conf = rep["metrics"]["steered"]["parser_disagreement"]["naive"]["confusion"]
    for r in VERDICTS:
        for c in VERDICTS:
            assert at.button(key=f"cell-{r}-{c}").label == str(conf[r][c])
    rate = rep["metrics"]["steered"]["parser_disagreement"]["naive"]["rate"]
    assert {m.label: m.value for m in at.metric}[
        "disagreement · naive · steered"
    ] == f"{rate['value'] * 100:.1f} %"
    # the cell verdict CORRECT × naive INCORRECT: the prose openers ("A valid choice…") the naive parser misreads
    at.button(key="cell-CORRECT-INCORRECT").click().run()
    no_exceptions(at)
    rows = frame(at, "cell_rows")
    expected = {
        r[0]
        for r in s.query(
            """SELECT row_id FROM graded_rows WHERE arm = 'steered' AND final_verdict = 'CORRECT'
               AND naive_letter IS NOT NULL AND naive_letter <> gold_letter"""
        )
    }
    assert len(rows) == conf["CORRECT"]["INCORRECT"] == len(expected) > 0
    assert set(rows["row_id"]) == expected
    # one orientation: the matrix and the list follow it
    at.selectbox[2].set_value("BCDA").run()
    by = rep["metrics"]["steered"]["parser_disagreement"]["naive"]["by_orientation"]["BCDA"]["confusion"]
    assert at.button(key="cell-CORRECT-INCORRECT").label == str(by["CORRECT"]["INCORRECT"])
    at.button(key="cell-CORRECT-INCORRECT").click().run()
    assert len(frame(at, "cell_rows")) == by["CORRECT"]["INCORRECT"]
    # every parser's Δ beside the judge's
    same(frame(at, "parser_deltas"), tables.parser_deltas(rep))
    same(frame(at, "disagreement_rates"), tables.disagreement_rates(rep))
    # another parser
    at.selectbox[0].set_value("user").run()
    conf_u = rep["metrics"]["steered"]["parser_disagreement"]["user"]["by_orientation"]["BCDA"]["confusion"]
    assert at.button(key="cell-OTHER-INCORRECT").label == str(conf_u["OTHER"]["INCORRECT"])


def test_bias_page(ui_db: Path) -> None:
    rep = report_of(ui_db)
    at = app(ui_db, "bias").run()
    no_exceptions(at)
    same(frame(at, "position_picks"), tables.position_picks(rep))
    same(frame(at, "bias_summary"), tables.bias_summary(rep))
    same(frame(at, "recall_by_gold"), tables.recall_by_gold(rep))
    picks = frame(at, "position_picks")
    a = rep["metrics"]["base"]["position_pick_rate"]["A"]
    assert picks.loc[0, "A"].startswith(f"{a['value'] * 100:.1f}")


def test_export_page_offers_every_download(ui_db: Path) -> None:
    at = app(ui_db, "export").run()
    no_exceptions(at)
    labels = {b.label for b in at.get("download_button")}
    assert labels == {
        "Report (HTML)",
        "Report (Markdown)",
        "Report (JSON)",
        "Rows (CSV)",
        "Rows (Parquet)",
        "Review log (CSV)",
    }


def test_export_data(ui_db: Path) -> None:
    import io

    from mcqaudit.ui import data

    path = str(ui_db)
    n = Study(ui_db).query("SELECT count(*) FROM graded_rows")[0][0]
    csv = pd.read_csv(io.BytesIO(data.export_rows(path, "csv")))
    pq = pd.read_parquet(io.BytesIO(data.export_rows(path, "parquet")))
    assert len(csv) == len(pq) == n
    assert {"row_id", "final_verdict", "verdict_source", "judge_fingerprint"} <= set(csv.columns)
    assert list(pq["options"].iloc[0]) == __import__("json").loads(csv["options"].iloc[0])
    assert data.review_log_csv(path).splitlines()[0].startswith("review_id,row_id,arm")


def test_unaudited_study_says_so_and_lists_its_ungraded_rows(tmp_path: Path) -> None:
    from mcqaudit.app.grade import grade_without_judge
    from mcqaudit.report import UNAUDITED_BANNER
    from tests.builders import build_ui_study as build_study

    db = build_study(tmp_path / "unaudited.duckdb", grade_it=False)
    grade_without_judge(Study(db))
    at = app(db, "overview").run()
    no_exceptions(at)
    assert UNAUDITED_BANNER in [w.value for w in at.warning]
    shown = " ".join(m.value for m in at.markdown)
    assert "**ungraded_rows**" in shown and "**judge_unaudited**" in shown
    pending = Study(db).query("SELECT count(*) FROM graded_rows WHERE judge_status = 'pending'")[0][0]
    rv = app(db, "review").run()
    rv.multiselect(key="w:f_verdicts").set_value(["no verdict yet"]).run()
    assert f"of **{pending}** matching rows" in " ".join(m.value for m in rv.markdown)
    assert {m.label: m.value for m in rv.metric}["final verdict"] == "ungraded"


def test_dashboard_entry_routes_to_overview(ui_db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("MCQAUDIT_DB", str(ui_db))
    at = AppTest.from_file(
        str(Path(__file__).resolve().parents[1] / "dashboard.py"), default_timeout=60
    ).run()
    no_exceptions(at)
    assert [t.value for t in at.title] == ["Overview"]
    assert at.session_state["db_path"] == str(ui_db.resolve())


def test_overview_pairwise_delta_with_three_arms(tmp_path: Path) -> None:
    """Three arms: the Overview shows the Δ of every pair on their shared items, each cell with its CI, n and
    pairing, as the report computes it."""
    from tests.builders import build_review_study as build

    db = build(tmp_path / "three.duckdb", n_items=24, orientations=("ABCD", "BCDA"))
    rep = report_of(db)
    at = app(db, "overview").run()
    no_exceptions(at)
    table = [d.value for d in at.dataframe if list(d.value.columns) == list(rep["arms"])][0]
    assert table.shape == (3, 3)
    for a in rep["arms"]:
        for b in rep["arms"]:
            m = rep["pairwise_delta"][a][b] if a != b else None
            if a == b:
                assert table.loc[a, b] == "—"
            else:
                assert table.loc[a, b] == f"{tables.pct(m, sign=True)} · {m['pairing']}"
                assert f"n={m['n']}" in table.loc[a, b]
    assert any(c.proto.spec for c in at.get("plotly_chart"))


def test_bias_page_shows_pick_shares_confounded_by_unbalanced_gold(tmp_path: Path) -> None:
    """Every gold at canonical A, shown as ABCD and BCDA: the gold sits only at displayed A or D, so pick rates
    cannot be read against chance — but the picks themselves are shown, marked as confounded."""
    from tests.builders import StudyBuilder

    b = StudyBuilder(tmp_path / "unbalanced.duckdb")
    for k in range(24):
        b.item(f"i{k:02d}", n=4, gold=0)
        b.row("base", f"i{k:02d}", "ABCD", "A")  # the gold, displayed first
        b.row("base", f"i{k:02d}", "BCDA", "A" if k < 12 else "D")  # the first option, or the gold (at D)
    b.build()
    rep = report_of(b.path)
    assert rep["metrics"]["base"]["position_pick_rate"] is None and rep["design"]["gold_unbalanced"]
    at = app(b.path, "bias").run()
    no_exceptions(at)
    warnings = " ".join(w.value for w in at.warning)
    assert "Confounded by the gold imbalance (design_imbalance)" in warnings
    assert "**design_imbalance**" in " ".join(m.value for m in at.markdown)
    picks = frame(at, "position_picks")
    # 48 picked rows: A 24 + 12 = 36 (75 %), D 12 (25 %), B and C none; no chance level is claimed
    assert [picks.loc[0, x].split(" [")[0] for x in "ABCD"] == ["75.0", "0.0", "0.0", "25.0"]
    assert "n=48" in picks.loc[0, "A"] and "chance" not in picks.loc[0, "A"]
    (chart,) = [c for c in at.get("plotly_chart") if "fig_position_picks" in str(c.proto.id) or "Picks" in c.proto.spec]
    assert "confounded by the gold imbalance" in chart.proto.spec and "no row has a picked letter" not in chart.proto.spec


def test_orientations_page_compares_orientations_within_each_item_family(tmp_path: Path) -> None:
    from mcqaudit import orient
    from tests.builders import StudyBuilder

    b = StudyBuilder(tmp_path / "families.duckdb")
    for n, labels in ((2, ("AB", "BA")), (4, tuple(orient.scheme_labels(4, "cyclic")))):
        for k in range(20):
            item = b.item(f"i{n}-{k:02d}", n=n, gold=k % n)
            for lab in labels:
                gold = b.gold_letter(item, lab)
                b.row("base", item, lab, gold)
                b.row("steered", item, lab, gold if k % 2 else ("B" if gold == "A" else "A"))
    b.build()
    rep = report_of(b.path)
    at = app(b.path, "orientations").run()
    no_exceptions(at)
    shown = [d.value for d in at.dataframe]
    acc = [d for d in shown if "all orientations" in d.columns]
    assert [list(d.columns) for d in acc] == [["arm", "AB", "BA", "all orientations"],
                                              ["arm", "ABCD", "BCDA", "CDAB", "DABC", "all orientations"]]  # fmt: skip
    fams = tables.families(rep)
    for d, fam in zip(acc, fams, strict=True):
        same(d, tables.accuracy_by_orientation(rep, fam))
    deltas = [d for d in shown if "overall" in d.columns]
    assert [list(d.columns) for d in deltas] == [["arm", "overall", "AB", "BA", "items"],
                                                 ["arm", "overall", "ABCD", "BCDA", "CDAB", "DABC", "items"]]  # fmt: skip
    assert deltas[0].loc[0, "overall"].startswith("-50.0") and deltas[0].loc[0, "items"] == 20
    captions = [m.value for m in at.markdown if m.value.startswith("**") and "items" in m.value]
    assert any(md_text("2-option items (20 items") in c for c in captions)
    specs = [c.proto.spec for c in at.get("plotly_chart")]
    assert len(specs) == 4 and sum("4-option items (20 items)" in s for s in specs) == 2
