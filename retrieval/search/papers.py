"""Reading papers by id: the statements that load what a result shows (titles and years for the blend; abstracts,
authors, references and citing papers for the entries returned), shared by search, ``similar`` and ``show``."""

from __future__ import annotations

import json
import re
from urllib.parse import unquote

from ..corpus.paper import Paper
from ..errors import NotAnIndexError, PaperNotFoundError
from ..store.database import build_command, shown
from ..store.sql.dialect import citations_by, register_sharded, statement
from ..store.sql.executor import Snapshot
from ..validate import LIMITS, check_choice, check_int, quoted


def by_id(*columns: str) -> str:
    """A statement reading ``columns`` of the papers whose ids the JSON list ``:paper_ids`` names, in the list's
    order on both dialects (SQLite's loop over json_each gives the rows so); returns its SQLite text. A sharded
    index's coordinator has a text of its own: the papers read once, by the id array, then put in the list's
    order (a lookup per id is a round trip to every shard)."""
    listed = ",\n       ".join(f"p.{column}" for column in columns)
    sqlite = statement(
        lambda d: (
            f"""\
SELECT {listed}
FROM {d.numbered_rows("paper_ids", "j")}
JOIN papers AS p ON p.id = j.value{d.in_list_order("j")}"""
        )
    )
    fetched = ",\n           ".join(f"p.{column}" for column in columns)
    sharded = f"""\
WITH j AS MATERIALIZED (
    SELECT value,
           position
    FROM jsonb_array_elements_text(CAST(:paper_ids AS jsonb)) WITH ORDINALITY AS j (value, position)
),
p AS MATERIALIZED (
    SELECT {fetched}
    FROM papers AS p
    WHERE p.id = ANY (ARRAY(SELECT value FROM j))
)
SELECT {listed}
FROM j
JOIN p ON p.id = j.value
ORDER BY j.position"""
    return register_sharded(sqlite, sharded)


# What the blend needs of every candidate; the rest is loaded for the returned entries only.
CANDIDATES_SQL = by_id("id", "title", "year")


def checked_years(snap: Snapshot, years: dict[str, object]) -> dict[str, int | None]:
    """``years`` (paper id -> ``papers.year`` as read), every one an integer within the index's year range or
    None; else the index is damaged (a year written by hand), said so (``NotAnIndexError``): the rankings
    compute with years (recency, the seeds' era), and a text or a year outside the range would be a crash or a
    recency no writer gave."""
    stats = snap.stats
    for pid, year in years.items():
        if year is None:
            continue
        where = shown(snap.executor.path)
        if not isinstance(year, int) or isinstance(year, bool):
            raise NotAnIndexError(
                f"{where} is damaged: papers.year of {quoted(pid)} is {quoted(str(year))}, not a year; "
                f"`retrieval check --db {where}` reports every problem, `{build_command(where, stats.info)}` "
                "rebuilds it"
            )
        if not (stats.min_year is not None and stats.min_year <= year <= stats.max_year):
            raise NotAnIndexError(
                f"{where} is damaged: papers.year of {quoted(pid)} is {year}, outside the years "
                f"{stats.min_year}-{stats.max_year} index_info gives; `retrieval check --db {where}` reports every "
                f"problem, `{build_command(where, stats.info)}` rebuilds it"
            )
    return years  # type: ignore[return-value]


def candidate_papers(snap: Snapshot, paper_ids: list[str], name: str) -> dict[str, Paper]:
    """The titles and years of ``paper_ids`` (``CANDIDATES_SQL``), every one of them: an id the lexical or the graph
    pass gave that ``papers`` lacks (a row deleted by hand) is a damaged index, said so, never a crash."""
    rows = snap.rows(name, CANDIDATES_SQL, {"paper_ids": json.dumps(paper_ids)})
    papers = {pid: Paper(pid, title, year=year, source="merged") for pid, title, year in rows}
    missing = [pid for pid in paper_ids if pid not in papers]
    where = shown(snap.executor.path)
    checked_years(snap, {pid: paper.year for pid, paper in papers.items()})
    if missing:
        more = f" and {len(missing) - 1:,} more" if len(missing) > 1 else ""
        damaged = NotAnIndexError(
            f"{where} is damaged: its postings name the paper {quoted(missing[0])}{more}, which the papers table "
            f"lacks; rebuild it with `{build_command(where, snap.stats.info)}`"
        )
        damaged.missing = missing  # a caller that gave the ids itself (``RetrievalClient.rank``) says so instead
        raise damaged
    return papers


