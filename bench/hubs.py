"""``similar`` of the most cited paper against ordinary papers', at each door, as ratios measured in one run.

    python bench/hubs.py                                  # hepth from ../shared/data, built into a temporary folder
    python bench/hubs.py --db hepth.db --rounds 60
    python bench/hubs.py --postgres postgresql://USER@127.0.0.1:PORT/DB   # also an index built on that database

The hub is the index's most cited paper (hepth: hep-th/9711200, cited by 2,414 of its papers); the ordinary papers
are ``--ordinary`` papers at the corpus's median citation count, spread evenly over the ids. Each door is timed in
rounds, the hub and then each ordinary paper once a round (so a slow spell of the machine falls on both), after
one warm-up round; the table gives the medians and their ratio:

- ``client.similar``: in one process (``RetrievalClient``), the page of 10: with every graph signal read by
  statements (a process's first calls), and once the process keeps the citation graph (``adjacency``; the calls
  on the hub that took are made first, and said);
- ``GET /similar/ID``: ``retrieval serve`` on a free loopback port, one kept-alive connection, once the server
  keeps the graph (as many calls on the hub made first);
- ``retrieval similar ID``: a new process each time (its start, the index's open, the page printed);
- its text pass alone: the BM25 part of ``similar`` (the paper's title and abstract as one query, the best
  ``TEXT_DEPTH``), in the same process: what the paper's text costs whoever cites it.

Loopback only. Results: printed, and with ``--out`` written as Markdown (``bench/results/hubs.md``).
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import math
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from serve import _start_server  # noqa: E402

from retrieval import RetrievalClient  # noqa: E402
from retrieval.commands import build  # noqa: E402
from retrieval.search import adjacency, lexical  # noqa: E402
from retrieval.search.query import MAX_QUERY_CHARS, Query  # noqa: E402
from retrieval.search.similar import TEXT_DEPTH  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "hepth"
RETRIEVAL = [sys.executable, "-m", "retrieval"]

HUB_SQL = """\
SELECT paper_id
FROM cited_counts
WHERE paper_id IN (SELECT id FROM papers)
ORDER BY cited_by DESC, paper_id
LIMIT 1"""
#: Every paper with its citation count (0 for those no one cites), by id.
COUNTS_SQL = """\
SELECT p.id,
       coalesce(c.cited_by, 0)
