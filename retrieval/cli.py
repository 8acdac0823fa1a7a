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
import signal
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from .cli_types import bounded, hops, query, relations, unit
from .config import DB_ENV_VAR, DEFAULT_DB, EXPAND_MODES, RELATIONS, RetrievalConfig
from .errors import RetrievalError
from .validate import LIMITS

#: The input formats (``retrieval.corpus.jsonl.FORMATS``, which a test keeps equal), named here so that parsing
#: a search does not import the readers.
FORMATS = ("jsonl", "openalex", "s2")


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

    from .store.progress import READING, BuildProgress

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
    try:
        with open(path, "rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return None


def _cmd_build(args: argparse.Namespace) -> int:
    from . import commands  # loaded when a command runs, not for --help

    bars = _build_bars(lambda: _count_lines(args.source) if args.source else 100)
    summary = commands.build(db=args.db, source=args.source, progress=bars, format=args.format, workers=args.workers)
    print(
        f"built {summary.path}: {summary.papers:,} papers, {summary.edges:,} citation edges, "
        f"{summary.dangling_references:,} dangling references, "
        f"{summary.self_citations_dropped:,} self-citations dropped, {summary.terms:,} terms, "
        f"{summary.seconds:.1f} s"
    )
    return 0


def _cmd_add(args: argparse.Namespace) -> int:
    from . import commands  # loaded when a command runs, not for --help

    progress = _progress_bar(_count_lines(args.source))
    try:
        summary = commands.add(args.source, db=args.db, replace=args.replace, progress=progress, format=args.format)
    finally:
        if progress:
            progress(-1)
    print(
        f"added {summary.added:,} papers to {summary.path} ({summary.replaced:,} replaced); "
        f"{summary.papers:,} papers, {summary.terms:,} terms now; {summary.seconds:.2f} s"
    )
    return 0


def _cmd_remove(args: argparse.Namespace) -> int:
    from . import commands  # loaded when a command runs, not for --help

    summary = commands.remove(args.ids, db=args.db)
    print(f"removed {summary.removed:,} papers from {summary.path}; {summary.papers:,} papers now")
    return 0


def _cmd_upgrade(args: argparse.Namespace) -> int:
    from . import commands  # loaded when a command runs, not for --help

    before, after = commands.upgrade(db=args.db)
    if before == after:
        print(f"{args.db or 'the index'} is at schema revision {after} already: nothing to do")
    else:
        print(f"upgraded {args.db or 'the index'} from schema revision {before} to {after}")
    return 0


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
    }
    changes = {key: value for key, value in given.items() if value is not None}
    if args.no_hub_weighting:
        changes["hub_weighting"] = False
    return base.replace(**changes)


def _cmd_search(args: argparse.Namespace) -> int:
    from . import commands  # loaded when a command runs, not for --help
    from .store.executor import Trace

    config = _config(args)
    trace = Trace() if args.sql else None
    result = commands.search(args.query, db=args.db, config=config, limit=args.limit, tracer=trace)
    if trace is not None:
        _print_trace(trace.statements)
        return 0
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
        return 0
    m = result.metrics
    if not result.ranked:
        print(f"no results for {args.query.text!r} ({m['wall_time_ms']:.1f} ms)")
        return 0
    print(
        f"{'#':>3}  {'id':<16} {'year':>4}  {'final':>6}  {'bm25':>7}  {'graph':>5}  {'recency':>7}  {'how':<24} title"
    )
    for rank, r in enumerate(result.ranked, start=1):
        year = "" if r.paper.year is None else str(r.paper.year)
        title = r.paper.title if len(r.paper.title) <= 50 else r.paper.title[:47] + "..."
        how = r.how() if len(r.how()) <= 24 else r.how()[:21] + "..."
        print(
            f"{rank:>3}  {r.paper.id:<16} {year:>4}  {r.final_score:6.4f}  {r.bm25_score:7.3f}  "
            f"{r.graph_score:5.3f}  {r.recency_score:7.3f}  {how:<24} {title}"
        )
    gate = result.expansion.get("gate", {})
    graph = "evidence" if config.ranking == "expansion" else "1/.6/.3 by hops"
    print(
        f"\n{len(result.ranked)} of {m['hit_count']} hits shown; top {m['top_score']:.4f}, "
        f"average {m['avg_score']:.4f}, {m['wall_time_ms']:.1f} ms. "
        f"final = {config.w_bm25:g}*bm25/max + {config.w_graph:g}*graph({graph}) + {config.w_recency:g}*recency"
    )
    if gate:
        state = "expanded" if gate["fired"] else "not expanded"
        print(f"graph: {state} ({gate['reason']}); {result.expansion.get('candidates_added', 0)} papers added")
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    from . import commands  # loaded when a command runs, not for --help

    info = commands.stats(db=args.db)
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    width = max(len(k) for k in info)
    for key, value in info.items():
        shown = f"{value:.3f}" if isinstance(value, float) else ("" if value is None else value)
        if isinstance(value, int) and not isinstance(value, bool) and not key.endswith("year"):
            shown = f"{value:,}"
        print(f"{key:<{width}}  {shown}")
    return 0


