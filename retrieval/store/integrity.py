"""``retrieval check``: every invariant a search relies on, checked against the whole index (as SQLite's ``PRAGMA
integrity_check`` checks its pages, this checks what this package's writers keep true), on either backend.

An open checks only what costs nothing (``retrieval.store.database``: the tables, the statistics' types and ranges,
their seal); a query checks the rows it reads (``retrieval.search.lexical``, ``blobs``, ``papers``). What neither can
afford, a whole table read, is here, each invariant one statement written for both dialects:

- ``index_info``: its statistics' types and ranges, avgdl = total_tokens / n_papers, the writers' seal; and that
  n_papers is the number of ``doc_len`` rows, total_tokens the sum of their lengths, min_year and max_year those of
  ``papers``;
- ``papers`` and ``doc_len``: one row each per paper;
- ``doc_len.length``: a whole number, the sum of the paper's ``term_freq`` counts (its tokens);
- ``term_freq``: each count a whole number from 1 to its paper's length, its document and term in ``doc_len`` and
  ``doc_freq``;
- ``doc_freq.df``: the number of the term's ``term_freq`` rows;
- ``postings``: each term's chunks hold exactly its ``term_freq`` rows with their papers' lengths, each chunk's
  range, df, max_count and min_length those of its postings (the bounds pruning trusts);
- ``papers.year``: a whole number (or none);
- ``paper_authors``: each author's ``surname`` and ``name_key`` those its name gives (what ``--author`` matches);
- ``cited_counts``: each paper's count of ``citations`` rows naming it, a whole number;
- ``citations``: each row declared by the record of a paper the index holds, and none a paper citing itself;
- ``paper_vectors`` (an index built with ``--semantic``): one vector per paper, of the recorded model's size;
- on SQLite, ``PRAGMA integrity_check`` (the file's pages and indexes).

Each problem is reported with how many rows break the invariant and the first few (``limit``). Nothing is
written: a damaged index is rebuilt with ``retrieval build``.
"""

from __future__ import annotations

import time
from collections import namedtuple

from ..errors import NotAnIndexError, RetrievalError, SchemaVersionError
from .database import (
    HEAD_REVISION,
    INDEX_INFO_SQL,
    REVISION_SQL,
    SEAL_KEY,
    SEAL_VERSION,
    TABLES_SQL,
    IndexStats,
    build_command,
    check_index,
    check_seal,
)
from .postings import decode, shape_problem
from .rows import TABLE_TOTALS_SQL, statistics_disagreeing
from .schema.catalogue import required
from .sql.dialect import SQLITE, statement

#: Rows of a term batch's postings read at once by the postings check (a term's list is read whole).
BATCH_POSTINGS = 500_000


class Problem(namedtuple("Problem", "invariant count examples")):
    """An invariant that does not hold: its name (``doc_freq.df``: the table and column, or what is compared), how
    many rows break it, and the first few, each one line."""

    __slots__ = ()

    def to_dict(self) -> dict:
        return {"invariant": self.invariant, "count": self.count, "examples": list(self.examples)}


class CheckReport:
    """What ``check`` found: the problems (none: the index holds every invariant), the invariants checked, notes
    (an index without a seal), and the seconds it took."""

    def __init__(
        self,
        path: str,
        problems: list[Problem],
        checked: list[str],
        notes: list[str],
        seconds: float,
        rebuild: str | None = None,
    ):
        self.path = path
        #: The command that rebuilds the index as it was analysed (``build_command``), once its statistics were read.
        self.rebuild = rebuild or build_command(path)
        self.problems = problems
        self.checked = checked
        self.notes = notes
        self.seconds = seconds

    @property
    def ok(self) -> bool:
        return not self.problems

    def __repr__(self) -> str:
        return f"CheckReport({self.path!r}, {len(self.problems)} problems)"

    def to_dict(self) -> dict:
        return {
            "path": self.path,
            "ok": self.ok,
            "problems": [p.to_dict() for p in self.problems],
            "checked": list(self.checked),
            "notes": list(self.notes),
            "seconds": round(self.seconds, 3),
        }


