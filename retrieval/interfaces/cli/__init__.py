"""Command-line interface: parsing and printing only; every command is a function of ``retrieval.commands``
(``eval`` and ``explain``: of their packages).

Each subcommand's module is imported only when that subcommand runs: ``retrieval search`` and ``retrieval
--help`` import neither the evaluation, nor the evidence pipeline, nor NumPy, nor SQLAlchemy (a test checks).

Exit codes: 0 success, 1 a runtime error (the message says what to do), 2 a usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import warnings
from collections.abc import Callable, Sequence
from importlib import import_module

from ... import stop
from ...config import EXPAND_MODES, POLICY_FIELDS, PRF_METHODS, RELATIONS, RetrievalConfig, resolve_db
from ...errors import RetrievalError, TooLargeError
from ...text import TOKENISER_VERSION
from ...validate import LIMITS
from .. import params
from .options import (
    DB_HELP,
    FORMAT_HELP,
    FORMATS,
    SEMANTIC_HELP,
    AtMost,
    add_analysis_options,
    add_output_args,
    bounded,
    checked,
    hops,
    index_location,
    non_negative,
    query,
    relations,
    semantic_model,
    shard_urls,
    unit,
)


def _progress_bar(total: int | None, what: str = "adding papers") -> Callable[[int], None] | None:
    """A bar for ``add``, told the papers done (tqdm, on a terminal only); call it with -1 to close it."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    bar = tqdm(total=total, desc=what, unit="papers", unit_scale=True, file=sys.stderr, dynamic_ncols=True)

    def show(done: int) -> None:
        if done < 0:
            bar.close()
        else:
            bar.update(done - bar.n)

    return show


def _build_bars(count_papers: Callable[[], int | None]):
    """A ``BuildProgress`` that draws each phase of a build as its own line on the terminal (tqdm): a bar with
    its rate and estimate where the phase counts something (papers read, postings loaded, indexes built), its
    time so far where it is one long step; None when stderr is not a terminal (and the input's lines are then
    not counted: ``count_papers`` reads the whole file)."""
    if not sys.stderr.isatty():
        return None
    papers = count_papers()
    import time

    from tqdm import tqdm

    from ...store.progress import READING, BuildProgress

    class Bars(BuildProgress):
        def __init__(self) -> None:
            self.bar = None
            self.shown = 0.0

        def start(self, phase: str, total: int | None = None, unit: str = "") -> None:
            if phase == READING and total is None:
                total = papers
            plain = "{desc}: {elapsed}" if total is None else None
            if unit == "indexes":  # a few long statements: how many are done, and the time so far
                plain = "{desc}: {n_fmt}/{total_fmt} indexes [{elapsed}]"
            self.bar = tqdm(total=total, desc=f"{phase:<19}", unit=unit or "it", unit_scale=unit != "indexes",
                            file=sys.stderr, dynamic_ncols=True, bar_format=plain, mininterval=0.2)  # fmt: skip
            self.shown = time.monotonic()

        def update(self, done: int | None = None) -> None:
            if self.bar is None:
                return
            if done is not None:
                self.bar.update(done - self.bar.n)
            elif time.monotonic() - self.shown >= 0.2:  # a long statement: show the time passing
                self.bar.refresh()
                self.shown = time.monotonic()

        def finish(self) -> None:
            if self.bar is not None:
                if self.bar.total is not None and self.bar.n < self.bar.total:
                    self.bar.total = self.bar.n  # fewer papers than lines (blank lines): end the bar full
                self.bar.close()
                self.bar = None

    return Bars()


