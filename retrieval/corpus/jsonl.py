"""Readers for line-delimited JSON corpora, one paper per line, plain or gzip, in three formats.

- ``jsonl``: the project's own, ``{"id", "title", "abstract", "year", "authors": [str], "references": [ids]}``.
  Only ``id`` (non-empty) and ``title`` (a string, possibly empty) are required.
- ``openalex``: OpenAlex works as the API and the snapshot give them. The id is the work id without its URL
  prefix (``W2741809807``); the title is ``title``, else ``display_name``; the abstract is rebuilt from
  ``abstract_inverted_index`` (each word placed at its positions, joined by single spaces); ``publication_year``;
  the authorships' ``author.display_name`` in order; ``referenced_works`` as work ids. A record whose id is not a
  work id (``W`` and digits), or that has the project's own fields and none of a work's, is not a work: refused.
- ``s2``: Semantic Scholar Graph API papers: ``paperId``, ``title``, ``abstract``, ``year``, ``authors[].name``,
  ``references[].paperId`` and ``citations[].paperId`` where present (entries without a ``paperId`` are
  unresolved references and are skipped). A ``citations`` entry becomes an edge from that paper to this one.

The format is detected from the first record unless given. Every bad record raises ``InputError`` naming
``file:line`` and the reason; a duplicate id is a bad record.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO

from ..errors import ConfigError, InputError
from ..validate import YEAR_RANGE
from .paper import Paper

FORMATS = ("jsonl", "openalex", "s2")
_OPENALEX_PREFIX = "https://openalex.org/"
#: An OpenAlex work id without its URL prefix: ``W`` and digits (``W2741809807``); authors are ``A...``, sources
#: ``S...``, and so on.
_OPENALEX_WORK = re.compile(r"W\d+")
#: The fields the OpenAlex reader takes from a work besides ``id`` and ``title``, and the project's own fields that
#: an OpenAlex work never has: a record with some of the latter and none of the former is not a work (read as one,
#: its abstract, year, authors and references would be lost).
_OPENALEX_FIELDS = ("display_name", "publication_year", "authorships", "referenced_works", "abstract_inverted_index")
_OWN_FIELDS = ("abstract", "year", "authors", "references")
#: What each format's records look like, for a message suggesting ``--format``.
_FORMAT_NAMES = {"jsonl": "the project's own format", "openalex": "an OpenAlex work", "s2": "a Semantic Scholar paper"}

Where = tuple[str, int]


#: Years a record may give (a year outside them is a typo or a unit mix-up, such as a timestamp).
YEARS = YEAR_RANGE  # the years a record, a filter and an option may name


def _open(path: Path) -> IO[bytes]:
    try:
        with open(path, "rb") as probe:
            magic = probe.read(2)
        return gzip.open(path, "rb") if magic == b"\x1f\x8b" else open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot read {path} ({exc.strerror or exc}): check the path and its permissions") from None


def _lines(handle: IO[bytes], path: Path) -> Iterator[tuple[int, bytes]]:
    """The file's lines, numbered; a truncated or damaged gzip stream and read errors become ``InputError``."""
    lineno = 0
    try:
        for lineno, raw in enumerate(handle, start=1):  # noqa: B007 - lineno names the line after the last one read
            yield lineno, raw
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError.at(
            str(path), lineno + 1, f"the gzip file is truncated or damaged ({exc}): recompress or download it again"
        ) from None
    except OSError as exc:
        raise InputError.at(str(path), lineno + 1, f"cannot read on ({exc.strerror or exc})") from None


def _check_unicode(paper: Paper, where: Where) -> None:
    """Every text of ``paper`` can be stored as UTF-8 (a lone surrogate, which ``"\\ud800"`` decodes to, cannot)."""
    fields = {"id": [paper.id], "title": [paper.title], "abstract": [paper.abstract], "authors": paper.authors,
              "references": paper.references, "citations": paper.citations}  # fmt: skip
    field = lone_surrogate_in(fields)
    if field is not None:
        shown = paper.id.encode("utf-8", "backslashreplace").decode("utf-8")
        raise InputError.at(*where, f"paper {shown!r}: '{field}' holds a lone surrogate (not valid Unicode text)")


