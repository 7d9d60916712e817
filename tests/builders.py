"""The one place the tests build study files (a helper module, not a test module). Two ways:

- :class:`StudyBuilder` writes a study straight into the tables of a real DuckDB study file (no ingest, no
  judge), so a test states exactly which verdict every row has: the metric and report tests
  (:func:`fixture_study`, :func:`hand_study`, :func:`two_family_study`).
- :func:`build_graded_study` goes through the public path: the real ``ingest_file``, then the real
  ``grade`` against the stand-in judge on 127.0.0.1. The fixture studies built that way take their rows
  from the modules that describe them (tests/ui_study.py, tests/review_study.py, tests/hostile_study.py):
  :func:`build_ui_study`, :func:`build_review_study`, :func:`build_hostile_study`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mcqaudit import orient, parsers
from mcqaudit.metrics.inputs import Columns, StudyFrames, StudyInfo
from mcqaudit.metrics.rules import arm_order
from mcqaudit.store.db import Study
from mcqaudit.store.schema import rebuild_current
from mcqaudit.vocab import LETTERS, VerdictCode, verdict_of

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class StudyBuilder:
    """Writes a study directly into the tables (arms, items, gen_rows, judge_verdicts, reviews, ...).

    ``pick`` is the displayed letter the row picks, ``"OTHER"``, or ``None`` for a row whose judge failed
    (``status="error"``) or has not answered yet (``status="pending"``). ``generation`` is the row's text
    (default: the picked letter, or "I cannot answer"); ``named=False`` is a gold-shape judge's verdict,
    which names no letter.
    """

    path: Path
    items: dict[str, tuple[list[str], int]] = field(default_factory=dict)
    arms: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    reviews: list[tuple[str, str, str | None]] = field(default_factory=list)
    spot: list[tuple[str, list[str]]] = field(default_factory=list)
    configs: dict[str, dict[str, Any]] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    parser_rows: list[tuple[str, str, str | None]] = field(default_factory=list)

    def item(self, item_id: str, n: int = 4, gold: int = 0) -> str:
        self.items[item_id] = ([f"{item_id}-opt{k}" for k in range(n)], gold)
        return item_id

    def config(self, fp: str, model: str = "judge-x", standin: bool = False, shape: str = "extract") -> None:
        self.configs[fp] = {"model": model, "standin": standin, "shape": shape}

    def gold_letter(self, item_id: str, orientation: str) -> str:
        return orient.displayed_letter(LETTERS[self.items[item_id][1]], orientation)

    def row(
        self,
        arm: str,
        item_id: str,
        orientation: str,
        pick: str | None,
        *,
        sample: int = 0,
        source: str = "judge",
        status: str = "ok",
        naive: str | None = "same",
        user: str | None = "none",
        fp: str = "fp-a",
        logprobs: dict[str, float] | None = None,
        frameworks: dict[str, str | None] | None = None,
        generation: str | None = None,
        named: bool = True,
        reasoning: str | None = None,
        finish_reason: str | None = None,
        truncated: bool | None = None,
    ) -> str:
        if arm not in self.arms:
            self.arms.append(arm)
        if fp not in self.configs:
            self.config(fp)
        row_id = f"{arm}|{item_id}|{orientation}|{sample}"
        letter = pick if pick not in (None, "OTHER") else None
        self.rows.append(
            {
                "row_id": row_id,
                "arm": arm,
                "item_id": item_id,
                "orientation": orientation,
                "sample": sample,
                "pick": pick,
                "letter": letter,
                "source": source,
                "status": status if pick is not None else ("error" if status == "ok" else status),
                "naive": letter if naive == "same" else naive,
                "user": None if user == "none" else (letter if user == "same" else user),
                "fp": fp,
                "logprobs": logprobs,
                "generation": generation,
                "named": named,
                "reasoning": reasoning,
                "finish_reason": finish_reason,
                # as ingest decides (docs/design.md §3): the token limit, unless told otherwise
                "truncated": finish_reason == "length" if truncated is None else truncated,
            }
        )
        for name, lt in (frameworks or {}).items():
            self.parser_rows.append((row_id, name, lt))
        return row_id

    def review(self, row_id: str, verdict: str, letter: str | None = None) -> None:
        self.reviews.append((row_id, verdict, letter))

    def build(self) -> Study:
        if self.path.exists():  # built already: the same study
            return Study(self.path)
        study = Study(self.path, create=True)
        items = pd.DataFrame(
            [(i, f"Q {i}?", opts, gold) for i, (opts, gold) in self.items.items()],
            columns=["item_id", "question", "options", "gold_index"],
        )
        gen, verdicts = [], []
        for r in self.rows:
            opts, _ = self.items[r["item_id"]]
            gold = self.gold_letter(r["item_id"], r["orientation"])
            blank = r["source"] == "blank"
            gen.append(
                {
                    "row_id": r["row_id"], "arm": r["arm"], "item_id": r["item_id"], "orientation": r["orientation"],
                    "sample": r["sample"], "question": f"Q {r['item_id']}?",
                    "options": orient.apply(opts, r["orientation"]), "gold_letter": gold,
                    "generation": "" if blank else r["generation"] or r["letter"] or "I cannot answer", "is_blank": blank,
                    "option_logprobs": json.dumps(r["logprobs"]) if r["logprobs"] is not None else None,
                    "user_letter": r["user"], "naive_letter": r["naive"],
                    "strict_letter": r["letter"] if r["source"] == "strict" else None,
                    "reasoning": r["reasoning"], "finish_reason": r["finish_reason"], "truncated": r["truncated"],
                }
            )  # fmt: skip
            if r["source"] == "judge" and r["status"] != "pending":
                ok = r["status"] == "ok"
                verdicts.append(
                    {
                        "row_id": r["row_id"], "fingerprint": r["fp"], "status": "ok" if ok else "error",
                        "letter": r["letter"] if ok and r["named"] else None,
                        "verdict": verdict_of(r["letter"], gold) if ok else None, "reply": r["pick"] or "??",
                    }
                )  # fmt: skip
        gen_df = pd.DataFrame(gen, columns=list(gen[0]) if gen else ["row_id"])
        jv_df = pd.DataFrame(
            verdicts, columns=["row_id", "fingerprint", "status", "letter", "verdict", "reply"]
        )
        spot_rows = [
            (q, pos, rid) for q, (_, ids) in enumerate(self.spot, start=1) for pos, rid in enumerate(ids)
        ]
        spot_df = pd.DataFrame(spot_rows, columns=["queue_id", "position", "row_id"])
        pl_df = pd.DataFrame(self.parser_rows, columns=["row_id", "parser", "letter"])
        with study.write() as con:
            if len(items):
                con.register("b_items", items)
                con.execute(
                    "INSERT INTO items SELECT item_id, question, options, gold_index, NULL, 'items' FROM b_items"
                )
            for k, arm in enumerate(self.arms):
                con.execute("INSERT INTO arms VALUES (?, ?, 1)", [arm, k])
            for fp, cfg in self.configs.items():
                con.execute(
                    "INSERT INTO judge_configs VALUES (?, ?, ?, 0.0, 16, 0, 'v1', '{}', ?, ?)",
                    [fp, cfg["model"], cfg["shape"], cfg["standin"], T0],
                )
            if gen:
                con.register("b_gen", gen_df)
                con.execute(
                    "INSERT INTO gen_rows (row_id, arm, item_id, orientation, sample, question, options, gold_letter,"
                    " generation, is_blank, option_logprobs, user_letter, naive_letter, strict_letter, ingest_id,"
                    " reasoning, finish_reason, truncated)"
                    " SELECT row_id, arm, item_id, orientation, sample, question, options, gold_letter, generation,"
                    " is_blank, option_logprobs::JSON, user_letter, naive_letter, strict_letter, 1,"
                    " reasoning, finish_reason, truncated FROM b_gen"
                )
            if verdicts:
                con.register("b_jv", jv_df)
                con.execute(
                    "INSERT INTO judge_verdicts (row_id, fingerprint, status, letter, verdict, reply, judged_at)"
                    " SELECT row_id, fingerprint, status, letter, verdict, reply, ? FROM b_jv",
                    [T0],
                )
            for k, (row_id, verdict, letter) in enumerate(self.reviews, start=1):
                con.execute(
                    "INSERT INTO reviews (review_id, row_id, action, verdict, picked_letter, reviewer, created_at)"
                    " VALUES (?, ?, 'override', ?, ?, 'tester', ?)",
                    [k, row_id, verdict, letter, T0],
                )
            for q, (strategy, row_ids) in enumerate(self.spot, start=1):
                con.execute(
                    "INSERT INTO spot_checks (queue_id, name, strategy, seed, size, arms, created_by, created_at)"
                    " VALUES (?, ?, ?, 0, ?, NULL, 'tester', ?)",
                    [q, f"q{q}", strategy, len(row_ids), T0],
                )
            # the ids written above are taken from their sequences too, so that a review or a queue added to
            # the study later gets the next one (a queue written as 1 left `reviews queue` colliding with it)
            for seq, used in (("review_seq", len(self.reviews)), ("queue_seq", len(self.spot))):
                if used:
                    con.execute(f"SELECT max(nextval('{seq}')) FROM range({used})").fetchall()
            if spot_rows:
                con.register("b_spot", spot_df)
                con.execute("INSERT INTO spot_check_rows SELECT queue_id, position, row_id FROM b_spot")
            if len(pl_df):
                con.register("b_pl", pl_df)
                con.execute("INSERT INTO parser_letters SELECT row_id, parser, letter FROM b_pl")
            for key, value in self.meta.items():
                con.execute("DELETE FROM study_meta WHERE key = ?", [key])
                con.execute("INSERT INTO study_meta VALUES (?, ?)", [key, value])
            rebuild_current(con)  # the verdicts and reviews were written with SQL of our own
        return study


# --- studies built through the public path (ingest, then grade against the stand-in) ----------------------
def build_graded_study(
    path: Path, generations: Path, *, items: Path | None = None, control: str | None = "base", judge: bool = True
) -> Path:
    """Ingest a generations file (and its items file) into a new study at ``path`` through the real
    ``ingest_file``, then grade it with the real ``grade`` against the stand-in judge on 127.0.0.1 (a
    heuristic, not an LLM: none can be reached here). Rows the stand-in cannot read end as ``error``, as with
    any judge."""
    from mcqaudit.app.grade import GradeOptions, grade
    from mcqaudit.app.ingest import ingest_file
    from mcqaudit.judge.prompts import JudgeConfig
    from mcqaudit.standin.server import StandinServer
    from mcqaudit.vocab import STANDIN_MODEL

    study = Study(path, create=True)
    ingest_file(study, generations, items_path=items, control=control)
    if judge:
        with StandinServer() as server:
            summary = grade(study, GradeOptions(config=JudgeConfig(model=STANDIN_MODEL), base_url=server.base_url))
        assert summary.exit_code in (0, 3), summary.lines()
    return path


def write_inputs(folder: Path, items: list[dict[str, Any]], generations: list[dict[str, Any]]) -> tuple[Path, Path]:
    """``items.jsonl`` and ``generations.jsonl`` in ``folder`` (created); returns (generations, items)."""
    folder.mkdir(parents=True, exist_ok=True)
    items_path, gens_path = folder / "items.jsonl", folder / "generations.jsonl"
    items_path.write_text("".join(json.dumps(x) + "\n" for x in items), encoding="utf-8")
    gens_path.write_text("".join(json.dumps(x) + "\n" for x in generations), encoding="utf-8")
    return gens_path, items_path


def write_ui_inputs(folder: Path) -> tuple[Path, Path]:
    """The dashboard fixture study's input files (tests/ui_study.py) in ``folder``: (generations, items)."""
    from tests import ui_study

    return write_inputs(folder, ui_study.items(), ui_study.generations())


