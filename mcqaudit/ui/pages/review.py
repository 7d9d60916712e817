"""Review: the work surface. A spot-check queue or a filtered row list, one row in detail, confirm / override /
retract under the session's reviewer name, blind mode, keyboard shortcuts, and a URL that always names the
row on screen (docs/design.md §8 review automation contract).

How the page keeps a reviewer's place:

- The shown row is a row_id in session state (:data:`state.ROW`), never a position: a save, a new review by
  someone else or a filter change cannot move the reviewer to another row behind their back.
- Every save names the row it was made for (the button's own argument), so a click can only land on the
  row whose button was clicked.
- The queue selector's option labels are fixed (no live counts): Streamlit sends a selectbox's value as its
  label, so a label that changed on every save reset the selection (and the queue) after each review.
- The row panel is an ``st.fragment``: a save or a move reruns only the panel, not the page.

The generation (its answer first, its reasoning collapsed under it), the judge's reply and rationale are
untrusted text: they are shown with ``st.code`` or as HTML-escaped text with our own ``<mark>`` (never
Markdown or HTML from the data); question and options are Markdown-escaped.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any
from urllib.parse import urlencode, urlsplit

import pandas as pd
import streamlit as st

from mcqaudit.app.reviews import StudyError
from mcqaudit.parsers import letter_spans
from mcqaudit.reasoning import FINISH_LENGTH
from mcqaudit.review.filters import NO_VERDICT, VERDICT_FILTER_VALUES, Cell, RowFilter, cell_of
from mcqaudit.review.queues import STRATEGIES
from mcqaudit.review.rules import CONFIRM, OVERRIDE, ReviewError
from mcqaudit.ui import agreement, components, data, review_keys, state, tables
from mcqaudit.vocab import LETTERS, PARSER_STRICT, PARSER_USER, VERDICTS, is_blank, verdict_of

UNGRADED = (
    "ungraded"  # shown where a row has no verdict yet (judge pending or failed): never a fourth verdict
)
PAGE_SIZE = 25
NO_LETTER = "(none)"
LONG_QUESTION = 400  # characters: a longer question (a passage) is collapsed so the answer stays on screen
_BLIND_HIDDEN = ("final_verdict", "verdict_source", "judge_status", "picked_letter")
DEFAULT_URL = "http://127.0.0.1:8501"
TRUNCATED_BADGE = ":orange-badge[:material/content_cut: truncated]"  # a row the model did not finish


# --- state helpers -------------------------------------------------------------------------------------------
def send_to_review(
    *,
    arms: Sequence[str] = (),
    orientations: Sequence[str] = (),
    verdicts: Sequence[str] = (),
    cell: Cell | None = None,
) -> None:
    """Open the Review page on these rows (every other filter cleared)."""
    for key, value in (
        (state.F_ARMS, list(arms)),
        (state.F_ORIENTATIONS, list(orientations)),
        (state.F_VERDICTS, list(verdicts)),
        (state.F_STATUSES, []),
        (state.F_DISAGREE, None),
        (state.F_REVIEWED, state.REVIEWED_CHOICES[0]),
        (state.F_REVIEWERS, None),
        (state.F_SEARCH, ""),
        (state.F_CELL, asdict(cell) if cell else None),
        (state.QUEUE, None),
        (state.ROW, None),
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
        reviewers=s.get(state.F_REVIEWERS),
        search=s.get(state.F_SEARCH) or "",
        cell=None if blind or not cell else cell_of(cell),
    )


def _filter_changed(key: str) -> None:
    state.sync(key)
    st.session_state[state.ROW] = None  # a new list starts at its first row


def _clear_cell() -> None:
    st.session_state[state.F_CELL] = None
    st.session_state[state.ROW] = None


NO_QUEUE = 0  # the selector's "no queue" option (queue ids start at 1; None would show as a placeholder)


def _choose_queue() -> None:
    chosen = st.session_state.get(state.widget_key(state.QUEUE))
    st.session_state[state.QUEUE] = None if chosen in (None, NO_QUEUE) else int(chosen)
    st.session_state[state.ROW] = None  # a queue opens at its first unreviewed row


def _go(row_id: str | None) -> None:
    if row_id is not None:
        st.session_state[state.ROW] = row_id


def _goto(path: str, key: str) -> None:
    """The "row number" input: open the row at that position of the list."""
    n = st.session_state.get(f"goto-{key}")
    if n:
        _go(data.row_at(path, data.study_version(path), key, int(n) - 1))


def permalink(row_id: str, queue: int | None) -> str:
    """A link that opens this row (in this queue) for anyone who can reach this dashboard."""
    try:
        url = st.context.url or ""
    except Exception:  # outside a server (AppTest)
        url = ""
    parts = urlsplit(url) if url else urlsplit(DEFAULT_URL)
    base = f"{parts.scheme or 'http'}://{parts.netloc or urlsplit(DEFAULT_URL).netloc}"
    params: dict[str, str] = {state.Q_ROW: row_id}
    if queue is not None:
        params[state.Q_QUEUE] = str(queue)
    return f"{base}/review?{urlencode(params)}"


# --- queues ----------------------------------------------------------------------------------------------------
def _queue_label(r: Any) -> str:
    # fixed text only: the selectbox's value travels as this label (see the module docstring)
    return f"#{r.queue_id} {r.name}"


def render_queues(path: str, choices: Mapping[str, list[str]], queues: pd.DataFrame, reviewer: str) -> None:
    active = st.session_state.get(state.QUEUE)
    ids: list[int] = [NO_QUEUE, *[int(x) for x in queues["queue_id"]]]
    labels = {int(r.queue_id): _queue_label(r) for r in queues.itertuples()}
    if active is not None and active not in ids:
        state.set_value(state.QUEUE, None)
        state.flash(
            "error", f"Spot check #{active} is not in this study (deleted, or a link to another study)."
        )
        active = None
    c1, c2 = st.columns([3, 2], vertical_alignment="bottom")
    c1.selectbox(
        "Work through",
        ids,
        format_func=lambda q: "(no queue: the filtered rows)" if q == NO_QUEUE else labels[q],
        key=state.bind(state.QUEUE, NO_QUEUE if active is None else active),
        on_change=_choose_queue,
        help="A spot-check queue: a save moves on to its next unreviewed row.",
    )
    with c2.popover("Spot-check queues", icon=":material/playlist_add_check:", width="stretch"):
        render_queue_manager(path, choices, queues, reviewer)
    agreement.second_review_notice(queues, active)


def render_queue_manager(
    path: str, choices: Mapping[str, list[str]], queues: pd.DataFrame, reviewer: str
) -> None:
    if len(queues):
        prog = data.queue_progress(path, data.study_version(path))
        view = queues[["queue_id", "name", "strategy", "seed", "rows", "reviewed"]].copy()
        view["progress %"] = (100 * view["reviewed"] / view["rows"].where(view["rows"] > 0)).round(1)
        if len(prog):
            per_arm = (
                prog.assign(cell=prog["reviewed"].astype(str) + "/" + prog["rows"].astype(str))
                .pivot(index="queue_id", columns="arm", values="cell")
                .add_prefix("arm ")
            )
            view = view.join(per_arm, on="queue_id")
        st.markdown("**Queues** (reviewed / rows, in all and per arm)")
        st.dataframe(view, hide_index=True, key="queues")
    with st.form("new_queue", clear_on_submit=False, enter_to_submit=False):
        st.markdown("**Draw a new spot check** (seeded; the sample is stored with its seed)")
        c1, c2, c3 = st.columns(3)
        size = c1.number_input("Rows", min_value=1, value=50, step=10, key="q_size")
        per = c2.radio("Size is", ["per arm", "in total"], key="q_per", horizontal=True)
        seed = c3.number_input("Seed", min_value=0, value=0, step=1, key="q_seed")
        strategy = st.radio(
            "Strategy",
            STRATEGIES,
            key="q_strategy",
            horizontal=True,
            help="uniform: every row equally likely (unbiased judge-agreement figures). stratified: a third "
            "each from parser disagreements, OTHER/ungraded rows and the rest (hunting artifacts); in total, "
            "each arm keeps its share of the study's rows. judges_disagree: rows where the primary and a "
            "panel judge give different verdicts. second_review: rows one person alone reviewed, for a "
            "second reviewer (opens in blind mode).",
        )
        second = agreement.second_review_inputs(data.first_reviewers(path, data.study_version(path)), queues)
        arms = st.multiselect("Arms", choices["arms"], default=choices["arms"], key="q_arms")
        name = st.text_input("Name (optional)", key="q_name")
        if st.form_submit_button("Draw sample", disabled=data.read_only(path)):
            try:
                sc = data.create_spot_check(
                    path,
                    size=int(size),
                    per_arm=per == "per arm",
                    seed=int(seed),
                    strategy=str(strategy),
                    arms=arms,
                    name=name,
                    created_by=reviewer or None,
                    **second.options(str(strategy)),
                )
            except (ReviewError, StudyError) as exc:
                st.error(tables.md_escape(str(exc)))
            else:
                state.set_value(state.QUEUE, sc.queue_id)
                st.session_state[state.ROW] = None
                agreement.drawn(sc.strategy)
                shares = ", ".join(f"{tables.md_escape(a)}: {sum(v.values())}" for a, v in sc.strata.items())
                state.flash(
                    "success",
                    f"Spot check #{sc.queue_id} drawn: {sc.rows} rows ({sc.strategy}, seed {sc.seed}; {shares}).",
                )
                st.rerun()
    if len(queues):
        st.markdown("**Rename or delete a queue** (its reviews stay: they are the audit trail)")
        ids = [int(x) for x in queues["queue_id"]]
        labels = {int(r.queue_id): _queue_label(r) for r in queues.itertuples()}
        target = st.selectbox("Queue", ids, format_func=lambda q: labels[q], key="q_manage")
        c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
        new_name = c1.text_input("New name", key="q_rename")
        if c2.button("Rename", key="q_rename_btn", disabled=not new_name.strip() or data.read_only(path)):
            try:
                data.rename_spot_check(path, int(target), new_name)
            except (ReviewError, StudyError) as exc:
                state.flash("error", f"Not renamed: {exc}")
            else:
                state.flash("success", f"Spot check #{target} renamed.")
            st.rerun()
        sure = st.checkbox(f"Yes, delete #{target}", key="q_delete_sure")
        if st.button("Delete queue", key="q_delete_btn", disabled=not sure or data.read_only(path)):
            try:
                data.delete_spot_check(path, int(target), deleted_by=reviewer or None)
            except (ReviewError, StudyError) as exc:
                state.flash("error", f"Not deleted: {exc}")
            else:
                if st.session_state.get(state.QUEUE) == target:
                    state.set_value(state.QUEUE, None)
                    st.session_state[state.ROW] = None
                state.flash("success", f"Spot check #{target} deleted; its reviews are kept.")
            st.rerun()


# --- filters ---------------------------------------------------------------------------------------------------
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
        help=f"{NO_VERDICT}: rows the judge has not graded yet (pending or error); ungraded is not OTHER",
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
    agreement.render_reviewers_filter(_filter_changed)


def _active_filters(f: RowFilter) -> str:
    """The filters in force, for the expander's label (Markdown: every user value is escaped)."""
    parts = [tables.md_escape(p) for p in _filter_parts(f)]
    return "; ".join(parts) or "none"