def _count_lines(path: str) -> int | None:
    """The papers of the corpus file ``path`` for the progress bar; None for what is not a regular file (a pipe
    would be read here and block, and the command refuses it anyway)."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return None


def _cmd_build(args: argparse.Namespace) -> int:
    from ... import commands  # loaded when a command runs, not for --help
    from ...config import DatabaseURL, resolve_db

    if args.shards and not isinstance(resolve_db(args.db), DatabaseURL):
        where = args.db or f"the default index ({resolve_db(None)})"
        args.build_parser.error(f"--shards needs a PostgreSQL coordinator: --db postgresql://..., not {where}")
    bars = _build_bars(lambda: _count_lines(args.source) if args.source else 100)
    summary = commands.build(
        db=args.db,
        source=args.source,
        progress=bars,
        format=args.format,
        workers=args.workers,
        stem=args.stem,
        stopwords=args.stopwords,
        shards=args.shards,
        semantic=args.semantic,
    )
    for note in summary.notes:
        print(f"retrieval: note: {note}", file=sys.stderr)
    for warning in summary.warnings:
        print(f"retrieval: warning: {warning}", file=sys.stderr)
    from ..output.display import count

    shards = f" over {count(len(summary.shards), 'shard')}" if summary.shards else ""
    vectors = f", text vectors by {summary.semantic}" if summary.semantic else ""
    _print_summary(
        args,
        summary.to_dict(),
        f"built {summary.path}{shards}: {count(summary.papers, 'paper')}, {count(summary.edges, 'citation edge')}, "
        f"{count(summary.dangling_references, 'dangling reference')}, "
        f"{count(summary.self_citations_dropped, 'self-citation')} dropped, {count(summary.terms, 'term')}"
        f"{vectors}, {summary.seconds:.1f} s",
    )
    return 0


def _cmd_add(args: argparse.Namespace) -> int:
    from ... import commands  # loaded when a command runs, not for --help

    progress = _progress_bar(_count_lines(args.source))
    try:
        summary = commands.add(args.source, db=args.db, replace=args.replace, progress=progress, format=args.format)
    finally:
        if progress:
            progress(-1)
    from ..output.display import count

    _print_summary(
        args,
        summary.to_dict(),
        _upgraded(summary)
        + f"added {count(summary.added, 'paper')} to {summary.path} ({summary.replaced:,} replaced); "
        + _dropped(summary)
        + f"{count(summary.papers, 'paper')}, {count(summary.terms, 'term')} now; {summary.seconds:.2f} s",
    )
    if summary.added == 0 and summary.replaced == 0:
        print(f"retrieval: warning: {args.source} holds no papers: nothing was added", file=sys.stderr)
    return 0


def _dropped(summary) -> str:
    """What an add dropped from the papers' reference lists (as a build's summary says), or nothing."""
    from ..output.display import count

    parts = [
        f"{count(n, what)} dropped"
        for n, what in (
            (summary.self_citations_dropped, "self-citation"),
            (summary.duplicate_references_dropped, "repeated reference"),
        )
        if n
    ]
    return "; ".join(parts) + "; " if parts else ""


def _upgraded(summary) -> str:
    """The line that says a write first upgraded the index (``WriteSummary.upgraded_from``), or nothing."""
    if summary.upgraded_from is None:
        return ""
    from ...store.database import HEAD_REVISION

    return (
        f"upgraded {summary.path} from schema revision {summary.upgraded_from} to {HEAD_REVISION} first (a version "
        "of retrieval that wrote the old revision can no longer open it)\n"
    )


def _cmd_remove(args: argparse.Namespace) -> int:
    from ... import commands  # loaded when a command runs, not for --help
    from ..output.display import count

    summary = commands.remove(args.ids, db=args.db)
    text = _upgraded(summary) + (
        f"removed {count(summary.removed, 'paper')} from {summary.path}; {count(summary.papers, 'paper')} now"
    )
    _print_summary(args, summary.to_dict(), text)
    return 0


def _cmd_upgrade(args: argparse.Namespace) -> int:
    from ... import commands  # loaded when a command runs, not for --help

    result = commands.upgrade(db=args.db)
    before, after = result
    located = resolve_db(args.db)
    where = str(getattr(located, "shown", located)) if args.db else "the index"  # a server URL without its password
    reindexed = getattr(result, "reindexed", None)
    if before == after and reindexed is None:
        text = f"{where} is at schema revision {after} already: nothing to do"
    elif before == after:
        text = f"re-indexed {where} from tokeniser v{reindexed} to v{TOKENISER_VERSION} (schema revision {after})"
    else:
        text = f"upgraded {where} from schema revision {before} to {after}"
        if reindexed is not None:
            text += f", re-indexed from tokeniser v{reindexed} to v{TOKENISER_VERSION}"
    fields = {"path": str(getattr(located, "shown", located)), "from_revision": before, "to_revision": after}
    upgraded = before != after or reindexed is not None
    _print_summary(args, {**fields, "reindexed_from_tokeniser": reindexed, "upgraded": upgraded}, text)
    return 0


def _print_summary(args: argparse.Namespace, fields: dict, text: str) -> None:
    """A write's closing summary: ``text``, or with ``--json`` its fields as one JSON object."""
    if args.json:
        print(json.dumps(fields, ensure_ascii=False, indent=2, default=str))
    else:
        print(text)


def _print_trace(statements) -> None:
    """Every statement that ran, in order, with its parameters (what ``--sql`` prints)."""
    for number, statement in enumerate(statements, start=1):
        print(f"-- {number}. {statement.name}")
        print(statement.sql + ";")
        if statement.params:
            print("-- parameters: " + json.dumps(statement.params, ensure_ascii=False))
        print()


def _config(args: argparse.Namespace) -> RetrievalConfig:
    base = RetrievalConfig.lesson() if args.lesson else RetrievalConfig()
    given = {
        "top_k_lexical": args.top_k_lexical,
        "max_hops": args.hops,
        "expand": args.expand,
        "relations": tuple(args.relations.split(",")) if args.relations else None,
        "gate_threshold": args.gate_threshold,
        "gate_min_survivors": args.gate_survivors,
        "max_neighbours": args.max_neighbours,
        "max_candidates": args.max_candidates,
        "prf": getattr(args, "prf", None),
        "ranking": getattr(args, "ranking", None),
        "model": getattr(args, "model", None),
        "w_cocited": getattr(args, "cocited_weight", None),
    }
    changes = {key: value for key, value in given.items() if value is not None}
    if args.no_hub_weighting:
        changes["hub_weighting"] = False
    if changes.get("model"):
        changes["ranking"] = "learned"
    if "expand" not in changes and ({"gate_threshold", "gate_min_survivors"} & set(changes)):
        changes["expand"] = "auto"  # the gate's settings ask for the gate
    if "ranking" not in changes and not args.lesson and set(changes) & set(POLICY_FIELDS):
        # An option of the policy, given, asks for the policy, even at its default value (``--expand always``).
        changes["ranking"] = "expansion"
    return base.replace(**changes)


