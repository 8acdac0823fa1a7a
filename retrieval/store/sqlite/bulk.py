"""The full build's fast path: papers parsed, checked and tokenised in worker processes while the main process
writes their rows, then every posting sorted in memory and its table's pages written directly.

Why it is shaped so: row-at-a-time inserts into a B-tree keyed by ``(term_id, doc_id)`` arrive in random key order
and cost a Python call each. Here the postings are gathered as numpy arrays (about 12 bytes each), sorted once by
``(term, document)`` (documents are numbered in input order), and the pages of ``term_freq`` laid into the file in
key order, full, as SQLite itself writes an index it builds (``retrieval.store.sqlite.pages``; a file or values it does
not handle are loaded a million rows at a time as one JSON array of packed integers that a single ``INSERT ...
SELECT FROM json_each`` unpacks). The postings BLOBs (``retrieval.store.postings``) are packed from the same sorted
arrays. The secondary indexes (``ix_citation_links_cited_citing``, ``ix_paper_authors_name``, ``ix_papers_year``) are
dropped during the load and created at its end from the statements the migrations left in the schema (a sort each
instead of millions of random inserts, and full pages), in a thread, while this one sorts the postings.

A corpus file (``PaperFile``) is read as raw lines; the workers parse them exactly as ``read_papers`` does and
send back the rows to insert and the tokens, numbered against a vocabulary each worker keeps for the build, so
that only the terms it had not seen come back with a chunk. The main process checks the ids (the first bad
record in file order is the one reported, as ``read_papers`` reports it), writes the rows, and maps the terms.

The result is the same index the incremental writer makes from the same papers (the tests compare them).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from itertools import islice

import numpy as np

from ...corpus.jsonl import PaperFile, parse_lines
from ...corpus.paper import Paper
from ...errors import StoreError
from ...text import _TOKEN, DEFAULT_ANALYSER, Analyser, fold
from ...workers import context, default_workers, follow_parent
from .. import postings as blobs
from ..progress import CITATIONS, IN_DEGREES, INDEXING, LOADING, READING, SORTING, BuildProgress, phase
from ..rows import (
    INSERT_AUTHOR,
    INSERT_DOC_LEN,
    INSERT_PAPER,
    INSERT_SOURCE,
    CorpusCounts,
    ReferenceCleaner,
    UniqueIds,
    add_paper_rows,
)
from .pages import Layout, layout, write_sorted_table

#: Papers handed to a worker at a time.
CHUNK = 4000
#: Postings per INSERT statement in the final load.
LOAD_ROWS = 1_000_000
#: Below this many papers the build stays in one process (starting workers costs more than it saves).
PARALLEL_MIN_PAPERS = 2 * CHUNK

INSERT_TERM_WITH_DF = "INSERT INTO doc_freq (term_id, term, df) VALUES (?, ?, ?)"
# Statements per chunk of papers (a JSON object: paper id -> the ids it lists): the ids not yet numbered get their
# numbers (``paper_keys``, in the order they are first met), then the links; an edge another record declared
# already only gets its flag set.
NUMBER_IDS = """\
INSERT INTO paper_keys (paper_id)
SELECT named.id
FROM (SELECT paper.key AS id
      FROM json_each(:lists) AS paper
      UNION ALL
      SELECT listed.value
      FROM json_each(:lists) AS paper, json_each(paper.value) AS listed) AS named
WHERE true
ON CONFLICT (paper_id) DO NOTHING"""
_LINK = """\
INSERT INTO citation_links (citing_key, cited_key, listed_by_citing, listed_by_cited)
SELECT {citing}.key, {cited}.key, {flags}
FROM json_each(:lists) AS paper, json_each(paper.value) AS listed
JOIN paper_keys AS own ON own.paper_id = paper.key
JOIN paper_keys AS other ON other.paper_id = listed.value
WHERE true
ON CONFLICT (citing_key, cited_key) DO UPDATE SET {flag} = 1"""
INSERT_REFERENCES = _LINK.format(citing="own", cited="other", flags="1, 0", flag="listed_by_citing")
INSERT_CITED_BY = _LINK.format(citing="other", cited="own", flags="0, 1", flag="listed_by_cited")
# Each JSON number packs (term_id, doc_id, count) into bit fields whose widths fit this build.
LOAD_POSTINGS = """\
INSERT INTO term_freq (term_id, doc_id, count)
SELECT value >> :term_shift,
       (value >> :doc_shift) & :doc_mask,
       value & :count_mask
