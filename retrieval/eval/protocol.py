"""The evaluation protocol: which papers the evaluation index leaves out, and what each query counts as relevant.

Two kinds of query file:

- ``citation`` (citation recommendation, e.g. hepth, ml-arxiv): each ``qid`` is a paper of the corpus and the
  query is that paper's own title and abstract. Every query paper of the file is removed from the index the
  run searches: its node, its references, and every mention of it in the remaining papers' references and
  citing-paper lists, so that no citation row mentions it. Removed papers are dropped from every relevant list.
- ``judged`` (human relevance judgments, e.g. CACM): qids are not papers; nothing is removed.
- ``time-honest``: ``citation``, and per query every paper newer than the query paper is left out of what it
  searches and of its relevant list (``retrieval.eval.timehonest``; never chosen by ``auto``).

``auto`` picks ``citation`` when every query is a paper query (its qid is a corpus id and its text starts with
that paper's title, compared token by token) and ``judged`` when none is. Checking the title matters: CACM's
qids ``"1"``, ``"12"``, ... are also paper ids of that corpus.

All query papers of the *file* are removed, whether or not ``--limit-queries`` runs them all, so that one cached
index serves every run on the same (corpus, query file) and a short run measures a subset of the full one.

Relevant ids that are not in the corpus, or that were removed, are dropped and counted; a query left with no
relevant paper is skipped and listed with its reason, never scored as a silent zero.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..corpus.jsonl import read_papers
from ..corpus.paper import Paper
from ..errors import ConfigError, InputError
from ..text import tokenise
from .queries import Query
from .timehonest import Chronology

AUTO = "auto"
CITATION = "citation"
JUDGED = "judged"
TIME_HONEST = "time-honest"
PROTOCOLS = (AUTO, CITATION, JUDGED, TIME_HONEST)


@dataclass(frozen=True)
class CorpusScan:
    """What one pass over the corpus file tells the protocol, before any index exists."""

    n_papers: int
    ids: frozenset[str]
    #: titles of the corpus papers whose id is also a qid
    qid_titles: dict[str, str]
    #: years of the same papers (the query's year, for query-year recency)
    qid_years: dict[str, int | None]
    #: every distinct (citing, cited) pair a record declares (in ``references`` or ``citations``) that involves a
    #: qid, self-citations left out
    qid_edges: frozenset[tuple[str, str]]
    #: every paper's year (the time-honest protocol's clock, where no dates file gives days)
    years: dict[str, int | None] = field(default_factory=dict)

    def edges_touching(self, removed: frozenset[str]) -> int:
        """Distinct citation edges, both ends in the corpus, with at least one end in ``removed``."""
        return sum(
            1
            for citing, cited in self.qid_edges
            if (citing in removed or cited in removed) and citing in self.ids and cited in self.ids
        )


def scan_corpus(path: Path, qids: set[str], format: str | None = None) -> CorpusScan:
    """Read the corpus once (in ``format``, or any format ``read_papers`` detects; ``InputError`` with
    ``file:line`` on a bad record) and gather the above."""
    ids: set[str] = set()
    titles: dict[str, str] = {}
    years: dict[str, int | None] = {}
    edges: set[tuple[str, str]] = set()
    every_year: dict[str, int | None] = {}
    for _, paper in read_papers(path, format):
        ids.add(paper.id)
        every_year[paper.id] = paper.year
        if paper.id in qids:
            titles[paper.id] = paper.title
            years[paper.id] = paper.year
        declared = [(paper.id, ref) for ref in paper.references] + [(cit, paper.id) for cit in paper.citations]
        edges.update(
            (citing, cited) for citing, cited in declared if citing != cited and (citing in qids or cited in qids)
        )
    if not ids:
        raise InputError(f"the corpus {path} holds no papers: give a JSONL file of papers with --corpus")
    return CorpusScan(
        n_papers=len(ids),
        ids=frozenset(ids),
        qid_titles=titles,
        qid_years=years,
        qid_edges=frozenset(edges),
        years=every_year,
    )


def is_paper_query(query: Query, scan: CorpusScan) -> bool:
    """True when the query's qid is a corpus paper and its text starts with that paper's title."""
    title = scan.qid_titles.get(query.qid)
    if title is None:
        return False
    title_tokens = tokenise(title)
    return bool(title_tokens) and tokenise(query.text)[: len(title_tokens)] == title_tokens


def decide_protocol(requested: str, queries: list[Query], scan: CorpusScan, source: str) -> str:
    """``citation`` or ``judged`` for ``requested`` in ``PROTOCOLS`` (see the module docstring for ``auto``)."""
    if requested not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {requested!r}: choose one of {', '.join(PROTOCOLS)}")
    if requested == JUDGED:
        return JUDGED
    if requested in (CITATION, TIME_HONEST):
        missing = [q for q in queries if q.qid not in scan.ids]
        if missing:
            first = ", ".join(f"{source}:{q.line} ({q.qid!r})" for q in missing[:3])
            raise InputError(
                f"--protocol {requested} needs every qid to be a paper of the corpus, but {len(missing)} are not "
                f"(first: {first}): check that the query file belongs to this corpus, or use --protocol judged"
            )
        return requested
    paper_queries = [q for q in queries if is_paper_query(q, scan)]
    if len(paper_queries) == len(queries):
        return CITATION
    if not paper_queries:
        return JUDGED
    other = next(q for q in queries if not is_paper_query(q, scan))
    raise InputError(
        f"{source}: {len(paper_queries)} of {len(queries)} queries are corpus papers (qid is a paper id and the "
        f"text starts with its title) and the others are not (e.g. line {other.line}, qid {other.qid!r}): "
        "say which protocol applies with --protocol citation (remove every query paper) or --protocol judged"
    )


@dataclass(frozen=True)
class EvalQuery:
    """A query that will be evaluated: its text and its relevant papers after the protocol's drops."""

    qid: str
    text: str
    relevant: frozenset[str]
    line: int
    #: the query paper's year (citation recommendation), for query-year recency
    year: int | None = None


