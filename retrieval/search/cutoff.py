"""A per-query exclusion: papers a search must behave as if they were not in the index (the time-honest
evaluation's papers newer than the query paper), without one index per query.

An ``Exclusion`` names the papers (``paper_ids``) and carries them as a ``filters.Passing`` (the doc ids that
fail), so that:

- the lexical pass ranks only the papers that pass, exactly (``lexical.filtered_top_papers``);
- the expansion neither adds an excluded paper nor walks through one: it is no neighbour, no intermediate of
  co-citation or coupling, and it is not counted in a source's degree (``expansion.expand(..., excluded=...)``);
- the blend never ranks one (``RetrievalClient.rank(..., exclude=...)``, the filter's candidate check).

What it does not change: the index's BM25 statistics (N, avgdl, df) and the citation counts the expansion breaks
ties with (``cited_counts``) still count every paper of the index.
"""

from __future__ import annotations

from collections import namedtuple

from ..store.sql.dialect import statement
from ..store.sql.executor import Snapshot
from .filters import Passing

DOC_IDS_SQL = statement("""\
SELECT dl.paper_id,
       dl.doc_id
FROM doc_len AS dl
ORDER BY dl.doc_id""")


def doc_ids(snap: Snapshot) -> dict[str, int]:
    """Every paper's doc id (read once per evaluation: the index does not change)."""
    return dict(snap.rows("exclusion: every paper's doc id", DOC_IDS_SQL, {}))


class Exclusion(namedtuple("Exclusion", "paper_ids passing")):
    """Papers to leave out (a frozenset of ids, those in the index) and the same as a ``Passing``."""

    __slots__ = ()

    @classmethod
    def make(cls, paper_ids, ids: dict[str, int], n_papers: int) -> Exclusion:
        """The exclusion of ``paper_ids`` on an index whose doc ids are ``ids`` (``doc_ids``), of ``n_papers``;
        ids not in the index are ignored."""
        present = frozenset(pid for pid in paper_ids if pid in ids)
        rejected = sorted(ids[pid] for pid in present)
        return cls(present, Passing(None, rejected, n_papers - len(rejected)))

    def __bool__(self) -> bool:
        return bool(self.paper_ids)
