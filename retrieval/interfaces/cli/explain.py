"""The ``retrieval explain`` subcommand: parsing and printing only; the work is ``retrieval.evidence.explain``.

The main CLI imports this module only when ``retrieval explain`` runs, and calls ``add_arguments`` on the
subcommand's parser. Errors are ``RetrievalError`` subclasses, which the main CLI prints before exiting 1.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ...errors import ConfigError, InputError, TooLargeError
from ...evidence.config import BETA_RANGE, CAP_POLICIES, COVERAGES, RANKERS, RECENCY, EvidenceConfig
from .options import DB_HELP, add_output_args, bounded, index_location, number_in, query, unit, year

if TYPE_CHECKING:  # the pipeline (and NumPy) is imported when the command runs, not when it is registered
    from ...evidence.records import EvidenceRun

#: Pruned edges listed in the text output (``--json`` lists them all).
PRUNED_SHOWN = 10
#: Seed edges listed per returned paper in the text output.
LINKS_SHOWN = 4
DEFAULTS = EvidenceConfig()


DESCRIPTION = (
    "Seeds from the query, its sub-queries and (for a long query) its sentences, their 1.5-hop citation "
    "graph, edges pruned by how well the cited paper supports the citing one, and the seeds' vote (or "
    "personalised PageRank or SALSA) over what remains. Prints, per returned paper, the seeds and edges "
    "that brought it in, and the pruned edges with the reason."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``retrieval explain`` on its parser ``p``."""
    p.description = DESCRIPTION
    p.add_argument("query", type=query, help="free-text query (it is always sub-query 0)")
    p.add_argument("--db", type=index_location, help=DB_HELP)
    p.add_argument("--subquery", action="append", default=[], metavar="TEXT", help="a sub-query (repeatable)")
    p.add_argument(
        "--plan",
        metavar="FILE",
        help='sub-queries from a file: a JSON list, {"subqueries": [...]}, or one per line',
    )
    p.add_argument(
        "--ranker", choices=RANKERS, default=DEFAULTS.ranker, help="the seeds' vote, PageRank or SALSA (default: vote)"
    )
    p.add_argument("--no-prune", action="store_true", help="keep every edge, whatever its Delta")
    p.add_argument(
        "--no-split", action="store_true", help="no automatic sentence sub-queries for a long query (40+ tokens)"
    )
    p.add_argument(
        "--coverage",
        choices=COVERAGES,
        default=DEFAULTS.coverage,
        help="Delta: soft (mean support ramped to theta, floor 0.05; default) or hard (share of claims at theta)",
    )
    p.add_argument(
        "--recency",
        choices=RECENCY,
        help="count ages from the corpus's latest year (default) or the query's year (--query-year, else this year)",
    )
    p.add_argument("--query-year", type=year, metavar="YEAR", help="the query's year (implies --recency query-year)")
    p.add_argument("--top-k", type=bounded("top_k"), default=DEFAULTS.top_k, help="papers to return (default 10)")
    p.add_argument(
        "--seeds",
        type=bounded("seeds_per_subquery"),
        default=DEFAULTS.seeds_per_subquery,
        help="seeds per sub-query (default 15)",
    )
    p.add_argument("--theta", type=unit, default=DEFAULTS.theta, help="support a claim needs (default 0.1)")
    p.add_argument("--tau", type=unit, default=DEFAULTS.tau, help="Delta below which an edge is pruned (default 0.1)")
    p.add_argument(
        "--beta", type=number_in(*BETA_RANGE), default=DEFAULTS.beta, help="age discount exponent, 0 to 10 (default 0)"
    )
    p.add_argument(
        "--max-nodes",
        type=bounded("max_nodes"),
        default=DEFAULTS.max_nodes,
        help="cap on the graph's papers (default 2000)",
    )
    p.add_argument("--cap", choices=CAP_POLICIES, default=DEFAULTS.cap_policy, help="over the cap: trim or refuse")
    p.add_argument("--save", action="store_true", help="store the run in the index file (evidence_runs tables)")
    p.add_argument("--graphml", metavar="FILE", help="write the run's graph as GraphML")
    p.add_argument("--dot", metavar="FILE", help="write the run's graph as Graphviz DOT")
    add_output_args(p, why=False)  # --format, --json: json is the whole run as one JSON object
    p.set_defaults(func=_cmd_explain, explain_parser=p)