# Studies built through the public path once per test session, by what they were built from; every caller gets
# its own copy (a test may change its study). Grading through the stand-in is what makes these builds slow.
_TEMPLATES: dict[tuple[object, ...], Path] = {}


def _templates_dir() -> Path:
    import atexit
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="mcqaudit-test-studies-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _built_once(key: tuple[object, ...], path: Path, build: Callable[[Path], Path]) -> Path:
    """``build(path)`` the first time a session asks for ``key`` (into a template of its own), a copy of
    that template at ``path`` after: the same file a fresh build gives, with its inputs beside it (the
    ingest's recorded source names the copy's inputs, as a fresh build's would)."""
    import shutil

    template = _TEMPLATES.get(key)
    if template is None:
        template = build(_templates_dir() / "study" / "s.duckdb")
        _TEMPLATES[key] = template
    assert not path.exists(), f"{path} exists already"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(template.parent / "inputs", path.parent / "inputs", dirs_exist_ok=True)
    for suffix in ("", ".wal"):
        if template.with_name(template.name + suffix).exists():
            shutil.copyfile(template.with_name(template.name + suffix), path.with_name(path.name + suffix))
    with Study(path).write() as con:
        old, new = str(template.parent / "inputs"), str(path.parent / "inputs")
        con.execute("UPDATE ingests SET source = replace(source, ?, ?)", [old, new])
    return path


