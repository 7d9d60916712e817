"""Results by subject (docs/design.md §7 ``by_group``; issue 22 part 3): ``report --by metadata.KEY``, its
Markdown table and figures, the usage error for a key no row has, and the dashboard's Group by select.

The study goes through the real ingest (items and generations files, the metadata on the generation rows) and
is not judged: bare letters are graded by the strict pre-filter, blank answers are OTHER by rule, and a blank
answer stopped by the token limit is truncated. Four topics of 24 items (geo, sci, hist, lang), one of 8 (art:
small) and 6 items whose rows have no topic (the group ``(none)``, small too), in two orientations, arms
``base`` and ``steered``. The steering works in geo only: there it answers 9 more items, in every other topic
the arms agree (but for one OTHER row in sci). Each figure is checked against a computation by hand from the
same row list (:func:`hand`), loops over rows, independent of the metrics code.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mcqaudit import orient
from mcqaudit.app.report import GroupByError, build_report
from mcqaudit.metrics import MIN_ITEMS
from mcqaudit.metrics.rules import MAX_GROUPS
from mcqaudit.plots import fig_group_delta, fig_group_rates, report_figures
from mcqaudit.report import to_html, to_markdown
from mcqaudit.store import Study
from mcqaudit.store.frames import load_frames
from mcqaudit.svgplot import figure_svg
from mcqaudit.vocab import LETTERS
from tests.builders import build_graded_study, write_inputs
from tests.helpers import run_cli, write_jsonl

ORIENTS = ("ABCD", "BCDA")
TOPICS = {"geo": 24, "sci": 24, "hist": 24, "lang": 24, "art": 8, None: 6}
BOOT = 400


def outcome(arm: str, topic: str | None, i: int, o: int) -> str:
    """C: the gold letter; I: another letter; O: a blank answer (OTHER by rule); T: blank, cut by the token
    limit (OTHER and truncated)."""
    if arm == "steered" and topic == "geo":
        return "C" if i < 21 else ("T" if i == 23 else "I")
    if arm == "steered" and topic == "sci" and i == 0 and o == 1:
        return "O"
    if topic == "geo":
        return "C" if i < 12 or (i == 12 and o == 0) else "I"
    if topic == "sci":
        return "O" if (i == 23 and o == 1) else ("C" if i < 18 else "I")
    if topic == "hist":
        return "C" if i < 6 else "I"
    if topic == "lang":
        return "C" if i % 2 == 0 else "I"
    if topic == "art":
        return "C" if i < 6 else "I"
    return "C" if i < 3 else "I"


@dataclass(frozen=True)
class Row:
    arm: str
    topic: str | None
    item: str
    orientation: int
    outcome: str


def rows() -> Iterator[Row]:
    for topic, n in TOPICS.items():
        for i in range(n):
            for o in range(len(ORIENTS)):
                for arm in ("base", "steered"):
                    yield Row(arm, topic, f"{topic or 'x'}-{i:02d}", o, outcome(arm, topic, i, o))


def inputs(folder: Path, *, on_items: bool = False, one_topic: bool = False) -> tuple[Path, Path]:
    """The items and generations files. ``on_items``: the topic is in the items file's metadata, not the
    rows'; ``one_topic``: every row has the topic ``all``."""
    items, gens = [], []
    for topic, n in TOPICS.items():
        for i in range(n):
            iid = f"{topic or 'x'}-{i:02d}"
            meta: dict[str, Any] | None = {"topic": "all" if one_topic else topic, "difficulty": i % 3}
            if topic is None and not one_topic:
                meta = None if i % 2 else {"difficulty": i % 3}  # no metadata, or no topic in it
            items.append({"item_id": iid, "question": f"Question {iid}?", "options": [f"{iid}-{k}" for k in "wxyz"],
                          "gold": 0, **({"metadata": meta} if on_items and meta else {})})  # fmt: skip
    for r in rows():
        it = next(x for x in items if x["item_id"] == r.item)
        orientation = ORIENTS[r.orientation]
        gold = orient.displayed_letter(LETTERS[0], orientation)
        wrong = LETTERS[(LETTERS.index(gold) + 1) % 4]
        gen = {"C": gold, "I": wrong}.get(r.outcome, "")
        row: dict[str, Any] = {
            "item_id": r.item, "arm": r.arm, "question": it["question"], "options": orient.apply(it["options"], orientation),
            "gold": gold, "orientation": orientation, "generation": gen,
            "finish_reason": "length" if r.outcome == "T" else "stop",
        }  # fmt: skip
        meta = {"topic": "all", "difficulty": 0} if one_topic else {"topic": r.topic, "difficulty": 0}
        if r.topic is None and not one_topic:
            meta = {"difficulty": 0} if int(r.item[-2:]) % 2 == 0 else None
        if meta is not None and not on_items:
            row["metadata"] = meta
        gens.append(row)
    return write_inputs(folder, items, gens)