# -- the statements: each returns the offending rows (the first :limit) and, on every row, how many there are ----
def _rows(select: str, where: str, order: str) -> str:
    # Every offending row first (MATERIALIZED: a LIMIT beside a window count led PostgreSQL to a nested loop over
    # whole tables, minutes on hepth), then the first :limit of them and how many there are.
    return f"""\
WITH broken AS MATERIALIZED (
{select}
{where}
)
SELECT broken.*,
       (SELECT count(*) FROM broken) AS total
FROM broken
ORDER BY {order}
LIMIT :limit"""


PAPERS_WITHOUT_DOC_SQL = statement(
    lambda d: _rows(
        "SELECT p.id",
        "FROM papers AS p\nWHERE NOT EXISTS (SELECT 1 FROM doc_len AS dl WHERE dl.paper_id = p.id)",
        f"id{d.bytes_order}",
    ),
    hash_joins=True,
)
DOCS_WITHOUT_PAPER_SQL = statement(
    lambda d: _rows(
        "SELECT dl.doc_id, dl.paper_id",
        "FROM doc_len AS dl\nWHERE NOT EXISTS (SELECT 1 FROM papers AS p WHERE p.id = dl.paper_id)",
        "doc_id",
    ),
    hash_joins=True,
)
LENGTHS_SQL = statement(
    lambda d: _rows(
        "SELECT dl.doc_id, dl.paper_id, dl.length, t.tokens",
        f"""FROM doc_len AS dl
LEFT JOIN (
    SELECT doc_id,
           sum(count) AS tokens
    FROM term_freq
    GROUP BY doc_id
) AS t ON t.doc_id = dl.doc_id
WHERE NOT ({d.whole("dl.length")})
   OR dl.length <> coalesce(t.tokens, 0)""",
        "doc_id",
    ),
    hash_joins=True,
)
COUNTS_OF_POSTINGS_SQL = statement(
    lambda d: _rows(
        "SELECT tf.term_id, tf.doc_id, tf.count, dl.length, d.term",
        f"""FROM term_freq AS tf
LEFT JOIN doc_len AS dl ON dl.doc_id = tf.doc_id
LEFT JOIN doc_freq AS d ON d.term_id = tf.term_id
WHERE dl.doc_id IS NULL
   OR d.term_id IS NULL
   OR NOT ({d.whole("tf.count")})
   OR NOT ({d.whole("dl.length")})
   OR tf.count < 1
   OR tf.count > dl.length""",
        "term_id, doc_id",
    ),
    hash_joins=True,
)
DF_SQL = statement(
    lambda d: _rows(
        "SELECT d.term_id, d.term, d.df, coalesce(t.postings, 0) AS postings",
        f"""FROM doc_freq AS d
LEFT JOIN (
    SELECT term_id,
           count(*) AS postings
    FROM term_freq
    GROUP BY term_id
) AS t ON t.term_id = d.term_id
WHERE NOT ({d.whole("d.df")})
   OR d.df < 1
   OR d.df <> coalesce(t.postings, 0)""",
        "term_id",
    ),
    hash_joins=True,
)
# A citation row's flags say whose record declared it (``models.CitationLink``): a declaring paper is in the corpus
# (removing it takes its rows away), and every row was declared by one of its ends.
CITATION_FLAGS_SQL = statement(
    lambda d: _rows(
        "SELECT c.citing_id, c.cited_id, c.listed_by_citing, c.listed_by_cited",
        """FROM citations AS c
WHERE c.citing_id = c.cited_id
   OR NOT (c.listed_by_citing OR c.listed_by_cited)
   OR (c.listed_by_citing AND NOT EXISTS (SELECT 1 FROM papers AS p WHERE p.id = c.citing_id))
   OR (c.listed_by_cited AND NOT EXISTS (SELECT 1 FROM papers AS p WHERE p.id = c.cited_id))""",
        f"citing_id{d.bytes_order}, cited_id{d.bytes_order}",
    ),
    hash_joins=True,
)
# Every number a citation stores stands for an id (the view ``citations`` would leave its row out), every number
# stands for an id some citation names (a writer drops those no citation uses; a build makes none), and no id has
# two numbers (the unique index on ``paper_id`` is all that keeps that).
CITATION_KEYS_SQL = statement(
    lambda d: _rows(
        "SELECT x.kind, x.key, x.paper_id",
        """FROM (
    SELECT 0 AS kind, l.citing_key AS key, CAST(NULL AS text) AS paper_id
    FROM citation_links AS l
    WHERE NOT EXISTS (SELECT 1 FROM paper_keys AS k WHERE k.key = l.citing_key)
    UNION
    SELECT 0 AS kind, l.cited_key AS key, CAST(NULL AS text) AS paper_id
    FROM citation_links AS l
    WHERE NOT EXISTS (SELECT 1 FROM paper_keys AS k WHERE k.key = l.cited_key)
    UNION ALL
    SELECT 1 AS kind, k.key, k.paper_id
    FROM paper_keys AS k
    WHERE NOT EXISTS (SELECT 1 FROM citation_links AS l WHERE l.citing_key = k.key)
      AND NOT EXISTS (SELECT 1 FROM citation_links AS l WHERE l.cited_key = k.key)
    UNION ALL
    SELECT 2 AS kind, min(k.key) AS key, k.paper_id
    FROM paper_keys AS k
    GROUP BY k.paper_id
    HAVING count(*) > 1
) AS x""",
        "kind, key",
    ),
    hash_joins=True,
)
# What a paper's record wrote beside it (its authors, its fields' sources) goes with it.
ORPHAN_ROWS_SQL = statement(
    lambda d: _rows(
        "SELECT o.tbl, o.paper_id",
        """FROM (
    SELECT 'paper_authors' AS tbl, a.paper_id
    FROM paper_authors AS a
    WHERE NOT EXISTS (SELECT 1 FROM papers AS p WHERE p.id = a.paper_id)
    UNION ALL
    SELECT 'field_sources' AS tbl, f.paper_id
    FROM field_sources AS f
    WHERE NOT EXISTS (SELECT 1 FROM papers AS p WHERE p.id = f.paper_id)
) AS o""",
        f"tbl, paper_id{d.bytes_order}",
    ),
    hash_joins=True,
)
#: ``paper_authors`` in pages of ``AUTHORS_PAGE`` rows, by key (a whole table of a large index is not held at once).
AUTHORS_PAGE = 50_000
AUTHOR_KEYS_SQL = statement(
    """\
SELECT paper_id,
       position,
       name,
       surname,
       name_key
FROM paper_authors
WHERE (paper_id, position) > (:paper_id, :position)
ORDER BY paper_id, position
LIMIT :page"""
)
YEARS_SQL = statement(
    lambda d: _rows(
        "SELECT p.id, CAST(p.year AS text) AS year",
        f"FROM papers AS p\nWHERE p.year IS NOT NULL\n  AND NOT ({d.whole('p.year')})",
        f"id{d.bytes_order}",
    )
)
# An index built with --semantic: every paper has one vector of the recorded model's size (float16 values).
VECTORS_CHECK_SQL = statement(
    lambda d: _rows(
        "SELECT p.id, length(v.vector) AS bytes",
        "FROM papers AS p\nLEFT JOIN paper_vectors AS v ON v.paper_id = p.id\n"
        "WHERE v.vector IS NULL\n   OR length(v.vector) <> :bytes",
        f"id{d.bytes_order}",
    )
)
CITED_COUNTS_SQL = statement(
    lambda d: _rows(
        "SELECT x.paper_id, x.stored, x.counted",
        f"""FROM (
    SELECT n.paper_id,
           CAST(n.cited_by AS text) AS stored,
           coalesce(t.counted, 0) AS counted,
           {d.whole("n.cited_by")} AS whole
    FROM cited_counts AS n
    LEFT JOIN (
        SELECT cited_id,
               count(*) AS counted
        FROM citations
        GROUP BY cited_id
    ) AS t ON t.cited_id = n.paper_id
    UNION ALL
    SELECT c.cited_id AS paper_id,
           NULL AS stored,
           count(*) AS counted,
           {d.whole("1")} AS whole
    FROM citations AS c
    WHERE NOT EXISTS (SELECT 1 FROM cited_counts AS n WHERE n.paper_id = c.cited_id)
    GROUP BY c.cited_id
) AS x
WHERE x.stored IS NULL
   OR NOT x.whole
   OR x.stored <> CAST(x.counted AS text)""",
        f"paper_id{d.bytes_order}",
    ),
    hash_joins=True,
)
TERM_IDS_SQL = statement("SELECT term_id, df FROM doc_freq ORDER BY term_id")
BATCH_SQL = statement(
    """\
SELECT tf.term_id,
       tf.doc_id,
       tf.count,
       dl.length
FROM term_freq AS tf
LEFT JOIN doc_len AS dl ON dl.doc_id = tf.doc_id
WHERE tf.term_id BETWEEN :first AND :last
ORDER BY tf.term_id, tf.doc_id""",
    hash_joins=True,
)
BATCH_CHUNKS_SQL = statement("""\
SELECT term_id,
       first_doc,
       last_doc,
       df,
       max_count,
       min_length,
       doc_ids,
       counts,
       lengths
FROM postings
WHERE term_id BETWEEN :first AND :last
ORDER BY term_id, first_doc""")
TERM_NAMES_SQL = statement("SELECT term_id, term FROM doc_freq WHERE term_id BETWEEN :first AND :last")
#: SQLite only (not registered: no server runs it).
INTEGRITY_SQL = "PRAGMA integrity_check(100)"


