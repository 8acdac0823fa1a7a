"""Shared fixtures: indexes built once per session in real SQLite files, and the shared corpora."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from retrieval import read_jsonl
from retrieval.commands import build
from retrieval.store.sqlite.build import build_index
from tests.helpers import BACKENDS, shared_corpus


@pytest.fixture(autouse=True)
def _no_index_env(monkeypatch):
    """Tests name their index files; an index location in the environment must not leak in."""
    monkeypatch.delenv("RETRIEVAL_DB", raising=False)


@pytest.fixture(autouse=True)
def _as_in_a_fresh_process():
    """Each test looks up the best papers' ids and the query terms and reads the citation graph as a fresh
    process would, whatever the tests before it asked of a shared index (``blobs.PaperIds`` keeps the ids after
    a few lookups, ``lexical`` the terms it read, ``adjacency.Graphs`` the graph after a graph's worth of rows;
    not imported here, which loads NumPy)."""
    lexical = sys.modules.get("retrieval.search.lexical")
    if lexical is not None:
        lexical._TERMS.clear()
    blobs = sys.modules.get("retrieval.search.blobs")
    if blobs is not None:
        blobs.PAPER_IDS.clear()
    adjacency = sys.modules.get("retrieval.search.adjacency")
    if adjacency is not None:
        adjacency.GRAPHS.clear()


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    build(db=path)
    return path


@pytest.fixture(scope="session")
def cacm_db(tmp_path_factory) -> tuple[Path, Path]:
    """The real CACM corpus (3,204 papers) indexed once: (index path, corpus path)."""
    corpus = shared_corpus("cacm")
    path = tmp_path_factory.mktemp("cacm") / "cacm.db"
    # As `retrieval build` makes it: CACM's citations are sparse, so it keeps text vectors where the model is installed
    build_index((p for _, p in read_jsonl(corpus)), path, source=corpus.name, semantic="auto")
    return path, corpus


# -- PostgreSQL: real servers, started by .ci/run, else here from the machine's packages --------------------------
#: `.ci/postgres`, which makes a throwaway cluster (initdb and pg_ctl as the postgres user) and stops it.
POSTGRES_SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "postgres"


class _Servers:
    """PostgreSQL servers this session started (where ``$RETRIEVAL_TEST_POSTGRES`` names none), each in a
    temporary folder on a free loopback port, stopped when the session ends."""

    def __init__(self) -> None:
        self.folder: Path | None = None
        self.started: list[Path] = []

    def why_not(self) -> str | None:
        """Why no server can be started here, or None when one can."""
        import os
        import shutil
        import subprocess

        if not list(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
            return "PostgreSQL is not installed (apt-get install postgresql, or set RETRIEVAL_TEST_POSTGRES=URL)"
        if os.geteuid() != 0 and os.environ.get("USER") != "postgres":
            sudo = shutil.which("sudo")
            ok = sudo and subprocess.run([sudo, "-n", "-u", "postgres", "true"], capture_output=True).returncode == 0
            if not ok:
                return (
                    "PostgreSQL's initdb must run as the postgres user (root or passwordless sudo here): start a "
                    "server with `.ci/postgres start DIR PORT` and set RETRIEVAL_TEST_POSTGRES=URL"
                )
        return None

    def start(self) -> str:
        import os
        import socket
        import subprocess
        import tempfile

        if self.folder is None:
            self.folder = Path(tempfile.mkdtemp(prefix="retrieval-pg-"))
            os.chmod(self.folder, 0o755)  # the server runs as the postgres user, in a folder below it
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        folder = self.folder / f"pg{len(self.started)}"
        self.started.append(folder)
        done = subprocess.run(
            [str(POSTGRES_SCRIPT), "start", str(folder), str(port)], capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            raise RuntimeError(f"could not start a PostgreSQL server: {done.stderr.strip() or done.stdout.strip()}")
        return done.stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        import shutil
        import subprocess

        for folder in self.started:
            subprocess.run([str(POSTGRES_SCRIPT), "stop", str(folder)], capture_output=True, timeout=120)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def _unavailable(reason: str) -> None:
    """Skip, or fail where ``$RETRIEVAL_REQUIRE_POSTGRES`` is set (CI)."""
    import os

    if os.environ.get("RETRIEVAL_REQUIRE_POSTGRES"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def _own_servers():
    servers = _Servers()
    yield servers
    servers.stop()


@pytest.fixture(scope="session")
def pg_server(_own_servers) -> str:
    """The URL of a PostgreSQL server's maintenance database: ``$RETRIEVAL_TEST_POSTGRES`` (as .ci/run sets it),
    else a server this session starts from the machine's packages (``RETRIEVAL_TEST_POSTGRES=none``: none). Without
    one the PostgreSQL tests skip, unless ``$RETRIEVAL_REQUIRE_POSTGRES`` is set (CI), where they fail."""
    import os

    url = os.environ.get("RETRIEVAL_TEST_POSTGRES")
    if url == "none":
        _unavailable("RETRIEVAL_TEST_POSTGRES=none: the PostgreSQL tests are off")
    if url:
        return url
    reason = _own_servers.why_not()
    if reason:
        _unavailable(reason)
    return _own_servers.start()


@pytest.fixture(scope="session")
def restartable_pg(_own_servers):
    """A PostgreSQL server of this session's own, which a test may restart: ``(url, restart)``, where
    ``restart()`` restarts it on the same port (every session ends, as in a real restart)."""
    import subprocess

    reason = _own_servers.why_not()
    if reason:
        _unavailable(reason)
    url = _own_servers.start()
    folder = _own_servers.started[-1]

    def restart() -> None:
        subprocess.run([str(POSTGRES_SCRIPT), "restart", str(folder)], check=True, capture_output=True, timeout=120)

    return url, restart


@pytest.fixture(scope="session")
def pg_database(pg_server):
    """A factory of fresh, empty databases on the test server (``pg_database("name")`` -> URL), dropped at the
    end of the session."""
    import uuid

    import psycopg

    made = []

    def make(label: str = "t") -> str:
        name = f"retrieval_{label}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        made.append(name)
        return pg_server.rsplit("/", 1)[0] + "/" + name

    yield make
    with psycopg.connect(pg_server, autocommit=True) as conn:
        for name in made:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def demo_pg(pg_database) -> str:
    """The demo corpus indexed on PostgreSQL (the URL)."""
    url = pg_database("demo")
    build(db=url)
    return url


# -- Sharded PostgreSQL: a coordinator (the server above) and shard servers, started by .ci/run or here ----------
@pytest.fixture(scope="session")
def pg_shard_servers(pg_server, _own_servers) -> list[str]:
    """The URLs of the shard servers' maintenance databases: ``$RETRIEVAL_TEST_POSTGRES_SHARDS`` (comma separated;
    at least two), else two more servers this session starts beside its own coordinator. Skips without them,
    unless ``$RETRIEVAL_REQUIRE_POSTGRES`` is set (CI)."""
    import os

    urls = [u for u in os.environ.get("RETRIEVAL_TEST_POSTGRES_SHARDS", "").split(",") if u]
    if len(urls) >= 2:
        return urls
    if _own_servers.started and not os.environ.get("RETRIEVAL_TEST_POSTGRES"):  # the coordinator is ours: two more
        return [_own_servers.start(), _own_servers.start()]
    _unavailable(
        "no shard servers: start two more with `.ci/postgres start DIR PORT` and set "
        "RETRIEVAL_TEST_POSTGRES_SHARDS=URL,URL"
    )


@pytest.fixture(scope="session")
def sharded_database(pg_database, pg_shard_servers):
    """A factory of fresh databases for a sharded index: ``sharded_database("name")`` -> (coordinator URL,
    [shard URLs]), one database on the coordinator's server and one on each shard server, dropped at the end."""
    import uuid

    import psycopg

    made = []

    def make(label: str = "t") -> tuple[str, list[str]]:
        coordinator = pg_database(label)
        shards = []
        for server in pg_shard_servers:
            name = f"retrieval_{label}_shard_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(server, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            made.append((server, name))
            shards.append(server.rsplit("/", 1)[0] + "/" + name)
        return coordinator, shards

    yield make
    for server, name in made:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def demo_sharded(sharded_database) -> str:
    """The demo corpus on a coordinator and two shard servers (the coordinator's URL)."""
    url, shards = sharded_database("demo")
    build(db=url, shards=shards)
    return url