def study(tmp_path: Path, **kw: bool) -> Path:
    gens, items = inputs(tmp_path / "inputs", **kw)
    return build_graded_study(tmp_path / "s.duckdb", gens, items=items, judge=False)


@pytest.fixture(scope="module")
def topic_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return study(tmp_path_factory.mktemp("by_group"))


@pytest.fixture(scope="module")
def grouped(topic_db: Path) -> dict[str, Any]:
    return dict(build_report(topic_db, n_boot=BOOT, by=["metadata.topic"]))


# --- the hand computation ---------------------------------------------------------------------------------
def hand(topic: str | None, arm: str) -> dict[str, float]:
    """Accuracy (mean over items of the mean over orientations of 1[CORRECT]), OTHER rate (OTHER / rows),
    truncated rate, rows and items of one arm in one group, by loops over the rows."""
    mine = [r for r in rows() if r.topic == topic and r.arm == arm]
    per_item: dict[str, list[float]] = {}
    for r in mine:
        per_item.setdefault(r.item, []).append(1.0 if r.outcome == "C" else 0.0)
    acc = sum(sum(v) / len(v) for v in per_item.values()) / len(per_item)
    other = sum(r.outcome in "OT" for r in mine) / len(mine)
    cut = sum(r.outcome == "T" for r in mine) / len(mine)
    return {
        "accuracy": acc,
        "other_rate": other,
        "truncated_rate": cut,
        "rows": len(mine),
        "items": len(per_item),
    }


def hand_delta(topic: str | None) -> dict[str, float]:
    t, c = hand(topic, "steered"), hand(topic, "base")
    return {k: t[k] - c[k] for k in ("accuracy", "other_rate", "truncated_rate")}


def close(m: dict[str, Any] | None, value: float) -> None:
    assert m is not None and m["value"] == pytest.approx(value, abs=1e-6), (m, value)
    if m["ci_low"] is not None:
        assert m["ci_low"] - 1e-9 <= m["value"] <= m["ci_high"] + 1e-9


# --- the report ---------------------------------------------------------------------------------------------
def test_by_group_matches_a_hand_computation(grouped: dict[str, Any]) -> None:
    by = grouped["by_group"]["topic"]
    assert list(by) == ["art", "geo", "hist", "lang", "sci", "(none)"]  # by value, the rows lacking it last
    for value in by:
        topic = None if value == "(none)" else value
        for arm in ("base", "steered"):
            e, h = by[value][arm], hand(topic, arm)
            close(e["accuracy"], h["accuracy"])
            close(e["other_rate"], h["other_rate"])
            close(e["truncated_rate"], h["truncated_rate"])
            assert (e["rows"], e["items"]) == (h["rows"], h["items"])
            assert e["accuracy"]["n"] == h["items"] and e["other_rate"]["n"] == h["rows"]
            assert e["small"] is (h["items"] < MIN_ITEMS)
        if not by[value]["base"]["small"]:
            d, hd = by[value]["steered"], hand_delta(topic)
            close(d["delta_accuracy"], hd["accuracy"])
            close(d["delta_other_rate"], hd["other_rate"])
            close(d["delta_truncated_rate"], hd["truncated_rate"])
            assert d["delta_accuracy"]["n"] == d["delta_accuracy"]["items"] == TOPICS[topic]
            assert (
                d["delta_accuracy"]["pairing"] == "paired"
                and d["delta_accuracy"]["rows"] == 4 * TOPICS[topic]
            )
        assert "delta_accuracy" not in by[value]["base"]  # the control has no Δ
    # the figures spelled out: geo, where the steering works
    geo = by["geo"]
    assert geo["base"]["accuracy"]["value"] == pytest.approx(12.5 / 24, abs=1e-6)
    assert geo["steered"]["accuracy"]["value"] == pytest.approx(21 / 24, abs=1e-6)
    assert geo["steered"]["delta_accuracy"]["value"] == pytest.approx(8.5 / 24, abs=1e-6)
    assert geo["steered"]["truncated_rate"]["value"] == pytest.approx(2 / 48, abs=1e-6)
    assert geo["base"]["accuracy_by_orientation"]["ABCD"]["value"] == pytest.approx(13 / 24, abs=1e-6)
    assert geo["base"]["accuracy_by_orientation"]["BCDA"]["value"] == pytest.approx(12 / 24, abs=1e-6)
    facts = grouped["group_by"]["topic"]
    assert facts == {"path": "metadata.topic", "control_arm": "base", "groups": 6,
                     "items": {"art": 8, "geo": 24, "hist": 24, "lang": 24, "sci": 24, "(none)": 6},
                     "small": ["art", "(none)"], "missing": "(none)", "min_items": MIN_ITEMS}  # fmt: skip