def checked_counts(snap: Snapshot, counts: dict[str, int], what: str = "cited_counts.cited_by") -> dict[str, int]:
    """``counts`` (paper id -> how many papers cite it, from ``cited_counts``), each a whole number of at least 0:
    a negative or a text count (edited by hand) is a damaged index, said so with the paper's id, never a
    logarithm of a negative number or a ranking over it."""
    for pid, count in counts.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            where = shown(snap.executor.path)
            raise NotAnIndexError(
                f"{where} is damaged: {what} of {quoted(pid)} is {quoted(str(count))}, not a count of citing papers; "
                f"`retrieval check --db {where}` reports every problem, `{build_command(where, snap.stats.info)}` "
                "rebuilds it"
            )
    return counts


PAPERS_SQL = by_id("id", "title", "abstract", "year", "source")
ABSTRACTS_SQL = by_id("id", "abstract", "source")

AUTHORS_SQL = statement(
    lambda d: (
        f"""\
SELECT a.paper_id,
       a.name
FROM {d.rows("paper_ids", "j")}
JOIN paper_authors AS a ON a.paper_id = j.value
ORDER BY a.paper_id{d.bytes_order}, a.position"""
    )
)
# (Each id once, as the PostgreSQL text joins each listed id once.)
AUTHORS_SQL_SHARDED = """\
SELECT a.paper_id,
       a.name
FROM paper_authors AS a
WHERE a.paper_id = ANY (ARRAY(SELECT value FROM jsonb_array_elements_text(CAST(:paper_ids AS jsonb))))
ORDER BY a.paper_id COLLATE "C", a.position"""
register_sharded(AUTHORS_SQL, AUTHORS_SQL_SHARDED)

REFERENCES_SQL = statement(
    lambda d: (
        f"""\
SELECT c.citing_id,
       c.cited_id
FROM {d.rows("paper_ids", "j")}
JOIN citations AS c ON c.citing_id = j.value
ORDER BY c.citing_id{d.bytes_order}, c.cited_id{d.bytes_order}"""
    )
)
REFERENCES_SQL_SHARDED = f"""\
SELECT c.citing_id,
       c.cited_id
FROM {citations_by("citing", "SELECT value FROM jsonb_array_elements_text(CAST(:paper_ids AS jsonb))")}
ORDER BY c.citing_id COLLATE "C", c.cited_id COLLATE "C\""""
register_sharded(REFERENCES_SQL, REFERENCES_SQL_SHARDED)

CITED_BY_SQL = statement(
    lambda d: (
        f"""\
SELECT c.cited_id,
       c.citing_id
FROM {d.rows("paper_ids", "j")}
JOIN citations AS c ON c.cited_id = j.value
JOIN papers AS p ON p.id = c.citing_id
ORDER BY c.cited_id{d.bytes_order}, c.citing_id{d.bytes_order}"""
    )
)
CITED_BY_SQL_SHARDED = f"""\
WITH c AS MATERIALIZED (
    SELECT c.cited_id,
           c.citing_id
    FROM {citations_by("cited", "SELECT value FROM jsonb_array_elements_text(CAST(:paper_ids AS jsonb))")}
),
live AS MATERIALIZED (
    SELECT p.id
    FROM papers AS p
    WHERE p.id = ANY (ARRAY(SELECT DISTINCT citing_id FROM c))
)
SELECT c.cited_id,
       c.citing_id
FROM c
WHERE c.citing_id IN (SELECT id FROM live)
ORDER BY c.cited_id COLLATE "C", c.citing_id COLLATE "C\""""
register_sharded(CITED_BY_SQL, CITED_BY_SQL_SHARDED)


