"""Review: the work surface. Filtered row list or a spot-check queue, one row in detail, confirm / override /
retract under the session's reviewer name, blind mode.

The generation, the judge's reply and rationale are untrusted text: they are shown with ``st.code`` (plain
text, never Markdown or HTML); question and options are Markdown-escaped.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import pandas as pd
import streamlit as st

from mcqaudit.store.reviews import CONFIRM, OVERRIDE, STRATEGIES, ReviewError
from mcqaudit.store.rows import UNGRADED, VERDICT_FILTER_VALUES, ConfusionCell, RowFilter
from mcqaudit.ui import components, data, state, tables
from mcqaudit.vocab import LETTERS, VERDICTS

PAGE_SIZE = 25
NO_LETTER = "(none)"
_BLIND_HIDDEN = ("final_verdict", "verdict_source", "judge_status", "picked_letter")


# --- state helpers -------------------------------------------------------------------------------------------
def send_to_review(
    *,
    arms: Sequence[str] = (),
    orientations: Sequence[str] = (),
    verdicts: Sequence[str] = (),
    cell: ConfusionCell | None = None,
) -> None:
    """Open the Review page on these rows (every other filter cleared)."""
    for key, value in (
        (state.F_ARMS, list(arms)),
        (state.F_ORIENTATIONS, list(orientations)),
        (state.F_VERDICTS, list(verdicts)),
        (state.F_STATUSES, []),
        (state.F_DISAGREE, None),
        (state.F_REVIEWED, state.REVIEWED_CHOICES[0]),
        (state.F_SEARCH, ""),
        (state.F_CELL, asdict(cell) if cell else None),
        (state.QUEUE, None),
        (state.POS, 0),
    ):
        state.set_value(key, value)
    components.switch_to("Review")


def current_filter(blind: bool) -> RowFilter:
    s = st.session_state
    q = s.get(state.QUEUE)
    if q is not None:
        return RowFilter(queue_id=int(q))
    reviewed = {state.REVIEWED_CHOICES[1]: False, state.REVIEWED_CHOICES[2]: True}.get(
        s.get(state.F_REVIEWED, "")
    )
    cell = s.get(state.F_CELL)
    return RowFilter(
        arms=tuple(s.get(state.F_ARMS) or ()),
        orientations=tuple(s.get(state.F_ORIENTATIONS) or ()),
        verdicts=() if blind else tuple(s.get(state.F_VERDICTS) or ()),
        judge_statuses=() if blind else tuple(s.get(state.F_STATUSES) or ()),
        disagree_parser=None if blind else s.get(state.F_DISAGREE),
        reviewed=reviewed,
        search=s.get(state.F_SEARCH) or "",
        cell=None if blind or not cell else ConfusionCell(**cell),
    )


def _filter_changed(key: str) -> None:
    state.sync(key)
    st.session_state[state.POS] = 0


def _move(delta: int, total: int) -> None:
    st.session_state[state.POS] = max(0, min(total - 1, int(st.session_state[state.POS]) + delta))


def _goto() -> None:
    st.session_state[state.POS] = int(st.session_state[state.GOTO]) - 1


def _clear_cell() -> None:
    st.session_state[state.F_CELL] = None
    st.session_state[state.POS] = 0


def _choose_queue() -> None:
    state.sync(state.QUEUE)
    st.session_state[state.POS] = 0


# --- pieces ----------------------------------------------------------------------------------------------------
def render_queues(path: str, choices: Mapping[str, list[str]], queues: pd.DataFrame, reviewer: str) -> None:
    active = st.session_state.get(state.QUEUE)
    with st.expander(
        "Spot-check queues" + (f" — working through #{active}" if active is not None else ""),
        expanded=active is not None,
    ):
        ids: list[int | None] = [None, *[int(x) for x in queues["queue_id"]]]
        labels = {
            int(r.queue_id): f"#{r.queue_id} {r.name} ({r.reviewed}/{r.rows} reviewed)"
            for r in queues.itertuples()
        }
        if active not in ids:
            state.set_value(state.QUEUE, None)
        st.selectbox(
            "Work through",
            ids,
            format_func=lambda q: "(no queue: the filtered rows)" if q is None else labels[q],
            key=state.bind(state.QUEUE),
            on_change=_choose_queue,
        )
        if len(queues):
            view = queues[
                [
                    "queue_id",
                    "name",
                    "strategy",
                    "seed",
                    "size",
                    "rows",
                    "reviewed",
                    "created_by",
                    "created_at",
                ]
            ].copy()
            view["progress %"] = (100 * view["reviewed"] / view["rows"].where(view["rows"] > 0)).round(1)
            view = view.rename(columns={"size": "size per arm"})
            st.dataframe(view, hide_index=True, key="queues")
        with st.form("new_queue", clear_on_submit=False):
            st.markdown("**Draw a new spot check** (seeded; the sample is stored with its seed)")
            c1, c2, c3 = st.columns(3)
            size = c1.number_input("Rows per arm", min_value=1, value=50, step=10, key="q_size")
            seed = c2.number_input("Seed", min_value=0, value=0, step=1, key="q_seed")
            strategy = c3.radio(
                "Strategy",
                STRATEGIES,
                key="q_strategy",
                horizontal=True,
                help="uniform: every row equally likely (unbiased judge-agreement figures). stratified: a third "
                "each from parser disagreements, OTHER/ungraded rows and the rest (hunting artifacts).",
            )
            arms = st.multiselect("Arms", choices["arms"], default=choices["arms"], key="q_arms")
            name = st.text_input("Name (optional)", key="q_name")
            if st.form_submit_button("Draw sample"):
                try:
                    sc = data.create_spot_check(
                        path,
                        size=int(size),
                        seed=int(seed),
                        strategy=str(strategy),
                        arms=arms,
                        name=name,
                        created_by=reviewer or None,
                    )
                except ReviewError as exc:
                    st.error(str(exc))
                else:
                    state.set_value(state.QUEUE, sc.queue_id)
                    st.session_state[state.POS] = 0
                    state.flash(
                        "success",
                        f"Spot check #{sc.queue_id} drawn: {sc.rows} rows ({sc.strategy}, seed {sc.seed}).",
                    )
                    st.rerun()
        if active is not None:
            row = queues[queues["queue_id"] == active]
            if len(row):
                r = row.iloc[0]
                n, done = int(r["rows"]), int(r["reviewed"])
                st.progress(done / n if n else 0.0, text=f"{done} of {n} rows reviewed")


def render_filters(choices: Mapping[str, list[str]], blind: bool) -> None:
    c = st.columns([2, 2, 2, 2])
    c[0].multiselect(
        "Arm", choices["arms"], key=state.bind(state.F_ARMS), on_change=_filter_changed, args=(state.F_ARMS,)
    )
    c[1].multiselect(
        "Orientation",
        choices["orientations"],
        key=state.bind(state.F_ORIENTATIONS),
        on_change=_filter_changed,
        args=(state.F_ORIENTATIONS,),
    )
    c[2].multiselect(
        "Final verdict",
        list(VERDICT_FILTER_VALUES),
        key=state.bind(state.F_VERDICTS),
        on_change=_filter_changed,
        args=(state.F_VERDICTS,),
        disabled=blind,
        help=f"{UNGRADED}: no verdict yet (judge pending or error)",
    )
    c[3].multiselect(
        "Judge status",
        choices["judge_statuses"],
        key=state.bind(state.F_STATUSES),
        on_change=_filter_changed,
        args=(state.F_STATUSES,),
        disabled=blind,
    )
    c = st.columns([2, 2, 4])
    c[0].selectbox(
        "Parser disagrees with judge",
        [None, *choices["parsers"]],
        format_func=lambda p: "(any row)" if p is None else p,
        key=state.bind(state.F_DISAGREE),
        on_change=_filter_changed,
        args=(state.F_DISAGREE,),
        disabled=blind,
        help="Rows where this parser's letter gives a different verdict than the row's verdict (the judge's, "
        "or the reviewer's once reviewed).",
    )
    c[1].radio(
        "Reviewed",
        state.REVIEWED_CHOICES,
        key=state.bind(state.F_REVIEWED),
        on_change=_filter_changed,
        args=(state.F_REVIEWED,),
        horizontal=True,
    )
    c[2].text_input(
        "Search",
        key=state.bind(state.F_SEARCH),
        on_change=_filter_changed,
        args=(state.F_SEARCH,),
        placeholder="text in question or generation, item id, or a row id",
    )
    cell = st.session_state.get(state.F_CELL)
    if cell and not blind:
        c1, c2 = st.columns([6, 1])
        c1.info(
            f"Confusion cell from Parsers vs judge: rows with verdict {cell['verdict']} where the "
            f"{tables.md_escape(cell['parser'])} parser says {cell['parser_verdict']}"
        )
        c2.button("Clear cell", key="clear_cell", on_click=_clear_cell)


def render_list(df: pd.DataFrame, total: int, pos: int, page_start: int, blind: bool, list_id: str) -> None:
    st.markdown(
        f"**{total}** rows · showing {page_start + 1}–{page_start + len(df)}"
        if total
        else "**0** rows match."
    )
    if not total:
        return
    view = df.drop(columns=[c for c in ("queue_position",) if c in df.columns])
    if blind:
        view = view.drop(columns=[c for c in _BLIND_HIDDEN if c in view.columns])
    view.insert(0, "#", range(page_start + 1, page_start + len(df) + 1))
    event = st.dataframe(
        view,
        hide_index=True,
        on_select="rerun",
        selection_mode="single-row",
        key=f"rowlist-{list_id}-{page_start}",  # a new list (filter, page) starts with no selection
        height=min(38 + 35 * len(view), 360),
    )
    sel = list(getattr(getattr(event, "selection", None), "rows", []) or [])
    if sel:
        mark = (list_id, page_start, sel[0])
        if st.session_state.get(state.LIST_SELECTION) != mark:
            st.session_state[state.LIST_SELECTION] = mark
            new = page_start + int(sel[0])
            if new != pos:
                st.session_state[state.POS] = new
                st.rerun()


def _decided(row: Mapping[str, Any], reviewer: str) -> bool:
    hist = row["history"]
    if not reviewer or hist is None or not len(hist):
        return False
    mine = hist[
        (hist["reviewer"] == reviewer) & (hist["action"] != "retract") & (hist["status"] != "retracted")
    ]
    return bool(len(mine))


def render_row(row: Mapping[str, Any], *, blind: bool, reviewer: str) -> None:
    """The question (options in this row's order, gold marked), the generation as plain text, and — unless
    blind mode hides them — verdicts, judge and parsers."""
    left, right = st.columns([3, 2], gap="large")
    with left:
        st.markdown(
            f"**Row** `{row['row_id']}` · arm **{tables.md_escape(row['arm'])}** · item "
            f"**{tables.md_escape(row['item_id'])}** · orientation **{row['orientation']}** · sample {row['sample']}"
        )
        st.markdown("**Question**")
        st.markdown(tables.md_escape(row["question"]))
        lines = []
        for k, opt in enumerate(row["options"]):
            letter = LETTERS[k]
            mark = "  :material/check_circle: **gold**" if letter == row["gold_letter"] else ""
            lines.append(f"**{letter}.** {tables.md_escape(opt)}{mark}")
        st.markdown("  \n".join(lines))
        st.markdown("**Generation** (verbatim)")
        components.plain_text(row["generation"], empty="(empty generation: OTHER by rule)")
    with right:
        hidden = blind and not _decided(row, reviewer)
        if hidden:
            st.info(
                "Blind mode: the judge's verdict, the parsers' letters and earlier reviews are hidden until you decide."
            )
            return
        final = row["final_verdict"]
        c1, c2 = st.columns(2)
        c1.metric(
            "final verdict", final or UNGRADED, help="latest review, else judge, else pre-filter, else rule"
        )
        c2.metric("source", row["verdict_source"] or "none")
        if row.get("picked_letter"):
            st.caption(
                f"Picked letter: {row['picked_letter']} ({tables.md_escape(row.get('picked_option') or '')})"
            )
        st.markdown("**Judge**")
        j = row.get("judge")
        st.markdown(
            f"status **{row['judge_status']}** · verdict **{row['judge_verdict'] or '—'}** · letter "
            f"**{row['judge_letter'] or '—'}**"
        )
        if j:
            st.caption(
                f"{tables.md_escape(j['model'])} · {j['shape']} shape · temperature {j['temperature']:g} · "
                f"fingerprint {row['judge_fingerprint']}"
            )
            if j.get("standin"):
                st.warning("Stand-in judge: a heuristic, not an LLM.", icon=":material/warning:")
            if j.get("error"):
                st.caption("Error:")
                components.plain_text(j["error"])
        if row.get("judge_reply") is not None:
            st.caption("Reply (raw):")
            components.plain_text(row["judge_reply"])
        if row.get("judge_rationale"):
            st.caption("Rationale:")
            components.plain_text(row["judge_rationale"])
        st.markdown("**Parsers**")
        gold = row["gold_letter"]
        prows = [
            {
                "parser": p,
                "letter": letter or "—",
                "verdict it implies": "OTHER"
                if letter is None
                else ("CORRECT" if letter == gold else "INCORRECT"),
            }
            for p, letter in row["parser_letters"].items()
        ]
        st.dataframe(pd.DataFrame(prows), hide_index=True, key="parser_letters")


def _save(
    path: str,
    row: Mapping[str, Any],
    *,
    action: str,
    verdict: str | None,
    letter: str | None,
    note: str,
    reviewer: str,
) -> None:
    queue = st.session_state.get(state.QUEUE)
    try:
        rid = data.add_review(
            path,
            row["row_id"],
            reviewer=reviewer,
            action=action,
            verdict=verdict,
            picked_letter=None if letter in (None, NO_LETTER) else letter,
            note=note,
            queue_id=queue,
        )
    except ReviewError as exc:
        state.flash("error", f"Not saved: {exc}")
    else:
        prior = row["final_verdict"] or UNGRADED
        state.flash(
            "success",
            f"Saved review #{rid} of {row['row_id']}: {action} {verdict or prior} (was {prior}"
            + (f" from {row['verdict_source']}" if row["verdict_source"] else "")
            + ").",
        )
        if queue is not None:
            _move(1, int(st.session_state.get(state.LIST_TOTAL) or 1))
    st.rerun()


def render_review_form(path: str, row: Mapping[str, Any], *, blind: bool, reviewer: str) -> None:
    st.markdown("#### Your verdict")
    rid = row["row_id"]
    if not reviewer:
        st.warning("Enter your name as Reviewer in the sidebar to record reviews.")
    final = row["final_verdict"]
    hidden = blind and not _decided(row, reviewer)
    letters = [NO_LETTER, *LETTERS[: len(row["options"])]]
    if not hidden and st.button(
        f"Confirm {final}" if final else "Confirm (no verdict to confirm)",
        key=f"confirm-{rid}",
        disabled=not reviewer or final is None,
        type="primary",
    ):
        _save(
            path,
            row,
            action=CONFIRM,
            verdict=None,
            letter=None,
            note=st.session_state.get(f"note-{rid}", ""),
            reviewer=reviewer,
        )
    c1, c2 = st.columns([3, 2])
    verdict = c1.radio("Verdict", VERDICTS, key=f"verdict-{rid}", horizontal=True, index=None)
    letter = c2.selectbox(
        "Picked letter (optional)",
        letters,
        key=f"letter-{rid}",
        help="The option the generation picks: filled in with the gold for CORRECT; none for OTHER.",
    )
    note = st.text_input("Note (optional)", key=f"note-{rid}")
    label = "Save decision" if hidden else "Save override"
    if st.button(label, key=f"override-{rid}", disabled=not reviewer or verdict is None):
        # blind mode: a decision that matches the current verdict is recorded as a confirmation
        action = CONFIRM if hidden and verdict == final else OVERRIDE
        _save(path, row, action=action, verdict=verdict, letter=letter, note=note, reviewer=reviewer)


def render_history(path: str, row: Mapping[str, Any], *, blind: bool, reviewer: str) -> None:
    hist = row["history"]
    if blind and not _decided(row, reviewer):
        return
    st.markdown("#### Review history")
    if hist is None or not len(hist):
        st.caption("No review yet.")
        return
    st.dataframe(
        hist[
            [
                "review_id",
                "action",
                "verdict",
                "picked_letter",
                "reviewer",
                "created_at",
                "prior_verdict",
                "prior_source",
                "status",
                "note",
                "fingerprint",
                "origin",
            ]
        ],
        hide_index=True,
        key="history",
    )
    open_ = [int(r) for r in hist.loc[hist["status"].isin(["effective", "superseded"]), "review_id"]]
    if open_:
        c1, c2 = st.columns([2, 1])
        target = c1.selectbox(
            "Retract review", open_, format_func=lambda r: f"#{r}", key=f"retract-id-{row['row_id']}"
        )
        if c2.button("Retract", key=f"retract-{row['row_id']}", disabled=not reviewer):
            try:
                new = data.retract_review(path, int(target), reviewer=reviewer)
            except ReviewError as exc:
                state.flash("error", f"Not retracted: {exc}")
            else:
                state.flash("success", f"Review #{target} retracted (#{new}).")
            st.rerun()


def render_review(path: str) -> None:
    st.title("Review")
    v = data.study_version(path)
    choices = data.choices(path, v)
    queues = data.queues(path, v)
    reviewer = (st.session_state.get(state.REVIEWER) or "").strip()
    blind = bool(st.session_state.get(state.BLIND))
    components.provenance(None, data.meta(path, v))
    components.flash()
    render_queues(path, choices, queues, reviewer)
    if st.session_state.get(state.QUEUE) is None:
        render_filters(choices, blind)
    f = current_filter(blind)
    key = data.filter_json(f)
    total = data.row_count(path, v, key)
    st.session_state[state.LIST_TOTAL] = total
    pos = max(0, min(int(st.session_state.get(state.POS) or 0), max(total - 1, 0)))
    st.session_state[state.POS] = pos
    page_start = (pos // PAGE_SIZE) * PAGE_SIZE
    df = data.row_page(path, v, key, PAGE_SIZE, page_start) if total else pd.DataFrame()
    render_list(df, total, pos, page_start, blind, hashlib.sha1(key.encode()).hexdigest()[:10])
    if not total:
        return
    st.divider()
    c = st.columns([1, 1, 2, 4])
    c[0].button("◀ Previous", key="prev", on_click=_move, args=(-1, total), disabled=pos == 0)
    c[1].button("Next ▶", key="next", on_click=_move, args=(1, total), disabled=pos >= total - 1)
    st.session_state[state.GOTO] = pos + 1
    c[2].number_input(
        "Row",
        min_value=1,
        max_value=total,
        step=1,
        key=state.GOTO,
        on_change=_goto,
        label_visibility="collapsed",
    )
    c[3].markdown(f"Row **{pos + 1}** of **{total}**")
    row_id = str(df.iloc[pos - page_start]["row_id"])
    row = data.row_detail(path, v, row_id)
    if row is None:
        st.error(f"Row {row_id} is no longer in the study.")
        return
    render_row(row, blind=blind, reviewer=reviewer)
    render_review_form(path, row, blind=blind, reviewer=reviewer)
    render_history(path, row, blind=blind, reviewer=reviewer)


def page() -> None:
    render_review(st.session_state[state.DB_PATH])
