"""The Review page's single-key shortcuts (docs/design.md §8): ``c`` confirm, ``1`` / ``2`` / ``3`` choose a
verdict, ``s`` save the override, ``j`` / ``k`` next / previous.

Keys typed at a person's pace must never be lost, and never land on a row the reviewer has not seen. Each
key press triggers a Streamlit rerun that takes from a few hundred milliseconds to seconds, and a key pressed
meanwhile used to meet the previous run's (stale, or still disabled) widgets and was dropped. So the page
holds a small key queue (the script below, installed once per browser tab):

- a key is queued with the id of the row on screen when it was pressed (the panel's ``mq-row-line``); while a
  rerun redraws the panel the marker can be missing for a moment, and a key pressed then is queued with the
  last row that was on screen (the one the reviewer saw), never with none;
- the queue releases one key at a time, and only once the app is idle: Streamlit's ``stApp`` reports no run
  (``data-test-script-state`` is neither ``running`` nor ``rerunRequested``), no element is stale, the row
  marker is on screen, and every rerun a click of the reviewer's (or the previous key's) set off has started
  and finished;
- a released key whose row is no longer on screen is refused, visibly (a notice on the page, and the key
  log), never applied to the new row; so is a key whose button is disabled once the page is idle (``s``
  before a verdict is chosen);
- ``s`` and ``1`` / ``2`` / ``3`` also work from the picked-letter select, its list closed or still open (no
  letter is ``S`` or a digit on any item with fewer than 19 options, so they would only type a search that
  matches nothing; the list may stay open for a moment after a letter is clicked on a busy machine); they type
  into its search only while its open list offers an option of that name (``S`` on an item of 19 options or
  more);
- a shortcut key typed into a text field is not applied, and the key log says so.

``window.__mcqauditKeyLog`` in the browser keeps what became of the last 50 keys, for tests and diagnosis.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import streamlit as st

# Keys → what they press. ``click``: the button inside the element with this key prefix; ``radio``: the n-th
# option of the radio with this key prefix. Ignored while the focus is in a text field (typing a note never
# triggers one) and with a modifier held; handled in the capture phase and stopped there, so Streamlit's own
# single-key shortcuts never see them.
REVIEW_KEYS: dict[str, dict[str, Any]] = {
    "c": {"click": "confirm-"},
    "s": {"click": "override-"},
    "1": {"radio": "verdict-", "n": 0},
    "2": {"radio": "verdict-", "n": 1},
    "3": {"radio": "verdict-", "n": 2},
    "j": {"click": "next"},
    "k": {"click": "prev"},
}
# keys that still act from the picked-letter select: none of them is an option letter there (but S from 19 options)
FROM_LETTER_SELECT = "s123"
LETTER_SELECT = "letter-"  # the key prefix of the picked-letter select (ui/pages/review.py)
ROW_MARKER = "mq-row-line"  # the container whose `code` is the id of the row on screen
REFUSED_TESTID = "mq-key-refused"  # the notice a refused key shows

# No "<" anywhere in this script: Streamlit's HTML sanitiser drops a script whose text has a tag-like one.
_KEYS_JS = """
<script>
(function () {
  const win = window.parent && window.parent.document ? window.parent : window;
  const doc = win.document;
  win.__mcqauditKeys = %(keys)s;
  if (win.__mcqauditKeysInstalled) return;
  win.__mcqauditKeysInstalled = true;
  const CFG = %(cfg)s;
  const TEXT_TYPES = ["text", "search", "number", "email", "password", "url", "tel", "date", "time"];
  const queue = [];
  let pumping = false;
  let runs = 0;            // script runs seen starting (stApp's state turning to running)
  let pokedAt = 0;         // the last click or Enter of the reviewer's that may start a rerun
  let runsAtPoke = 0;

  function appState() {
    const app = doc.querySelector('[data-testid="stApp"]');
    return app ? app.getAttribute("data-test-script-state") : null;
  }
  function running() {
    const s = appState();
    const app = doc.querySelector('[data-testid="stApp"]');
    const conn = app ? app.getAttribute("data-test-connection-state") : null;
    return s === "running" || s === "rerunRequested" || s === "initial" || (conn !== null && conn !== "CONNECTED");
  }
  let lastState = appState();
  let lastRow = null;      // the last row id seen on screen: what the reviewer saw while the panel redraws
  function watch() {
    const r = shownRow();
    if (r !== null) lastRow = r;
    const s = appState();
    if (s !== lastState) {
      if (s === "running" || s === "rerunRequested") runs += 1;
      lastState = s;
    }
  }
  new win.MutationObserver(watch).observe(doc.documentElement, {
    attributes: true, subtree: true, attributeFilter: ["data-test-script-state"]
  });
  setInterval(watch, 20);  // the observer alone can miss an element that is replaced whole

  function note(key, outcome) {
    const log = (win.__mcqauditKeyLog = win.__mcqauditKeyLog || []);
    log.push(key + ": " + outcome);
    if (log.length > 50) log.shift();
  }
  function shownRow() {
    const line = doc.querySelector('[class*="st-key-' + CFG.marker + '"] code');
    return line ? line.innerText : null;
  }
  function keyed(prefix) {
    // Streamlit marks a keyed element with the class "st-key-" + key; the prefix is ours (confirm-, verdict-)
    const exact = doc.querySelector(".st-key-" + prefix);
    if (exact) return exact;
    const all = doc.querySelectorAll('[class*="st-key-' + prefix + '"]');
    return all.length ? all[0] : null;
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
  function disabled(t) {
    return t.disabled || t.getAttribute("aria-disabled") === "true" || !!t.querySelector("input[disabled]");
  }
  function letterSelect(el, key) {
    // the picked-letter select's input, unless its list is open and offers an option named as the key
    if (!el || !el.closest || !el.closest('[class*="st-key-' + CFG.letter + '"]')) return false;
    if (el.getAttribute("aria-expanded") !== "true") return true;
    const name = key.toUpperCase();
    return !Array.from(doc.querySelectorAll('[role="option"]')).some(function (o) { return o.innerText.trim() === name; });
  }
  function describe(el) {
    const box = el && el.closest ? el.closest('[class*="st-key-"]') : null;
    const k = box ? Array.from(box.classList).find(function (c) { return c.indexOf("st-key-") === 0; }) : null;
    const open = el && el.getAttribute && el.getAttribute("aria-expanded") === "true" ? ", its list open" : "";
    return (el && el.tagName ? el.tagName.toLowerCase() : "?") + (k ? " " + k.slice(7) : "") + open;
  }
  function typing(el) {
    if (!el) return false;
    if (el.isContentEditable) return true;
    const tag = (el.tagName || "").toLowerCase();
    if (tag === "textarea" || tag === "select") return true;
    if (tag === "input") return TEXT_TYPES.includes((el.type || "text").toLowerCase()) || el.getAttribute("role") === "combobox";
    return false;
  }

  function refuse(job, why) {
    note(job.key, "refused: " + why);
    let box = doc.querySelector('[data-testid="' + CFG.refused + '"]');
    if (!box) {
      box = doc.createElement("div");
      box.setAttribute("data-testid", CFG.refused);
      box.setAttribute("role", "status");
      box.setAttribute("aria-live", "polite");
      box.style.cssText = "position:fixed;left:50%%;bottom:1.5rem;transform:translateX(-50%%);z-index:100000;" +
        "background:#b71c1c;color:#fff;padding:.6rem 1rem;border-radius:.5rem;font:500 .95rem sans-serif;" +
        "box-shadow:0 2px 8px rgba(0,0,0,.3);max-width:42rem;text-align:center";
      doc.body.appendChild(box);
    }
    box.textContent = "Key " + job.key + " not applied: " + why + ".";
    clearTimeout(box.__hide);
    box.__hide = setTimeout(function () { box.remove(); }, 4000);
  }

  const sleep = function (ms) { return new Promise(function (r) { setTimeout(r, ms); }); };
  async function idle() {
    // the app has finished every run it was asked for, and its page is drawn: quiet for CFG.quiet ms
    const deadline = Date.now() + CFG.timeout;
    let quietSince = null;
    while (deadline > Date.now()) {
      const poked = pokedAt && runs === runsAtPoke && CFG.startWait > Date.now() - pokedAt;
      const busy = poked || running() || !!doc.querySelector('[data-stale="true"]') || shownRow() === null;
      if (busy) quietSince = null;
      else if (quietSince === null) quietSince = Date.now();
      else if (Date.now() - quietSince >= CFG.quiet) return true;
      await sleep(20);
    }
    return false;
  }
  async function pump() {
    if (pumping) return;
    pumping = true;
    try {
      while (queue.length) {
        const job = queue.shift();
        if (!(await idle())) { refuse(job, "the page did not finish loading"); continue; }
        const row = shownRow();
        if (row !== job.row) {
          refuse(job, job.row === null ? "no row was on screen" : "the row changed (pressed on " + job.row + ", now " + row + ")");
          continue;
        }
        // a control can lag its run by a frame or two: look again for a moment before refusing the key
        let target = find(job.spec);
        for (let tries = 0; tries !== 10 && (!target || disabled(target)); tries++) {
          await sleep(50);
          if (!(await idle()) || shownRow() !== job.row) break;
          target = find(job.spec);
        }
        if (shownRow() !== job.row) { refuse(job, "the row changed (pressed on " + job.row + ")"); continue; }
        if (!target || disabled(target)) {
          const what = job.spec.click === "override-" ? "choose a verdict first (1 / 2 / 3)" : "that control is not available here";
          refuse(job, what);
          continue;
        }
        const input = target.querySelector ? target.querySelector('input[type="radio"]') : null;
        const noRerun = !!input && input.checked;  // choosing the verdict already chosen starts no run
        pokedAt = noRerun ? 0 : Date.now();
        runsAtPoke = runs;
        target.click();
        note(job.key, "pressed " + row);
      }
    } finally {
      pumping = false;
    }
  }

  // a click or Enter of the reviewer's may start a rerun a moment later: the next key waits for it
  doc.addEventListener("click", function (e) {
    if (e.isTrusted) { pokedAt = Date.now(); runsAtPoke = runs; }
  }, true);
  doc.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey || e.repeat) return;
    const key = (e.key || "").toLowerCase();
    const spec = (win.__mcqauditKeys || {})[key];
    const el = doc.activeElement;
    const fromSelect = !!spec && CFG.fromSelect.includes(key) && (letterSelect(e.target, key) || letterSelect(el, key));
    if (!fromSelect && (typing(e.target) || typing(el))) {
      if (e.key === "Enter") { pokedAt = Date.now(); runsAtPoke = runs; }
      if (spec) note(key, "typed into the field in focus (" + describe(el || e.target) + "), not applied");
      return;
    }
    if (!spec) {
      if (e.key === "Enter" || e.key === " ") { pokedAt = Date.now(); runsAtPoke = runs; }
      return;
    }
    e.preventDefault();
    e.stopImmediatePropagation();
    if (fromSelect && el && el.blur) el.blur();
    const shown = shownRow();
    if (shown !== null) lastRow = shown;
    const row = shown !== null ? shown : lastRow;
    queue.push({ key: key, spec: spec, row: row });
    note(key, "queued on " + row + (shown === null && row !== null ? " (last shown; the panel was redrawing)" : ""));
    pump();
  }, true);
})();
</script>
"""

# release timing (ms): quiet: how long the page must stay idle; startWait: how long a click's rerun may take to
# start; timeout: how long a key waits for the page at most before it is refused
_TIMING = {"quiet": 120, "startWait": 1500, "timeout": 30000}


def keyboard_shortcuts(keys: Mapping[str, Mapping[str, Any]] = REVIEW_KEYS) -> None:
    """Install the single-key shortcuts and their queue once per browser tab (a rerun only refreshes the map)."""
    cfg = {
        **_TIMING,
        "marker": ROW_MARKER,
        "letter": LETTER_SELECT,
        "refused": REFUSED_TESTID,
        "fromSelect": FROM_LETTER_SELECT,
    }
    st.html(_KEYS_JS % {"keys": json.dumps(keys), "cfg": json.dumps(cfg)}, unsafe_allow_javascript=True)