def _cmd_search(args: argparse.Namespace) -> int:
    from ... import commands  # loaded when a command runs, not for --help
    from ...store.sql.executor import Trace

    if args.sql and args.format is not None:  # the statements are printed instead of the results
        args.search_parser.error(
            f"--sql prints the statements a search ran instead of its results: leave out --sql for the {args.format} "
            "results, or --format/--json for the statements"
        )
    if args.authors and not args.plain:  # each within its bound, the two together past it: still the command's
        from ...search.syntax import parse

        named = len(parse(args.query).authors) + len(args.authors)
        if named > LIMITS["authors"]:
            args.search_parser.error(
                f"a search filters by at most {LIMITS['authors']} authors (a paper by all of them), got {named}: "
                f"{len(args.authors)} as --author and {named - len(args.authors)} as author: in the query; give fewer"
            )
    config = _config(args)
    trace = Trace() if args.sql else None
    try:
        result = commands.search(
            args.query, db=args.db, config=config, limit=args.limit, tracer=trace,
            offset=args.offset, syntax=not args.plain, **params.filter_values(vars(args)),
        )  # fmt: skip
    except TooLargeError as exc:  # too many terms, as the index analyses them: the command line's to shorten
        args.search_parser.error(str(exc))
    if trace is not None:
        _print_trace(trace.statements)
        return 0
    print_entries(result, args.format, why=args.why, verbose=args.verbose)
    return 0


def print_entries(
    result, fmt: str | None = None, why: bool = False, document: object = None, verbose: bool = False
) -> None:
    """A ranked list on stdout: exported in ``fmt`` (``retrieval.interfaces.output.export.FORMATS``; ``json`` prints
    ``document``, by default the result's ``to_dict()``), or as the table that fits the terminal and its summary
    (``why``: a line per entry with the blend's terms; ``verbose``: the scores and the ranking's internals).
    ``result``: a ``RetrievalResult`` or anything with ``ranked``, ``config``, ``query``, ``metrics`` and
    ``expansion`` (``offset``, ``matched``, ``warnings`` when it has them); its warnings go to stderr, whatever the
    format."""
    offset = getattr(result, "offset", 0)
    for warning in getattr(result, "warnings", ()):
        _error(warning, prefix="retrieval: warning: ")
    if fmt is not None:
        from ..output.export import export

        sys.stdout.write(export(result, fmt, offset=offset, document=document))
        return
    from ..output import display

    width = display.terminal_width()
    lines = display.result_lines(result, width, why=why, offset=offset, scores=verbose)
    summary = display.summary_lines(result, width, offset=offset, verbose=verbose or why)  # --why: how it ranked too
    print("\n".join(lines + ([""] + summary if summary else [])))


def _cmd_stats(args: argparse.Namespace) -> int:
    from ... import commands  # loaded when a command runs, not for --help

    info = commands.stats(db=args.db)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    width = max(len(k) for k in info)
    for key, value in info.items():
        shown = f"{value:.3f}" if isinstance(value, float) else ("" if value is None else value)
        if isinstance(value, list):  # a sharded index's shards
            shown = ", ".join(value)
        if isinstance(value, int) and not isinstance(value, bool) and not key.endswith("year"):
            shown = f"{value:,}"
        print(f"{key:<{width}}  {shown}")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from ... import commands  # loaded when a command runs, not for --help
    from ...store.integrity import REVISION_INVARIANT

    report = commands.check(db=args.db, limit=args.examples)
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
        return 0 if report.ok else 1
    for note in report.notes:
        print(f"note: {note}")
    for problem in report.problems:
        print(f"{problem.invariant}: {problem.count:,} problem{'s' if problem.count != 1 else ''}")
        for example in problem.examples:
            print(f"  {example}")
        if problem.count > len(problem.examples):
            print(f"  ... and {problem.count - len(problem.examples):,} more")
    checked = f"{len(report.checked)} invariants checked in {report.seconds:.1f} s"
    if report.ok:
        print(f"{report.path} is consistent: {checked}")
        return 0
    if [problem.invariant for problem in report.problems] == [REVISION_INVARIANT]:
        # Another revision or tokeniser is not damage: nothing else was checked, and the line above says what to do.
        print(f"{report.path} was not checked further: its revision or tokeniser is not this version's (above)")
        return 1
    print(
        f"{report.path} is damaged: {len(report.problems)} invariant{'s' if len(report.problems) != 1 else ''} "
        f"broken ({checked}); rebuild it with `{report.rebuild}`"
    )
    return 1


