"""The `mcqaudit` command line: thin commands over the Python API (orient, ingest, info, grade, report, ...).

Exit status: 0 success; 1 bad input or a failure; 2 usage errors (bad flags, no judge configured);
3 grading left rows in `error` (see `grade --help`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from mcqaudit import __version__
from mcqaudit.files import WriteFailed, write_atomic
from mcqaudit.terminal import visible
from mcqaudit.vocab import VERDICT_VIEWS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from mcqaudit.app.grade import BatchDryRun, CostEstimate, DryRun, GradeOptions, JudgeConfig, Submission
    from mcqaudit.app.info import InfoFacts
    from mcqaudit.app.ingest import Group, IngestResult, InputError
    from mcqaudit.app.ingest import Progress as IngestProgress
    from mcqaudit.app.study import Study
    from mcqaudit.metrics.results import Flag, Report
    from mcqaudit.vocab import VerdictView

app = typer.Typer(
    name="mcqaudit",
    help=(
        "Grade and audit multiple-choice LLM evaluations whose answer letter must be read out of free text.\n\n"
        "A regex like [A-D] on prose fabricates results ('At the garden...' parses as A). mcqaudit uses a "
        "strict regex only as a pre-filter, sends everything else to an LLM judge that answers CORRECT / "
        "INCORRECT / OTHER (never coerced), asks every item in several option orders (orientations) to expose "
        "position bias, and keeps every row for a person to confirm or override.\n\n"
        "Typical flow:\n\n"
        "  mcqaudit orient items.jsonl --out prompts.jsonl     # option orders + prompts\n\n"
        "  (run your model on prompts.jsonl -> generations.jsonl)\n\n"
        "  mcqaudit ingest generations.jsonl --db study.duckdb\n\n"
        "  mcqaudit grade --db study.duckdb --judge-model M --judge-base-url URL\n\n"
        "  mcqaudit report --db study.duckdb --format html --out report.html\n\n"
        "  mcqaudit dashboard study.duckdb"
    ),
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    add_completion=False,
)


class _Terminal(Console):
    """The CLI's console: every text it prints goes through :func:`mcqaudit.terminal.visible`, so names from
    a study (arms, models, reviewers, queues) in any message, summary or error reach the screen as the
    characters they are, never as terminal controls (issue 18). Tables go through :func:`_table`."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*(visible(o) if isinstance(o, str) else o for o in objects), **kwargs)


console = _Terminal(soft_wrap=True)
err = _Terminal(stderr=True, soft_wrap=True, highlight=False)

DbOption = Annotated[
    Path,
    typer.Option("--db", help="The study file (DuckDB). Created by `ingest` if missing.", show_default=False),
]
DASHBOARD_PORT = 8501
DashboardPortOption = Annotated[
    int,
    typer.Option(
        "--port",
        help="The dashboard's port on 127.0.0.1 (also read from MCQAUDIT_DASHBOARD_PORT).",
        envvar="MCQAUDIT_DASHBOARD_PORT",
        min=1,
        max=65535,
    ),
]


