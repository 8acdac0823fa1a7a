"""Requests per second for ``GET /search`` of ``retrieval serve``, with 1 and 8 concurrent clients, against the same
searches through the CLI (one ``retrieval search`` process per query) on the same index, in one run.

    python bench/serve.py                         # hepth from ../shared/data, built into a temporary folder
    python bench/serve.py --db hepth.db --requests 400 --seconds 60

Loopback only: the server binds 127.0.0.1 on a free port and is stopped at the end. Each level is bounded by
``--requests`` and ``--seconds`` (whichever comes first). Queries: the first words (3-5) of hepth dev-query
titles, cycled. Clients are processes (keep-alive HTTP connections, ``http.client``); the CLI peer runs the
same number of ``retrieval search --json`` processes side by side.

Load mode (``--load``): mixed requests against one ``retrieval serve`` at several client levels, with idle sockets
held open, reporting errors, p50/p99 per request kind and the server's RSS:

    python bench/serve.py --load                                  # 8, 32, 64 clients, 20 s each, 63 idle sockets
    python bench/serve.py --load --db /tmp/hepth.db --clients 8,64 --seconds 5
    python bench/serve.py --load --idle 0 --mix search=100        # plain searches, no idle sockets
    python bench/serve.py --load --out bench/results/serve_load.md --json /tmp/serve_load.json

It starts ``retrieval serve --db INDEX --port 0 --host 127.0.0.1`` (the URL read from its stdout, its stderr
kept in a log file that is scanned at the end for tracebacks, errors and warnings), warms every kind up
sequentially (their unloaded latencies are printed), opens ``--idle`` TCP connections that send nothing and
holds them for the whole run (``--reopen-idle`` replaces those the server closes), then runs each level of
``--clients`` concurrent clients for ``--seconds``. A client is a thread with a keep-alive ``http.client``
connection (a new one after a connection error or a ``Connection: close``), the threads split over ``--procs``
processes; each request is drawn from ``--mix`` (default search=70,similar=10,papers=10,page=5,explain=5):
``GET /search?q=TITLE&limit=10`` (hepth dev-query titles), ``GET /similar/ID``, ``GET /papers/ID`` and
``GET /paper/ID`` (the web page) on the ``--hubs`` most cited papers of the index (ids with their ``/`` as they
are), and ``POST /explain`` with ``{"query": TITLE}``. Every request is recorded (kind, status, latency, and for
anything but 200 its content type and body's ``kind``) and classified: 2xx is ok; a 503 whose body is JSON
``{"error": ..., "kind": ...}`` is a documented overload answer, counted apart; anything else (a plain-text 503,
a 500, a 4xx, a reset connection, a timeout) is an error. p50/p99 are over the ok answers. The server's RSS
(``VmRSS``) is sampled every second; its CPU time and the generator's own are printed per level, so a generator
short of CPU (2 cores shared with the server) shows instead of hiding as server latency. At the end: how many
idle sockets the server closed, and after how long.
"""

from __future__ import annotations

import argparse
import datetime
import http.client
import json
import math
import multiprocessing
import os
import queue
import random
import re
import selectors
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
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


# --- load mode (--load) -----------------------------------------------------------------------------------------

KINDS = ("search", "similar", "papers", "page", "explain")
DEFAULT_MIX = "search=70,similar=10,papers=10,page=5,explain=5"


def _parse_mix(text: str) -> dict[str, float]:
    mix = {}
    for part in text.split(","):
        name, _, weight = part.partition("=")
        name = name.strip()
        if name not in KINDS:
            raise SystemExit(f"--mix: unknown kind {name!r} (kinds: {', '.join(KINDS)})")
        try:
            mix[name] = float(weight)
        except ValueError:
            raise SystemExit(f"--mix: {part!r} is not KIND=WEIGHT") from None
    if sum(mix.values()) <= 0:
        raise SystemExit("--mix: the weights add up to nothing")
    return {k: w for k, w in mix.items() if w > 0}