def _check_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=index_location, help=DB_HELP)
    p.add_argument(
        "--examples",
        type=bounded("limit"),
        default=5,
        metavar="N",
        help=f"rows shown per broken invariant (default 5, at most {LIMITS['limit']:,})",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_check)


SUMMARY_JSON_HELP = "print the summary as one JSON object"


def _build_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="source", metavar="FILE", help="corpus file (default: the built-in demo corpus)")
    p.add_argument("--format", choices=FORMATS, help=FORMAT_HELP)
    p.add_argument(
        "--workers",
        type=bounded("workers", 0),
        help="processes that tokenise during the build (default: one per core, at most 2; 0 = this process only)",
    )
    add_analysis_options(p)
    p.add_argument(
        "--semantic",
        type=semantic_model,
        default="auto",
        metavar="MODEL",
        help=f"also encode every paper's text with this model for the semantic signal: {SEMANTIC_HELP}; recorded "
        "in the index, later adds encode with it. auto (default): wordllama where the corpus has fewer than 1.5 "
        "citation edges a paper and it is installed, else none",
    )
    p.add_argument("--db", type=index_location, help=DB_HELP)
    p.add_argument(
        "--shards",
        metavar="URL,URL,...",
        type=shard_urls,
        help="partition the index over these PostgreSQL servers, --db being their coordinator (postgres_fdw); "
        "a rebuild of a sharded index keeps its shards",
    )
    p.add_argument("--json", action="store_true", help=SUMMARY_JSON_HELP)
    p.set_defaults(func=_cmd_build, build_parser=p)


def _add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="FILE", help="papers to add (JSONL, OpenAlex or S2 lines; plain or gzip)")
    p.add_argument("--format", choices=FORMATS, help=FORMAT_HELP)
    p.add_argument("--replace", action="store_true", help="overwrite papers whose id is already in the index")
    p.add_argument("--db", type=index_location, help=DB_HELP)
    p.add_argument("--json", action="store_true", help=SUMMARY_JSON_HELP)
    p.set_defaults(func=_cmd_add)


def _remove_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("ids", nargs="+", type=_paper_id, metavar="ID", help="paper ids")
    p.add_argument("--db", type=index_location, help=DB_HELP)
    p.add_argument("--json", action="store_true", help=SUMMARY_JSON_HELP)
    p.set_defaults(func=_cmd_remove)


def _search_args(p: argparse.ArgumentParser) -> None:
    """``search``'s options in three groups, as ``--help`` lists them: the query and its filters, the output, and
    the ranking's settings (advanced: the defaults are the evaluated ones)."""
    p.usage = "%(prog)s QUERY [--year RANGE] [--author NAME] [--limit N] [--offset N] [--format FORMAT] [options]"
    asked = p.add_argument_group("query and filters")
    asked.add_argument(
        "query",
        type=query,
        help=f"free-text query (at most {LIMITS['query_chars']:,} characters, {LIMITS['query_terms']:,} terms): words, "
        '"a phrase", -word, author:NAME, year:1998-2001',
    )
    _filter_args(asked)
    asked.add_argument(
        "--limit",
        type=bounded("limit"),
        default=10,
        metavar="N",
        help=f"results to show (default 10, at most {LIMITS['limit']:,})",
    )
    asked.add_argument(
        "--plain",
        action="store_true",
        help='read the query as plain words: no "phrases", -exclusions, author: or year: (long queries always are)',
    )
    asked.add_argument("--db", type=index_location, help=DB_HELP)
    shown = p.add_argument_group("output")
    add_output_args(shown)
    shown.add_argument("--sql", action="store_true", help="print every statement the search ran, with its parameters")
    ranking = p.add_argument_group(
        "ranking (advanced)", "how papers are ranked; the defaults are the ones the evaluation chose"
    )
    ranking.add_argument(
        "--ranking",
        choices=("auto", "expansion", "learned"),
        help="auto (the default): the learned ranking, or the policy where the papers matching the query are "
        "rarely cited; expansion: the policy, the hand-weighted blend (implied by --expand, --relations, --hops, "
        "--top-k-lexical, the gate's and the caps' options); learned: the learned linear blend "
        "(INDEX.ranker.json when `retrieval train` wrote one, else the shipped model)",
    )
    ranking.add_argument("--model", metavar="FILE", help="the learned ranking's model file (implies --ranking learned)")
    ranking.add_argument("--lesson", action="store_true", help="the lesson's blend: 10 seeds, 2 hops, 0.5/0.3/0.2")
    ranking.add_argument(
        "--cocited-weight",
        type=non_negative,
        metavar="W",
        help="the default ranking's co-citation feedback: its top 100 re-ranked by how often they are cited beside "
        "its top 10, at this weight (default 0.3; 0 turns it off)",
    )
    ranking.add_argument(
        "--top-k-lexical",
        type=bounded("top_k_lexical"),
        metavar="K",
        help=f"BM25 seeds (default 20, at most {LIMITS['top_k_lexical']:,})",
    )
    ranking.add_argument("--hops", type=hops, help="citation hops from the seeds, 0-2 (default 1; the lesson's 2)")
    ranking.add_argument(
        "--expand", choices=EXPAND_MODES, help="graph expansion: always (default), never, or auto (behind the gate)"
    )
    ranking.add_argument("--relations", type=relations, help=f"comma-separated, of {','.join(RELATIONS)}")
    ranking.add_argument(
        "--gate-threshold",
        type=unit,
        metavar="MATCH",
        help="match a seed needs to survive the gate, 0-1 (default 0.3; implies --expand auto)",
    )
    ranking.add_argument(
        "--gate-survivors",
        type=bounded("gate_min_survivors"),
        metavar="N",
        help="expand when fewer seeds survive (default 3; implies --expand auto)",
    )
    ranking.add_argument(
        "--max-neighbours",
        type=bounded("max_neighbours"),
        metavar="N",
        help=f"per paper and relation (default 30, at most {LIMITS['max_neighbours']:,})",
    )
    ranking.add_argument(
        "--max-candidates",
        type=bounded("max_candidates"),
        metavar="N",
        help=f"papers the graph may add (default 100, at most {LIMITS['max_candidates']:,})",
    )
    ranking.add_argument("--no-hub-weighting", action="store_true", help="no 1/ln(e + degree) down-weighting")
    ranking.add_argument(
        "--prf",
        choices=PRF_METHODS,
        help="pseudo-relevance feedback: rm3 expands the query by its top 10 papers' 10 best terms (default none)",
    )
    p.set_defaults(func=_cmd_search, search_parser=p)