def build_ui_study(path: Path, *, grade_it: bool = True) -> Path:
    """The dashboard tests' fixture study (tests/ui_study.py); ``grade_it=False``: ingested only."""

    def build(at: Path) -> Path:
        gens, items = write_ui_inputs(at.parent / "inputs")
        return build_graded_study(at, gens, items=items, judge=grade_it)

    return _built_once(("ui", grade_it), path, build)


def build_review_study(
    path: Path, *, n_items: int = 40, orientations: tuple[str, ...] = ("ABCD", "BCDA", "CDAB", "DABC")
) -> Path:
    """The messy three-arm study of the review-session tests (tests/review_study.py)."""
    from tests import review_study

    def build(at: Path) -> Path:
        rows = review_study.generations(n_items, orientations)
        gens, items = write_inputs(at.parent / "inputs", review_study.items(n_items), rows)
        return build_graded_study(at, gens, items=items)

    return _built_once(("review", n_items, orientations), path, build)


def build_hostile_study(path: Path) -> Path:
    """The study whose every user-supplied text is hostile (tests/hostile_study.py), with reviews and a
    spot-check queue made through the public ``reviews import`` and ``reviews queue``."""
    from tests import hostile_study
    from tests.helpers import run_cli

    inputs = path.parent / "inputs"
    gens, items = write_inputs(inputs, *hostile_study.rows())
    build_graded_study(path, gens, items=items)
    ids = [r[0] for r in Study(path).query("SELECT row_id FROM graded_rows ORDER BY row_id LIMIT 12")]
    labels = inputs / "labels.jsonl"
    labels.write_text("".join(json.dumps(x) + "\n" for x in hostile_study.labels(ids)), encoding="utf-8")
    run_cli("reviews", "import", str(labels), "--db", str(path), check=True)
    q = hostile_study.QUEUE
    run_cli("reviews", "queue", "--db", str(path), "--size", "4", "--per-arm", "--name", q, "--reviewer",
            hostile_study.REVIEWER, check=True)  # fmt: skip
    return path