def lone_surrogate_in(fields: dict[str, list[str]]) -> str | None:
    """The first of ``fields`` (name -> its texts) holding a text that cannot be stored as UTF-8 (a lone
    surrogate, which a ``"\\ud800"`` escape decodes to), or None."""
    for field, values in fields.items():
        for value in values:
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                return field
    return None


def _shown(value: object) -> str:
    """``value`` as JSON, cut to 80 characters, for a message."""
    return json.dumps(value, ensure_ascii=False)[:80]


def _string_list(value: object, field: str, where: Where) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError.at(*where, f"'{field}' must be a list of strings, got {json.dumps(value)[:80]}")
    return value


def _year(value: object, pid: str, field: str, where: Where) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise InputError.at(*where, f"paper {pid!r}: '{field}' must be an integer or null, got {json.dumps(value)}")
    if value is not None and not YEARS[0] <= value <= YEARS[1]:
        shown = str(value) if len(str(value)) <= 12 else str(value)[:12] + "..."
        raise InputError.at(
            *where, f"paper {pid!r}: '{field}' {shown} is not a year between {YEARS[0]} and {YEARS[1]} (or null)"
        )
    return value


def _text(value: object, pid: str, field: str, where: Where) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError.at(*where, f"paper {pid!r}: '{field}' must be a string or null")
    return value


def _objects(value: object, field: str, where: Where, prefix: str = "") -> list[dict]:
    """``value``, a list of JSON objects or null (read as empty); ``InputError`` for anything else."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise InputError.at(*where, f"{prefix}'{field}' must be a list of objects or null, got {_shown(value)}")
    return value


def _optional_text(value: object, what: str, where: Where) -> str | None:
    """``value``, a string or null; ``InputError`` saying ``what`` must be one otherwise."""
    if value is not None and not isinstance(value, str):
        raise InputError.at(*where, f"{what} must be a string or null, got {_shown(value)}")
    return value


def has_control(text: str) -> bool:
    """Whether ``text`` holds a control character (NUL, tab, newline, DEL, the C1 controls such as U+0085) or a
    line or paragraph separator (U+2028, U+2029): each breaks a line or a terminal's display."""
    return any(ord(c) < 32 or 127 <= ord(c) < 160 or c in "\u2028\u2029" for c in text)


def _id(value: object, field: str, where: Where) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError.at(*where, f"missing '{field}' (a non-empty string)")
    if has_control(value):
        raise InputError.at(*where, f"'{field}' {value!r} holds a control character (NUL, tab, newline, ...)")
    return value


def checked_papers(papers: Iterable[Paper], what: str = "the papers given") -> Iterator[Paper]:
    """``papers`` (``Paper`` objects a program hands to ``build`` or ``add``), each checked as the readers check a
    file's records: a non-empty id without control characters, texts that are strings (valid Unicode), a year
    in range or None, lists of strings for authors, references and citations. ``InputError`` names the paper's
    place among ``what`` and the field (an unchecked one could leave an index no search can read)."""
    if isinstance(papers, (str, bytes, Paper)) or not hasattr(papers, "__iter__"):
        raise InputError(f"{what} must be an iterable of Paper objects (or a corpus file's path), got "
                         f"{type(papers).__name__}")  # fmt: skip
    for number, paper in enumerate(papers, start=1):
        if not isinstance(paper, Paper):
            raise InputError(
                f"{what}: item {number} is a {type(paper).__name__}, not a Paper: give retrieval.Paper objects, "
                "or a corpus file's path"
            )
        where = (what, number)
        try:
            pid = _id(paper.id, "id", where)
            for field in ("title", "abstract"):
                if not isinstance(getattr(paper, field), str):
                    raise InputError.at(
                        *where, f"paper {pid!r}: '{field}' must be a string, got {type(getattr(paper, field)).__name__}"
                    )
            _year(paper.year, pid, "year", where)
            for field in ("authors", "references", "citations"):
                values = getattr(paper, field)
                if not isinstance(values, (list, tuple)) or not all(isinstance(v, str) for v in values):
                    got = _shown(values if isinstance(values, str) else repr(values))
                    raise InputError.at(*where, f"paper {pid!r}: '{field}' must be a list of strings, got {got}")
            _author_names(paper.authors, pid, where)
            _reference_ids(paper.references, "references", pid, where)
            _reference_ids(paper.citations, "citations", pid, where)
            if not isinstance(paper.source, str):
                raise InputError.at(
                    *where, f"paper {pid!r}: 'source' must be a string, got {_shown(repr(paper.source))}"
                )
            sources = paper.field_sources
            if not isinstance(sources, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in sources.items()
            ):
                raise InputError.at(
                    *where, f"paper {pid!r}: 'field_sources' must map field names to source names, got "
                    f"{_shown(repr(sources))}"
                )  # fmt: skip
            _check_unicode(paper, where)
        except InputError as exc:
            raise InputError(f"{what}, paper {number}: {exc.reason}") from None
        yield paper