def _version(value: bool) -> None:
    if value:
        console.print(f"mcqaudit {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    pass


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(message, markup=False, highlight=False)
    return typer.Exit(code)


@contextlib.contextmanager
def _exits(*, secret: str = "", failed: str | None = None, stopped: str | None = None) -> Iterator[None]:
    """The one mapping from what a use case raises to what a command prints and exits with
    (:mod:`mcqaudit.app.errors`): a usage error is one ``error:`` line and exit 2, a refusal one line and
    exit 1; Ctrl-C exits 130 and a SIGTERM 143, after ``stopped`` says what is kept and how to go on
    (``interrupted: …`` or the stop's reason); anything else, when ``failed`` names the operation, is
    ``error: {failed} failed: Type: reason`` and exit 1 — never a traceback. Every message is scrubbed of the
    command's ``secret`` (an API key)."""
    try:
        yield
    except typer.Exit:
        raise
    except (Exception, KeyboardInterrupt) as exc:
        from mcqaudit.app.errors import exit_code, scrub

        code = exit_code(exc)
        if code in (130, 143):
            if stopped is not None:
                why = "interrupted" if code == 130 else str(exc)
                err.print(f"{why}: {stopped}", markup=False, highlight=False)
            raise typer.Exit(code) from None
        if code is not None:
            raise _fail(f"error: {scrub(str(exc), secret)}", code) from None
        if failed is None:
            raise
        raise _fail(f"error: {failed} failed: {type(exc).__name__}: {scrub(str(exc), secret)}") from None


def _check_key_env(flag: str, env_name: str, base_url: str | None) -> None:
    """Refuse a key-variable value that is neither set nor shaped like a variable name, without repeating
    it: it is most likely the key itself, pasted where its variable's name belongs (issue 13)."""
    from mcqaudit.app.grade import key_variable_plausible

    if key_variable_plausible(env_name, base_url):
        return
    raise _fail(
        f"error: {flag} takes the NAME of an environment variable that holds the API key; the value given is "
        "not a set variable and does not look like a variable name, so it is not repeated here (it may be "
        f"the key itself). Put the key in a variable (export OPENAI_API_KEY=...) and pass {flag} OPENAI_API_KEY",
        2,
    )


def _write_out(out: Path, content: str | bytes | Iterable[str]) -> None:
    """Write an output file whole or not at all; a failure is one clear line and exit 1, never a traceback."""
    with _exits():
        write_atomic(out, content)


def _open_study(db: Path, create: bool = False, *, say_replayed: bool = True) -> Study:
    """The study (:func:`mcqaudit.app.study.open_study`), or one clear line and exit 1. Opening it for
    writing replays what a stopped or killed run left in its journal: said here on stderr, unless the command
    says it itself (``say_replayed=False``: `info` in its journal section, an online `grade` in its summary)."""
    from mcqaudit.app.study import open_study

    with _exits():
        study = open_study(db, create=create)
    if say_replayed and (line := _replayed_line(study)):
        err.print(line, markup=False, highlight=False)
    return study


def _replayed_line(study: Study) -> str | None:
    """What opening ``study`` wrote in from its journal, once (it is then forgotten), or None."""
    from mcqaudit.app.study import JUDGED, take_replayed

    done = take_replayed(study)
    if done is None or not done.total:
        return None
    n = done.records.get(JUDGED, 0)
    what = f"{n} judge replies" + (f" and {done.total - n} other records" if done.total > n else "")
    return (
        f"recovered: {what} that an earlier run had received but not yet written (it was stopped or killed) "
        "were written into the study from its journal"
    )


# --------------------------------------------------------------------------------------------- orient
@app.command()
def orient(
    items: Annotated[
        Path,
        typer.Argument(
            help="Items JSONL: item_id, question, options (canonical order), gold (letter or 0-based index), optional metadata.",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Where to write the prompt rows (JSONL).", show_default=False)
    ],
    scheme: Annotated[
        str,
        typer.Option(
            help="cyclic (n rotations: each option once at each position), swap (A/B swap; first/last swap for n>2), all (all n! orders, at most 6 options), or random:K (K distinct orders, reproducible with --seed)."
        ),
    ] = "cyclic",
    seed: Annotated[int, typer.Option(help="Seed for random:K.")] = 0,
    template: Annotated[
        Path | None,
        typer.Option(
            help="Prompt template file using {question} and {options}; default: a built-in template asking for one letter.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Turn an items file into one prompt row per item and orientation.

    Each output row has item_id, question, options (displayed order), gold (displayed letter),
    orientation (canonical letters in displayed order, e.g. BCDA) and prompt: everything a generations
    file needs except arm and generation.
    """
    from mcqaudit.app.ingest import InputError, read_items
    from mcqaudit.orient import DEFAULT_TEMPLATE, orient_item, scheme_labels

    try:
        all_items = read_items(items)
    except InputError as exc:
        raise _fail(f"error: bad items file:\n{exc}") from None
    tmpl = DEFAULT_TEMPLATE
    if template is not None:
        try:
            tmpl = template.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _fail(f"error: {template}: cannot read the template: {exc}") from None
        missing = [k for k in ("{question}", "{options}") if k not in tmpl]
        if missing:
            raise _fail(f"error: {template}: the template lacks {' and '.join(missing)}", 2)
    rows = []
    with _exits():
        for it in all_items:
            rows.extend(orient_item(it, scheme_labels(len(it.options), scheme, seed), tmpl))
    _write_out(out, (json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    console.print(f"{len(all_items)} items -> {len(rows)} prompt rows ({scheme}) in {out}")


# --------------------------------------------------------------------------------------------- generate
@app.command()
def generate(
    prompts: Annotated[
        Path,
        typer.Argument(help="Prompt rows (JSONL) from `mcqaudit orient`: item_id, question, options, gold, "
                       "orientation, prompt.", show_default=False),
    ],
    model: Annotated[str, typer.Option("--model", help="The model to evaluate, as the endpoint names it.",
                                       show_default=False)],
    base_url: Annotated[
        str,
        typer.Option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (vLLM, "
                     "llama.cpp, Ollama, ...) or https://api.openai.com/v1.", show_default=False),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", "-o", help="The generations file (JSONL) to write or, when it exists, to "
                     "complete: rows already there are skipped.", show_default=False),
    ],
    arm: Annotated[
        str | None,
        typer.Option(help="The arm of the rows written. Default: a prompt row's own `arm`, else the model name.",
                     show_default=False),
    ] = None,
    concurrency: Annotated[int, typer.Option(help="Requests in flight.")] = 16,
    api_key_env: Annotated[
        str,
        typer.Option("--api-key-env", help="NAME of the environment variable holding the API key (read at run "
                     "time; the key is never stored, logged or printed). A local server (127.0.0.1) needs none."),
    ] = "OPENAI_API_KEY",
    temperature: Annotated[float, typer.Option(help="Sampling temperature (0 to 2).")] = 0.0,
    samples: Annotated[
        int, typer.Option(help="Generations per prompt row, written as sample 0..K-1 (use a temperature above 0).")
    ] = 1,
    max_tokens: Annotated[
        int,
        typer.Option("--max-tokens", help="Max tokens per generation (a reasoning model's thinking counts; the "
                     "summary says how many replies it cut: finish_reason length)."),
    ] = 1024,
    seed: Annotated[
        int | None,
        typer.Option(help="Seed sent with each request, as S + sample index (honoured where the endpoint "
                     "supports seeds). Default: none sent.", show_default=False),
    ] = None,
    max_retries: Annotated[
        int, typer.Option("--max-retries", help="Retries per request on 429, 5xx, timeouts (backoff; retry-after honoured).")
    ] = 5,
    timeout: Annotated[float, typer.Option(help="Per-request timeout in seconds.")] = 120.0,
    logprobs: Annotated[
        bool,
        typer.Option("--logprobs/--no-logprobs", help="Ask for the first token's top-20 log-probs and write the "
                     "option letters' ones as option_logprobs (for the report's log-prob cross-check). An "
                     "endpoint that refuses them (HTTP 400) is asked without."),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run summary as JSON on stdout.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Run a model on the prompt rows: one generation per prompt row and sample, written as rows that
    `mcqaudit ingest` reads (the prompt row's fields plus arm, sample, generation, model and, where the
    endpoint returns them, option_logprobs; a reasoning model's reasoning_content or reasoning field as
    reasoning, the reply's finish_reason and usage).

    Resumable: rows are appended and flushed one at a time, so a killed run leaves a valid file (a torn last
    line is dropped by the next run), and a re-run with the same arguments sends only what the file lacks.
    Retries with backoff on 429, 5xx and timeouts; a request that still fails writes nothing and a re-run
    retries it.

    Exit status: 0 every row written; 3 some generations failed (a re-run retries them); 2 usage errors (bad
    flags, no API key for a remote endpoint, an output file from another model); 1 anything else (bad prompt
    rows, the endpoint refusing every request).
    """
    from mcqaudit.app.generate import GenerateOptions, InputError, secret_for
    from mcqaudit.app.generate import generate as run_generate

    options = GenerateOptions(model=model, base_url=base_url, arm=arm, api_key_env=api_key_env,
                              concurrency=concurrency, temperature=temperature, samples=samples,
                              max_tokens=max_tokens, seed=seed, timeout_s=timeout, max_retries=max_retries,
                              logprobs=logprobs)  # fmt: skip
    with _exits():
        options.validate()
    _check_key_env("--api-key-env", api_key_env, base_url)
    secret = secret_for(options)
    with _exits(secret=secret, failed="generate",
                stopped=f"every generation received is in {out}; re-run the same command to continue"):
        try:
            summary = run_generate(prompts, out, options,
                                   reporter=None if quiet or as_json else GradeProgress(err, label="generating"))  # fmt: skip
        except InputError as exc:  # a list of problems: said here, whole
            err.print(f"error: {prompts}: {exc.total} problem(s); nothing sent", markup=False, highlight=False)
            raise _fail(str(exc)) from None
    if as_json:
        sys.stdout.write(json.dumps(summary.as_json(), indent=2) + "\n")
    else:
        for line in summary.lines():
            console.print(line, markup=False, highlight=False)
    raise typer.Exit(summary.exit_code)


# --------------------------------------------------------------------------------------------- ingest
@app.command()
def ingest(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Generation files: .jsonl, .csv or .parquet (fields: docs/design.md §3 / README 'Input rows'), "
            "Inspect AI logs (.eval, .json) or lm-evaluation-harness samples_*.jsonl files.",
            show_default=False,
        ),
    ],
    db: DbOption,
    arm: Annotated[
        str | None,
        typer.Option(help="Arm for rows that have no `arm` field (a row whose arm differs is an error)."),
    ] = None,
    items: Annotated[
        Path | None, typer.Option(help="Items JSONL fixing each item's canonical option order and gold.")
    ] = None,
    skip_bad: Annotated[
        bool,
        typer.Option(
            "--skip-bad", help="Load the good rows and keep each bad one, with its reason, in rejected_rows."
        ),
    ] = False,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Overwrite rows whose (arm, item, orientation, sample) exists with a different generation; their judge verdicts are dropped and reviews retracted.",
        ),
    ] = False,
    control: Annotated[
        str | None, typer.Option(help="Mark this arm as the control arm of the study.")
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="jsonl, csv, parquet, inspect (an Inspect AI .eval or .json log) or lm-eval (an "
            "lm-evaluation-harness samples_*.jsonl file); default: from the extension, and for .json/.jsonl "
            "from the first line. Without --arm, a framework log's rows take the log's model name as their arm.",
        ),
    ] = None,
    lm_eval_filter: Annotated[
        str | None,
        typer.Option(
            "--lm-eval-filter",
            help="lm-eval only: the filter (filter_list name, e.g. strict-match) whose result is the `user` "
            "parser's letter; default: the file's first filter.",
            show_default=False,
        ),
    ] = None,
    framework_parsers: Annotated[
        bool,
        typer.Option(
            "--framework-parsers/--no-framework-parsers",
            help="Also run the known framework patterns (simple_evals, lm_eval_flexible, opencompass_first_option, "
            "mmlu_pro_chain), so you can see what your framework would have reported. The slowest step on "
            "very large files.",
        ),
    ] = True,
    maps: Annotated[
        list[str] | None,
        typer.Option(
            "--map",
            metavar="FIELD=COLUMN",
            help="Read FIELD from a column of another name (repeatable; JSONL, CSV, Parquet), e.g. "
            "--map generation=llm_output --map arm=model.",
            show_default=False,
        ),
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Load generation rows into a study file; run the strict, naive, user and framework parsers.

    Idempotent: a row's id comes from (arm, item_id, orientation, sample), so loading the same file twice
    changes nothing. Every problem is reported as FILE:LINE: field: reason, and a file with problems
    writes nothing (unless --skip-bad). Exits 1 when anything was rejected without --skip-bad.
    """
    from mcqaudit.app.ingest import IngestOptions, InputError, parse_maps
    from mcqaudit.app.ingest import ingest as run_ingest

    with _exits():  # usage errors exit 2, refusals 1 (app/errors.py)
        try:
            options = IngestOptions(
                arm=arm,
                items_path=items,
                skip_bad=skip_bad,
                replace=replace,
                control=control,
                fmt=fmt,
                lm_eval_filter=lm_eval_filter,
                framework_parsers=framework_parsers,
                maps=parse_maps(maps or []),
            )
            run = run_ingest(db, files, options, _IngestDisplay(quiet))
        except InputError as exc:  # inputs that cannot be read, before any study is created
            raise _fail("\n".join(f"error: {p}" for p in exc.problems)) from None
    if run.failed:
        raise typer.Exit(1)


class _IngestDisplay:
    """What `ingest` shows while it runs: a progress bar per load on stderr, each load's summary, and the
    problems of a load that wrote nothing (app/ingest.py `IngestHooks`)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet

    def opened(self, study: Any) -> None:
        if line := _replayed_line(study):
            err.print(line, markup=False, highlight=False)

    @contextlib.contextmanager
    def loading(self, group: Group) -> Iterator[IngestProgress]:
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TimeElapsedColumn(),
            console=err,
            disable=self.quiet,
            transient=True,
        ) as prog:
            name = group.arg.name
            task = prog.add_task(f"ingest {name}", total=None)

            def progress(stage: str, done: int, total: int | None) -> None:
                prog.update(task, description=f"{stage} {name}", completed=done, total=total)

            try:
                yield progress
            except BaseException:
                prog.stop()
                raise

    def loaded(self, group: Group, results: Sequence[IngestResult]) -> None:
        for res in results:
            _print_ingested(res)

    def failed(self, group: Group, error: InputError) -> None:
        if error.total == 1 and len(error.problems) == 1 and not str(error).count("\n"):
            err.print(f"error: {error}", markup=False, highlight=False)
        else:
            err.print(f"error: {group.arg}: {error.total} problem(s)", markup=False, highlight=False)
            err.print(str(error), markup=False, highlight=False)


def _print_ingested(res: IngestResult) -> None:
    from mcqaudit.app.scored import describe as describe_scored

    f = res.source
    parts = [f"{res.loaded} rows loaded"]
    if res.unchanged:
        parts.append(f"{res.unchanged} unchanged")
    if res.replaced:
        parts.append(f"{res.replaced} replaced")
    if res.duplicates_in_file:
        parts.append(f"{res.duplicates_in_file} identical duplicates ignored")
    if res.blank_lines:
        parts.append(f"{res.blank_lines} blank lines ignored")
    if res.with_reasoning:
        parts.append(f"{res.with_reasoning} with reasoning kept apart from the answer")
    if res.truncated:
        parts.append(f"{res.truncated} truncated (token limit or unclosed thinking)")
    if res.new_arms:
        parts.append("new arms: " + ", ".join(res.new_arms))
    console.print(f"{f}: " + "; ".join(parts), markup=False, highlight=False)
    if (scored := describe_scored(res.scored)) is not None:
        console.print(f"{f}: {scored}", markup=False, highlight=False)
    if res.rejected:
        err.print(
            f"{f}: {res.rejected} rows rejected (kept in rejected_rows; see `mcqaudit info`):",
            markup=False,
            highlight=False,
        )
        for p in res.problems[:20]:
            err.print(f"  {p}", markup=False, highlight=False)
        if res.problem_count > 20:
            err.print(f"  ... and {res.problem_count - 20} more", markup=False, highlight=False)


# --------------------------------------------------------------------------------------------- info
def _table(title: str, data: Any, index: bool = False) -> Table:
    """A table of a study's values (arm names among them): every cell, header and title is plain text,
    escaped as the console escapes (``terminal.visible``), never read as markup; a value wider than its
    column folds onto the next line, never cut (two arms named alike up to the cut would read as one). ``data``: a plain table
    (``columns`` and ``rows``, what `info` reads: no pandas) or a data frame (``index``: its index first)."""
    t = Table(title=_text(title), title_justify="left", show_lines=False)
    if hasattr(data, "iterrows"):
        cols = ([data.index.name or ""] if index else []) + [str(c) for c in data.columns]
        rows = [([str(idx)] if index else []) + [_cell(v) for v in row.tolist()] for idx, row in data.iterrows()]
    else:
        cols = [str(c) for c in data.columns]
        rows = [[_cell(v) for v in row] for row in data.rows]
    for c in cols:
        t.add_column(_text(c), overflow="fold")
    for vals in rows:
        t.add_row(*map(_text, vals))
    return t


def _text(value: str) -> Text:
    """A table cell, header or title: plain text (never markup), escaped as the console escapes."""
    return Text(visible(value, keep=""))


def _cell(v: object) -> str:
    """A table cell: counts as integers (a float column of counts printed 299.0), missing as blank."""
    if v is None or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


@app.command()
def info(
    db: DbOption,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the study's facts, judge fingerprints and judge_usage as JSON on stdout."),
    ] = False,
) -> None:
    """Summarise a study: arms, items, orientations, rows per arm x orientation, parser coverage,
    verdicts by source, judge fingerprints and what their replies cost (the tokens each reply's usage
    reported), diagnostics, open and collected batches (`grade --batch`), rejected rows."""
    from mcqaudit.app.info import info_facts, info_json

    if not db.exists():
        raise _fail(f"error: {db}: no such study file")
    # from info's cache when the study is unchanged since the last info (the study is not even opened), else
    # read from the opened study (its journal replayed first: the journal section says what it wrote in)
    with _exits(failed="info"):
        facts = info_facts(db)
    if as_json:
        sys.stdout.write(json.dumps(info_json(facts), indent=2, ensure_ascii=False) + "\n")
        return
    s = facts.summary
    console.print(f"[bold]study[/] {escape(str(s.path))}  (created {s.created})")
    console.print(
        f"{s.rows} rows, {s.items} items, arms: {', '.join(s.arms) or '-'}"
        f"  (control: {s.control_arm or 'not set'})",
        markup=False,
    )
    if s.unaudited:
        console.print("[yellow]unaudited: graded with --no-judge (strict pre-filter only)[/]")
    console.print(f"orientations: {', '.join(s.orientations) or '-'}", markup=False)
    if s.rows:
        console.print(_table("rows per arm x orientation", s.rows_by_arm_orientation))
        console.print(_table("parser coverage (rows where the parser reads a letter)", s.parser_coverage))
        console.print(_table("verdicts by source", s.verdicts))
    for extra in _INFO_SECTIONS:
        extra(facts)
    if s.rejected_total:
        console.print(_table(f"rejected rows ({s.rejected_total}; latest ingest first)", s.rejected))
    else:
        console.print("rejected rows: none")