def _filter_parts(f: RowFilter) -> list[str]:
    parts = []
    for label, values in (("arm", f.arms), ("orientation", f.orientations), ("verdict", f.verdicts)):
        if values:
            parts.append(f"{label} {', '.join(values)}")
    if f.judge_statuses:
        parts.append("judge " + ", ".join(f.judge_statuses))
    if f.disagree_parser:
        parts.append(f"{f.disagree_parser} disagrees")
    if f.reviewed is not None:
        parts.append("reviewed" if f.reviewed else "unreviewed")
    if f.reviewers:
        parts.append(f.reviewers)
    if f.search.strip():
        parts.append(f"search “{f.search.strip()}”")
    if f.cell is not None:
        parts.append(f"cell: {f.cell.describe()}")
    return parts


# --- the row ---------------------------------------------------------------------------------------------------
def _decided(row: Mapping[str, Any], reviewer: str) -> bool:
    hist = row["history"]
    if not reviewer or hist is None or not len(hist):
        return False
    mine = hist[
        (hist["reviewer"] == reviewer) & (hist["action"] != "retract") & (hist["status"] != "retracted")
    ]
    return bool(len(mine))


def render_question(row: Mapping[str, Any]) -> None:
    q = str(row["question"])
    if len(q) > LONG_QUESTION or q.count("\n") > 6:
        head = q[:200].rsplit(" ", 1)[0]
        st.markdown(f"**Question** {tables.md_escape(head)} …")
        with st.expander(f"Full question ({len(q):,} characters)"):
            st.markdown(tables.md_escape(q))
    else:
        st.markdown(f"**Question** {tables.md_escape(q)}")
    lines = []
    for k, opt in enumerate(row["options"]):
        letter = LETTERS[k]
        mark = "  :material/check_circle: **gold**" if letter == row["gold_letter"] else ""
        lines.append(f"**{letter}.** {tables.md_escape(opt)}{mark}")
    st.markdown("  \n".join(lines))