def _filter_args(p) -> None:
    """The filters (``params.FILTERS``: ``--year``, ``--author``, ...) and ``--offset``: those of every command that
    ranks papers (``p``: a parser, or one of its argument groups)."""
    for f in params.FILTERS:
        if f.repeat:
            kind = checked(f) if f.check is not None else str
            p.add_argument(
                f.option,
                dest=f.name,
                action=AtMost,
                most=LIMITS[f.name],
                type=kind,
                default=[],
                metavar=f.metavar,
                help=f.cli_help(),
            )
        elif f.choices:
            p.add_argument(f.option, dest=f.name, choices=f.choices, default=None, help=f.cli_help())
        else:
            p.add_argument(f.option, dest=f.name, type=checked(f), metavar=f.metavar, help=f.cli_help())
    p.add_argument(
        "--offset", type=bounded("offset", 0), default=params.OFFSET.default, metavar="N", help=params.OFFSET.cli_help()
    )


def _cmd_similar(args: argparse.Namespace) -> int:
    from ... import commands  # loaded when a command runs, not for --help

    ids = list(args.ids)
    if args.from_file:
        ids += commands.read_ids(args.from_file)
    if not ids:
        args.similar_parser.error("give at least one paper id (or --from FILE of ids)")
    if len(ids) > LIMITS["similar_seeds"]:
        args.similar_parser.error(
            f"similar takes at most {LIMITS['similar_seeds']:,} paper ids, got {len(ids):,}: split the reading list"
        )
    exclude = commands.read_ids(args.exclude) if args.exclude else []
    result = commands.similar(
        ids, db=args.db, limit=args.limit, offset=args.offset, exclude=exclude, **params.filter_values(vars(args))
    )
    return _print_similar(args, result)


def _similar_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("ids", nargs="*", type=_paper_id, metavar="PAPER_ID", help="one paper, or several (a reading list)")
    p.add_argument(
        "--from",
        dest="from_file",
        metavar="FILE",
        help="more paper ids, one per line (a # after a space starts a comment)",
    )
    p.add_argument("--exclude", metavar="FILE", help="paper ids to leave out (those you have), one per line")
    p.add_argument("--db", type=index_location, help=DB_HELP)
    p.add_argument(
        "--limit", type=bounded("limit"), default=10, help=f"results to show (default 10, at most {LIMITS['limit']:,})"
    )
    _filter_args(p)
    add_output_args(p)
    p.set_defaults(func=_cmd_similar, similar_parser=p)


def _cmd_show(args: argparse.Namespace) -> int:
    from ... import commands  # loaded when a command runs, not for --help

    paging = {f.name: getattr(args, f.name) for f in params.LINKS}
    page = commands.show(args.paper_id, db=args.db, **paging)
    return _print_show(args, page)


def _show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paper_id", type=_paper_id, metavar="PAPER_ID", help=f"{params.PAPER_ID.help}, or its DOI where that is its id"
    )
    p.add_argument("--db", type=index_location, help=DB_HELP)
    limit, sort = params.LINKS_LIMIT, params.LINKS_SORT
    p.add_argument(
        "--limit", type=bounded("limit"), default=limit.default, metavar="N",
        help=f"{limit.help} (default {limit.default}, at most {LIMITS['limit']:,})",
    )  # fmt: skip
    p.add_argument("--sort", choices=sort.choices, default=sort.default, help=f"{sort.help} (default {sort.default})")
    for f in (params.REFERENCES_OFFSET, params.CITATIONS_OFFSET):
        p.add_argument(f.option, type=_link_offset, default=f.default, metavar="N", help=f.help)
    add_output_args(p, why=False)
    p.set_defaults(func=_cmd_show)


