"""Keys and clicks at a person's pace, in a real headless Chromium (issue 17, docs/design.md §8).

Each key is pressed 0.3 s after the previous one, without waiting for the page: a key that arrives while the
previous key's rerun is in flight must be applied, in order, to the same row once that rerun finished, or
refused on screen when the row changed meanwhile. The study file is read after every save. Also: `s` right
after choosing a letter in the picked-letter select saves; blind mode saves exactly the verdict and letter
chosen. Screenshots land in tests/artifacts/.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcqaudit.app import reviews as rv
from mcqaudit.store import Study
from tests.browser import ARTIFACTS, open_page, settle
from tests.builders import build_review_study as build

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PACE_S = 0.3  # between two keys: a person's pace
REVIEWER = "Kim"
KEY_OF = {"CORRECT": "1", "INCORRECT": "2", "OTHER": "3"}
NEXT = {"CORRECT": "INCORRECT", "INCORRECT": "OTHER", "OTHER": "CORRECT"}


@pytest.fixture(scope="module")
def keys_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("review-keys") / "study.duckdb", n_items=12)


@pytest.fixture(scope="module")
def browser_page(keys_db: Path) -> Iterator[tuple[Any, str]]:
    with open_page(keys_db, {"width": 1400, "height": 1000}, timeout_ms=30_000) as (page, url):
        yield page, url


def shown_row(page: Any) -> str | None:
    try:
        return page.locator('[class*="st-key-mq-row-line"] code').first.inner_text(timeout=2000)
    except Exception:
        return None


def row_on_screen(page: Any, timeout_s: float = 30) -> str | None:
    """The row on screen once the panel is drawn: a rerun may redraw it (its marker gone for a moment) even
    after the row changed, e.g. on a busy machine; keys typed meanwhile are queued on the last row shown."""
    deadline = time.monotonic() + timeout_s
    while (rid := shown_row(page)) is None and time.monotonic() < deadline:
        page.wait_for_timeout(25)
    return rid


def loaded(page: Any) -> None:
    """Until the page's run has finished and the review panel is drawn (a fresh page streams in)."""
    page.get_by_role("heading", name="Review").wait_for()
    page.locator('[data-testid="stApp"][data-test-script-state="notRunning"]').wait_for()
    page.locator('[class*="st-key-mq-row-line"] code').first.wait_for()
    page.locator('[class*="st-key-override-"] button').first.wait_for()
    settle(page)


def open_row(page: Any, url: str, query: str) -> str:
    page.goto(f"{url}/review?{query}")
    loaded(page)
    rid = shown_row(page)
    assert rid
    return rid


def reviews(db: Path) -> list[tuple[Any, ...]]:
    return Study(db).query(
        "SELECT row_id, action, verdict, picked_letter, reviewer FROM reviews ORDER BY review_id"
    )


