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

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import hepth  # noqa: E402

from retrieval import RetrievalClient, RetrievalConfig  # noqa: E402

OFF, ON = RetrievalConfig(w_cocited=0.0), RetrievalConfig()


def phase(client: RetrievalClient, queries: list[str], cfg: RetrievalConfig, kept: bool) -> list[float]:
    """Each query's time (ms) under ``cfg``, with the graph kept or read by statements."""
    times = []
    with hepth.graph(client, queries[0], kept, config=cfg):
        for query in queries:
            start = time.perf_counter()
            client.search(query, cfg, full=False)
            times.append((time.perf_counter() - start) * 1000.0)
    return times


def main(argv: list[str] | None = None) -> int:
    args = hepth.parser(__doc__).parse_args(argv)
    sets = hepth.dev_sets(args.queries)
    with hepth.index(args.db) as db:
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