@dataclass(frozen=True)
class Skipped:
    """A query of the file that is not evaluated, and why."""

    qid: str
    line: int
    reason: str

    def to_dict(self) -> dict:
        return {"qid": self.qid, "line": self.line, "reason": self.reason}


@dataclass
class EvalSet:
    """The protocol applied to a (corpus, query file): what is removed, evaluated, skipped, and the counts."""

    kind: str
    removed: frozenset[str]
    queries: list[EvalQuery]
    skipped: list[Skipped]
    queries_in_file: int
    evaluable: int
    corpus_papers: int
    edges_removed: int
    relevant_in_file: int
    relevant_duplicates: int
    relevant_not_in_corpus: int
    relevant_removed: int
    limit: int | None = None
    #: the time-honest protocol's clock (None for the others), the relevant entries it dropped as newer than
    #: their query paper, and the dates file it read (its name only)
    chronology: Chronology | None = None
    relevant_newer: int = 0
    dates_file: str | None = None
    #: what the evaluation's reader should know of the protocol's result (``PAPER_QUERIES_WARNING``)
    warnings: list[str] = field(default_factory=list)

    @property
    def index_papers(self) -> int:
        return self.corpus_papers - len(self.removed)

    @property
    def mean_relevant(self) -> float:
        return sum(len(q.relevant) for q in self.queries) / len(self.queries)

    @property
    def base_rate(self) -> float:
        """Mean |Rel| over the papers of the evaluation index: the precision of a paper drawn at random."""
        return self.mean_relevant / self.index_papers if self.index_papers else 0.0

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "queries_in_file": self.queries_in_file,
            "queries_skipped": len(self.skipped),
            "queries_evaluable": self.evaluable,
            "queries_evaluated": len(self.queries),
            "limit_queries": self.limit,
            "corpus_papers": self.corpus_papers,
            "query_papers_removed": len(self.removed),
            "citation_edges_removed": self.edges_removed,
            "index_papers": self.index_papers,
            "relevant_ids_in_file": self.relevant_in_file,
            "relevant_duplicates_dropped": self.relevant_duplicates,
            "relevant_not_in_corpus_dropped": self.relevant_not_in_corpus,
            "relevant_removed_query_papers_dropped": self.relevant_removed,
            "mean_relevant": self.mean_relevant,
            "base_rate": self.base_rate,
            "skipped": [s.to_dict() for s in self.skipped],
            "warnings": list(self.warnings),
            **(
                {
                    "dates_file": self.dates_file,
                    "papers_with_a_date": self.chronology.by_day,
                    "relevant_newer_than_query_dropped": self.relevant_newer,
                }
                if self.chronology is not None
                else {}
            ),
        }


#: Said when the citation protocols (asked for by name) find no query whose text starts with its paper's title.
PAPER_QUERIES_WARNING = (
    "no query's text starts with its query paper's title, as a citation set's do: if these are judged queries "
    "whose numbers happen to be paper ids, the {removed:,} papers removed by --protocol {kind} were real "
    "candidates and the figures are not the judged set's; use --protocol judged (or auto)"
)