#: The papers that cite at least ``:min_references`` papers of the index (a reference to an id that is no paper of
#: the index is left out), with how many: the queries of citation recommendation an index holds
#: (``retrieval.eval.own``), each once.
CITING_PAPERS_SQL = statement(
    lambda d: (
        f"""\
SELECT c.citing_id,
       COUNT(*) AS references_in_index
FROM citations AS c
JOIN papers AS citing ON citing.id = c.citing_id
JOIN papers AS cited ON cited.id = c.cited_id
GROUP BY c.citing_id
HAVING COUNT(*) >= :min_references
ORDER BY c.citing_id{d.bytes_order}"""
    )
)


def add_abstracts(snap: Snapshot, papers: dict[str, Paper]) -> None:
    """Fill in the abstracts (and who supplied each record, ``source``) of ``papers`` (one statement): the page
    a search or ``similar`` returns, whose candidates were scored without them."""
    if papers:
        for pid, abstract, source in snap.rows(
            "returned papers: abstracts", ABSTRACTS_SQL, {"paper_ids": json.dumps(list(papers))}
        ):
            papers[pid].abstract = abstract
            papers[pid].source = source


def add_links(snap: Snapshot, papers: dict[str, Paper], links: bool = True) -> None:
    """Fill in the authors, and with ``links`` the references and citing papers, of ``papers`` (one statement
    each). A much-cited paper has thousands of citing papers: a caller that shows none asks for no links."""
    if not papers:
        return
    ids = {"paper_ids": json.dumps(list(papers))}
    for pid, name in snap.rows("papers: authors", AUTHORS_SQL, ids):
        papers[pid].authors.append(name)
    if not links:
        return
    for pid, ref in snap.rows("papers: references", REFERENCES_SQL, ids):
        papers[pid].references.append(ref)
    for pid, citer in snap.rows("papers: citing papers", CITED_BY_SQL, ids):
        papers[pid].citations.append(citer)


# -- a paper's links, a page at a time ----------------------------------------------------------------------------
#: How ``show`` may order a paper's references and citing papers: the most cited first, the newest first (papers
#: without a year last), or by id; ties, and ``id`` itself, by the ids' bytes on both dialects.
LINK_SORTS = ("citations", "year", "id")
_LINK_ORDER = {"citations": "coalesce(n.cited_by, 0) DESC, ", "year": "coalesce(p.year, -1) DESC, ", "id": ""}
#: The largest offset into one list of links: above any paper's count, and within every integer type the
#: dialects take for ``OFFSET`` (an offset past the end is an empty page; the work does not grow with it).
MAX_LINK_OFFSET = 100_000_000
#: ``limit=None`` (every link) as the statements' ``LIMIT``, which both dialects take as a number.
_ALL = 2**62


def _link_source(relation: str) -> str:
    """The ids of ``:paper_id``'s references (every one, in the corpus or not) or of its citing papers (those in
    the corpus: a citing id outside it has no page to show), one row each."""
    if relation == "references":
        return "SELECT c.cited_id AS paper_id FROM citations AS c WHERE c.citing_id = :paper_id"
    return (
        "SELECT c.citing_id AS paper_id FROM citations AS c JOIN papers AS q ON q.id = c.citing_id "
        "WHERE c.cited_id = :paper_id"
    )


def _links_sql(d, relation: str, sort: str) -> str:
    return f"""\
SELECT l.paper_id,
       p.title,
       p.year,
       coalesce(n.cited_by, 0) AS cited_by
FROM ({_link_source(relation)}) AS l
LEFT JOIN papers AS p ON p.id = l.paper_id
LEFT JOIN cited_counts AS n ON n.paper_id = l.paper_id
ORDER BY {_LINK_ORDER[sort]}l.paper_id{d.bytes_order}
LIMIT :limit OFFSET :offset"""


