"""Helpers the tests share: corpus records, JSONL files, and the shared real corpora."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def shared_corpus(name: str) -> Path:
    path = SHARED_DATA / name / "papers.jsonl"
    if not path.exists():
        pytest.skip(f"the shared corpus {name} is not here ({path}); it lives in ../shared/data beside the repo")
    return path


def write_jsonl(path: Path, records: list) -> Path:
    """One record per line; a ``str`` record is written as it is (for malformed lines)."""
    with open(path, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write((record if isinstance(record, str) else json.dumps(record)) + "\n")
    return path


def paper(pid: str, title: str = "", abstract: str = "", year=2000, references=(), authors=()) -> dict:
    return {
        "id": pid,
        "title": title or f"paper {pid}",
        "abstract": abstract,
        "year": year,
        "authors": list(authors),
        "references": list(references),
    }


#: The backends a test that does not depend on one runs on (a fixture parameter: ``tests/conftest.py``).
BACKENDS = ("sqlite", "postgresql")


def index_on(request, backend: str, papers, label: str, source: str = "synthetic"):
    """``papers`` indexed on ``backend``: a file under a fresh temporary folder, or a fresh PostgreSQL database
    (its URL)."""
    from retrieval.config import resolve_db
    from retrieval.store.postgres.build import build_postgres
    from retrieval.store.sqlite.build import build_index

    if backend == "sqlite":
        path = request.getfixturevalue("tmp_path_factory").mktemp(label) / f"{label}.db"
        build_index(papers, path, source=source)
        return path

    url = request.getfixturevalue("pg_database")(label)
    build_postgres(papers, resolve_db(url), source=source)
    return url


#: The vocabulary of ``corpus``: words that mean nothing, so that any query of a few of them matches many papers.
WORDS = [f"w{i}" for i in range(400)]


def corpus(path: Path, n: int, prefix: str = "p", seed: int = 1) -> Path:
    """``n`` papers with 60-120-token abstracts and a few references each, as JSONL (the builds that kills and
    concurrent writers need to last a while)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(n):
            record = {
                "id": f"{prefix}{i:06d}",
                "title": " ".join(rng.choices(WORDS, k=6)),
                "abstract": " ".join(rng.choices(WORDS, k=rng.randint(60, 120))),
                "year": 1990 + i % 30,
                "authors": [f"Author {i % 97}"],
                "references": [f"{prefix}{j:06d}" for j in rng.sample(range(max(1, i)), min(i, 3))],
            }
            handle.write(json.dumps(record) + "\n")
    return path


def finishes(code: str, seconds: float = 60) -> None:
    """Run ``code`` in a Python process of its own and assert it ends well within ``seconds``: a guard against
    an input whose cost grows quadratically or worse (it would run for minutes), not a measure of speed."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=seconds)
    assert done.returncode == 0, done.stderr


def stop_before(monkeypatch, module, name: str) -> None:
    """Make ``module.name`` receive a SIGTERM (as from ``kill``, or Ctrl-C's SIGINT, which a runner started in the
    background ignores) as it is called, then run: a stop that lands in the middle of that step."""
    import os
    import signal

    real = getattr(module, name)

    def stopped_then_run(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, stopped_then_run)


def to_0009(url: str) -> None:
    """Make the index on the PostgreSQL server at ``url`` what the previous version built (revision 0009): its
    citations a table of ids, without ``paper_keys`` and ``citation_links``, as migration 0010's downgrade leaves it
    (a sharded index's coordinator too)."""
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE citations_0009 AS SELECT * FROM citations")
        conn.execute("DROP VIEW citations")
        conn.execute("DROP TABLE citation_links CASCADE")
        conn.execute("DROP TABLE paper_keys CASCADE")
        conn.execute("ALTER TABLE citations_0009 RENAME TO citations")
        conn.execute("ALTER TABLE citations ADD CONSTRAINT pk_citations PRIMARY KEY (citing_id, cited_id)")
        conn.execute("CREATE INDEX ix_citations_cited_citing ON citations (cited_id, citing_id)")
        conn.execute("UPDATE index_info SET value = '0009' WHERE key = 'schema_revision'")
        conn.execute("UPDATE alembic_version SET version_num = '0009'")