# --- studies written by hand into the tables ---------------------------------------------------------------
def fixture_study(
    path: Path, *, standin: bool = False, arm_names: tuple[str, str, str] | None = None
) -> StudyBuilder:
    """3 arms × 24 four-option items × 4 cyclic orientations (288 rows), seeded.

    base: accurate; steered: prefers the first displayed option; hedging: refuses more (OTHER), which the
    naive parser reads as a letter. Some rows are pre-filter resolved, one generation is blank, one judge
    call failed, the user's parser is given, one framework parser, log-probs on base, and six reviews
    inside a uniform spot check.
    """
    base, steered, hedging = arm_names or ("base", "steered", "hedging")
    rng = np.random.default_rng(2026)
    b = StudyBuilder(path)
    b.config("fp-golden", model="judge-golden", standin=standin)
    labels = orient.scheme_labels(4, "cyclic")
    spot: list[str] = []
    for k in range(24):
        item = b.item(f"q{k:02d}", n=4, gold=k % 4)
        for lab in labels:
            gold = b.gold_letter(item, lab)
            wrong = "ABCD"[("ABCD".index(gold) + 1 + k % 3) % 4]
            u = rng.random(3)
            # base
            pick = gold if u[0] < 0.8 else wrong
            src = "strict" if k % 5 == 0 else "judge"
            lp = {"A": -1.0, "B": -1.5, "C": -2.0, "D": -2.5}
            lp[gold] = -0.5 if u[0] < 0.9 else -3.0
            rid = b.row(base, item, lab, pick, source=src, fp="fp-golden", user="same", logprobs=lp,
                        frameworks={"simple_evals": pick if k % 6 else "A"})  # fmt: skip
            if k % 4 == 1:
                spot.append(rid)
            # steered: the first option a third of the time, else like base
            pick = "A" if u[1] < 0.35 else (gold if u[1] < 0.8 else wrong)
            rid = b.row(
                steered, item, lab, pick, fp="fp-golden", user="same", frameworks={"simple_evals": pick}
            )
            if k % 4 == 1:
                spot.append(rid)
            # hedging: OTHER a quarter of the time; naive reads "As an AI..." as A
            if k == 3 and lab == "BCDA":
                b.row(hedging, item, lab, None, status="error", fp="fp-golden", user="same")
                continue
            if k == 7 and lab == "ABCD":
                b.row(hedging, item, lab, "OTHER", source="blank", naive=None, user=None)
                continue
            pick = "OTHER" if u[2] < 0.25 else (gold if u[2] < 0.85 else wrong)
            b.row(hedging, item, lab, pick, fp="fp-golden", naive="A" if pick == "OTHER" else "same", user="same",
                  frameworks={"simple_evals": None if pick == "OTHER" else pick})  # fmt: skip
    b.spot.append(("uniform", spot))
    for rid in spot[:5]:
        b.review(rid, "CORRECT")
    b.review(spot[5], "OTHER")
    return b