def test_small_groups_and_the_missing_key_give_no_delta_no_flag_no_finding(
    topic_db: Path, grouped: dict[str, Any]
) -> None:
    by = grouped["by_group"]["topic"]
    for value in ("art", "(none)"):
        assert by[value]["steered"]["small"] and by[value]["steered"]["delta_accuracy"] is None
        assert not any(k.startswith(f"by_group.topic.{value}.") for k in grouped["notes"])
    assert grouped["notes"]["by_group.topic"].startswith("2 groups under 20 items")
    assert (
        "art (8 items)" in grouped["notes"]["by_group.topic"]
        and "(none) (6 items)" in grouped["notes"]["by_group.topic"]
    )
    plain = build_report(topic_db, n_boot=BOOT)
    assert "by_group" not in plain and "group_by" not in plain
    assert grouped["flags"] == plain["flags"]  # groups drive no flag
    assert grouped["metrics"] == plain["metrics"] and grouped["delta_accuracy"] == plain["delta_accuracy"]
    said = [f for f in grouped["findings"] if f["kind"] == "group"]
    assert len(said) == 1 and "art" not in said[0]["text"] and "(none)" not in said[0]["text"]
    assert [f for f in grouped["findings"] if f["kind"] != "group"] == plain["findings"]


def test_a_steering_effect_that_lives_in_one_subject_is_visible(grouped: dict[str, Any]) -> None:
    by = grouped["by_group"]["topic"]
    geo = by["geo"]["steered"]["delta_accuracy"]
    assert geo["ci_low"] > 0.1  # clearly above 0 in geo ...
    for value in ("sci", "hist", "lang"):  # ... and nowhere else
        d = by[value]["steered"]["delta_accuracy"]
        assert d["ci_low"] <= 0 <= d["ci_high"], (value, d)
    (f,) = [f for f in grouped["findings"] if f["kind"] == "group"]
    assert f["by"] == "topic" and f["groups"] == ["geo"] and f["arm"] == "steered"
    assert f["value"] == geo["value"] and f["n_items"] == 24
    assert f["text"].startswith(
        "By topic, steered vs base: the Δaccuracy's CI excludes 0 in 1 of the 4 groups"
    )
    assert "geo: +35.4 pp" in f["text"] and "in the other 3 it spans 0" in f["text"]
    # the figure a person looks at: geo's marker lies right of 0, the others' CIs straddle it
    fig = fig_group_delta(grouped, "topic").to_plotly_json()
    (trace,) = fig["data"]
    labels = list(trace["y"])
    assert labels[1] == "geo (24 items)" and labels[0] == "art (8 items, small)"
    at = labels.index("geo (24 items)")
    assert trace["x"][at] == pytest.approx(100 * geo["value"]) and trace["x"][0] is None  # art: no Δ
    assert trace["x"][at] - trace["error_x"]["arrayminus"][at] > 10


def test_one_group_gives_the_reports_own_figures(tmp_path: Path) -> None:
    """Every row in one group: the group's figures, CIs included, are the report's (the same item draws)."""
    rep = build_report(study(tmp_path, one_topic=True), n_boot=BOOT, by=["metadata.topic"])
    (only,) = rep["by_group"]["topic"].values()
    for arm in ("base", "steered"):
        for key in ("accuracy", "answered_accuracy", "other_rate", "truncated_rate"):
            assert only[arm][key] == rep["metrics"][arm][key], (arm, key)
        assert only[arm]["accuracy_by_orientation"] == rep["metrics"][arm]["accuracy_by_orientation"]
    d = rep["delta_accuracy"]["steered"]
    for mine, theirs in (("delta_accuracy", "overall"), ("delta_other_rate", "other_rate"),
                         ("delta_truncated_rate", "truncated_rate")):  # fmt: skip
        got = {k: only["steered"][mine][k] for k in ("value", "ci_low", "ci_high", "n", "se", "mde")}
        assert got == {k: d[theirs][k] for k in got}, mine