FROM json_each(:postings)"""
LOAD_POSTINGS_ROWS = "INSERT INTO term_freq (term_id, doc_id, count) VALUES (?, ?, ?)"
CITATIONS_INDEX = "ix_citation_links_cited_citing"
#: The indexes dropped for the load and created at its end (with the SQL the schema holds for them), by phase.
DEFERRED_INDEXES = {
    INDEXING: ("ix_paper_authors_name", "ix_paper_authors_surname", "ix_papers_year"),
    CITATIONS: (CITATIONS_INDEX,),
}
# Every in-degree at once, counted on the (cited_key, citing_key) index in order, then named.
COUNT_CITED = """\
INSERT INTO cited_counts (paper_id, cited_by)
SELECT k.paper_id, n.cited_by
FROM (SELECT cited_key, count(*) AS cited_by
      FROM citation_links
      GROUP BY cited_key) AS n
JOIN paper_keys AS k ON k.key = n.cited_key"""
# A build's citation rows: every one was declared by a paper of the corpus, which is one of its ends, so a row is
# dangling when its other end is outside: a cited id (counted per id in cited_counts) or a citing id named by a
# cited paper's list (listed_by_citing = 0). Two small look-ups instead of a join of every row with papers twice.
CITATION_ROWS = "SELECT coalesce(sum(cited_by), 0) FROM cited_counts"
CITED_OUTSIDE = "SELECT coalesce(sum(cited_by), 0) FROM cited_counts WHERE paper_id NOT IN (SELECT id FROM papers)"
CITING_OUTSIDE = (
    "SELECT count(*) FROM citations WHERE listed_by_citing = 0 AND citing_id NOT IN (SELECT id FROM papers)"
)


# ASCII text tokenises as bytes: letters lowered, every other character but a digit a space, then split. For
# ASCII without a backslash that is exactly retrieval.text.tokenise (``fold`` only lowercases it, and str.isalnum
# is [A-Za-z0-9] there), three times faster. A backslash may begin a TeX accent: such text is folded first
# (``fold`` reads the accents; ASCII stays ASCII), then split the same way.
_ASCII_TOKENS = bytes(c + 32 if 65 <= c <= 90 else c if 97 <= c <= 122 or 48 <= c <= 57 else 32 for c in range(256))


def text_words(text: str) -> list[bytes]:
    """The tokens of ``text`` (``retrieval.text.tokenise``) as UTF-8 bytes, by the ASCII fast path when it can."""
    if text.isascii():
        if "\\" in text:
            text = fold(text)  # TeX accents read: still ASCII
        return text.encode("ascii").translate(_ASCII_TOKENS).split()
    return [word.encode("utf-8") for word in _TOKEN.findall(fold(text))]


class _Vocabulary(dict):
    """A token (UTF-8 bytes) -> the number of its term (terms numbered in the order they are first met), or -1
    for a token the analyser drops (a stop word). Each distinct token is analysed once per process."""

    def __init__(self, analyser: Analyser) -> None:
        super().__init__()
        self.analyser = analyser
        self.terms: dict[str, int] = {}

    def __missing__(self, token: bytes) -> int:
        word = token.decode("utf-8")
        term = word if self.analyser.plain else self.analyser.term(word)
        number = -1 if term is None else self.terms.setdefault(term, len(self.terms))
        self[token] = number
        return number


#: In each process that tokenises: the build it tokenises for, and that build's vocabulary in this process (so
#: that a chunk sends back only the terms this process had not seen yet, and the writer maps only those).
_VOCABULARY: tuple[str, _Vocabulary] | None = None


def tokenise_chunk(
    texts: list[str], build: str = "", analyser: Analyser = DEFAULT_ANALYSER
) -> tuple[tuple[str, int], int, list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Analyse ``texts`` (as ``analyser.analyse``) against this process's vocabulary for ``build``.

    Returns ``(vocabulary, first, new, term, count, distinct, length)``: which vocabulary numbered the terms
    (this process's for ``build``), the number of the first term it added for these texts, and those terms in
    first-seen order; for every posting, in document order, its term number and count; for every document, its
    number of distinct terms and its length in terms. Runs in a worker process.
    """
    global _VOCABULARY
    if _VOCABULARY is None or _VOCABULARY[0] != build:
        _VOCABULARY = (build, _Vocabulary(analyser))
    vocabulary = _VOCABULARY[1]
    first = len(vocabulary.terms)
    lengths = np.empty(len(texts), dtype=np.int64)
    tokens: list[bytes] = []
    for i, text in enumerate(texts):
        words = text_words(text)
        lengths[i] = len(words)
        tokens.extend(words)
    numbers = np.fromiter(map(vocabulary.__getitem__, tokens), dtype=np.int64, count=len(tokens))
    documents = np.repeat(np.arange(len(texts), dtype=np.int64), lengths)
    if analyser.stopwords is not None:  # stop words are not terms: dropped, and not counted in the lengths
        kept = numbers >= 0
        numbers, documents = numbers[kept], documents[kept]
        lengths = np.bincount(documents, minlength=len(texts)).astype(np.int64)
    new = list(islice(vocabulary.terms, first, None))
    # (document, term) pairs, sorted: each distinct pair is a posting, its run length the count.
    keys = documents << 32
    keys |= numbers
    keys.sort()
    firsts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else np.zeros(0, dtype=np.int64)
    counts = np.diff(np.r_[firsts, len(keys)])
    pairs = keys[firsts]
    return (
        (build, os.getpid()),
        first,
        new,
        (pairs & 0xFFFFFFFF).astype(np.int32),
        counts.astype(np.int32),
        np.bincount(pairs >> 32, minlength=len(texts)).astype(np.int64),
        lengths,
    )