def render_generation(row: Mapping[str, Any], *, hidden: bool) -> None:
    """The row's answer (what the parsers and the judge read) verbatim, with the span a parser took its letter
    from marked unless blind mode hides the parsers; a "truncated" badge when the model was cut off; under it
    the reasoning, collapsed and verbatim. A row without reasoning shows its generation as before."""
    answer = row.get("answer")
    reasoning = row.get("reasoning")
    if reasoning is None:
        st.markdown("**Generation** (verbatim)")
    else:
        st.markdown("**Answer** (verbatim; what the parsers and the judge read, the reasoning below)")
    if row.get("truncated"):
        render_truncated(row)
    if answer is None or is_blank(answer):
        st.caption(no_answer(row))
        if answer:
            components.plain_text(repr(answer))  # whitespace only: show which characters
    else:
        render_answer(row, str(answer), hidden=hidden)
    if reasoning is not None:
        render_reasoning(str(row["row_id"]), str(reasoning))


def usage_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row's usage object (stored as JSON text); {} when there is none or it is not an object."""
    usage = row.get("usage")
    if isinstance(usage, str):
        try:
            usage = json.loads(usage)
        except ValueError:
            return {}
    return dict(usage) if isinstance(usage, Mapping) else {}


def finish_line(row: Mapping[str, Any]) -> str:
    """ "finish_reason length · 4,096 completion tokens (312 prompt)": why and how long the model stopped, from
    what its reply said (Markdown-escaped; "" when the row records neither)."""
    parts = []
    if row.get("finish_reason") is not None:
        parts.append(f"finish_reason {tables.md_escape(row['finish_reason'])}")
    usage = usage_of(row)
    done, prompt = usage.get("completion_tokens"), usage.get("prompt_tokens")
    if isinstance(done, int) and not isinstance(done, bool):
        tokens = f"{done:,} completion tokens"
        if isinstance(prompt, int) and not isinstance(prompt, bool):
            tokens += f" ({prompt:,} prompt)"
        parts.append(tokens)
    return " · ".join(parts)