# Later commands (grade, report) add their own sections to `info` here. Each reads what `info` read of the
# study (:class:`mcqaudit.app.info.InfoFacts`); one that needs the study itself opens it (``facts.open()``).
_INFO_SECTIONS: list[Callable[[InfoFacts], None]] = []


# --------------------------------------------------------------------------------------------- report
@app.command()
def report(
    db: DbOption,
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            help="json (the shape in docs/report-schema.md), md (Markdown tables), or html (one self-contained "
            "page with the plots; works offline).",
        ),
    ] = "json",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Write the report here instead of standard output.", show_default=False
        ),
    ] = None,
    control: Annotated[
        str | None,
        typer.Option(
            help="The control arm. Default: the study's stored choice, else an arm named control or base, "
            "else the first arm ingested.",
            show_default=False,
        ),
    ] = None,
    verdicts: Annotated[
        str,
        typer.Option(
            help="final: latest review, else judge, else pre-filter, else rule. judge: the automated verdict "
            "alone (judge, else pre-filter, else rule; reviews ignored). Rows without a verdict in the chosen "
            "view are ungraded and left out of every denominator."
        ),
    ] = "final",
    bootstrap: Annotated[
        int,
        typer.Option(
            "--bootstrap", help="Bootstrap resamples of items for the 95 % CIs (0: point estimates only)."
        ),
    ] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap; reported in the output.")] = 0,
    by: Annotated[
        list[str] | None,
        typer.Option(
            "--by",
            metavar="metadata.KEY",
            help="Results by subject: accuracy, OTHER rate, truncated rate and the Δs vs control per value of "
            "this metadata key, each with its CI and n (`by_group`); rows without the key form the group "
            "(none). Groups under 20 items are marked small: no Δ, no finding. Repeat for several keys.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Metrics, differences against the control arm and diagnostic flags, flags first.

    Confidence intervals resample items (paired across arms), never rows: an item shown in four
    orientations is one unit. Every difference carries its minimum detectable effect. The HTML and
    Markdown say when verdicts come from the heuristic stand-in judge or an unaudited (--no-judge) study.
    """
    from mcqaudit.report import FORMATS, render

    if fmt not in FORMATS:
        raise _fail(f"error: --format must be one of {', '.join(FORMATS)}, not {fmt!r}", 2)
    rep = _kept_report(db, control, verdicts, bootstrap, seed, by or ())
    if rep is None:
        from mcqaudit.app.report import computed_report

        study, view = _report_study(db, verdicts, bootstrap)
        try:
            rep = computed_report(study, control=control, verdicts=view, n_boot=bootstrap, seed=seed, by=by or ())
        except ValueError as exc:
            raise _fail(f"error: {exc}", 2) from None
    text = render(rep, fmt)
    if out is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        _write_out(out, text)
        n = len(rep["flags"])
        err.print(f"wrote {out} ({fmt}; {n} flag{'s' if n != 1 else ''})", markup=False, highlight=False)


def _kept_report(
    db: Path, control: str | None, verdicts: str, bootstrap: int, seed: int, by: Sequence[str] = ()
) -> Report | None:
    """The report these options gave on the study as it is now, when one is kept beside it (then nothing is
    opened, computed or imported beyond it: ``app/report_cache``); None for options that are not valid
    (:func:`_report_study` says why) or nothing kept."""
    from mcqaudit.app.report_cache import cached_report

    if verdicts not in VERDICT_VIEWS or bootstrap < 0:
        return None
    return cached_report(db, control, verdicts, bootstrap, seed, by=by)


def _report_study(db: Path, verdicts: str, bootstrap: int) -> tuple[Study, VerdictView]:
    """`report`'s and `check`'s options checked (a usage error: exit 2), then the study opened: the study
    and the verdict view."""
    from mcqaudit.app.report import verdict_view

    try:
        view = verdict_view(verdicts)
    except ValueError:
        raise _fail(f"error: --verdicts must be final or judge, not {verdicts!r}", 2) from None
    if bootstrap < 0:
        raise _fail("error: --bootstrap must be 0 or more", 2)
    if not db.exists():
        raise _fail(f"error: {db}: no such study file")
    return _open_study(db), view


# --------------------------------------------------------------------------------------------- check
@app.command()
def check(
    db: DbOption,
    fail_on: Annotated[
        str | None,
        typer.Option(
            "--fail-on",
            help="Comma-separated flag names to fail on (default: every flag), e.g. "
            "suspected_parser_artifact,orientation_instability.",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the result as JSON (study, fail_on, fired, not_checked, exit_code)."),
    ] = False,
    control: Annotated[
        str | None, typer.Option(help="The control arm, as for `report`.", show_default=False)
    ] = None,
    verdicts: Annotated[str, typer.Option(help="final or judge, as for `report`.")] = "final",
    bootstrap: Annotated[
        int, typer.Option("--bootstrap", help="Bootstrap resamples of items, as for `report`.")
    ] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
) -> None:
    """A gate for CI: exit 1 when a named flag fires (every flag when --fail-on is absent), printing each
    with its evidence; exit 0 when none does; 2 for usage errors (an unknown flag name among them).

    The flags are the report's (the same bootstrap as `mcqaudit report`, so the two agree).
    """
    from mcqaudit.app.check import UnknownFlag, check_report, fail_on_names

    try:
        names = fail_on_names(fail_on)
    except UnknownFlag as exc:
        raise _fail(f"error: --fail-on: {exc}", 2) from None
    rep = _kept_report(db, control, verdicts, bootstrap, seed)
    if rep is None:
        from mcqaudit.app.report import computed_report

        study, view = _report_study(db, verdicts, bootstrap)
        try:
            rep = computed_report(study, control=control, verdicts=view, n_boot=bootstrap, seed=seed)
        except ValueError as exc:
            raise _fail(f"error: {exc}", 2) from None
    res = check_report(rep, names)
    if as_json:
        sys.stdout.write(json.dumps(res.as_json(), indent=2, ensure_ascii=False) + "\n")
        sys.stdout.flush()
        raise typer.Exit(res.exit_code)
    for f in res.fired:
        arm = f" ({f['arm']})" if f.get("arm") else ""
        console.print(f"FAIL {f['name']}{arm}: {f['evidence']} (items {f['items']}, rows {f['rows']})", markup=False)
    checked = "every flag" if fail_on is None else ", ".join(res.fail_on)
    other = f"; fired but not checked: {_names(res.not_checked)}" if res.not_checked else ""
    if res.fired:
        n = len(res.fired)
        console.print(f"check failed: {n} flag{'s' if n != 1 else ''} fired ({_names(res.fired)}){other}", markup=False)
    else:
        console.print(f"check passed: no flag checked fired (checked: {checked}){other}", markup=False)
    raise typer.Exit(res.exit_code)


def _names(flags: Sequence[Flag]) -> str:
    """Flag names, each once, in order."""
    return ", ".join(dict.fromkeys(f["name"] for f in flags))


def _info_flags(facts: InfoFacts) -> None:
    flags, unchecked = facts.flags, facts.unchecked  # counts only: the bootstrap is `report`'s
    later = (
        f"{', '.join(unchecked)} read bootstrap CIs: `mcqaudit report` checks them" if unchecked else None
    )
    if not flags:
        console.print("diagnostics: no flag fired" + (f" ({later})" if later else ""), markup=False)
        return
    from mcqaudit.formatting import plural

    t = Table(title=f"diagnostics ({plural(len(flags), 'flag')}; details: `mcqaudit report`)", title_justify="left")
    for c in ("flag", "arm", "evidence"):
        t.add_column(c, overflow="fold")
    for f in flags:
        t.add_row(*map(_text, (f["name"], f.get("arm") or "", f["evidence"])))
    console.print(t)
    if later:
        console.print(f"not checked here: {later}", markup=False)


_INFO_SECTIONS.append(_info_flags)


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.1f} rows/s" if speed else "– rows/s")


class GradeProgress:
    """`grade`'s progress bar (a :class:`mcqaudit.grade.Reporter`; `generate` uses it too, labelled
    "generating"): rows done/total, rows/s, ETA, errors and tokens, on stderr."""

    def __init__(self, console: Console | None = None, label: str = "judging"):
        self.console = console or Console(stderr=True)
        self._progress = Progress(
            TextColumn(label),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("rows"),
            _RateColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("errors {task.fields[errors]}"),
            TextColumn("tokens {task.fields[tokens]}"),
            console=self.console,
        )
        self._task: TaskID | None = None

    def start(self, total: int, done: int) -> None:
        self._progress.start()
        self._task = self._progress.add_task("judge", total=total, completed=done, errors=0, tokens=0)

    def advance(self, rows: int, errors: int, tokens: int) -> None:
        if self._task is not None:
            task = self._progress.tasks[0]
            self._progress.update(
                self._task,
                advance=rows,
                errors=task.fields["errors"] + errors,
                tokens=task.fields["tokens"] + tokens,
            )

    def note(self, text: str) -> None:
        self._progress.console.print(text)

    def stop(self) -> None:
        self._progress.stop()


# --------------------------------------------------------------------------------------------- grade
@app.command()
def grade(
    db: DbOption,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge-model",
            envvar="MCQAUDIT_JUDGE_MODEL",
            help="The judge model. Required: the judge is part of the metric, so mcqaudit never picks one.",
            show_default=False,
        ),
    ] = None,
    judge_base_url: Annotated[
        str | None,
        typer.Option(
            "--judge-base-url",
            envvar="MCQAUDIT_JUDGE_BASE_URL",
            help="OpenAI-compatible endpoint, e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1. "
            "Recorded beside the fingerprint, not in it.",
            show_default=False,
        ),
    ] = None,
    judge_api_key_env: Annotated[
        str,
        typer.Option(
            "--judge-api-key-env",
            help="NAME of the environment variable holding the API key (read at run time; the key is never "
            "stored, logged or printed). A local server (127.0.0.1) needs none.",
        ),
    ] = "OPENAI_API_KEY",
    shape: Annotated[
        str,
        typer.Option(
            help="extract: the judge names the picked letter or OTHER and code compares it with gold. "
            "gold: the judge is told the gold letter and answers CORRECT / INCORRECT / OTHER."
        ),
    ] = "extract",
    concurrency: Annotated[int, typer.Option(help="Requests in flight.")] = 16,
    temperature: Annotated[float, typer.Option(help="Judge temperature; above 0.2 is refused.")] = 0.0,
    max_tokens: Annotated[
        int | None,
        typer.Option("--max-tokens", help="Judge max tokens per reply. Default 16, or 128 with --rationale.",
                     show_default=False),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed sent with every judge request (part of the fingerprint).")] = 0,
    max_retries: Annotated[
        int, typer.Option("--max-retries", help="Retries per request on 429, 5xx, timeouts (backoff; retry-after honoured).")
    ] = 5,
    timeout: Annotated[float, typer.Option(help="Per-request timeout in seconds.")] = 60.0,
    arm: Annotated[
        list[str] | None, typer.Option("--arm", help="Grade only this arm (repeatable).", show_default=False)
    ] = None,
    limit: Annotated[
        int | None, typer.Option(help="Grade at most N of the rows that need the judge.", show_default=False)
    ] = None,
    exemplars: Annotated[
        Path | None,
        typer.Option(
            help="Few-shot exemplars, JSONL: question, options, generation, answer (letter/OTHER, or a verdict "
            "with gold for --shape gold). Part of the prompt and the fingerprint.",
            show_default=False,
        ),
    ] = None,
    rationale: Annotated[
        bool,
        typer.Option(
            "--rationale",
            help='Ask the judge for a JSON reply {"choice" | "verdict": ..., "rationale": "one sentence"}; the '
            "rationale is stored in judge_rationale and shown in Review. Part of the fingerprint. A bare legal "
            "value is still accepted (with no rationale).",
        ),
    ] = False,
    judge_sees_reasoning: Annotated[
        bool,
        typer.Option(
            "--judge-sees-reasoning",
            help="Also send a reasoning model's thinking (the row's reasoning) to the judge, fenced as context "
            "before the answer; the judge still grades the answer. Part of the fingerprint. Default off: the "
            "judge reads the answer alone.",
        ),
    ] = False,
    panel: Annotated[
        bool,
        typer.Option(
            "--panel",
            help="Grade as a panel judge: the rows the study's primary judge graded (the first configuration "
            "it was graded with) get this configuration's verdicts too, stored beside the final verdicts, never "
            "in them; the report compares the judges (judge_panel, judge_sensitive). Any number of panel "
            "judges; works with --batch.",
        ),
    ] = False,
    dry_run: Annotated[
        bool, typer.Option(
            "--dry-run",
            help="Print one rendered prompt and the fingerprint, the requests a run would send and their "
            "estimated tokens (characters / 4 of the rendered messages; completion at most --max-tokens each) "
            "and, with --price-in/--price-out, their cost; send nothing. With --batch: also the prompts and "
            "batches a run would submit and the open batches it would poll first, at the Batch API's 50 % price.",
        )
    ] = False,
    price_in: Annotated[
        str | None,
        typer.Option("--price-in", metavar="USD", show_default=False,
                     help="With --dry-run: the judge's price per million prompt (input) tokens, e.g. 2.5."),
    ] = None,
    price_out: Annotated[
        str | None,
        typer.Option("--price-out", metavar="USD", show_default=False,
                     help="With --dry-run: the judge's price per million completion (output) tokens, e.g. 10."),
    ] = None,
    no_judge: Annotated[
        bool,
        typer.Option(
            "--no-judge",
            help="Grade with the strict pre-filter alone; every other row stays ungraded and the study is "
            "marked unaudited (a later judge run clears the mark).",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run summary (with --dry-run: the plan and estimate) as JSON on stdout.")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    batch: Annotated[
        bool,
        typer.Option(
            "--batch",
            help="Send the same requests through the provider's Batch API (/v1/files, /v1/batches): about half "
            "the price, results within 24 h. Batch ids are kept in the study, so a re-run resumes waiting "
            "instead of resubmitting.",
        ),
    ] = False,
    no_wait: Annotated[
        bool,
        typer.Option(
            "--no-wait",
            help="With --batch: submit (and collect batches already finished), print the batch ids and exit 0; "
            "a later `grade --batch` collects the rest.",
        ),
    ] = False,
    batch_max_lines: Annotated[
        int, typer.Option("--batch-max-lines", help="With --batch: at most N requests per batch (provider limit 50,000).")
    ] = 50_000,
    poll_interval: Annotated[
        float,
        typer.Option("--poll-interval", help="With --batch: seconds between polls (backing off while nothing changes)."),
    ] = 10.0,
) -> None:
    """Grade rows: strict pre-filter, then the LLM judge for every row it did not resolve.

    Blank generations are OTHER by rule and rows the pre-filter resolved are never sent. Every other
    row gets one judge verdict per judge fingerprint (model, shape, template, exemplars, temperature, max
    tokens, seed, rationale). Re-running skips rows already graded under the same fingerprint, retries rows
    in error, and never re-sends a prompt that already got a legal reply. Replies are saved as they arrive,
    so an interrupted run loses at most the replies in flight.

    With --batch the requests go through the provider's Batch API instead (same prompts, fingerprint, cache
    and reply parsing; failed lines become error rows that a re-run resubmits); --no-wait submits and exits.

    Exit status: 0 every targeted row has a verdict (with --no-wait: submitted); 3 some rows ended in error
    (a re-run retries them); 2 usage errors (no judge configured, temperature above 0.2, bad flags); 1 anything
    else.
    """

    from mcqaudit.app import grade as grading

    arms = tuple(arm or ())
    if no_judge and dry_run:
        raise _fail("error: --no-judge and --dry-run do not go together", 2)
    if (no_wait or batch_max_lines != 50_000 or poll_interval != 10.0) and not batch:
        raise _fail("error: --no-wait, --batch-max-lines and --poll-interval go with --batch", 2)
    if batch and no_judge:
        raise _fail("error: --batch needs a judge; --no-judge sends nothing", 2)
    if panel and no_judge:
        raise _fail("error: --panel needs a judge; --no-judge sends nothing", 2)
    if (price_in is not None or price_out is not None) and not dry_run:
        raise _fail("error: --price-in and --price-out go with --dry-run (the estimate of a run's cost)", 2)
    with _exits():
        prices = grading.prices(price_in, price_out)
    if not no_judge and not judge_model:
        raise _fail(f"error: {grading.NO_JUDGE_MESSAGE}", 2)
    if not db.exists():
        raise _fail(f"error: {db}: no such study file (create one with `mcqaudit ingest`)")
    # an online run's summary says what opening the study recovered from its journal
    study = _open_study(db, say_replayed=no_judge or dry_run or batch)
    if no_judge:
        with _exits():  # a read-only study: one line, never a traceback
            counts = grading.grade_without_judge(study, arms)
        console.print(
            f"graded with the strict pre-filter alone: {counts.prefilter} rows by the pre-filter, "
            f"{counts.rule} blank rows OTHER by rule; {counts.needs_judge} rows need a judge "
            "and stay ungraded (pending).",
            markup=False, highlight=False,
        )
        console.print("the study is marked unaudited (no judge); run `mcqaudit grade` with a judge to audit it.",
                      markup=False, highlight=False)
        return
    assert judge_model is not None
    with _exits():
        options = grading.grade_options(grading.JudgeSettings(
            model=judge_model, base_url=judge_base_url, api_key_env=judge_api_key_env, shape=shape,
            temperature=temperature, max_tokens=max_tokens, seed=seed, exemplars=exemplars, rationale=rationale,
            sees_reasoning=judge_sees_reasoning, panel=panel, concurrency=concurrency, timeout_s=timeout, max_retries=max_retries, arms=arms, limit=limit,
        ))  # fmt: skip
    if not dry_run:
        _check_key_env("--judge-api-key-env", judge_api_key_env, judge_base_url)
    if dry_run:
        with _exits():
            batched = None
            if batch:
                bopts = grading.BatchOptions(max_lines=batch_max_lines, poll_interval_s=poll_interval)
                with _planning() as progress:
                    batched = grading.batch_dry_run(study, options, bopts, prices, progress)
                plan, shown = batched.plan, batched.to_json()
            else:
                with _planning() as progress:
                    plan = grading.dry_run(study, options, prices, progress)
                shown = plan.to_json()
        if as_json:
            sys.stdout.write(json.dumps(shown, indent=2, ensure_ascii=False) + "\n")
        else:
            _print_dry_run(plan, options.config, batched)
        return
    secret = grading.key_in_env(judge_api_key_env)
    if batch:
        _grade_batch(study, options, secret, no_wait=no_wait, max_lines=batch_max_lines,
                     poll_interval=poll_interval, quiet=quiet, as_json=as_json)
        return
    with _exits(secret=secret, failed="grading",
                stopped="the replies received so far are saved; re-run `mcqaudit grade` to continue"):
        summary = grading.grade(study, options, reporter=None if quiet or as_json else GradeProgress(err))
    if as_json:
        sys.stdout.write(json.dumps(grading.summary_json(summary), indent=2) + "\n")
    else:
        for line in summary.lines():
            console.print(line, markup=False, highlight=False)
    raise typer.Exit(summary.exit_code)


class BatchProgress(GradeProgress):
    """`grade --batch`'s progress (a :class:`mcqaudit.grade.batch.BatchReporter`): the rows bar of online
    grading, and a second bar with the provider's progress on the open batches' lines while waiting."""

    def __init__(self, console: Console | None = None):
        super().__init__(console)
        self._lines: TaskID | None = None
        self._progress.columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[status]}"),
        )

    def start(self, total: int, done: int) -> None:
        self._progress.start()
        self._task = self._progress.add_task(
            "judged", total=total, completed=done, errors=0, tokens=0, unit="rows", status="errors 0"
        )

    def advance(self, rows: int, errors: int, tokens: int) -> None:
        super().advance(rows, errors, tokens)
        if self._task is not None:
            f = self._progress.tasks[0].fields
            self._progress.update(self._task, status=f"errors {f['errors']}, tokens {f['tokens']}")

    def waiting(self, done_lines: int, total_lines: int, status: str) -> None:
        if self._lines is None:
            self._lines = self._progress.add_task("provider", total=total_lines, unit="lines", status=status)
        self._progress.update(self._lines, completed=done_lines, total=total_lines, status=status)


def _grade_batch(study: Study, options: GradeOptions, secret: str, *, no_wait: bool, max_lines: int,
                 poll_interval: float, quiet: bool, as_json: bool) -> None:
    """`grade --batch`: the run through the Batch API, its summary and exit status (docs/design.md §5)."""
    from mcqaudit.app import grade as grading
    from mcqaudit.app.grade import StudyError, disk_failure, scrub

    opts = grading.BatchOptions(wait=not no_wait, max_lines=max_lines, poll_interval_s=poll_interval)
    with _exits(secret=secret, failed="batch grading",
                stopped="the submitted batches are recorded in the study and keep running at the provider; "
                        "re-run `mcqaudit grade --batch` to collect them"):  # fmt: skip
        try:
            opts.validate()
            summary = grading.grade_batch(study, options, opts,
                                          reporter=None if quiet or as_json else BatchProgress(err))  # fmt: skip
        except (grading.GradeUsageError, StudyError):
            raise  # the table's (_exits)
        except Exception as exc:
            disk = disk_failure(study.path, exc)
            if disk is not None:  # a full disk met while recording submissions or collected replies
                raise _fail(f"error: {disk}; the submitted batches keep running at the provider: re-run "
                            "`mcqaudit grade --batch` once there is room to collect them") from None
            raise
    if as_json:
        sys.stdout.write(json.dumps(grading.batch_summary_json(summary), indent=2) + "\n")
    else:
        for line in summary.lines():
            console.print(scrub(line, secret), markup=False, highlight=False)
    raise typer.Exit(summary.exit_code)


@contextlib.contextmanager
def _planning() -> Iterator[Callable[[str, int, int | None], None]]:
    """What a dry run shows while it reads and renders the rows it would send (seconds at 1 M rows): a bar on
    stderr that goes when it is done, on a terminal only (a log gets the result alone)."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("rows"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as prog:
        task = prog.add_task("dry run", total=None)

        def progress(stage: str, done: int, total: int | None) -> None:
            prog.update(task, description=stage, completed=done, total=total)

        yield progress


