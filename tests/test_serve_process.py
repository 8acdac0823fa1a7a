"""``retrieval serve`` as a real process: uvicorn on a loopback port, queried over HTTP, stopped by a signal."""

from __future__ import annotations

import json
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from retrieval import RetrievalClient  # noqa: E402
from retrieval.interfaces.cli.serve import is_loopback  # noqa: E402

START_WAIT = 20.0  # seconds a server may take to answer /health
STOP_WAIT = 10.0  # seconds it may take to exit after SIGTERM


class Server:
    """``python -m retrieval serve ...`` in a subprocess, its stdout and stderr read by threads as lines arrive."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "retrieval", "serve", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.out: queue.Queue[str] = queue.Queue()
        self.err_lines: list[str] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, self.out.put), daemon=True).start()
        self._err = threading.Thread(target=self._read, args=(self.proc.stderr, self.err_lines.append), daemon=True)
        self._err.start()
        self.url = ""

    @staticmethod
    def _read(stream, put) -> None:
        for line in stream:
            put(line.rstrip("\n"))

    def wait_url(self) -> str:
        """The URL the server printed (its socket listens from then on; no request has been made)."""
        deadline = time.monotonic() + START_WAIT
        while not self.url:
            try:
                line = self.out.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no URL printed in {START_WAIT} s; stderr: {self.stderr}") from None
            found = re.search(r"http://\S+?/(?= |$)", line)
            self.url = found.group(0) if found else ""
        return self.url

    def wait_ready(self) -> str:
        """The URL the server printed, once ``/health`` answers there (at most ``START_WAIT`` seconds)."""
        self.wait_url()
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "health", timeout=2) as response:
                    if response.status == 200:
                        return self.url
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.1)
        raise AssertionError(f"/health did not answer in {START_WAIT} s; stderr: {self.stderr}")

    def get(self, path: str, **params) -> tuple[int, dict]:
        url = self.url + path + ("?" + urllib.parse.urlencode(params, doseq=True) if params else "")
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            return error.code, json.load(error)

    @property
    def stderr(self) -> str:
        return "\n".join(self.err_lines)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout=STOP_WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"still running {STOP_WAIT} s after {sig!r}; stderr: {self.stderr}") from None
        self._err.join(timeout=5)
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            stream.close()


@pytest.fixture
def serve():
    started: list[Server] = []

    def start(*args: str) -> Server:
        started.append(Server(*args))
        return started[-1]

    yield start
    for server in started:
        server.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_serve_answers_over_http_logs_each_request_and_stops_on_sigterm(serve, demo_db):
    port = free_port()
    server = serve("--db", str(demo_db), "--port", str(port))
    assert server.wait_ready() == f"http://127.0.0.1:{port}/"
    status, got = server.get("search", q="attention sparsity", limit=3)
    assert status == 200
    with RetrievalClient(demo_db) as library:
        expected = library.search("attention sparsity", limit=3)
    assert [e["id"] for e in got["results"]] == [e.paper.id for e in expected.ranked]
    status, got = server.get("search", q="")
    assert status == 400 and got["kind"] == "ConfigError"
    with ThreadPoolExecutor(8) as pool:  # eight clients at once, each answered
        answers = list(pool.map(lambda _: server.get("search", q="graph neural networks", limit=2), range(16)))
    assert {status for status, _ in answers} == {200} and len({json.dumps(a["results"]) for _, a in answers}) == 1

    assert server.stop(signal.SIGTERM) == 0
    log = server.stderr
    assert re.search(r"GET /search\?q=attention\+sparsity&limit=3 200 \d+\.\d ms", log), log
    assert re.search(r"GET /search\?q= 400 \d+\.\d ms", log), log
    assert "Traceback" not in log and log.rstrip().endswith("retrieval: stopped")


def test_port_0_serves_on_a_port_the_system_picks_and_ctrl_c_stops_it(serve, demo_db):
    server = serve("--db", str(demo_db), "--port", "0")
    url = server.wait_ready()
    port = int(re.fullmatch(r"http://127\.0\.0\.1:(\d+)/", url).group(1))
    assert port > 0
    status, got = server.get("papers/p008")
    assert status == 200 and got["id"] == "p008"
    assert server.stop(signal.SIGINT) == 0
    assert "Traceback" not in server.stderr


def test_serve_refuses_to_start_on_a_missing_index(tmp_path):
    missing = tmp_path / "missing.db"
    result = subprocess.run(
        [sys.executable, "-m", "retrieval", "serve", "--db", str(missing), "--port", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.startswith(f"retrieval: error: no index at {missing}")
    assert "retrieval build" in result.stderr and "Traceback" not in result.stderr
    assert "serving" not in result.stdout


def test_serve_refuses_a_port_in_use(demo_db):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "retrieval", "serve", "--db", str(demo_db), "--port", str(port)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "--port" in result.stderr
    assert "Traceback" not in result.stderr


def test_serve_without_the_serve_extra_says_what_to_install(demo_db):
    code = (
        "import sys; sys.modules['uvicorn'] = None\n"  # as if uvicorn were not installed
        "from retrieval.interfaces.cli import main\n"
        f"sys.exit(main(['serve', '--db', {str(demo_db)!r}]))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "install retrieval[serve]" in result.stderr and "Traceback" not in result.stderr


def test_only_loopback_addresses_count_as_this_machine():
    assert is_loopback("127.0.0.1") and is_loopback("127.0.0.2") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("192.168.1.10")


# -- What one client, or many, can take from the others (retrieval.interfaces.http.limits) -------------------------
def _port_of(url: str) -> int:
    return int(urllib.parse.urlsplit(url).port)


def test_idle_connections_neither_block_requests_nor_stay_open(serve, demo_index):
    """More sockets than the request limit, held open without a word, neither refuse a search nor stay open past
    the header timeout (uvicorn's own limit counted them: a plain-text 503 for everyone while they were held)."""
    server = serve("--db", str(demo_index), "--port", "0", "--header-timeout", "1")
    port = _port_of(server.wait_ready())
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(70)]
    try:
        status, got = server.get("search", q="attention sparsity", limit=3)
        assert status == 200 and got["results"]
        time.sleep(1.5)
        assert [sock.recv(1) for sock in idle] == [b""] * len(idle)  # each closed by the server
        status, _ = server.get("health")
        assert status == 200
    finally:
        for sock in idle:
            sock.close()
    assert server.stop() == 0 and "Traceback" not in server.stderr