def _titles(n: int = 500) -> list[str]:
    lines = (SHARED / "queries-dev-titles.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    return [json.loads(line)["query"] for line in lines]


def _hubs(db: str, n: int) -> list[str]:
    """The ``n`` most cited papers: from the index file (``cited_counts``, else ``citations``), else from the
    corpus's references (a PostgreSQL index)."""
    if Path(db).is_file():
        conn = sqlite3.connect(f"file:{Path(db).resolve()}?mode=ro", uri=True)
        try:
            for sql in (
                "SELECT paper_id FROM cited_counts ORDER BY cited_by DESC, paper_id LIMIT ?",
                "SELECT cited_id FROM citations GROUP BY cited_id ORDER BY count(*) DESC, cited_id LIMIT ?",
            ):
                try:
                    ids = [row[0] for row in conn.execute(sql, (n,))]
                except sqlite3.Error:
                    continue
                if ids:
                    return ids
        finally:
            conn.close()
    counts: dict[str, int] = {}
    with open(SHARED / "papers.jsonl", encoding="utf-8") as f:
        for line in f:
            for ref in json.loads(line).get("references") or ():
                counts[ref] = counts.get(ref, 0) + 1
    return sorted(counts, key=lambda pid: (-counts[pid], pid))[:n]


def _request_for(kind: str, rng, titles: list[str], hubs: list[str]) -> tuple[str, str, bytes | None]:
    if kind == "search":
        return "GET", "/search?" + urllib.parse.urlencode({"q": rng.choice(titles), "limit": 10}), None
    if kind == "explain":
        return "POST", "/explain", json.dumps({"query": rng.choice(titles)}).encode()
    prefix = {"similar": "/similar/", "papers": "/papers/", "page": "/paper/"}[kind]
    return "GET", prefix + urllib.parse.quote(rng.choice(hubs), safe="/"), None


def _classify(status: int, ctype: str, body: bytes) -> tuple[str, str]:
    """``("ok" | "json503" | "error", label)``: label names the answer (status, content type, JSON kind or text)."""
    if 200 <= status < 300:
        return "ok", ""
    ctype = ctype.split(";")[0].strip()
    kind = None
    if ctype == "application/json":
        try:
            data = json.loads(body)
            if isinstance(data, dict) and "error" in data and "kind" in data:
                kind = str(data["kind"])
        except ValueError:
            pass
    if status == 503 and kind is not None:
        return "json503", f"503 JSON {kind}"
    if kind is not None:
        return "error", f"{status} JSON {kind}"
    text = body[:60].decode("utf-8", "replace").strip()
    return "error", f"{status} {ctype or 'no content-type'} {text!r}"


def _send(conn, port: int, timeout: float, kind: str, rng, titles: list[str], hubs: list[str]):
    """One request of ``kind`` on ``conn``: ((kind, class, status, ms, label), the connection to use next)."""
    method, path, body = _request_for(kind, rng, titles, hubs)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    start = time.perf_counter()
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data = response.read()
        ms = (time.perf_counter() - start) * 1000
        cls, label = _classify(response.status, response.getheader("Content-Type", ""), data)
        return (kind, cls, response.status, ms, label), conn
    except (OSError, http.client.HTTPException) as exc:
        ms = (time.perf_counter() - start) * 1000
        label = "timeout" if isinstance(exc, TimeoutError) else type(exc).__name__
        conn.close()
        return (kind, "error", 0, ms, label), http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)


def _one_client(port, mix, titles, hubs, seed, start_at, until, timeout, records) -> None:
    """One client: requests drawn from ``mix`` on one keep-alive connection (``http.client`` opens a new one
    after a ``Connection: close``; ``_send`` after an error), from ``start_at`` until ``until`` (the request in
    flight then is finished and recorded). A record: (kind, class, status, ms, label, seconds into the level)."""
    rng = random.Random(seed)
    kinds, weights = list(mix), list(mix.values())
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    time.sleep(max(0.0, start_at - time.monotonic()))
    while (now := time.monotonic()) < until:
        record, conn = _send(conn, port, timeout, rng.choices(kinds, weights)[0], rng, titles, hubs)
        records.append((*record, now - start_at))
    conn.close()


def _client_proc(port, clients, mix, titles, hubs, seed, start_at, until, timeout, out) -> None:
    """``clients`` client threads in this process; puts (records, CPU seconds of this process) on ``out``."""
    cpu = time.process_time()
    records: list[tuple] = []  # list.append is atomic under the GIL
    threads = [
        threading.Thread(
            target=_one_client,
            args=(port, mix, titles, hubs, seed * 1000 + i, start_at, until, timeout, records),
            daemon=True,
        )
        for i in range(clients)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(0.0, until - time.monotonic()) + timeout + 10)
    out.put((records, time.process_time() - cpu, sum(t.is_alive() for t in threads)))