def render_truncated(row: Mapping[str, Any]) -> None:
    """The badge of a row the model did not finish: the token limit (finish_reason length), or a reasoning
    block that never closes."""
    why = (
        "the model was stopped by the token limit"
        if row.get("finish_reason") == FINISH_LENGTH
        else "the reasoning block never closes"
    )
    finish = finish_line(row)
    # the badge and the caption side by side (the caption takes what the badge leaves); the caption quotes the
    # provider's own word, escaped, outside any Markdown directive
    with st.container(horizontal=True, wrap=False, vertical_alignment="center", key="mq-truncated"):
        st.markdown(TRUNCATED_BADGE, width="content")
        st.caption(f"{why} · {finish}" if finish else why)


def by_rule(row: Mapping[str, Any]) -> bool:
    """Whether the rule settles the row (an empty answer: OTHER, never judged), whatever a review says since."""
    return row.get("judge_status") == "skipped" and row.get("strict_letter") is None


def no_answer(row: Mapping[str, Any]) -> str:
    """What to say of a row with an empty (or whitespace) answer, plainly."""
    rule = " OTHER by rule." if by_rule(row) else ""
    thinking = row.get("reasoning") is not None
    if row.get("truncated"):
        if row.get("finish_reason") == FINISH_LENGTH:
            where = " while thinking" if thinking else ""
            return f"No answer: the model was cut off by the token limit{where}.{rule}"
        return f"No answer: the reasoning block never closes, so the model never answered.{rule}"
    if thinking:
        return f"No answer: nothing follows the reasoning.{rule}"
    return "(empty generation: OTHER by rule)" if rule else "(empty generation)"


def render_answer(row: Mapping[str, Any], answer: str, *, hidden: bool) -> None:
    """The answer verbatim with the span a parser took its letter from marked (naive by default; any
    framework parser whose letter can be located): the parsers read the answer, so the span is in it."""
    spans = {} if hidden else letter_spans(answer, len(row["options"]))
    letters = row["parser_letters"]
    # a span is shown only where it gives the letter the study stored for that parser
    spans = {p: v for p, v in spans.items() if letters.get(p) == v[0]}
    if not spans:
        components.plain_text(answer)
        return
    names = list(spans)
    pick = names[0]
    if len(names) > 1:
        labels = {p: f"{p} → {spans[p][0]}" for p in names}
        chosen = st.segmented_control(
            "Mark where this parser took its letter",
            names,
            default=names[0],
            format_func=lambda p: labels[p],
            key=f"hl-{row['row_id']}",
            required=True,
        )
        pick = chosen or names[0]
    letter, (a, b) = spans[pick]
    components.highlighted_text(answer, a, b, f"{pick} parser took {letter} here")
    st.caption(f"Marked: where the {pick} parser took its letter {letter}.")


def render_reasoning(row_id: str, reasoning: str) -> None:
    """The model's thinking, collapsed (a new row opens it closed) and verbatim as text: the parsers and the
    judge never read it, but a reviewer may want to."""
    size = f"{len(reasoning):,} characters" if reasoning else "empty"
    with st.expander(f"Reasoning ({size}; not read by the parsers or the judge)", key=f"reasoning-{row_id}"):
        components.plain_text(reasoning, empty="(the reasoning block is empty)")


