"""The learned ranking's evaluation modes: ``learned`` (the shipped model, ``retrieval/models/ranker-v3.json``)
and ``learned-cv`` (each development set ranked by the model fitted on the other corpora's sets, as the shipped
file records its hold-one-corpus-out folds; ``retrieval.eval.train``), and ``auto`` (the default ranking, with
the ``learned-cv`` fold where it picks the learned model); ``learned-own`` and ``auto-own``, the same under the
model ``retrieval train --own`` fits on the evaluation index's own citations (``retrieval.eval.own``: the query
papers are not in that index, so no query is trained on), fitted once per index before any query is timed and
kept beside it.

Both rank the shared BM25 list's candidates through ``RetrievalClient.rank`` under ``ranking="learned"``, as a
search does. ``learned-cv`` finds its fold by the sha256 of the corpus file the evaluation index was built from
(the cache's manifest beside the index); on a corpus the shipped model was not trained on, it is the shipped
model itself, which is held out there already.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from ..config import RetrievalConfig
from ..digest import file_sha256
from ..errors import ConfigError
from ..search.client import RetrievalClient
from ..search.learned import (
    FEATURES,
    MODEL_VERSION,
    SHIPPED_MODEL,
    RankerModel,
    load_cached,
)
from .own import FEWEST, MIN_REFERENCES, SAMPLE, own_queries, shipped_candidates, train_own
from .records import LexicalPass, ModeOutput


def _shipped_sha() -> str:
    try:
        return file_sha256(SHIPPED_MODEL)[:12]
    except OSError:  # pragma: no cover - a broken installation
        return "missing"


def _corpus_sha(client: RetrievalClient) -> str | None:
    """The sha256 of the corpus the evaluation index at ``client.path`` was built from (its cache manifest)."""
    sidecar = Path(client.path).with_suffix(".json")
    try:
        return json.loads(sidecar.read_text(encoding="utf-8"))["corpus"]["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def held_out_model(model: RankerModel, corpus_sha256: str | None) -> RankerModel:
    """The fold of ``model``'s hold-one-corpus-out cross-validation that held out the corpus ``corpus_sha256``; for
    a corpus the model was not trained on, the model itself (it is held out there already)."""
    folds = model.meta.get("cross_validation", {}).get("folds", [])
    for fold in folds:
        inputs = fold.get("held_out_inputs") or {}
        if corpus_sha256 is not None and inputs.get("corpus", {}).get("sha256") == corpus_sha256:
            return RankerModel(model.features, fold["weights"], fold["scales"],
                               name=f"{model.name}-cv-{fold['held_out']}", candidates=model.candidates)  # fmt: skip
    trained = {s.get("corpus", {}).get("sha256") for s in model.meta.get("training_sets", [])}
    if corpus_sha256 is None or corpus_sha256 not in trained:
        return model
    sets = ", ".join(f.get("held_out", "?") for f in folds) or "none"
    raise ConfigError(
        f"the model {model.name} was trained on this corpus but has no fold that held it out (held out: {sets}): "
        "refit it with `retrieval train` on several sets"
    )


@dataclass(frozen=True)
class LearnedMode:
    """The learned ranking under the shipped model (``cv=False``) or its held-out fold (``cv=True``); with
    ``ranking="auto"``, the default ranking under that model."""

    name: str
    description: str
    cv: bool = False
    hops: int | None = 1
    ranking: str = "learned"
    #: the model fitted on the index's own citations (``own_model``) rather than the shipped one
    own: bool = False

    @property
    def honours_exclusion(self) -> bool:
        """Whether a time-honest exclusion applies: the expansion, the vote and the in-degrees leave it out
        (``retrieval.search.cutoff``); a model fitted on the index's own citations has seen papers of every year."""
        return not self.own

    def model(self, client: RetrievalClient) -> RankerModel:
        if self.own and own_model_path(Path(client.path)).is_file():
            return load_cached(own_model_path(Path(client.path)))
        shipped = load_cached(SHIPPED_MODEL)  # an own mode on an index too thin to fit on: as learned-cv
        return held_out_model(shipped, _corpus_sha(client)) if self.cv or self.own else shipped

    def prepare(self, index: Path, progress=None, jobs: int = 1) -> None:
        """Fit the model on the evaluation index's own citations, once (kept beside the index), its searches in
        ``jobs`` worker processes."""
        if self.own:
            own_model(index, progress, jobs)

    def run(self, client: RetrievalClient, query: LexicalPass, config: RetrievalConfig, depth: int) -> ModeOutput:
        cfg = RetrievalConfig(ranking=self.ranking, model=self.model(client))
        exclude = getattr(query, "exclusion", None)
        result = client.rank(query.query, query.bm25, cfg, limit=None, full=False, memo=query.memo, exclude=exclude)
        ranking = [r.paper.id for r in result.ranked[:depth]]
        distances = {r.paper.id: r.graph_distance for r in result.ranked if r.graph_distance is not None}
        fired = result.expansion.get("gate", {}).get("fired", True)  # the policy's gate, where auto chose it
        return ModeOutput(ranking, result.hit_count, distances, result.expansion.get("candidates_added"), fired)


