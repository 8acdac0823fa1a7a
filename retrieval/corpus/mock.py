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


def merge_clients(arxiv: ArxivMockClient, s2: SemanticScholarMockClient) -> list[Paper]:
    """Union the two clients' records by id.

    Text fields (title, abstract, year, authors) come from arXiv when it has the paper, else from Semantic
    Scholar; references come from Semantic Scholar. The merged record's ``source`` names both.
    """
    merged: dict[str, Paper] = {}
    for paper in s2.papers():
        merged[paper.id] = paper
    for paper in arxiv.papers():
        refs = merged[paper.id].references if paper.id in merged else []
        cites = merged[paper.id].citations if paper.id in merged else []
        merged[paper.id] = Paper(
            paper.id,
            paper.title,
            paper.abstract,
            paper.year,
            list(paper.authors),
            list(refs),
            list(cites),
            source="arxiv+s2" if paper.id in merged else "arxiv",
        )
    return [merged[k] for k in sorted(merged)]
