"""Build time and search latency on a real corpus, beside an in-memory pure-Python peer measured in the same run.

    python bench/search_latency.py                       # hepth from ../shared/data, 100 searches
    python bench/search_latency.py --corpus FILE --queries FILE --n 100

The peer ("python-dict") is the lesson's design: BM25 over Python dicts and a BFS over adjacency lists, held in
memory, ranking by the lesson's blend (compared with ours on the same setting); it has to be rebuilt in every
process, which is what the SQLite index saves. Figures are medians on a shared machine: read the ratios, not the
milliseconds. Results go to bench/results/search_latency.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict, deque
from pathlib import Path

from retrieval import RetrievalClient, RetrievalConfig, read_jsonl, tokenise
from retrieval.commands import build

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"


class DictPeer:
    """In-memory BM25 (same formula, k1=1.5, b=0.75) plus BFS and the same blend: the lesson's design."""

    def __init__(self, corpus: Path) -> None:
        self.tf: dict[str, dict[str, int]] = defaultdict(dict)
        self.dl: dict[str, int] = {}
        self.year: dict[str, int | None] = {}
        self.adj: dict[str, list[str]] = defaultdict(list)
        refs = []
        for _, p in read_jsonl(corpus):
            toks = tokenise(p.text)
            self.dl[p.id] = len(toks)
            self.year[p.id] = p.year
            for term, count in Counter(toks).items():
                self.tf[term][p.id] = count
            refs.extend((p.id, r) for r in p.references if r != p.id)
        for a, b in refs:
            if b in self.dl:
                self.adj[a].append(b)
                self.adj[b].append(a)
        self.n = len(self.dl)
        self.avgdl = sum(self.dl.values()) / self.n
        years = [y for y in self.year.values() if y is not None]
        self.lo, self.hi = min(years), max(years)

    def scores(self, terms: list[str], only: set[str] | None = None) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for term in terms:
            postings = self.tf.get(term)
            if not postings:
                continue
            idf = math.log(1 + (self.n - len(postings) + 0.5) / (len(postings) + 0.5))
            for pid, f in postings.items():
                if only is None or pid in only:
                    out[pid] += idf * f * 2.5 / (f + 1.5 * (0.25 + 0.75 * self.dl[pid] / self.avgdl))
        return out

    def search(self, query: str, k: int = 10, hops: int = 2) -> list[str]:
        terms = tokenise(query)
        seeds = sorted(self.scores(terms).items(), key=lambda kv: (-kv[1], kv[0]))[:k]
        dist = {pid: 0 for pid, _ in seeds}
        queue = deque(dist)
        while queue:
            node = queue.popleft()
            if dist[node] < hops:
                for nxt in self.adj.get(node, ()):
                    if nxt not in dist:
                        dist[nxt] = dist[node] + 1
                        queue.append(nxt)
        bm25 = self.scores(terms, set(dist))
        top = seeds[0][1] if seeds else 1.0
        graph = {0: 1.0, 1: 0.6, 2: 0.3}

        def final(pid: str) -> float:
            y = self.year[pid]
            rec = 0.0 if y is None else (y - self.lo) / (self.hi - self.lo)
            return 0.5 * bm25.get(pid, 0.0) / top + 0.3 * graph[dist[pid]] + 0.2 * rec

        return sorted(dist, key=lambda pid: (-final(pid), pid))[:10]


def _percentiles(seconds: list[float]) -> tuple[float, float]:
    ms = sorted(s * 1000 for s in seconds)
    return statistics.median(ms), ms[min(len(ms) - 1, math.ceil(0.95 * len(ms)) - 1)]


def _time(fn, queries) -> list[float]:
    out = []
    for q in queries:
        start = time.perf_counter()
        fn(q)
        out.append(time.perf_counter() - start)
    return out


