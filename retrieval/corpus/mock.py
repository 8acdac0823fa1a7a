"""The built-in demo corpus and its two mock API clients.

``build_corpus()`` returns 100 papers ``p001`` ... ``p100``: five topics of twenty, with templated titles and
abstracts, deterministic years (2018-2025) and authors. From the third paper of a topic onward, every paper
cites the topic's first two papers; each topic's sixth paper also cites the first paper of the next topic
(the last topic wraps round to the first). ``references`` and ``citations`` agree with each other.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..text import tokenise
from .paper import Paper

TOPICS: tuple[tuple[str, str], ...] = (
    ("attention sparsity", "attention sparsity head pruning routing block"),
    ("retrieval augmentation", "retrieval augmentation embedding index passage"),
    ("low rank adapters", "low rank adapter parameter fine tuning"),
    ("dataset distillation", "dataset distillation synthetic compact training"),
    ("evaluation harnesses", "evaluation harness benchmark task accuracy"),
)
PAPERS_PER_TOPIC = 20


def _pid(topic: int, i: int) -> str:
    return f"p{topic * PAPERS_PER_TOPIC + i + 1:03d}"


def build_corpus() -> list[Paper]:
    """The 100-paper demo corpus, identical on every call."""
    papers: list[Paper] = []
    for t, (label, terms) in enumerate(TOPICS):
        for i in range(PAPERS_PER_TOPIC):
            papers.append(
                Paper(
                    id=_pid(t, i),
                    title=f"{label.title()} study {i + 1}",
                    abstract=(
                        f"This work investigates {label} and reports on {terms}. "
                        "We measure perplexity, accuracy, and wall time on small transformer baselines. "
                        f"The study {i + 1} extends prior findings in topic {t + 1}."
                    ),
                    year=2018 + i % 8,
                    authors=[f"Author {t + 1}-{i + 1}", f"Coauthor {t + 1}-{i + 1}"],
                    source="mock",
                )
            )
    by_id = {p.id: p for p in papers}
    for t in range(len(TOPICS)):
        for i in range(PAPERS_PER_TOPIC):
            paper = by_id[_pid(t, i)]
            cited: list[str] = []
            if i >= 2:
                cited += [_pid(t, 0), _pid(t, 1)]
            if i == 5:
                cited.append(_pid((t + 1) % len(TOPICS), 0))
            for target in cited:
                paper.references.append(target)
                by_id[target].citations.append(paper.id)
    return papers


class _MockClient:
    _source = "mock"

    def __init__(self, corpus: list[Paper] | None = None) -> None:
        self._papers = {p.id: p for p in (corpus if corpus is not None else build_corpus())}

    def _view(self, paper: Paper) -> Paper:  # pragma: no cover - overridden
        raise NotImplementedError

    def fetch(self, paper_id: str) -> Paper | None:
        """One paper by id, or None."""
        paper = self._papers.get(paper_id)
        return None if paper is None else self._view(paper)

    def papers(self) -> Iterator[Paper]:
        """Every paper the client serves, in id order."""
        for paper_id in sorted(self._papers):
            yield self._view(self._papers[paper_id])

    def search(self, query: str) -> list[Paper]:
        """Papers sharing at least one token with ``query``, in id order (the mock API's naive search)."""
        terms = set(tokenise(query))
        return [p for p in self.papers() if terms & set(tokenise(p.text))]


class ArxivMockClient(_MockClient):
    """Serves title, abstract, year and authors; no citation data."""

    _source = "arxiv"

    def _view(self, paper: Paper) -> Paper:
        return Paper(paper.id, paper.title, paper.abstract, paper.year, list(paper.authors), source=self._source)


class SemanticScholarMockClient(_MockClient):
    """Serves everything arXiv does plus references and citations."""

    _source = "s2"

    def _view(self, paper: Paper) -> Paper:
        return Paper(
            paper.id,
            paper.title,
            paper.abstract,
            paper.year,
            list(paper.authors),
            list(paper.references),
            list(paper.citations),
            source=self._source,
        )


def merge_records(arxiv: Paper | None, s2: Paper | None) -> Paper:
    """One paper from the two clients' records of it, field by field, noting which source supplied each.

    - title, abstract, authors: arXiv's (the authors' own text and full author list), else Semantic Scholar's
      when arXiv has none;
    - year: the earlier of the two (the paper's first public appearance, which is what recency measures);
    - references, citations: Semantic Scholar's (arXiv serves no citation data).
    """
    if arxiv is None and s2 is None:
        raise ValueError("merge_records needs at least one record")
    sources: dict[str, str] = {}

    def pick(field: str, first: Paper | None, first_name: str, second: Paper | None, second_name: str):
        for record, name in ((first, first_name), (second, second_name)):
            value = getattr(record, field) if record is not None else None
            if value:
                sources[field] = name
                return value
        return type(getattr(arxiv or s2, field))()

    title = pick("title", arxiv, "arxiv", s2, "s2")
    abstract = pick("abstract", arxiv, "arxiv", s2, "s2")
    authors = list(pick("authors", arxiv, "arxiv", s2, "s2"))
    years = [(r.year, name) for r, name in ((arxiv, "arxiv"), (s2, "s2")) if r is not None and r.year is not None]
    year = None
    if years:
        year, sources["year"] = min(years)
    references = list(s2.references) if s2 is not None else []
    citations = list(s2.citations) if s2 is not None else []
    if s2 is not None:
        sources["references"] = sources["citations"] = "s2"
    pid = (arxiv or s2).id
    origin = "+".join(name for record, name in ((arxiv, "arxiv"), (s2, "s2")) if record is not None)
    return Paper(pid, title, abstract, year, authors, references, citations, origin, field_sources=sources)


def merge_clients(arxiv: ArxivMockClient, s2: SemanticScholarMockClient) -> list[Paper]:
    """Union the two clients' records by id (``merge_records`` says which field comes from where), in id order."""
    a = {p.id: p for p in arxiv.papers()}
    s = {p.id: p for p in s2.papers()}
    return [merge_records(a.get(pid), s.get(pid)) for pid in sorted(a.keys() | s.keys())]