def parse_jsonl(record: dict, where: Where, source: str) -> Paper:
    """A record of the project's own format."""
    other = detect_format(record)
    if other not in (None, "jsonl") and ("id" not in record or not any(field in record for field in _OWN_FIELDS)):
        # Read as this format, an OpenAlex work or an S2 paper would lose its abstract, year, authors and references.
        raise InputError.at(*where, "not a record of the project's own format" + _suggest(record, "jsonl"))
    pid = _id(record.get("id"), "id", where)
    title = record.get("title")
    if not isinstance(title, str):  # an empty title is allowed: real corpora have a few (CACM does)
        raise InputError.at(*where, f"paper {pid!r} has no 'title' (a string; add the field, empty if unknown)")
    return Paper(
        id=pid,
        title=title,
        abstract=_text(record.get("abstract"), pid, "abstract", where),
        year=_year(record.get("year"), pid, "year", where),
        authors=_author_names(_string_list(record.get("authors"), "authors", where), pid, where),
        references=_reference_ids(
            _string_list(record.get("references"), "references", where), "references", pid, where
        ),
        source=source,
    )


def _reference_ids(ids: list[str], field: str, pid: str, where: Where) -> list[str]:
    """``ids`` (references, citing papers), refused (``InputError``) where one is blank or holds a control
    character: a blank one was stored as a paper id no record has, and one with a NUL was cut at it by the build
    (SQLite's JSON functions end text there), so ``"A\\u0000B"`` became a citation of paper ``A``."""
    for number, other in enumerate(ids, start=1):
        if not other.strip():
            raise InputError.at(*where, f"paper {pid!r}: '{field}' entry {number} is blank: leave it out of the list")
        if has_control(other):
            raise InputError.at(
                *where,
                f"paper {pid!r}: '{field}' entry {number} {other!r} holds a control character (NUL, tab, newline, "
                "...): give the paper id as it is",
            )
    return ids


def _author_names(names: list[str], pid: str, where: Where) -> list[str]:
    """``names``, refused (``InputError``) where one is blank or holds a control character: a blank name was kept
    as an author no filter can match and exported as an empty BibTeX name (``author = { and Jane Doe}``)."""
    for number, name in enumerate(names, start=1):
        if not name.strip():
            raise InputError.at(
                *where, f"paper {pid!r}: 'authors' entry {number} is blank: leave an unknown author out of the list"
            )
        if has_control(name):
            raise InputError.at(
                *where,
                f"paper {pid!r}: 'authors' entry {number} {name!r} holds a control character (tab, newline, ...)",
            )
    return names


def _openalex_id(value: str) -> str:
    return value[len(_OPENALEX_PREFIX) :] if value.startswith(_OPENALEX_PREFIX) else value


def rebuild_abstract(inverted: object, pid: str, where: Where) -> str:
    """OpenAlex's ``abstract_inverted_index`` (word -> positions) back to text, words in position order."""
    if inverted is None:
        return ""
    if not isinstance(inverted, dict):
        raise InputError.at(*where, f"work {pid!r}: 'abstract_inverted_index' must be an object or null")
    placed: dict[int, str] = {}
    for word, positions in inverted.items():
        if not isinstance(positions, list) or not all(type(i) is int for i in positions):
            raise InputError.at(*where, f"work {pid!r}: positions of {word!r} in the abstract must be integers")
        for position in positions:
            placed[position] = word
    return " ".join(placed[i] for i in sorted(placed))