def _print_dry_run(plan: DryRun, config: JudgeConfig, batched: BatchDryRun | None = None) -> None:
    """The dry run; with ``batched`` (a :class:`mcqaudit.grade.batch.BatchDryRun`) what `--batch` would do."""
    console.print(f"judge fingerprint: {plan.fingerprint}", markup=False, highlight=False)
    console.print(
        f"  model {config.model}, {config.shape} shape, temperature {config.temperature:g}, max tokens "
        f"{config.max_tokens}, seed {config.seed}, template {plan.fingerprint_payload['template_version']}, "
        f"{len(config.exemplars)} exemplars" + (", with rationale (JSON reply)" if config.rationale else "")
        + (", the reasoning sent as context" if config.sees_reasoning else ""),
        markup=False, highlight=False,
    )
    rows = (
        f"rows needing the judge: {plan.in_scope}; already graded under this fingerprint: {plan.already_ok}; "
        f"a run would target {plan.targeted} rows, {plan.cached} answered from earlier replies, "
    )
    if batched is None:
        console.print(rows + f"sending {plan.would_send} requests (dry run: nothing sent)",
                      markup=False, highlight=False)
    else:
        console.print(rows + f"{batched.waiting} waiting on batches still open", markup=False, highlight=False)
        for line in _batch_plan_lines(batched):
            console.print(line, markup=False, highlight=False)
    for line in _estimate_lines(plan.estimate if batched is None else batched.estimate):
        console.print(line, markup=False, highlight=False)
    if plan.user is None:
        console.print("no row needs the judge: nothing to show", markup=False, highlight=False)
        return
    console.print(f"--- system message ---\n{plan.system}", markup=False, highlight=False)
    console.print(f"--- user message (row {plan.row_id}) ---\n{plan.user}", markup=False, highlight=False)