def _links_sql_sharded(relation: str, sort: str) -> str:
    """A sharded coordinator's text: the list's ids read once, then their papers and counts by one key array each
    (a lookup per link would be a round trip to a shard per link: thousands for a much-cited paper)."""
    source = f"SELECT c.cited_id AS paper_id FROM {citations_by('citing', 'SELECT CAST(:paper_id AS text)')}"
    join = "LEFT JOIN"
    if relation == "citations":
        source = f"SELECT c.citing_id AS paper_id FROM {citations_by('cited', 'SELECT CAST(:paper_id AS text)')}"
        join = "JOIN"  # a citing id outside the corpus is not listed
    return f"""\
WITH l AS MATERIALIZED (
    {source}
),
p AS MATERIALIZED (
    SELECT p.id,
           p.title,
           p.year
    FROM papers AS p
    WHERE p.id = ANY (ARRAY(SELECT paper_id FROM l))
),
n AS MATERIALIZED (
    SELECT n.paper_id,
           n.cited_by
    FROM cited_counts AS n
    WHERE n.paper_id = ANY (ARRAY(SELECT paper_id FROM l))
)
SELECT l.paper_id,
       p.title,
       p.year,
       coalesce(n.cited_by, 0) AS cited_by
FROM l
{join} p ON p.id = l.paper_id
LEFT JOIN n ON n.paper_id = l.paper_id
ORDER BY {_LINK_ORDER[sort]}l.paper_id COLLATE "C"
LIMIT :limit OFFSET :offset"""


#: One page of a paper's references or citing papers, each with its title and year (None outside the corpus) and
#: how many papers cite it, in the order ``sort`` asks: ``LINKS_SQL[relation, sort]``.
LINKS_SQL = {
    (relation, sort): register_sharded(
        statement(lambda d, r=relation, s=sort: _links_sql(d, r, s)), _links_sql_sharded(relation, sort)
    )
    for relation in ("references", "citations")
    for sort in LINK_SORTS
}
#: How many references a paper lists, how many of them are in the corpus, and how many papers of the corpus cite
#: it: the totals a page of its links is out of.
LINK_TOTALS_SQL = statement("""\
SELECT (SELECT count(*) FROM citations AS c WHERE c.citing_id = :paper_id) AS references_total,
       (SELECT count(*)
        FROM citations AS c
        JOIN papers AS p ON p.id = c.cited_id
        WHERE c.citing_id = :paper_id) AS references_in_corpus,
       (SELECT count(*)
        FROM citations AS c
        JOIN papers AS p ON p.id = c.citing_id
        WHERE c.cited_id = :paper_id) AS citations_total""")
LINK_TOTALS_SQL_SHARDED = f"""\
WITH refs AS MATERIALIZED (
    SELECT c.cited_id AS paper_id FROM {citations_by("citing", "SELECT CAST(:paper_id AS text)")}
),
citing AS MATERIALIZED (
    SELECT c.citing_id AS paper_id FROM {citations_by("cited", "SELECT CAST(:paper_id AS text)")}
)
SELECT (SELECT count(*) FROM refs) AS references_total,
       (SELECT count(*) FROM papers AS p WHERE p.id = ANY (ARRAY(SELECT paper_id FROM refs))) AS references_in_corpus,
       (SELECT count(*) FROM papers AS p WHERE p.id = ANY (ARRAY(SELECT paper_id FROM citing))) AS citations_total"""
register_sharded(LINK_TOTALS_SQL, LINK_TOTALS_SQL_SHARDED)


def check_links(limit: int | None, sort: str, references_offset: int, citations_offset: int) -> None:
    """The paging of ``show``: ``limit`` links per list (None: all), ``sort`` one of ``LINK_SORTS``, offsets of at
    least 0 (``ConfigError`` otherwise, naming the parameter)."""
    check_int("limit", limit, 1, LIMITS["limit"], allow_none=True)
    check_choice("sort", sort, LINK_SORTS)
    check_int("references_offset", references_offset, 0, MAX_LINK_OFFSET)
    check_int("citations_offset", citations_offset, 0, MAX_LINK_OFFSET)


