"""Fitting the learned ranking on an index's own citations, with no judged queries (``retrieval train --own``).

Citation recommendation asks, of a paper's title and abstract, for the papers it cites. Every paper of an index
that cites at least ``MIN_REFERENCES`` papers of the same index is such a query, with those references as its
relevant papers: judgments the corpus already holds. The sample is ``SAMPLE`` of them, the first by the sha256 of
their ids (deterministic, and spread over the corpus's years and topics as the hash spreads them), each asked in
the two forms the development sets hold: its title and abstract, and its title alone.

Leave-one-out. A query paper must not find itself, nor have its reference list read off the graph: each query
runs with its own paper excluded (``retrieval.search.cutoff.Exclusion``, as the time-honest protocol excludes
newer papers): gone from the BM25 list, the candidates, the seeds' vote and every count its citations enter (the
in-degrees, the evidence). The BM25 statistics (N, avgdl, df) keep it: they are corpus statistics, and
recomputing them per query would take an index per query.

The fit is ``retrieval.eval.train``'s (coordinate ascent on mean nDCG@10 from its starts), over the shipped
model's candidates (what a default search ranks), cross-validated 5-fold over the sampled papers (a paper's two
forms in one fold), and the model file records the index it was fitted on, the sample and the folds' figures.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, InputError
from ..search import cutoff
from ..search.client import RetrievalClient
from ..search.papers import CITING_PAPERS_SQL, PAPERS_SQL, REFERENCES_SQL
from ..search.query import Query
from ..store.database import shown
from ..workers import context, follow_parent
from .cache import analysis

#: Papers sampled as queries, and the fewest references in the index a paper needs to be one (the ml-arxiv
#: development set's rule; hep-th's asks 5).
SAMPLE = 400
MIN_REFERENCES = 3
#: Fewer sampled papers than this cannot be cross-validated five ways and fitted with any confidence.
FEWEST = 20

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class OwnQuery:
    """A paper of the index as a judged query: its id, title, abstract and references in the index."""

    paper_id: str
    title: str
    abstract: str
    references: frozenset[str]

    def forms(self) -> list[tuple[str, str]]:
        """The query's texts: ``("abstract", title. abstract)`` where it has an abstract, and ``("title", title)``."""
        out = []
        if self.abstract.strip():
            out.append(("abstract", f"{self.title}. {self.abstract}"))
        if self.title.strip():
            out.append(("title", self.title))
        return out


def sample_key(paper_id: str) -> str:
    """The order the sample is drawn in: the sha256 of the paper's id."""
    return hashlib.sha256(paper_id.encode("utf-8")).hexdigest()


def own_queries(client: RetrievalClient, sample: int = SAMPLE, min_references: int = MIN_REFERENCES) -> list[OwnQuery]:
    """``sample`` papers of ``client``'s index that cite at least ``min_references`` of its papers, the first by
    ``sample_key``, in that order, with their texts and references (one snapshot)."""
    with client.snapshot() as snap:
        pool = [pid for pid, _ in snap.rows("own citations: papers citing enough of the index", CITING_PAPERS_SQL,
                                            {"min_references": min_references})]  # fmt: skip
        chosen = sorted(pool, key=sample_key)[:sample]
        ids = {"paper_ids": json.dumps(chosen)}
        texts = {pid: (title, abstract) for pid, title, abstract, _, _ in snap.rows("own citations: the papers",
                                                                                    PAPERS_SQL, ids)}  # fmt: skip
        papers = set(cutoff.doc_ids(snap))
        refs: dict[str, set[str]] = {pid: set() for pid in chosen}
        for citing, cited in snap.rows("own citations: their references", REFERENCES_SQL, ids):
            if cited in papers:
                refs[citing].add(cited)
    return [OwnQuery(pid, texts[pid][0], texts[pid][1], frozenset(refs[pid])) for pid in chosen]


def shipped_candidates() -> dict:
    """The candidate settings of the shipped model: the candidates a default search ranks, and so those an own
    model is fitted over (references and citing papers; co-citation and coupling would cost most of a search)."""
    from ..search.learned import SHIPPED_MODEL, load_cached

    return dict(load_cached(SHIPPED_MODEL).candidates)


#: Papers a worker of a parallel extraction takes at a time, and the fewest papers worth starting workers for.
CHUNK_PAPERS = 10
PARALLEL_MIN_PAPERS = 40


def extract_own(
    client: RetrievalClient,
    queries: list[OwnQuery],
    progress: Progress | None = None,
    candidates: dict | None = None,
    jobs: int = 1,
) -> tuple:
    """The candidates (``candidates``' settings, default ``shipped_candidates()``) and features of every query in
    ``queries`` (its paper excluded from its own search), as two sets: the title-and-abstract forms and the title
    forms. ``jobs`` worker processes share the papers (fewer than ``PARALLEL_MIN_PAPERS`` run in this process);
    the sets are the same either way, in ``queries``' order."""
    from .train import SetData  # NumPy: training only

    candidates = candidates or shipped_candidates()
    if jobs > 1 and len(queries) >= PARALLEL_MIN_PAPERS:
        rows = _extract_in_workers(client.path, queries, candidates, jobs, progress)
    else:
        rows = _Extractor(client, candidates).rows(queries, progress)
    forms: dict[str, list] = {"abstract": [], "title": []}
    for form, data in rows:
        forms[form].append(data)
    inputs = {"index": {"file": str(shown(client.path))}}
    return (SetData("own-abstracts", forms["abstract"], inputs), SetData("own-titles", forms["title"], inputs))