def _paper_id(text: str) -> str:
    """A paper id as given: any text but a blank one (a usage error that says it is empty)."""
    if not text.strip():
        from ...search.papers import EMPTY_ID

        raise argparse.ArgumentTypeError(EMPTY_ID)
    return text


def _link_offset(text: str) -> int:
    """An offset into a paper's references or citing papers: 0 or more, up to the library's ``MAX_LINK_OFFSET``
    (a page past the end is empty; the work does not grow with the offset). A much-cited paper's citing papers
    may number more than ``--offset``'s 9,000."""
    from ...search.papers import MAX_LINK_OFFSET
    from .options import _whole_number

    return _whole_number(text, 0, "0 or more", MAX_LINK_OFFSET)


def _print_similar(args: argparse.Namespace, result) -> int:
    """``similar``'s papers: exported, or the table with each paper's reasons on a second line."""
    if args.format is not None:
        print_entries(result, args.format)
        return 0
    from ..output import display

    for warning in result.warnings:
        _error(warning, prefix="retrieval: warning: ")
    width = display.terminal_width()
    seeds = ", ".join(result.seeds[:3]) + (f" and {len(result.seeds) - 3} more" if len(result.seeds) > 3 else "")
    if not result.ranked:
        print("\n".join(display.no_similar_lines(result, seeds, width)))
        return 0
    lines = display.result_lines(result, width, why=True, offset=result.offset, scores=args.verbose)
    if result.ranked:
        summary = [
            f"{display.results_span(result.offset, len(result.ranked))} of {'' if result.matched_exact else 'about '}"
            f"{display.count(result.matched, 'paper')} like {seeds}",
            f"{result.wall_time_ms:.1f} ms",
        ]
        lines += [""] + display.clauses(summary, width)
        if args.verbose:
            formula = "score = cocitation/3 + coupling/3 + text/3 (cosines over citation counts; BM25 over the best)"
            lines += display.wrap(formula, width, hanging=2)
    print("\n".join(lines))
    return 0


def _print_show(args: argparse.Namespace, page) -> int:
    if args.format is not None:
        from ..output.export import export

        sys.stdout.write(export(page, args.format, document=page.to_dict()))
        return 0
    from ..output import display

    print("\n".join(display.paper_lines(page.paper, display.terminal_width(), page.linked, page.linked, page=page)))
    return 0


def _stats_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=index_location, help=DB_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_stats)


def _upgrade_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", type=index_location, help=DB_HELP)
    p.add_argument("--json", action="store_true", help=SUMMARY_JSON_HELP)
    p.set_defaults(func=_cmd_upgrade)


#: The query column of ``retrieval log``'s table: what the other columns leave of 80.
LOG_QUERY_WIDTH = 80 - 52


def _cmd_log(args: argparse.Namespace) -> int:
    from ... import commands  # loaded when a command runs, not for --help

    where = args.db or "the index"
    if args.switch is not None:
        if args.since or args.json or args.plot:
            args.log_parser.error("`log on` and `log off` take no other option than --db")
        was = commands.log_enable(args.switch == "on", db=args.db)
        if args.switch == "on":
            state = "was on already" if was else "is on"
            print(f"the query log of {where} {state}: each search, similar and explain adds a row to query_log")
        else:
            print(f"the query log of {where} is off{'' if was else ' (it was not on)'}; logged rows are kept")
        return 0
    if args.plot:
        drawn = commands.log_plot(args.plot, db=args.db, since=args.since)
        print(f"drew {drawn:,} logged queries (hit count, top score, latency over time) to {args.plot}")
        return 0
    rows = commands.log_entries(db=args.db, since=args.since)
    enabled = commands.log_status(db=args.db)
    if args.json:
        print(json.dumps({"enabled": enabled, "since": args.since, "entries": rows}, ensure_ascii=False, indent=2))
        return 0
    if rows:
        print(f"{'time (UTC)':<16} {'kind':<7} {'hits':>6} {'top':>6} {'ms':>7} {'gate':<4} query")
    from ..output.display import one_line

    for row in rows:
        text = one_line(row["query"])  # a query the API logged may hold a terminal's escape sequences: not sent raw
        if len(text) > LOG_QUERY_WIDTH:
            text = text[: LOG_QUERY_WIDTH - 3] + "..."
        gate = {None: "-", True: "yes", False: "no"}[row["gate_fired"]]
        print(
            f"{row['logged_at'][:16].replace('T', ' '):<16} {row['kind']:<7} {row['hit_count']:>6} "
            f"{row['top_score']:6.3f} {row['wall_ms']:7.1f} {gate:<4} {text}"
        )
    since = f" since {args.since}" if args.since else ""
    state = "on" if enabled else "off (`retrieval log on` turns it on)"
    if rows:
        print()
    print(f"{len(rows):,} logged {'query' if len(rows) == 1 else 'queries'}{since}; the query log is {state}")
    return 0


