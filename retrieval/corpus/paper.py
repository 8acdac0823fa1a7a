"""The paper record every stage passes around."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..text import sentences


@dataclass
class Paper:
    """One paper: what the index stores, and what a search returns.

    ``references`` are the ids this paper cites (kept even when the cited paper is not in the corpus);
    ``citations`` are the ids of papers that cite it (in results: corpus papers; in input: what a source such as
    Semantic Scholar lists). ``source`` says who supplied the record: ``"arxiv"`` or ``"s2"`` for the mock
    clients, the input file's name for a build, ``"merged"`` in results. ``field_sources`` names, for a record
    merged from several sources, the source of each field.
    """

    id: str
    title: str
    abstract: str = ""
    year: int | None = None
    authors: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    citations: list[str] = field(default_factory=list)
    source: str = "merged"
    field_sources: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def text(self) -> str:
        """The indexed document: title, a space, abstract."""
        return f"{self.title} {self.abstract}"

    def lead(self, n: int = 3) -> list[str]:
        """The first ``n`` sentences of the abstract (three by default: the context a downstream runner reads)."""
        return sentences(self.abstract, n)

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "title": self.title,
            "abstract": self.abstract,
            "year": self.year,
            "authors": list(self.authors),
            "references": list(self.references),
            "citations": list(self.citations),
            "source": self.source,
        }
