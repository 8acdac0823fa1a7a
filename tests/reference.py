"""Plain-Python references the SQL paths are checked against: Okapi BM25 and a breadth-first walk.

Written straight from the definitions, sharing no code with the package but ``retrieval.text.fold`` (the
tokeniser's folding, whose properties ``tests/test_text.py`` checks on its own): the split into tokens, the stop
words (a copy of the list) and the stemmer (PyStemmer called directly) are this module's.
"""

from __future__ import annotations

import math
from collections import Counter, deque

from retrieval.text import fold

K1 = 1.5
B = 0.75

# Lucene's English stop words (EnglishAnalyzer.ENGLISH_STOP_WORDS_SET), copied independently of the package's.
STOP_WORDS = {
    "english": {
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
        "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
        "will", "with",
    }
}  # fmt: skip


def tokens(text: str) -> list[str]:
    """The tokeniser's contract, character by character: folded (lowercase, no accents, TeX accents read), then
    maximal runs where isalnum()."""
    out, current = [], []
    for ch in fold(text):
        if ch.isalnum():
            current.append(ch)
        elif current:
            out.append("".join(current))
            current = []
    if current:
        out.append("".join(current))
    return out


# What an index is built with unless told otherwise, as the README documents it: neither stemming nor stop words.
DEFAULT_STEM = None
DEFAULT_STOPWORDS = None


def analysed(text: str, stem: str | None = DEFAULT_STEM, stopwords: str | None = DEFAULT_STOPWORDS) -> list[str]:
    """``tokens(text)`` without the stop words of ``stopwords``, then each stemmed by the Snowball ``stem``."""
    out = tokens(text)
    if stopwords:
        out = [t for t in out if t not in STOP_WORDS[stopwords]]
    if stem:
        if stem not in _STEMMERS:
            import Stemmer

            _STEMMERS[stem] = Stemmer.Stemmer(stem)
        out = [_STEMMERS[stem].stemWord(t) for t in out]
    return out


_STEMMERS: dict = {}


class ReferenceBM25:
    """Okapi BM25, k1=1.5, b=0.75, idf = ln(1 + (N - df + 0.5)/(df + 0.5)), over {id: text}, with the terms of
    ``analysed(text, stem, stopwords)`` (a document's length is its number of terms, stop words not counted);
    the default analysis by default, None for none."""

    def __init__(
        self, docs: dict[str, str], stem: str | None = DEFAULT_STEM, stopwords: str | None = DEFAULT_STOPWORDS
    ) -> None:
        self.terms = lambda text: analysed(text, stem, stopwords)
        self.tf = {pid: Counter(self.terms(text)) for pid, text in docs.items()}
        self.dl = {pid: sum(c.values()) for pid, c in self.tf.items()}
        self.n = len(docs)
        self.avgdl = sum(self.dl.values()) / self.n
        self.df: Counter[str] = Counter()
        for counts in self.tf.values():
            self.df.update(counts.keys())

    def idf(self, term: str) -> float:
        df = self.df[term]
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def score(self, pid: str, query: str) -> float:
        return self._score(pid, self.terms(query))

    def _score(self, pid: str, terms: list[str]) -> float:
        total = 0.0
        for term in terms:  # a repeated query token counts each time
            f = self.tf[pid].get(term, 0)
            if f:
                norm = f * (K1 + 1) / (f + K1 * (1 - B + B * self.dl[pid] / self.avgdl))
                total += self.idf(term) * norm
        return total

    def scores(self, query: str) -> dict[str, float]:
        """Every document sharing at least one token with the query, with its score."""
        terms = self.terms(query)
        distinct = set(terms)
        return {pid: self._score(pid, terms) for pid, counts in self.tf.items() if distinct & counts.keys()}

    def top(self, query: str, k: int) -> list[tuple[str, float]]:
        """The k best, ranked on scores rounded to 10 decimal places (as the index reports them), ties by id."""
        return sorted(self.scores(query).items(), key=lambda kv: (-round(kv[1], 10), kv[0]))[:k]


def bfs(references: dict[str, list[str]], seeds: list[str], max_hops: int) -> dict[str, int]:
    """Minimum hop distance from any seed, following references and citing papers among corpus papers."""
    nodes = set(references)
    neighbours: dict[str, set[str]] = {pid: set() for pid in nodes}
    for citing, cited in ((c, r) for c, refs in references.items() for r in refs):
        if cited in nodes and cited != citing:
            neighbours[citing].add(cited)
            neighbours[cited].add(citing)
    distance = {s: 0 for s in seeds if s in nodes}
    queue = deque(distance)
    while queue:
        node = queue.popleft()
        if distance[node] == max_hops:
            continue
        for nxt in sorted(neighbours[node]):
            if nxt not in distance:
                distance[nxt] = distance[node] + 1
                queue.append(nxt)
    return distance


def close(a: float, b: float, rel: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


def relation_weights(references: dict[str, list[str]], source: str, relation: str, fanout: int = 100) -> dict:
    """Neighbours of ``source`` along ``relation`` with their weights, among corpus papers (the keys)."""
    nodes = set(references)
    refs = {p: sorted({r for r in rs if r in nodes and r != p}) for p, rs in references.items()}
    citers: dict[str, list[str]] = {p: [] for p in nodes}
    for p, rs in refs.items():
        for r in rs:
            citers[r].append(p)
    for p in citers:
        citers[p].sort()
    out: Counter[str] = Counter()
    if relation == "references":
        out.update(refs[source])
    elif relation == "citing":
        out.update(citers[source])
    elif relation == "cocitation":
        for citer in citers[source][:fanout]:
            out.update(x for x in refs[citer] if x != source)
    elif relation == "coupling":
        for ref in refs[source]:
            out.update(x for x in citers[ref][:fanout] if x != source)
    return dict(out)