# (generation, the judge's pick, the naive letter read by hand, a framework letter or "-" for not run)
# Gold is A in every row (4 options, orientation ABCD). The naive parser takes the first letter of [A-Da-d].
HAND = [
    ("I'd go with B.", "B", "D", "-"),  # the d of I'd: another letter (both INCORRECT: verdicts agree)
    ("Answer: C", "C", "A", "C"),  # the A of Answer: another letter (naive says CORRECT)
    ("Clearly the answer is A.", "A", "C", None),  # the C of Clearly: another letter; simple_evals missed it
    ("Both B and D seem right.", "OTHER", "B", None),  # the B of Both: a letter made up for an OTHER answer
    ("I cannot answer this.", "OTHER", "C", "-"),  # the c of cannot: made up
    ("B", "B", "B", "-"),
    ("I'd say C", "C", "D", "-"),  # another letter, and another wrong one: the verdicts agree
    ("(B) is it", "B", "B", "-"),
    ("Option 4 is right.", "D", None, "-"),  # no letter in range: missed
    ("Nothing fits.", "OTHER", None, "-"),  # none for none: agreement
]
UNKNOWN = ("Probably A", "A", "B")  # reviewed CORRECT without a letter: its reference is unknown


def hand_study(tmp_path: Path, name: str = "s.duckdb") -> StudyBuilder:
    b = StudyBuilder(tmp_path / name)
    for k, (text, pick, naive_hand, fw) in enumerate(HAND):
        naive = parsers.naive(text, 4)
        assert naive == naive_hand, (text, naive)  # the real parser reads what the hand count says
        b.item(f"i{k}", n=4)
        frameworks = {} if fw == "-" else {"simple_evals": fw}
        b.row("base", f"i{k}", "ABCD", pick, naive=naive, generation=text, frameworks=frameworks)
    b.item("i10", n=4)
    rid = b.row("base", "i10", "ABCD", "A", naive=parsers.naive(UNKNOWN[0], 4), generation=UNKNOWN[0])
    b.review(rid, "CORRECT")  # no letter given
    b.item("i11", n=4)
    b.row("base", "i11", "ABCD", "A", source="strict")  # the pre-filter resolved it
    return b


MANY_ARMS = (
    "qwen2.5-7b-instruct_baseline",
    *(f"qwen2.5-7b-instruct_steer-sycophancy_L{layer}_a{a}" for layer in (12, 18) for a in ("0.25", "0.50", "1.00")),
    "qwen2.5-7b-instruct_sft-on-refusals_lr2e-5_ep3",
)


def many_arm_study(path: Path) -> StudyBuilder:
    """8 arms of one model (long names sharing a long start: several steering settings, a fine-tune), 40
    four-option items × 4 cyclic orientations, seeded; each treated arm skips about 30 % of the items (few shared
    items), the sft arm answers every row it has correctly (100.0 %), the others drift toward OTHER."""
    rng = np.random.default_rng(7)
    b = StudyBuilder(path)
    b.config("fp-a", model="judge-x")
    labels = orient.scheme_labels(4, "cyclic")
    for k in range(40):
        item = b.item(f"mmlu-pro/{('law', 'physics', 'history')[k % 3]}/{k:04d}", n=4, gold=k % 4)
        for a, arm in enumerate(MANY_ARMS):
            if a > 0 and rng.random() < 0.3:
                continue
            for lab in labels:
                gold = b.gold_letter(item, lab)
                u = rng.random()
                wrong = "ABCD"[("ABCD".index(gold) + 1) % 4]
                pick = gold if u < 0.7 - 0.04 * a else ("OTHER" if u > 0.93 - 0.03 * a else wrong)
                b.row(arm, item, lab, gold if arm.startswith("qwen2.5-7b-instruct_sft") else pick)
    return b