class _Extractor:
    """A query's candidates and features on one client: the extraction's settings and the index's doc ids, read
    once."""

    def __init__(self, client: RetrievalClient, candidates: dict) -> None:
        from .train import extraction_config

        self.client = client
        self.cfg, self.depth = extraction_config(candidates)
        with client.snapshot() as snap:
            self.doc_ids, self.n_papers = cutoff.doc_ids(snap), snap.stats.n_papers
        self.analyser = client.stats.analyser

    def rows(self, queries: list[OwnQuery], progress: Progress | None = None) -> list[tuple[str, object]]:
        """(form, ``QueryData``) of each form of each paper of ``queries``, in order."""
        from .train import query_features, with_derived

        out = []
        for done, own in enumerate(queries, start=1):
            exclusion = cutoff.Exclusion.make({own.paper_id}, self.doc_ids, self.n_papers)
            for form, text in own.forms():
                parsed = Query.parse(text, self.analyser)
                data = query_features(
                    self.client, self.cfg, parsed, self.depth, exclusion, own.paper_id, own.references
                )
                out.append((form, with_derived(data)))
            if progress:
                progress("own citations", done, len(queries))
        return out


#: In a worker process of ``_extract_in_workers``: its extractor and the papers its tasks name by position.
_WORKER: tuple | None = None


def _start_worker(db, queries: list[OwnQuery], candidates: dict, parent: int) -> None:
    global _WORKER
    follow_parent(parent)
    _WORKER = (_Extractor(RetrievalClient(db), candidates), queries)


def _extract_slice(bounds: tuple[int, int]) -> tuple[int, int, list]:
    extractor, queries = _WORKER
    start, end = bounds
    return start, end - start, extractor.rows(queries[start:end])


def _extract_in_workers(db, queries, candidates, jobs, progress) -> list:
    """``_Extractor.rows`` of ``queries`` in ``jobs`` worker processes, ``CHUNK_PAPERS`` papers a task, in order."""
    slices = [(start, min(start + CHUNK_PAPERS, len(queries))) for start in range(0, len(queries), CHUNK_PAPERS)]
    parts: dict[int, list] = {}
    done = 0
    with context().Pool(jobs, initializer=_start_worker, initargs=(db, queries, candidates, os.getpid())) as pool:
        for start, papers, rows in pool.imap_unordered(_extract_slice, slices):
            parts[start] = rows
            done += papers
            if progress:
                progress("own citations", done, len(queries))
    return [row for start in sorted(parts) for row in parts[start]]


def train_own(
    db: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    name: str = "ranker",
    sample: int = SAMPLE,
    min_references: int = MIN_REFERENCES,
    rounds: int | None = None,
    progress: Progress | None = None,
    folds: bool = True,
    jobs: int = 1,
) -> dict:
    """Fit the learned ranking on the own citations of the index at ``db`` (see the module), cross-validate it
    5-fold over the sampled papers (unless ``folds`` is false: the evaluation, which measures the model on its
    own held-out queries, skips the folds' five extra fits), and write the model to ``out``; returns the summary,
    as ``retrieval.eval.judged.train`` does. ``rounds``: coordinate ascent's most (default ``train.ROUNDS``); ``jobs``:
    worker processes for the searches (``extract_own``) and the fits (``train.fit_many``)."""
    from .train import ROUNDS, check_model_name, check_model_path, fit_and_save

    check_model_name(name)
    check_model_path(Path(out))
    if sample < FEWEST:
        raise ConfigError(f"--sample {sample}: sample at least {FEWEST} papers to fit and cross-validate on")
    if min_references < 1:
        raise ConfigError(f"--min-references {min_references}: give 1 or more")
    with RetrievalClient(db) as client:
        queries = own_queries(client, sample, min_references)
        if len(queries) < FEWEST:
            fewer = "--min-references 1, or " if min_references > 1 else ""
            raise InputError(
                f"{shown(client.path)} has {len(queries)} paper{'' if len(queries) == 1 else 's'} citing at least "
                f"{min_references} of its papers: fitting on its own citations needs {FEWEST} or more (try {fewer}"
                "training on judged queries with --corpus and --queries)"
            )
        candidates = shipped_candidates()
        sets = extract_own(client, queries, progress, candidates, jobs)
        origin = {
            "kind": "own citations",
            "index": client.path.name if isinstance(client.path, Path) else str(shown(client.path)),
            "papers_in_index": client.stats.n_papers,
            "sample": sample,
            "min_references": min_references,
            "papers_sampled": len(queries),
            "sampled_by": "sha256 of the paper id, smallest first",
        }
        analyser = client.stats.analyser
        fitted = {"analysis": analysis(analyser.stem, analyser.stopwords)}
    sets = [s for s in sets if s.queries]
    return fit_and_save(
        sets, out, name=name, rounds=rounds or ROUNDS, candidates=candidates, fitted=fitted, origin=origin,
        folds=folds, jobs=jobs,
    )  # fmt: skip


__all__ = [
    "MIN_REFERENCES", "SAMPLE", "OwnQuery", "extract_own", "own_queries", "sample_key", "shipped_candidates",
    "train_own",
]  # fmt: skip