def wait_reviews(db: Path, n: int, page: Any, timeout_s: float = 30) -> list[tuple[Any, ...]]:
    """The study's reviews once it holds ``n`` (read from the file, not the page)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = reviews(db)
        if len(got) >= n:
            return got
        page.wait_for_timeout(50)
    log = page.evaluate("window.__mcqauditKeyLog || []")
    raise AssertionError(f"the study holds {len(reviews(db))} reviews, not {n}; key log: {log[-8:]}")


def wait_queue_empty(page: Any, timeout_s: float = 30) -> None:
    """Until every key pressed so far has been applied or refused (the key log's last entry is no 'queued')."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        log = page.evaluate("window.__mcqauditKeyLog || []")
        queued = sum(x.split(": ", 1)[1].startswith("queued") for x in log)
        done = sum(not x.split(": ", 1)[1].startswith("queued") for x in log)
        if queued == done:
            return
        page.wait_for_timeout(50)
    raise AssertionError(f"keys still queued: {page.evaluate('window.__mcqauditKeyLog')}")


def clear_log(page: Any) -> None:
    page.evaluate("window.__mcqauditKeyLog = []")


def type_keys(page: Any, keys: str) -> None:
    """Each key ``PACE_S`` after the previous, whatever the page is doing (the focus outside text fields)."""
    page.evaluate("document.activeElement && document.activeElement.blur()")
    for k, key in enumerate(keys):
        if k:
            time.sleep(PACE_S)
        page.keyboard.press(key)


def final(db: Path, rid: str) -> tuple[str | None, str | None]:
    return Study(db).query("SELECT final_verdict, picked_letter FROM graded_rows WHERE row_id = ?", [rid])[0]


def test_a_verdict_key_then_s_at_a_persons_pace(browser_page: tuple[Any, str], keys_db: Path) -> None:
    """`2` then `s` 0.3 s later (and `1`, `3`, and a change of mind `2` `3` `s`): the override lands on the
    row the keys were typed on, with the verdict of the last verdict key."""
    page, url = browser_page
    q = rv.create_spot_check(Study(keys_db), size=8, per_arm=False, seed=11, name="keys")
    rows = rv.queue_row_ids(Study(keys_db), q.queue_id)
    rid = open_row(page, url, f"queue={q.queue_id}&reviewer={REVIEWER}")
    assert rid == rows[0]
    n = len(reviews(keys_db))
    for k, pattern in enumerate(["v s", "v s", "v s", "2 3 s"]):
        clear_log(page)
        current, _ = final(keys_db, rid)
        verdict = NEXT[current or "OTHER"]
        keys = pattern.replace("v", KEY_OF[verdict]).replace(" ", "")
        if pattern == "2 3 s":
            verdict = "OTHER"
        type_keys(page, keys)
        got = wait_reviews(keys_db, n + 1, page)
        assert got[-1][:3] == (rid, "override" if verdict != current else "confirm", verdict), got[-1]
        assert got[-1][4] == REVIEWER and final(keys_db, rid)[0] == verdict
        n += 1
        wait_queue_empty(page)
        log = page.evaluate("window.__mcqauditKeyLog")
        assert [x for x in log if "refused" in x] == [], log  # nothing refused: every key landed
        # the queue moved on to its next unreviewed row
        settle(page)
        nxt = shown_row(page)
        assert nxt != rid and nxt in rows, (nxt, rid)
        if k == 0:
            page.screenshot(path=str(ARTIFACTS / "review-keys-after-pair.png"))
        rid = nxt
    assert len(reviews(keys_db)) == n


def test_a_key_whose_row_changed_is_refused_on_screen(browser_page: tuple[Any, str], keys_db: Path) -> None:
    """`c` then `j` 0.3 s later: `c` confirms and moves on; `j` was typed on the confirmed row, which is no
    longer on screen, so it is refused, visibly, never applied to the next row. `j` then `c`: the same."""
    page, url = browser_page
    s = Study(keys_db)
    q = rv.create_spot_check(s, size=6, per_arm=False, seed=12, name="refusals")
    rows = rv.queue_row_ids(s, q.queue_id)
    rid = open_row(page, url, f"queue={q.queue_id}&reviewer={REVIEWER}")
    n = len(reviews(keys_db))
    clear_log(page)
    type_keys(page, "cj")
    got = wait_reviews(keys_db, n + 1, page)
    assert got[-1][:2] == (rid, "confirm")
    wait_queue_empty(page)
    log = page.evaluate("window.__mcqauditKeyLog")
    refused = [x for x in log if x.startswith("j: refused")]
    moved = shown_row(page)
    if refused:  # the usual case: `j` came while `c`'s rerun was in flight
        assert "the row changed" in refused[0]
        notice = page.get_by_test_id("mq-key-refused")
        assert "Key j not applied: the row changed" in notice.inner_text()
        page.screenshot(path=str(ARTIFACTS / "review-key-refused.png"))
        settle(page)
        assert shown_row(page) == rows[1], "a refused j moved the page"
    else:  # `c`'s rerun had finished within 0.3 s: `j` was typed on the next row and moves on from it
        assert any(x.startswith("j: pressed " + rows[1]) for x in log), log
        deadline = time.monotonic() + 30  # j's own rerun may still be on its way: wait for it, as a person would
        while moved == rows[1] and time.monotonic() < deadline:
            time.sleep(0.2)
            moved = shown_row(page)
        assert moved != rows[1]
    assert len(reviews(keys_db)) == n + 1  # only the confirmation: nothing applied twice or elsewhere


def test_s_right_after_choosing_a_letter_saves(browser_page: tuple[Any, str], keys_db: Path) -> None:
    """Choose INCORRECT, pick a wrong letter in the select (its list closes, the focus stays in it), then `s`
    at once: the override is saved with that letter, not typed into the select."""
    page, url = browser_page
    s = Study(keys_db)
    rid, gold = s.query(
        """SELECT row_id, gold_letter FROM graded_rows WHERE final_verdict = 'CORRECT'
           AND row_id NOT IN (SELECT row_id FROM reviews) ORDER BY row_id LIMIT 1"""
    )[0]
    wrong = next(x for x in "ABCD" if x != gold)
    open_row(page, url, f"row={rid}&reviewer={REVIEWER}")
    n = len(reviews(keys_db))
    clear_log(page)
    type_keys(page, "2")
    page.locator('[class*="st-key-letter-"]').get_by_role("combobox").click()
    page.get_by_role("option", name=wrong, exact=True).click()
    page.keyboard.press("s")
    got = wait_reviews(keys_db, n + 1, page)
    assert got[-1][:4] == (rid, "override", "INCORRECT", wrong)
    assert final(keys_db, rid) == ("INCORRECT", wrong)


def test_s_with_the_letter_list_still_open_saves_and_a_note_takes_its_keys(
    browser_page: tuple[Any, str], keys_db: Path
) -> None:
    """On a busy machine the letter list can still be open when `s` comes: with a letter chosen and the list
    open again, `s` saves that letter (it is no option's name, so it never types a search). Then, on the next
    row, `2` and `s` typed into the note field are text: nothing is saved and the key log says so."""
    page, url = browser_page
    s = Study(keys_db)
    rows = s.query(
        """SELECT row_id, gold_letter FROM graded_rows WHERE final_verdict = 'CORRECT'
           AND row_id NOT IN (SELECT row_id FROM reviews) ORDER BY row_id LIMIT 2"""
    )
    (rid, gold), (rid2, _) = rows
    wrong = next(x for x in "ABCD" if x != gold)
    open_row(page, url, f"row={rid}&reviewer={REVIEWER}")
    n = len(reviews(keys_db))
    page.get_by_role("radiogroup", name="Verdict").get_by_text("INCORRECT", exact=True).click()
    settle(page)
    box = page.locator('[class*="st-key-letter-"]').get_by_role("combobox")
    box.click()
    page.get_by_role("option", name=wrong, exact=True).click()
    settle(page)
    box.click()
    page.get_by_role("option", name=gold, exact=True).wait_for()
    assert box.get_attribute("aria-expanded") == "true"
    page.screenshot(path=str(ARTIFACTS / "review-letter-list-open.png"))
    clear_log(page)
    page.keyboard.press("s")
    got = wait_reviews(keys_db, n + 1, page)
    assert got[-1][:4] == (rid, "override", "INCORRECT", wrong)
    assert final(keys_db, rid) == ("INCORRECT", wrong)

    open_row(page, url, f"row={rid2}&reviewer={REVIEWER}")
    clear_log(page)
    note = page.get_by_role("textbox", name="Note (optional)")
    note.click()
    page.keyboard.type("2s")
    assert note.input_value() == "2s"
    page.wait_for_timeout(1500)
    assert len(reviews(keys_db)) == n + 1
    log = page.evaluate("window.__mcqauditKeyLog || []")
    assert log == [
        "2: typed into the field in focus (input note-" + rid2 + "), not applied",
        "s: typed into the field in focus (input note-" + rid2 + "), not applied",
    ], log


def test_blind_override_saves_the_verdict_and_letter_chosen(
    browser_page: tuple[Any, str], keys_db: Path
) -> None:
    """Blind mode, on a row the judge read as INCORRECT with letter B: INCORRECT and letter C, Save override ->
    an override of INCORRECT with C (it used to be stored as a confirmation with B)."""
    page, url = browser_page
    s = Study(keys_db)
    rid, picked = s.query(
        """SELECT row_id, picked_letter FROM graded_rows WHERE final_verdict = 'INCORRECT'
           AND picked_letter IS NOT NULL AND row_id NOT IN (SELECT row_id FROM reviews) ORDER BY row_id LIMIT 1"""
    )[0]
    gold = s.query("SELECT gold_letter FROM graded_rows WHERE row_id = ?", [rid])[0][0]
    other = next(x for x in "ABCD" if x not in (gold, picked))
    open_row(page, url, f"row={rid}&reviewer={REVIEWER}&blind=1")
    page.get_by_text(re.compile("^Blind mode: the judge's verdict")).wait_for()
    n = len(reviews(keys_db))
    page.get_by_role("radiogroup", name="Verdict").get_by_text("INCORRECT", exact=True).click()
    settle(page)
    page.locator('[class*="st-key-letter-"]').get_by_role("combobox").click()
    page.get_by_role("option", name=other, exact=True).click()
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "review-blind-letter.png"))
    page.get_by_role("button", name="Save override").click()
    got = wait_reviews(keys_db, n + 1, page)
    assert got[-1][:4] == (rid, "override", "INCORRECT", other)
    assert final(keys_db, rid) == ("INCORRECT", other)


