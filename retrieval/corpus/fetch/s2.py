"""``retrieval fetch s2``: papers from the Semantic Scholar Graph API (``/graph/v1``), as its documentation says.

- **Search**: ``GET /paper/search/bulk`` (title and abstract, its query syntax: ``+`` AND, ``|`` OR, ``-`` NOT,
  phrases in quotes), up to 1,000 ids an answer, the next page named by the answer's ``token`` (null at the end);
  ``total`` is the estimate the progress bar shows. Filters: ``year``, ``venue``, ``fieldsOfStudy``,
  ``publicationTypes``, ``openAccessPdf``, ``minCitationCount``, and ``publicationDateOrYear`` for ``since``.
- **Records**: bulk search returns no references, so each page's ids are read whole through ``POST /paper/batch``
  (``{"ids": [...]}``, at most 500 ids a request, the answer a list in the same order with null for an id it does
  not know) with ``fields=paperId,title,abstract,year,authors,externalIds,references.paperId``, and turned into
  records by ``retrieval.corpus.jsonl.parse_s2`` (unresolved references, without a ``paperId``, left out); the
  DOI and arXiv id come from ``externalIds``.
- **Given ids** (``ids_from``): a file of ids or records (an arXiv fetch's output, say) is looked up through the
  batch instead of a search: an arXiv id as ``ARXIV:<id>``, a DOI as ``DOI:<doi>``, a Semantic Scholar id as it
  is. A paper found gets Semantic Scholar's id and references, and keeps the given record's title, abstract,
  year and authors where Semantic Scholar has none (its abstracts are missing for some publishers); a paper not
  found is written as it was given. This is how an arXiv fetch gets its references.
- **The neighbourhood**: the references hop reads the papers the search's papers cite most through the batch; the
  citing hop asks the batch for ``citations.paperId`` of 50 search papers at a time (each lists up to 9,999
  citing papers and an answer holds at most 10 MB: a refused batch is split in halves), then reads those papers.
- **Access**: a key from ``--api-key`` or ``$S2_API_KEY`` (``$SEMANTIC_SCHOLAR_API_KEY``) goes in the ``x-api-key``
  header; a key is granted 1 request a second, and one request a second is what the fetch sends without one
  too (the keyless pool is shared by everyone and answers 429 when busy).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from ...config import fetch_setting
from ...errors import ConfigError, FetchError, InputError
from ...validate import parse_years
from ..jsonl import json_lines, parse_jsonl, parse_s2
from .records import arxiv_id, checked_year, merge, normalize_doi, project_record, source_paper
from .run import Source, chunks, most_cited, run_fetch
from .session import Policy, Session

BASE_URL = "https://api.semanticscholar.org/graph/v1"
BULK = "/paper/search/bulk"
BATCH = "/paper/batch"
#: Ids one batch request may name (documented: 500).
BATCH_IDS = 500
#: Search papers whose citing papers one batch asks for: each lists up to 9,999 and an answer holds 10 MB at most.
CITING_BATCH = 50
FIELDS = "paperId,title,abstract,year,authors,externalIds,references.paperId"
#: Seconds between requests: what a key is granted (1 a second), and polite to the keyless shared pool.
INTERVAL = 1.0
_S2_ID = re.compile(r"^[0-9a-f]{40}$")
AUTH_HINT = (
    "set S2_API_KEY to a Semantic Scholar API key (request one at https://www.semanticscholar.org/product/api) or "
    "give --api-key; without a key, leave both unset"
)
_SPLIT = object()


def lookup_key(record: dict) -> str | None:
    """The batch id that finds ``record`` (a line of an ids file): its Semantic Scholar id, ``ARXIV:<id>``,
    ``DOI:<doi>``, or an id that already names its kind (``CorpusId:``, ``PMID:``, ...)."""
    pid = record.get("id") if isinstance(record.get("id"), str) else record.get("paperId")
    pid = pid.strip() if isinstance(pid, str) else ""
    if _S2_ID.match(pid):
        return pid
    arxiv = arxiv_id(record.get("arxiv")) or arxiv_id(pid)
    if arxiv:
        return f"ARXIV:{arxiv}"
    doi = normalize_doi(record.get("doi")) or normalize_doi(pid)
    if doi:
        return f"DOI:{doi}"
    return pid if ":" in pid else None


def read_ids(path: str | Path) -> list[tuple[str, dict]]:
    """``(batch id, given record)`` for each line of ``path``: a JSON record (the project's format, an arXiv
    fetch's output) or a bare id (``2101.00001``, ``10.1000/xyz``, a Semantic Scholar id); once each."""
    path = Path(path)
    out: dict[str, dict] = {}
    if not path.is_file():
        raise InputError(f"no file of ids at {path}: give a JSONL file of papers or a file of ids, one a line")
    with open(path, encoding="utf-8-sig", errors="replace") as handle:
        first = handle.readline().lstrip()
    if first.startswith("{"):
        lines = ((where, record) for where, record in json_lines(path, "a paper record"))
    else:
        with open(path, encoding="utf-8-sig", errors="replace") as handle:
            lines = [((str(path), n), {"id": t.strip()}) for n, t in enumerate(handle, 1) if t.strip()]
    for where, record in lines:
        key = lookup_key(record)
        if key is None:
            raise InputError.at(*where, "cannot tell what this id is: give an arXiv id, a DOI or a Semantic Scholar id")
        out.setdefault(key, record)
    return list(out.items())


def paper_record(paper: object, where: tuple[str, int], run) -> dict | None:
    """A Semantic Scholar paper as a record of the project's format; None (counted) when it cannot be."""
    parsed_paper, paper = source_paper(parse_s2, paper, where, "s2", "year", "paper", run)
    if parsed_paper is None:
        return None
    external = paper.get("externalIds") if isinstance(paper.get("externalIds"), dict) else {}
    return project_record(parsed_paper, normalize_doi(external.get("DOI")), arxiv_id(external.get("ArXiv")))


class SemanticScholar(Source):
    """A fetch from Semantic Scholar (see the module docstring)."""

    name = "s2"
    label = "Semantic Scholar"

    def __init__(
        self,
        *,
        search: str | None = None,
        ids_from: str | Path | None = None,
        years=None,
        venues=(),
        fields_of_study=(),
        types=(),
        open_access: bool = False,
        min_citations: int | None = None,
        since: str | None = None,
        max: int | None = None,
        max_hop: int | None = None,
        with_references: bool = False,
        with_citing: bool = False,
        base_url: str = BASE_URL,
        api_key: str | None = None,
    ) -> None:
        super().__init__(max, max_hop, with_references, with_citing)
        params: dict[str, str] = {}
        bounds = parse_years(years) if isinstance(years, str) else years
        if bounds:
            lo, hi = bounds
            params["year"] = str(lo) if lo == hi else f"{lo or ''}-{hi or ''}"
        if venues:
            params["venue"] = ",".join(venues)
        if fields_of_study:
            params["fieldsOfStudy"] = ",".join(fields_of_study)
        if types:
            params["publicationTypes"] = ",".join(types)
        if open_access:
            params["openAccessPdf"] = ""
        if min_citations is not None:
            params["minCitationCount"] = str(min_citations)
        if since:
            params["publicationDateOrYear"] = f"{since}:"
        if ids_from is not None and (search or params):
            raise ConfigError("--ids-from looks papers up by id: give it without --search and the search's filters")
        if ids_from is None and not search and not params:
            raise ConfigError("give --search, a filter (--year, --venue, --field-of-study, ...), --since or --ids-from")
        self.search_text = search
        self.filters = params
        self.ids = read_ids(ids_from) if ids_from is not None else None
        self.given = len(self.ids) if self.ids is not None else None
        self.ids_from = str(ids_from) if ids_from is not None else None
        self.base_url = base_url
        self.api_key = fetch_setting("s2_api_key", api_key)

    @property
    def limit(self) -> int:
        if self.ids is not None and self.max is None:
            return len(self.ids)
        return super().limit

    def request(self) -> dict:
        given = None
        if self.ids is not None:  # the ids' digest: the state is rewritten after each page and stays small
            given = hashlib.sha256("\n".join(key for key, _ in self.ids).encode("utf-8")).hexdigest()
        return {
            "source": self.name,
            "base_url": self.base_url,
            "search": self.search_text,
            "filters": self.filters,
            "ids_from": self.ids_from,
            "ids": given,
            "max": self.limit,
            "max_hop": self.max_hop,
            "phases": self.phases(),
        }

    def session(self, policy: Policy, notice) -> Session:
        headers = {"x-api-key": self.api_key} if self.api_key else {}
        return Session(
            self.base_url, policy=policy, interval=INTERVAL, headers=headers, auth_hint=AUTH_HINT, notice=notice
        )

    # -- requests ---------------------------------------------------------------------------------------------
    def _batch(self, session: Session, ids: list[str], fields: str = FIELDS) -> list:
        """The batch's answers for ``ids``, in order (None for an id Semantic Scholar does not know)."""
        answers: list = []
        for _, chunk in chunks(ids, BATCH_IDS):
            answer = session.post_json(BATCH, {"fields": fields}, {"ids": chunk})
            if not isinstance(answer, list) or len(answer) != len(chunk):
                raise FetchError(
                    f"{session.host} answered a batch of {len(chunk)} ids with something else than a list of "
                    f"{len(chunk)} papers: is --base-url a Semantic Scholar Graph API (.../graph/v1)?"
                )
            answers += answer
        return answers

    def _records(self, answers: list, run, label: str) -> list[dict]:
        out = []
        for number, paper in enumerate(answers, start=1):
            if paper is None:
                run.tally("not_found")
                continue
            if isinstance(paper, dict) and paper.get("paperId") in run.seen:
                run.tally("duplicates")
                continue
            record = paper_record(paper, (label, number), run)
            if record is not None:
                out.append(record)
        return out

    def _citing_ids(self, session: Session, seeds: list[str]) -> list[str]:
        """The ids of papers citing ``seeds``, in the seeds' order; a batch refused (too large) is split."""

        def split_if_too_large(response):
            return _SPLIT if response.status_code in (400, 413) and len(seeds) > 1 else None

        answer = session.post_json(BATCH, {"fields": "citations.paperId"}, {"ids": seeds}, refused=split_if_too_large)
        if answer is _SPLIT:
            half = len(seeds) // 2
            return self._citing_ids(session, seeds[:half]) + self._citing_ids(session, seeds[half:])
        if not isinstance(answer, list):
            raise FetchError(f"{session.host} answered a batch with something else than a list of papers")
        found = []
        for paper in answer:
            if not isinstance(paper, dict):  # null: an id Semantic Scholar does not know; anything else: no paper
                continue
            for entry in paper.get("citations") or []:
                if isinstance(entry, dict) and isinstance(entry.get("paperId"), str) and entry["paperId"]:
                    found.append(entry["paperId"])
        return found

    # -- the phases -------------------------------------------------------------------------------------------
    def search(self, run, session: Session, report) -> None:
        if self.ids is not None:
            return self._given(run, session, report)
        params = {"fields": "paperId", **self.filters, **({"query": self.search_text} if self.search_text else {})}
        token = run.position.get("token")
        while True:
            left = self.limit - run.count("search")
            if left <= 0:
                run.commit([], {}, finished=True)
                return
            answer = session.get_json(BULK, {**params, **({"token": token} if token else {})})
            if not isinstance(answer, dict) or not isinstance(answer.get("data"), list):
                raise FetchError(
                    f"{session.host} answered something that is not a page of papers (no 'data'): is --base-url "
                    "a Semantic Scholar Graph API (.../graph/v1)?"
                )
            if isinstance(answer.get("total"), int) and run.state.get("matched") is None:
                run.note("matched", answer["total"])
            ids = [p["paperId"] for p in answer["data"] if isinstance(p, dict) and isinstance(p.get("paperId"), str)]
            ids = list(dict.fromkeys(i for i in ids if i not in run.seen))[:left]
            records = self._records(self._batch(session, ids), run, "papers") if ids else []
            token = answer.get("token")
            last = not answer["data"] or not token
            run.commit(records, {"token": token}, finished=last, limit=left)
            if report:
                matched = run.state.get("matched")
                report(run.count("search"), min(matched, self.limit) if isinstance(matched, int) else None)
            if last:
                return

    def _given(self, run, session: Session, report) -> None:
        given = self.ids[: self.limit]
        start = int(run.position.get("next", 0))
        for first, chunk in chunks(given, BATCH_IDS):
            if first < start:
                continue
            answers = self._batch(session, [key for key, _ in chunk])
            records = []
            for number, ((_, record), answer) in enumerate(zip(chunk, answers, strict=True), start=first + 1):
                found = paper_record(answer, ("ids", number), run) if answer is not None else None
                mine, refused = _given_record(record, ("ids", number))
                if refused:  # written as given, it would be a file `retrieval build` refuses
                    run.tally("skipped", reason=refused)
                if answer is None:
                    run.tally("not_found")
                if found is not None and mine is not None:
                    found = merge(found, {**mine, "references": []})
                if found is not None or mine is not None:
                    records.append(found or mine)
            last = first + BATCH_IDS >= len(given)
            run.commit(records, {"next": first + BATCH_IDS}, finished=last)
            if report:
                report(run.count("search"), len(given))
        if run.phase == "search":
            run.commit([], {}, finished=True)

    def references(self, run, session: Session, report) -> None:
        position = run.position
        if "ids" not in position:
            # Semantic Scholar's own ids only: a given record kept as it was may cite in another id space
            records = (
                {**r, "references": [x for x in r["references"] if _S2_ID.match(x)]} for r in run.records("search")
            )
            wanted = most_cited(records, run.seen, self.max_hop)
            position = {"ids": wanted, "next": 0}
            run.commit([], position, finished=not wanted)
            if not wanted:
                return
        self._read(run, session, report, position, "references")

    def citing(self, run, session: Session, report) -> None:
        position = run.position
        if "ids" not in position:
            seeds = [r["id"] for r in run.records("search") if _S2_ID.match(r["id"])]  # not an e-print S2 lacks
            wanted: dict[str, None] = {}
            for _, chunk in chunks(seeds, CITING_BATCH):
                for pid in self._citing_ids(session, chunk):
                    if pid not in run.seen:
                        wanted.setdefault(pid)
                if len(wanted) >= self.max_hop:
                    break
            position = {"ids": list(wanted)[: self.max_hop], "next": 0}
            run.commit([], position, finished=not wanted)
            if not wanted:
                return
        self._read(run, session, report, position, "citing")

    def _read(self, run, session: Session, report, position: dict, phase: str) -> None:
        """Read the papers ``position["ids"]`` through the batch, from ``position["next"]`` on."""
        wanted = position["ids"]
        for start, chunk in chunks(wanted, BATCH_IDS):
            if start < position["next"]:
                continue
            chunk = [w for w in chunk if w not in run.seen]
            records = self._records(self._batch(session, chunk), run, phase) if chunk else []
            last = start + BATCH_IDS >= len(wanted)
            run.commit(
                records,
                {"ids": wanted, "next": start + BATCH_IDS},
                finished=last,
                limit=self.max_hop - run.count(phase),
            )
            if report:
                report(run.count(phase), len(wanted))
        if run.phase == phase:
            run.commit([], {}, finished=True)


def _given_record(record: dict, where: tuple) -> tuple[dict | None, str | None]:
    """A given line as a record of the project's format, when it is a paper (it has an id and a title), and
    ``None`` with why when the reader of that format would refuse it (authors as one string, a reference that is
    not a string): a record is written only as ``retrieval build`` reads it."""
    if not isinstance(record.get("id"), str) or not isinstance(record.get("title"), str):
        return None, None
    keys = ("id", "title", "abstract", "year", "authors", "references", "doi", "arxiv")
    out = {k: record[k] for k in keys if k in record}
    out.setdefault("abstract", "")
    out.setdefault("authors", [])
    out.setdefault("references", [])
    year, _ = checked_year(out.get("year"))
    out["year"] = year
    try:
        parse_jsonl(out, where, "given")
    except InputError as exc:
        return None, f"a given record the reader refuses ({getattr(exc, 'reason', exc)})"
    return json.loads(json.dumps(out)), None


def fetch_s2(out, *, restart: bool = False, policy: Policy | None = None, progress=None, notice=None, **options):
    """Fetch into the JSONL file ``out`` (resuming an unfinished fetch of the same request, or starting over with
    ``restart``) and return a ``FetchSummary``. ``options``: those of ``SemanticScholar``. ``policy`` sets the
    retries, timeouts and waits; ``progress(phase, done, total)`` and ``notice(line)`` hear how it goes."""
    return run_fetch(SemanticScholar(**options), out, restart=restart, policy=policy, progress=progress, notice=notice)