def _since(text: str) -> str:
    from ...store.querylog import since_bound  # loaded when the command runs

    try:
        return since_bound(text)
    except RetrievalError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _log_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("switch", nargs="?", choices=("on", "off"), help="turn the log on or off (default: list it)")
    p.add_argument("--db", type=index_location, help=DB_HELP)
    p.add_argument("--since", type=_since, metavar="DATE", help="entries from this ISO 8601 date or time on (UTC)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", metavar="FILE", help="draw hit count, top score and latency over time as a PNG")
    p.set_defaults(func=_cmd_log, log_parser=p)


#: Every subcommand: name -> (one-line help, what adds its options: a function here, or the module of another
#: package whose ``add_arguments`` does). Only the invoked subcommand's options are added, and only its module
#: imported, so ``retrieval --help`` and ``retrieval search`` pay for nothing else.
COMMANDS = {
    "build": ("index a corpus into a new index file (replaced only when the build succeeds)", _build_args),
    "add": ("add papers to an index, statistics kept exact", _add_args),
    "remove": ("remove papers and their edges from an index", _remove_args),
    "search": ("search the index", _search_args),
    "similar": ("papers like these: co-citation, shared references and text similarity", _similar_args),
    "show": ("one paper: authors, year, abstract, its references and citing papers", _show_args),
    "stats": ("what the index holds", _stats_args),
    "upgrade": ("bring an index of an older schema revision to this version's, atomically", _upgrade_args),
    "check": (
        "check every invariant a search relies on, reading the whole index (exit 1 if one is broken)",
        _check_args,
    ),
    "log": ("the query log: turn it on or off, list it, or plot it over time", _log_args),
    "fetch": (
        "fetch a corpus from OpenAlex, Semantic Scholar or arXiv into a JSONL file (resumable)",
        "retrieval.interfaces.cli.fetch",
    ),
    "eval": (
        "measure recall, MAP, nDCG and MRR of every retrieval mode on a corpus and a query file",
        "retrieval.interfaces.cli.eval",
    ),
    "train": (
        "fit the learned ranking on judged queries, print its cross-validated figures, write it beside the index",
        "retrieval.interfaces.cli.train",
    ),
    "explain": (
        "rank papers by the evidence graph of the query's seeds, and say why (the Crase method)",
        "retrieval.interfaces.cli.explain",
    ),
    "serve": (
        "serve the index over HTTP: a JSON API, read-only, on loopback by default",
        "retrieval.interfaces.cli.serve",
    ),
    "mcp": ("serve search, similar, show and explain as MCP tools over stdio, for agents", "retrieval.interfaces.mcp"),
}


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (the main parser has none)."""
    return next((word for word in argv if not word.startswith("-")), None)


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, told the terminal's width: left to find it, it imports ``shutil`` (a few ms of every
    command's start, for each option added) only to read it."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width=None) -> None:
        if width is None:
            from ..output.display import terminal_width

            width = terminal_width(minimum=13) - 2
        super().__init__(prog, indent_increment, max_help_position, width)


def version() -> str:
    """The installed package's version (its metadata), else ``retrieval.__version__`` (a source tree)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("retrieval")
    except PackageNotFoundError:
        from ... import __version__

        return __version__


class _Version(argparse.Action):
    """``--version``: the version is looked up only when asked for (importlib.metadata is slow to import)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        print(f"retrieval {version()}")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors say what to do with a value that starts with a dash, which argparse
    reads as an unknown option: a word to leave out (``-entropy``) belongs inside the quoted query, an id after
    ``--``."""

    #: The arguments being parsed (``main``), to tell which of them argparse took for an unknown option.
    given: tuple[str, ...] = ()

    def error(self, message: str):
        if "unrecognized arguments: " in message:
            unknown = message.split("unrecognized arguments: ", 1)[1].split()
        elif "arguments are required" in message:
            unknown = [a for a in self.given if a.split("=", 1)[0] not in self._option_string_actions]
        else:
            unknown = []
        dashed = [a for a in unknown if len(a) > 1 and a[0] == "-" and not (a[1] == "-" or a[1].isdigit())]
        if dashed:
            command = next((a for a in self.given if a in COMMANDS), "COMMAND")
            if command == "search":
                message += (
                    f"; a word to leave out goes inside the quoted query: retrieval search 'black hole {dashed[0]}'"
                )
            else:
                # The command as given, its options kept before the -- (after it, --db would be a paper id).
                rest = [a for a in self.given if a not in dashed and a != command]
                message += f"; a value that starts with '-' goes after --: {_command_line(command, rest, dashed)}"
        elif "unrecognized arguments: " in message and "--" in self.given:
            message += self._options_after_dashes()
        super().error(message)

    def _options_after_dashes(self) -> str:
        """The hint for this command's options given after ``--`` (``show -- -x --db my.db``), where they are
        values: the command again with them before it; empty when none of them is an option of the command."""
        cut = self.given.index("--")
        after = list(self.given[cut + 1 :])
        options: list[str] = []
        values: list[str] = []
        while after:
            word = after.pop(0)
            action = self._option_string_actions.get(word.split("=", 1)[0])
            if action is None:
                values.append(word)
                continue
            options.append(word)
            if action.nargs != 0 and "=" not in word and after:  # its value follows it
                options.append(after.pop(0))
        if not options:
            return ""
        command = next((a for a in self.given[:cut] if a in COMMANDS), "COMMAND")
        before = [a for a in self.given[:cut] if a != command]
        return f"; options go before the --: {_command_line(command, [*before, *options], values)}"