def paper_rows(papers: list[Paper], cleaner: ReferenceCleaner) -> tuple[list, list, list, str | None, str | None]:
    """The rows of ``papers`` for ``papers``, ``paper_authors`` and ``field_sources``, and the lists of their
    reference and cited-by statements (JSON: paper id -> ids, cleaned by ``cleaner``; None when empty)."""
    clean = cleaner.clean
    rows, authors, sources = [], [], []
    references: dict[str, list[str]] = {}
    cited_by: dict[str, list[str]] = {}
    for paper in papers:
        add_paper_rows(paper, rows, authors, sources)
        # A list that cleaning empties (the paper's own id alone) gives no entry: every id an entry names, the
        # paper's own included, is numbered (``NUMBER_IDS``), and a number no citation uses is no writer's.
        if paper.references and (listed := clean(paper.id, paper.references)):
            references[paper.id] = listed
        if paper.citations and (listed := clean(paper.id, paper.citations)):
            cited_by[paper.id] = listed
    return (
        rows,
        authors,
        sources,
        json.dumps(references) if references else None,
        json.dumps(cited_by) if cited_by else None,
    )


def prepare_lines(
    path: str,
    format: str,
    source: str,
    lines: list[tuple[int, bytes]],
    build: str = "",
    analyser: Analyser = DEFAULT_ANALYSER,
) -> tuple:
    """Everything a build writes for raw lines of a corpus file: ``(ids, line numbers, rows, tokens, dropped,
    error)`` (``rows`` as ``paper_rows``, ``tokens`` as ``tokenise_chunk``, ``dropped`` the self-citations and
    repeated references removed, ``error`` the first bad record's, if any). Runs in a worker process."""
    papers, numbers, error = parse_lines(path, format, source, lines)
    cleaner = ReferenceCleaner()
    rows = paper_rows(papers, cleaner)
    tokens = tokenise_chunk([paper.text for paper in papers], build, analyser)
    return [p.id for p in papers], numbers, rows, tokens, (cleaner.self_citations, cleaner.duplicates), error


