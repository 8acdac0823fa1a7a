"""What the default ranking's co-citation feedback costs: the default search with and without it, in one run.

    python bench/cocited.py                      # hepth from ../shared/data, built into a temporary folder
    python bench/cocited.py --db hepth.db --queries 100 --rounds 2

The default (``ranking="auto"``) re-ranks its top 100 by co-citation with its top 10 (``retrieval.search.cocited``):
one statement per search, or the kept citation graph's arrays once a long-lived process keeps it
(``retrieval.search.adjacency``). This times ``client.search`` (page of 10, no abstracts) on hepth's dev queries,
abstracts and titles, with ``w_cocited`` 0 and 0.3 in alternating phases, ``--rounds`` times each, both with the
graph read by statements (a process's first searches, or one whose graph does not fit) and with the graph kept.
Medians per phase kind; read the ratios. No network at all.
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

from retrieval import RetrievalClient, RetrievalConfig  # noqa: E402
from retrieval.commands import build  # noqa: E402
from retrieval.search import adjacency  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "hepth"
OFF, ON = RetrievalConfig(w_cocited=0.0), RetrievalConfig()


def phase(client: RetrievalClient, queries: list[str], cfg: RetrievalConfig, kept: bool) -> list[float]:
    """Each query's time (ms) under ``cfg``, with the graph kept or read by statements."""
    adjacency.GRAPHS.clear()
    rent = adjacency.GRAPH_RENT
    adjacency.GRAPH_RENT = 1e-9 if kept else math.inf
    try:
        if kept:
            client.search(queries[0], cfg, full=False)  # its rows pay the rent: the graph is read after it
        times = []
        for query in queries:
            start = time.perf_counter()
            client.search(query, cfg, full=False)
            times.append((time.perf_counter() - start) * 1000.0)
        return times
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
        print("| queries | graph | without p50 / p95 (ms) | with p50 / p95 (ms) | with / without p50 |")
        print("|---|---|--:|--:|--:|")
        with RetrievalClient(db) as client:
            for name, queries in sets.items():
                phase(client, queries[:10], ON, False)  # warm: the postings and ids a long-lived process keeps
                for kept in (False, True):
                    times: dict[bool, list[float]] = {False: [], True: []}
                    for _ in range(args.rounds):
                        for on in (False, True):
                            times[on] += phase(client, queries, ON if on else OFF, kept)
                    p50 = {on: statistics.median(t) for on, t in times.items()}
                    p95 = {on: statistics.quantiles(t, n=20)[18] for on, t in times.items()}
                    print(f"| hepth {name} ({len(queries)}) | {'kept' if kept else 'statements'} "
                          f"| {p50[False]:.1f} / {p95[False]:.1f} | {p50[True]:.1f} / {p95[True]:.1f} "
                          f"| {p50[True] / p50[False]:.2f}x |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
