"""Row lists (:mod:`mcqaudit.store.rows`): the fast paths of a list's positions — a queue read from
``spot_check_rows`` alone, any other list by one aggregate scan over ``gen_rows`` where its filter reads no
verdict — against the straightforward computation: a window over ``graded_rows`` in the list's order."""

from __future__ import annotations

import pytest

from mcqaudit.store import Study
from mcqaudit.store import reviews as rv
from mcqaudit.store import rows as rw
from mcqaudit.store.rows import ConfusionCell, RowFilter
from tests import review_study


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Study:
    path = review_study.build(tmp_path_factory.mktemp("rows") / "s.duckdb", n_items=12)
    s = Study(path)
    q = rv.create_spot_check(s, size=9, seed=4, strategy=rv.STRATIFIED)
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
