"""Row lists (:mod:`mcqaudit.store.rows`): the fast paths of a list's positions — a queue read from
``spot_check_rows`` alone, any other list by one aggregate scan over ``gen_rows`` where its filter reads no
verdict — against the straightforward computation: a window over ``graded_rows`` in the list's order."""

from __future__ import annotations

import pytest

from mcqaudit.app import reviews as rv
from mcqaudit.review import queues
from mcqaudit.review.filters import ConfusionCell, RowFilter
from mcqaudit.store import Study
from mcqaudit.store import rows as rw
from tests.builders import build_review_study


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Study:
    path = build_review_study(tmp_path_factory.mktemp("rows") / "s.duckdb", n_items=12)
    s = Study(path)
    q = rv.create_spot_check(s, size=9, seed=4, strategy=queues.STRATIFIED)
    ids = rv.queue_row_ids(s, q.queue_id)
    rv.add_review(s, ids[0], reviewer="ann", verdict="OTHER")
    rv.add_review(s, ids[3], reviewer="ann", verdict="OTHER")
    return s


def reference(study: Study, f: RowFilter) -> list[str]:
    """The list's row ids in order: graded_rows with the filter's conditions, sorted by a window."""
    sql, params = rw._from(f, view=True)
    if f.queue_id is not None:
        order = "q.position, g.row_id"
    else:
        sql = sql.replace("FROM graded_rows g ", "FROM graded_rows g LEFT JOIN arms a ON a.arm = g.arm ", 1)
        order = (
            "a.ordinal NULLS LAST, g.arm, g.item_id, length(g.orientation), g.orientation, g.sample, g.row_id"
        )
    rows = study.query(f"SELECT g.row_id, row_number() OVER (ORDER BY {order}) AS k {sql} ORDER BY k", params)
    assert "graded_rows" in sql
    return [r[0] for r in rows]


FILTERS = {
    "all": RowFilter(),
    "queue": RowFilter(queue_id=1),
    "queue+arm": RowFilter(queue_id=1, arms=("steered",)),
    "queue+unreviewed": RowFilter(queue_id=1, reviewed=False),
    "arms": RowFilter(arms=("finetuned", "base")),
    "orientation+search": RowFilter(orientations=("BCDA",), search="i0"),
    "verdicts": RowFilter(verdicts=("OTHER", "no verdict yet")),
    "reviewed": RowFilter(reviewed=True),
    "cell": RowFilter(cell=ConfusionCell("naive", "INCORRECT", "CORRECT")),
    "empty": RowFilter(search="no such text anywhere"),
}


@pytest.mark.parametrize("name", list(FILTERS))
def test_positions_and_rows_at_match_a_window_over_graded_rows(study: Study, name: str) -> None:
    f = FILTERS[name]
    want = reference(study, f)
    assert rw.count_rows(study, f) == len(want)
    assert [rw.row_at(study, f, k) for k in range(len(want) + 1)] == [*want, None]
    assert rw.row_at(study, f, -1) is None
    for k, rid in enumerate(want):
        assert rw.list_position(study, f, rid) == rw.ListPosition(
            rid, k, len(want), want[k - 1] if k else None, want[k + 1] if k + 1 < len(want) else None
        )
    outside = study.query(
        "SELECT row_id FROM gen_rows WHERE row_id NOT IN (SELECT unnest(?)) LIMIT 1", [want]
    )
    if outside:
        assert rw.list_position(study, f, outside[0][0]) is None
    assert rw.list_position(study, f, "no-such-row") is None
    if name == "all":
        assert len(want) == study.query("SELECT count(*) FROM gen_rows")[0][0] > 100
    if name == "queue":
        assert len(want) == 27 and rw._queue_only(f)  # 9 per arm


def test_queue_progress_matches_spot_check_progress(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The Review panel's queue progress (the arms of a queue's rows read once per queue, the reviewed rows from
    spot_check_rows ⋈ effective_reviews) equals the straightforward per-arm join over gen_rows, through
    reviews, retractions, a deleted queue, and another study file written at the same path."""
    import pandas as pd

    path = build_review_study(tmp_path / "s.duckdb", n_items=8)
    s = Study(path)
    uni = rv.create_spot_check(s, size=5, seed=1).queue_id
    strat = rv.create_spot_check(s, size=11, per_arm=False, seed=2, strategy=queues.STRATIFIED).queue_id
    gone = rv.create_spot_check(s, size=2, seed=3).queue_id

    def same() -> None:
        for q in (uni, strat, gone, 99):
            pd.testing.assert_frame_equal(rw.queue_progress(s, q), rv.spot_check_progress(s, queue_id=q))

    same()
    ids = rv.queue_row_ids(s, strat)
    for rid in ids[:4]:
        rv.add_review(s, rid, reviewer="ann", verdict="OTHER")
    a = rv.add_review(s, ids[4], reviewer="ann", verdict="OTHER")
    same()
    rv.retract_review(s, a, reviewer="ann")
    rv.add_review(s, ids[0], reviewer="ben", verdict="OTHER")  # a second review of a reviewed row
    same()
    assert int(rw.queue_progress(s, strat)["reviewed"].sum()) == 4
    rv.delete_spot_check(s, gone)
    same()
    assert rw.queue_progress(s, gone).empty
    # another study at the same path, its queue 1 drawn over other rows: nothing of the first one is reused
    for p in (path, path.with_name(path.name + ".wal")):
        p.unlink(missing_ok=True)
    build_review_study(path, n_items=5)
    s = Study(path)
    uni = rv.create_spot_check(s, size=3, seed=9).queue_id
    rv.add_review(s, rv.queue_row_ids(s, uni)[0], reviewer="ann", verdict="OTHER")
    strat = gone = -1
    same()
    assert int(rw.queue_progress(s, uni)["rows"].sum()) == 9


def test_review_panel_read_in_the_saves_connection_is_the_panel_read_after(study: Study) -> None:
    """The dashboard reads the next row's panel in the connection of the save (after its commit): it is the
    panel a fresh read gives once the file is closed."""
    import pandas as pd

    f = RowFilter(queue_id=1)
    first = rw.next_unreviewed(study, 1)
    assert first is not None
    nxt = rw.review_panel(study, f, first).next_unreviewed
    assert nxt is not None
    with study.connect():
        rv.add_review(study, first, reviewer="cy", verdict="OTHER", queue_id=1)
        inside = rw.review_panel(study, f, nxt)
    after = rw.review_panel(study, f, nxt)
    assert (inside.position, inside.next_unreviewed) == (after.position, after.next_unreviewed)
    assert inside.row is not None and after.row is not None
    assert {k: v for k, v in inside.row.items() if k != "history"} == {
        k: v for k, v in after.row.items() if k != "history"
    }
    pd.testing.assert_frame_equal(inside.row["history"], after.row["history"])
    pd.testing.assert_frame_equal(inside.item, after.item)
    pd.testing.assert_frame_equal(inside.progress, after.progress)
    pd.testing.assert_frame_equal(after.progress, rv.spot_check_progress(study, queue_id=1))
    rv.retract_review(study, int(study.query("SELECT max(review_id) FROM reviews")[0][0]), reviewer="cy")