def _usd(x: float) -> str:
    return f"${x:,.2f}" if x >= 1 else f"${x:.4g}"


def _estimate_lines(e: CostEstimate) -> list[str]:
    """`grade --dry-run`: the estimated tokens and cost of the requests a run would send, and how counted."""
    from mcqaudit.app.grade import BATCH_DISCOUNT

    how = (f"  counted at characters / 4 of the rendered system and user messages, plus the chat format's "
           "wrapping: about 10 % above OpenAI's tokenizers on English prompts, below them for code, long "
           f"numbers and non-Latin scripts; completion at most --max-tokens ({e.max_tokens}) a request, an upper "
           "bound (a bare-letter reply is 1-3 tokens; a re-asked illegal reply comes on top)")  # fmt: skip
    out = [f"estimate for the {e.requests:,} requests a run would send: about {e.prompt_tokens:,} prompt tokens "
           f"and at most {e.completion_tokens:,} completion tokens", how]  # fmt: skip
    cost, p = e.cost, e.prices
    discount = f", at the Batch API's {BATCH_DISCOUNT * 100:.0f} % price" if e.batch else ""
    if cost is None or p is None:
        out.append("estimated cost: give --price-in and --price-out (USD per million tokens) to see it"
                   + (f"; --batch is billed at the Batch API's {BATCH_DISCOUNT * 100:.0f} % price" if e.batch else ""))  # fmt: skip
    else:
        out.append(f"estimated cost: about {_usd(cost)} (prompt at ${p.price_in:g}, completion at its upper bound "
                   f"at ${p.price_out:g} per million tokens{discount})")  # fmt: skip
    return out


_ROLE_WORDS = {
    "primary": "primary: final verdicts",
    "panel": "panel: beside the final verdicts",
    "superseded": "superseded by a later configuration",
}


def _info_fingerprints(facts: InfoFacts) -> None:
    fps = facts.fingerprints
    if not fps:
        console.print("judge fingerprints: none (no judge run yet)", markup=False, highlight=False)
        return
    console.print(f"judge fingerprints ({len(fps)}; metrics refuse to mix them across arms):",
                  markup=False, highlight=False)
    for f in fps:
        model = f["model"] + (" (stand-in judge: a heuristic, not an LLM)" if f["standin"] else "")
        console.print(
            f"  {f['fingerprint']}  [{_ROLE_WORDS.get(f['role'], f['role'])}] {model}, {f['shape']} shape, temperature {f['temperature']:g}, "
            f"max tokens {f['max_tokens']}, seed {f['seed']}, rationale {'on' if f['rationale'] else 'off'}"
            + (", reasoning sent as context" if f["sees_reasoning"] else "") + "; "
            f"arms: {', '.join(f['arms']) or '-'}; "
            f"rows ok {f['rows_ok']}, error {f['rows_error']}; base URL: {', '.join(f['base_urls']) or '-'}",
            markup=False, highlight=False,
        )


_INFO_SECTIONS.append(_info_fingerprints)


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"


def _info_usage(facts: InfoFacts) -> None:
    """What grading cost so far: per fingerprint, the tokens its replies' usage reported."""
    usage = facts.usage
    if not usage:
        return
    console.print("judge usage (tokens the endpoint reported in each reply's usage):", markup=False, highlight=False)
    for fp, u in usage.items():
        unknown = u["requests_without_usage"]
        line = (f"  {fp}  {u['model']}: {u['prompt_tokens']:,} prompt + {u['completion_tokens']:,} completion tokens "
                f"over {u['requests'] - unknown:,} of {_count(u['requests'], 'reply', 'replies')}")  # fmt: skip
        if unknown:
            line += f"; {_count(unknown, 'reply', 'replies')} without usage (unknown, not counted as 0)"
        if u["requests_failed"]:
            line += f"; {_count(u['requests_failed'], 'request', 'requests')} failed without a reply"
        console.print(line, markup=False, highlight=False)


_INFO_SECTIONS.append(_info_usage)