def _sent_in_pieces(port: int, target: str, piece: int = 4096) -> tuple[int, dict]:
    """``GET target`` with its head sent ``piece`` bytes at a time, as a network delivers a long request."""
    head = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        for start in range(0, len(head), piece):
            sock.sendall(head[start : start + piece])
            time.sleep(0.01)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in headers.lower(), answer[:300]
    return int(status_line.split()[1]), json.loads(body)


def test_a_query_within_its_bound_sent_in_pieces_is_answered_and_one_past_it_is_a_json_413(serve, demo_db):
    """A request head over 16 KB that arrived in more than one piece (as over a network) got uvicorn's plain-text
    "400 Invalid HTTP request received.", for queries well within the documented 20,000 characters (an abstract
    in Greek or Chinese passes 16 KB percent-encoded at about 2,700 characters)."""
    server = serve("--db", str(demo_db), "--port", "0")
    port = _port_of(server.wait_ready())
    for text in ("attention " * 1_900, "\u6ce8\u610f" * 10_000):  # 19,000 ASCII; 20,000 CJK (180 KB encoded)
        status, got = _sent_in_pieces(port, "/search?" + urllib.parse.urlencode({"q": text, "limit": 2}))
        assert status == 200 and "results" in got, got
    status, got = _sent_in_pieces(port, "/search?" + urllib.parse.urlencode({"q": "\u6ce8" * 20_001}))
    assert status == 413 and got["kind"] == "TooLargeError", got
    assert server.stop() == 0 and "Traceback" not in server.stderr


