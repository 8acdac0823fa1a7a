"""The commands as library functions: ``build``, ``add``, ``remove``, ``upgrade``, ``search``, ``stats``, ``check``, and
the query log (``log_enable``, ``log_status``, ``log_entries``, ``log_plot``). The CLI only parses and prints. Building
an index from the lesson's two mock clients lives here too, so that ``RetrievalClient`` only ever reads."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from .config import RetrievalConfig, resolve_db, resolve_db_path
from .errors import ConfigError, InputError, RetrievalError
from .search.client import RetrievalClient
from .store.backend import backend_of
from .store.database import BUILTIN_SOURCE, build_command, check_index, recorded_info
from .store.querylog import record_if_enabled
from .store.sql.dialect import register_sharded, statement
from .store.sql.executor import Executor
from .text import DEFAULT_STEM, DEFAULT_STOPWORDS
from .validate import LIMITS, check_int, paper_id_list

# The writers, the readers and the demo corpus are imported by the commands that use them, so that a process
# that only searches does not pay for their imports (bench/cli_start.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from .corpus.mock import ArxivMockClient, SemanticScholarMockClient
    from .corpus.paper import Paper
    from .search.blend import RetrievalResult
    from .search.papers import PaperPage
    from .search.similar import SimilarResult
    from .store.integrity import CheckReport
    from .store.progress import BuildProgress
    from .store.rows import WriteSummary
    from .store.sql.executor import Tracer

BUILTIN = BUILTIN_SOURCE


def _corpus_file(source: str | os.PathLike[str]) -> Path:
    src = Path(source)
    if str(source) == "-":
        raise InputError("papers are not read from standard input (-): write them to a file first and give that")
    if src.is_dir():
        raise InputError(f"{src} is a folder, not a corpus file: give a file of papers (JSONL, OpenAlex or S2 lines)")
    if os.path.exists(src) and not src.is_file():
        # A pipe (`-`, /dev/stdin, <(...)) or a device: a corpus is read more than once (its lines counted, then
        # parsed by several processes at their offsets).
        raise InputError(
            f"{src} is not a regular file (a pipe or a device): a corpus file is read more than once; write it to "
            "a file first (`... > papers.jsonl`) and give that"
        )
    if not src.is_file():
        raise InputError(f"no corpus file at {src}: give a file of papers (JSONL, OpenAlex or S2 lines)")
    return src


def _refuse_demo_over(backend) -> None:
    """Refuse to build the demo corpus (a build without a source) over an index of another corpus: a rebuild
    without ``--from`` would replace the user's papers with the demo's hundred."""
    info = recorded_info(backend.location)  # also an older revision's, or a damaged one's: the papers are the user's
    if info is None or info.get("source") == BUILTIN:
        return  # no index there, or the demo's: nothing of the user's to keep
    recorded = info.get("source") or ""
    corpus = f"an index of {recorded}" if recorded else "an index"
    count = info.get("n_papers", "")
    papers = f" ({int(count):,} papers)" if count.isdigit() else ""
    rebuild = build_command(backend.location, info)
    raise ConfigError(
        f"{backend.shown} holds {corpus}{papers}: a build without --from builds "
        f"the demo corpus, which would replace it. To rebuild it, give its corpus: `{rebuild}`; to build the demo "
        "corpus, choose another --db"
    )


def build(
    db: str | os.PathLike[str] | None = None,
    source: str | os.PathLike[str] | Iterable[Paper] | None = None,
    progress: BuildProgress | Callable[[int], None] | None = None,
    format: str | None = None,
    workers: int | None = None,
    stem: str | None = DEFAULT_STEM,
    stopwords: str | None = DEFAULT_STOPWORDS,
    shards: str | list[str] | None = None,
    semantic: str | None = "auto",
) -> WriteSummary:
    """Build the index at ``db`` (a file or a PostgreSQL URL, resolved as everywhere) from ``source``: a corpus
    file (``format`` jsonl, openalex or s2; detected when None), papers (``Paper``s, streamed once), or the
    built-in demo corpus when None; with ``workers`` tokenising processes (see
    ``retrieval.store.sqlite.build.build_index``, which says what ``progress`` is told), stemming with the
    Snowball stemmer ``stem`` (e.g. ``"english"``) and dropping the stop words ``stopwords`` (``"english"``) when
    given (neither by default; None or ``"none"`` for none; recorded in the index, later adds and queries use
    them), and encoding every paper's text with the model ``semantic`` (``"wordllama"``: ``retrieval.embed``)
    for the semantic signal: by default (``"auto"``) only where the corpus's citations are sparse (fewer than
    ``embed.AUTO_MAX_EDGES`` edges a paper) and the model is installed; None or ``"none"`` for no vectors. The
    summary's ``semantic`` names the model used, its ``notes`` how to add vectors where they would help. Replaces
    an existing index only when the build succeeds.

    ``shards`` (PostgreSQL URLs, a list or ``"URL,URL,..."``) makes ``db`` the coordinator of an index
    partitioned over those servers (``retrieval.store.postgres.shards``); a rebuild of a sharded index without it keeps
    its shards."""
    from .corpus.jsonl import PaperFile
    from .corpus.mock import ArxivMockClient, SemanticScholarMockClient, build_corpus, merge_clients

    check_int("workers", workers, 0, LIMITS["workers"], allow_none=True)  # 0 and 1: tokenise in this process
    from .store.progress import BuildProgress

    if progress is not None and not callable(progress) and not isinstance(progress, BuildProgress):
        raise ConfigError(f"progress must be a BuildProgress or a callable, got {type(progress).__name__}")
    backend = backend_of(db)
    options = {"progress": progress, "workers": workers, "stem": stem, "stopwords": stopwords, "semantic": semantic}
    if source is None:
        _refuse_demo_over(backend)
        corpus = build_corpus()
        papers = merge_clients(ArxivMockClient(corpus), SemanticScholarMockClient(corpus))
        return backend.build(papers, shards=shards, source=BUILTIN, **options)
    if not isinstance(source, (str, os.PathLike)):
        from .corpus.jsonl import checked_papers

        return backend.build(checked_papers(source), shards=shards, **options)
    src = _corpus_file(source)
    return backend.build(PaperFile(src, format), shards=shards, source=src.name, **options)


def add(
    source: str | os.PathLike[str] | Iterable[Paper],
    db: str | os.PathLike[str] | None = None,
    replace: bool = False,
    progress: Callable[[int], None] | None = None,
    format: str | None = None,
) -> WriteSummary:
    """Add the papers of ``source`` (a corpus file, or ``Paper``s) to the index at ``db`` (a file or a PostgreSQL
    URL) in one transaction; an id already there is an error unless ``replace``. Cost is proportional to the
    papers added, not to the index, and statistics stay exact: the index equals a rebuild from the new corpus."""
    from .corpus.jsonl import checked_papers, read_papers
    from .store.writer import add_papers

    if progress is not None and not callable(progress):
        raise ConfigError(f"progress must be a callable, got {type(progress).__name__}")

    if isinstance(source, (str, os.PathLike)):
        src = _corpus_file(source)
        source = (p for _, p in read_papers(src, format))
    else:
        source = checked_papers(source)
    return add_papers(source, backend_of(db), replace=replace, progress=progress)


def remove(ids: list[str], db: str | os.PathLike[str] | None = None) -> WriteSummary:
    """Remove the papers ``ids`` and their edges from the index at ``db`` (a file or a PostgreSQL URL) in one
    transaction."""
    from .store.writer import remove_papers

    return remove_papers(paper_id_list(ids, "ids"), backend_of(db))  # one id as a string, not its characters


def upgrade(db: str | os.PathLike[str] | None = None) -> tuple[str, str]:
    """Upgrade the index at ``db`` to this version's schema revision and tokeniser; ``(before, after)``, an
    ``Upgrade`` whose ``reindexed`` names the tokeniser version it re-indexed from (None: the text was not
    touched). Atomic: the old file stays as it was if the upgrade fails."""
    return backend_of(db).upgrade()


def search(
    query: str,
    db: str | os.PathLike[str] | None = None,
    config: RetrievalConfig | None = None,
    limit: int | None = 10,
    tracer: Tracer | None = None,
    *,
    offset: int = 0,
    year: str | None = None,
    authors: list[str] | tuple[str, ...] = (),
    sort: str | None = None,
    syntax: bool = True,
) -> RetrievalResult:
    """Search the index at ``db``; see ``RetrievalClient.search`` (filters, paging, query syntax). ``tracer`` sees
    every statement that runs."""
    with RetrievalClient(db, config, tracer=tracer) as client:
        # No references or citing papers: no output of a search shows them (a hub has thousands).
        result = client.search(query, limit=limit, offset=offset, year=year, authors=authors, syntax=syntax, sort=sort)
    info = client.last_stats.info if client.last_stats else None
    record_if_enabled(client.path, "search", result.query, result.config, result, info, limit=limit)  # never raises
    return result


def similar(
    paper_ids: list[str],
    db: str | os.PathLike[str] | None = None,
    limit: int = 10,
    *,
    offset: int = 0,
    exclude: list[str] | tuple[str, ...] = (),
    year: str | None = None,
    authors: list[str] | tuple[str, ...] = (),
    sort: str | None = None,
) -> SimilarResult:
    """Papers like ``paper_ids`` in the index at ``db``; see ``RetrievalClient.similar``."""
    with RetrievalClient(db) as client:
        result = client.similar(paper_ids, limit, offset=offset, exclude=exclude, year=year, authors=authors, sort=sort)
    extra = {"exclude": sorted(exclude)} if exclude else None
    info = client.last_stats.info if client.last_stats else None
    record_if_enabled(client.path, "similar", " ".join(result.seeds), None, result, info, limit=limit, extra=extra)
    return result


def show(paper_id: str, db: str | os.PathLike[str] | None = None, **paging) -> PaperPage:
    """One paper of the index at ``db`` with a page of its references and citing papers (``paging``: ``limit``,
    ``sort``, ``references_offset``, ``citations_offset``); see ``RetrievalClient.show``."""
    with RetrievalClient(db) as client:
        return client.show(paper_id, **paging)


#: Where a comment starts in a file of ids: a ``#`` at the start of the line, or after a space or tab.
_COMMENT = re.compile(r"(?:^|(?<=[ \t]))#")


def read_ids(path: str | os.PathLike[str]) -> list[str]:
    """Paper ids from a file, one per line (blank lines and ``#`` comments skipped: a ``#`` that starts a line or
    follows a space or tab; one inside an id is the id's): a reading list, or the papers to leave out of
    ``similar``."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors) is not the id's
    except FileNotFoundError:
        raise InputError(f"no file of paper ids at {path}: give a file with one id per line") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read paper ids from {path}: {error}") from None
    ids = (_COMMENT.split(line, maxsplit=1)[0].strip() for line in text.splitlines())
    return [pid for pid in ids if pid]


def build_from_clients(
    arxiv: ArxivMockClient, s2: SemanticScholarMockClient, db: str | os.PathLike[str] | None = None
) -> Path:
    """Build the index at ``db`` from the two mock clients' records merged by id (``merge_records``), unless
    it exists already; returns its path. The lesson's ``RetrievalClient(arxiv, s2)`` is this, then a client."""
    from .corpus.mock import merge_clients
    from .store.sqlite.build import build_index

    path = resolve_db_path(db)
    if not path.exists():
        build_index(merge_clients(arxiv, s2), path, source="mock clients")
    return path


def build_client(config: RetrievalConfig | None = None, db: str | os.PathLike[str] | None = None) -> RetrievalClient:
    """A client over the built-in demo corpus, building its index at ``db`` on first use."""
    from .corpus.mock import ArxivMockClient, SemanticScholarMockClient, build_corpus

    corpus = build_corpus()
    path = build_from_clients(ArxivMockClient(corpus), SemanticScholarMockClient(corpus), db)
    return RetrievalClient(path, config)


# Every count from small tables or one pass over ``citations``, none from a join of every citation row with
# ``papers`` twice (0.4 s on hepth) or a count of ``term_freq`` (1.9 million rows there):
# - postings: the sum of the terms' df, each the number of its ``term_freq`` rows (``retrieval check`` checks it);
# - citation rows, and the dangling ones (an end outside the corpus) whose cited end is outside, from the in-degrees
#   of ``cited_counts`` (each the count of rows naming the id, which ``retrieval check`` checks); those whose
#   citing end only is outside. A row the citing paper's own record declared (``listed_by_citing``) has that
#   paper in the corpus (removing a paper clears the flag of its rows), so only the rows a cited paper's list of
#   citing papers declared are looked up, as a build counts them (``retrieval.store.sqlite.bulk``).
STATS_SQL = statement("""\
SELECT (SELECT count(*) FROM papers) AS papers,
       (SELECT count(*) FROM doc_freq) AS terms,
       (SELECT coalesce(sum(t.df), 0) FROM doc_freq AS t) AS postings,
       (SELECT coalesce(sum(n.cited_by), 0) FROM cited_counts AS n) AS citation_rows,
       (SELECT coalesce(sum(n.cited_by), 0)
        FROM cited_counts AS n
        WHERE n.paper_id NOT IN (SELECT p.id FROM papers AS p)) AS cited_outside,
       (SELECT count(*)
        FROM citations AS c
        WHERE NOT c.listed_by_citing
          AND NOT EXISTS (SELECT 1 FROM papers AS p WHERE p.id = c.citing_id)
          AND EXISTS (SELECT 1 FROM papers AS p WHERE p.id = c.cited_id)) AS citing_outside""")
# A sharded index's coordinator: the same counts from the citations themselves (its rows and in-degrees are a single
# server's, those of ids outside the corpus included), each end tested against the papers' ids hashed once, never
# looked up per row (a foreign read per row would be a round trip to a shard).
register_sharded(
    STATS_SQL,
    """\
SELECT (SELECT count(*) FROM papers) AS papers,
       (SELECT count(*) FROM doc_freq) AS terms,
       (SELECT coalesce(sum(t.df), 0) FROM doc_freq AS t) AS postings,
       (SELECT count(*) FROM citation_links) AS citation_rows,
       (SELECT count(*) FROM citations AS c WHERE c.cited_id NOT IN (SELECT p.id FROM papers AS p)) AS cited_outside,
       (SELECT count(*)
        FROM citations AS c
        WHERE NOT c.listed_by_citing
          AND c.citing_id NOT IN (SELECT p.id FROM papers AS p)
          AND c.cited_id IN (SELECT p.id FROM papers AS p)) AS citing_outside""",
)


def stats(db: str | os.PathLike[str] | None = None) -> dict:
    """What the index at ``db`` holds: papers, edges, terms, avgdl, years, schema revision, file size, ...
    (on PostgreSQL, ``file_bytes`` is the size of the index's schema ``retrieval``: tables, indexes, TOAST; of a
    sharded index, the coordinator's tables and every shard's, and ``shards`` lists the shards' URLs)."""
    backend = backend_of(db)
    conn = backend.connect()
    executor = Executor(conn, None, backend.location)
    try:
        info = backend.check(executor.rows)
        with executor.snapshot() as snap:  # every count from one state of the index
            papers, terms, postings, total, cited_outside, citing_outside = snap.rows("stats: counts", STATS_SQL)[0]
            size = backend.size(snap.rows)
            size += sum(backend.size(shard.rows) for shard in executor.shards or ())  # a sharded index's shards
    finally:
        executor.close_shards()  # a sharded index: its shards' connections too
        conn.close()
    dangling = cited_outside + citing_outside
    edges = total - dangling
    path = backend.shown
    return {
        "path": str(path),
        "papers": papers,
        "edges": edges,
        "dangling_references": dangling,
        "terms": terms,
        "postings": postings,
        "avgdl": info.avgdl,
        "min_year": info.min_year,
        "max_year": info.max_year,
        "k1": info.k1,
        "b": info.b,
        "tokeniser": f"{info.tokeniser} v{info.tokeniser_version}",
        "stemmer": info.analyser.stem or "none",
        "stopwords": info.analyser.stopwords or "none",
        "semantic_model": info.info.get("semantic_model") or "none",
        "schema_revision": info.info.get("schema_revision"),
        "source": info.info.get("source"),
        "built_at": info.info.get("built_at"),
        "file_bytes": size,
        **({"shards": [s["url"] for s in json.loads(info.info["shards"])]} if "shards" in info.info else {}),
    }


def check(db: str | os.PathLike[str] | None = None, limit: int = 5) -> CheckReport:
    """Check the index at ``db`` (a file or a PostgreSQL URL) against every invariant a search relies on
    (``retrieval.store.integrity``: the statistics against the tables, df and the postings BLOBs against
    ``term_freq``, lengths, counts, years, citation counts, and SQLite's ``PRAGMA integrity_check``), reading the
    whole index once and writing nothing. ``limit``: examples per problem. ``report.ok`` when none is found."""
    from .store.integrity import check as check_invariants

    check_int("limit", limit, 0, LIMITS["limit"])  # "x" reached SQL: "cannot read the index (datatype mismatch)"
    backend = backend_of(db)
    conn = backend.connect()  # a missing index says how to build one
    executor = Executor(conn, None, backend.location)
    try:
        return check_invariants(executor, backend.location, limit)
    finally:
        executor.close_shards()
        conn.close()


def log_enable(on: bool, db: str | os.PathLike[str] | None = None) -> bool:
    """Turn the query log of the index at ``db`` on or off (``retrieval log on|off``); returns whether it was on.
    Turning on an index at revision 0004 is refused with ``retrieval upgrade`` (see ``retrieval.store.querylog``)."""
    from .store.querylog import enable

    return enable(resolve_db(db), on)


def log_status(db: str | os.PathLike[str] | None = None) -> bool:
    """Whether the index at ``db`` logs its queries."""
    from .store.querylog import is_enabled

    path = resolve_db(db)
    check_index(path)
    return is_enabled(path)


def log_entries(db: str | os.PathLike[str] | None = None, since: object = None) -> list[dict]:
    """The query log of the index at ``db``, oldest first, from ``since`` on (an ISO 8601 date or time, UTC unless
    it says otherwise): one dict per logged search, similar or explain."""
    from .store.querylog import entries

    return entries(resolve_db(db), since)


def log_plot(out: str | os.PathLike[str], db: str | os.PathLike[str] | None = None, since: object = None) -> int:
    """Draw the query log of the index at ``db`` (from ``since`` on) as a PNG at ``out``: hit count, top score and
    latency over time. Returns the number of entries drawn. Needs matplotlib (``pip install 'retrieval[eval]'``)."""
    from .store.querylog import entries, plot

    backend = backend_of(db)
    rows = entries(backend, since)
    if not rows and since is not None and entries(backend, None):
        raise RetrievalError(f"the query log has no entries since {since} to plot: give an earlier --since")
    plot(rows, out, title=f"query log of {backend.name}")
    return len(rows)


# -- the names of earlier releases ----------------------------------------------------------------------------------
def _deprecated(old: str, new: str) -> None:
    import warnings

    warnings.warn(f"retrieval.{old} is deprecated: use retrieval.{new}", DeprecationWarning, stacklevel=3)


def build_index(papers: Iterable[Paper], path: str | os.PathLike[str], **options) -> WriteSummary:
    """Deprecated alias of ``build(path, papers, ...)`` (kept for one release)."""
    _deprecated("build_index(papers, path)", "build(path, papers)")
    return build(path, papers, **options) if "source" not in options else backend_of(path).build(papers, **options)


def add_papers(papers: Iterable[Paper], path: str | os.PathLike[str], **options) -> WriteSummary:
    """Deprecated alias of ``add(papers, path, ...)`` (kept for one release)."""
    _deprecated("add_papers", "add")
    return add(papers, path, **options)


def remove_papers(ids: Iterable[str], path: str | os.PathLike[str]) -> WriteSummary:
    """Deprecated alias of ``remove(ids, path)`` (kept for one release)."""
    _deprecated("remove_papers", "remove")
    return remove(ids, path)


def upgrade_index(path: str | os.PathLike[str]) -> tuple[str, str]:
    """Deprecated alias of ``upgrade(path)`` (kept for one release)."""
    _deprecated("upgrade_index", "upgrade")
    return upgrade(path)
