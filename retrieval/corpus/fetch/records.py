"""Fetched papers as records of the project's own JSONL format, and the merge of two records of one paper.

A fetched set is written in the project's format (``{"id", "title", "abstract", "year", "authors",
"references"}``), whatever the source, rather than in the source's: one reader path for ``build`` and ``add``,
records of different sources side by side in one file, and duplicates found by id or DOI on one shape. Two keys
the ``Paper`` record has no field for ride along, and the reader ignores them (it reads the keys it knows):
``doi`` (lower case, without ``https://doi.org/``) and ``arxiv`` (the arXiv id without its version), for joining
sets from several sources later.

Source records go through the readers' own parsers (``retrieval.corpus.jsonl``: ``parse_openalex``, ``parse_s2``)
so that a fetched paper is exactly what ``build --from`` makes of that source's record; a record those parsers
refuse is skipped and counted, never written (it would stop the build). A year outside the readers' range
(OpenAlex has a few works dated 0 or 9999) is dropped to null instead, keeping the paper.
"""

from __future__ import annotations

import re
from datetime import date

from ...errors import ConfigError, InputError
from ..jsonl import YEARS, Where, has_control
from ..paper import Paper

#: The prefixes a DOI may come with (OpenAlex writes ``https://doi.org/10....``).
_DOI_PREFIXES = ("https://doi.org/", "http://doi.org/", "https://dx.doi.org/", "http://dx.doi.org/", "doi:")
#: arXiv's own DOIs (DataCite, since 2022): ``10.48550/arXiv.2101.00001``.
ARXIV_DOI = "10.48550/arxiv."
#: An arXiv id, new style (``2101.00001``) or old (``hep-th/9901001``), with an optional version.
_ARXIV_ID = re.compile(r"^(\d{4}\.\d{4,5}|[a-z][a-z.-]*/\d{7})(v\d+)?$", re.IGNORECASE)
_ARXIV_URL = re.compile(r"arxiv\.org/(?:abs|pdf)/([^?#]+?)(?:\.pdf)?/?$", re.IGNORECASE)
#: The longest text read for an arXiv id: an address of one is well under it.
ARXIV_TEXT_MAX = 500


def normalize_doi(value: object) -> str | None:
    """A DOI as a key: lower case, without a resolver prefix; None for anything that is not one (``10.``...)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    for prefix in _DOI_PREFIXES:
        if text.lower().startswith(prefix):
            text = text[len(prefix) :]
            break
    text = text.strip().lower()
    return text if text.startswith("10.") and "/" in text else None


def arxiv_id(value: object) -> str | None:
    """An arXiv id without its version, from an id (``2101.00001v2``), an abs or pdf URL, or arXiv's DOI."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if len(text) > ARXIV_TEXT_MAX:  # no id or address of one is that long; a search of one was quadratic
        return None
    doi = normalize_doi(text)
    if doi is not None:
        text = doi[len(ARXIV_DOI) :] if doi.startswith(ARXIV_DOI) else ""
    match = _ARXIV_URL.search(text)
    if match:
        text = match.group(1)
    text = text.removeprefix("arXiv:").removeprefix("arxiv:")
    match = _ARXIV_ID.match(text)
    return match.group(1) if match else None


def checked_year(value: object) -> tuple[int | None, bool]:
    """``(year, dropped)``: ``value`` when the readers accept it as a year, else None and whether one was dropped."""
    if value is None:
        return None, False
    if isinstance(value, int) and not isinstance(value, bool) and YEARS[0] <= value <= YEARS[1]:
        return value, False
    return None, True


def _clean(text: str) -> str:
    """``text`` storable as UTF-8: a lone surrogate (a ``\\ud800`` escape in the source's JSON) becomes ``?``."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")


def _printable(text: str) -> str:
    """``text`` with control characters as spaces: a name the project's format would refuse is written readable."""
    return "".join(" " if has_control(c) else c for c in text) if has_control(text) else text


