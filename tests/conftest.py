"""Shared fixtures: indexes built once per session in real SQLite files, and the shared corpora."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from retrieval import build_index, read_jsonl
from retrieval.commands import build

sys.path.insert(0, str(Path(__file__).parent))  # for `reference`

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(autouse=True)
def _no_index_env(monkeypatch):
    """Tests name their index files; an index location in the environment must not leak in."""
    monkeypatch.delenv("RETRIEVAL_DB", raising=False)


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    build(db=path)
    return path


def shared_corpus(name: str) -> Path:
    path = SHARED_DATA / name / "papers.jsonl"
    if not path.exists():
        pytest.skip(f"the shared corpus {name} is not here ({path}); it lives in ../shared/data beside the repo")
    return path


@pytest.fixture(scope="session")
def cacm_db(tmp_path_factory) -> tuple[Path, Path]:
    """The real CACM corpus (3,204 papers) indexed once: (index path, corpus path)."""
    corpus = shared_corpus("cacm")
    path = tmp_path_factory.mktemp("cacm") / "cacm.db"
    build_index((p for _, p in read_jsonl(corpus)), path, source=corpus.name)
    return path, corpus


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