def _proc_status(pid: int, field: str) -> int | None:
    """A ``kB`` field of /proc/PID/status (VmRSS, VmHWM), in kB."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (/proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _RssSampler:
    """The server's VmRSS (kB) every ``every`` seconds in a thread: ``samples`` is [(monotonic, kB)]."""

    def __init__(self, pid: int, every: float = 1.0) -> None:
        self.pid, self.every, self.samples = pid, every, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> int | None:
        rss = _proc_status(self.pid, "VmRSS")
        if rss is not None:
            self.samples.append((time.monotonic(), rss))
        return rss

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def between(self, start: float, end: float) -> list[int]:
        return [kb for t, kb in self.samples if start <= t <= end]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class _IdleSockets:
    """``n`` TCP connections to the server that send nothing, watched in a thread: when the server closes one
    (EOF or reset) the time since it was opened is recorded, and with ``reopen`` a new one takes its place."""

    def __init__(self, port: int, n: int, reopen: bool) -> None:
        self.port, self.reopen = port, reopen
        self.opened = 0
        self.closed: list[tuple[float, float, str]] = []  # (when, seconds held, how)
        self.sent_data: list[str] = []  # what the server sent on an idle connection before closing it
        self.failed: list[str] = []  # connects that failed
        self._sel = selectors.DefaultSelector()
        self._lock = threading.Lock()
        for _ in range(n):
            self._open()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _open(self) -> None:
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        except OSError as exc:
            self.failed.append(type(exc).__name__)
            return
        s.setblocking(False)
        self._sel.register(s, 1, time.monotonic())  # 1: EVENT_READ
        self.opened += 1

    def open_now(self) -> int:
        with self._lock:
            return len(self._sel.get_map())

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                ready = self._sel.select(timeout=0.2) if self._sel.get_map() else []
                for key, _ in ready:
                    try:
                        data = key.fileobj.recv(4096)
                    except BlockingIOError:
                        continue
                    except OSError as exc:
                        data, how = None, type(exc).__name__
                    else:
                        how = "EOF"
                    if data:  # an answer (408, 400) before the close: keep it, wait for the EOF
                        self.sent_data.append(data[:60].decode("latin-1").split("\r\n")[0])
                        continue
                    now = time.monotonic()
                    self.closed.append((now, now - key.data, how))
                    self._sel.unregister(key.fileobj)
                    key.fileobj.close()
                    if self.reopen:
                        self._open()
            if not ready:
                self._stop.wait(0.2)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for key in list(self._sel.get_map().values()):
            self._sel.unregister(key.fileobj)
            key.fileobj.close()
        self._sel.close()


def _start_server(db: str, log_path: Path) -> tuple[subprocess.Popen, str, object]:
    """``retrieval serve --port 0`` with its stderr in ``log_path``; the URL read from its first stdout line."""
    log = open(log_path, "w")  # noqa: SIM115 - closed by the caller after the server stops
    server = subprocess.Popen(
        [*RETRIEVAL, "serve", "--db", db, "--port", "0", "--host", "127.0.0.1"],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    lines: queue.Queue = queue.Queue()

    def drain() -> None:  # keep reading stdout, so the server never blocks on a full pipe
        for line in server.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=drain, daemon=True).start()
    try:
        line = lines.get(timeout=60)
    except queue.Empty:
        line = None
    url = None
    if line:
        match = re.search(r"on (http://127\.0\.0\.1:\d+/)", line)
        url = match and match.group(1)
    if not url:
        server.kill()
        log.close()
        raise SystemExit(f"the server did not start (stdout: {line!r}): see {log_path}")
    return server, url, log