def link_page(
    snap: Snapshot,
    paper: Paper,
    limit: int | None = None,
    sort: str = "citations",
    references_offset: int = 0,
    citations_offset: int = 0,
) -> PaperPage:
    """``paper``'s page (``PaperPage``): the totals of its references and citing papers, and of each list the
    ``limit`` links from its offset on, in the order ``sort`` asks, with the linked papers' titles, years, authors
    and citation counts. Two statements per list and one for the totals, whatever the paper's degree: a page of 20
    links of a paper cited 2,414 times reads 20 papers' authors, not 2,414."""
    check_links(limit, sort, references_offset, citations_offset)
    totals = snap.rows("show: totals", LINK_TOTALS_SQL, {"paper_id": paper.id})[0]
    linked: dict[str, Paper] = {}
    cited_by: dict[str, int] = {}
    lists = {}
    for relation, offset in (("references", references_offset), ("citations", citations_offset)):
        params = {"paper_id": paper.id, "limit": _ALL if limit is None else limit, "offset": offset}
        ids = []
        for pid, title, year, count in snap.rows(f"show: {relation}", LINKS_SQL[relation, sort], params):
            ids.append(pid)
            cited_by[pid] = count
            if title is not None:
                linked[pid] = Paper(pid, title, year=year, source="merged")
        lists[relation] = ids
    if linked:
        ids = {"paper_ids": json.dumps(list(linked))}
        for pid, name in snap.rows("show: the linked papers' authors", AUTHORS_SQL, ids):
            linked[pid].authors.append(name)
    paper.references, paper.citations = lists["references"], lists["citations"]
    checked_counts(snap, cited_by)
    return PaperPage(
        paper,
        linked,
        references_total=totals[0],
        references_in_corpus=totals[1],
        citations_total=totals[2],
        cited_by=cited_by,
        sort=sort,
        limit=limit,
        references_offset=references_offset,
        citations_offset=citations_offset,
    )


class PaperPage:
    """One paper as ``retrieval show`` prints it: the paper (authors, and in ``paper.references`` and
    ``paper.citations`` the page of its references and citing papers that was asked for), ``linked``, the papers of
    the corpus among those links (id -> ``Paper`` with title, year, authors), ``cited_by`` (each link's count of
    citing papers), and what the page is out of: ``references_total`` (``references_in_corpus`` of them in the
    corpus) and ``citations_total``, ordered by ``sort``, ``limit`` per list (None: all) from each list's offset."""

    def __init__(
        self, paper: Paper, linked: dict[str, Paper], *, references_total: int | None = None,
        references_in_corpus: int | None = None, citations_total: int | None = None,
        cited_by: dict[str, int] | None = None, sort: str = "id", limit: int | None = None,
        references_offset: int = 0, citations_offset: int = 0,
    ) -> None:  # fmt: skip
        self.paper = paper
        self.linked = linked
        self.references_total = len(paper.references) if references_total is None else references_total
        inside = sum(1 for pid in paper.references if pid in linked)
        self.references_in_corpus = inside if references_in_corpus is None else references_in_corpus
        self.citations_total = len(paper.citations) if citations_total is None else citations_total
        self.cited_by = cited_by or {}
        self.sort = sort
        self.limit = limit
        self.references_offset = references_offset
        self.citations_offset = citations_offset

    def __repr__(self) -> str:
        return (
            f"PaperPage({self.paper.id!r}, {len(self.paper.references)} of {self.references_total} references, "
            f"{len(self.paper.citations)} of {self.citations_total} citing)"
        )

    @property
    def complete(self) -> bool:
        """Whether both lists are whole (nothing before or after the page)."""
        return (
            self.references_offset == 0 and self.citations_offset == 0
            and len(self.paper.references) == self.references_total
            and len(self.paper.citations) == self.citations_total
        )  # fmt: skip

    def _links(self, ids: list[str]) -> list[dict]:
        out = []
        for pid in ids:
            other = self.linked.get(pid)
            out.append(
                {"id": pid, "in_corpus": other is not None, "title": other.title if other else None,
                 "year": other.year if other else None, "authors": list(other.authors) if other else [],
                 "cited_by": self.cited_by.get(pid, 0)}
            )  # fmt: skip
        return out

    def to_dict(self) -> dict:
        """The paper's fields, the page of each list, and what the page is out of: ``references_total``,
        ``references_in_corpus``, ``citations_total``, and ``links`` (the order, the limit per list, each list's
        offset and how many links it returned)."""
        data = self.paper.to_dict()
        data["references"] = self._links(self.paper.references)
        data["citations"] = self._links(self.paper.citations)
        data["references_total"] = self.references_total
        data["references_in_corpus"] = self.references_in_corpus
        data["citations_total"] = self.citations_total
        data["links"] = {
            "sort": self.sort,
            "limit": self.limit,
            "references_offset": self.references_offset,
            "references_returned": len(self.paper.references),
            "citations_offset": self.citations_offset,
            "citations_returned": len(self.paper.citations),
        }
        return data


