"""Small shared pieces of the pages: provenance banners, flags with links, plain-text boxes, page links."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from typing import Any

import streamlit as st

from mcqaudit.report import STANDIN_BANNER, UNAUDITED_BANNER
from mcqaudit.ui import state
from mcqaudit.ui.tables import md_escape

DEMO_BANNER = (
    "Demo data: the generations in this study were written by sample_runs/simulate.py, a simulated "
    "respondent, not a real model."
)

FLAG_HELP = {
    "suspected_parser_artifact": "a parser's letters give a different Δ than the judge: the parser, not the model, made (or hid) the effect",
    "orientation_instability": "the effect depends on the option order: position bias, not the intervention",
    "other_rate_rise": "the treated arm says OTHER more often: recompute with OTHER excluded",
    "parser_disagreement": "a parser misreads the answer's letter (or, where no letter is known, disagrees with the verdict) on more than 5 % of rows",
    "judge_config_mixed": "arms were graded by different judge configurations",
    "judge_unaudited": "no person has checked the judge yet",
    "ungraded_rows": "some rows have no verdict (judge error or pending)",
    "logprob_mismatch": "the argmax log-prob letter differs from the text's answer on more than 5 % of rows, or the two accuracies differ by more than 5 pp",
    "design_imbalance": "the design cannot separate position from content: position figures are unreadable",
}


def provenance(report: Mapping[str, Any] | None, meta: Mapping[str, str | None]) -> None:
    """The banners every page starts with: stand-in judge, unaudited study, demo data (``report`` None:
    from the study settings alone)."""
    from mcqaudit.demo import is_demo

    study = (report or {}).get("study", {})
    if study.get("standin_judge"):
        st.warning(STANDIN_BANNER, icon=":material/warning:")
    if study.get("unaudited") or (report is None and (meta.get("unaudited") or "").lower() == "true"):
        st.warning(UNAUDITED_BANNER, icon=":material/warning:")
    if is_demo(meta):
        st.info(DEMO_BANNER, icon=":material/science:")


def page_link(name: str, label: str | None = None, **kw: Any) -> None:
    pages = st.session_state.get(state.PAGES) or {}
    if name in pages:
        st.page_link(pages[name], label=label or f"Open {name}", **kw)


def switch_to(name: str) -> None:
    pages = st.session_state.get(state.PAGES) or {}
    if name in pages:
        st.switch_page(pages[name])


def flag_table(instances: Sequence[Mapping[str, Any]]) -> Any:
    """One row per instance of a flag: arm, parser (where the flag names one), evidence, items, rows."""
    import pandas as pd

    df = pd.DataFrame(
        {
            "arm": [f.get("arm") or "—" for f in instances],
            "parser": [f.get("parser") or "—" for f in instances],
            "evidence": [f["evidence"] for f in instances],
            "items": [f.get("items") for f in instances],
            "rows": [f.get("rows") for f in instances],
        }
    )
    if not any(f.get("parser") for f in instances):
        df = df.drop(columns="parser")
    for c in ("items", "rows"):
        if c in df.columns:
            df[c] = df[c].astype("Int64")
    return df


def flags(
    flag_list: Sequence[Mapping[str, Any]], *, only: Sequence[str] | None = None, links: bool = True
) -> None:
    """The flags grouped by name: one card per flag name with what it means, a compact table of its
    instances (arm, parser, evidence, n) and a link to the page that shows the evidence (``only``: these
    flag names)."""
    shown = [f for f in flag_list if only is None or f["name"] in only]
    if not shown:
        if only is None:
            st.success("No diagnostic fired.")
        return
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for f in shown:
        groups.setdefault(str(f["name"]), []).append(f)
    for name, instances in groups.items():
        with st.container(border=True, key=f"flag-{name}"):
            count = f" ({len(instances)})" if len(instances) > 1 else ""
            st.markdown(f":material/flag: **{name}**{count} — {md_escape(FLAG_HELP.get(name, ''))}")
            if len(instances) == 1 and not instances[0].get("arm") and instances[0].get("items") is None:
                st.markdown(md_escape(instances[0]["evidence"]))
            else:
                st.dataframe(flag_table(instances), hide_index=True, key=f"flagtable-{name}")
            page = instances[0].get("page")
            if links and page:
                page_link(str(page), label=f"Evidence: {page} →")


def plain_text(text: str | None, *, empty: str = "(empty)") -> None:
    """Untrusted text (a generation, a judge reply) shown verbatim: never rendered as Markdown or HTML."""
    if text is None or text == "":
        st.caption(empty)
        return
    st.code(text, language=None, wrap_lines=True)


def flash() -> None:
    msg = st.session_state.get(state.FLASH)
    if msg:
        kind, text = msg
        # success messages are ours; an error may quote user input, so it is shown escaped
        st.success(text) if kind == "success" else st.error(md_escape(text))
        st.session_state[state.FLASH] = None


_TEXT_STYLE = (
    "white-space: pre-wrap; word-break: break-word; font-family: 'Source Code Pro', monospace; "
    "font-size: 0.85rem; line-height: 1.5; background: rgba(151, 166, 195, 0.12); border-radius: 0.5rem; "
    "padding: 0.75rem 1rem; margin: 0;"
)
_MARK_STYLE = (
    "background: #ffd54f; color: #000; border-radius: 0.2rem; padding: 0 0.1rem; outline: 1px solid #f9a825;"
)


def highlighted_text(text: str, start: int, end: int, title: str) -> None:
    """Untrusted text shown verbatim with one span marked: every character of the text is HTML-escaped and
    only our own ``<pre>`` and ``<mark>`` tags are markup, so nothing in the text can become an element."""
    esc = html.escape
    body = (
        esc(text[:start])
        + f'<mark data-testid="mq-parser-span" title="{esc(title)}" style="{_MARK_STYLE}">'
        + esc(text[start:end])
        + "</mark>"
        + esc(text[end:])
    )
    st.html(f'<pre data-testid="mq-generation" style="{_TEXT_STYLE}">{body}</pre>')


# Keys → what they press (docs/design.md §8). ``click``: a button inside the element with this key prefix;
# ``radio``: the n-th option of the radio with this key prefix. Ignored while the focus is in a text field
# (typing a note never triggers one), with a modifier held, and while the target is still the previous
# run's (stale) element; handled in the capture phase and stopped there, so Streamlit's own single-key
# shortcuts never see them.
REVIEW_KEYS: dict[str, dict[str, Any]] = {
    "c": {"click": "confirm-"},
    "s": {"click": "override-"},
    "1": {"radio": "verdict-", "n": 0},
    "2": {"radio": "verdict-", "n": 1},
    "3": {"radio": "verdict-", "n": 2},
    "j": {"click": "next"},
    "k": {"click": "prev"},
}

_KEYS_JS = """
<script>
(function () {
  const win = window.parent && window.parent.document ? window.parent : window;
  const doc = win.document;
  win.__mcqauditKeys = %s;
  if (win.__mcqauditKeysInstalled) return;
  win.__mcqauditKeysInstalled = true;
  const TEXT_TYPES = ["text", "search", "number", "email", "password", "url", "tel", "date", "time"];
  function typing(el) {
    if (!el) return false;
    if (el.isContentEditable) return true;
    const tag = (el.tagName || "").toLowerCase();
    if (tag === "textarea" || tag === "select") return true;
    if (tag === "input") return TEXT_TYPES.includes((el.type || "text").toLowerCase()) || el.getAttribute("role") === "combobox";
    return false;
  }
  function keyed(prefix) {
    // Streamlit marks a keyed element with the class "st-key-" + key; the prefix is ours (confirm-, verdict-)
    // (no angle brackets in this script: the HTML sanitiser drops a script whose text has a tag-like one)
    const exact = doc.querySelector(".st-key-" + prefix);
    if (exact) return exact;
    const all = doc.querySelectorAll('[class*="st-key-' + prefix + '"]');
    return all.length ? all[0] : null;
  }
  doc.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
    if (typing(e.target) || typing(doc.activeElement)) return;
    const spec = (win.__mcqauditKeys || {})[e.key.toLowerCase()];
    if (!spec) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    press(spec, 0, shownRow(), e.key);
  }, true);
  function note(key, outcome) {
    // what became of each key, for diagnosis (window.__mcqauditKeyLog in the browser console)
    const log = (win.__mcqauditKeyLog = win.__mcqauditKeyLog || []);
    log.push(key + ": " + outcome);
    if (log.length > 50) log.shift();
  }
  function shownRow() {
    // the id of the row on screen (the panel's "Row `id` · arm …" line)
    const line = doc.querySelector('[class*="st-key-mq-row-line"] code');
    return line ? line.innerText : null;
  }
  function find(spec) {
    if (spec.click) {
      const box = keyed(spec.click);
      return box ? box.querySelector("button") : null;
    }
    const box = keyed(spec.radio);
    const inputs = box ? box.querySelectorAll('input[type="radio"]') : [];
    const input = inputs[spec.n];
    return input ? (input.closest("label") || input) : null;
  }
  function press(spec, tries, row, key) {
    // another row came on screen meanwhile: never act on it unseen
    if (shownRow() !== row) return note(key, "dropped: the row changed");
    const target = find(spec);
    // an element of the previous run (the panel is re-rendering): the row it belongs to is no longer the
    // one being decided, so the key is dropped rather than applied to a row the reviewer has not seen
    if (target && target.closest('[data-stale="true"]')) return note(key, "dropped: stale");
    const off = !target || target.disabled || target.getAttribute("aria-disabled") === "true" ||
      !!target.querySelector('input[disabled]');
    if (off) {
      // widgets are briefly disabled while the page connects: try again for up to a second
      if (tries < 20) setTimeout(function () { press(spec, tries + 1, row, key); }, 50);
      else note(key, "dropped: disabled or missing");
      return;
    }
    target.click();
    note(key, "pressed " + row);
  }
})();
</script>
"""


def keyboard_shortcuts(keys: Mapping[str, Mapping[str, Any]] = REVIEW_KEYS) -> None:
    """Install the single-key shortcuts once per browser tab (re-running only refreshes the key map)."""
    st.html(_KEYS_JS % json.dumps(keys), unsafe_allow_javascript=True)