def _suggest(record: dict, wanted: str) -> str:
    """The end of a message for a record that is not of the format ``wanted``: the format it looks like, if any."""
    other = detect_format(record)
    if other is not None and other != wanted:
        return f"; it looks like {_FORMAT_NAMES[other]}: give --format {other}, or leave --format out to detect it"
    return f"; check that each line is {_FORMAT_NAMES[wanted]}, or give --format " + "|".join(FORMATS)


def _work_id(record: dict, where: Where) -> str:
    """The id of the OpenAlex work ``record`` without its URL prefix; ``InputError`` when the record is not one."""
    value = record.get("id")
    if value is None and "paperId" in record:
        raise InputError.at(
            *where, "not an OpenAlex work: it has no 'id' but a 'paperId'" + _suggest(record, "openalex")
        )
    pid = _openalex_id(_id(value, "id", where))
    if not _OPENALEX_WORK.fullmatch(pid):
        raise InputError.at(
            *where,
            f"not an OpenAlex work: its id {value!r} is not an OpenAlex work id (W and digits, such as "
            f"{_OPENALEX_PREFIX}W2741809807)" + _suggest(record, "openalex"),
        )
    own = [field for field in _OWN_FIELDS if field in record]
    if own and not any(field in record for field in _OPENALEX_FIELDS):
        raise InputError.at(
            *where,
            f"not an OpenAlex work: it has {', '.join(repr(f) for f in own)}, which OpenAlex works do not, and none "
            f"of theirs ({', '.join(repr(f) for f in _OPENALEX_FIELDS)})" + _suggest(record, "openalex"),
        )
    return pid


def _openalex_authors(value: object, where: Where) -> list[str]:
    """The ``author.display_name`` of each authorship, in order (null or blank names left out)."""
    authors = []
    for number, authorship in enumerate(_objects(value, "authorships", where), start=1):
        author = authorship.get("author")
        if author is None:
            continue
        if not isinstance(author, dict):
            raise InputError.at(
                *where, f"'authorships' entry {number}: 'author' must be an object or null, got {_shown(author)}"
            )
        name = _optional_text(
            author.get("display_name"), f"'authorships' entry {number}: the author's 'display_name'", where
        )
        if name and name.strip():
            authors.append(name)
    return authors


def parse_openalex(record: dict, where: Where, source: str) -> Paper:
    """An OpenAlex work."""
    pid = _work_id(record, where)
    title = _optional_text(record.get("title"), f"work {pid!r}: 'title'", where)
    if title is None:
        title = _optional_text(
            record.get("display_name"), f"work {pid!r} has a null 'title', so its 'display_name'", where
        )
    refs = _string_list(record.get("referenced_works"), "referenced_works", where)
    return Paper(
        id=pid,
        title=title or "",  # OpenAlex has works without a title; their abstract is still worth indexing
        abstract=rebuild_abstract(record.get("abstract_inverted_index"), pid, where),
        year=_year(record.get("publication_year"), pid, "publication_year", where),
        authors=_author_names(_openalex_authors(record.get("authorships"), where), pid, where),
        references=_reference_ids([_openalex_id(r) for r in refs], "referenced_works", pid, where),
        source=source,
    )


def _paper_ids(value: object, field: str, pid: str, where: Where) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError.at(*where, f"paper {pid!r}: '{field}' must be a list of objects, got {_shown(value)}")
    out = []
    for number, entry in enumerate(value, start=1):
        if not isinstance(entry, dict):
            raise InputError.at(*where, f"paper {pid!r}: each entry of '{field}' must be an object with a paperId")
        other = _optional_text(entry.get("paperId"), f"paper {pid!r}: '{field}' entry {number}: 'paperId'", where)
        if other:  # None: a reference Semantic Scholar could not resolve
            out.append(other)
    return out


def _s2_authors(value: object, pid: str, where: Where) -> list[str]:
    """The ``name`` of each author, in order (null or blank names left out)."""
    authors = []
    for number, author in enumerate(_objects(value, "authors", where, f"paper {pid!r}: "), start=1):
        name = _optional_text(author.get("name"), f"paper {pid!r}: 'authors' entry {number}: 'name'", where)
        if name is not None and name.strip():
            authors.append(name)
    return authors