#: The first invariant: a revision and tokeniser this version reads. Broken, nothing else is checked (and the
#: index is not damaged: it wants an upgrade, or a newer package).
REVISION_INVARIANT = "schema revision and tokeniser"


def check(executor, location, limit: int = 5) -> CheckReport:
    """Check the index ``executor`` reads (at ``location``, as messages name it) against every invariant; at most
    ``limit`` examples per problem. Reads in one transaction (on PostgreSQL one snapshot), writes nothing."""
    started = time.perf_counter()
    where = str(getattr(location, "shown", location))
    problems: list[Problem] = []
    checked: list[str] = []
    notes: list[str] = []
    rows = executor.rows

    def found(invariant: str, count: int, examples: list[str]) -> None:
        if count:
            problems.append(Problem(invariant, count, examples[:limit]))

    try:
        check_index(location, rows)
    except SchemaVersionError as exc:  # another revision or tokeniser: upgrade or rebuild, nothing else to check
        found(REVISION_INVARIANT, 1, [str(exc)])
        return CheckReport(where, problems, [REVISION_INVARIANT], notes, time.perf_counter() - started)
    except NotAnIndexError as exc:
        refused = exc  # what the open refuses (a missing table, a statistic), the invariants below report one by one
    else:
        refused = None
    checked.append(REVISION_INVARIANT)
    names = {row[0] for row in rows("check: the tables and indexes", TABLES_SQL)}
    if refused is not None and not names & {"index_info", "papers"}:
        raise refused  # no index at all (an empty file, another program's database): not a damaged one
    revision = rows("check: the schema revision", REVISION_SQL) if "alembic_version" in names else []
    if not revision:  # every command refuses it; "consistent" would be false
        said = "alembic_version is empty" if "alembic_version" in names else "its alembic_version table is gone"
        found(REVISION_INVARIANT, 1, [f"{where} records no schema revision ({said}): rebuild it"])
        return CheckReport(where, problems, checked, notes, time.perf_counter() - started)
    missing = [n for n in ("index_info", *required(revision[0][0] if revision else HEAD_REVISION)) if n not in names]
    if missing:
        found("tables", len(missing), [f"{where} lacks {name}" for name in missing])
        return CheckReport(where, problems, ["tables"], notes, time.perf_counter() - started)
    begun = False
    try:
        executor.run("check: begin", "BEGIN")
        begun = True
        info = dict(rows("check: the statistics", INDEX_INFO_SQL))
        _statistics(rows, info, found, notes)
        checked += ["index_info", "index_info.seal", "index_info vs doc_len and papers"]
        params = {"limit": limit}
        papers = rows("check: papers without a doc_len row", PAPERS_WITHOUT_DOC_SQL, params)
        found("papers vs doc_len", _total(papers), [f"paper {pid!r} has no doc_len row" for pid, _ in papers])
        docs = rows("check: doc_len rows without a paper", DOCS_WITHOUT_PAPER_SQL, params)
        found(
            "doc_len vs papers",
            _total(docs),
            [f"doc_len row {doc} names the paper {pid!r}, which papers lacks" for doc, pid, _ in docs],
        )
        checked += ["papers vs doc_len", "doc_len vs papers"]
        lengths = rows("check: doc_len.length against term_freq", LENGTHS_SQL, params)
        found(
            "doc_len.length",
            _total(lengths),
            [
                f"document {doc} ({pid!r}) has length {length!r}, its term_freq counts add up to {tokens or 0}"
                for doc, pid, length, tokens, _ in lengths
            ],
        )
        counts = rows("check: term_freq rows", COUNTS_OF_POSTINGS_SQL, params)
        found("term_freq.count", _total(counts), [_posting_problem(*row[:5]) for row in counts])
        dfs = rows("check: doc_freq.df against term_freq", DF_SQL, params)
        found(
            "doc_freq.df",
            _total(dfs),
            [f"term {tid} {term!r} has df {df!r}, {n:,} postings in term_freq" for tid, term, df, n, _ in dfs],
        )
        checked += ["doc_len.length", "term_freq.count", "doc_freq.df"]
        _postings(rows, found, limit)
        checked.append("postings vs term_freq and doc_len")
        years = rows("check: papers.year", YEARS_SQL, params)
        found("papers.year", _total(years), [f"paper {pid!r} has the year {year!r}" for pid, year, _ in years])
        cited = rows("check: cited_counts against citations", CITED_COUNTS_SQL, params)
        found(
            "cited_counts.cited_by",
            _total(cited),
            [
                f"paper {pid!r}: cited_counts gives {stored if stored is not None else 'no row'}, "
                f"citations name it {counted:,} times"
                for pid, stored, counted, _ in cited
            ],
        )
        checked += ["papers.year", "cited_counts.cited_by"]
        flags = rows("check: citations' flags", CITATION_FLAGS_SQL, params)
        found(
            "citations.listed_by",
            _total(flags),
            [
                f"citation {citing!r} -> {cited!r}: " + (
                    "a paper citing itself, which no writer keeps (a build drops self-citations)" if citing == cited
                    else "declared by neither paper's record" if not (by_citing or by_cited)
                    else "declared by the record of a paper the index lacks"
                )
                for citing, cited, by_citing, by_cited, _ in flags
            ],
        )  # fmt: skip
        keys = rows("check: citation_links against paper_keys", CITATION_KEYS_SQL, params)
        found(
            "citation_links vs paper_keys",
            _total(keys),
            [
                f"citation_links names the number {key!r}, which paper_keys lacks (the view citations leaves its "
                "rows out)" if kind == 0
                else f"paper_keys numbers {pid!r} as {key}, which no citation uses" if kind == 1
                else f"paper_keys numbers {pid!r} more than once (its unique index is gone)"
                for kind, key, pid, _ in keys
            ],
        )  # fmt: skip
        checked.append("citation_links vs paper_keys")
        orphans = rows("check: rows of papers the index lacks", ORPHAN_ROWS_SQL, params)
        found(
            "paper_authors and field_sources vs papers",
            _total(orphans),
            [f"{table} has a row of {pid!r}, which papers lacks" for table, pid, _ in orphans],
        )
        checked += ["citations.listed_by", "paper_authors and field_sources vs papers"]
        _author_keys(rows, found, limit)
        checked.append("paper_authors.surname and name_key")
        if info.get("semantic_model"):
            dims = int(info.get("semantic_dims") or 0)
            vectors = rows("check: paper_vectors", VECTORS_CHECK_SQL, {**params, "bytes": 2 * dims})
            found(
                "paper_vectors",
                _total(vectors),
                [
                    f"paper {pid!r} has {'no vector' if size is None else f'a vector of {size} bytes'}, "
                    f"where {info['semantic_model']} gives {2 * dims} bytes ({dims} float16 values)"
                    for pid, size, _ in vectors
                ],
            )
            checked.append("paper_vectors")
        if executor.dialect == SQLITE:
            pages = [row[0] for row in rows("check: PRAGMA integrity_check", INTEGRITY_SQL)]
            found("integrity_check", 0 if pages == ["ok"] else len(pages), pages)
            checked.append("integrity_check")
    finally:
        if begun and executor.conn.in_transaction:
            executor.run("check: end", "COMMIT")
    return CheckReport(where, problems, checked, notes, time.perf_counter() - started, build_command(where, info))