def json_ints(values: np.ndarray) -> str:
    """``values`` as a JSON array (runs in a worker process during the final load)."""
    return "[" + ",".join(map(str, values.tolist())) + "]"


def _worker_init(parent: int) -> None:
    """In each worker: die with the build and leave Ctrl-C to it (``retrieval.workers.follow_parent``); start
    with no vocabulary (a forked worker would inherit the build's own)."""
    global _VOCABULARY
    _VOCABULARY = None
    follow_parent(parent)


@dataclass
class BulkResult:
    """What a bulk load wrote, for the statistics and the summary: the corpus counts, the papers and terms,
    the references dropped, the live edges and dangling references, and the seconds per stage."""

    counts: CorpusCounts
    papers: int
    terms: int
    cleaner: ReferenceCleaner
    stages: dict[str, float]
    edges: int = 0
    dangling: int = 0


def verify_written(conn: sqlite3.Connection, table: str) -> None:
    """Check the B-trees of ``table`` and its indexes that ``retrieval.store.sqlite.pages`` wrote (SQLite's own
    ``quick_check``: page format, cell order, sizes), so that a fault of the page writer fails the build, which
    then leaves the previous index as it was, rather than ship a damaged file."""
    try:
        problems = [row[0] for row in conn.execute(f"PRAGMA quick_check({table})")]  # table: a build's constant
    except sqlite3.OperationalError as exc:
        if str(exc) == "interrupted":  # Ctrl-C or SIGTERM stopped the check (conn.interrupt()): not damage
            raise KeyboardInterrupt from None
        problems = [str(exc)]
    except sqlite3.DatabaseError as exc:  # a page too damaged to check
        problems = [str(exc)]
    if problems != ["ok"]:
        raise StoreError(
            f"the build wrote a damaged {table} table ({problems[0]}); nothing was changed. This is a bug in "
            "retrieval's bulk loader: please report it with the corpus's size"
        )