def project_record(paper: Paper, doi: str | None = None, arxiv: str | None = None) -> dict:
    """``paper`` as a line of the project's format, with ``doi`` and ``arxiv`` when known; references once each,
    in order, without the paper itself."""
    references = [r for r in dict.fromkeys(paper.references) if r != paper.id]
    record = {
        "id": paper.id,
        "title": _clean(" ".join(paper.title.split())),
        "abstract": _clean(" ".join(paper.abstract.split())),
        "year": paper.year,
        "authors": [_clean(n) for a in paper.authors if (n := " ".join(_printable(a).split()))],  # as read back
        "references": [_clean(r) for r in references],
    }
    if doi:
        record["doi"] = doi
    if arxiv:
        record["arxiv"] = arxiv
    return record


def parsed(parser, record: dict, where: Where, source: str) -> tuple[Paper | None, str | None]:
    """``(paper, None)`` from a source record through the readers' ``parser``, or ``(None, reason)`` when the
    readers would refuse it (no id, a field of the wrong type, a control character in an id)."""
    try:
        paper = parser(_usable_links(record), where, source)
    except InputError as exc:
        return None, getattr(exc, "reason", str(exc))
    return paper, None


#: The fields of a source's record that list other papers (a string each, or an object with a ``paperId``).
_LINK_FIELDS = ("references", "referenced_works", "citations")


def _bad_link(entry: object) -> bool:
    other = entry.get("paperId") if isinstance(entry, dict) else entry
    if not isinstance(other, str):
        return False  # the reader's to refuse: a record of the wrong shape is skipped, and says why
    return not other.removeprefix("https://openalex.org/").strip() or has_control(other)


def _usable_links(record: dict) -> dict:
    """``record`` without the links the readers refuse (a blank id, one with a control character): a source's
    record is kept without them rather than skipped whole, as a user's file would be refused."""
    if not any(isinstance(record.get(f), list) and any(_bad_link(e) for e in record[f]) for f in _LINK_FIELDS):
        return record
    return {
        **record,
        **{f: [e for e in record[f] if not _bad_link(e)] for f in _LINK_FIELDS if isinstance(record.get(f), list)},
    }


def source_paper(
    parser, item: object, where: Where, source: str, year_key: str, kind: str, run
) -> tuple[Paper | None, dict]:
    """``(paper, item)`` for one result of a source's answer: ``item`` (a ``kind`` object, its year under
    ``year_key`` made null where impossible, counted) read by the readers' ``parser``; ``(None, {})`` (counted as
    skipped, with why) when it is not an object or the readers would refuse it."""
    if not isinstance(item, dict):
        run.tally("skipped", reason=f"a result that is not a {kind} object")
        return None, {}
    year, dropped = checked_year(item.get(year_key))
    if dropped:
        run.tally("years_dropped")
        item = {**item, year_key: year}
    paper, reason = parsed(parser, item, where, source)
    if paper is None:
        run.tally("skipped", reason=reason)
    return paper, item


def merge(kept: dict, other: dict) -> dict:
    """One record of a paper found twice (the same DOI under two ids): ``kept``'s id and fields, each empty one
    filled from ``other``, and the references of both."""
    merged = dict(kept)
    for key in ("title", "abstract", "year", "doi", "arxiv"):
        if not merged.get(key) and other.get(key):
            merged[key] = other[key]
    if not merged.get("authors") and other.get("authors"):
        merged["authors"] = list(other["authors"])
    merged["references"] = list(dict.fromkeys([*kept.get("references", []), *other.get("references", [])]))
    return merged


def iso_date(value: str, what: str = "--since") -> str:
    """``value`` as an ISO date (``2024-01-31``), or ``ConfigError`` saying what one looks like."""
    text = str(value).strip()
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise ConfigError(f"{what} {text!r} is not a date: give one as YYYY-MM-DD, such as 2024-01-31") from None
