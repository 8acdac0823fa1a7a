"""What keeping the query terms' rows saves (``retrieval.search.lexical.known_terms``), on SQLite and on a server.

    python bench/terms_kept.py                     # hepth from ../shared/data, built into a temporary folder
    python bench/terms_kept.py --db hepth.db --db postgresql://user@host/hepth --rounds 3

A process keeps the rows of the terms it has read (id, df, bound) for the index's generation; a query whose terms
were all read before is weighed without the terms statement. This times ``client.lexical.search`` (top 10) over
the short queries ``bench/postgres.py`` uses for hepth (the first 3-5 words of the dev queries' titles), with the
kept rows cleared before each query ("without") or kept ("with"), in two cases: each query asked once after 10
to warm up (``bench/postgres.py``'s case), and each asked a second time. The postings lists and the papers' ids
stay kept by the process in both (all read once before the phases, which alternate). Medians per phase; read
the differences. Loopback only, if a server is given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import hepth  # noqa: E402
import numpy  # noqa: E402, F401  (imported, as a long-lived process has it: the BLOB path is then the short query's)

from retrieval import RetrievalClient  # noqa: E402
from retrieval.search import lexical  # noqa: E402


def short_queries(count: int) -> list[str]:
    """``bench/postgres.py``'s hepth set: the first 3, 4 or 5 words of each dev query's title."""
    out: list[str] = []
    for line in (hepth.HEPTH / "queries-dev.jsonl").read_text(encoding="utf-8").splitlines():
        words = json.loads(line)["query"].split()
        out.append(" ".join(words[: 3 + len(out) % 3]))
    return out[:count]


def phase(db: str, queries: list[str], keep: bool, twice: bool) -> float:
    """The median ms of ``queries`` on ``db``, the kept terms cleared before each query unless ``keep``."""
    times = []
    lexical._TERMS.clear()
    with RetrievalClient(db) as client:
        for query in queries if twice else queries[:10]:  # warm-up: the lists and ids read, as in any process
            client.lexical.search(query, 10)
        for query in queries:
            if not keep:
                lexical._TERMS.clear()
            start = time.perf_counter()
            client.lexical.search(query, 10)
            times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", action="append", help="an index of hepth (repeat for several; default: built here)")
    p.add_argument("--queries", type=int, default=200, help="short queries (default 200)")
    p.add_argument("--rounds", type=int, default=3, help="phases of each kind per index and case (default 3)")
    args = p.parse_args()
    queries = short_queries(args.queries)
    with hepth.index(args.db[0] if args.db else None) as built:  # built only when no --db is given
        dbs = args.db or [built]
        print(f"{len(queries)} short hepth queries, top 10, median ms over each phase; {args.rounds} rounds\n")
        print("| index | case | without kept terms | with | difference |")
        print("|---|---|--:|--:|--:|")
        for db in dbs:
            shown = db.split("@")[-1] if "://" in db else Path(db).name
            phase(db, queries, True, True)  # every list read once: the phases differ only in the terms kept
            for twice, case in ((False, "each query once"), (True, "each query a second time")):
                without, kept = [], []
                for _ in range(args.rounds):  # alternating, so that a slow spell falls on both
                    without.append(phase(db, queries, False, twice))
                    kept.append(phase(db, queries, True, twice))
                a, b = statistics.median(without), statistics.median(kept)
                print(f"| {shown} | {case} | {a:.3f} | {b:.3f} | {b - a:+.3f} |")


if __name__ == "__main__":
    main()