def config_from_args(args: argparse.Namespace) -> EvidenceConfig:
    """The run's settings from the parsed arguments."""
    recency = args.recency or ("query-year" if args.query_year is not None else "corpus")
    if args.query_year is not None and recency != "query-year":
        raise ConfigError("--query-year applies to --recency query-year: drop one of the two")
    return EvidenceConfig(
        seeds_per_subquery=args.seeds,
        max_nodes=args.max_nodes,
        cap_policy=args.cap,
        theta=args.theta,
        tau=args.tau,
        prune=not args.no_prune,
        coverage=args.coverage,
        split="none" if args.no_split else DEFAULTS.split,
        beta=args.beta,
        recency=recency,
        query_year=args.query_year,
        ranker=args.ranker,
        top_k=args.top_k,
    )


def _cmd_explain(args: argparse.Namespace) -> int:
    from ...evidence.export import write_dot, write_graphml
    from ...evidence.pipeline import explain_index

    config = config_from_args(args)
    try:
        run = explain_index(args.query, db=args.db, subqueries=args.subquery, plan=args.plan, config=config,
                            save=args.save)  # fmt: skip
    except TooLargeError as exc:  # too many terms, as the index analyses them: the command line's to shorten
        args.explain_parser.error(str(exc))
    written = []
    for kind, option, path, write in (("GraphML", "--graphml", args.graphml, write_graphml),
                                      ("DOT", "--dot", args.dot, write_dot)):  # fmt: skip
        if not path:
            continue
        try:
            written.append((kind, write(run, path)))
        except OSError as exc:
            raise InputError(
                f"cannot write the graph as {kind} to {path} ({exc.strerror or exc}): give {option} a file in a "
                "folder you may write to"
            ) from None
    if args.format is not None:
        from ..output.export import export

        sys.stdout.write(export(run_entries(run, args.db), args.format, document=run.to_dict()))
        return 0
    print_run(run)
    for kind, path in written:
        print(f"wrote the graph as {kind} to {path}")
    return 0


def run_entries(run: EvidenceRun, db: str | None = None) -> list[tuple]:
    """The run's returned papers as ``(paper, score, record)`` for ``retrieval.interfaces.output.export``: each
    paper read whole (authors, abstract) from the index at ``db``, its record the explanation ``--json`` lists with
    its ``citations`` (the citations the index records of it) added."""
    from ...corpus.paper import Paper
    from ...search.client import RetrievalClient

    explanations = run.explanations()
    with RetrievalClient(db=db) as client:
        papers = client.papers([e.node.paper_id for e in explanations])
    out = []
    for e in explanations:
        found = papers.get(e.node.paper_id)
        paper = found or Paper(e.node.paper_id, e.node.title, year=e.node.year)
        record = e.to_dict()
        if found is not None:  # the citations the index records of it, as a search's records count them
            record["citations"] = len(found.citations)
        out.append((paper, e.node.score, record))
    return out


def print_run(run: EvidenceRun, width: int | None = None) -> None:
    """The human-readable account of a run (``retrieval.interfaces.output.display.run_lines``), at most ``width``
    columns wide (by default the terminal's, at least 80): sizes, health, the returned papers with their reasons,
    pruned edges."""
    from ..output.display import run_lines, terminal_width

    lines = run_lines(run, width or terminal_width(), links_shown=LINKS_SHOWN, pruned_shown=PRUNED_SHOWN)
    print("\n".join(lines))
