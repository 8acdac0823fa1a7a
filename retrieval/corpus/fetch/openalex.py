"""``retrieval fetch openalex``: works from the OpenAlex API (``GET /works``), as the documentation describes it.

- **Paging**: cursor paging (``cursor=*``, then each answer's ``meta.next_cursor`` until it is null or the results
  are empty), the only paging that reaches past 10,000 results, at ``per_page`` 100: the most that
  developers.openalex.org documents (the older docs' 200 is deprecated; ``per_page`` can ask for it).
  ``meta.count`` is the estimate the progress bar shows.
- **What is asked for**: ``search`` (title, abstract and full text) and ``filter`` (comma-joined, each value list
  OR-ed with ``|``): ``topics.id``, ``concepts.id``, ``primary_location.source.id``, ``authorships.author.id``,
  ``authorships.institutions.id``, ``publication_year``, ``is_oa``, ``type``, and any other filter as written;
  ``select`` keeps the fields the record needs (``id``, ``doi``, ``title``, ``display_name``,
  ``publication_year``, ``authorships``, ``abstract_inverted_index``, ``referenced_works``, ``locations``).
- **Records**: ``retrieval.corpus.jsonl.parse_openalex`` (the abstract rebuilt from ``abstract_inverted_index``,
  ids without their URL prefix, ``referenced_works`` as references, authors in order); the DOI from ``doi``; the
  arXiv id from an arXiv DOI (``10.48550/arXiv.*``) or an arxiv.org location.
- **Keeping current**: ``since`` filters on ``from_publication_date`` (works published on or after the date). The
  ``from_created_date`` and ``from_updated_date`` filters are reserved to paid plans (developers.openalex.org,
  "Premium API filters"); ``since_field`` asks for them where a key allows it.
- **The neighbourhood**: the references hop asks for the works the search's papers cite most (``filter=
  openalex:W1|W2|...``, 100 ids a request); the citing hop for works that cite them (``filter=cites:...``, 50 search
  papers a request, the best-ranked first), each hop at most ``max_hop`` papers.
- **Access**: an API key (``api_key``; free, and asked of every caller since February 2026) and a contact address
  (``mailto``, OpenAlex's polite pool before keys), from the options or ``$OPENALEX_API_KEY`` and
  ``$OPENALEX_MAILTO``. At most 10 requests a second (the documented ceiling is 100).
"""

from __future__ import annotations

import re

from ...config import fetch_setting
from ...errors import ConfigError, FetchError
from ...validate import parse_years
from ..jsonl import parse_openalex
from .records import arxiv_id, normalize_doi, project_record, source_paper
from .run import Source, chunks, most_cited, run_fetch
from .session import USER_AGENT, Policy, Session

BASE_URL = "https://api.openalex.org"
#: Works a page holds: the most the current documentation allows.
PER_PAGE = 100
PER_PAGE_MOST = 200
#: Ids OR-ed in one filter (documented: up to 100); a citing request takes fewer, the best-ranked papers first.
OR_VALUES = 100
CITING_VALUES = 50
#: Seconds between requests: 10 a second, a tenth of the documented ceiling.
INTERVAL = 0.1
SELECT = "id,doi,title,display_name,publication_year,authorships,abstract_inverted_index,referenced_works,locations"
#: ``since_field`` -> the filter it sets.
SINCE_FILTERS = {
    "publication": "from_publication_date",
    "created": "from_created_date",
    "updated": "from_updated_date",
}
#: An OpenAlex id: a letter and digits (``W2741809807``, ``A5023888391``, ``T10001``).
_ID = re.compile(r"^[A-Za-z]\d+$")
_PREFIX = "https://openalex.org/"
AUTH_HINT = (
    "OpenAlex asks for an API key: set OPENALEX_API_KEY (free at https://openalex.org/settings/api) or give "
    "--api-key; the created and updated date filters need a paid plan"
)


def openalex_id(value: str, what: str = "id") -> str:
    """``value`` as an OpenAlex id (its URL prefix dropped), or ``ConfigError`` saying what one looks like."""
    text = value.strip().removeprefix(_PREFIX)
    if not _ID.match(text):
        raise ConfigError(
            f"{what} {value!r} is not an OpenAlex id (a letter and digits, such as A5023888391): look it up on "
            "https://openalex.org and give its id"
        )
    return text.upper()


def year_filter(years: str | tuple | None) -> str | None:
    """``publication_year``'s value for a range (``2019-2023``, ``2019-`` as ``>2018``, ``-2023`` as ``<2024``)."""
    bounds = parse_years(years) if isinstance(years, str) else years
    if not bounds:
        return None
    lo, hi = bounds
    if lo is not None and hi is not None:
        return str(lo) if lo == hi else f"{lo}-{hi}"
    return f">{lo - 1}" if lo is not None else f"<{hi + 1}"


