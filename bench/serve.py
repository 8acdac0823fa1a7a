"""Requests per second for ``GET /search`` of ``retrieval serve``, with 1 and 8 concurrent clients, against the same
searches through the CLI (one ``retrieval search`` process per query) on the same index, in one run.

    python bench/serve.py                         # hepth from ../shared/data, built into a temporary folder
    python bench/serve.py --db hepth.db --requests 400 --seconds 60

Loopback only: the server binds 127.0.0.1 on a free port and is stopped at the end. Each level is bounded by
``--requests`` and ``--seconds`` (whichever comes first). Queries: the first words (3-5) of hepth dev-query
titles, cycled. Clients are processes (keep-alive HTTP connections, ``http.client``); the CLI peer runs the
same number of ``retrieval search --json`` processes side by side.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "hepth"
RETRIEVAL = [sys.executable, "-m", "retrieval"]


def _queries(n: int = 200) -> list[str]:
    out = []
    for line in (SHARED / "queries-dev.jsonl").read_text(encoding="utf-8").splitlines()[:n]:
        words = json.loads(line)["query"].split()
        out.append(" ".join(words[: 3 + len(out) % 3]))
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_client(port: int, queries: list[str], until: float, count: int, out) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times = []
    for i in range(count):
        if time.monotonic() > until:
            break
        path = "/search?" + urllib.parse.urlencode({"q": queries[i % len(queries)], "limit": 10})
        start = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"GET {path}: {response.status}")
        times.append(time.perf_counter() - start)
    conn.close()
    out.put(times)


def _cli_client(db: str, queries: list[str], until: float, count: int, out) -> None:
    times = []
    for i in range(count):
        if time.monotonic() > until:
            break
        start = time.perf_counter()
        subprocess.run([*RETRIEVAL, "search", queries[i % len(queries)], "--db", db, "--json"],
                       check=True, capture_output=True, timeout=60)  # fmt: skip
        times.append(time.perf_counter() - start)
    out.put(times)


def _level(target, args: tuple, clients: int, requests: int, seconds: float, queries: list[str]) -> dict:
    """``clients`` processes share ``requests`` (each its own slice of the queries), for at most ``seconds``."""
    out = multiprocessing.Queue()
    until = time.monotonic() + seconds
    per = max(1, requests // clients)
    procs = [
        multiprocessing.Process(target=target, args=(*args, queries[i::clients] or queries, until, per, out))
        for i in range(clients)
    ]
    start = time.perf_counter()
    for p in procs:
        p.start()
    times = [t for _ in procs for t in out.get(timeout=seconds + 120)]
    for p in procs:
        p.join(timeout=30)
    wall = time.perf_counter() - start
    return {
        "requests": len(times),
        "per_second": len(times) / wall,
        "p50_ms": statistics.median(times) * 1000,
        "p95_ms": statistics.quantiles(times, n=20)[18] * 1000 if len(times) >= 20 else max(times) * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", help="a hepth index (default: built into a temporary folder)")
    parser.add_argument("--requests", type=int, default=400, help="requests per level, at most (default 400)")
    parser.add_argument("--cli-requests", type=int, default=48, help="CLI searches per level, at most (default 48)")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds per level, at most (default 60)")
    args = parser.parse_args(argv)
    tmp = tempfile.TemporaryDirectory()
    db = args.db
    if db is None:
        db = str(Path(tmp.name) / "hepth.db")
        subprocess.run([*RETRIEVAL, "build", "--from", str(SHARED / "papers.jsonl"), "--db", db], check=True)
    queries = _queries()
    port = _free_port()
    log = open(Path(tmp.name) / "serve.log", "w")  # noqa: SIM115 - closed after the server stops
    server = subprocess.Popen([*RETRIEVAL, "serve", "--db", db, "--port", str(port)], stdout=log, stderr=log)
    rows = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"the server did not start: see {log.name}")
            time.sleep(0.2)
        _level(_http_client, (port,), 1, 20, 10, queries)  # warm-up: the file in the page cache
        for clients in (1, 8):
            http_level = _level(_http_client, (port,), clients, args.requests, args.seconds, queries)
            cli_level = _level(_cli_client, (db,), clients, args.cli_requests, args.seconds, queries)
            rows.append((clients, http_level, cli_level))
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    cores = os.cpu_count()
    print(f"hepth, GET /search (top 10) against `retrieval search --json`, {cores} cores, loopback\n")
    print("| clients | serve req/s | p50 ms | p95 ms | CLI searches/s | CLI p50 ms | serve / CLI |")
    print("|--:|--:|--:|--:|--:|--:|--:|")
    for clients, h, c in rows:
        print(f"| {clients} | {h['per_second']:.1f} | {h['p50_ms']:.1f} | {h['p95_ms']:.1f} | "
              f"{c['per_second']:.2f} | {c['p50_ms']:.0f} | {h['per_second'] / c['per_second']:.1f}x |")  # fmt: skip
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