# -- ids as people write them -------------------------------------------------------------------------------------
#: An arXiv id, new style (``2101.00001``) or old (``hep-th/9711200``, ``math.AG/0101001``), and its version.
_ARXIV = re.compile(r"(\d{4}\.\d{4,5}|[A-Za-z][A-Za-z-]*(?:\.[A-Za-z]{2})?/\d{7})(v\d+)?")
#: An arXiv page's address: the abstract, the PDF (``.pdf`` or not), the other formats; with or without a scheme.
_ARXIV_URL = re.compile(
    r"(?:https?://)?(?:www\.|export\.)?arxiv\.org/(?:abs|pdf|format|ps|html)/([^?#]+)(?:[?#].*)?", re.I
)


def _arxiv_path(path: str) -> str:
    """What an arXiv address names after ``/abs/`` (or ``/pdf/``...): ``path`` without its trailing slashes and
    then one ``.pdf``, never empty. (A pattern that matched this, a lazy group before ``/*``, tried every run of
    slashes at every position: an address of thousands of slashes took seconds.)"""
    trimmed = path.rstrip("/")
    if not trimmed:
        return path[:1]
    return trimmed[:-4] if len(trimmed) > 4 and trimmed[-4:].lower() == ".pdf" else trimmed


#: A DOI resolver's address (``https://doi.org/10....``, ``http://dx.doi.org/10....``).
_DOI_URL = re.compile(r"(?:https?://)?(?:dx\.)?doi\.org/([^?#]+)(?:[?#].*)?", re.I)
_OPENALEX_URL = re.compile(r"(?:https?://)?(?:api\.)?openalex\.org/(?:works/)?(W\d+)/*(?:[?#].*)?", re.I)
_S2_URL = re.compile(
    r"(?:https?://)?(?:www\.)?semanticscholar\.org/paper/(?:[^/?#]*/)?([0-9a-f]{40})/*(?:[?#].*)?", re.I
)
#: What a DOI looks like once its resolver and ``doi:`` are taken off.
_DOI = re.compile(r"10\.\d{4,9}/\S+")
#: arXiv's own DOIs (DataCite, since 2022): ``10.48550/arXiv.ID`` names the e-print ``ID``.
ARXIV_DOI_PREFIX = "10.48550/arxiv."


