"""The ``retrieval explain`` subcommand: parsing and printing only; the work is ``retrieval.evidence.explain``.

The main CLI imports this module only when ``retrieval explain`` runs, and calls ``add_arguments`` on the
subcommand's parser. Errors are ``RetrievalError`` subclasses, which the main CLI prints before exiting 1.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from ..cli_types import bounded, non_negative, query, unit, year
from ..config import DB_ENV_VAR, DEFAULT_DB
from ..errors import ConfigError
from .config import CAP_POLICIES, RANKERS, RECENCY, EvidenceConfig

if TYPE_CHECKING:  # the pipeline (and NumPy) is imported when the command runs, not when it is registered
    from .records import EdgeRecord, EvidenceRun, PaperExplanation

#: Pruned edges listed in the text output (``--json`` lists them all).
PRUNED_SHOWN = 10
#: Seed edges listed per returned paper in the text output.
LINKS_SHOWN = 4
DEFAULTS = EvidenceConfig()


DESCRIPTION = (
    "Seeds from the query and its sub-queries (BM25 and recency), their 1.5-hop citation graph, edges "
    "weighted and pruned by how well the cited paper supports the citing one, and a recency-aware "
    "personalised PageRank or SALSA over what remains. Prints, per returned paper, the seeds and edges "
    "that brought it in, and the pruned edges with the reason."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``retrieval explain`` on its parser ``p``."""
    p.description = DESCRIPTION
    p.add_argument("query", type=query, help="free-text query (it is always sub-query 0)")
    p.add_argument("--db", help=f"index file (default: ${DB_ENV_VAR}, else ./{DEFAULT_DB})")
    p.add_argument("--subquery", action="append", default=[], metavar="TEXT", help="a sub-query (repeatable)")
    p.add_argument(
        "--plan",
        metavar="FILE",
        help='sub-queries from a file: a JSON list, {"subqueries": [...]}, or one per line',
    )
    p.add_argument("--ranker", choices=RANKERS, default=DEFAULTS.ranker, help="walk (default: ppr)")
    p.add_argument("--no-prune", action="store_true", help="keep every edge, whatever its Delta")
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
        help="seeds per sub-query (default 10)",
    )
    p.add_argument("--theta", type=unit, default=DEFAULTS.theta, help="support a claim needs (default 0.1)")
    p.add_argument("--tau", type=unit, default=DEFAULTS.tau, help="Delta below which an edge is pruned (default 0.3)")
    p.add_argument("--beta", type=non_negative, default=DEFAULTS.beta, help="age discount exponent (default 0.5)")
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
    p.add_argument("--json", action="store_true", help="print the whole run as one JSON object")
    p.set_defaults(func=_cmd_explain)


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
        beta=args.beta,
        recency=recency,
        query_year=args.query_year,
        ranker=args.ranker,
        top_k=args.top_k,
    )


def _cmd_explain(args: argparse.Namespace) -> int:
    from .export import write_dot, write_graphml
    from .pipeline import explain_index

    config = config_from_args(args)
    run = explain_index(
        args.query.text, db=args.db, subqueries=args.subquery, plan=args.plan, config=config, save=args.save
    )
    written = []
    if args.graphml:
        written.append(("GraphML", write_graphml(run, args.graphml)))
    if args.dot:
        written.append(("DOT", write_dot(run, args.dot)))
    if args.json:
        print(json.dumps(run.to_dict(), ensure_ascii=False, indent=2))
        return 0
    print_run(run)
    for kind, path in written:
        print(f"wrote the graph as {kind} to {path}")
    return 0


def _edge(edge: EdgeRecord) -> str:
    return f"Delta {edge.delta:.2f} ({edge.support.covered}/{edge.claims_citing} claims), w {edge.weight:.3f}"


