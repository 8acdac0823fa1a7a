"""The paper record every stage passes around."""

from __future__ import annotations

from ..text import sentences


class Paper:
    """One paper: what the index stores, and what a search returns.

    ``references`` are the ids this paper cites (kept even when the cited paper is not in the corpus);
    ``citations`` are the ids of papers that cite it (in results: corpus papers; in input: what a source such as
    Semantic Scholar lists). ``source`` says who supplied the record: ``"arxiv"`` or ``"s2"`` for the mock
    clients, the input file's name for a build; in results, what the index records (a corpus file's name, or
    the sources a record was merged from), ``"merged"`` where a paper was not read whole (a link of ``show``).
    ``field_sources`` names, for a record merged from several sources, the source of each field (not part of
    equality).

    A plain class with slots rather than a dataclass: a query process does not import ``dataclasses``
    (and ``inspect`` with it), which is a third of a fresh search's start (bench/cli_start.py).
    """

    __slots__ = ("id", "title", "abstract", "year", "authors", "references", "citations", "source", "field_sources")
    _COMPARED = __slots__[:-1]

    def __init__(
        self,
        id: str,
        title: str,
        abstract: str = "",
        year: int | None = None,
        authors: list[str] | None = None,
        references: list[str] | None = None,
        citations: list[str] | None = None,
        source: str = "merged",
        field_sources: dict[str, str] | None = None,
    ) -> None:
        self.id = id
        self.title = title
        self.abstract = abstract
        self.year = year
        self.authors = [] if authors is None else authors
        self.references = [] if references is None else references
        self.citations = [] if citations is None else citations
        self.source = source
        self.field_sources = {} if field_sources is None else field_sources

    def __eq__(self, other: object) -> bool:
        if type(other) is not Paper:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._COMPARED)

    __hash__ = None  # mutable, like the dataclass it replaces

    def __repr__(self) -> str:
        title = self.title if len(self.title) <= 40 else self.title[:37] + "..."
        authors = f", {len(self.authors)} authors" if self.authors else ""
        return f"Paper({self.id!r}, {title!r}, {self.year!r}{authors})"

    @property
    def text(self) -> str:
        """The indexed document: title, a space, abstract."""
        return f"{self.title} {self.abstract}"

    def lead(self, n: int = 3) -> list[str]:
        """The first ``n`` sentences of the abstract, as a list of strings (three by default: the context a
        downstream runner reads); fewer when the abstract is shorter, ``[]`` when there is none. Sentences end at
        ``.``, ``!`` or ``?`` followed by white space (``retrieval.text.sentences``)."""
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