def parser_table(row: Mapping[str, Any], has_user: bool) -> pd.DataFrame:
    gold = row["gold_letter"]
    out = []
    for p, letter in row["parser_letters"].items():
        if p == PARSER_USER and not has_user:
            continue
        implied: str
        if letter is not None:
            implied = verdict_of(letter, gold)
        elif p == PARSER_STRICT:
            implied = (
                "OTHER (empty answer: by rule)" if by_rule(row) else "defers (no letter: the judge decides)"
            )
        else:
            implied = "OTHER (no letter)"
        out.append({"parser": p, "letter": letter or "—", "verdict it implies": implied})
    return pd.DataFrame(out)


def render_judge(row: Mapping[str, Any]) -> None:
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
    j = row.get("judge")
    st.markdown(
        f"**Judge** status **{row['judge_status']}** · verdict **{row['judge_verdict'] or '—'}** · letter "
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
    # the raw reply and, with `grade --rationale`, the rationale beside it
    shown = [("Reply (raw):", row.get("judge_reply")), ("Rationale:", row.get("judge_rationale") or None)]
    shown = [(caption, text) for caption, text in shown if text is not None]
    for col, (caption, text) in zip(st.columns(len(shown)) if shown else [], shown, strict=True):
        with col:
            st.caption(caption)
            components.plain_text(text)


def _save(
    path: str,
    row_id: str,
    *,
    action: str,
    queue: int | None,
    after_save: str | None,
    reviewer: str,
    list_key: str | None = None,
) -> None:
    """Button callback: save the review of ``row_id`` — the row whose button was pressed, whatever the
    session shows by now — then move on (in a queue: its next unreviewed row; else: the next row).

    An override is sent as chosen, verdict and letter; whether it is recorded as a confirm (it keeps the
    row's verdict and letter) is decided by the use case with the one rule (:mod:`mcqaudit.review.rules`), in
    blind mode as in the open."""
    s = st.session_state
    verdict = s.get(f"verdict-{row_id}") if action == OVERRIDE else None
    letter = s.get(f"letter-{row_id}")
    try:
        rid = data.add_review(
            path,
            row_id,
            reviewer=reviewer,
            action=action,
            verdict=verdict,
            picked_letter=None if letter in (None, NO_LETTER) or action == CONFIRM else letter,
            note=s.get(f"note-{row_id}", ""),
            queue_id=queue,
            # the next row's panel is read in the save's connection (the fragment's rerun then reads nothing)
            then=(list_key, after_save) if list_key is not None and after_save is not None else None,
        )
    except (ReviewError, StudyError) as exc:
        state.flash("error", f"Not saved ({row_id}): {exc}")
        return
    nxt = after_save  # worked out when the row was drawn: no query between the save and the next row
    if nxt is None:
        done = " Every row of this queue is reviewed." if queue is not None else ""
        state.flash("success", f"Saved review #{rid} of {row_id}.{done}")
    else:
        state.flash("success", f"Saved review #{rid} of {row_id}.")
        s[state.ROW] = nxt


def render_review_form(
    path: str,
    row: Mapping[str, Any],
    *,
    blind: bool,
    reviewer: str,
    queue: int | None,
    after_save: str | None,
    list_key: str | None = None,
) -> None:
    rid = row["row_id"]
    final = row["final_verdict"]
    hidden = blind and not _decided(row, reviewer)
    if not reviewer and not data.read_only(path):
        st.warning("Enter your name as Reviewer in the sidebar to record reviews.")
    common: dict[str, Any] = {
        "queue": queue,
        "after_save": after_save,
        "reviewer": reviewer,
        "list_key": list_key,
    }
    if not hidden:
        c1, c2 = st.columns([1, 2], vertical_alignment="center")
        c1.button(
            "Confirm",
            key=f"confirm-{rid}",
            disabled=not reviewer or final is None,
            type="primary",
            on_click=_save,
            args=(path, rid),
            kwargs={"action": CONFIRM, **common},
            help="Keep the current verdict (key c)",
        )
        c2.markdown(f"the verdict **{final}**" if final else "no verdict to confirm: override it")
    verdict = st.radio(
        "Verdict",
        VERDICTS,
        key=f"verdict-{rid}",
        horizontal=True,
        index=None,
        help="Keys 1 / 2 / 3",
    )
    c1, c2 = st.columns([1, 2])
    c1.selectbox(
        "Picked letter (optional)",
        [NO_LETTER, *LETTERS[: len(row["options"])]],
        key=f"letter-{rid}",
        help="The option the generation picks: the gold for CORRECT; none for OTHER.",
    )
    c2.text_input("Note (optional)", key=f"note-{rid}")
    st.button(
        "Save override",
        key=f"override-{rid}",
        disabled=not reviewer or verdict is None,
        on_click=_save,
        args=(path, rid),
        kwargs={"action": OVERRIDE, **common},
        help="Record the verdict (and letter) chosen above (key s). A decision that keeps the row's verdict "
        "and letter is recorded as a confirmation.",
    )
    st.caption(
        "Keys (outside text fields): **c** confirm · **1 / 2 / 3** verdict · **s** save · **j / k** next / previous"
    )


def render_history(path: str, row: Mapping[str, Any], *, blind: bool, reviewer: str) -> None:
    hist = row["history"]
    if blind and not _decided(row, reviewer):
        return
    st.markdown("**Review history**")
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
                "queue_id",
                "origin",
            ]
        ],
        hide_index=True,
        key="history",
    )
    open_ = [int(r) for r in hist.loc[hist["status"].isin(["effective", "superseded"]), "review_id"]]
    if open_:
        c1, c2 = st.columns([2, 1], vertical_alignment="bottom")
        c1.selectbox(
            "Retract review", open_, format_func=lambda r: f"#{r}", key=f"retract-id-{row['row_id']}"
        )
        c2.button(
            "Retract",
            key=f"retract-{row['row_id']}",
            disabled=not reviewer,
            on_click=_retract,
            args=(path, f"retract-id-{row['row_id']}", reviewer),
        )


