"""``retrieval serve`` as a real process: uvicorn on a loopback port, queried over HTTP, stopped by a signal."""

from __future__ import annotations

import json
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
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

    def wait_ready(self) -> str:
        """The URL the server printed, once ``/health`` answers there (at most ``START_WAIT`` seconds)."""
        deadline = time.monotonic() + START_WAIT
        while not self.url:
            try:
                line = self.out.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no URL printed in {START_WAIT} s; stderr: {self.stderr}") from None
            found = re.search(r"http://\S+?/(?= |$)", line)
            self.url = found.group(0) if found else ""
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