DB_HELP = f"index file (default: ${DB_ENV_VAR}, else ./{DEFAULT_DB})"
FORMAT_HELP = "input format: jsonl, openalex or s2 (default: detected from the first record)"


def _build_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from", dest="source", metavar="FILE", help="corpus file (default: the built-in demo corpus)")
    p.add_argument("--format", choices=FORMATS, help=FORMAT_HELP)
    p.add_argument(
        "--workers",
        type=bounded("workers", 0),
        help="processes that tokenise during the build (default: one per core, at most 2; 0 = this process only)",
    )
    p.add_argument("--db", help=DB_HELP)
    p.set_defaults(func=_cmd_build)


def _add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="FILE", help="papers to add (JSONL, OpenAlex or S2 lines; plain or gzip)")
    p.add_argument("--format", choices=FORMATS, help=FORMAT_HELP)
    p.add_argument("--replace", action="store_true", help="overwrite papers whose id is already in the index")
    p.add_argument("--db", help=DB_HELP)
    p.set_defaults(func=_cmd_add)


def _remove_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("ids", nargs="+", metavar="ID", help="paper ids")
    p.add_argument("--db", help=DB_HELP)
    p.set_defaults(func=_cmd_remove)


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "query",
        type=query,
        help=f"free-text query (at most {LIMITS['query_chars']:,} characters, {LIMITS['query_terms']:,} terms)",
    )
    p.add_argument("--db", help=DB_HELP)
    p.add_argument(
        "--limit", type=bounded("limit"), default=10, help=f"results to show (default 10, at most {LIMITS['limit']:,})"
    )
    p.add_argument(
        "--top-k-lexical",
        type=bounded("top_k_lexical"),
        help=f"BM25 seeds (default 20, at most {LIMITS['top_k_lexical']:,})",
    )
    p.add_argument("--hops", type=hops, help="citation hops from the seeds, 0-2 (default 1; the lesson's 2)")
    p.add_argument("--lesson", action="store_true", help="the lesson's blend: 10 seeds, 2 hops, 0.5/0.3/0.2")
    p.add_argument("--expand", choices=EXPAND_MODES, help="graph expansion: never, always, auto (default)")
    p.add_argument("--relations", type=relations, help=f"comma-separated, of {','.join(RELATIONS)}")
    p.add_argument("--gate-threshold", type=unit, help="match a seed needs to survive the gate, 0-1 (default 0.3)")
    p.add_argument(
        "--gate-survivors", type=bounded("gate_min_survivors"), help="expand when fewer seeds survive (default 3)"
    )
    p.add_argument(
        "--max-neighbours",
        type=bounded("max_neighbours"),
        help=f"per paper and relation (default 30, at most {LIMITS['max_neighbours']:,})",
    )
    p.add_argument(
        "--max-candidates",
        type=bounded("max_candidates"),
        help=f"papers the graph may add (default 1000, at most {LIMITS['max_candidates']:,})",
    )
    p.add_argument("--no-hub-weighting", action="store_true", help="no 1/ln(e + degree) down-weighting")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--sql", action="store_true", help="print every statement the search ran, with its parameters")
    p.set_defaults(func=_cmd_search)