def _retract(path: str, select_key: str, reviewer: str) -> None:
    target = st.session_state.get(select_key)
    if target is None:
        return
    try:
        new = data.retract_review(path, int(target), reviewer=reviewer)
    except (ReviewError, StudyError) as exc:
        state.flash("error", f"Not retracted: {exc}")
    else:
        state.flash("success", f"Review #{target} retracted (#{new}).")


def _selected(key: str, kind: str) -> list[Any]:
    event = st.session_state.get(key)
    sel = event.get("selection", {}) if isinstance(event, Mapping) else getattr(event, "selection", None)
    got = sel.get(kind) if isinstance(sel, Mapping) else getattr(sel, kind, None)
    return list(got or [])


def _open_cell(key: str, ids: list[list[Any]], columns: list[str], current: str) -> None:
    """on_select of the side-by-side table: open the row of the clicked cell."""
    for pos, col in _selected(key, "cells")[:1]:
        target = ids[int(pos)][columns.index(col)]
        if isinstance(target, str) and target != current:
            st.session_state[state.ROW] = target


def _open_listed(key: str, row_ids: list[str]) -> None:
    """on_select of the row list: open the clicked row."""
    for pos in _selected(key, "rows")[:1]:
        st.session_state[state.ROW] = row_ids[int(pos)]