def _author_keys(rows, found, limit: int) -> None:
    """Each author's ``surname`` and ``name_key`` as the writers derive them from ``name`` (``names.name_key``,
    Python's, so read here page by page): the author filter matches those columns, not the name shown."""
    from ..corpus.names import name_key

    wrong, examples = 0, []
    after: tuple = ("", -1)
    while True:
        page = rows(
            "check: paper_authors' surname and name_key",
            AUTHOR_KEYS_SQL,
            {"paper_id": after[0], "position": after[1], "page": AUTHORS_PAGE},
        )
        for pid, position, name, surname, key in page:
            expected = name_key(name) if isinstance(name, str) else None
            if (surname, key) != expected:
                wrong += 1
                if len(examples) < limit:
                    derived = "none: the name is not text" if expected is None else repr(expected)
                    examples.append(
                        f"paper {pid!r}, author {position} {name!r}: surname and name_key {(surname, key)!r}, "
                        f"its name gives {derived}"
                    )
        if len(page) < AUTHORS_PAGE:
            break
        after = page[-1][:2]
    found("paper_authors.surname and name_key", wrong, examples)


def _total(rows: list[tuple]) -> int:
    return rows[0][-1] if rows else 0


def _posting_problem(term_id, doc_id, count, length, term) -> str:
    what = f"term_freq row (term {term_id} {term!r}, document {doc_id})"
    if term is None:
        return f"term_freq row (term {term_id}, document {doc_id}) names a term doc_freq lacks"
    if length is None:
        return f"{what} names a document doc_len lacks"
    return f"{what} has count {count!r}, its paper's length is {length!r}"