def test_metadata_from_the_items_file_groups_too(tmp_path: Path, grouped: dict[str, Any]) -> None:
    rep = build_report(study(tmp_path, on_items=True), n_boot=BOOT, by=["metadata.topic"])
    assert rep["by_group"] == grouped["by_group"] and rep["group_by"] == grouped["group_by"]


def test_default_frames_read_no_metadata_and_by_adds_one_code_per_row(topic_db: Path) -> None:
    s = Study(topic_db)
    assert load_frames(s).groups == {}
    frames = load_frames(s, by=["topic", "difficulty"])
    g = frames.groups["topic"]
    assert g.labels == ["art", "geo", "hist", "lang", "sci"] and len(g.codes) == len(frames.rows)
    assert int((g.codes == -1).sum()) == 6 * 2 * 2  # the (none) rows
    assert frames.groups["difficulty"].labels == ["0"]


def test_a_key_no_row_has_is_a_usage_error_naming_the_keys(topic_db: Path) -> None:
    res = run_cli("report", "--db", str(topic_db), "--by", "metadata.subject", "--bootstrap", "0")
    assert res.returncode == 2 and not res.stdout
    assert (
        "no row's metadata has the key 'subject'; the study's metadata has: difficulty, topic" in res.stderr
    )
    assert "Traceback" not in res.stderr
    res = run_cli("report", "--db", str(topic_db), "--by", "topic", "--bootstrap", "0")
    assert (
        res.returncode == 2 and "--by must be metadata.KEY (e.g. metadata.topic), not 'topic'" in res.stderr
    )
    with pytest.raises(GroupByError):
        build_report(topic_db, n_boot=0, by=["metadata."])
    res = run_cli("report", "--db", str(topic_db), "--by", "metadata.topic", "--by", "metadata.difficulty",
                  "--bootstrap", "50")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert list(json.loads(res.stdout)["by_group"]) == ["topic", "difficulty"]


def test_a_key_with_more_values_than_groups_is_a_usage_error(tmp_path: Path) -> None:
    """An id is not a subject: 201 distinct values are refused (exit 2), never 201 one-item groups."""
    rows_ = [{"item_id": f"q{i}", "arm": "base", "question": f"Q{i}?", "options": ["yes", "no"], "gold": "A",
              "generation": "A", "metadata": {"qid": i, "topic": "all"}} for i in range(MAX_GROUPS + 1)]  # fmt: skip
    db = tmp_path / "ids.duckdb"
    build_graded_study(db, write_jsonl(tmp_path / "g.jsonl", rows_), control=None, judge=False)
    res = run_cli("report", "--db", str(db), "--by", "metadata.qid", "--bootstrap", "0")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"--by metadata.qid: {MAX_GROUPS + 1} distinct values; results by group take at most {MAX_GROUPS}" in res.stderr
    assert run_cli("report", "--db", str(db), "--by", "metadata.topic", "--bootstrap", "0").returncode == 0


def test_markdown_and_html_show_the_by_group_table_and_figures(grouped: dict[str, Any]) -> None:
    md = to_markdown(grouped)
    assert "## By topic" in md
    lines = md[md.index("## By topic") :].splitlines()
    header = next(x for x in lines if x.startswith("| topic |"))
    assert header == ("| topic | items | arm | rows | accuracy | OTHER rate | truncated rate | Δaccuracy | "
                      "Δ OTHER rate | Δ truncated rate |")  # fmt: skip
    art = next(k for k, x in enumerate(lines) if x.startswith("| art (small) |"))
    assert lines[art].startswith("| art (small) | 8 | base (control) | 16 | 75.0 [")
    assert re.match(r"\|  \|  \| steered \| 16 \| 75\.0 .*\(n=8\) \| .* \| n/a \(small\) \| n/a \(small\) \| n/a \(small\) \|$",
                    lines[art + 1]), lines[art + 1]  # fmt: skip
    geo = lines[art + 3]
    assert geo.startswith("|  |  | steered | 48 | 87.5 [") and "| +35.4 [" in geo and "(n=24) |" in geo
    assert "rows whose metadata lacks the key are the group (none)" in md
    assert "| (none) (small) | 6 | base (control) | 12 |" in md
    titles = [t for t, _ in report_figures(grouped)]
    assert titles[-2:] == ["Accuracy by topic", "Δaccuracy by topic"]
    page = to_html(grouped)
    assert (
        "<h2>By topic</h2>" in page and "Δaccuracy vs control by topic (95 % CI, within each group)" in page
    )
    other = fig_group_rates(grouped, "topic", "other_rate").to_plotly_json()
    assert other["layout"]["title"]["text"].startswith("OTHER rate by topic (95 % CI")
    svg = figure_svg(fig_group_rates(grouped, "topic"))
    assert svg.count("<circle") == 12 and "art (8 items, small)" in svg and "geo (24 items)" in svg