FROM papers AS p
LEFT JOIN cited_counts AS c ON c.paper_id = p.id
ORDER BY p.id"""


def papers_to_time(client: RetrievalClient, n: int) -> tuple[str, list[str], int]:
    """The hub, ``n`` ordinary papers (at the median citation count, evenly spaced by id) and that count."""
    with client.snapshot() as snap:
        [(hub,)] = snap.rows("bench: the most cited paper", HUB_SQL, {})
        counts = snap.rows("bench: citation counts", COUNTS_SQL, {})
    median = int(statistics.median(count for _, count in counts))
    at_median = [pid for pid, count in counts if count == median]
    step = max(1, len(at_median) // n)
    return hub, at_median[::step][:n], median


def rounds(call, hub: str, ordinary: list[str], n: int) -> tuple[float, float]:
    """The medians (ms) of ``call`` on the hub and on the ordinary papers over ``n`` interleaved rounds."""
    for pid in [hub, *ordinary]:
        call(pid)
    on_hub, on_others = [], []
    for _ in range(n):
        for pid in [hub, *ordinary]:
            start = time.perf_counter()
            call(pid)
            (on_hub if pid == hub else on_others).append((time.perf_counter() - start) * 1000.0)
    return statistics.median(on_hub), statistics.median(on_others)


def keep_graph(client: RetrievalClient, hub: str) -> tuple[int, float]:
    """Ask for the hub's similar papers until the process keeps the citation graph (``adjacency``): how many calls
    that took, and the last call's time (ms, the graph's read included)."""
    calls = 0
    while True:
        start = time.perf_counter()
        client.similar(hub, limit=10)
        calls += 1
        with client.snapshot() as snap:
            if adjacency.GRAPHS.of(snap) is not None:
                return calls, (time.perf_counter() - start) * 1000.0
        if calls > 10_000:
            raise SystemExit("the process never kept the citation graph: is RETRIEVAL_POSTINGS_CACHE_MB too small?")


def doors(db: str, hub: str, ordinary: list[str], n: int, cli_rounds: int) -> tuple[list, int, float]:
    """Each door's medians on the index ``db``, how many calls on the hub the process took to keep the graph
    and how long the call that read it took."""
    out = []
    with RetrievalClient(db) as client:
        adjacency.GRAPHS.clear()
        rent, adjacency.GRAPH_RENT = adjacency.GRAPH_RENT, math.inf  # a process's first calls: every graph statement
        call = lambda pid: client.similar(pid, limit=10)  # noqa: E731
        out.append(("client.similar, graph read by statements", *rounds(call, hub, ordinary, n)))
        adjacency.GRAPHS.clear()  # the rows read so far not counted: a process's own first calls
        adjacency.GRAPH_RENT = rent
        calls, reading = keep_graph(client, hub)
        out.append(("client.similar, graph kept", *rounds(call, hub, ordinary, n)))
        texts = {pid: f"{p.title} {p.abstract}"[:MAX_QUERY_CHARS] for pid, p in client.papers([hub, *ordinary]).items()}

        def text_pass(pid: str) -> None:
            with client.snapshot() as snap:
                lexical.top_papers(snap, lexical.weigh(snap, Query.parse(texts[pid])), TEXT_DEPTH + 1)

        out.append(("its text pass alone", *rounds(text_pass, hub, ordinary, n)))
    with tempfile.TemporaryDirectory() as tmp:
        server, url, log = _start_server(db, Path(tmp) / "serve.log")
        try:
            parts = urllib.parse.urlsplit(url)
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)

            def get(pid: str) -> None:
                conn.request("GET", "/similar/" + urllib.parse.quote(pid, safe=""))
                response = conn.getresponse()
                body = response.read()
                if response.status != 200:
                    raise SystemExit(f"GET /similar/{pid}: {response.status} {body[:200]!r}")

            for _ in range(calls):  # the server's process keeps the graph after as many calls as this one
                get(hub)
            out.append(("GET /similar/ID, graph kept", *rounds(get, hub, ordinary, n)))
            conn.close()
        finally:
            server.terminate()
            server.wait(timeout=60)
            log.close()

    def command(pid: str) -> None:
        subprocess.run([*RETRIEVAL, "similar", pid, "--db", db], check=True, capture_output=True)

    out.append(("retrieval similar ID", *rounds(command, hub, ordinary, cli_rounds)))
    return out, calls, reading


def table(engine: str, measured: list[tuple[str, float, float]]) -> list[str]:
    return [f"| {door} | {engine} | {h:.1f} | {o:.1f} | {h / o:.2f}x |" for door, h, o in measured]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", help="a hepth index (default: built into a temporary folder)")
    parser.add_argument("--postgres", help="a PostgreSQL database to build hepth into and time as well")
    parser.add_argument("--ordinary", type=int, default=5, help="ordinary papers (default 5)")
    parser.add_argument("--rounds", type=int, default=40, help="rounds in process and over HTTP (default 40)")
    parser.add_argument("--cli-rounds", type=int, default=5, help="rounds of the command (default 5)")
    parser.add_argument("--out", help="write the table as Markdown to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db
        if db is None:
            db = str(Path(tmp) / "hepth.db")
            build(db=db, source=SHARED / "papers.jsonl")
        with RetrievalClient(db) as client:
            hub, ordinary, median = papers_to_time(client, args.ordinary)
            cited_by = client.show(hub, limit=1).citations_total
        engines = [("SQLite", db)]
        if args.postgres:
            build(db=args.postgres, source=SHARED / "papers.jsonl")
            engines.append(("PostgreSQL", args.postgres))
        lines = [
            f"# `similar` of the most cited paper against ordinary ones ({datetime.date.today()})",
            "",
            f"`python bench/hubs.py{' --postgres URL' if args.postgres else ''}` on hepth, "
            f"{platform.machine()}, {sqlite3.sqlite_version} SQLite, Python {platform.python_version()}. "
            f"Hub: {hub} (cited by {cited_by:,} papers of the index); ordinary: {', '.join(ordinary)} "
            f"(cited {median} times each, the corpus's median). Medians over {args.rounds} interleaved rounds "
            f"({args.cli_rounds} for the command), after a warm-up round.",
            "",
            "| door | engine | hub (ms) | ordinary (ms) | ratio |",
            "|---|---|--:|--:|--:|",
        ]
        notes = []
        for engine, where in engines:
            measured, calls, reading = doors(where, hub, ordinary, args.rounds, args.cli_rounds)
            lines += table(engine, measured)
            notes.append(f"{engine}: after {calls} calls on the hub, the call that read it {reading:,.0f} ms")
        lines += [
            "",
            f"The process keeps the citation graph once `similar` has read {adjacency.GRAPH_RENT} citation rows per "
            f"paper by statements at one index state (`retrieval.search.adjacency`): {'; '.join(notes)}. A server "
            "keeps it after as many requests; a command's one call is far from the rent.",
        ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