def work_record(work: object, where: tuple[str, int], run) -> dict | None:
    """A work of an answer as a record of the project's format; None (counted as skipped) when it cannot be."""
    paper, work = source_paper(parse_openalex, work, where, "openalex", "publication_year", "work", run)
    if paper is None:
        return None
    doi = normalize_doi(work.get("doi"))
    arxiv = arxiv_id(doi) if doi else None
    for location in work.get("locations") or []:
        if arxiv or not isinstance(location, dict):
            break
        arxiv = arxiv_id(location.get("landing_page_url")) or arxiv_id(location.get("pdf_url"))
    return project_record(paper, doi, arxiv)


class OpenAlex(Source):
    """A fetch from OpenAlex (see the module docstring)."""

    name = "openalex"
    label = "OpenAlex"

    def __init__(
        self,
        *,
        search: str | None = None,
        topics=(),
        concepts=(),
        sources=(),
        authors=(),
        institutions=(),
        years=None,
        open_access: bool = False,
        types=(),
        filters=(),
        since: str | None = None,
        since_field: str = "publication",
        max: int | None = None,
        max_hop: int | None = None,
        with_references: bool = False,
        with_citing: bool = False,
        base_url: str = BASE_URL,
        api_key: str | None = None,
        mailto: str | None = None,
        per_page: int = PER_PAGE,
    ) -> None:
        super().__init__(max, max_hop, with_references, with_citing)
        if since_field not in SINCE_FILTERS:
            raise ConfigError(f"since_field {since_field!r}: use one of {', '.join(SINCE_FILTERS)}")
        if not 1 <= per_page <= PER_PAGE_MOST:
            raise ConfigError(f"per_page {per_page}: OpenAlex pages hold 1 to {PER_PAGE_MOST} works")
        parts = []
        for key, values, what in (
            ("topics.id", topics, "--topic"),
            ("concepts.id", concepts, "--concept"),
            ("primary_location.source.id", sources, "--source"),
            ("authorships.author.id", authors, "--author"),
            ("authorships.institutions.id", institutions, "--institution"),
        ):
            ids = [openalex_id(v, what) for v in values]
            if ids:
                parts.append(f"{key}:{'|'.join(ids)}")
        year = year_filter(years)
        if year:
            parts.append(f"publication_year:{year}")
        if open_access:
            parts.append("is_oa:true")
        if types:
            parts.append(f"type:{'|'.join(t.strip().lower() for t in types)}")
        parts += [f.strip() for f in filters if f.strip()]
        if since:
            parts.append(f"{SINCE_FILTERS[since_field]}:{since}")
        if not search and not parts:
            raise ConfigError(
                "give --search, a filter (--topic, --author, --source, --year, ...) or --since: a fetch of every "
                "work in OpenAlex is what its snapshot is for (https://docs.openalex.org/download-all-data)"
            )
        self.search_text = search
        self.filter = ",".join(parts)
        self.base_url = base_url
        self.api_key = fetch_setting("openalex_api_key", api_key)
        self.mailto = fetch_setting("openalex_mailto", mailto)
        self.per_page = per_page
        if not self.api_key:
            self.notes.append(
                "no OpenAlex API key: without one OpenAlex allows a small daily budget; set OPENALEX_API_KEY "
                "(free at https://openalex.org/settings/api)"
            )

    def request(self) -> dict:
        return {
            "source": self.name,
            "base_url": self.base_url,
            "search": self.search_text,
            "filter": self.filter,
            "max": self.limit,
            "max_hop": self.max_hop,
            "phases": self.phases(),
            "per_page": self.per_page,
        }

    def session(self, policy: Policy, notice) -> Session:
        contact = {"User-Agent": f"{USER_AGENT} mailto:{self.mailto}"} if self.mailto else {}
        return Session(
            self.base_url,
            headers=contact,
            policy=policy,
            interval=INTERVAL,
            params={"api_key": self.api_key, "mailto": self.mailto},
            auth_hint=AUTH_HINT,
            notice=notice,
        )

    def _page(self, session: Session, params: dict) -> tuple[list, dict]:
        answer = session.get_json("/works", {"select": SELECT, **params})
        if not isinstance(answer, dict) or not isinstance(answer.get("results"), list):
            raise FetchError(
                f"{session.host} answered something that is not a list of works (no 'results'): is --base-url "
                "an OpenAlex API?"
            )
        meta = answer.get("meta") if isinstance(answer.get("meta"), dict) else {}
        return answer["results"], meta

    def _records(self, works: list, run, label: str) -> list[dict]:
        out = []
        for number, work in enumerate(works, start=1):
            if isinstance(work, dict) and isinstance(work.get("id"), str) and _short(work["id"]) in run.seen:
                run.tally("duplicates")  # a work the set has (a citing work among the search's): not read again
                continue
            record = work_record(work, (label, number), run)
            if record is not None:
                out.append(record)
        return out

    # -- the phases -------------------------------------------------------------------------------------------
    def search(self, run, session: Session, report) -> None:
        params = {"search": self.search_text, "filter": self.filter}
        params = {k: v for k, v in params.items() if v}
        cursor = run.position.get("cursor", "*")
        asked = set()
        while True:
            left = self.limit - run.count("search")
            if left <= 0:
                run.commit([], {}, finished=True)
                return
            asked.add(cursor)
            works, meta = self._page(session, {**params, "per_page": min(self.per_page, left), "cursor": cursor})
            if isinstance(meta.get("count"), int) and run.state.get("matched") is None:
                run.note("matched", meta["count"])
            cursor = _next_cursor(meta, asked)
            last = not works or not cursor
            run.commit(self._records(works, run, "works"), {"cursor": cursor}, finished=last, limit=left)
            if report:
                report(run.count("search"), _total(run.state.get("matched"), self.limit))
            if last:
                return

    def references(self, run, session: Session, report) -> None:
        position = run.position
        if "ids" not in position:  # the phase starts: choose the references to fetch, once
            wanted = most_cited(run.records("search"), run.seen, self.max_hop)
            position = {"ids": wanted, "next": 0}
            run.commit([], position, finished=not wanted)
            if not wanted:
                return
        wanted = position["ids"]
        for start, chunk in chunks(wanted, OR_VALUES):
            if start < position["next"]:
                continue
            chunk = [w for w in chunk if w not in run.seen]
            works = []
            if chunk:
                ids = "|".join(chunk)
                works, _ = self._page(session, {"filter": f"openalex:{ids}", "per_page": len(chunk)})
            last = start + OR_VALUES >= len(wanted)
            run.commit(
                self._records(works, run, "references"),
                {"ids": wanted, "next": start + OR_VALUES},
                finished=last,
                limit=self.max_hop - run.count("references"),
            )
            if report:
                report(run.count("references"), len(wanted))
        if run.phase == "references":  # every chunk was committed before (a state saved between two phases)
            run.commit([], {}, finished=True)

    def citing(self, run, session: Session, report) -> None:
        seeds = [r["id"] for r in run.records("search")]
        position = run.position
        index, cursor = int(position.get("chunk", 0)), position.get("cursor", "*")
        asked: set = set()  # the pages of this chunk asked for (a fetch resumed mid-chunk starts it afresh)
        while True:
            left = self.max_hop - run.count("citing")
            chunk = seeds[index * CITING_VALUES : (index + 1) * CITING_VALUES]
            if left <= 0 or not chunk:
                run.commit([], {}, finished=True)
                return
            if cursor == "*":
                asked.clear()
            asked.add(cursor)
            works, meta = self._page(
                session,
                {"filter": f"cites:{'|'.join(chunk)}", "per_page": min(self.per_page, left), "cursor": cursor},
            )
            cursor = _next_cursor(meta, asked)
            if not works or not cursor:
                index, cursor = index + 1, "*"
            run.commit(self._records(works, run, "citing"), {"chunk": index, "cursor": cursor}, limit=left)
            if report:
                report(run.count("citing"), self.max_hop)