def _title(text: str, width: int = 70) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _print_paper(rank: int, explanation: PaperExplanation, run: EvidenceRun) -> None:
    node = explanation.node
    year = "" if node.year is None else str(node.year)
    print(f"{rank:>3}  {node.paper_id:<18} {year:>4}  {node.score:.5f}  {_title(node.title)}")
    if node.seed is not None:
        if node.seed.explicit:
            print(f"       seed (given), relevance {node.seed.relevance:.2f}")
        for hit in node.seed.hits:
            print(
                f"       seed of sub-query {hit.subquery} {_title(run.subqueries[hit.subquery], 40)!r}: rank "
                f"{hit.rank}, bm25 {hit.bm25:.2f} ({hit.bm25_norm:.2f} of the best), recency {hit.recency:.2f}"
            )
    # The strongest seed edges first; pruned ones last, with their reason.
    via = sorted(explanation.via, key=lambda link: (not link.edge.kept, -link.edge.weight, link.seed))
    for link in via[:LINKS_SHOWN]:
        verb = "cited by seed" if link.relation == "reference" else "cites seed"
        state = "" if link.edge.kept else f"  [pruned: {link.edge.reason}]"
        print(f"       {verb} {link.seed}: {_edge(link.edge)}{state}")
    if len(via) > LINKS_SHOWN:
        rest = via[LINKS_SHOWN:]
        pruned = sum(1 for link in rest if not link.edge.kept)
        print(f"       and {len(rest)} more seed edges ({pruned} pruned)")
    inbound = [e for e in explanation.in_edges if e.citing not in {link.seed for link in explanation.via}]
    if inbound:
        shown = ", ".join(f"{e.citing} ({_edge(e)})" for e in inbound[:3])
        more = f" and {len(inbound) - 3} more" if len(inbound) > 3 else ""
        print(f"       also cited in the graph by {shown}{more}")


def print_run(run: EvidenceRun) -> None:
    """The human-readable account of a run: sizes, health, the returned papers with their reasons, pruned edges."""
    size, cfg = run.size, run.config
    trimmed = f", trimmed from {size.found_nodes:,} / {size.found_edges:,}" if size.trimmed else ""
    print(f"query: {run.query!r}" + (f" with {len(run.subqueries) - 1} sub-queries" if len(run.subqueries) > 1 else ""))
    print(
        f"seeds: {len(run.seeds)}; evidence graph |V| = {size.nodes:,}, |E| = {size.edges:,}{trimmed} "
        f"(cap {size.cap or 'none'}, {size.cap_policy}); {size.claims:,} claims"
    )
    print(f"scorer {run.scorer}: {run.scorer_calls:,} calls (announced bound {size.scorer_bound:,})")
    kept_nodes = sum(1 for node in run.nodes.values() if node.kept)
    pruning = f"tau {cfg.tau:g}, theta {cfg.theta:g}" if cfg.prune else "pruning off"
    print(
        f"kept {kept_nodes:,} papers and {len(run.kept_edges):,} edges; pruned {len(run.pruned_edges):,} edges "
        f"({pruning}); dropped {len(run.dropped_nodes):,} papers"
    )
    print(
        f"ranker {cfg.ranker}: alpha {cfg.alpha:g}, beta {cfg.beta:g}, reference year {run.reference_year} "
        f"({cfg.recency}), {run.iterations} iterations, {run.timings_ms.get('total', 0.0):.0f} ms"
    )
    print(f"status: {run.health.status}")
    for warning in run.health.warnings:
        print(f"  warning: {warning}")
    if run.run_id is not None:
        print(f"saved as run {run.run_id} (tables evidence_runs, evidence_run_nodes, evidence_run_edges)")
    if not run.top:
        print("\nno paper ranked")
    else:
        print(f"\n{'#':>3}  {'id':<18} {'year':>4}  {'score':>7}  title")
        for rank, explanation in enumerate(run.explanations(), start=1):
            _print_paper(rank, explanation, run)
    pruned = run.pruned_edges
    if pruned:
        print(f"\npruned edges ({min(PRUNED_SHOWN, len(pruned))} of {len(pruned):,}; --json lists all):")
        for edge in pruned[:PRUNED_SHOWN]:
            print(f"  {edge.citing} -> {edge.cited}: {edge.reason}")