def _statistics(rows, info: dict[str, str], found, notes: list[str]) -> None:
    """``index_info`` on its own (types, ranges, avgdl, the seal), then against the tables."""
    try:
        IndexStats.from_info({k: v for k, v in info.items() if k != SEAL_KEY})
    except RetrievalError as exc:  # the open's message, less what it says to do (this is what it says to do)
        found("index_info", 1, [str(exc).removeprefix("the index is damaged: ").split("; `retrieval check`")[0]])
    if SEAL_KEY not in info:
        notes.append(
            "index_info has no seal (written before this version): an edit of its statistics shows only here; "
            "the next add, remove or build seals them"
        )
    elif not str(info[SEAL_KEY]).startswith(f"{SEAL_VERSION}:"):
        notes.append(
            f"index_info's seal is not of the kind this version writes ({SEAL_VERSION}:): it cannot tell whether the "
            "statistics were edited; a build with this version seals them anew"
        )
    else:
        try:
            check_seal(info)
        except NotAnIndexError:
            found("index_info.seal", 1, ["the statistics were changed after the index was written"])
    totals = rows("check: the statistics' own counts", TABLE_TOTALS_SQL)[0]
    wrong = [
        f"index_info.{key} is {stored!r}, the tables give {counted!r}"
        for key, (stored, counted) in statistics_disagreeing(info, totals).items()
    ]
    found("index_info vs doc_len and papers", len(wrong), wrong)


