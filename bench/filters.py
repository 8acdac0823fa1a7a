"""What filters, query syntax and ``similar`` cost: each against the unfiltered search of the same queries.

    python bench/filters.py                      # hepth from ../shared/data, 100 queries
    python bench/filters.py --db hepth.db --queries 200

Queries: the first words (3-5) of hepth dev-query titles. Every variant runs the full search (lexical pass,
gate, graph pass, blend; top 10, papers loaded) on one client, after a warm-up; the table gives p50 and p95 in ms
and their ratio to the unfiltered search. ``similar`` runs on the dev queries' own papers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval import RetrievalClient  # noqa: E402
from retrieval.commands import build  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "hepth"


def _queries(n: int) -> tuple[list[str], list[str]]:
    texts, ids = [], []
    for line in (SHARED / "queries-dev.jsonl").read_text(encoding="utf-8").splitlines()[:n]:
        record = json.loads(line)
        words = record["query"].split()
        texts.append(" ".join(words[: 3 + len(texts) % 3]))
        ids.append(record["qid"])
    return texts, [i for i in ids if i]


def _times(run, items) -> list[float]:
    out = []
    for item in items:
        start = time.perf_counter()
        run(item)
        out.append((time.perf_counter() - start) * 1000.0)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", help="a hepth index (default: built into a temporary folder)")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args(argv)
    tmp = None
    db = args.db
    if db is None:
        tmp = tempfile.TemporaryDirectory()
        db = str(Path(tmp.name) / "hepth.db")
        build(db=db, source=SHARED / "papers.jsonl")
    texts, ids = _queries(args.queries)
    variants = {
        "unfiltered": lambda c, q: c.search(q, limit=10),
        "--year 1998-2001": lambda c, q: c.search(q, limit=10, year="1998-2001"),
        "--year 1995- (most pass)": lambda c, q: c.search(q, limit=10, year="1995-"),
        "--author Witten": lambda c, q: c.search(q, limit=10, authors=["Witten"]),
        "-string (excluded word)": lambda c, q: c.search(q + " -string", limit=10),
        '"black hole" (phrase)': lambda c, q: c.search(q + ' "black hole"', limit=10),
        "--offset 90": lambda c, q: c.search(q, limit=10, offset=90),
    }
    rows = []
    with RetrievalClient(db) as client:
        for run in variants.values():  # warm-up: the file in the page cache, statements prepared
            run(client, texts[0])
        base = None
        for name, run in variants.items():
            times = _times(lambda q, run=run: run(client, q), texts)
            p50, p95 = statistics.median(times), statistics.quantiles(times, n=20)[18]
            base = base or (p50, p95)
            rows.append((name, p50, p95, p50 / base[0], p95 / base[1]))
        times = _times(lambda pid: client.similar(pid, limit=10), ids[:50])
        p50, p95 = statistics.median(times), statistics.quantiles(times, n=20)[18]
        rows.append((f"similar ({len(ids[:50])} papers)", p50, p95, p50 / base[0], p95 / base[1]))
    print(f"hepth, {len(texts)} short queries, full search top 10 (ms)\n")
    print(f"| {'variant':<26} | {'p50':>7} | {'p95':>7} | {'p50 ratio':>9} | {'p95 ratio':>9} |")
    print(f"|{'-' * 28}|{'-' * 9}|{'-' * 9}|{'-' * 11}|{'-' * 11}|")
    for name, p50, p95, r50, r95 in rows:
        print(f"| {name:<26} | {p50:7.1f} | {p95:7.1f} | {r50:8.2f}x | {r95:8.2f}x |")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