def _command_line(command: str, options: list[str], values: list[str]) -> str:
    """``retrieval COMMAND OPTIONS -- VALUES``, quoted for a shell: a usage hint's command to run instead."""
    return " ".join(shlex.quote(a) for a in ["retrieval", command, *options, "--", *values])


def make_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the options of ``command`` only (the other subcommands are listed with their help)."""
    parser = _Parser(
        prog="retrieval",
        description="An embedded literature-retrieval index: BM25 in SQL plus a citation-graph walk.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # A known command gets its own parser only (each costs a few gettext look-ups on disk); the main help and
    # an unknown command's usage error list them all.
    for name, (summary, adder) in COMMANDS.items() if command not in COMMANDS else [(command, COMMANDS[command])]:
        p = sub.add_parser(name, help=summary, formatter_class=_Formatter)
        if name == command:
            (import_module(adder).add_arguments if isinstance(adder, str) else adder)(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _Parser.given = tuple(argv)
    parser = make_parser(_command_of(argv))
    try:
        args, unknown = parser.parse_known_args(argv)
    except OSError as exc:  # --help or --version printed to a full disk, a closed descriptor
        _error(f"{exc} (an environment failure: check where the output goes)")
        return 1
    if unknown:  # said by the command's parser, whose usage line names its options (not "retrieval COMMAND ...")
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        commands.choices[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    stop.reset()
    previous = {}
    try:
        # SIGTERM cleans up as Ctrl-C does (temporary files removed, transactions rolled back); both are also
        # remembered, for a writer to find should a garbage collector's callback drop the exception. A SIGINT
        # the process was started ignoring (a script's `cmd &`) stays ignored, as Python itself leaves it.
        for sig in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(sig) is not signal.SIG_IGN or sig == signal.SIGTERM:
                previous[sig] = signal.signal(sig, stop.request)
    except ValueError:  # not the main thread (main() called from a program's worker thread): leave signals alone
        pass
    shown, warnings.showwarning = warnings.showwarning, _show_warning
    unraisable, sys.unraisablehook = sys.unraisablehook, _unraisable
    try:
        code = args.func(args)
        if stop.requested() and stop.is_saved():  # the stop came once the change was saved: it was finished
            _error("the stop arrived after the change was saved: the command finished", prefix="retrieval: ")
        return code
    except RetrievalError as exc:
        _error(str(exc))
        return 1
    except KeyboardInterrupt:
        _error("interrupted; nothing was changed", prefix="retrieval: ")
        return 130
    except BrokenPipeError:  # e.g. `retrieval search ... | head`
        return 0
    except Exception as exc:  # the last net: an environment failure a layer below did not name
        if stop.requested() and not stop.is_saved():  # a library's error made of the stop (SQLAlchemy's)
            _error("interrupted; nothing was changed", prefix="retrieval: ")
            return 130
        if not isinstance(exc, OSError) and type(exc).__module__ != "sqlite3":
            raise
        if stop.is_saved():  # e.g. the summary printed to a full disk: the index is written all the same
            _error(f"the change was saved, but then: {exc} (an environment failure: check where the output goes)")
            return 1
        _error(f"{exc} (an environment failure: check the files named, the disk and the permissions)")
        return 1
    finally:
        warnings.showwarning = shown
        sys.unraisablehook = unraisable
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        stop.reset()  # the command is over: a program's next call (not through main) starts clean


def _unraisable(unraisable) -> None:
    """A stop raised where Python cannot raise it (a garbage collector's callback, a lock's release) is dropped
    without its traceback: ``retrieval.stop`` remembers it, and the command acts on it. Anything else is shown
    as Python shows it."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        return
    sys.__unraisablehook__(unraisable)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """The library's warnings (a clamped setting) as one line each, without the Python source location."""
    text = str(message)
    if text.startswith("max_hops "):
        text = "--hops " + text.removeprefix("max_hops ")
    _error(text, prefix="retrieval: warning: ")


def _error(message: str, prefix: str = "retrieval: error: ") -> None:
    """Print ``message`` on stderr, whatever the terminal's encoding can show."""
    text = prefix + message
    try:
        print(text, file=sys.stderr)
    except UnicodeEncodeError:
        print(text.encode("ascii", "backslashreplace").decode("ascii"), file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
