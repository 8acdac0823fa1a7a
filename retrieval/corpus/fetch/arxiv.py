"""``retrieval fetch arxiv``: e-prints from the arXiv API (``GET /api/query``, an Atom 1.0 feed), as its user
manual describes it.

- **Query**: ``search_query`` built from categories (``cat:cs.IR``, several OR-ed), words (``all:word``, AND-ed)
  or arXiv's own syntax as given (``ti:transformer AND au:bengio``), and the submission dates
  (``submittedDate:[YYYYMMDD0000 TO YYYYMMDD2359]``). A date range is asked for a calendar month at a time, each
  month a query of its own in ascending submission order: one query reaches at most 30,000 results, and a past
  month's order does not change under the fetch. Without dates, the newest first.
- **Paging**: ``start`` and ``max_results`` (500 a page; the manual allows slices of up to 2,000), one request
  every 3 seconds (the manual's rule for its API), one connection. ``opensearch:totalResults`` is the estimate.
  arXiv now and then answers a page with no entries before the end: such a page is asked for again, as is a
  first page that says there are no results at all (once).
- **Records**: the id without its version (``2101.00001``, ``hep-th/9901001``) from ``<id>``; ``<title>`` and
  ``<summary>`` with their line breaks folded; the year of ``<published>`` (the first version); ``<author><name>``
  in order; ``<arxiv:doi>`` (the journal's DOI) when given. arXiv lists no references: join a fetched set with
  Semantic Scholar (``retrieval fetch s2 --ids-from arxiv.jsonl``) to get them.
- **Errors**: arXiv answers a malformed query with a feed whose one entry is an error; its text is the message.
"""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from datetime import date, datetime, timezone

import httpx

from ...errors import ConfigError, FetchError
from ..paper import Paper
from .records import arxiv_id, checked_year, iso_date, normalize_doi, project_record
from .run import Source, run_fetch
from .session import Policy, Retry, Session

BASE_URL = "https://export.arxiv.org/api"
QUERY = "/query"
#: Entries a page holds.
PAGE = 500
#: Results one query reaches (the user manual).
QUERY_MOST = 30_000
#: Pages in a row of entries already fetched after which a window is given up: an API that answers the same page
#: whatever ``start`` asks would otherwise be asked up to ``QUERY_MOST`` deep, a request every few seconds.
REPEATS_MOST = 3
#: Seconds between requests (the user manual: "no more than one request every three seconds").
INTERVAL = 3.0
NS = {
    "atom": "http://www.w3.org/2005/Atom",
    "opensearch": "http://a9.com/-/spec/opensearch/1.1/",
    "arxiv": "http://arxiv.org/schemas/atom",
}
_ERRORS = "http://arxiv.org/api/errors"


