"""One PostgreSQL server against a coordinator with two shards (retrieval.store.postgres.shards), in one run on one
machine: build time, lexical and full search latency for short and long queries, where a sharded search's time
goes (the work on each shard, the coordinator's), and the table sizes per row that docs/scale-out.md scales up.

    python bench/shards.py                         # hepth, 200 short and 50 long queries
    python bench/shards.py --corpora hepth,100000  # and the 100K synthetic corpus (bench/scale.py makes it)
    python bench/shards.py --servers URL,URL,URL   # servers of your own: the first is the coordinator

Without ``--servers`` three throwaway servers are started from the machine's packages (``.ci/postgres``,
loopback, fsync off) and stopped at the end. On a 2-core machine the three servers share the cores, so no
speed-up is expected: the figures to read are the coordination overhead per query and the per-shard work, from
which docs/scale-out.md extrapolates. Results must be identical on both layouts (checked on every query).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
SHARED = ROOT.parent / "shared" / "data"
RESULTS = Path(__file__).resolve().parent / "results"

from postgres import _answer, _corpus, _free_port, _long_queries, _p  # noqa: E402

from retrieval import RetrievalClient  # noqa: E402
from retrieval.commands import build  # noqa: E402
from retrieval.config import DatabaseURL  # noqa: E402


def _run(db: str, queries: list[str], full: bool) -> tuple[list[float], list, dict[str, float]]:
    """Latencies and answers of ``queries`` on ``db``, and where a sharded search's time went (mean ms per
    query): each shard's work on the statements that ran there, the coordinator's wait for them, and the rest of
    the wall time (its own statements, the round trips through its foreign tables, Python)."""
    times, answers = [], []
    with RetrievalClient(DatabaseURL(db)) as client:
        for q in queries[:5]:  # warm-up
            client.search(q, limit=10, links=False)
        executor = client._executor
        executor.shard_seconds.clear()
        executor.scatter_seconds = 0.0
        for q in queries:
            start = time.perf_counter()
            answers.append(_answer(client, q, full))
            times.append((time.perf_counter() - start) * 1000)
        n = len(queries)
        split = {f"shard {i}": seconds * 1000 / n for i, seconds in sorted(executor.shard_seconds.items())}
        split["waiting for shards"] = executor.scatter_seconds * 1000 / n
        split["coordinator"] = statistics.fmean(times) - split["waiting for shards"]
    return times, answers, split


SIZES_SQL = """\
SELECT c.relname, pg_total_relation_size(c.oid), c.reltuples
FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relkind = 'r'"""


def _sizes(url: str, schema: str) -> dict[str, tuple[int, int]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        out = {}
        for table, size, _ in conn.execute(SIZES_SQL, (schema,)):
            rows = conn.execute(f'SELECT count(*) FROM "{schema}"."{table}"').fetchone()[0]
            out[table] = (size, rows)
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", default="hepth")
    parser.add_argument("--queries", type=int, default=200, help="short queries (default 200)")
    parser.add_argument("--long", type=int, default=50, help="long queries: titles and abstracts (default 50)")
    parser.add_argument("--servers", help="three PostgreSQL maintenance-database URLs (default: start three)")
    args = parser.parse_args(argv)
    import psycopg

    started: list[Path] = []
    if args.servers:
        servers = args.servers.split(",")
    else:
        servers = []
        for _ in range(3):
            folder = Path(tempfile.mkdtemp(prefix="retrieval-bench-pgdata-"))
            started.append(folder)
            servers.append(subprocess.run([str(ROOT / ".ci" / "postgres"), "start", str(folder), str(_free_port())],
                                          check=True, capture_output=True, text=True).stdout.strip())  # fmt: skip
    report = []
    try:
        for name in args.corpora.split(","):
            corpus, short = _corpus(name.strip())
            sets = {"short": short[: args.queries], "long": _long_queries(name.strip(), corpus, args.long)}
            stamp = int(time.time())
            urls = []
            for i, server in enumerate(servers):
                database = f"bench_shards_{name}_{stamp}_{i}"
                with psycopg.connect(server, autocommit=True) as conn:
                    conn.execute(f'CREATE DATABASE "{database}"')
                urls.append(server.rsplit("/", 1)[0] + "/" + database)
            single = servers[0].rsplit("/", 1)[0] + f"/bench_single_{name}_{stamp}"
            with psycopg.connect(servers[0], autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "bench_single_{name}_{stamp}"')
            row: dict = {"corpus": name}
            start = time.perf_counter()
            summary = build(db=single, source=corpus)
            row["papers"] = summary.papers
            row["build_single_s"] = time.perf_counter() - start
            start = time.perf_counter()
            sharded = build(db=urls[0], source=corpus, shards=urls[1:])
            row["build_sharded_s"] = time.perf_counter() - start
            row["sizes_single"] = _sizes(single, "retrieval")
            layout = json.loads(_layout(urls[0]))
            row["shard_rows"] = [s["rows"] for s in sharded.shards]
            row["sizes_shards"] = [_sizes(u, e["schema"]) for u, e in zip(urls[1:], layout, strict=True)]
            identical = True
            for label, queries in sets.items():
                if not queries:
                    continue
                for mode, full in (("lexical", False), ("full", True)):
                    a, answers_a, _ = _run(single, queries, full)
                    b, answers_b, split = _run(urls[0], queries, full)
                    identical &= answers_a == answers_b
                    row[f"{label}_{mode}"] = {
                        "single_p50": statistics.median(a), "single_p95": _p(a, 18),
                        "sharded_p50": statistics.median(b), "sharded_p95": _p(b, 18),
                        "single_mean": statistics.fmean(a), "sharded_mean": statistics.fmean(b), "split": split,
                        "queries": len(queries),
                    }  # fmt: skip
            row["identical"] = identical
            report.append(row)
    finally:
        for folder in started:
            subprocess.run([str(ROOT / ".ci" / "postgres"), "stop", str(folder)], check=False)
            subprocess.run(["rm", "-rf", str(folder)], check=False)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "shards.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    lines = [
        "| corpus | queries | pass | one server p50 / p95 ms | coordinator + 2 shards p50 / p95 ms | p50 ratio "
        "| mean ms per query: shard 0 / shard 1 work, waiting for them, the rest |",
        "|---|---|---|--:|--:|--:|--:|",
    ]
    for r in report:
        for label in ("short", "long"):
            for mode in ("lexical", "full"):
                m = r.get(f"{label}_{mode}")
                if not m:
                    continue
                s = m["split"]
                lines.append(
                    f"| {r['corpus']} ({r['papers']:,}) | {m['queries']} {label} | {mode} | "
                    f"{m['single_p50']:.1f} / {m['single_p95']:.1f} | "
                    f"{m['sharded_p50']:.1f} / {m['sharded_p95']:.1f} | "
                    f"{m['sharded_p50'] / m['single_p50']:.2f}x | "
                    f"{s.get('shard 0', 0):.1f} / {s.get('shard 1', 0):.1f}, {s.get('waiting for shards', 0):.1f}, "
                    f"{s.get('coordinator', 0):.1f} |"
                )
    lines += ["", "| corpus | table | one server: bytes per row | shards: bytes per row | rows on shard 0 / 1 |",
              "|---|---|--:|--:|--:|"]  # fmt: skip
    for r in report:
        for table in ("term_freq", "doc_len", "papers", "paper_authors", "citation_links", "paper_keys", "doc_freq"):
            size, rows = r["sizes_single"].get(table, (0, 0))
            parts = [sh.get(table) for sh in r["sizes_shards"]]
            shard_bytes = sum(p[0] for p in parts if p) / max(1, sum(p[1] for p in parts if p))
            lines.append(
                f"| {r['corpus']} | {table} | {size / max(1, rows):.1f} | "
                + (f"{shard_bytes:.1f}" if any(parts) else "(coordinator)")
                + " | "
                + " / ".join(f"{p[1]:,}" if p else "-" for p in parts)
                + " |"
            )
        lines.append(f"| {r['corpus']} | build seconds | {r['build_single_s']:.1f} | {r['build_sharded_s']:.1f} | |")
    identical = ", ".join(f"{r['corpus']}: {'identical' if r['identical'] else 'DIFFERENT'}" for r in report)
    lines.append(f"\nresults, one server against the coordinator with two shards, on every query: {identical}")
    print("\n".join(lines))
    return 0 if all(r["identical"] for r in report) else 1


def _layout(url: str) -> str:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute("SELECT value FROM retrieval.index_info WHERE key = 'shards'").fetchone()[0]


if __name__ == "__main__":
    sys.exit(main())