@functools.lru_cache(maxsize=64)  # asked on every query a mode ranks
def own_model_path(index: Path) -> Path:
    """Where the evaluation index ``index``'s own-citations model is kept: beside it, named by what makes it (the
    features, the candidates, the sample) so that a change of any fits it again."""
    doc = {"features": list(FEATURES), "candidates": shipped_candidates(), "sample": SAMPLE,
           "min_references": MIN_REFERENCES, "version": MODEL_VERSION}  # fmt: skip
    key = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
    return index.with_name(f"{index.stem}.own-{key}.ranker.json")


def own_model(index: Path, progress=None, jobs: int = 1) -> Path | None:
    """The own-citations model of the evaluation index ``index``, fitted first where it is not kept yet; None
    where the index has too few papers citing enough of it to fit on (``retrieval.eval.own.FEWEST``)."""
    path = own_model_path(index)
    if not path.is_file():
        with RetrievalClient(index) as client:
            if len(own_queries(client, FEWEST, MIN_REFERENCES)) < FEWEST:
                return None
        train_own(index, path, name="own", progress=progress, folds=False, jobs=jobs)
    return path


def learned_modes() -> dict[str, LearnedMode]:
    sha = _shipped_sha()
    stem = SHIPPED_MODEL.stem
    return {
        "learned": LearnedMode("learned", f"learned linear blend, shipped model {stem} (sha256 {sha})"),
        "learned-cv": LearnedMode(
            "learned-cv", f"learned blend fitted on the other development sets ({stem} {sha} folds)", cv=True
        ),
        "auto": LearnedMode(
            "auto",
            f"the default: learned-cv ({stem} {sha} folds), the policy where the BM25 list's papers are "
            "cited < 1.5 times on average; its top 100 re-ranked by co-citation with its top 10 (w_cocited 0.3)",
            cv=True,
            ranking="auto",
        ),  # fmt: skip
        "learned-own": LearnedMode(
            "learned-own",
            "learned blend fitted on the evaluation index's own citations (retrieval train --own; learned-cv's "
            f"model where fewer than {FEWEST} of its papers cite {MIN_REFERENCES} of its papers)",
            own=True,
        ),  # fmt: skip
        "auto-own": LearnedMode(
            "auto-own",
            "the default ranking under the model fitted on the index's own citations (learned-own's), the policy "
            "where the BM25 list's papers are cited < 1.5 times on average, then the co-citation feedback",
            own=True,
            ranking="auto",
        ),  # fmt: skip
    }


__all__ = ["LearnedMode", "held_out_model", "learned_modes", "own_model", "own_model_path"]
