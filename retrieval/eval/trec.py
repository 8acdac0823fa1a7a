"""TREC files: runs (``qid Q0 docid rank score tag``, one line per ranked paper, queries in evaluation order) and
the qrels they are measured against (``qid 0 docid 1``, one line per relevant paper).

The score column is ``len - rank + 1`` (100, 99, ... for a full ranking), not the mode's own score: trec_eval
sorts by score and breaks ties by document id, which would reorder papers whose scores tie. A query whose ranking
is empty has no line in a run, so ``trec_eval -c -m all_trec qrels.trec run.MODE.trec`` gives the report's
figures (``-c`` counts such a query as 0, as the report does; without it trec_eval averages over the queries the
run names).

The format splits lines on whitespace, so an id is written with each whitespace character and ``%`` percent-encoded
(``p 1`` as ``p%201``): every id keeps one column, and ids without either are written as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..outfile import replace_text

QRELS_FILE = "qrels.trec"


def trec_id(text: str) -> str:
    """``text`` with ``%`` and every whitespace character percent-encoded (UTF-8), one column of a TREC line."""
    if "%" not in text and not any(ch.isspace() for ch in text):
        return text
    return "".join(
        "".join(f"%{byte:02X}" for byte in ch.encode("utf-8")) if ch == "%" or ch.isspace() else ch for ch in text
    )


def run_lines(rankings: Iterable[tuple[str, Sequence[str]]], tag: str) -> Iterable[str]:
    """The lines of a run file for ``(qid, ranking)`` pairs."""
    for qid, ranking in rankings:
        n = len(ranking)
        q = trec_id(qid)
        for rank, pid in enumerate(ranking, start=1):
            yield f"{q} Q0 {trec_id(pid)} {rank} {n - rank + 1} {tag}\n"


def qrels_lines(relevant: Mapping[str, Iterable[str]]) -> Iterable[str]:
    """The lines of a qrels file for ``{qid: relevant paper ids}``, queries in the mapping's order, ids sorted."""
    for qid, papers in relevant.items():
        q = trec_id(qid)
        for pid in sorted(papers):
            yield f"{q} 0 {trec_id(pid)} 1\n"


def write_run(path: Path, rankings: Iterable[tuple[str, Sequence[str]]], tag: str) -> None:
    """Write a run file at ``path`` (replacing it, whole or not at all: ``retrieval.outfile``)."""
    replace_text(path, run_lines(rankings, tag))


def write_qrels(path: Path, relevant: Mapping[str, Iterable[str]]) -> None:
    """Write a qrels file at ``path`` (replacing it, whole or not at all)."""
    replace_text(path, qrels_lines(relevant))