def _batches(terms: list[tuple]) -> list[tuple[int, int]]:
    """Term id ranges of about ``BATCH_POSTINGS`` postings each, covering every term id (those between and
    beyond ``doc_freq``'s too: a posting of a term doc_freq lacks is compared as well)."""
    low, high = -(2**62), 2**62
    out: list[tuple[int, int]] = []
    start, size = low, 0
    for term_id, df in terms:
        size += df if isinstance(df, int) and df > 0 else 0
        if size >= BATCH_POSTINGS:
            out.append((start, term_id))
            start, size = term_id + 1, 0
    out.append((start, high))
    return out


def _postings(rows, found, limit: int) -> None:
    """Each term's postings chunks against its ``term_freq`` rows and their papers' lengths, a batch of terms at
    a time (memory stays at one batch)."""
    differ: list[str] = []
    bounds: list[str] = []
    malformed: list[str] = []
    counts = [0, 0, 0]
    for first, last in _batches(rows("check: the terms", TERM_IDS_SQL)):
        params = {"first": first, "last": last}
        expected: dict[int, list[tuple]] = {}
        for term_id, doc_id, count, length in rows("check: term_freq, a batch of terms", BATCH_SQL, params):
            expected.setdefault(term_id, []).append((doc_id, count, length))
        chunks: dict[int, list[tuple]] = {}
        for row in rows("check: postings, a batch of terms", BATCH_CHUNKS_SQL, params):
            chunks.setdefault(row[0], []).append(row)
        names = dict(rows("check: term names", TERM_NAMES_SQL, params))
        for term_id in sorted(set(expected) | set(chunks)):
            label = f"term {term_id} {names.get(term_id, '(not in doc_freq)')!r}"
            got, errors = _decoded(chunks.get(term_id, []), label)
            for kind, text in errors:
                target = bounds if kind == "bounds" else malformed
                counts[0 if kind == "bounds" else 1] += 1
                target.append(text)
            if got is None:
                continue
            difference = _difference(expected.get(term_id, []), got)
            if difference:
                counts[2] += 1
                differ.append(f"{label}: {difference}")
    found("postings (malformed rows)", counts[1], malformed)
    found("postings.max_count, min_length, df and range", counts[0], bounds)
    found("postings vs term_freq and doc_len", counts[2], differ)