class BulkLoader:
    """Loads papers into the empty index on ``conn`` (inside the caller's transaction) and returns what it wrote;
    the tables end as the incremental writer would leave them."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        workers: int | None = None,
        progress: BuildProgress | None = None,
        analyser: Analyser = DEFAULT_ANALYSER,
    ) -> None:
        self.conn = conn
        self.analyser = analyser
        self.workers = default_workers() if workers is None else workers
        self.progress = progress or BuildProgress()
        self.deferred: dict[str, list[str]] = {}
        self.cited_by_rows = 0
        self.build = f"{os.getpid()}.{id(self)}.{time.monotonic_ns()}"  # names this build's vocabularies
        self.mappings: dict[tuple[str, int], np.ndarray] = {}  # a process's term numbers -> term ids
        self.layouts: dict[str, Layout | None] = {}  # where the postings' pages go, made while indexes are built
        self.pool: ProcessPoolExecutor | None = None
        self.unique = UniqueIds()
        self.cleaner = ReferenceCleaner()
        self.stages: dict[str, float] = {}
        self.vocabulary: dict[str, int] = {}
        self.next_term_id = 1
        self.n_papers = 0
        self.total_tokens = 0
        self.term_parts: list[np.ndarray] = []
        self.count_parts: list[np.ndarray] = []
        self.doc_parts: list[np.ndarray] = []
        self.length_parts: list[np.ndarray] = []

    # -- papers, in chunks ----------------------------------------------------------------------------------
    def load(self, papers: Iterable[Paper], progress: Callable[[int], None] | None = None) -> BulkResult:
        """Write every paper, its citations and postings, the vocabulary and the in-degrees (``progress``, if
        given, is also told the papers read). A ``PaperFile`` is parsed in the worker processes too."""
        self._drop_deferred_indexes()
        stages, report = self.stages, self.progress
        mark = time.perf_counter()
        pending: deque[tuple] = deque()
        done = 0
        try:
            with phase(report, READING, unit="papers"):
                chunks = self._file_jobs(papers) if isinstance(papers, PaperFile) else self._paper_jobs(papers)
                for job in chunks:
                    pending.append(job)
                    while len(pending) > max(1, self.workers):
                        done += self._collect(*pending.popleft())
                        report.update(done)
                        if progress:
                            progress(done)
                while pending:
                    done += self._collect(*pending.popleft())
                    report.update(done)
                    if progress:
                        progress(done)
            stages["papers and tokens"] = time.perf_counter() - mark
            # The indexes of the papers and citations are built in a thread while this one sorts the postings
            # (SQLite and numpy both let go of the GIL): a core each. Their phases are reported as they end.
            others = self.deferred.pop(INDEXING)
            citations = self.deferred.pop(CITATIONS)
            indexer = _Indexer(self.conn, [(INDEXING, others), (CITATIONS, citations), (IN_DEGREES, self._in_degrees)])
            with indexer:
                mark = time.perf_counter()
                with phase(report, SORTING):
                    postings = self._sorted_postings() if self.n_papers else None
                stages["postings sorted"] = time.perf_counter() - mark
                for name, total, unit, stage in (
                    (INDEXING, len(others), "indexes", "indexes"),
                    (CITATIONS, len(citations), "indexes", "citations index"),
                    (IN_DEGREES, None, "", "in-degrees"),
                ):
                    mark = time.perf_counter()
                    with phase(report, name, total, unit):
                        indexer.wait_for(name, report)
                    stages[stage] = time.perf_counter() - mark
            edges, dangling = indexer.results[IN_DEGREES]
            self._load_postings(postings)
        finally:
            if self.pool is not None:
                self.pool.shutdown(cancel_futures=True)
        counts = CorpusCounts(self.n_papers, self.total_tokens)
        return BulkResult(counts, done, len(self.vocabulary), self.cleaner, stages, edges, dangling)

    def reindex(self, documents: Callable[[], Iterable[tuple[str, str]]]) -> CorpusCounts:
        """Fill the emptied ``doc_len``, ``doc_freq`` and ``term_freq`` of an index whose papers are written
        (``retrieval.store.sqlite.reindex``) from ``documents()``, ``(paper id, indexed text)`` in the order the papers
        get their new document numbers; returns the corpus counts. The papers, citations and every other table
        are left as they are."""
        pending: deque[tuple] = deque()
        iterator = iter(documents())
        seen = done = 0
        try:
            with phase(self.progress, READING, unit="papers"):
                while chunk := list(islice(iterator, CHUNK)):
                    seen += len(chunk)
                    self._start_pool(seen)
                    args = ([text for _, text in chunk], self.build, self.analyser)
                    job = self.pool.submit(tokenise_chunk, *args) if self.pool else tokenise_chunk(*args)
                    pending.append((job, [pid for pid, _ in chunk], None))
                    while len(pending) > max(1, self.workers):
                        done += self._collect(*pending.popleft())
                        self.progress.update(done)
                while pending:
                    done += self._collect(*pending.popleft())
                    self.progress.update(done)
            with phase(self.progress, SORTING):
                postings = self._sorted_postings() if self.n_papers else None
            self._load_postings(postings)
        finally:
            if self.pool is not None:
                self.pool.shutdown(cancel_futures=True)
        return CorpusCounts(self.n_papers, self.total_tokens)

    def _in_degrees(self) -> tuple[int, int]:
        self.conn.execute(COUNT_CITED)
        return self._edge_counts()

    def _start_pool(self, seen: int) -> None:
        """Start the workers once the input is long enough to repay them."""
        if self.pool is None and self.workers > 1 and seen > PARALLEL_MIN_PAPERS - CHUNK:
            self.pool = ProcessPoolExecutor(
                self.workers, mp_context=context(), initializer=_worker_init, initargs=(os.getpid(),)
            )

    def _paper_jobs(self, papers: Iterable[Paper]):
        """For papers given as objects: their rows written here, their tokens made in the workers."""
        iterator = iter(papers)
        seen = 0
        while chunk := list(islice(iterator, CHUNK)):
            seen += len(chunk)
            for paper in chunk:
                self.unique.add(paper.id)
            self._write_rows(paper_rows(chunk, self.cleaner))
            texts = [paper.text for paper in chunk]
            self._start_pool(seen)
            args = (texts, self.build, self.analyser)
            job = self.pool.submit(tokenise_chunk, *args) if self.pool else tokenise_chunk(*args)
            yield job, [paper.id for paper in chunk], None

    def _file_jobs(self, papers: PaperFile):
        """For a corpus file: its lines parsed, checked, turned into rows and tokenised in the workers."""
        path, source = str(papers.path), papers.source
        seen = 0
        for format, lines in papers.chunks(CHUNK):
            seen += len(lines)
            self._start_pool(seen)
            args = (path, format, source, lines, self.build, self.analyser)
            yield (self.pool.submit(prepare_lines, *args) if self.pool else prepare_lines(*args)), None, papers

    def _write_rows(self, rows: tuple[list, list, list, str | None, str | None]) -> None:
        papers, authors, sources, references, cited_by = rows
        conn = self.conn
        conn.executemany(INSERT_PAPER, papers)
        conn.executemany(INSERT_AUTHOR, authors)
        conn.executemany(INSERT_SOURCE, sources)
        if references is not None:
            conn.execute(NUMBER_IDS, {"lists": references})
            conn.execute(INSERT_REFERENCES, {"lists": references})
        if cited_by is not None:
            conn.execute(NUMBER_IDS, {"lists": cited_by})
            conn.execute(INSERT_CITED_BY, {"lists": cited_by})
            self.cited_by_rows += 1

    def _drop_deferred_indexes(self) -> None:
        """Drop the indexes the load leaves to its end, remembering the SQL the schema holds for each."""
        for when, names in DEFERRED_INDEXES.items():
            self.deferred[when] = []
            for name in names:
                row = self.conn.execute("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?", (name,))
                sql = row.fetchone()
                if sql is not None:
                    self.deferred[when].append(sql[0])
                    self.conn.execute(f"DROP INDEX {name}")

    def _edge_counts(self) -> tuple[int, int]:
        """``(live edges, dangling references)`` of the citations this load wrote (see ``CITATION_ROWS``)."""
        rows = self.conn.execute(CITATION_ROWS).fetchone()[0]
        dangling = self.conn.execute(CITED_OUTSIDE).fetchone()[0]
        if self.cited_by_rows:
            dangling += self.conn.execute(CITING_OUTSIDE).fetchone()[0]
        return rows - dangling, dangling

    def _collect(self, job, ids: list[str] | None, file: PaperFile | None) -> int:
        """Take a chunk's results (for a file: write its rows first, after checking its ids), map its local terms
        to the index's term ids and keep its postings; returns the papers it held."""
        result = job.result() if isinstance(job, Future) else job
        if file is not None:
            ids, numbers, rows, tokens, (self_citations, duplicates), error = result
            seen = self.unique.seen
            for pid, lineno in zip(ids, numbers, strict=True):
                if pid in seen:
                    raise file.duplicate(pid, lineno)
                seen.add(pid)
            if error is not None:
                raise error
            self._write_rows(rows)
            self.cleaner.self_citations += self_citations
            self.cleaner.duplicates += duplicates
        else:
            tokens = result
        which, first, new, local_terms, counts, distinct, lengths = tokens
        mapping = self.mappings.get(which, np.zeros(0, dtype=np.int32))
        if len(mapping) != first:
            raise RuntimeError("a tokeniser's vocabulary is out of step with the build's")
        known = self.vocabulary
        added = np.empty(len(new), dtype=np.int32)
        for i, term in enumerate(new):  # in first-seen order: a term new to the index gets the next id
            term_id = known.get(term)
            if term_id is None:
                term_id = known[term] = self.next_term_id
                self.next_term_id += 1
            added[i] = term_id
        mapping = self.mappings[which] = np.concatenate([mapping, added])
        first_doc = self.n_papers + 1
        doc_ids = np.arange(first_doc, first_doc + len(ids), dtype=np.int64)
        self.term_parts.append(mapping[local_terms])
        self.count_parts.append(counts)
        self.doc_parts.append(np.repeat(doc_ids.astype(np.int32), distinct))
        self.length_parts.append(lengths)
        self.conn.executemany(INSERT_DOC_LEN, zip(doc_ids.tolist(), ids, lengths.tolist(), strict=True))
        self.n_papers += len(ids)
        self.total_tokens += int(lengths.sum())
        return len(ids)

    # -- postings, at the end ---------------------------------------------------------------------------------
    def _load_postings(self, postings: tuple[np.ndarray, ...] | None) -> None:
        """Load the sorted postings, their BLOBs and the vocabulary."""
        if postings is None:
            return
        terms, docs, counts, lengths = postings
        mark = time.perf_counter()
        with phase(self.progress, LOADING, len(terms), "postings", conn=self.conn):
            df = np.bincount(terms, minlength=self.next_term_id)
            names = sorted(self.vocabulary.items(), key=lambda item: item[1])
            self.conn.executemany(INSERT_TERM_WITH_DF, ((term_id, term, int(df[term_id])) for term, term_id in names))
            self._insert_postings(terms, docs, counts)
            # The derived BLOB rows (retrieval.store.postings), from the same sorted arrays.
            self.conn.executemany(blobs.INSERT_SQL, blobs.chunk_rows(terms, docs, counts, lengths))
        self.stages["postings loaded"] = time.perf_counter() - mark

    def _sorted_postings(self) -> tuple[np.ndarray, ...]:
        """Every posting as ``(term, doc, count, length)`` arrays sorted by ``(term, doc)`` (the length is its
        paper's); the parts gathered while reading are released."""
        terms = np.concatenate(self.term_parts).astype(np.int64)
        docs = np.concatenate(self.doc_parts).astype(np.int64)
        counts = np.concatenate(self.count_parts).astype(np.int64)
        lengths = np.concatenate([np.zeros(1, dtype=np.int64), *self.length_parts])  # indexed by doc_id
        self.term_parts = self.count_parts = self.doc_parts = self.length_parts = []
        self.progress.update(None)
        widths = [max(1, int(a.max(initial=0)).bit_length()) for a in (terms, docs, counts)]
        if sum(widths) <= 63:  # one int64 key per posting: sorting the keys sorts the postings (they are unique)
            d_bits, c_bits = widths[1], widths[2]
            keys = terms << (d_bits + c_bits)
            keys |= docs << c_bits
            keys |= counts
            del terms, docs, counts
            keys.sort()
            self.progress.update(None)
            terms = keys >> (d_bits + c_bits)
            docs = (keys >> c_bits) & ((1 << d_bits) - 1)
            counts = keys & ((1 << c_bits) - 1)
            del keys
        else:  # documents were numbered in input order: a stable sort by term keeps each term's documents sorted
            order = np.argsort(terms, kind="stable")
            terms, docs, counts = terms[order], docs[order], counts[order]
            del order
        lengths = lengths[docs]
        self.progress.update(None)
        # The B-tree's layout, made here, beside the indexer, rather than later.
        path = _database_file(self.conn)
        if path is not None and len(terms):
            self.layouts["term_freq"] = layout(path, (terms, docs, counts))
        return terms, docs, counts, lengths

    def _insert_postings(self, terms, docs, counts) -> None:
        """Write the postings' pages, or insert them with SQL where the file is not one the page writer handles."""
        columns = (terms, docs, counts)
        conn = self.conn
        path = _database_file(conn)
        if path is None or not len(terms):
            self._insert_postings_sql(columns)
            return
        active = conn.in_transaction
        if active:  # the pages are written between two transactions (a build's file has no journal)
            conn.execute("COMMIT")
        try:
            written = write_sorted_table(
                conn,
                path,
                "term_freq",
                self.layouts.get("term_freq") or columns,
                self.progress.update,
                processes=max(1, self.workers),
            )
        finally:
            if active:
                conn.execute("BEGIN")
        if written:
            verify_written(conn, "term_freq")
        else:
            self._insert_postings_sql(columns)

    def _insert_postings_sql(self, columns) -> None:
        """Load the postings with SQL: packed into JSON integers when they fit in 63 bits, else row by row."""
        widths = [max(1, int(a.max(initial=0)).bit_length()) for a in columns]
        if sum(widths) > 63:  # too many papers or terms to pack into one integer: row by row
            self.conn.executemany(LOAD_POSTINGS_ROWS, zip(*(a.tolist() for a in columns), strict=True))
            return
        terms, docs, counts = columns
        _, d_bits, c_bits = widths
        params = {
            "term_shift": d_bits + c_bits,
            "doc_shift": c_bits,
            "doc_mask": (1 << d_bits) - 1,
            "count_mask": (1 << c_bits) - 1,
        }
        packed = terms.astype(np.int64) << params["term_shift"]
        packed |= docs.astype(np.int64) << params["doc_shift"]
        packed |= counts.astype(np.int64)
        slices = [packed[i : i + LOAD_ROWS] for i in range(0, len(packed), LOAD_ROWS)]
        if self.pool is None:
            for done, part in enumerate(slices, start=1):
                self.conn.execute(LOAD_POSTINGS, {**params, "postings": json_ints(part)})
                self.progress.update(min(done * LOAD_ROWS, len(packed)))
            return
        # The workers format the next slices while this process inserts one (a few slices in memory at once).
        window: deque[Future] = deque()
        done = 0
        for part in slices:
            window.append(self.pool.submit(json_ints, part))
            if len(window) > self.workers:
                self.conn.execute(LOAD_POSTINGS, {**params, "postings": window.popleft().result()})
                done += 1
                self.progress.update(min(done * LOAD_ROWS, len(packed)))
        while window:
            self.conn.execute(LOAD_POSTINGS, {**params, "postings": window.popleft().result()})
            done += 1
            self.progress.update(min(done * LOAD_ROWS, len(packed)))