def id_forms(text: str) -> list[str]:
    """The ids ``text`` may name, the most literal first: ``text`` itself (as given, then trimmed), then, for an
    address or a prefixed id, what it names: an arXiv abstract or PDF address (``https://arxiv.org/abs/hep-th/9711200v2``,
    ``http://arxiv.org/pdf/1234.5678v1.pdf``) or ``arXiv:ID`` gives the arXiv id, then the id without its
    version (an index keeps e-prints unversioned); a DOI (``10.xxxx/...``, ``doi:10...``, ``https://doi.org/10...``,
    percent-encoded or not) gives the DOI as written and in lower case (DOIs are case-insensitive; fetched records
    keep them in lower case), and arXiv's DOI ``10.48550/arXiv.ID`` the arXiv id; an OpenAlex or Semantic Scholar
    address the work's id. Pure: which of them is a paper of the index is ``resolve_ids``'s question. ``text`` as
    given comes first of all: an id may begin or end with a space (a corpus file's id is kept as written)."""
    given = text.strip()
    forms = [text, given]
    core = given
    for pattern in (_ARXIV_URL, _OPENALEX_URL, _S2_URL, _DOI_URL):
        match = pattern.fullmatch(core)
        if match:
            core = match.group(1)
            core = unquote(core) if pattern is _DOI_URL else _arxiv_path(core) if pattern is _ARXIV_URL else core
            break
    else:
        if core[:6].lower() == "arxiv:":
            core = core[6:].strip()
        elif core[:4].lower() == "doi:":
            core = core[4:].strip()
    forms.append(core)
    if _DOI.fullmatch(core):
        forms.append(core.lower())
        if core.lower().startswith(ARXIV_DOI_PREFIX):
            core = core[len(ARXIV_DOI_PREFIX) :]
            forms.append(core)
    match = _ARXIV.fullmatch(core)
    if match and match.group(2):
        forms.append(match.group(1))
    return [form for form in dict.fromkeys(forms) if form]


#: Which of a list of ids are papers of the index.
KNOWN_IDS_SQL = statement(
    lambda d: (
        f"""\
SELECT p.id
FROM papers AS p
WHERE p.id {d.any_of("ids")}"""
    )
)


def resolve_ids(snap: Snapshot, texts: list[str]) -> dict[str, str | None]:
    """Each of ``texts`` -> the id of the paper it names in the index (``id_forms``: the first of its forms that is
    a paper's id), or None. One statement whatever the number of texts. The index keeps no DOIs of its own (the
    readers take a record's ``doi`` for no field): a DOI names a paper where it is the paper's id, or where it is
    arXiv's DOI of an e-print whose arXiv id is."""
    forms = {text: id_forms(text) if isinstance(text, str) else [] for text in texts}
    wanted = sorted({form for fs in forms.values() for form in fs})
    known = {pid for (pid,) in snap.rows("ids: which are papers", KNOWN_IDS_SQL, {"ids": json.dumps(wanted)})}
    return {text: next((form for form in fs if form in known), None) for text, fs in forms.items()}


#: What a blank id is told (not that no paper is named '').
EMPTY_ID = "a paper id is empty: give ids as `retrieval search` shows them"


def not_found(texts: list[str]) -> PaperNotFoundError:
    """The error for ids that name no paper of the index: each quoted (at most five), and how ids are given; for a
    DOI, that this index finds DOIs only where they are ids. A blank one is called empty (``EMPTY_ID``)."""
    if any(isinstance(t, str) and not t.strip() for t in texts):
        return PaperNotFoundError(EMPTY_ID)
    names = ", ".join(quoted(t) for t in texts[:5]) + (f" and {len(texts) - 5:,} more" if len(texts) > 5 else "")
    hint = "give ids as `retrieval search` shows them"
    if len(texts) == 1:
        hint = "give an id as `retrieval search` shows it"
    hint += " (an arXiv id may come as arXiv:ID or its arxiv.org address)"
    if any(_DOI.fullmatch(form) for t in texts if isinstance(t, str) for form in id_forms(t)):
        hint += (
            "; this index keeps no DOIs: a DOI finds a paper only where it is the paper's id, or arXiv's DOI "
            "10.48550/arXiv.ID of an e-print in the index"
        )
    return PaperNotFoundError(f"no paper {names} in the index: {hint}")