def _decoded(chunks: list[tuple], label: str) -> tuple[list[tuple] | None, list[tuple[str, str]]]:
    """The postings ``(doc id, count, length)`` of a term's chunk rows, and what is wrong with the rows
    themselves (``("malformed" | "bounds", message)``); None where a row cannot be decoded."""
    errors: list[tuple[str, str]] = []
    out: list[tuple] = []
    for _, first, last, df, max_count, min_length, doc_ids, counts, lengths in chunks:
        at = f"{label}, chunk at document {first}"
        problem = shape_problem(first, last, df, doc_ids, counts, lengths)  # what a search would refuse
        if problem is not None:
            errors.append(("malformed", f"{at}: {problem}"))
            return None, errors
        docs, cs, ls = decode(first, last, df, bytes(doc_ids), bytes(counts), bytes(lengths))
        truth = (int(docs[0]), int(docs[-1]), int(cs.max()), int(ls.min()))
        if (first, last, max_count, min_length) != truth or (len(docs) > 1 and not (docs[1:] > docs[:-1]).all()):
            errors.append(
                (
                    "bounds",
                    f"{at}: gives documents {first!r}-{last!r}, max_count {max_count!r}, min_length {min_length!r}; "
                    f"its postings {truth[0]}-{truth[1]}, {truth[2]}, {truth[3]}",
                )
            )
        out.extend(zip(docs.tolist(), cs.tolist(), ls.tolist(), strict=True))
    return out, errors


def _difference(expected: list[tuple], got: list[tuple]) -> str:
    """How a term's postings in the chunks (``got``) differ from its ``term_freq`` rows with their papers'
    lengths (``expected``), at the first document where they do; empty when they agree."""
    if expected == got:
        return ""
    want = {row[0]: row[1:] for row in expected}
    have = {row[0]: row[1:] for row in got}
    for doc in sorted(set(want) | set(have), key=_in_order):
        if doc not in have:
            return f"document {doc} is in term_freq, not in the postings chunks"
        if doc not in want:
            return f"document {doc} is in the postings chunks, not in term_freq"
        if want[doc] != have[doc]:
            return (
                f"at document {doc}, term_freq and doc_len give count {want[doc][0]!r} and length {want[doc][1]!r}, "
                f"the postings chunks {have[doc][0]!r} and {have[doc][1]!r}"
            )
    return "the postings are repeated"


def _in_order(doc) -> tuple:
    """Doc ids in order, any id a hand edit made text after the numbers."""
    return (0, doc, "") if isinstance(doc, int) else (1, 0, str(doc))