def parse_s2(record: dict, where: Where, source: str) -> Paper:
    """A Semantic Scholar Graph API paper."""
    if "paperId" not in record and "id" in record:
        raise InputError.at(*where, "missing 'paperId' (a non-empty string)" + _suggest(record, "s2"))
    pid = _id(record.get("paperId"), "paperId", where)
    return Paper(
        id=pid,
        title=_text(record.get("title"), pid, "title", where),
        abstract=_text(record.get("abstract"), pid, "abstract", where),
        year=_year(record.get("year"), pid, "year", where),
        authors=_author_names(_s2_authors(record.get("authors"), pid, where), pid, where),
        references=_reference_ids(
            _paper_ids(record.get("references"), "references", pid, where), "references", pid, where
        ),
        citations=_reference_ids(_paper_ids(record.get("citations"), "citations", pid, where), "citations", pid, where),
        source=source,
    )


PARSERS: dict[str, Callable[[dict, Where, str], Paper]] = {
    "jsonl": parse_jsonl,
    "openalex": parse_openalex,
    "s2": parse_s2,
}


def detect_format(record: dict) -> str | None:
    """The format a record looks like, or None."""
    if "paperId" in record:
        return "s2"
    pid = record.get("id")
    if (
        "abstract_inverted_index" in record
        or "referenced_works" in record
        or (isinstance(pid, str) and pid.startswith(_OPENALEX_PREFIX))
    ):
        return "openalex"
    if "id" in record:
        return "jsonl"
    return None


class RepeatedKey(Exception):  # also the HTTP API's, for its JSON bodies
    """A JSON object names one key twice (``json`` alone would keep the last value silently)."""


def unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """``pairs`` as a dict, refusing a key written twice: which of the two values the writer meant is unknown."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise RepeatedKey(key)
            seen.add(key)
    return obj


def _record(raw: bytes, where: Where, hint: str) -> dict | None:
    """Line ``raw`` of a JSON-lines file as an object; None for a blank line; ``InputError`` naming ``where``."""
    try:
        line = raw.decode("utf-8-sig")  # a byte-order mark starting a line is accepted (files joined with `cat`)
    except UnicodeDecodeError as exc:
        raise InputError.at(*where, f"not UTF-8 text ({exc.reason})") from None
    if not line.strip():
        return None
    try:
        record = json.loads(line, object_pairs_hook=unique_keys)
    except RepeatedKey as exc:
        raise InputError.at(
            *where, f"the key {exc.args[0]!r} is written twice in one object{hint}: keep the one you mean"
        ) from None
    except json.JSONDecodeError as exc:
        said = exc.msg.removesuffix(" at")  # "Invalid control character at": the column follows
        cr = ""
        if b"\r" in raw.rstrip(b"\r\n"):  # lines ended by CR alone (old Mac files) read as one line
            cr = "; the lines end with a carriage return alone (CR): convert them to LF or CRLF line ends"
        raise InputError.at(*where, f"invalid JSON ({said} at column {exc.colno}){cr}{hint}") from None
    except RecursionError:
        raise InputError.at(*where, f"the JSON is nested too deeply to read{hint}") from None
    except ValueError:  # Python's bound on an integer's digits (sys.get_int_max_str_digits), not JSON's
        raise InputError.at(
            *where, f"a number has too many digits to read{hint}: no field takes one that long"
        ) from None
    if not isinstance(record, dict):
        raise InputError.at(*where, f"expected a JSON object{hint}, got {type(record).__name__}")
    return record


def json_lines(path: Path, expected: str = "") -> Iterator[tuple[Where, dict]]:
    """Each non-blank line of a JSON-lines file (plain or gzip) as an object, with its ``(file, line)``.

    Raises ``InputError`` naming ``file:line`` for a line that is not UTF-8, not JSON, or not an object;
    ``expected`` describes the object wanted, for the message.
    """
    hint = f"; expected {expected}" if expected else ""
    with _open(path) as handle:
        for lineno, raw in _lines(handle, path):
            where = (str(path), lineno)
            record = _record(raw, where, hint)
            if record is not None:
                yield where, record


def _parser_for(record: dict, format: str | None, where: Where) -> Callable[[dict, Where, str], Paper]:
    """The parser of ``format``, or of the format ``record`` (the first) looks like."""
    if format:
        return PARSERS[format]
    detected = detect_format(record)
    if detected is None:
        raise InputError.at(
            *where,
            "cannot tell the format from this record (no 'id' or 'paperId'): give --format " + "|".join(FORMATS),
        )
    return PARSERS[detected]


def _paper(raw: bytes, where: Where, parser, source: str) -> Paper | None:
    """Line ``raw`` as a checked ``Paper`` (None for a blank line)."""
    record = _record(raw, where, "")
    if record is None:
        return None
    paper = parser(record, where, source)
    if b"\\u" in raw:  # only a \u escape can make a lone surrogate: the line itself was valid UTF-8
        _check_unicode(paper, where)
    return paper


def read_papers(path: str | os.PathLike[str], format: str | None = None) -> Iterator[tuple[int, Paper]]:
    """Stream ``(line number, Paper)`` from a corpus file in ``format`` (detected from the first record when
    None). Blank lines are skipped. Raises ``InputError`` with ``file:line`` on the first bad record."""
    path = Path(path)
    if format is not None and format not in PARSERS:
        raise ConfigError(f"unknown format {format!r}: use one of {', '.join(FORMATS)}")
    source = path.name
    parser = PARSERS.get(format) if format else None
    seen: set[str] = set()
    for where, record in json_lines(path):
        if parser is None:
            parser = _parser_for(record, format, where)
        paper = parser(record, where, source)
        _check_unicode(paper, where)
        if paper.id in seen:
            raise InputError.at(*where, f"duplicate id {paper.id!r}: each paper may appear once")
        seen.add(paper.id)
        yield where[1], paper


class PaperFile:
    """The papers of a corpus file, exactly as ``read_papers`` reads them (iterate it for the ``Paper`` s), and
    its lines in numbered chunks for a bulk build that parses them in worker processes (``parse_lines``): the
    same records, checks and messages, the duplicate check left to the caller (``duplicate``)."""

    def __init__(self, path: str | os.PathLike[str], format: str | None = None) -> None:
        if format is not None and format not in PARSERS:
            raise ConfigError(f"unknown format {format!r}: use one of {', '.join(FORMATS)}")
        self.path = Path(path)
        self.format = format
        self.source = self.path.name

    def __iter__(self) -> Iterator[Paper]:
        return (paper for _, paper in read_papers(self.path, self.format))

    def chunks(self, size: int) -> Iterator[tuple[str, list[tuple[int, bytes]]]]:
        """``(format, lines)``: up to ``size`` numbered raw lines at a time (blank ones included), and the format
        (given, or detected from the first record, which is parsed here for that)."""
        format = self.format
        with _open(self.path) as handle:
            lines = _lines(handle, self.path)
            chunk: list[tuple[int, bytes]] = []
            for lineno, raw in lines:
                chunk.append((lineno, raw))
                if format is None:
                    where = (str(self.path), lineno)
                    record = _record(raw, where, "")
                    if record is None:
                        continue
                    parser = _parser_for(record, None, where)
                    format = next(name for name, known in PARSERS.items() if known is parser)
                if len(chunk) >= size:
                    yield format, chunk
                    chunk = []
            if chunk:
                yield format or "jsonl", chunk

    def duplicate(self, pid: str, lineno: int) -> InputError:
        """The error for a paper id seen before, at line ``lineno``."""
        return InputError.at(str(self.path), lineno, f"duplicate id {pid!r}: each paper may appear once")


def parse_lines(
    path: str, format: str, source: str, lines: list[tuple[int, bytes]]
) -> tuple[list[Paper], list[int], InputError | None]:
    """The papers of numbered raw ``lines`` of the file ``path`` in ``format``, as ``read_papers`` makes them:
    ``(papers, their line numbers, error)``; reading stops at the first bad record, whose ``InputError`` is
    ``error`` (None when every line was good). Runs in a worker process."""
    parser = PARSERS[format]
    papers: list[Paper] = []
    numbers: list[int] = []
    for lineno, raw in lines:
        try:
            paper = _paper(raw, (path, lineno), parser, source)
        except InputError as exc:
            return papers, numbers, exc
        if paper is not None:
            papers.append(paper)
            numbers.append(lineno)
    return papers, numbers, None


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, Paper]]:
    """``read_papers`` for the project's own JSONL format."""
    return read_papers(path, "jsonl")
