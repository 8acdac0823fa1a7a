"""Fitting the learned ranking on judged queries: ``retrieval train --corpus FILE --queries FILE``.

For each judged query, under the evaluation's protocol and on its cached index (query papers removed for citation
recommendation; ``retrieval.eval.runner.prepare`` / ``open_index``), every candidate of the learned ranking gets
its features (``retrieval.eval.train.query_features``). A set's features are cached beside its evaluation index
(``features-<key>.npz``), named by the index's key, the feature list and the candidate settings. The fit, its
cross-validation and the model file are ``retrieval.eval.train``'s.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputError
from ..search.client import RetrievalClient
from ..search.learned import BASE_FEATURES, DEFAULT_CANDIDATES, beside
from ..search.query import Query
from ..text import DEFAULT_STEM, DEFAULT_STOPWORDS
from .cache import analysis, resolve_cache_dir
from .protocol import AUTO
from .runner import exclusions, open_index, prepare
from .train import (
    ROUNDS,
    Progress,
    QueryData,
    SetData,
    check_model_name,
    check_model_path,
    extraction_config,
    fit_and_save,
    query_features,
    with_derived,
)

FEATURES_FORMAT = "1"


def _features_key(index_key: str, candidates: dict = DEFAULT_CANDIDATES, protocol: str = "") -> str:
    doc = {"index": index_key, "features": BASE_FEATURES, "candidates": candidates, "format": FEATURES_FORMAT}
    if protocol:  # the time-honest protocol searches the citation protocol's index, with per-query exclusions
        doc["protocol"] = protocol
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32]


def extract(
    corpus: str | os.PathLike[str],
    queries: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    limit_queries: int | None = None,
    protocol: str = AUTO,
    progress: Progress | None = None,
    candidates: dict = DEFAULT_CANDIDATES,
    format: str | None = None,
    stem: str | None = DEFAULT_STEM,
    stopwords: str | None = DEFAULT_STOPWORDS,
) -> SetData:
    """Every judged query's candidates (``candidates``: the model's candidate settings) and features under the
    evaluation's protocol (cached; see the module), on an index analysed with ``stem`` and ``stopwords``.
    ``format``: the corpus file's (default: detected)."""
    prepared = prepare(Path(corpus), Path(queries), protocol, limit_queries, format=format)
    cached = open_index(prepared, resolve_cache_dir(cache_dir), progress, stem=stem, stopwords=stopwords)
    inputs = {k: {"file": v["file"], "sha256": v["sha256"]} for k, v in prepared.file_info().items()}
    name = set_name(corpus, queries)
    evalset = prepared.evalset
    clock = evalset.chronology
    key = _features_key(cached.path.stem, candidates, "time-honest" if clock is not None else "")
    store = cached.path.with_name(f"features-{key}-{limit_queries or 'all'}.npz")
    if store.is_file():
        data = np.load(store, allow_pickle=False)
        out = []
        for i, query in enumerate(evalset.queries):
            ids = [str(s) for s in data[f"ids{i}"]]
            out.append(QueryData(query.qid, ids, data[f"x{i}"], data[f"r{i}"], len(query.relevant)))
        return SetData(name, [with_derived(q) for q in out], inputs)
    cfg, depth = extraction_config(candidates)
    out = []
    with RetrievalClient(config=cfg, db=cached.path) as client:
        exclusion_of = exclusions(client, evalset)  # as the evaluation does: no newer paper under time-honest
        analyser = client.stats.analyser
        for done, query in enumerate(evalset.queries, start=1):
            parsed = Query.parse(query.text, analyser)
            out.append(query_features(client, cfg, parsed, depth, exclusion_of(query.qid), query.qid, query.relevant))
            if progress:
                progress("features", done, len(evalset.queries))
    arrays = {}
    for i, q in enumerate(out):
        arrays[f"ids{i}"], arrays[f"x{i}"], arrays[f"r{i}"] = np.array(q.ids, dtype=str), q.x, q.relevant
    tmp = store.with_name(f".{store.name}.tmp.npz")
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, store)
    return SetData(name, [with_derived(q) for q in out], inputs)


def set_name(corpus: str | os.PathLike[str], queries: str | os.PathLike[str]) -> str:
    """A set's name: the corpus's folder (or file stem), then what its queries file adds to ``queries-dev``
    (``hepth``, ``hepth-titles``)."""
    name = Path(corpus).resolve().parent.name or Path(corpus).stem
    stem = Path(queries).name.removesuffix(".jsonl")
    extra = stem.removeprefix("queries-dev").removeprefix("queries").strip("-_")
    return f"{name}-{extra}" if extra else name


def train(
    pairs: Sequence[tuple[str | os.PathLike[str], str | os.PathLike[str]]],
    out: str | os.PathLike[str],
    *,
    name: str = "ranker",
    cache_dir: str | os.PathLike[str] | None = None,
    limit_queries: int | None = None,
    protocol: str = AUTO,
    rounds: int = ROUNDS,
    progress: Progress | None = None,
    relations: Sequence[str] | None = None,
    format: str | None = None,
    stem: str | None = DEFAULT_STEM,
    stopwords: str | None = DEFAULT_STOPWORDS,
    jobs: int = 1,
) -> dict:
    """Fit the learned ranking on ``pairs`` of (corpus, judged queries), cross-validate it, and write the model
    to ``out``; returns the summary (the file's path and sha256, the cross-validation, the training figures).
    ``jobs``: worker processes that share the fits (``train.fit_many``; the model does not depend on it).
    ``relations``: the relations the candidates' expansion follows (default all four; the model file records
    them, and a search under the model follows them). ``format``: the corpus files' (default: detected);
    ``stem``, ``stopwords``: the evaluation indexes' analysis, as ``retrieval build`` takes it (its defaults too)."""
    if not pairs:
        raise ConfigError("give at least one --corpus and --queries pair to train on")
    check_model_name(name)
    check_model_path(Path(out))  # before the training, not after it
    candidates = dict(DEFAULT_CANDIDATES)
    if relations is not None:
        unknown = [r for r in relations if r not in DEFAULT_CANDIDATES["relations"]]
        if unknown or not relations:
            raise ConfigError(
                f"--relations {','.join(relations)!s}: give one or more of {', '.join(DEFAULT_CANDIDATES['relations'])}"
            )
        candidates["relations"] = [r for r in DEFAULT_CANDIDATES["relations"] if r in relations]
    sets = [extract(c, q, cache_dir=cache_dir, limit_queries=limit_queries, protocol=protocol, progress=progress,
                    candidates=candidates, format=format, stem=stem, stopwords=stopwords)
            for c, q in pairs]  # fmt: skip
    names = [s.name for s in sets]
    if len(set(names)) != len(names):
        for i, s in enumerate(sets):
            s.name = f"{s.name}#{i + 1}"
    for s in sets:
        if not s.queries:
            raise InputError(f"no judged query of {s.inputs['queries']['file']} can be evaluated: nothing to fit")
    fitted = {"limit_queries": limit_queries, "analysis": analysis(stem, stopwords)}
    training = [{"name": s.name, **s.inputs, "queries_used": len(s.queries)} for s in sets]
    return fit_and_save(
        sets, out, name=name, rounds=rounds, candidates=candidates, fitted=fitted, training=training, jobs=jobs
    )


def model_for_index(db: str | os.PathLike[str]) -> Path:
    """Where ``retrieval train --db INDEX`` writes: beside the index (``<index>.ranker.json``)."""
    return beside(Path(db))


__all__ = ["FEATURES_FORMAT", "extract", "model_for_index", "set_name", "train"]
