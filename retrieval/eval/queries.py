"""Reader for query files: one JSON object per line, ``{"qid": str, "query": str, "relevant": [paper ids]}``.

Every malformed line raises ``InputError`` naming ``file:line``; a file without any query raises
``InputError``. Relevant ids are kept as written here (order and repeats included); checking them against
the corpus is the protocol's job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..corpus.jsonl import json_lines, lone_surrogate_in
from ..errors import InputError

QUERY_FORMAT = '{"qid": str, "query": str, "relevant": [paper ids]}'


@dataclass(frozen=True)
class Query:
    """One line of a query file."""

    qid: str
    text: str
    relevant: tuple[str, ...]
    line: int


def _parse(record: dict, where: tuple[str, int]) -> Query:
    qid = record.get("qid")
    if qid is None or qid == "":
        raise InputError.at(*where, "missing 'qid' (a non-empty string)")
    if not isinstance(qid, str) or not qid.strip():
        raise InputError.at(*where, f"'qid' must be a non-empty string, got {json.dumps(qid)}: write it in quotes")
    text = record.get("query")
    if text is None:
        raise InputError.at(*where, f"query {qid!r} has no 'query' (a string)")
    if not isinstance(text, str):
        raise InputError.at(*where, f"query {qid!r}: 'query' must be a string, got {json.dumps(text)[:60]}")
    relevant = record.get("relevant")
    if not isinstance(relevant, list) or not all(isinstance(r, str) for r in relevant):
        raise InputError.at(*where, f"query {qid!r}: 'relevant' must be a list of paper ids (strings)")
    # A lone surrogate ("\ud800" in the JSON) is no Unicode text: the run files cannot hold it, and the metrics'
    # library crashed the process on it.
    field = lone_surrogate_in({"qid": [qid], "query": [text], "relevant": relevant})
    if field is not None:
        shown = qid.encode("utf-8", "backslashreplace").decode("utf-8")
        raise InputError.at(
            *where, f"query {shown!r}: '{field}' holds a lone surrogate (not valid Unicode text): fix the line"
        )
    return Query(qid=qid, text=text, relevant=tuple(relevant), line=where[1])


def read_queries(path: str | Path) -> list[Query]:
    """Every query of the file, in file order; blank lines are skipped.

    Raises ``InputError`` when the file is missing or holds no query, and ``InputError`` (``file:line``)
    for a malformed line or a repeated qid.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no query file at {path}: give a JSONL file of {QUERY_FORMAT} lines with --queries")
    queries: list[Query] = []
    first_line: dict[str, int] = {}
    for where, record in json_lines(path, QUERY_FORMAT):
        query = _parse(record, where)
        if query.qid in first_line:
            raise InputError.at(*where, f"qid {query.qid!r} repeats line {first_line[query.qid]}: each qid once")
        first_line[query.qid] = where[1]
        queries.append(query)
    if not queries:
        raise InputError(f"{path} holds no queries: expected one {QUERY_FORMAT} object per line")
    return queries
