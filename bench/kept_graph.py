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

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval import RetrievalClient  # noqa: E402
from retrieval.commands import build  # noqa: E402
from retrieval.search import adjacency  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "hepth"


def phase(client: RetrievalClient, queries: list[str], kept: bool) -> tuple[list[float], list]:
    """Each query's time (ms) and ranking, with the graph kept or read by statements."""
    adjacency.GRAPHS.clear()
    rent = adjacency.GRAPH_RENT
    adjacency.GRAPH_RENT = 1e-9 if kept else math.inf
    try:
        if kept:
            client.search(queries[0], full=False)  # its rows pay the rent: the graph is read after it
            with client.snapshot() as snap:
                if adjacency.GRAPHS.of(snap) is None:
                    raise SystemExit("the graph was not kept: is RETRIEVAL_POSTINGS_CACHE_MB too small?")
        times, rankings = [], []
        for query in queries:
            start = time.perf_counter()
            result = client.search(query, full=False)
            times.append((time.perf_counter() - start) * 1000.0)
            rankings.append([(e.paper.id, e.final_score) for e in result.ranked])
        return times, rankings
    finally:
        adjacency.GRAPH_RENT = rent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", help="a hepth index (default: built into a temporary folder)")
    parser.add_argument("--queries", type=int, default=100, help="queries per set (default 100)")
    parser.add_argument("--rounds", type=int, default=2, help="phases of each kind per set (default 2)")
    args = parser.parse_args(argv)
    sets = {
        name: [json.loads(line)["query"] for line in (SHARED / f"{name}.jsonl").read_text().splitlines()][
            : args.queries
        ]
        for name in ("queries-dev", "queries-dev-titles")
    }
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "hepth.db")
        if args.db is None:
            build(db=db, source=SHARED / "papers.jsonl")
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