def _database_file(conn: sqlite3.Connection) -> str | None:
    """The file of ``conn``'s main database (None in memory)."""
    factory = conn.text_factory
    conn.text_factory = os.fsdecode  # the path's bytes as the file system gave them (they need not be UTF-8)
    try:
        listed = conn.execute("PRAGMA database_list").fetchall()
    finally:
        conn.text_factory = factory
    for _, name, file in listed:
        if name == "main":
            return file or None
    return None


class _Indexer(threading.Thread):
    """SQL work that runs beside the postings' sort: ``steps`` of ``(name, statements or a function)``, in
    order, on ``conn`` (which this thread alone uses meanwhile). ``with indexer:`` starts it, and stops it
    (``interrupt``) if the block fails; ``wait_for(name)`` waits for a step, ticking ``progress``."""

    def __init__(self, conn: sqlite3.Connection, steps: list[tuple[str, list[str] | Callable]]) -> None:
        super().__init__(name="retrieval-indexer", daemon=True)
        self.conn = conn
        self.steps = steps
        self.ended = {name: threading.Event() for name, _ in steps}
        self.done = {name: 0 for name, _ in steps}
        self.results: dict[str, object] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for name, work in self.steps:
                if callable(work):
                    self.results[name] = work()
                else:
                    for sql in work:
                        self.conn.execute(sql)
                        self.done[name] += 1
                self.ended[name].set()
        except BaseException as exc:  # handed to the waiting thread
            self.error = exc
        finally:
            for event in self.ended.values():
                event.set()

    def wait_for(self, name: str, progress: BuildProgress) -> None:
        shown = 0
        while not self.ended[name].wait(0.2):
            progress.update(None)
            if self.done[name] != shown:
                shown = self.done[name]
                progress.update(shown)
        if self.error is not None:
            raise self.error
        if self.done[name]:
            progress.update(self.done[name])

    def __enter__(self) -> _Indexer:
        self.start()
        return self

    def __exit__(self, kind, value, trace) -> None:
        if kind is not None and self.is_alive():
            self.conn.interrupt()
        self.join()
