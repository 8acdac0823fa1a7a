"""The semantic signal of the policy's blend: how close a candidate's text is to the query's in the vector space
of the model the index was built with (``retrieval build --semantic``; ``retrieval.embed``).

``semantic_norm`` = the cosine of the query's vector and the candidate's stored one (``paper_vectors``), over the
highest cosine among the query's candidates (the way ``bm25_norm`` divides by the best BM25 score), so the
blend adds ``w_semantic * semantic_norm`` (default weight 1, on BM25's footing: chosen before it was measured,
not tuned on a development set). An index without vectors, or ``w_semantic=0``, ranks exactly as before.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .. import embed
from ..errors import ConfigError
from ..store.sql.dialect import statement
from . import lexical

VECTORS_SQL = statement(
    lambda d: (
        f"""\
SELECT v.paper_id,
       v.vector
FROM {d.rows("paper_ids", "j")}
JOIN paper_vectors AS v ON v.paper_id = j.value"""
    )
)


def scores(snap, text: str, paper_ids: Sequence[str], report: dict) -> dict[str, float]:
    """``semantic_norm`` of each of ``paper_ids`` for the query ``text`` (empty when the index keeps no vectors).
    ``report["semantic"]`` says which model scored them, or why none could (its package missing, or not the
    model that made the vectors): the search then ranks without the signal and says so in a warning."""
    name = snap.stats.info.get("semantic_model") or None
    if name is None or not paper_ids:
        return {}
    try:
        encoder = embed.of_index(snap.stats.info)
    except ConfigError as exc:
        report["semantic"] = {"model": name, "used": False, "warning": f"ranked without the semantic signal: {exc}"}
        return {}
    query = encoder.encode([text])[0]
    rows = snap.rows("semantic: the candidates' vectors", VECTORS_SQL, {"paper_ids": json.dumps(list(paper_ids))})
    if not rows:
        report["semantic"] = {"model": name, "used": True, "vectors": 0}
        return {}
    rows = sorted(rows, key=lambda row: row[0])  # a shard's rows come in its own order
    try:
        vectors = embed.unpack([blob for _, blob in rows], encoder.dims)
    except ValueError as exc:
        raise lexical._damaged(snap, f"paper_vectors holds a row that is not a vector ({exc})") from None
    # In doubles: float32 products summed by BLAS round differently with a row's place in the matrix, so the same
    # paper's cosine moved with the order the rows were read in (a sharded index's differed from the file's).
    cosines = vectors.astype("float64") @ query.astype("float64")
    best = float(cosines.max())
    report["semantic"] = {"model": name, "used": True, "vectors": len(rows)}
    if best <= 0.0:
        return {}
    return {pid: float(c) / best for (pid, _), c in zip(rows, cosines.tolist(), strict=True)}