def _batch_plan_lines(b: BatchDryRun) -> list[str]:
    """`grade --dry-run --batch`: what a batch run would submit and which open batches it would poll first."""
    limits = f"at most {b.max_lines:,} lines / {b.max_bytes / 1e6:g} MB each"
    if b.prompts:
        sizes = ", ".join(f"{n:,}" for n, _ in b.batches)
        total = sum(size for _, size in b.batches)
        out = [f"batch mode: a run would submit {b.prompts:,} prompts in {len(b.batches)} batches ({limits}): "
               f"{sizes} lines, {total / 1e6:.3g} MB in all (dry run: nothing sent)"]
    else:
        out = ["batch mode: a run would submit nothing new (dry run: nothing sent)"]
    if b.open:
        now = datetime.now(UTC)
        out.append(f"it would first poll {len(b.open)} open batches of this fingerprint "
                   "(those not yet created: found by their uploaded file, or created from it):")
        out += [_submission_line(sub, None, now) for sub in b.open]
    else:
        out.append("no open batches under this fingerprint")
    return out


def _age(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _submission_line(sub: Submission, model: str | None, now: datetime) -> str:
    """One open submission (:class:`mcqaudit.store.batches.Submission`): id, model, lines, status, when."""
    ident = sub.batch_id or f"not yet created (uploaded file {sub.input_file_id})"
    at = sub.submitted_at.astimezone(UTC)
    return (
        f"  {ident}  " + (f"model {model}, " if model else "")
        + f"{sub.lines:,} lines, provider status {sub.status}, submitted {at:%Y-%m-%d %H:%M:%S} UTC "
        f"({_age((now - at).total_seconds())} ago)"
    )


def _info_batches(facts: InfoFacts) -> None:
    o = facts.batches
    if not o.open and not o.collected:
        return
    if not o.open:
        console.print(f"batches: none open; {o.collected} collected", markup=False, highlight=False)
        return
    now = datetime.now(UTC)
    console.print(
        f"batches: {len(o.open)} open ({sum(sub.lines for sub, _ in o.open):,} lines), {o.collected} collected; "
        "a later `mcqaudit grade --batch` with the same judge settings collects the open ones:",
        markup=False, highlight=False,
    )
    for sub, model in o.open:
        console.print(_submission_line(sub, model, now), markup=False, highlight=False)


_INFO_SECTIONS.append(_info_batches)


def _info_journal(facts: InfoFacts | Study) -> None:
    """What the journal beside the study holds and what opening it replayed (given a study: its own)."""
    from mcqaudit.app.info import InfoFacts

    study = facts.study if isinstance(facts, InfoFacts) else facts
    if study is None:  # read from info's cache: taken only when the study has no journal beside it
        return
    from mcqaudit.app.study import JUDGED, journal_pending

    if line := _replayed_line(study):
        console.print(f"journal: {line.removeprefix('recovered: ')}", markup=False, highlight=False)
    p = journal_pending(study)
    if not p.total:
        return
    n = p.records.get(JUDGED, 0)
    what = f"{n} judge replies" + (f" and {p.total - n} other records" if p.total > n else "")
    why = (
        "the study is read-only, so they are not replayed into it; they are at the next open where it can be "
        "written"
        if study.read_only
        else "a run that is still going has them; it writes them in its next batch"
    )
    console.print(f"journal: {what} not yet in the study ({why})", markup=False, highlight=False)


_INFO_SECTIONS.append(_info_journal)


# --------------------------------------------------------------------------------------------- standin-judge
@app.command("standin-judge")
def standin_judge(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: any free port; the URL is printed).")] = 8765,
    latency_ms: Annotated[float, typer.Option("--latency-ms", help="Sleep before every answer (ms).")] = 0.0,
    fail_rate: Annotated[float, typer.Option("--fail-rate", help="Share of requests answered HTTP 500.")] = 0.0,
    rate_limit_rate: Annotated[
        float, typer.Option("--rate-limit-rate", help="Share of requests answered HTTP 429 with retry-after.")
    ] = 0.0,
    garbage_rate: Annotated[
        float, typer.Option("--garbage-rate", help="Share of requests answered with an illegal reply.")
    ] = 0.0,
    hang_rate: Annotated[float, typer.Option("--hang-rate", help="Share of requests never answered.")] = 0.0,
    seed: Annotated[int, typer.Option(help="Seed of the fault-injection draws.")] = 0,
    batch_seconds: Annotated[
        float, typer.Option("--batch-seconds", help="Batch API: seconds a batch spends in progress.")
    ] = 0.0,
    batch_fail_rate: Annotated[
        float, typer.Option("--batch-fail-rate", help="Batch API: share of lines answered HTTP 500 (error file).")
    ] = 0.0,
    batch_expire: Annotated[
        bool, typer.Option("--batch-expire", help="Batch API: batches expire after half their lines.")
    ] = False,
) -> None:
    """Serve the stand-in judge: an OpenAI-compatible API on 127.0.0.1 answering with a documented
    heuristic (option-text and answer-phrase matching), model name `standin-heuristic`. NOT an LLM.

    For demos, tests and dry runs; used only when configured:
    `mcqaudit grade --judge-model standin-heuristic --judge-base-url http://127.0.0.1:PORT/v1`.
    Every view of its verdicts says they come from a heuristic. Stops on Ctrl-C.
    """
    from mcqaudit.app.standin import BatchKnobs, StandinOptions, serve

    try:
        opts = StandinOptions(latency_ms=latency_ms, fail_rate=fail_rate, rate_limit_rate=rate_limit_rate,
                              garbage_rate=garbage_rate, hang_rate=hang_rate, seed=seed)
        knobs = BatchKnobs(seconds=batch_seconds, fail_rate=batch_fail_rate, expire=batch_expire, seed=seed)
        knobs.check()
    except ValueError as exc:
        raise _fail(f"error: {exc}", 2) from None
    try:
        serve(port, opts, batch=knobs)
    except OSError as exc:
        raise _fail(f"error: cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}") from None


# --------------------------------------------------------------------------------------------- dashboard
def _dashboard_script() -> Path:
    """dashboard.py of a source checkout, else the copy inside the package (an installed wheel)."""
    root = Path(__file__).resolve().parents[1] / "dashboard.py"
    return root if root.exists() else Path(__file__).resolve().parent / "ui" / "entry.py"


@app.command()
def dashboard(
    db: Annotated[
        Path | None,
        typer.Argument(
            help="The study file. Default: the demo study in sample_runs/ (built on first use).",
            show_default=False,
        ),
    ] = None,
    port: DashboardPortOption = DASHBOARD_PORT,
) -> None:
    """Open the audit dashboard (Streamlit) on 127.0.0.1: Overview (flags first), Orientations, OTHER by arm,
    Parsers vs judge, Bias, Review (confirm / override / retract, spot-check queues, blind mode), Export.

    Reviews are written to the study file as they are made; a `grade` run may write to the same file while
    the dashboard is open. A port already in use is refused before anything starts. Stops on Ctrl-C, SIGTERM
    or SIGHUP, and takes its Streamlit server down with it (nothing is left serving the port); if the server
    stops, so does this command, with the server's exit status.
    """
    import os

    if db is None:
        from mcqaudit.demo import DEMO_DB, build_demo

        if not DEMO_DB.exists():
            err.print("building the demo study (ingest + grade with the stand-in judge)...", markup=False)
        with _exits():
            db = build_demo()
    elif not db.exists():
        raise _fail(f"error: {db}: no such study file (create one with `mcqaudit ingest`)")
    path = str(db.resolve())
    _open_study(db)  # fail early, with a clear message, on a file that is not a study
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(_dashboard_script()),
        "--server.address", "127.0.0.1", "--server.port", str(port),
        "--browser.gatherUsageStats", "false", "--server.headless", "true",
        "--server.fileWatcherType", "none",  # a tool, not a dev server: no reloads, nothing polled
        "--client.toolbarMode", "minimal",  # no Deploy button, no developer hotkeys (c clears caches)
        "--", "--db", path,
    ]  # fmt: skip
    busy = _port_in_use(port)
    if busy:
        raise _fail(
            f"error: port {port} on 127.0.0.1 is in use ({busy}): another dashboard or server is serving it; "
            f"stop that one, or choose another port with --port (or MCQAUDIT_DASHBOARD_PORT)"
        )
    err.print(f"mcqaudit dashboard on http://127.0.0.1:{port}  (study: {path}; Ctrl-C to stop)", markup=False)
    code = _serve_until_stopped(cmd, {**os.environ, "MCQAUDIT_DB": path})
    if code not in (0, None):
        err.print(f"error: the dashboard server stopped (exit status {code})", markup=False)
    raise typer.Exit(code or 0)


def _port_in_use(port: int) -> str | None:
    """Why 127.0.0.1:``port`` cannot be served, or None when it can (bound as the server binds it)."""
    import socket

    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Tornado does: TIME_WAIT is no owner
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.strerror or str(exc)
    return None


def _die_with_parent() -> None:
    """In the server's process, before it starts: Linux sends it SIGTERM when this command dies, even by
    SIGKILL, so a killed dashboard never leaves its server serving the port."""
    import contextlib
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def _serve_until_stopped(cmd: list[str], env: dict[str, str], grace_s: float = 10.0) -> int | None:
    """Run the server ``cmd`` as a child until it exits, or until SIGTERM, SIGINT or SIGHUP reaches this
    process: then stop it (SIGTERM, SIGKILL after ``grace_s``) and wait for it. Returns its exit status
    (128 + N for a server ended by signal N), or None when it was stopped on request."""
    import signal
    import subprocess
    import time

    linux = sys.platform.startswith("linux")
    proc = subprocess.Popen(cmd, env=env, preexec_fn=_die_with_parent if linux else None)
    asked: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        asked.append(signum)
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)

    stops = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    before = {sig: signal.signal(sig, stop) for sig in stops}
    try:
        deadline: float | None = None
        while True:
            try:
                code = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if asked and deadline is None:
                    deadline = time.monotonic() + grace_s
                if deadline is not None and time.monotonic() > deadline:
                    proc.kill()
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    if asked:
        return None
    return code if code >= 0 else 128 - code