def two_family_study(
    path: Path, two: dict[str, tuple[int, int]], four: dict[str, tuple[int, int]]
) -> StudyBuilder:
    """40 two-option items (gold canonical A or B, alternately) shown as AB and BA, and 40 four-option items
    (gold A–D in turn) in the four cyclic rotations. ``two`` / ``four`` map an orientation to how many of
    every 10 items (in item order) base and steered answer correctly there; the rest pick a wrong option.
    Correctness never depends on the displayed gold letter: the study has no letter preference at all."""
    b = StudyBuilder(path)

    def answer(arm: str, item: str, lab: str, right: bool) -> None:
        gold = b.gold_letter(item, lab)
        b.row(arm, item, lab, gold if right else ("B" if gold == "A" else "A"))

    for n, spec, labels in ((2, two, ("AB", "BA")), (4, four, tuple(orient.scheme_labels(4, "cyclic")))):
        for k in range(40):
            item = b.item(f"i{n}-{k:02d}", n=n, gold=k % n)
            for lab in labels:
                base, steered = spec[lab]
                answer("base", item, lab, (k // n) % 10 < base)
                answer("steered", item, lab, (k // n) % 10 < steered)
    return b


NO_POSITION_EFFECT = (
    {"AB": (8, 5), "BA": (8, 5)},  # 2-option items: base 80 %, steered 50 % in both orientations (−30 pp)
    {lab: (4, 7) for lab in orient.scheme_labels(4, "cyclic")},  # 4-option: 40 % → 70 % everywhere (+30 pp)
)


def frames_of(b: StudyBuilder, verdicts: str = "final") -> StudyFrames:
    """The :class:`~mcqaudit.metrics.StudyFrames` that :func:`mcqaudit.store.frames.load_frames` reads off
    ``b.build()``, built in memory with no study file (for the metric tests that are about the metrics, not
    the store): the same codes, the same rules (:mod:`mcqaudit.vocab`'s twins of the SQL macros, the
    final-verdict precedence of docs/design.md §1) and the same study facts. Rows come in the builder's order;
    ``tests/test_metrics.py`` checks the two against each other."""

    def pos(letter: str | None) -> int:
        return -1 if letter is None else ord(letter) - 65

    arms = arm_order(b.arms, {a: k for k, a in enumerate(b.arms)})
    orientations = sorted({r["orientation"] for r in b.rows}, key=lambda o: (len(o), o))
    item_ids = sorted({r["item_id"] for r in b.rows})
    judged = {r["row_id"]: r["status"] for r in b.rows if r["source"] == "judge" and r["status"] != "pending"}
    fps = sorted({r["fp"] for r in b.rows if r["row_id"] in judged})
    reviews: dict[str, tuple[str, str | None]] = {}
    for row_id, verdict, letter in b.reviews:  # the latest review of a row is in force
        reviews[row_id] = (verdict, letter)
    uniform = {rid for strategy, ids in b.spot if strategy == "uniform" for rid in ids}
    frameworks = sorted({name for _, name, _ in b.parser_rows if name not in ("strict", "naive", "user")})
    names = ("ai", "oi", "ii", "sample", "gold_pos", "n_opt", "verdict", "pick_pos", "auto_verdict", "human",
             "strict_pos", "naive_pos", "user_pos", "fp", "truncated", "uniform")  # fmt: skip
    cols: dict[str, list[int]] = {k: [] for k in names}
    pending: list[bool] = []
    index: dict[str, int] = {}
    lp_rows: list[int] = []
    lp_pos: list[int] = []
    for n, r in enumerate(b.rows):
        index[r["row_id"]] = n
        gold = b.gold_letter(r["item_id"], r["orientation"])
        blank = r["source"] == "blank"
        strict = r["letter"] if r["source"] == "strict" else None
        judged_ok = judged.get(r["row_id"]) == "ok"
        jv = verdict_of(r["letter"], gold) if judged_ok else None
        jl = r["letter"] if judged_ok and r["named"] else None
        rv, rl = reviews.get(r["row_id"], (None, None))
        rule = verdict_of(strict, gold) if strict is not None else ("OTHER" if blank else None)
        auto, auto_letter = (jv, jl) if jv is not None else (rule, strict)
        final, final_letter = (rv, rl) if rv is not None else (auto, auto_letter)
        v, pick = (final, final_letter) if verdicts == "final" else (auto, auto_letter)
        code = VerdictCode.of(v)
        values = {
            "ai": arms.index(r["arm"]), "oi": orientations.index(r["orientation"]),
            "ii": item_ids.index(r["item_id"]), "sample": r["sample"], "gold_pos": pos(gold),
            "n_opt": len(r["orientation"]), "verdict": code, "pick_pos": pos(pick),
            "auto_verdict": VerdictCode.of(auto), "human": VerdictCode.of(rv), "strict_pos": pos(strict),
            "naive_pos": pos(r["naive"]), "user_pos": pos(r["user"]),
            "fp": fps.index(r["fp"]) if judged_ok else -1, "uniform": r["row_id"] in uniform,
            "truncated": r["truncated"],
        }  # fmt: skip
        for k, x in values.items():
            cols[k].append(int(x))
        pending.append(code == VerdictCode.NONE and judged.get(r["row_id"], "pending") != "error")
        if (lp := _logprob_pick(r["logprobs"])) is not None:
            lp_rows.append(n)
            lp_pos.append(lp)
    rows = Columns(
        {k: np.asarray(v, dtype=bool if k in ("uniform", "truncated") else np.int64) for k, v in cols.items()}
    )
    fw = [
        (index[rid], frameworks.index(name), pos(lt)) for rid, name, lt in b.parser_rows if name in frameworks
    ]
    framework = (
        Columns({"parser": np.asarray([p for _, p, _ in fw], dtype=np.int8),
                 "pos": np.asarray([x for _, _, x in fw], dtype=np.int8),
                 "row": np.asarray([k for k, _, _ in fw], dtype=np.int64)})
        if frameworks else None
    )  # fmt: skip
    logprob = Columns(
        {"lp_pos": np.asarray(lp_pos, dtype=np.int8), "row": np.asarray(lp_rows, dtype=np.int64)}
    )
    ai, fp = rows["ai"].astype(np.int64), rows["fp"].astype(np.int64)
    arm_fps: dict[str, dict[str, int]] = {}
    for a, k in zip(ai[fp >= 0], fp[fp >= 0], strict=True):
        by = arm_fps.setdefault(arms[a], {})
        by[fps[k]] = by.get(fps[k], 0) + 1
    by_pending = np.bincount(ai[np.asarray(pending, dtype=bool)], minlength=len(arms))
    parsers = ["strict", "naive", *(["user"] if (rows["user_pos"] >= 0).any() else []), *frameworks]
    info = StudyInfo(
        path=str(b.path),
        created=None,
        unaudited=(b.meta.get("unaudited") or "").lower() == "true",
        arms=arms,
        orientations=orientations,
        stored_control=b.meta.get("control_arm"),
        n_items=len(item_ids),
        rows_by_arm={a: int(n) for a, n in zip(arms, np.bincount(ai, minlength=len(arms)), strict=True)},
        judge_configs={
            fp: {"model": c["model"], "shape": c["shape"], "temperature": 0.0, "standin": c["standin"]}
            for fp, c in sorted(b.configs.items())
        },
        arm_fingerprints={a: dict(sorted(arm_fps[a].items())) for a in arms if a in arm_fps},
        n_reviews=len(reviews),
        uniform_spot_check_rows=int(rows["uniform"].sum()),
        pending_by_arm={a: int(n) for a, n in zip(arms, by_pending, strict=True) if n},
        parsers=parsers,
        frameworks=frameworks,
        reviewers=["tester"] if b.reviews else [],  # every review the builder writes is the tester's
    )
    return StudyFrames(info=info, verdicts=verdicts, rows=rows, framework=framework, logprob=logprob)


def _logprob_pick(logprobs: dict[str, float] | None) -> int | None:
    """The frames' ``lp_pos`` of a row's option_logprobs (store/frames.py): the 0-based position of the
    single-letter key (any case) with the largest finite value, -1 for a tie; None without such a key."""
    lps = {
        k.upper(): float(x) for k, x in (logprobs or {}).items() if len(k) == 1 and "A" <= k.upper() <= "Z"
    }
    lps = {k: x for k, x in lps.items() if math.isfinite(x)}
    if not lps:
        return None
    top = max(lps.values())
    best = {ord(k) - 65 for k, x in lps.items() if x == top}
    return best.pop() if len(best) == 1 else -1