def test_a_whole_queue_at_a_persons_pace(browser_page: tuple[Any, str], keys_db: Path) -> None:
    """A queue of 10 rows from its first row to its last, each row a verdict key then `s` 0.3 s apart (every
    third a `c`), the next row's key 0.3 s after that row is on screen, with a reload in the middle; the study
    file is read after every save and must end with exactly one review per row, as typed."""
    page, url = browser_page
    s = Study(keys_db)
    q = rv.create_spot_check(s, size=10, per_arm=False, seed=13, name="whole queue")
    rows = rv.queue_row_ids(s, q.queue_id)
    already = {r[0] for r in reviews(keys_db)}
    todo = [r for r in rows if r not in already]
    assert open_row(page, url, f"queue={q.queue_id}&reviewer={REVIEWER}") == todo[0]
    n = len(reviews(keys_db))
    expected = []
    for k, row in enumerate(todo):
        if k == len(todo) // 2:
            page.reload()
            loaded(page)
        assert (now := row_on_screen(page)) == row, (k, now, row)
        current, _ = final(keys_db, row)
        if k % 3 == 2 and current is not None:
            keys, want = "c", ("confirm", current)
        else:
            verdict = NEXT[current or "OTHER"]
            keys, want = KEY_OF[verdict] + "s", ("override", verdict)
        clear_log(page)
        type_keys(page, keys)
        got = wait_reviews(keys_db, n + 1, page)
        assert got[-1][:3] == (row, *want), (k, got[-1], want)
        n += 1
        expected.append((row, *want))
        wait_queue_empty(page)
        assert not [x for x in page.evaluate("window.__mcqauditKeyLog") if "refused" in x]
        if k + 1 < len(todo):
            deadline = time.monotonic() + 30
            while shown_row(page) in (row, None) and time.monotonic() < deadline:
                page.wait_for_timeout(25)
            time.sleep(PACE_S)
    page.get_by_text("Every row of this queue is reviewed.").wait_for()
    settle(page)
    page.screenshot(path=str(ARTIFACTS / "review-keys-queue-done.png"))
    mine = [r[:3] for r in reviews(keys_db) if r[0] in set(todo)]
    assert mine == expected and len({r[0] for r in mine}) == len(todo)