def _next_cursor(meta: dict, asked: set) -> str | None:
    """The page after this one (None at the end); a ``FetchError`` when the answer names a page already asked
    for: the same pages would come back for ever."""
    cursor = meta.get("next_cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise FetchError(
            f"OpenAlex answered a page whose next cursor is not text ({str(cursor)[:60]}): is --base-url the "
            "OpenAlex API? Stopped; what was fetched is kept, and the same command resumes"
        )
    if cursor is not None and cursor in asked:
        raise FetchError(
            "OpenAlex named a page it had already given as the next one (its cursor repeats): stopped, since "
            "the same pages would come back for ever; try again later"
        )
    return cursor


def _short(pid: str) -> str:
    return pid.removeprefix(_PREFIX)


def _total(matched: object, limit: int) -> int | None:
    return min(matched, limit) if isinstance(matched, int) else None


def fetch_openalex(out, *, restart: bool = False, policy: Policy | None = None, progress=None, notice=None, **options):
    """Fetch into the JSONL file ``out`` (resuming an unfinished fetch of the same request, or starting over with
    ``restart``) and return a ``FetchSummary``. ``options``: those of ``OpenAlex``. ``policy`` sets the
    retries, timeouts and waits; ``progress(phase, done, total)`` and ``notice(line)`` hear how it goes."""
    return run_fetch(OpenAlex(**options), out, restart=restart, policy=policy, progress=progress, notice=notice)