# --------------------------------------------------------------------------------------------- export
@app.command("export")
def export(
    db: DbOption,
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="The file to write (replaced whole, or left as it was).", show_default=False
        ),
    ],
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="parquet, jsonl or csv. Default: from --out's suffix (.parquet or .pq, .jsonl or .ndjson, .csv).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Every row of graded_rows (final verdicts), for pandas, Spark or the Hugging Face `datasets` Parquet
    loader, ordered by arm, item_id, orientation, sample.

    parquet and jsonl add two nested columns beside the view's: reviews (each review of the row, oldest
    first, retractions included: review_id, action, verdict, letter, note, reviewer, time, retracts) and
    panel_verdicts (each panel judge's verdict, `grade --panel`: fingerprint, model, status, verdict,
    letter); Parquet as lists of structs, JSON Lines as arrays of objects (times in ISO-8601 UTC). csv has the
    view's columns alone, as the dashboard's Export page writes them. The file is written whole or not at all;
    a read-only study exports too."""
    from mcqaudit.app.rows import export_format, export_rows

    try:
        fmt = export_format(out, fmt)
    except ValueError as exc:
        raise _fail(f"error: --format: {exc}", 2) from None
    if not db.exists():
        raise _fail(f"error: {db}: no such study file")
    study = _open_study(db)
    with (
        _exits(failed="export", stopped=f"nothing was written to {out}"),
        Progress(
            TextColumn(f"export {fmt}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("rows"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,  # a log gets the one line below, not a bar's last frame
        ) as prog,
    ):
        task = prog.add_task("export", total=None)
        res = export_rows(study, out, fmt, lambda done, total: prog.update(task, completed=done, total=total))
    err.print(
        f"wrote {out} ({fmt}; {res.rows:,} row{'s' if res.rows != 1 else ''}, {_size(res.bytes)})",
        markup=False,
        highlight=False,
    )


def _size(n: int) -> str:
    """A file size in bytes, KiB, MiB or GiB."""
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        size /= 1024
        if size < 1024 or unit == "GiB":
            break
    return f"{size:.1f} {unit}"


# --------------------------------------------------------------------------------------------- reviews
reviews_app = typer.Typer(
    help="Reviews from the command line: draw and manage spot-check queues, export the review log, import a "
    "collaborator's log or the labels your team already has.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(reviews_app, name="reviews")


@reviews_app.command("export")
def reviews_export(
    db: DbOption,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Write the CSV here instead of standard output (with --inspect: the new log, "
            ".eval or .json).", show_default=False
        ),
    ] = None,
    inspect: Annotated[
        Path | None,
        typer.Option(
            "--inspect",
            help="An Inspect AI log (.eval or .json) that rows of the study were ingested from: write a copy of it "
            "to --out in which every review of those rows is a score edit with provenance (reviewer, time, note, "
            "judge fingerprint), for Inspect View. The original is never touched. Needs mcqaudit[inspect].",
            show_default=False,
        ),
    ] = None,
    arm: Annotated[
        str | None,
        typer.Option("--arm", help="With --inspect: the arm the log was ingested as, when several match.",
                     show_default=False),
    ] = None,
) -> None:
    """Every review of the study, retractions included, oldest first, as CSV: row_id (and arm, item_id,
    orientation, sample), action, verdict, picked_letter, note, reviewer, created_at (UTC), prior_verdict,
    prior_source, fingerprint, retracts, queue_id, origin. Then the spot-check queues, one line per row
    (action `queue`, columns queue_name, queue_strategy, queue_seed, queue_size, queue_per_arm, queue_arms,
    queue_position), so that `reviews import` recreates them in another copy of the study. A cell that
    starts with = + - @, a tab or a carriage return is written behind a single quote, so that no spreadsheet
    runs it as a formula; `reviews import` removes that quote again.

    With --inspect LOG --out NEW_LOG: the reviews of the rows that came from LOG, as score edits in a copy
    of it (CORRECT -> C; INCORRECT and OTHER -> I, OTHER with no answer and the explanation "OTHER: ...")."""
    from mcqaudit.app.reviews import review_log_file
    from mcqaudit.formatting import plural

    if not db.exists():
        raise _fail(f"error: {db}: no such study file")
    if inspect is not None or arm is not None:
        _reviews_to_inspect(db, inspect, out, arm)
        return
    log = review_log_file(_open_study(db))
    if out is None:
        sys.stdout.write(log.text)
        sys.stdout.flush()
        return
    _write_out(out, log.text)
    queues = (
        f", and {plural(log.queues, 'spot-check queue')} ({plural(log.queue_rows, 'row')}) for `reviews import` "
        "to recreate"
        if log.queues
        else ""
    )
    err.print(f"wrote {out} ({plural(log.reviews, 'review')}{queues})", markup=False, highlight=False)


def _reviews_to_inspect(db: Path, log: Path | None, out: Path | None, arm: str | None) -> None:
    from mcqaudit.app.reviews import export_to_inspect

    if log is None:
        raise _fail("error: --arm goes with --inspect LOG", 2)
    if out is None:
        raise _fail("error: --inspect needs --out NEW_LOG (the original log is never written to)", 2)
    if not log.exists():
        raise _fail(f"error: {log}: no such log")
    with _exits():
        try:
            res = export_to_inspect(_open_study(db), log, out, arm=arm)
        except OSError as exc:  # the log's writer failed (full disk, read-only folder); its partial file is gone
            raise _fail(f"error: {WriteFailed(out, exc)}") from None
    values = ", ".join(f"{v} {n}" for v, n in sorted(res.values.items())) or "none"
    err.print(
        f"wrote {out}: {res.edits} score edit(s) on {res.samples_edited} sample(s) of score {res.score_name!r} "
        f"(arm {res.arm}, {res.rows_matched} rows from {log}; final values: {values}); {log} is unchanged",
        markup=False, highlight=False,
    )
    if res.reviews_elsewhere:
        err.print(f"{res.reviews_elsewhere} reviewed row(s) of the study are not from this log and were left out",
                  markup=False, highlight=False)


@reviews_app.command("import")
def reviews_import(
    file: Annotated[
        Path,
        typer.Argument(
            help="A review log (CSV or JSONL from `reviews export` or the dashboard), or a label file (CSV or "
            "JSONL: row_id or arm, item_id, orientation, sample; verdict; optional picked_letter, reviewer, "
            "note, reviewed_at).",
            show_default=False,
        ),
    ],
    db: DbOption,
    reviewer: Annotated[
        str | None,
        typer.Option(
            "--reviewer",
            help="The reviewer of records that name none (required when the file has no reviewer column).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Bring reviews into the study: a collaborator's review log, or labels your team already has.

    A record with an `action` (confirm, override, retract) is a review-log record and keeps its time and
    provenance; `queue` lines recreate the spot-check queues the study lacks. A record without one is a
    label: it is recorded as a confirm when it keeps the row's current final verdict (and its picked letter,
    when it names one), else as an override, with the row's current verdict as the prior;
    `reviewed_at` (ISO-8601) is its time, else the time of the import. Rows are named by row_id or by
    arm, item_id, orientation and sample.

    Idempotent: importing the same file twice adds nothing. A file with any problem (a row the study does
    not have, an illegal verdict, a picked letter contradicting the verdict, a bad time, no way to name the
    row) is refused whole: each problem is printed as FILE:LINE: field: reason and nothing is written (exit 1).
    """
    from mcqaudit.app.reviews import ReviewImportError, import_review_log

    if not db.exists():
        raise _fail(f"error: {db}: no such study file")
    study = _open_study(db)
    with _exits():
        try:
            res = import_review_log(study, file, reviewer=reviewer)
        except ReviewImportError as exc:  # a list of problems: said here, whole
            err.print(
                f"error: {file}: {len(exc.problems)} problem(s); nothing imported", markup=False, highlight=False
            )
            raise _fail(str(exc)) from None
    kinds = [
        f"{n} {word}{'s' if n != 1 else ''}"
        for n, word in (
            (res.confirms, "confirmation"),
            (res.overrides, "override"),
            (res.retractions, "retraction"),
        )
        if n
    ]
    queues = [
        f"{n} spot-check queue{'s' if n != 1 else ''} {word}"
        for n, word in ((res.queues_added, "recreated"), (res.queues_present, "already in the study"))
        if n
    ]
    console.print(
        f"{file}: {res.added} reviews imported; {res.already_present} already in the study"
        + (f" (imported: {', '.join(kinds)})" if kinds else "")
        + (f"; {', '.join(queues)}" if queues else ""),
        markup=False,
        highlight=False,
    )


DASHBOARD_QUEUE_URL = "http://127.0.0.1:{port}/review?queue={queue_id}"


def _queue_url(port: int, queue_id: object, strategy: str | None = None) -> str:
    """A queue's link; a second review's opens in blind mode, so the first review stays hidden until the
    second reviewer has decided."""
    from mcqaudit.app.reviews import SECOND_REVIEW

    url = DASHBOARD_QUEUE_URL.format(port=port, queue_id=queue_id)
    return url + "&blind=1" if strategy == SECOND_REVIEW else url


def _open_queue_line(what: str, db: Path, port: int, queue_id: object, strategy: str | None = None) -> str:
    """How to open a queue: the dashboard command and the link, on the same port."""
    flag = "" if port == DASHBOARD_PORT else f" --port {port}"
    return f"{what}: mcqaudit dashboard {db}{flag}  then  {_queue_url(port, queue_id, strategy)}"


def _queue_size(size: int, per_arm: bool) -> str:
    return f"{size}/arm" if per_arm else f"{size} total"


