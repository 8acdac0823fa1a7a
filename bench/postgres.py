"""SQLite against PostgreSQL on the same corpora, in one run: build papers/s, lexical and full search p50/p95 (short
queries), lexical p50/p95 of long ones (a paper's title and abstract), and throughput with 1, 4 and 8 concurrent
client processes.

    python bench/postgres.py                              # hepth and the 100K synthetic corpus
    python bench/postgres.py --corpora hepth --queries 100
    python bench/postgres.py --server postgresql://user@host/postgres   # your own server (its databases dropped after)

Without ``--server`` a throwaway server is started from the machine's packages (``.ci/postgres``, loopback,
fsync off: builds on it are faster than on a durable server) and stopped at the end. Queries: the short query
sets of ``bench/queries.py`` (synthetic: 2-6 terms by df band; hepth: the first words of dev-query titles).
Long queries: hepth's dev queries (title + abstract); on a synthetic corpus, the title and abstract of papers
taken at a stride through the file. Each engine answers the same queries on the same corpus; results must be
identical (checked on every query). Latencies are pooled over ``--rounds`` rounds (3), the engines taking turns
to go first, each engine's round in a fresh interpreter with NumPy imported (as in a long-lived process) and 10
queries to warm up: a slow spell of a shared machine falls on both engines.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
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
CACHE = Path.home() / ".cache" / "retrieval" / "bench"

from retrieval import RetrievalClient  # noqa: E402
from retrieval.commands import build  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _corpus(name: str) -> tuple[Path, list[str]]:
    if name == "hepth":
        queries = []
        for line in (SHARED / "hepth" / "queries-dev.jsonl").read_text(encoding="utf-8").splitlines():
            words = json.loads(line)["query"].split()
            queries.append(" ".join(words[: 3 + len(queries) % 3]))
        return SHARED / "hepth" / "papers.jsonl", queries
    size = int(name)
    import synthetic

    corpus = CACHE / f"synthetic-{size}-seed42.jsonl"
    if not corpus.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        synthetic.write(corpus, size, seed=42)
    qfile = CACHE / f"synthetic-{size}-seed42.queries-200-seed7.json"
    if not qfile.exists():  # the short set bench/scale.py draws (its default --queries and --query-seed)
        import queries as qsets

        short = qsets.synthetic_queries(qsets.doc_freqs(corpus, CACHE), 200, seed=7)
        qfile.write_text(json.dumps({"queries": short}, indent=1))
    return corpus, [q["text"] for q in json.loads(qfile.read_text())["queries"]]


def _long_queries(name: str, corpus: Path, count: int) -> list[str]:
    """``count`` long queries: a paper's title and abstract (hepth: its dev queries)."""
    if name == "hepth":
        lines = (SHARED / "hepth" / "queries-dev.jsonl").read_text(encoding="utf-8").splitlines()
        return [json.loads(line)["query"] for line in lines[:count]]
    lines = corpus.read_text(encoding="utf-8").splitlines()
    step = max(1, len(lines) // count)
    papers = [json.loads(line) for line in lines[::step][:count]]
    return [f"{p['title']}. {p.get('abstract') or ''}" for p in papers]


def _answer(client: RetrievalClient, query: str, full: bool) -> list[tuple[str, float]]:
    """The top 10 of ``query``: the whole search (papers without links) or the lexical pass, ids and scores."""
    if full:
        return [(r.paper.id, round(r.final_score, 9)) for r in client.search(query, limit=10, links=False).ranked]
    return [(pid, round(score, 9)) for pid, score in client.lexical.search(query, 10)]


#: What a round measures: short queries' lexical pass, their whole search, long queries' lexical pass.
PARTS = ("lexical", "full", "long")


def _round(db: str, short: list[str], long: list[str]) -> dict[str, tuple[list[float], list]]:
    """One engine's latencies (short lexical, full, long lexical), in a process of its own."""
    import numpy  # noqa: F401  (imported, as a long-lived process has it: the cost model then weighs the BLOBs as such)

    return {
        "lexical": _latencies(db, short, full=False),
        "full": _latencies(db, short, full=True),
        "long": _latencies(db, long, full=False),
    }


def _rounds(dbs: dict[str, str], short: list[str], long: list[str], rounds: int) -> dict[str, dict]:
    """Each engine's latencies over ``rounds`` rounds, the engines' order alternating, each engine's round in a
    fresh interpreter (the postings, ids and graph a process keeps start empty each time): a slow spell of the
    machine falls on both engines, not on whichever ran in it. Per engine: every latency of every round, the
    answers of the first, and each round's short-lexical p50."""
    ctx = multiprocessing.get_context("spawn")
    out = {engine: {**{part: [] for part in PARTS}, "answers": None, "p50s": []} for engine in dbs}
    engines = list(dbs)
    for i in range(rounds):
        for engine in engines if i % 2 == 0 else engines[::-1]:
            with ctx.Pool(1) as pool:
                measured = pool.apply(_round, (dbs[engine], short, long))
            got = out[engine]
            for part in PARTS:
                got[part] += measured[part][0]
            answers = tuple(measured[part][1] for part in PARTS)
            if got["answers"] is None:
                got["answers"] = answers
            elif got["answers"] != answers:
                got["answers"] = "changed between rounds"
            got["p50s"].append(statistics.median(measured["lexical"][0]))
    return out


def _latencies(db: str, queries: list[str], full: bool) -> tuple[list[float], list]:
    out, answers = [], []
    with RetrievalClient(db) as client:
        for q in queries[:10]:  # warm-up
            client.lexical.search(q, 10)
        for q in queries:
            start = time.perf_counter()
            answers.append(_answer(client, q, full))
            out.append((time.perf_counter() - start) * 1000)
    return out, answers


def _client(db: str, queries: list[str], until: float, out) -> None:
    done = 0
    with RetrievalClient(db) as client:
        while time.monotonic() < until:
            client.search(queries[done % len(queries)], limit=10, links=False)
            done += 1
    out.put(done)


def _throughput(db: str, queries: list[str], clients: int, seconds: float) -> float:
    out = multiprocessing.Queue()
    until = time.monotonic() + seconds
    procs = [
        multiprocessing.Process(target=_client, args=(db, queries[i::clients], until, out)) for i in range(clients)
    ]
    start = time.perf_counter()
    for p in procs:
        p.start()
    done = sum(out.get(timeout=seconds + 120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
    return done / (time.perf_counter() - start)


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=20)[q] if len(values) >= 20 else max(values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", default="hepth,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--long-queries", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=15.0, help="seconds per throughput level (default 15)")
    parser.add_argument("--rounds", type=int, default=3, help="latency rounds per engine, alternating (default 3)")
    parser.add_argument("--server", help="a PostgreSQL server's maintenance database URL (default: start one)")
    args = parser.parse_args(argv)
    import psycopg

    tmp = tempfile.TemporaryDirectory(prefix="retrieval-bench-pg-")
    server = args.server
    started = None
    if server is None:
        started = Path(tempfile.mkdtemp(prefix="retrieval-bench-pgdata-"))  # its own folder: postgres must enter it
        port = _free_port()
        server = subprocess.run([str(ROOT / ".ci" / "postgres"), "start", str(started), str(port)],
                                check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    rows = []
    made: list[str] = []  # the databases this run makes, dropped at its end (on a server of the user's own too)
    try:
        for name in args.corpora.split(","):
            corpus, queries = _corpus(name.strip())
            queries = queries[: args.queries]
            long_queries = _long_queries(name.strip(), corpus, args.long_queries)
            lite = str(Path(tmp.name) / f"{name}.db")
            database = f"bench_{name}_{int(time.time())}"
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{database}"')
            made.append(database)
            pg = server.rsplit("/", 1)[0] + "/" + database
            builds = {}
            for engine, db in (("sqlite", lite), ("postgresql", pg)):
                start = time.perf_counter()
                summary = build(db=db, source=corpus)
                builds[engine] = summary.papers / (time.perf_counter() - start)
            result = {"corpus": name, "papers": summary.papers}
            dbs = {"sqlite": lite, "postgresql": pg}
            measured = _rounds(dbs, queries, long_queries, args.rounds)
            for engine, db in dbs.items():
                m = measured[engine]
                result[engine] = {
                    "build_papers_per_s": builds[engine],
                    "lexical_p50": statistics.median(m["lexical"]), "lexical_p95": _p(m["lexical"], 18),
                    "long_p50": statistics.median(m["long"]), "long_p95": _p(m["long"], 18),
                    "full_p50": statistics.median(m["full"]), "full_p95": _p(m["full"], 18),
                    "lexical_p50_by_round": m["p50s"],
                    "throughput": {c: _throughput(db, queries, c, args.seconds) for c in (1, 4, 8)},
                }  # fmt: skip
            answers = measured["sqlite"]["answers"]
            result["identical"] = isinstance(answers, tuple) and answers == measured["postgresql"]["answers"]
            rows.append(result)
    finally:
        if made and started is None:  # a throwaway server goes whole
            with psycopg.connect(server, autocommit=True) as conn:
                for database in made:
                    conn.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        if started is not None:
            subprocess.run([str(ROOT / ".ci" / "postgres"), "stop", str(started)], check=False)
            subprocess.run(["rm", "-rf", str(started)], check=False)
        tmp.cleanup()
    lines = [
        "| corpus | engine | build papers/s | lexical p50 / p95 ms | full p50 / p95 ms "
        "| long queries lexical p50 / p95 ms | searches/s at 1 / 4 / 8 clients |",
        "|---|---|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        for engine in ("sqlite", "postgresql"):
            e = r[engine]
            t = e["throughput"]
            lines.append(
                f"| {r['corpus']} ({r['papers']:,}) | {engine} | {e['build_papers_per_s']:,.0f} | "
                f"{e['lexical_p50']:.1f} / {e['lexical_p95']:.1f} | {e['full_p50']:.1f} / {e['full_p95']:.1f} | "
                f"{e['long_p50']:.1f} / {e['long_p95']:.1f} | {t[1]:.0f} / {t[4]:.0f} / {t[8]:.0f} |"
            )
        s, p = r["sqlite"], r["postgresql"]
        lines.append(
            f"| {r['corpus']} | postgresql / sqlite | {p['build_papers_per_s'] / s['build_papers_per_s']:.2f}x | "
            f"{p['lexical_p50'] / s['lexical_p50']:.2f}x / {p['lexical_p95'] / s['lexical_p95']:.2f}x | "
            f"{p['full_p50'] / s['full_p50']:.2f}x / {p['full_p95'] / s['full_p95']:.2f}x | "
            f"{p['long_p50'] / s['long_p50']:.2f}x / {p['long_p95'] / s['long_p95']:.2f}x | "
            f"{p['throughput'][1] / s['throughput'][1]:.2f}x / {p['throughput'][4] / s['throughput'][4]:.2f}x / "
            f"{p['throughput'][8] / s['throughput'][8]:.2f}x |"
        )
    for r in rows:
        by_round = zip(r["sqlite"]["lexical_p50_by_round"], r["postgresql"]["lexical_p50_by_round"], strict=True)
        lines.append(
            f"\n{r['corpus']}: short lexical p50 by round, sqlite / postgresql (ms): "
            + ", ".join(f"{a:.2f} / {b:.2f}" for a, b in by_round)
        )
    identical = ", ".join(f"{r['corpus']}: {'identical' if r['identical'] else 'DIFFERENT'}" for r in rows)
    print("\n".join(lines))
    print(f"\nresults, SQLite against PostgreSQL on every query: {identical}")
    return 0 if all(r["identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