# -- Tests that do not depend on the backend run on both: these fixtures take each backend as a parameter ----------
@pytest.fixture(scope="session", params=BACKENDS)
def demo_index(request, tmp_path_factory):
    """The demo corpus indexed on each backend in turn."""
    if request.param == "sqlite":
        return request.getfixturevalue("demo_db")
    return request.getfixturevalue("demo_pg")


@pytest.fixture(scope="session", params=BACKENDS)
def cacm_index(request):
    """The CACM corpus indexed on each backend in turn: (index, corpus path)."""
    if request.param == "sqlite":
        return request.getfixturevalue("cacm_db")
    corpus = shared_corpus("cacm")
    url = request.getfixturevalue("pg_database")("cacm")
    build(db=url, source=corpus)
    return url, corpus


# -- The run's summary: each group of skipped tests, and what would enable it ---------------------------------------
_SKIP_GROUPS = (
    ("PostgreSQL", ("PostgreSQL", "RETRIEVAL_TEST_POSTGRES", "shard servers", "psycopg")),
    ("browser", ("Chromium", "chromium")),
    ("shared corpora", ("shared corpus", "shared CACM", "../shared")),
    ("optional libraries", ("extra", "could not import", "No module named")),
)


def _skip_group(reason: str) -> str:
    for group, marks in _SKIP_GROUPS:
        if any(mark in reason for mark in marks):
            return group
    return "other"


def pytest_terminal_summary(terminalreporter) -> None:
    """After pytest's own lines: the skipped tests by group, each with the reason of its first test (which says
    what would enable the group), so a run that skips says why in a few lines."""
    groups: dict[str, list[str]] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        groups.setdefault(_skip_group(reason), []).append(reason)
    if not groups:
        return
    terminalreporter.section("skipped, by what would enable them")
    for group, reasons in sorted(groups.items(), key=lambda item: -len(item[1])):
        first = max(set(reasons), key=reasons.count)
        terminalreporter.write_line(f"{group} ({len(reasons)} tests): {first}")