@reviews_app.command("queue")
def reviews_queue(
    db: DbOption,
    size: Annotated[
        int,
        typer.Option(
            "--size", help="Rows in the queue: in total, or per arm with --per-arm.", show_default=False
        ),
    ],
    per_arm: Annotated[
        bool,
        typer.Option(
            "--per-arm",
            help="--size rows from each arm. Without it, --size is the queue's total, shared over the arms in "
            "proportion to their rows.",
        ),
    ] = False,
    strategy: Annotated[
        str,
        typer.Option(
            help="uniform: every row equally likely (the sample that unbiased judge-agreement figures need). "
            "stratified: a third each from rows where a parser disagrees with the verdict, OTHER or ungraded "
            "rows, and the rest (for hunting artifacts). judges_disagree: rows on which the primary judge and "
            "a panel judge (`grade --panel`) give different verdicts. second_review: rows one person alone has "
            "reviewed (see --of-reviewer, --of-queue), for a second reviewer, blind to the first review; in "
            "its queue a row counts as reviewed once two people have reviewed it."
        ),
    ] = "uniform",
    seed: Annotated[
        int, typer.Option(help="Seed of the draw: the same seed on the same rows draws the same queue.")
    ] = 0,
    name: Annotated[
        str | None,
        typer.Option(help="Name of the queue. Default: e.g. 'uniform 20 total seed 0'.", show_default=False),
    ] = None,
    arm: Annotated[
        list[str] | None,
        typer.Option(
            "--arm", help="Draw from this arm only (repeatable). Default: every arm.", show_default=False
        ),
    ] = None,
    reviewer: Annotated[
        str | None,
        typer.Option("--reviewer", help="Who drew the queue (stored with it).", show_default=False),
    ] = None,
    of_reviewer: Annotated[
        str | None,
        typer.Option(
            "--of-reviewer",
            help="With --strategy second_review: draw from the rows this person alone has reviewed (default: "
            "rows any one person alone has reviewed).",
            show_default=False,
        ),
    ] = None,
    of_queue: Annotated[
        int | None,
        typer.Option(
            "--of-queue",
            help="With --strategy second_review: draw only from this queue's rows (see `reviews queues`).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help='Print only {"queue_id": ID, "rows": [row_id, ...]} (queue order) on stdout.'
        ),
    ] = False,
    port: DashboardPortOption = DASHBOARD_PORT,
) -> None:
    """Draw a seeded spot-check queue for review, and say how to open it in the dashboard.

    The queue is stored in the study with its seed; the dashboard's Review page works through it at
    http://127.0.0.1:PORT/review?queue=ID (start it with `mcqaudit dashboard STUDY --port PORT`; the link uses
    --port, else MCQAUDIT_DASHBOARD_PORT, else 8501, as the dashboard does). A uniform queue is the sample that
    judge-vs-human agreement (report: judge_agreement) is computed on.

    A second review: `--strategy second_review --of-reviewer ann` draws rows that ann alone has reviewed
    (`--of-queue ID`: only rows of that queue); its link opens in blind mode (blind=1), so the second reviewer
    sees neither the judge nor ann's review until they have decided. Rows where two reviewers' verdicts
    differ are the Review page's "reviewers disagree" filter, for a third person to settle.
    """
    from mcqaudit.app.reviews import SECOND_REVIEW, STRATEGIES, create_spot_check, queue_row_ids

    if strategy not in STRATEGIES:
        raise _fail(f"error: --strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}", 2)
    if strategy != SECOND_REVIEW and (of_reviewer is not None or of_queue is not None):
        flag = "--of-reviewer" if of_reviewer is not None else "--of-queue"
        raise _fail(f"error: {flag} goes with --strategy {SECOND_REVIEW}", 2)
    if size < 1:
        raise _fail("error: --size must be at least 1", 2)
    if not db.exists():
        raise _fail(f"error: {db}: no such study file (create one with `mcqaudit ingest`)")
    study = _open_study(db)
    with _exits():
        sc = create_spot_check(
            study,
            size=size,
            per_arm=per_arm,
            seed=seed,
            strategy=strategy,
            arms=arm or None,
            name=name,
            created_by=(reviewer or "").strip() or None,
            of_reviewer=of_reviewer,
            of_queue=of_queue,
        )
        rows = queue_row_ids(study, sc.queue_id)
    if as_json:
        sys.stdout.write(json.dumps({"queue_id": sc.queue_id, "rows": rows}) + "\n")
        return
    import pandas as pd

    console.print(
        f"queue #{sc.queue_id} {sc.name!r}: {sc.rows} rows ({sc.strategy}, seed {sc.seed}, "
        f"{_queue_size(sc.size, sc.per_arm)}; arms {', '.join(sc.arms)})",
        markup=False,
        highlight=False,
    )
    strata = sorted({s for v in sc.strata.values() for s in v}, key=lambda s: (s == "all", s))
    table = pd.DataFrame(
        [
            {
                "arm": a,
                "rows": sc.by_arm[a],
                **({s: sc.strata[a].get(s, 0) for s in strata} if strata != ["all"] else {}),
            }
            for a in sc.arms
        ]
    )
    console.print(_table("rows per arm" + (" and stratum" if strata != ["all"] else ""), table))
    if sc.strategy == SECOND_REVIEW:
        console.print(
            "a second review: a row counts as reviewed once two people have reviewed it; the link opens in blind "
            "mode, so the first review stays hidden until the second reviewer has decided",
            markup=False,
            highlight=False,
        )
    console.print(_open_queue_line("open it", db, port, sc.queue_id, sc.strategy), markup=False, highlight=False)


@reviews_app.command("queues")
def reviews_queues(
    db: DbOption,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the queues as a JSON list on stdout.")
    ] = False,
    port: DashboardPortOption = DASHBOARD_PORT,
) -> None:
    """List the spot-check queues (deleted ones left out) with their progress: rows reviewed (in a
    second_review queue: rows two people have reviewed), per arm, and each one's link on the dashboard's port
    (--port, else MCQAUDIT_DASHBOARD_PORT, else 8501; a second review's opens in blind mode)."""
    from mcqaudit.app.reviews import queue_listing

    if not db.exists():
        raise _fail(f"error: {db}: no such study file")
    queues, progress = queue_listing(_open_study(db))
    by_queue: dict[int, dict[str, dict[str, int]]] = {}
    for r in progress:
        by_queue.setdefault(int(r["queue_id"]), {})[str(r["arm"])] = {
            "rows": int(r["rows"]),
            "reviewed": int(r["reviewed"]),
        }
    out = [
        {
            "queue_id": int(q["queue_id"]),
            "name": q["name"],
            "strategy": q["strategy"],
            "seed": int(q["seed"]),
            "size": int(q["size"]),
            "per_arm": bool(q["per_arm"]),
            "arms": [str(a) for a in q["arms"] or ()],  # (none recorded: a queue written by another tool)
            "created_by": q["created_by"],
            "created_at": q["created_at"].isoformat(),
            "rows": int(q["rows"]),
            "reviewed": int(q["reviewed"]),
            "by_arm": by_queue.get(int(q["queue_id"]), {}),
            "url": _queue_url(port, int(q["queue_id"]), str(q["strategy"])),
        }
        for q in queues
    ]
    if as_json:
        sys.stdout.write(json.dumps(out, indent=2) + "\n")
        return
    if not out:
        console.print("no spot-check queues yet (draw one with `mcqaudit reviews queue`)", markup=False)
        return
    for q in out:
        arms = ", ".join(f"{a} {v['reviewed']}/{v['rows']}" for a, v in q["by_arm"].items())
        who = f" by {q['created_by']}" if q["created_by"] else ""
        console.print(
            f"#{q['queue_id']} {q['name']!r}: {q['strategy']}, seed {q['seed']}, "
            f"{_queue_size(q['size'], q['per_arm'])}; reviewed {q['reviewed']}/{q['rows']} ({arms}); "
            f"drawn {q['created_at'][:16].replace('T', ' ')} UTC{who}",
            markup=False,
            highlight=False,
        )
    console.print(_open_queue_line("open one", db, port, "ID"), markup=False, highlight=False)


@reviews_app.command("queue-rename")
def reviews_queue_rename(
    queue_id: Annotated[int, typer.Argument(help="The queue (see `reviews queues`).", show_default=False)],
    name: Annotated[str, typer.Argument(help="Its new name.", show_default=False)],
    db: DbOption,
) -> None:
    """Rename a spot-check queue (its rows and seed do not change)."""
    from mcqaudit.app.reviews import rename_spot_check

    if not db.exists():
        raise _fail(f"error: {db}: no such study file")
    with _exits():
        rename_spot_check(_open_study(db), queue_id, name)
    console.print(f"queue #{queue_id} is now {name.strip()!r}", markup=False, highlight=False)


@reviews_app.command("queue-delete")
def reviews_queue_delete(
    queue_id: Annotated[int, typer.Argument(help="The queue (see `reviews queues`).", show_default=False)],
    db: DbOption,
    reviewer: Annotated[
        str | None,
        typer.Option("--reviewer", help="Who deletes it (stored with the queue).", show_default=False),
    ] = None,
) -> None:
    """Delete a spot-check queue: it disappears from the lists and no longer counts as a uniform spot check
    for the judge-agreement figures. The reviews made in it stay, and still count as reviews."""
    from mcqaudit.app.reviews import delete_spot_check

    if not db.exists():
        raise _fail(f"error: {db}: no such study file")
    with _exits():
        delete_spot_check(_open_study(db), queue_id, deleted_by=reviewer)
    console.print(f"queue #{queue_id} deleted; its reviews are kept", markup=False, highlight=False)


def _info_args(argv: Sequence[str]) -> tuple[Path, bool] | None:
    """``info --db FILE [--json]`` in any order (``--db=FILE`` too), as the one command that must answer at
    once: (the study, as_json); None for any other command line, which Typer parses."""
    if not argv or argv[0] != "info" or any(k.endswith("_COMPLETE") for k in os.environ):
        return None
    db: str | None = None
    as_json = False
    rest = list(argv[1:])
    while rest:
        arg = rest.pop(0)
        if arg == "--json" and not as_json:
            as_json = True
        elif arg == "--db" and db is None and rest and rest[0] and not rest[0].startswith("-"):
            db = rest.pop(0)
        elif arg.startswith("--db=") and db is None and len(arg) > 5:
            db = arg[5:]
        else:
            return None
    return (Path(db), as_json) if db is not None else None


def main() -> None:
    # `info` skips Typer's parsing of the command line: building its parameters imports pydantic and costs
    # more than info's whole answer from its cache (issue 23). The command runs as Typer would run it.
    if (fast := _info_args(sys.argv[1:])) is not None:
        try:
            info(*fast)
        except typer.Exit as exc:
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            sys.exit(130)
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            from typer._click.utils import PacifyFlushWrapper

            sys.stdout = PacifyFlushWrapper(sys.stdout)
            sys.stderr = PacifyFlushWrapper(sys.stderr)
            sys.exit(1)
        return
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
