"""What the benches that time searches on hepth share: its dev queries, its index, the options that choose them, and
phases with the citation graph read by statements or kept by the process (``retrieval.search.adjacency``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import tempfile
from pathlib import Path

from retrieval.search import adjacency

HEPTH = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "hepth"


def parser(description: str) -> argparse.ArgumentParser:
    """``--db`` (a hepth index), ``--queries`` per set and ``--rounds`` of phases."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--db", help="a hepth index (default: built into a temporary folder)")
    p.add_argument("--queries", type=int, default=100, help="queries per set (default 100)")
    p.add_argument("--rounds", type=int, default=2, help="phases of each kind per set (default 2)")
    return p


def dev_sets(count: int) -> dict[str, list[str]]:
    """The first ``count`` queries of hepth's dev sets: ``queries-dev`` (abstracts) and ``queries-dev-titles``."""
    return {
        name: [json.loads(line)["query"] for line in (HEPTH / f"{name}.jsonl").read_text().splitlines()][:count]
        for name in ("queries-dev", "queries-dev-titles")
    }


@contextlib.contextmanager
def index(db: str | None):
    """``db`` when given, else hepth built into a temporary folder for the ``with`` block."""
    if db is not None:
        yield db
        return
    from retrieval.commands import build

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "hepth.db")
        build(db=path, source=HEPTH / "papers.jsonl")
        yield path


@contextlib.contextmanager
def graph(client, first: str, kept: bool, **search):
    """A phase with the citation graph kept (read once after the search of ``first``, whose rows pay the rent)
    or never kept (read by statements); the rent as it was afterwards."""
    adjacency.GRAPHS.clear()
    rent = adjacency.GRAPH_RENT
    adjacency.GRAPH_RENT = 1e-9 if kept else math.inf
    try:
        if kept:
            client.search(first, full=False, **search)
            with client.snapshot() as snap:
                if adjacency.GRAPHS.of(snap) is None:
                    raise SystemExit("the graph was not kept: is RETRIEVAL_POSTINGS_CACHE_MB too small?")
        yield
    finally:
        adjacency.GRAPH_RENT = rent
