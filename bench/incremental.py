"""Adding 1% to an index against rebuilding it, on a synthetic corpus, beside bm25s's only option (re-indexing).

    python bench/incremental.py                 # 100K papers + 1K added, then the same 1K removed
    python bench/incremental.py --papers 20000  # a quicker run

bm25s (like rank_bm25 and Pyserini) cannot add documents to an index: a user re-indexes the whole corpus, so its
figure here is a full re-index of the final corpus, measured in the same run. Results go to
bench/results/incremental.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import generate  # noqa: E402

from retrieval import Paper, tokenise  # noqa: E402
from retrieval.store.sqlite.build import build_index
from retrieval.store.writer import add_papers, remove_papers

REPO = Path(__file__).resolve().parents[1]


def _paper(record: dict) -> Paper:
    return Paper(record["id"], record["title"], record["abstract"], record["year"], record["authors"],
                 record["references"], source="synthetic")  # fmt: skip


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=100_000, help="papers in the base index")
    parser.add_argument("--share", type=float, default=0.01, help="share of the base to add (default 1%%)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "incremental.json")
    args = parser.parse_args()
    n_extra = max(1, int(args.papers * args.share))
    records = list(generate(args.papers + n_extra))
    base, extra = [_paper(r) for r in records[: args.papers]], [_paper(r) for r in records[args.papers :]]

    with tempfile.TemporaryDirectory() as tmp:
        db, full = Path(tmp) / "inc.db", Path(tmp) / "full.db"
        t_build = _timed(lambda: build_index(base, db))
        t_add = _timed(lambda: add_papers(extra, db))
        t_rebuild = _timed(lambda: build_index(base + extra, full))
        with sqlite3.connect(db) as a, sqlite3.connect(full) as b:
            same = all(
                a.execute(sql).fetchall() == b.execute(sql).fetchall()
                for sql in (
                    "SELECT term, df FROM doc_freq ORDER BY term",
                    "SELECT paper_id, length FROM doc_len ORDER BY paper_id",
                )
            )
        t_remove = _timed(lambda: remove_papers([p.id for p in extra], db))

    peer = None
    try:
        import bm25s

        corpus_tokens = [tokenise(p.text) for p in base + extra]
        retriever = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
        peer = _timed(lambda: retriever.index(corpus_tokens, show_progress=False))
    except ImportError:
        pass

    rows = [
        ("full build of the base", t_build),
        (f"add {n_extra:,} papers ({args.share:.0%})", t_add),
        (f"remove the same {n_extra:,}", t_remove),
        ("full rebuild of base + added", t_rebuild),
    ]
    lines = [
        f"Synthetic corpus: {args.papers:,} papers, {n_extra:,} added; add result equals the rebuild: {same}.",
        "",
        "| operation | seconds | ratio to a full rebuild |",
        "|---|---|---|",
        *(f"| {name} | {secs:.2f} | {secs / t_rebuild:.4f} |" for name, secs in rows),
    ]
    if peer is not None:
        lines.append(f"| bm25s: re-index base + added (its only way to add; tokenising not counted) | {peer:.2f} "
                     f"| {peer / t_rebuild:.4f} |")  # fmt: skip
        lines.append(f"\nadd / bm25s re-index: {t_add / peer:.4f}")
    table = "\n".join(lines)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {name: secs for name, secs in rows} | {"bm25s_reindex": peer, "equal_to_rebuild": same, "table": table}
    result["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
                         "sqlite": sqlite3.sqlite_version}  # fmt: skip
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
