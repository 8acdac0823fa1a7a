"""TREC run files: ``qid Q0 docid rank score tag``, one line per ranked paper, queries in evaluation order.

The score column is ``len - rank + 1`` (100, 99, ... for a full ranking), not the mode's own score: trec_eval
sorts by score and breaks ties by document id, which would reorder papers whose scores tie. With these scores
``trec_eval -m all_trec qrels run`` measures exactly the order the mode returned.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path


def run_lines(rankings: Iterable[tuple[str, Sequence[str]]], tag: str) -> Iterable[str]:
    """The lines of a run file for ``(qid, ranking)`` pairs."""
    for qid, ranking in rankings:
        n = len(ranking)
        for rank, pid in enumerate(ranking, start=1):
            yield f"{qid} Q0 {pid} {rank} {n - rank + 1} {tag}\n"


def write_run(path: Path, rankings: Iterable[tuple[str, Sequence[str]]], tag: str) -> None:
    """Write a run file at ``path`` (replacing it)."""
    with open(path, "w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(run_lines(rankings, tag))