def test_requests_beyond_the_limit_get_the_documented_json_503_with_retry_after(serve, demo_db):
    server = serve("--db", str(demo_db), "--port", "0", "--max-requests", "1")
    port = _port_of(server.wait_ready())
    body = json.dumps({"query": "attention sparsity"}).encode()
    held = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:  # one request in flight: its body still arriving
        held.sendall(
            b"POST /explain HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body[:5]
        )
        time.sleep(0.3)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(server.url + "search?q=attention", timeout=10)
        assert refused.value.code == 503 and refused.value.headers["Retry-After"] == "1"
        assert refused.value.headers["Content-Type"] == "application/json"
        answer = json.load(refused.value)
        assert answer["kind"] == "OverloadedError" and "retry" in answer["error"]
        held.sendall(body[5:])
        assert held.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        held.close()
    time.sleep(0.1)
    status, _ = server.get("search", q="attention")  # the slot is free again
    assert status == 200
    assert server.stop() == 0 and "Traceback" not in server.stderr


def _hold_every_read(db) -> Callable[[], None]:
    """Make every read of the index at ``db`` wait (an exclusive lock); returns the function that lets go."""
    if str(db).startswith("postgresql"):
        import psycopg

        conn = psycopg.connect(str(db))
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'retrieval'")]
        conn.execute("LOCK TABLE " + ", ".join(f"retrieval.{t}" for t in tables) + " IN ACCESS EXCLUSIVE MODE")
        return conn.close
    import sqlite3

    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("BEGIN EXCLUSIVE")
    return conn.close


def test_a_stop_answers_the_requests_it_cannot_finish_with_a_json_503(serve, demo_index, tmp_path):
    """SIGTERM with a request still waiting when the grace period ends: the client gets the documented JSON 503
    (kind ServerStopping, Retry-After), the server exits 0, and no traceback is logged (it was a 500 and a
    CancelledError traceback)."""
    db = demo_index
    if not str(db).startswith("postgresql"):
        db = tmp_path / "demo.db"
        shutil.copy(demo_index, db)
    server = serve("--db", str(db), "--port", "0", "--grace", "0.5")
    server.wait_url()  # no request yet: on SQLite, no connection of the server's holds the file (WAL shares it)
    release = _hold_every_read(db)
    try:
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(server.get, "search", q="attention sparsity")
            time.sleep(0.5)
            assert not answer.done()
            assert server.stop() == 0
            status, got = answer.result(timeout=10)
    finally:
        release()
    assert (status, got["kind"]) == (503, "ServerStopping"), got
    assert "Traceback" not in server.stderr and "cut short by the server's stop" in server.stderr


# -- A PostgreSQL server that restarts under a running server ------------------------------------------------------
@pytest.fixture(scope="module")
def restarted_index(restartable_pg):
    """The demo corpus indexed on a server the test may restart: ``(url, restart)``."""
    import psycopg

    from retrieval import build

    server, restart = restartable_pg
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS restarts")
        conn.execute("CREATE DATABASE restarts")
    url = server.rsplit("/", 1)[0] + "/restarts"
    build(db=url)
    return url, restart


def test_serve_answers_again_once_its_postgresql_server_has_restarted(serve, restarted_index):
    """Every connection of every thread ends with the restart: /health checks the index for real and each
    request opens a new connection (they were 503 "the connection is closed" for good)."""
    url, restart = restarted_index
    server = serve("--db", url, "--port", "0")
    server.wait_ready()
    with ThreadPoolExecutor(4) as pool:  # several threads, each with its own connection
        before = list(pool.map(lambda _: server.get("search", q="attention sparsity", limit=5), range(8)))
    assert {status for status, _ in before} == {200}
    restart()
    status, health = server.get("health")
    assert status == 200 and health["status"] == "ok"
    with ThreadPoolExecutor(4) as pool:
        after = list(pool.map(lambda _: server.get("search", q="attention sparsity", limit=5), range(8)))
    assert [a["results"] for _, a in after] == [b["results"] for _, b in before]
    assert server.stop() == 0 and "Traceback" not in server.stderr


def test_a_read_past_the_query_timeout_is_a_json_503_and_the_server_goes_on(serve, demo_pg):
    server = serve("--db", demo_pg, "--port", "0", "--query-timeout", "0.5")
    server.wait_ready()
    release = _hold_every_read(demo_pg)
    try:
        status, got = server.get("search", q="attention sparsity")
    finally:
        release()
    assert (status, got["kind"]) == (503, "QueryTimeoutError") and "0.5 s budget" in got["error"]
    status, got = server.get("search", q="attention sparsity")
    assert status == 200 and got["results"]
    assert server.stop() == 0 and "Traceback" not in server.stderr