def _stats_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", help=DB_HELP)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_stats)


def _upgrade_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", help=DB_HELP)
    p.set_defaults(func=_cmd_upgrade)


#: Every subcommand: name -> (one-line help, what adds its options: a function here, or the module of another
#: package whose ``add_arguments`` does). Only the invoked subcommand's options are added, and only its module
#: imported, so ``retrieval --help`` and ``retrieval search`` pay for nothing else.
COMMANDS = {
    "build": ("index a corpus into a new index file (replaced only when the build succeeds)", _build_args),
    "add": ("add papers to an index, statistics kept exact", _add_args),
    "remove": ("remove papers and their edges from an index", _remove_args),
    "search": ("search the index", _search_args),
    "stats": ("what the index holds", _stats_args),
    "upgrade": ("bring an index of an older schema revision to this version's, atomically", _upgrade_args),
    "eval": (
        "measure recall, MAP, nDCG and MRR of every retrieval mode on a corpus and a query file",
        "retrieval.eval.cli",
    ),
    "explain": (
        "rank papers by the evidence graph of the query's seeds, and say why (the Crase method)",
        "retrieval.evidence.cli",
    ),
}


def _command_of(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (the main parser has none)."""
    return next((word for word in argv if not word.startswith("-")), None)


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, told the terminal's width: left to find it, it imports ``shutil`` (a few ms of every
    command's start, for each option added) only to read it."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width=None) -> None:
        if width is None:
            try:
                columns = int(os.environ["COLUMNS"])
            except (KeyError, ValueError):
                try:
                    columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
                except (AttributeError, ValueError, OSError):
                    columns = 80
            width = max(columns - 2, 11)
        super().__init__(prog, indent_increment, max_help_position, width)


def make_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the options of ``command`` only (the other subcommands are listed with their help)."""
    parser = argparse.ArgumentParser(
        prog="retrieval",
        description="An embedded literature-retrieval index: BM25 in SQL plus a citation-graph walk.",
        formatter_class=_Formatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # A known command gets its own parser only (each costs a few gettext look-ups on disk); the main help and
    # an unknown command's usage error list them all.
    for name, (summary, adder) in COMMANDS.items() if command not in COMMANDS else [(command, COMMANDS[command])]:
        p = sub.add_parser(name, help=summary, formatter_class=_Formatter)
        if name == command:
            (import_module(adder).add_arguments if isinstance(adder, str) else adder)(p)
    return parser


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM cleans up as Ctrl-C does: temporary files removed, transactions rolled back


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = make_parser(_command_of(argv)).parse_args(argv)
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (main() called from a program's worker thread): leave signals alone
        previous = None
    try:
        return args.func(args)
    except RetrievalError as exc:
        _error(str(exc))
        return 1
    except KeyboardInterrupt:
        _error("interrupted; nothing was changed", prefix="retrieval: ")
        return 130
    except BrokenPipeError:  # e.g. `retrieval search ... | head`
        return 0
    except Exception as exc:  # the last net: an environment failure a layer below did not name
        if not isinstance(exc, OSError) and type(exc).__module__ != "sqlite3":
            raise
        _error(f"{exc} (an environment failure: check the files named, the disk and the permissions)")
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _error(message: str, prefix: str = "retrieval: error: ") -> None:
    """Print ``message`` on stderr, whatever the terminal's encoding can show."""
    text = prefix + message
    try:
        print(text, file=sys.stderr)
    except UnicodeEncodeError:
        print(text.encode("ascii", "backslashreplace").decode("ascii"), file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
