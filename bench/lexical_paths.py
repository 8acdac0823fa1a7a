"""The lexical pass's two paths side by side, per query: SQL over ``term_freq`` (planned, pruned) and the postings
BLOBs scored in NumPy, against the postings a query covers; and how often the cost model (``lexical.blob_path``)
chose the slower one. What the cost model's constants are fitted to.

    python bench/lexical_paths.py                         # hepth
    python bench/lexical_paths.py --db INDEX --queries FILE.jsonl

Queries (hepth): the dev queries' first 1-6 words, their titles, and their titles with abstracts. Each query runs
on both paths in one process (NumPy loaded, as in a server or an evaluation), best of ``--repeats``; both answers
must be identical (ids, and scores to 1e-9). Results: ``bench/results/lexical_paths.md``.
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
SHARED = ROOT.parent / "shared" / "data"
RESULTS = Path(__file__).resolve().parent / "results"

import numpy  # noqa: E402,F401  (loaded, as in a process that has scored a long query already)

from retrieval.commands import build  # noqa: E402
from retrieval.search import lexical  # noqa: E402
from retrieval.search.query import Query  # noqa: E402
from retrieval.store.database import connect  # noqa: E402
from retrieval.store.executor import Executor  # noqa: E402

BANDS = [(0, 1_000), (1_000, 10_000), (10_000, 50_000), (50_000, 200_000), (200_000, 10**12)]


def _queries(path: Path, limit: int) -> list[str]:
    rows = [json.loads(line)["query"] for line in path.read_text(encoding="utf-8").splitlines()[:limit]]
    out = []
    for i, text in enumerate(rows):
        words = text.split()
        out.append(" ".join(words[: 1 + i % 6]))  # 1-6 words
        out.append(text.split(". ")[0])  # the title
        out.append(text)  # title and abstract
    return out


def _time(executor: Executor, query: str, path: str, repeats: int) -> tuple[float, list, int, bool]:
    best = float("inf")
    for _ in range(repeats):
        with executor.snapshot() as snap:
            wq = lexical.weigh(snap, Query.parse(query))
            start = time.perf_counter()
            hits, _ = lexical.top_papers(snap, wq, 10, path=path)
            best = min(best, time.perf_counter() - start)
            chose_blobs = bool(wq.terms) and lexical.blob_path(wq, 10)
    return best * 1000, hits, sum(t.df for t in wq.terms), chose_blobs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, help="an index (default: hepth, built into a temporary folder)")
    parser.add_argument("--queries", type=Path, default=SHARED / "hepth" / "queries-dev.jsonl")
    parser.add_argument("--count", type=int, default=200, help="dev queries used (three queries each)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "lexical_paths.md")
    args = parser.parse_args(argv)
    tmp = tempfile.TemporaryDirectory(prefix="retrieval-bench-paths-")
    db = args.db
    if db is None:
        db = Path(tmp.name) / "hepth.db"
        build(db=db, source=SHARED / "hepth" / "papers.jsonl")
    executor = Executor(connect(db, readonly=True))
    rows = []
    mismatched = 0
    for query in _queries(args.queries, args.count):
        sql_ms, sql_hits, postings, chose = _time(executor, query, "sql", args.repeats)
        blob_ms, blob_hits, _, _ = _time(executor, query, "blobs", args.repeats)
        same = [p for p, _ in sql_hits] == [p for p, _ in blob_hits] and all(
            abs(a - b) <= 1e-9 for (_, a), (_, b) in zip(sql_hits, blob_hits, strict=True)
        )
        mismatched += not same
        rows.append((postings, sql_ms, blob_ms, chose))
    lines = [
        "# The lexical pass's two paths (`bench/lexical_paths.py`)",
        "",
        f"    python bench/lexical_paths.py   # {time.strftime('%Y-%m-%d')}, {len(rows)} queries, best of "
        f"{args.repeats}, top 10, NumPy loaded",
        "",
        "| postings the query covers | queries | SQL p50 ms | BLOBs p50 ms | SQL / BLOBs | cost model: BLOBs chosen "
        "| chose the slower path |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for lo, hi in BANDS:
        band = [r for r in rows if lo <= r[0] < hi]
        if not band:
            continue
        sql = statistics.median(r[1] for r in band)
        blob = statistics.median(r[2] for r in band)
        chosen = sum(r[3] for r in band)
        slower = sum((r[2] > r[1]) if r[3] else (r[1] > r[2]) for r in band)
        label = f"{lo:,}-{hi:,}" if hi < 10**12 else f"{lo:,} and more"
        lines.append(f"| {label} | {len(band)} | {sql:.2f} | {blob:.2f} | {sql / blob:.1f}x | {chosen} | {slower} |")
    chosen_total = sum(min(r[1], r[2]) for r in rows)
    model_total = sum(r[2] if r[3] else r[1] for r in rows)
    lines += [
        "",
        f"- Answers identical on both paths (ids, scores to 1e-9): {len(rows) - mismatched} of {len(rows)}.",
        f"- Time over all queries on the path the cost model chose: {model_total:,.0f} ms, against "
        f"{chosen_total:,.0f} ms had every query taken its faster path.",
        "- In a process that has not loaded NumPy yet, the model also charges its import (about 60 ms), so a "
        "fresh `retrieval search` keeps short queries in SQL.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.write_text(text)
    tmp.cleanup()
    return 0 if mismatched == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