def apply_protocol(
    queries: list[Query],
    scan: CorpusScan,
    kind: str,
    source: str,
    limit: int | None = None,
    chronology: Chronology | None = None,
    dates_file: str | None = None,
) -> EvalSet:
    """Drop what the protocol drops, skip what cannot be scored, keep the first ``limit`` evaluable queries.
    ``time-honest`` takes the ``chronology`` (from ``scan.years`` when not given)."""
    if kind == TIME_HONEST and chronology is None:
        chronology = Chronology(scan.years)
    if kind != TIME_HONEST:
        chronology = None
    removed = frozenset(q.qid for q in queries) & scan.ids if kind in (CITATION, TIME_HONEST) else frozenset()
    edges_removed = scan.edges_touching(removed)
    evaluable: list[EvalQuery] = []
    skipped: list[Skipped] = []
    duplicates = not_in_corpus = dropped_removed = total = newer_dropped = 0
    for q in queries:
        total += len(q.relevant)
        unique = dict.fromkeys(q.relevant)
        duplicates += len(q.relevant) - len(unique)
        absent = [r for r in unique if r not in scan.ids]
        gone = [r for r in unique if r in removed]
        not_in_corpus += len(absent)
        dropped_removed += len(gone)
        relevant = frozenset(unique) - set(absent) - removed
        newer = {r for r in relevant if chronology.is_newer(r, q.qid)} if chronology is not None else set()
        newer_dropped += len(newer)
        relevant -= newer
        if relevant:
            year = scan.qid_years.get(q.qid) if kind in (CITATION, TIME_HONEST) else None
            evaluable.append(EvalQuery(q.qid, q.text, relevant, q.line, year))
        elif not unique:
            skipped.append(Skipped(q.qid, q.line, "empty relevant list in the query file"))
        elif len(absent) == len(unique):
            skipped.append(Skipped(q.qid, q.line, "none of its relevant ids is a paper of the corpus"))
        elif newer:
            skipped.append(Skipped(q.qid, q.line, "every relevant paper is newer than the query paper (time-honest)"))
        elif not absent:
            skipped.append(Skipped(q.qid, q.line, "every relevant paper is a query paper, removed by the protocol"))
        else:
            skipped.append(
                Skipped(q.qid, q.line, "its relevant ids are either not in the corpus or removed query papers")
            )
    titled = kind not in (CITATION, TIME_HONEST) or any(is_paper_query(q, scan) for q in queries)
    if not evaluable:
        if not titled:
            # Judged queries numbered 1, 2, ... read as paper ids when the corpus numbers its papers the same way.
            hint = (
                "its qids are paper ids of the corpus, but no query's text starts with its paper's title as a "
                "citation set's do: for judged queries whose numbers happen to be paper ids, use --protocol judged "
                "(or auto)"
            )
        elif not_in_corpus:
            hint = "check that the query file belongs to this corpus"
        else:
            hint = "give queries with at least one relevant paper that is not itself a query"
        reasons = Counter(s.reason for s in skipped).most_common(1)
        why = f" (most: {reasons[0][0]})" if reasons else ""
        raise InputError(f"{source}: none of its {len(queries)} queries has a relevant paper left{why}: {hint}")
    selected = evaluable[:limit] if limit is not None else evaluable
    return EvalSet(
        kind=kind,
        removed=removed,
        queries=selected,
        skipped=skipped,
        queries_in_file=len(queries),
        evaluable=len(evaluable),
        corpus_papers=scan.n_papers,
        edges_removed=edges_removed,
        relevant_in_file=total,
        relevant_duplicates=duplicates,
        relevant_not_in_corpus=not_in_corpus,
        relevant_removed=dropped_removed,
        limit=limit,
        chronology=chronology,
        relevant_newer=newer_dropped,
        dates_file=dates_file,
        warnings=[] if titled else [PAPER_QUERIES_WARNING.format(removed=len(removed), kind=kind)],
    )


def index_papers(path: Path, removed: frozenset[str], format: str | None = None) -> Iterator[Paper]:
    """The corpus as the evaluation index holds it: removed papers left out, and every mention of one in the
    others' ``references`` (papers cited) and ``citations`` (papers citing) stripped."""
    for _, paper in read_papers(path, format):
        if paper.id in removed:
            continue
        if removed:
            paper.references = [ref for ref in paper.references if ref not in removed]
            paper.citations = [cit for cit in paper.citations if cit not in removed]
        yield paper
