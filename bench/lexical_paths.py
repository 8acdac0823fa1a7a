"""The lexical pass's two paths side by side, per query: SQL over ``term_freq`` (planned, pruned) and the postings
BLOBs scored in NumPy, against the postings a query covers; and how often the cost model (``lexical.blob_path``)
chose the slower one. What the cost model's constants are fitted to.

    python bench/lexical_paths.py                         # hepth
    python bench/lexical_paths.py --db INDEX --queries FILE.jsonl
    python bench/lexical_paths.py --db INDEX --queries SET.json --out FILE.md   # a bench/queries.py set
    python bench/lexical_paths.py --db postgresql://HOST:PORT/DB --queries SET.json --out FILE.md   # a server

Queries (hepth): the dev queries' first 1-6 words, their titles, and their titles with abstracts; or the texts of
a query set that ``bench/scale.py`` wrote. Each query runs on both paths and on the cost model's own choice
(its plan included, where it plans first) in one process (NumPy loaded, as in a server or an evaluation), best
of ``--repeats``, each repeat reading its lists (``blobs.CACHE`` cleared: none kept from an earlier query); all
three answers must be identical (ids, and scores to 1e-9). Results: ``bench/results/lexical_paths.md``.
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
from retrieval.search import blobs, lexical  # noqa: E402
from retrieval.search.query import Query  # noqa: E402
from retrieval.store.backend import backend_of  # noqa: E402
from retrieval.store.sql.executor import Executor  # noqa: E402

BANDS = [(0, 1_000), (1_000, 10_000), (10_000, 50_000), (50_000, 200_000), (200_000, 10**12)]


def _queries(path: Path, limit: int) -> list[str]:
    if path.suffix == ".json":  # a set of bench/queries.py
        return [q["text"] for q in json.loads(path.read_text(encoding="utf-8"))["queries"]][: 3 * limit]
    rows = [json.loads(line)["query"] for line in path.read_text(encoding="utf-8").splitlines()[:limit]]
    out = []
    for i, text in enumerate(rows):
        words = text.split()
        out.append(" ".join(words[: 1 + i % 6]))  # 1-6 words
        out.append(text.split(". ")[0])  # the title
        out.append(text)  # title and abstract
    return out


def _time(executor: Executor, query: str, path: str | None, repeats: int) -> tuple[float, list, int, bool]:
    """Best time in ms, the hits, the postings the query covers, and whether the postings BLOBs were read."""
    best = float("inf")
    reads: list[str] = []
    executor.tracer = lambda statement: reads.append(statement.name)
    for _ in range(repeats):
        reads.clear()
        blobs.CACHE.clear()  # every repeat reads its lists, as a query does the first time in a process
        with executor.snapshot() as snap:
            wq = lexical.weigh(snap, Query.parse(query))
            start = time.perf_counter()
            hits, _ = lexical.top_papers(snap, wq, 10, path=path)
            best = min(best, time.perf_counter() - start)
    executor.tracer = None
    # Scored from the BLOBs: no top-k statement ran (the best papers' ids may come from memory, ``PaperIds``).
    return best * 1000, hits, sum(t.df for t in wq.terms), not any(n.startswith("lexical: top-k") for n in reads)


def _p95(values: list[float]) -> float:
    return values[min(len(values) - 1, int(0.95 * len(values)))]


def _same(a: list, b: list) -> bool:
    return [p for p, _ in a] == [p for p, _ in b] and all(
        abs(x - y) <= 1e-9 for (_, x), (_, y) in zip(a, b, strict=True)
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", help="an index file or a PostgreSQL URL (default: hepth, built in a temporary folder)")
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
    executor = Executor(backend_of(db).connect())
    rows = []
    mismatched = 0
    for query in _queries(args.queries, args.count):
        sql_ms, sql_hits, postings, _ = _time(executor, query, "sql", args.repeats)
        blob_ms, blob_hits, _, _ = _time(executor, query, "blobs", args.repeats)
        model_ms, model_hits, _, chose = _time(executor, query, None, args.repeats)
        mismatched += not (_same(sql_hits, blob_hits) and _same(sql_hits, model_hits))
        rows.append((postings, sql_ms, blob_ms, chose, model_ms))
    lines = [
        "# The lexical pass's two paths (`bench/lexical_paths.py`)",
        "",
        f"    python bench/lexical_paths.py {' '.join(argv if argv is not None else sys.argv[1:])}"
        f"   # {time.strftime('%Y-%m-%d')}, {len(rows)} queries, best of {args.repeats}, top 10, NumPy loaded",
        "",
        "| postings the query covers | queries | SQL p50 ms | BLOBs p50 ms | SQL / BLOBs | cost model: BLOBs chosen "
        "| chose the slower path | cost model's choice p50 / p95 ms |",
        "|---|--:|--:|--:|--:|--:|--:|--:|",
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
        model = sorted(r[4] for r in band)
        lines.append(
            f"| {label} | {len(band)} | {sql:.2f} | {blob:.2f} | {sql / blob:.1f}x | {chosen} | {slower} "
            f"| {statistics.median(model):.2f} / {model[min(len(model) - 1, int(0.95 * len(model)))]:.2f} |"
        )
    chosen_total = sum(min(r[1], r[2]) for r in rows)
    model_total = sum(r[4] for r in rows)
    every = sorted(r[4] for r in rows)
    best = sorted(min(r[1], r[2]) for r in rows)
    lines += [
        "",
        f"- Answers identical on both paths (ids, scores to 1e-9): {len(rows) - mismatched} of {len(rows)}.",
        f"- Time over all queries as the cost model runs them (its plan included, where it plans first): "
        f"{model_total:,.0f} ms, p50 {statistics.median(every):.2f} ms, p95 {_p95(every):.2f} ms; had every query "
        f"taken its faster path, with no plan: {chosen_total:,.0f} ms, p50 {statistics.median(best):.2f} ms, "
        f"p95 {_p95(best):.2f} ms.",
        "- Every repeat read its lists (none kept from an earlier query); a process that has read a list keeps it, "
        "and its later queries skip the read.",
        "- In a process that has not loaded NumPy yet, the model also charges its import (about 60 ms), so a "
        "fresh `retrieval search` keeps in SQL the queries it prunes well.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.write_text(text)
    tmp.cleanup()
    return 0 if mismatched == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