def _pct(values: list[float], p: float) -> float | None:
    """Nearest-rank percentile (p in 0-100), None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1))]


def _summary(records: list[tuple], kinds: list[str]) -> list[dict]:
    rows = []
    for kind in [*kinds, "all"]:
        mine = [r for r in records if kind == "all" or r[0] == kind]
        ok = [r[3] for r in mine if r[1] == "ok"]
        rows.append({
            "kind": kind,
            "requests": len(mine),
            "ok": len(ok),
            "json_503": sum(r[1] == "json503" for r in mine),
            "errors": sum(r[1] == "error" for r in mine),
            "p50_ms": _pct(ok, 50),
            "p99_ms": _pct(ok, 99),
            "max_ms": max(ok) if ok else None,
        })  # fmt: skip
    return rows


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def _mib(kb: int | None) -> str:
    return "-" if kb is None else f"{kb / 1024:.0f} MiB"


def _machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = _ram()
    where = f" ({model})" if model else ""
    return f"{os.cpu_count()} cores{where}{f', {mem}' if mem else ''}, Python {sys.version.split()[0]}"


def _ram() -> str:
    try:
        kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
    except (OSError, IndexError, ValueError):
        return ""
    return f"{kb / 1024 / 1024:.0f} GiB RAM"


def _scan_log(path: Path) -> dict:
    """What the server's stderr holds besides request lines: tracebacks, ERROR and WARNING lines. A log line and
    the lines under it that carry no timestamp (its traceback) are one entry, the CLI's ``retrieval: ...`` lines
    entries of their own; each distinct entry is counted once, its timestamp cut, a request's path cut to its
    first segment and a traceback shown by its last line (the exception). The first traceback is kept, its last
    30 lines."""
    stamp = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ ")
    target = re.compile(r"\b(GET|POST|HEAD|PUT|DELETE|OPTIONS) (/[^/?\s]*)\S*")
    entries: list[list[str]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if stamp.match(line) or line.startswith("retrieval: ") or not entries:  # the CLI's own lines too
            entries.append([line])
        else:
            entries[-1].append(line)
    messages: dict[str, int] = {}
    first_traceback: list[str] = []
    for entry in entries:
        head = stamp.sub("", entry[0])
        if head.startswith("INFO ") and len(entry) == 1:
            continue
        key = target.sub(r"\1 \2...", head)
        rest = [line for line in entry[1:] if line.strip()]
        if rest:
            key += " -> " + rest[-1].strip()
            if not first_traceback and any(line.startswith("Traceback") for line in rest):
                first_traceback = [entry[0], *entry[1:][-30:]]
        messages[key] = messages.get(key, 0) + 1
    lines = [line for entry in entries for line in entry]
    return {
        "lines": len(lines),
        "request_lines": sum(" INFO " in entry[0] for entry in entries),
        "tracebacks": sum(line.startswith("Traceback") for line in lines),
        "errors": sum(" ERROR " in entry[0] for entry in entries),
        "warnings": sum(" WARNING " in entry[0] for entry in entries),
        "messages": dict(sorted(messages.items(), key=lambda kv: -kv[1])[:20]),
        "first_traceback": first_traceback,
    }


def _code() -> str:
    """Which ``retrieval`` the server runs: its folder, and the commit when it is this checkout's."""
    found = subprocess.run([sys.executable, "-c", "import retrieval; print(retrieval.__file__)"],
                           capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    where = str(Path(found).parent) if found else "?"
    if found and Path(found).resolve().is_relative_to(ROOT):
        git = ["git", "-C", str(ROOT)]
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
        dirty = subprocess.run([*git, "status", "--porcelain", "retrieval"], capture_output=True, text=True,
                               check=False).stdout.strip()  # fmt: skip
        where += f" at {head.stdout.strip()}" + (" with uncommitted changes" if dirty else "")
    return where


def _load(args: argparse.Namespace) -> int:
    mix = _parse_mix(args.mix)
    levels = [int(x) for x in args.clients.split(",") if x.strip()]
    seconds = args.seconds if args.seconds is not None else 20.0
    tmp = tempfile.TemporaryDirectory()
    db = args.db
    if db is None:
        db = str(Path(tmp.name) / "hepth.db")
        subprocess.run([*RETRIEVAL, "build", "--from", str(SHARED / "papers.jsonl"), "--db", db], check=True)
    titles = _titles()
    hubs = _hubs(db, args.hubs)
    log_path = Path(args.server_log) if args.server_log else Path(tmp.name) / "serve.log"
    server, url, log = _start_server(db, log_path)
    port = int(url.rsplit(":", 1)[1].strip("/"))
    ctx = multiprocessing.get_context("fork")
    results: dict = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "code": _code(),
        "machine": _machine(),
        "settings": {"db": db, "clients": levels, "seconds": seconds, "idle": args.idle, "mix": mix,
                     "hubs": hubs, "procs": args.procs, "timeout": args.timeout, "reopen_idle": args.reopen_idle},
        "levels": [],
    }  # fmt: skip
    rss = _RssSampler(server.pid)
    idle = None
    try:
        # Warm-up, one request at a time, no idle sockets: every kind's unloaded latency.
        rng, warm = random.Random(args.seed), []
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        for kind in (k for k in KINDS if k in mix):
            for _ in range(args.warmup):
                record, conn = _send(conn, port, 60, kind, rng, titles, hubs)
                warm.append((*record, 0.0))
        conn.close()
        results["unloaded"] = {r["kind"]: r for r in _summary(warm, list(mix))}
        print(_head_markdown(results), flush=True)
        results["rss_kb_before"] = rss.sample()
        if args.idle:
            idle = _IdleSockets(port, args.idle, args.reopen_idle)
            time.sleep(1.0)  # let the server accept them
        idle_start = time.monotonic()
        for n_level, clients in enumerate(levels):
            procs = max(1, min(args.procs, clients))
            share = [clients // procs + (i < clients % procs) for i in range(procs)]
            out = ctx.Queue()
            start_at = time.monotonic() + 1.0
            until = start_at + seconds
            workers = [
                ctx.Process(target=_client_proc, args=(port, share[i], mix, titles, hubs, args.seed + 100 * n_level
                                                       + i, start_at, until, args.timeout, out))
                for i in range(procs)
            ]  # fmt: skip
            for w in workers:
                w.start()
            time.sleep(max(0.0, start_at - time.monotonic()))
            rss_start, cpu_start, idle_open_start = rss.sample(), _cpu_seconds(server.pid), idle and idle.open_now()
            records: list[tuple] = []
            gen_cpu, stuck = 0.0, 0
            for _ in workers:
                part, cpu, alive = out.get(timeout=seconds + args.timeout + 60)
                records += part
                gen_cpu += cpu
                stuck += alive
            wall = time.monotonic() - start_at
            for w in workers:
                w.join(timeout=10)
            rss_end, cpu_end = rss.sample(), _cpu_seconds(server.pid)
            window = rss.between(start_at, time.monotonic())
            errors: dict[str, int] = {}
            for r in records:
                if r[1] != "ok":
                    errors[f"{r[0]}: {r[4]}"] = errors.get(f"{r[0]}: {r[4]}", 0) + 1
            first_bad = min((r[5] for r in records if r[1] == "error"), default=None)
            level = {
                "clients": clients,
                "seconds": seconds,
                "wall_s": wall,
                "rows": _summary(records, list(mix)),
                "ok_per_second": sum(r[1] == "ok" for r in records) / wall,
                "non_ok": dict(sorted(errors.items(), key=lambda kv: -kv[1])),
                "first_error_s": first_bad,
                "rss_kb": {"start": rss_start, "max": max(window or [0]), "end": rss_end},
                "server_cpu_percent": None if cpu_start is None or cpu_end is None
                else 100 * (cpu_end - cpu_start) / wall,
                "generator_cpu_percent": 100 * gen_cpu / wall,
                "generator_procs": procs,
                "clients_stuck": stuck,
                "idle_open_at_start": idle_open_start,
                "idle_open_at_end": idle and idle.open_now(),
            }  # fmt: skip
            results["levels"].append(level)
            print(_level_markdown(level, args.idle), flush=True)
            time.sleep(args.pause)
        if idle is not None:
            time.sleep(args.idle_wait)
            held = time.monotonic() - idle_start
            closed = sorted(c[1] for c in idle.closed)
            results["idle"] = {
                "held": args.idle,
                "opened": idle.opened,
                "failed_connects": len(idle.failed),
                "closed_by_server": len(closed),
                "closed_after_s": {"min": closed[0], "median": statistics.median(closed), "max": closed[-1]}
                if closed else None,
                "how_closed": sorted({c[2] for c in idle.closed}),
                "server_sent": sorted(set(idle.sent_data))[:5],
                "open_at_end": idle.open_now(),
                "watched_s": held,
            }  # fmt: skip
        results["rss_kb_after"] = rss.sample()
        results["rss_kb_hwm"] = _proc_status(server.pid, "VmHWM")
    finally:
        if idle is not None:
            idle.close()
        rss.stop()
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
    results["server_exit"] = server.returncode
    results["server_log"] = _scan_log(log_path)
    tail = _tail_markdown(results)
    print(tail)
    text = "\n".join([_head_markdown(results), *(_level_markdown(x, args.idle) for x in results["levels"]), tail])
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    tmp.cleanup()
    return 0


def _level_markdown(level: dict, idle: int) -> str:
    head = f"### {level['clients']} clients{f' + {idle} idle sockets' if idle else ''}, {level['seconds']:g} s"
    out = [f"{head} (the last answer {level['wall_s']:.1f} s in)\n",
           "| kind | requests | ok | JSON 503s | errors | p50 ms | p99 ms | max ms |",
           "|---|--:|--:|--:|--:|--:|--:|--:|"]  # fmt: skip
    for r in level["rows"]:
        name = f"**{r['kind']}**" if r["kind"] == "all" else r["kind"]
        out.append(f"| {name} | {r['requests']} | {r['ok']} | {r['json_503']} | {r['errors']} | {_ms(r['p50_ms'])} "
                   f"| {_ms(r['p99_ms'])} | {_ms(r['max_ms'])} |")  # fmt: skip
    rss = level["rss_kb"]
    cpu = level["server_cpu_percent"]
    out.append("")
    parts = [
        f"ok answers/s {level['ok_per_second']:.1f} (over {level['wall_s']:.1f} s)",
        f"server RSS start {_mib(rss['start'])}, max {_mib(rss['max'])}, end {_mib(rss['end'])}",
        f"server CPU {'-' if cpu is None else f'{cpu:.0f}%'}, load generator CPU "
        f"{level['generator_cpu_percent']:.0f}% ({level['generator_procs']} process(es); 100% = one core)",
    ]
    if idle:
        parts.append(f"idle sockets open {level['idle_open_at_start']} -> {level['idle_open_at_end']}")
    out.append("; ".join(parts))
    if level["clients_stuck"]:
        out.append(f"\n{level['clients_stuck']} client thread(s) had not finished when their process reported.")
    if level["non_ok"]:
        first = level["first_error_s"]
        out.append("\nNot ok" + (f" (first error {first:.1f} s into the level)" if first is not None else "") + ":\n")
        out += [f"- {label}: {n}" for label, n in list(level["non_ok"].items())[:12]]
    return "\n".join(out) + "\n"


def _head_markdown(results: dict) -> str:
    s = results["settings"]
    mix = ", ".join(f"{k} {w:g}" for k, w in s["mix"].items())
    out = [
        "# `retrieval serve` under load (`bench/serve.py --load`)\n",
        f"{results['date']}; {results['machine']}; loopback; index {s['db']}; server code {results['code']}\n",
        f"Levels {', '.join(map(str, s['clients']))} clients, {s['seconds']:g} s each; {s['idle']} idle sockets held"
        f"{' (reopened when closed)' if s['reopen_idle'] else ''}; mix {mix}; hubs: the {len(s['hubs'])} most cited "
        f"papers ({', '.join(s['hubs'][:3])}, ...); client threads over {s['procs']} process(es); request timeout "
        f"{s['timeout']:g} s. p50/p99/max over the ok answers.\n",
        "## Unloaded (one request at a time, before the idle sockets)\n",
        "| kind | requests | ok | p50 ms | max ms |",
        "|---|--:|--:|--:|--:|",
    ]
    for r in results["unloaded"].values():
        if r["kind"] != "all":
            out.append(f"| {r['kind']} | {r['requests']} | {r['ok']} | {_ms(r['p50_ms'])} | {_ms(r['max_ms'])} |")
    out.append("\n## Levels\n")
    return "\n".join(out)


def _tail_markdown(results: dict) -> str:
    s = results["settings"]
    out = ["## Summary\n"]
    out.append(
        "| clients | search p50 ms | search p99 ms | ok/s | JSON 503s | errors | RSS start | RSS max | RSS end |"
    )
    out.append("|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for level in results["levels"]:
        rows = {r["kind"]: r for r in level["rows"]}
        search, every = rows.get("search", rows["all"]), rows["all"]
        rss = level["rss_kb"]
        out.append(f"| {level['clients']} | {_ms(search['p50_ms'])} | {_ms(search['p99_ms'])} | "
                   f"{level['ok_per_second']:.1f} | {every['json_503']} | {every['errors']} | {_mib(rss['start'])} | "
                   f"{_mib(rss['max'])} | {_mib(rss['end'])} |")  # fmt: skip
    out.append(f"\nServer RSS before the levels {_mib(results.get('rss_kb_before'))}, after "
               f"{_mib(results.get('rss_kb_after'))}, peak (VmHWM) {_mib(results.get('rss_kb_hwm'))}.")  # fmt: skip
    idle = results.get("idle")
    if idle:
        after = idle["closed_after_s"]
        line = (f"\nIdle sockets: {idle['held']} opened ({idle['failed_connects']} failed to connect), watched "
                f"{idle['watched_s']:.0f} s; the server closed {idle['closed_by_server']}")  # fmt: skip
        if after:
            line += (f" after {after['min']:.1f} s (min), {after['median']:.1f} s (median), {after['max']:.1f} s "
                     f"(max), by {', '.join(idle['how_closed'])}")  # fmt: skip
        if idle["server_sent"]:
            line += f", having sent {', '.join(map(repr, idle['server_sent']))}"
        line += f"; {idle['open_at_end']} still open at the end"
        if s["reopen_idle"]:
            line += f" ({idle['opened']} opened in all)"
        out.append(line + ".")
    log = results["server_log"]
    out.append(f"\nServer log: {log['request_lines']} request lines, {log['tracebacks']} tracebacks, {log['errors']} "
               f"ERROR and {log['warnings']} WARNING lines; exit status {results['server_exit']}.")  # fmt: skip
    if log["messages"]:
        out.append(
            "\nIts other lines, each distinct message once with its count (a traceback by its last line):\n\n```"
        )
        out += [f"{n:>7} x {message[:200]}" for message, n in log["messages"].items()]
        out.append("```")
    if log["first_traceback"]:
        out.append("\nThe first traceback:\n\n```\n" + "\n".join(log["first_traceback"]) + "\n```")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", help="a hepth index (default: built into a temporary folder)")
    parser.add_argument("--requests", type=int, default=400, help="requests per level, at most (default 400)")
    parser.add_argument("--cli-requests", type=int, default=48, help="CLI searches per level, at most (default 48)")
    parser.add_argument("--seconds", type=float, help="seconds per level, at most (default 60; --load: 20, exactly)")
    load = parser.add_argument_group("load mode")
    load.add_argument("--load", action="store_true", help="mixed requests at several client levels (see above)")
    load.add_argument("--clients", default="8,32,64", help="client levels, comma-separated (default 8,32,64)")
    load.add_argument("--idle", type=int, default=63, help="idle sockets held open during the run (default 63)")
    load.add_argument(
        "--reopen-idle", action="store_true", help="open a new idle socket for each one the server closes"
    )
    load.add_argument("--idle-wait", type=float, default=0.0,
                      help="seconds to keep watching the idle sockets after the last level (default 0)")  # fmt: skip
    load.add_argument("--mix", default=DEFAULT_MIX, help=f"request mix, KIND=WEIGHT,... (default {DEFAULT_MIX})")
    load.add_argument("--hubs", type=int, default=20, help="most cited papers for similar/papers/page (default 20)")
    load.add_argument("--procs", type=int, default=1, help="processes the client threads are split over (default 1)")
    load.add_argument("--timeout", type=float, default=30.0, help="seconds a request may take (default 30)")
    load.add_argument("--warmup", type=int, default=5, help="unloaded requests of each kind first (default 5)")
    load.add_argument("--pause", type=float, default=2.0, help="seconds between levels (default 2)")
    load.add_argument("--seed", type=int, default=0, help="seed of the request draws (default 0)")
    load.add_argument("--server-log", help="keep the server's stderr in this file (default: a temporary one)")
    load.add_argument("--out", help="write the markdown report here too (e.g. bench/results/serve_load.md)")
    load.add_argument("--json", help="write every figure as JSON here")
    args = parser.parse_args(argv)
    if args.load:
        return _load(args)
    if args.seconds is None:
        args.seconds = 60.0
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
