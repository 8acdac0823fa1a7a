"""The default search with the citation graph read by statements and with it kept by the process, in one run.

    python bench/kept_graph.py                      # hepth from ../shared/data, built into a temporary folder
    python bench/kept_graph.py --db hepth.db --queries 100 --rounds 2

A long-lived process keeps the citation graph once its statements have read about a graph's worth of edges
(``retrieval.search.adjacency``); the expansion and the seeds' vote then take their seeds' references, citing
papers and degrees from the arrays. This times ``client.search`` (the default ranking, page of 10, no abstracts)
on hepth's dev queries, abstracts and titles, in phases that alternate: statements (the graph never kept), kept
(read once at the phase's start), ``--rounds`` times each, and checks that both give the same ranking and scores
for every query. Medians per phase kind; read the ratio. Loopback only: no network at all.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import hepth  # noqa: E402

from retrieval import RetrievalClient  # noqa: E402


def phase(client: RetrievalClient, queries: list[str], kept: bool) -> tuple[list[float], list]:
    """Each query's time (ms) and ranking, with the graph kept or read by statements."""
    times, rankings = [], []
    with hepth.graph(client, queries[0], kept):
        for query in queries:
            start = time.perf_counter()
            result = client.search(query, full=False)
            times.append((time.perf_counter() - start) * 1000.0)
            rankings.append([(e.paper.id, e.final_score) for e in result.ranked])
    return times, rankings


def main(argv: list[str] | None = None) -> int:
    args = hepth.parser(__doc__).parse_args(argv)
    sets = hepth.dev_sets(args.queries)
    with hepth.index(args.db) as db:
        print("| queries | graph read by statements p50 (ms) | graph kept p50 (ms) | kept / statements |")
        print("|---|--:|--:|--:|")
        with RetrievalClient(db) as client:
            for name, queries in sets.items():
                phase(client, queries[:10], False)  # warm: the postings and ids a long-lived process keeps
                times: dict[bool, list[float]] = {False: [], True: []}
                answers: dict[bool, list] = {}
                for _ in range(args.rounds):
                    for kept in (False, True):
                        spent, answers[kept] = phase(client, queries, kept)
                        times[kept] += spent
                if answers[False] != answers[True]:
                    raise SystemExit(f"{name}: the kept graph ranked differently")
                plain, kept = statistics.median(times[False]), statistics.median(times[True])
                print(f"| hepth {name} ({len(queries)}) | {plain:.1f} | {kept:.1f} | {kept / plain:.2f}x |")
        print("\nevery ranking and score the same with the graph kept as by statements")
    return 0


if __name__ == "__main__":
    sys.exit(main())
