"""Shared fixtures: indexes built once per session in real SQLite files, and the shared corpora."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval import build_index, read_jsonl
from retrieval.commands import build
from tests.helpers import shared_corpus


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