def side_by_side(rows: pd.DataFrame, current: str, hidden: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The item's rows as a table arm × orientation (one column per orientation and sample): picked letter
    and verdict, ✓ when reviewed, ▶ on the row on screen; and the same shape holding each cell's row_id.

    Plain Python over the item's few rows (pandas string arithmetic and pivots cost more than the whole
    panel's queries)."""

    def text(v: Any, empty: str) -> str:
        return empty if v is None or v is pd.NA or (isinstance(v, float) and v != v) else str(v)

    wanted = ["row_id", "arm", "orientation", "sample", "gold_letter", "picked_letter", "final_verdict"]
    recs = rows[[*wanted, "reviewed"]].to_dict("records")
    multi = len({r["sample"] for r in recs}) > 1
    cols: dict[str, None] = {}
    arms: dict[str, None] = {}
    cell: dict[tuple[str, str], str] = {}
    ids: dict[tuple[str, str], str] = {}
    for r in recs:
        sample = f" s{r['sample']}" if multi else ""
        col = f"{r['orientation']}{sample} (gold {r['gold_letter']})"
        cols.setdefault(col)
        arms.setdefault(r["arm"])
        reviewed = bool(r["reviewed"])
        if hidden:
            c = "✓ reviewed" if reviewed else "·"
        else:
            mark = " ✓" if reviewed else ""
            c = f"{text(r['picked_letter'], '—')} · {text(r['final_verdict'], UNGRADED)}{mark}"
        if r["row_id"] == current:
            c = "▶ " + c
        cell[(r["arm"], col)] = c
        ids[(r["arm"], col)] = r["row_id"]
    arm_index = pd.Index(list(arms), name="arm")
    cells = pd.DataFrame(
        [[cell.get((a, c), "") for c in cols] for a in arms], index=arm_index, columns=list(cols)
    )
    id_frame = pd.DataFrame(
        [[ids.get((a, c)) for c in cols] for a in arms],
        index=arm_index,
        columns=pd.Index(list(cols), name="column"),
        dtype=object,
    )
    return cells, id_frame


def render_context(row: Mapping[str, Any], rows: pd.DataFrame, *, hidden: bool) -> None:
    st.markdown(
        f"**The same item in every arm and orientation** ({len(rows)} rows; picked letter · verdict, "
        "✓ reviewed; click a cell to open its row)"
        if not hidden
        else f"**The same item in every arm and orientation** ({len(rows)} rows; verdicts hidden in blind mode)"
    )
    cells, ids = side_by_side(rows, row["row_id"], hidden)
    key = f"context-{row['row_id']}"
    st.dataframe(
        cells,
        key=key,
        on_select=functools.partial(
            _open_cell,
            key,
            ids.astype(object).where(ids.notna(), None).values.tolist(),
            list(ids.columns),
            row["row_id"],
        ),
        selection_mode="single-cell",
        height=min(38 + 35 * len(cells), 300),
    )
    with st.expander("Metadata and prompt"):
        meta = row.get("metadata")
        finish = finish_line(row)
        st.caption(
            f"model: {tables.md_escape(row.get('model') or '—')} · source line: {row.get('source_line') or '—'}"
            + (f" · {finish}" if finish else "")
        )
        if meta:
            try:
                st.json(json.loads(meta) if isinstance(meta, str) else meta, expanded=1)
            except ValueError:
                components.plain_text(str(meta))
        else:
            st.caption("No metadata.")
        st.caption("Prompt the model was sent:")
        components.plain_text(row.get("prompt"), empty="(no prompt recorded)")


def render_list(path: str, key: str, pos: int, total: int, blind: bool, current: str) -> None:
    page_start = (pos // PAGE_SIZE) * PAGE_SIZE
    df = data.row_page(path, data.study_version(path), key, PAGE_SIZE, page_start)
    st.caption(f"{total} rows · showing {page_start + 1}–{page_start + len(df)}; click a row to open it")
    # the answer's start, not the generation's: a reasoning model's generation opens with its thinking
    view = df.drop(columns=[c for c in ("queue_position", "generation") if c in df.columns])
    if blind:
        view = view.drop(columns=[c for c in _BLIND_HIDDEN if c in view.columns])
    view.insert(0, "#", range(page_start + 1, page_start + len(df) + 1))
    view.insert(0, " ", ["▶" if r == current else "" for r in df["row_id"]])
    # a new key for every row on screen: the list starts without a stale selection
    wkey = f"rowlist-{hashlib.sha1(key.encode()).hexdigest()[:10]}-{page_start}-{current}"
    st.dataframe(
        view,
        hide_index=True,
        on_select=functools.partial(_open_listed, wkey, [str(r) for r in df["row_id"]]),
        selection_mode="single-row",
        key=wkey,
        height=min(38 + 35 * len(view), 360),
    )


# --- the panel (a fragment: a save or a move reruns only this) --------------------------------------------------
def _resolve_row(path: str, key: str, f: RowFilter) -> Any:
    """The panel to show: the session's row when it is in the list (or, outside a queue, any row of the
    study, e.g. from a permalink); else, in a queue, its first unreviewed row (or its first row); else the
    list's first row. None when the list is empty."""
    v = data.study_version(path)
    want = st.session_state.get(state.ROW)
    if want:
        panel = data.panel(path, v, key, want)
        if panel.row is not None and (panel.position is not None or f.queue_id is None):
            return panel
        state.flash(
            "error", f"Row {want} is not in {'this queue' if f.queue_id is not None else 'this study'}."
        )
    first = None
    if f.queue_id is not None:
        first = data.next_unreviewed(path, v, int(f.queue_id), None)
    if first is None:
        first = data.row_at(path, v, key, 0)
    if first is None:
        return None
    st.session_state[state.ROW] = first
    return data.panel(path, v, key, first)


def render_progress(progress: pd.DataFrame) -> None:
    n, done = (int(progress["rows"].sum()), int(progress["reviewed"].sum())) if len(progress) else (0, 0)
    per_arm = " · ".join(
        f"{tables.md_escape(r.arm)} {int(r.reviewed)}/{int(r.rows)}" for r in progress.itertuples()
    )
    st.progress(
        done / n if n else 0.0, text=f"{done} of {n} rows reviewed" + (f" ({per_arm})" if per_arm else "")
    )


@st.fragment
def review_panel(path: str, has_user: bool) -> None:
    """The row on screen with its controls. A fragment: a save, a move or a selection reruns only this."""
    reviewer = (st.session_state.get(state.REVIEWER) or "").strip()
    if data.read_only(path):
        reviewer = ""  # nothing can be saved: every write control stays disabled
    blind = bool(st.session_state.get(state.BLIND))
    queue = st.session_state.get(state.QUEUE)
    f = current_filter(blind)
    key = data.filter_json(f)
    components.flash()
    panel = _resolve_row(path, key, f)
    if panel is None:
        state.write_url(**{state.Q_ROW: None, state.Q_QUEUE: str(queue) if queue is not None else None})
        st.info("No rows match." if queue is None else "This queue has no rows.")
        return
    row, where = panel.row, panel.position
    row_id = str(row["row_id"])
    state.write_url(**{state.Q_ROW: row_id, state.Q_QUEUE: str(queue) if queue is not None else None})

    # navigation bar: where am I, previous / next, progress, link
    c = st.columns([1, 1, 3, 2, 2], vertical_alignment="center")
    prev_id = where.previous if where else None
    next_id = where.next if where else None
    c[0].button("Previous", key="prev", on_click=_go, args=(prev_id,), disabled=prev_id is None, help="key k")
    c[1].button("Next", key="next", on_click=_go, args=(next_id,), disabled=next_id is None, help="key j")
    if where is None:
        c[2].markdown("This row is **outside the current list** (opened by its link).")
    elif queue is not None:
        c[2].markdown(f"Row **{where.position + 1}** of **{where.total}** in spot check **#{queue}**")
    else:
        c[2].markdown(f"Row **{where.position + 1}** of **{where.total}** matching rows")
    if where is not None and where.total > 1:
        st.session_state[f"goto-{key}"] = where.position + 1  # follows the row on screen
        c[3].number_input(
            "Go to row",
            min_value=1,
            max_value=where.total,
            step=1,
            key=f"goto-{key}",
            on_change=_goto,
            args=(path, key),
            label_visibility="collapsed",
        )
    with c[4].popover("Link to this row", icon=":material/link:", width="stretch"):
        st.caption("A permalink (copy with the button at its right):")
        st.code(permalink(row_id, queue), language=None, wrap_lines=True)
    if queue is not None:
        render_progress(panel.progress)

    hidden = blind and not _decided(row, reviewer)
    with st.container(key="mq-row-line"):  # the keyboard handler reads the row on screen from here
        st.markdown(
            f"**Row** `{row_id}` · arm **{tables.md_escape(row['arm'])}** · item "
            f"**{tables.md_escape(row['item_id'])}** · orientation **{row['orientation']}** · sample {row['sample']}"
        )
    left, right = st.columns([3, 2], gap="large")
    with left:
        render_generation(row, hidden=hidden)
        render_question(row)
    with right:
        # after a save: in a queue its next unreviewed row, else the list's next row
        after_save = panel.next_unreviewed if queue is not None else next_id
        render_review_form(
            path, row, blind=blind, reviewer=reviewer, queue=queue, after_save=after_save, list_key=key
        )
        if hidden:
            st.info(
                "Blind mode: the judge's verdict, the parsers' letters and earlier reviews are hidden until you decide."
            )
        else:
            st.markdown("**Parsers**")
            st.dataframe(parser_table(row, has_user), hide_index=True, key="parser_letters")
            render_judge(row)
            agreement.render_judges(row)
    st.divider()
    render_context(row, panel.item, hidden=hidden)
    render_history(path, row, blind=blind, reviewer=reviewer)
    if where is not None:
        # drawn only while open (the expander tracks its state): a closed list costs no query
        box = st.expander("The list", expanded=queue is None, key="list_open", on_change="rerun")
        if box.open:
            with box:
                render_list(path, key, where.position, where.total, blind, row_id)


def render_review(path: str) -> None:
    st.title("Review")
    v = data.study_version(path)
    choices = data.choices(path, v)
    queues = data.queues(path, v)
    reviewer = (st.session_state.get(state.REVIEWER) or "").strip()
    blind = bool(st.session_state.get(state.BLIND))
    components.provenance(None, data.meta(path, v))
    if data.read_only(path):
        st.warning(
            "This study file is read-only (file, folder or disk): you can browse every row, but reviews and "
            "spot checks cannot be saved here. Work on a writable copy to review.",
            icon=":material/lock:",
        )
        reviewer = ""
    review_keys.keyboard_shortcuts()
    render_queues(path, choices, queues, reviewer)
    f = current_filter(blind)
    if st.session_state.get(state.QUEUE) is None:
        with st.expander(f"Filters: {_active_filters(f)}", expanded=False):
            render_filters(choices, blind)
        cell = st.session_state.get(state.F_CELL)
        if cell and not blind:
            c1, c2 = st.columns([6, 1])
            c1.info(
                f"Confusion cell from Parsers vs judge: rows with {tables.md_escape(cell_of(cell).describe())}"
            )
            c2.button("Clear cell", key="clear_cell", on_click=_clear_cell)
    review_panel(path, PARSER_USER in choices["parsers"])


def page() -> None:
    render_review(st.session_state[state.DB_PATH])