def months(first: date, last: date) -> list[tuple[date, date]]:
    """The calendar months from ``first`` to ``last``, each as ``(from, to)`` clipped to the range."""
    out = []
    start = first
    while start <= last:
        following = date(start.year + start.month // 12, start.month % 12 + 1, 1)
        end = min(last, date.fromordinal(following.toordinal() - 1))
        out.append((start, end))
        start = following
    return out


class Page:
    """One answer: its entries, ``total`` (``opensearch:totalResults``) and the error entry's text, if any."""

    __slots__ = ("entries", "total", "error")

    def __init__(self, entries: list, total: int | None, error: str | None) -> None:
        self.entries = entries
        self.total = total
        self.error = error


def parse_feed(content: bytes) -> Page:
    """An Atom answer as a ``Page``; an answer that is not XML (cut off) is a ``Retry``."""
    try:
        root = ElementTree.fromstring(content)
    except ElementTree.ParseError as exc:
        raise Retry(f"the answer is not valid XML ({exc})") from None
    if root.tag != f"{{{NS['atom']}}}feed":
        raise FetchError("the answer is not an Atom feed: is --base-url an arXiv API (.../api)?")
    entries = root.findall("atom:entry", NS)
    total_text = root.findtext("opensearch:totalResults", default="", namespaces=NS).strip()
    total = int(total_text) if total_text.isdigit() else None
    error = None
    if len(entries) == 1 and (entries[0].findtext("atom:id", default="", namespaces=NS) or "").startswith(_ERRORS):
        error = " ".join((entries[0].findtext("atom:summary", default="", namespaces=NS) or "").split())
        entries = []
    return Page(entries, total, error)


def entry_record(entry: ElementTree.Element, run) -> dict | None:
    """An Atom ``<entry>`` as a record of the project's format; None (counted as skipped) without an arXiv id."""
    raw_id = entry.findtext("atom:id", default="", namespaces=NS)
    pid = arxiv_id(raw_id)
    if pid is None:
        run.tally("skipped", reason=f"an entry whose id {raw_id[:60]!r} is not an arXiv id")
        return None
    if pid in run.seen:  # a page that shifted under a newest-first fetch repeats an entry
        run.tally("duplicates")
        return None
    published = (entry.findtext("atom:published", default="", namespaces=NS) or "").strip()
    year, dropped = checked_year(int(published[:4]) if published[:4].isdigit() else None)
    if dropped:
        run.tally("years_dropped")
    authors = [
        name
        for author in entry.findall("atom:author", NS)
        if (name := " ".join((author.findtext("atom:name", default="", namespaces=NS) or "").split()))
    ]
    paper = Paper(
        id=pid,
        title=entry.findtext("atom:title", default="", namespaces=NS) or "",
        abstract=entry.findtext("atom:summary", default="", namespaces=NS) or "",
        year=year,
        authors=authors,
        source="arxiv",
    )
    return project_record(paper, normalize_doi(entry.findtext("arxiv:doi", default="", namespaces=NS)), pid)


class Arxiv(Source):
    """A fetch from arXiv (see the module docstring)."""

    name = "arxiv"
    label = "arXiv"

    def __init__(
        self,
        *,
        search: str | None = None,
        query: str | None = None,
        categories=(),
        since: str | None = None,
        until: str | None = None,
        max: int | None = None,
        base_url: str = BASE_URL,
        today: date | None = None,
    ) -> None:
        super().__init__(max, None, False, False)
        parts = []
        cats = [c.strip() for c in categories if c.strip()]
        if cats:
            clause = " OR ".join(f"cat:{c}" for c in cats)
            parts.append(clause if len(cats) == 1 else f"({clause})")
        words = (search or "").split()
        parts += [f"all:{w}" for w in words]
        if query and query.strip():
            parts.append(f"({query.strip()})")
        if not parts and not since:
            raise ConfigError("give --category, --search, --query or --since: arXiv is not fetched whole this way")
        self.base_query = " AND ".join(parts)
        today = today or datetime.now(timezone.utc).date()
        first = date.fromisoformat(iso_date(since)) if since else None
        last = date.fromisoformat(iso_date(until, "--until")) if until else today
        if first is None and until:
            raise ConfigError("--until needs --since (the first day of the range)")
        if first is not None and first > last:
            raise ConfigError(f"--since {first} is after --until {last}: give the earlier date first")
        self.windows = [(a.isoformat(), b.isoformat()) for a, b in months(first, last)] if first else [None]
        self.base_url = base_url

    def request(self) -> dict:
        return {
            "source": self.name,
            "base_url": self.base_url,
            "query": self.base_query,
            "windows": self.windows,
            "max": self.limit,
            "phases": self.phases(),
        }

    def session(self, policy: Policy, notice) -> Session:
        return Session(self.base_url, policy=policy, interval=INTERVAL, notice=notice)

    def _query(self, window) -> str:
        if window is None:
            return self.base_query
        first, last = (d.replace("-", "") for d in window)
        dates = f"submittedDate:[{first}0000 TO {last}2359]"
        return f"{self.base_query} AND {dates}" if self.base_query else dates

    def _page(self, session: Session, window, start: int, size: int) -> Page:
        params = {
            "search_query": self._query(window),
            "start": start,
            "max_results": size,
            "sortBy": "submittedDate",
            "sortOrder": "descending" if window is None else "ascending",
        }

        def parse(response: httpx.Response) -> Page:
            page = parse_feed(response.content)
            if page.error:
                raise FetchError(f"arXiv refused the query ({page.error}): check --query and --category")
            if not page.entries and page.total is not None and start < page.total:
                raise Retry(f"an empty page at {start:,} of {page.total:,} (arXiv answers one now and then)")
            return page

        def refused(response: httpx.Response) -> None:
            try:
                page = parse_feed(response.content)
            except (Retry, FetchError):
                return None
            if page.error:
                raise FetchError(f"arXiv refused the query ({page.error}): check --query and --category")
            return None

        return session.request("GET", QUERY, params=params, parse=parse, refused=refused)

    def search(self, run, session: Session, report) -> None:
        index, start = int(run.position.get("window", 0)), int(run.position.get("start", 0))
        if run.state.get("matched") is None and len(self.windows) > 1:  # the whole range's count, for the estimate
            whole = (self.windows[0][0], self.windows[-1][1])
            run.note("matched", self._page(session, whole, 0, 1).total)
        repeated = 0  # pages in a row that brought no new entry
        while True:
            left = self.limit - run.count("search")
            if left <= 0 or index >= len(self.windows):
                run.commit([], {}, finished=True)
                return
            window = self.windows[index]
            size = min(PAGE, left, QUERY_MOST - start)
            page = self._page(session, window, start, size)
            if start == 0 and not page.entries:  # arXiv's spurious "no results": asked once more
                page = self._page(session, window, start, size)
            if run.state.get("matched") is None:
                run.note("matched", page.total)
            records = [r for r in (entry_record(e, run) for e in page.entries) if r is not None]
            repeated = repeated + 1 if page.entries and not records else 0
            start += len(page.entries)
            window_done = not page.entries or (page.total is not None and start >= page.total)
            if not window_done and repeated >= REPEATS_MOST:
                window_done = True
                self.notes.append(
                    f"arXiv answered {REPEATS_MOST} pages in a row with no entry not fetched before (at {start:,} of "
                    f"{page.total if page.total is not None else '?'}): a month was cut there; fetch it again later"
                )
            if not window_done and start >= QUERY_MOST:
                window_done = True
                self.notes.append(f"arXiv returns at most {QUERY_MOST:,} results a query: a month was cut there")
            if window_done:
                index, start, repeated = index + 1, 0, 0
            last = index >= len(self.windows)
            run.commit(records, {"window": index, "start": start}, finished=last, limit=left)
            if report:
                matched = run.state.get("matched")
                report(run.count("search"), min(matched, self.limit) if isinstance(matched, int) else None)
            if last:
                return


def fetch_arxiv(out, *, restart: bool = False, policy: Policy | None = None, progress=None, notice=None, **options):
    """Fetch into the JSONL file ``out`` (resuming an unfinished fetch of the same request, or starting over with
    ``restart``) and return a ``FetchSummary``. ``options``: those of ``Arxiv``. ``policy`` sets the
    retries, timeouts and waits; ``progress(phase, done, total)`` and ``notice(line)`` hear how it goes."""
    return run_fetch(Arxiv(**options), out, restart=restart, policy=policy, progress=progress, notice=notice)
