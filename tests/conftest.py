"""Shared fixtures: indexes built once per session in real SQLite files, and the shared corpora."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval import build_index, read_jsonl
from retrieval.commands import build
from tests.helpers import BACKENDS, shared_corpus


@pytest.fixture(autouse=True)
def _no_index_env(monkeypatch):
    """Tests name their index files; an index location in the environment must not leak in."""
    monkeypatch.delenv("RETRIEVAL_DB", raising=False)


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
    build_index((p for _, p in read_jsonl(corpus)), path, source=corpus.name)
    return path, corpus


# -- PostgreSQL: a real server, started by .ci/run (`.ci/postgres start DIR PORT`) -------------------------------
@pytest.fixture(scope="session")
def pg_server() -> str:
    """The URL of a PostgreSQL server's maintenance database (``$RETRIEVAL_TEST_POSTGRES``). Without one the
    PostgreSQL tests skip, unless ``$RETRIEVAL_REQUIRE_POSTGRES`` is set (CI), where they fail."""
    import os

    url = os.environ.get("RETRIEVAL_TEST_POSTGRES")
    if not url:
        reason = "no PostgreSQL server: start one with `.ci/postgres start DIR PORT` and set RETRIEVAL_TEST_POSTGRES"
        if os.environ.get("RETRIEVAL_REQUIRE_POSTGRES"):
            pytest.fail(reason)
        pytest.skip(reason)
    return url


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


# -- Sharded PostgreSQL: a coordinator (the server above) and shard servers, all started by .ci/run --------------
@pytest.fixture(scope="session")
def pg_shard_servers(pg_server) -> list[str]:
    """The URLs of the shard servers' maintenance databases (``$RETRIEVAL_TEST_POSTGRES_SHARDS``, comma
    separated; at least two). Skips without them, unless ``$RETRIEVAL_REQUIRE_POSTGRES`` is set (CI)."""
    import os

    urls = [u for u in os.environ.get("RETRIEVAL_TEST_POSTGRES_SHARDS", "").split(",") if u]
    if len(urls) < 2:
        reason = (
            "no shard servers: start two more with `.ci/postgres start DIR PORT` and set "
            "RETRIEVAL_TEST_POSTGRES_SHARDS=URL,URL"
        )
        if os.environ.get("RETRIEVAL_REQUIRE_POSTGRES"):
            pytest.fail(reason)
        pytest.skip(reason)
    return urls


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