# --- the dashboard ------------------------------------------------------------------------------------------
PAGES = {
    "overview": ("By topic", ["topic", "arm", "rows", "accuracy %"]),
    "orientations": ("Accuracy by topic", ["topic", "arm", "accuracy %", "ABCD", "BCDA"]),
    "other": ("OTHER rate by topic", ["topic", "arm", "rows", "OTHER rate %"]),
}


@pytest.fixture
def dash_db(topic_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MCQAUDIT_DASHBOARD_BOOTSTRAP", "100")
    path = tmp_path / "d.duckdb"  # each AppTest its own file: the study cache is keyed by path
    shutil.copyfile(topic_db, path)
    return path


def _shape(at: Any) -> tuple[list[str], list[list[str]], int]:
    return (
        [s.value for s in at.subheader],
        [list(d.value.columns) for d in at.dataframe],
        len(at.get("plotly_chart")),
    )


@pytest.mark.parametrize("page", list(PAGES))
def test_group_by_select_shows_the_per_group_figures(dash_db: Path, tmp_path: Path, page: str) -> None:
    from tests.ui_study import app, no_exceptions

    at = app(dash_db, page).run()
    no_exceptions(at)
    (select,) = [s for s in at.selectbox if s.label == "Group by"]
    assert select.options == ["no grouping", "difficulty", "topic"] and select.value == "no grouping"
    default = _shape(at)
    title, columns = PAGES[page]
    assert title not in default[0]
    # the default page is the page of a study without metadata (which gets no select at all) as it was
    bare = tmp_path / "bare.duckdb"
    shutil.copyfile(dash_db, bare)
    with Study(bare).write() as con:
        con.execute("UPDATE gen_rows SET metadata = NULL")
        con.execute("UPDATE items SET metadata = NULL")
    plain = app(bare, page).run()
    no_exceptions(plain)
    assert not [s for s in plain.selectbox if s.label == "Group by"] and _shape(plain) == default

    select.select("topic").run()
    no_exceptions(at)
    assert title in [s.value for s in at.subheader]
    (table,) = [d.value for d in at.dataframe if list(d.value.columns[: len(columns)]) == columns]
    assert list(table["topic"])[::2] == ["art (8 items, small)", "geo (24 items)", "hist (24 items)",
                                         "lang (24 items)", "sci (24 items)", "(none) (6 items, small)"]  # fmt: skip
    assert list(table["arm"])[:2] == ["base (control)", "steered"]
    if page == "overview":
        steered = table[table["arm"] == "steered"].set_index("topic")
        assert steered.loc["geo (24 items)", "Δaccuracy (pp)"].startswith("+35.4 [")
        assert steered.loc["geo (24 items)", "Δaccuracy (pp)"].endswith(" n=24")
        assert steered.loc["art (8 items, small)", "Δaccuracy (pp)"] == "n/a (small)"
        assert list(table["small"]) == [True] * 2 + [False] * 8 + [True] * 2
    captions = " ".join(c.value for c in at.caption)
    assert (
        "Small (under 20 items: shown with their n, no Δ, no finding): art (8 items), (none) (6 items)"
        in captions
    )
    assert _shape(at)[2] == default[2] + (2 if page == "other" else 1)  # the group figure(s)
    # the choice is the session's: another page opens grouped the same way
    other = "orientations" if page != "orientations" else "overview"
    again = app(dash_db, other, group_by="topic").run()
    no_exceptions(again)
    assert [s.value for s in again.selectbox if s.label == "Group by"] == ["topic"]
    assert PAGES[other][0] in [s.value for s in again.subheader]


def test_the_schema_doc_names_every_by_group_key(grouped: dict[str, Any]) -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "report-schema.md").read_text(encoding="utf-8")
    geo = grouped["by_group"]["topic"]["geo"]
    keys = {"by_group", "group_by", "group"} | set(geo["base"]) | set(geo["steered"])
    keys |= set(grouped["group_by"]["topic"]) | set(geo["steered"]["delta_accuracy"])
    keys |= set(next(f for f in grouped["findings"] if f["kind"] == "group")) - {
        "kind",
        "arm",
        "text",
        "value",
        "ci",
    }
    missing = sorted(k for k in keys if f"`{k}`" not in doc)
    assert not missing, f"docs/report-schema.md does not document {missing}"