def _cold_first_query(db: Path, query: str) -> float:
    code = (
        "import time; t = time.perf_counter(); from retrieval import RetrievalClient; "
        f"c = RetrievalClient(db={str(db)!r}); c.search({query!r}, limit=10); "
        "print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DATA / "hepth" / "papers.jsonl")
    parser.add_argument("--queries", type=Path, default=DATA / "hepth" / "queries-dev.jsonl")
    parser.add_argument("--n", type=int, default=100, help="searches to time (default 100)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "search_latency.json")
    args = parser.parse_args()
    if not args.corpus.exists():
        sys.exit(f"no corpus at {args.corpus}: pass --corpus (the shared corpora live in ../shared/data)")

    records = [json.loads(line) for line in args.queries.read_text(encoding="utf-8").splitlines()][: args.n]
    by_id = {p.id: p for _, p in read_jsonl(args.corpus)}
    titles = [by_id[r["qid"]].title if r["qid"] in by_id else r["query"] for r in records]
    abstracts = [r["query"] for r in records]

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        start = time.perf_counter()
        summary = build(db=db, source=args.corpus)
        build_s = time.perf_counter() - start
        cold = statistics.median(_cold_first_query(db, titles[i]) for i in range(5))
        rows = {}
        with RetrievalClient(db=db) as client:
            client.search(titles[0])  # warm the OS cache once, as a long-lived process would be
            default = RetrievalConfig()
            settings = [
                (f"title query, default search ({default.ranking})", default),
                ("title query, policy (always expanding, 1 hop, evidence)", RetrievalConfig(ranking="expansion")),
                ("title query, policy behind the gate", RetrievalConfig(ranking="expansion", expand="auto")),
                ("title query, lesson's blend hops=2", RetrievalConfig.lesson()),
                ("title query, lesson's blend hops=1", RetrievalConfig.lesson(max_hops=1)),
            ]
            for label, cfg in settings:
                rows[label] = _time(lambda q, c=cfg: client.search(q, c, limit=10), titles)
            rows["title query, lexical top-10 only"] = _time(lambda q: client.lexical.search(q, 10), titles)
            rows["title+abstract query, lexical top-10"] = _time(lambda q: client.lexical.search(q, 10), abstracts)
            rows[f"title+abstract query, default search ({default.ranking})"] = _time(
                lambda q: client.search(q, default, limit=10), abstracts
            )
            rows["title+abstract query, policy"] = _time(
                lambda q: client.search(q, RetrievalConfig(ranking="expansion"), limit=10), abstracts
            )
        size = db.stat().st_size

    start = time.perf_counter()
    peer = DictPeer(args.corpus)
    peer_build_s = time.perf_counter() - start
    peer_rows = {
        "title query, lesson's blend hops=2": _time(lambda q: peer.search(q, hops=2), titles),
        "title query, lesson's blend hops=1": _time(lambda q: peer.search(q, hops=1), titles),
    }

    lines = [
        f"Corpus {args.corpus.name}: {summary.papers:,} papers, {summary.edges:,} edges; {len(titles)} searches.",
        "",
        "| figure | retrieval (SQLite) | python-dict peer | ratio (retrieval / peer) |",
        "|---|---|---|---|",
        f"| build / load (s) | {build_s:.2f} | {peer_build_s:.2f} | {build_s / peer_build_s:.2f} |",
        f"| papers/s | {summary.papers / build_s:,.0f} | {summary.papers / peer_build_s:,.0f} | |",
        f"| cold open + first query (ms) | {cold * 1000:.1f} | {(peer_build_s) * 1000:.0f} (rebuild) "
        f"| {cold / peer_build_s:.3f} |",
        f"| index file (MB) | {size / 1e6:.1f} | in memory | |",
    ]
    result = {"build_seconds": build_s, "peer_build_seconds": peer_build_s, "cold_first_query_s": cold,
              "file_bytes": size, "papers": summary.papers, "edges": summary.edges, "latency_ms": {}}  # fmt: skip
    for name, secs in rows.items():
        p50, p95 = _percentiles(secs)
        peer_secs = peer_rows.get(name)
        if peer_secs:
            q50, q95 = _percentiles(peer_secs)
            lines.append(f"| {name}: p50 / p95 (ms) | {p50:.1f} / {p95:.1f} | {q50:.1f} / {q95:.1f} "
                         f"| {p50 / q50:.2f} / {p95 / q95:.2f} |")  # fmt: skip
        else:
            lines.append(f"| {name}: p50 / p95 (ms) | {p50:.1f} / {p95:.1f} | | |")
        result["latency_ms"][name] = {"p50": p50, "p95": p95}
    result["machine"] = {
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }
    table = "\n".join(lines)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result["table"] = table
    args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
