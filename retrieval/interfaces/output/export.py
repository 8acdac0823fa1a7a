"""Exports of ranked lists and papers: JSON, JSON lines, CSV, BibTeX and RIS (what reference managers import).

``export(items, fmt)`` takes a search result, a sequence of ranked entries (anything with ``.paper`` and
``.final_score``, as ``RankedPaper``), plain ``Paper`` objects, ``(paper, score)`` / ``(paper, score,
record)`` tuples, or one object with ``.paper`` (a page of ``show``), so that every command (``search``,
``explain``, ``similar``, ``show``) exports the same way.

- ``json``: one document: ``document`` if given (``search`` gives ``result.to_dict()``, what ``--json`` prints),
  a result's ``to_dict()``, else a list of the records.
- ``jsonl``: one object per entry: ``{"rank": ..., **record}``, the record being the entry's ``to_dict()`` (a
  ranked entry's, with the paper's authors added) or the record given in a tuple.
- ``csv``: a header, then one row per entry: rank, id, year, title, authors (``; ``-joined), citations (the
  citations the index records of it, where known: ``citation_count``; for ``show``, its citing papers in the index,
  all of them, not the page listed), score.
- ``bibtex``: one ``@misc`` entry per paper (see ``to_bibtex``); ``ris``: one record per paper, ``TY  - UNPB``
  for an arXiv e-print (see ``to_ris``).

CSV and RIS are read by people and by programs that know no TeX: their text is rendered (``reading.text``:
``Schr\"odinger`` is ``Schrödinger``). BibTeX is TeX, and keeps the corpus's TeX as it is.

Every format is deterministic: the same entries give the same bytes.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence

from .reading import authors as joined_authors
from .reading import last_first, name_parts, one_line
from .reading import text as readable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ...corpus.paper import Paper

FORMATS = ("json", "jsonl", "csv", "bibtex", "ris")
CSV_COLUMNS = ("rank", "id", "year", "title", "authors", "citations", "score")


class Entry:
    """One exported line: its rank, the paper, its score (None for a plain paper) and its JSON record."""

    __slots__ = ("rank", "paper", "score", "record")

    def __init__(self, rank: int, paper: Paper, score: float | None, record: dict) -> None:
        self.rank = rank
        self.paper = paper
        self.score = score
        self.record = record


def entries(items: Iterable, offset: int = 0) -> list[Entry]:
    """``items`` (see the module docstring) as ``Entry`` objects ranked from ``offset + 1``."""
    if hasattr(items, "ranked"):
        items = items.ranked
    elif hasattr(items, "paper"):  # one paper's page (``show``), or one entry
        items = [items]
    out = []
    for rank, item in enumerate(items, start=offset + 1):
        if isinstance(item, tuple):
            paper, score, *rest = item
            record = dict(rest[0]) if rest else paper.to_dict()
        elif hasattr(item, "paper"):
            paper, score = item.paper, getattr(item, "final_score", getattr(item, "score", None))
            record = item.to_dict() if hasattr(item, "to_dict") else paper.to_dict()
        else:
            paper, score, record = item, None, item.to_dict()
        record.setdefault("authors", list(paper.authors))
        out.append(Entry(rank, paper, score, record))
    return out


def export(items: Iterable, fmt: str, offset: int = 0, document: object = None) -> str:
    """``items`` in the format ``fmt`` (one of ``FORMATS``), ending with a newline. ``document``: what ``json``
    prints (default: a result's ``to_dict()``, or the list of the records)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose from {', '.join(FORMATS)}")
    if fmt == "json":
        if document is None:
            document = items.to_dict() if hasattr(items, "to_dict") else [e.record for e in entries(items, offset)]
        return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    listed = entries(items, offset)
    if fmt == "jsonl":
        return "".join(json.dumps({"rank": e.rank, **e.record}, ensure_ascii=False) + "\n" for e in listed)
    if fmt == "csv":
        return to_csv(listed)
    papers = [e.paper for e in listed]
    return to_bibtex(papers) if fmt == "bibtex" else to_ris(papers)


def to_csv(listed: Sequence[Entry]) -> str:
    """A header and one row per entry (``CSV_COLUMNS``); quoting as the stdlib ``csv`` module does, ``\\n``
    line ends, a score with all its digits (empty for a plain paper)."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for e in listed:
        p = e.paper
        year = "" if p.year is None else p.year
        score = "" if e.score is None else repr(e.score)
        names = "; ".join(readable(a) for a in joined_authors(p.authors))
        writer.writerow([e.rank, p.id, year, readable(p.title), names, citation_count(e.record), score])
    return out.getvalue()


def citation_count(record: dict) -> int | str:
    """The CSV's ``citations`` of a record: how many papers of the index cite the paper (a ranked entry's
    ``citations``, a ``show`` page's ``citations_total``, its ``citations`` being the page of citing papers), or
    empty where the record does not know."""
    for key in ("citations", "citations_total"):
        count = record.get(key)
        if isinstance(count, int) and not isinstance(count, bool):
            return count
    return ""


# -- identifiers -------------------------------------------------------------------------------------------------

_ARXIV_OLD = re.compile(r"[a-z][a-z-]*(?:\.[A-Z]{2})?/\d{7}(?:v\d+)?", re.I)
_ARXIV_NEW = re.compile(r"\d{4}\.\d{4,5}(?:v\d+)?")
_OPENALEX = re.compile(r"W\d+")
_DOI = re.compile(r"(?:doi:|https?://(?:dx\.)?doi\.org/)?(10\.\d{4,9}/\S+)", re.I)
_S2 = re.compile(r"[0-9a-f]{40}")


def arxiv_id(paper_id: str) -> str | None:
    """The arXiv identifier ``paper_id`` is, if it looks like one (``hep-th/9711200``, ``math.AG/0101001``,
    ``1234.5678``, ``2101.00001v2``, with or without ``arXiv:``), without the prefix; else None."""
    text = paper_id.strip()
    if text[:6].lower() == "arxiv:":
        text = text[6:]
    return text if _ARXIV_OLD.fullmatch(text) or _ARXIV_NEW.fullmatch(text) else None


def doi_of(paper_id: str) -> str | None:
    """The DOI ``paper_id`` is, if it is one (``10.1103/PhysRevD.1.1``, with or without ``doi:`` or a doi.org
    address); else None. The index keeps no DOI of its own, so an id is where one can be known."""
    match = _DOI.fullmatch(paper_id.strip())
    return match.group(1) if match else None


def paper_url(paper_id: str) -> str | None:
    """Where the paper is, for ids of the sources the readers take: arXiv, OpenAlex, Semantic Scholar."""
    arxiv = arxiv_id(paper_id)
    if arxiv:
        return f"https://arxiv.org/abs/{arxiv}"
    if _OPENALEX.fullmatch(paper_id):
        return f"https://openalex.org/{paper_id}"
    if _S2.fullmatch(paper_id):
        return f"https://www.semanticscholar.org/paper/{paper_id}"
    doi = doi_of(paper_id)
    return f"https://doi.org/{doi}" if doi else None


# -- citation keys -----------------------------------------------------------------------------------------------

#: Letters NFKD does not take apart into an ASCII letter and accents.
_ASCII = str.maketrans({"ß": "ss", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ø": "o", "Ø": "O", "ł": "l",
                        "Ł": "L", "đ": "d", "Đ": "D", "ð": "d", "þ": "th", "ı": "i"})  # fmt: skip
#: TeX's letters, and accents: ``\"o`` is o, ``{\ss}`` ss.
_TEX_LETTERS = {"ss": "ss", "o": "o", "O": "O", "l": "l", "L": "L", "aa": "a", "AA": "A", "ae": "ae", "AE": "AE",
                "oe": "oe", "OE": "OE", "i": "i", "j": "j"}  # fmt: skip
_TEX_WORD = re.compile(r"\\([A-Za-z]+)")
_TEX_MATH = re.compile(r"(?<!\\)\$[^$]*(?<!\\)\$")
_STOP = frozenset(("a", "an", "the", "on", "of", "in", "for", "and", "to", "with", "at", "by", "from", "is", "are",
                   "as", "into", "via"))  # fmt: skip


def ascii_word(text: str) -> str:
    """``text`` folded to lowercase ASCII letters and digits: accents dropped (``Schrödinger``, TeX's
    ``Schr\\"odinger``: ``schrodinger``), anything else left out."""
    import unicodedata

    text = _TEX_WORD.sub(lambda m: _TEX_LETTERS.get(m.group(1), ""), text)
    text = unicodedata.normalize("NFKD", text.translate(_ASCII))
    return "".join(char for char in text.lower() if char.isascii() and char.isalnum())


def _base_key(paper: Paper) -> str:
    from .display import surname

    # The family name without its particles, as BibTeX's "Last" part: 't Hooft's key starts "hooft".
    family = surname(paper.authors[0]).split() if paper.authors else []
    author = ascii_word(family[-1]) if family else ""
    if not author[:1].isalpha():  # a key starts with a letter
        author = "anon"
    words = (ascii_word(w) for w in _TEX_MATH.sub(" ", paper.title).replace("-", " ").split())
    word = next((w for w in words if w and w not in _STOP), "")
    return author + ("" if paper.year is None else str(paper.year)) + word


def _suffix(n: int) -> str:
    """a, b, ..., z, aa, ab, ...: the n-th (from 0)."""
    letters = ""
    n += 1
    while n:
        n, rest = divmod(n - 1, 26)
        letters = chr(ord("a") + rest) + letters
    return letters


def citation_keys(papers: Sequence[Paper]) -> list[str]:
    """A BibTeX key per paper, in order: first author's surname, year and first title word that is not a stop
    word, folded to ASCII (``maldacena1997large``); a key several papers share gets a, b, ... in their order
    (``witten1998anti`` twice: ``witten1998antia``, ``witten1998antib``), never equal to another key."""
    bases = [_base_key(p) for p in papers]
    counts = Counter(bases)
    used = {base for base in bases if counts[base] == 1}
    next_suffix: Counter[str] = Counter()
    keys = []
    for base in bases:
        if counts[base] == 1:
            keys.append(base)
            continue
        while True:
            key = base + _suffix(next_suffix[base])
            next_suffix[base] += 1
            if key not in used:
                break
        used.add(key)
        keys.append(key)
    return keys


# -- BibTeX ------------------------------------------------------------------------------------------------------

_TEX_SPECIAL = {"%": r"\%", "&": r"\&", "#": r"\#"}
_LITERAL = {"{": r"\textbraceleft{}", "}": r"\textbraceright{}", "\\": r"\textbackslash{}", "$": r"\$",
            "_": r"\_", "^": r"\^{}"}  # fmt: skip


def _balanced(text: str, skip_escaped: bool) -> bool:
    depth = 0
    for i, char in enumerate(text):
        if char in "{}" and not (skip_escaped and _escaped(text, i)):
            depth += 1 if char == "{" else -1
            if depth < 0:
                return False
    return depth == 0


def _escaped(text: str, i: int) -> bool:
    """Whether ``text[i]`` follows an odd run of backslashes (``\\{`` is a brace, ``\\\\{`` a line break and a
    brace)."""
    run = 0
    while i - run > 0 and text[i - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def tex(text: str) -> str:
    """``text`` as the value of a BibTeX field, on one line, that BibTeX, LaTeX and reference managers read back
    as the text (Unicode is kept: BibTeX files are UTF-8 for biber, Zotero, JabRef and Mendeley alike).

    The corpora's text may be TeX already (a sixth of hep-th's titles have ``$\\theta$``, ``Hyperk\\"ahler`` or
    ``{\\cal N}``) or plain (OpenAlex, Semantic Scholar). So: TeX commands (a backslash and letters, or a
    backslash and a symbol) and ``$...$`` math are kept; ``%``, ``&`` and ``#`` are escaped; ``_`` and ``^``
    outside math are escaped; TeX's line break ``\\\\`` is a space; a backslash that starts no command is
    ``\\textbackslash{}``; an odd number of ``$`` are all escaped; and when the braces are not balanced
    (counting each brace, as BibTeX does, and counting only unescaped ones, as bibtexparser does), every brace
    is written as ``\\textbraceleft{}`` / ``\\textbraceright{}``, so that no value can end its entry early."""
    text = one_line(text)
    literal_braces = not (_balanced(text, False) and _balanced(text, True))
    dollars = sum(1 for i, c in enumerate(text) if c == "$" and not (i and text[i - 1] == "\\"))
    math_ok = dollars % 2 == 0
    out: list[str] = []
    in_math = False
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            nxt = text[i + 1] if i + 1 < len(text) else ""
            if nxt.isascii() and nxt.isalpha():  # a control word: \theta, \cal
                j = i + 1
                while j < len(text) and text[j].isascii() and text[j].isalpha():
                    j += 1
                out.append(text[i:j])
                i = j
                continue
            if nxt and not nxt.isspace() and not nxt.isalnum() and nxt.isascii():  # a control symbol: \" \% \{
                if nxt == "\\":  # TeX's line break, a space on one line (and bibtexparser reads \\} as \})
                    out.append(" ")
                elif nxt in "{}" and literal_braces:
                    out.append(_LITERAL[nxt])
                elif nxt == "$" and not math_ok:
                    out.append(r"\$")
                else:
                    out.append(char + nxt)
                i += 2
                continue
            out.append(_LITERAL["\\"])
        elif char in _TEX_SPECIAL:
            out.append(_TEX_SPECIAL[char])
        elif char in "{}":
            out.append(_LITERAL[char] if literal_braces else char)
        elif char == "$":
            if math_ok:
                in_math = not in_math
                out.append(char)
            else:
                out.append(_LITERAL["$"])
        elif char in "_^" and not in_math:
            out.append(_LITERAL[char])
        else:
            out.append(char)
        i += 1
    return " ".join("".join(out).split())


def _bibtex_name(name: str) -> str:
    """One author as BibTeX's name parser reads it: a suffix in its "von Last, Jr, First" form, the only one where
    it reads one; "Last, First" where the corpus wrote a comma; else "First Last", split where the corpus ran
    initials into the surname ("K.I.Bolotin"); TeX accents rendered (BibTeX reads ``~`` in ``Gra\\~na`` as a
    space between two names)."""
    given, family, suffix = name_parts(name)
    if suffix and given:
        name = f"{family}, {suffix}, {given}"
    elif given and "," in name:
        name = f"{family}, {given}"
    elif given:
        name = f"{given} {family}"
    elif "\\" in name:
        name = readable(name)
    name = tex(name)
    # "and" inside a name would split it into two authors: keep such a name (an organisation) as one.
    return "{" + name + "}" if re.search(r"\band\b", name, re.I) else name


def bibtex_fields(paper: Paper) -> list[tuple[str, str]]:
    """The fields of ``paper``'s BibTeX entry, escaped (``tex``): title, author (``and``-separated), year,
    eprint, archivePrefix and primaryClass for an arXiv id, doi for a DOI, url when the id says where the paper
    is, abstract."""
    fields = [("title", tex(paper.title))]
    if paper.authors:
        fields.append(("author", " and ".join(_bibtex_name(a) for a in joined_authors(paper.authors))))
    if paper.year is not None:
        fields.append(("year", str(paper.year)))
    arxiv = arxiv_id(paper.id)
    if arxiv:
        fields += [("eprint", arxiv), ("archivePrefix", "arXiv")]
        if "/" in arxiv:  # the old scheme names its archive: hep-th/9711200
            fields.append(("primaryClass", arxiv.split("/", 1)[0]))
    doi = doi_of(paper.id)
    if doi:
        fields.append(("doi", _verbatim(doi)))
    url = paper_url(paper.id)
    if url:
        fields.append(("url", _verbatim(url)))
    if paper.abstract:
        fields.append(("abstract", tex(paper.abstract)))
    return fields


def _verbatim(text: str) -> str:
    """A DOI or URL for a BibTeX field, which prints it as it is (no TeX escapes): its braces and backslashes
    percent-encoded, as a URL may write them, since one brace would end the field (or swallow the entries after
    it) and a backslash start a command."""
    return text.replace("\\", "%5C").replace("{", "%7B").replace("}", "%7D")


def to_bibtex(papers: Sequence[Paper]) -> str:
    """One ``@misc`` entry per paper (BibTeX's type for a work whose venue is not known, with no required field;
    arXiv's own export uses it with ``eprint``), keyed by ``citation_keys``, fields by ``bibtex_fields``.

    Written with bibtexparser 2 (``>=2,<3`` in pyproject): its 2.x line is the maintained, stable one since
    2.0.0 (1.4.x only gets fixes) and, unlike 1.x, needs no pyparsing; the escaping is ours (``tex``), since
    its LaTeX encoder would turn hep-th's TeX titles into ``\\textbackslash{}`` soup."""
    if not papers:
        return ""
    import bibtexparser
    from bibtexparser.model import Entry as BibEntry
    from bibtexparser.model import Field
    from bibtexparser.writer import BibtexFormat

    library = bibtexparser.Library()
    for paper, key in zip(papers, citation_keys(papers), strict=True):
        library.add(BibEntry("misc", key, [Field(name, value) for name, value in bibtex_fields(paper)]))
    layout = BibtexFormat()
    layout.indent, layout.block_separator = "  ", "\n"  # one blank line between entries
    return bibtexparser.write_string(library, bibtex_format=layout).rstrip("\n") + "\n"


# -- RIS ---------------------------------------------------------------------------------------------------------

#: The record type of an arXiv e-print: RIS's "unpublished work", what an e-print is in RIS's list of types
#: (EndNote reads it as Unpublished Work, JabRef as @unpublished). Zotero's RIS translator (zotero/translators,
#: RIS.js) maps no RIS type to its "preprint" item type: it reads UNPB as its default, journalArticle, as it read
#: JOUR; the paper pages' embedded metadata (``DC.type`` preprint) is what saves a preprint there.
RIS_PREPRINT = "UNPB"
#: The record type of any other paper: RIS's "generic", since the index does not know whether an OpenAlex or
#: Semantic Scholar record is an article, a chapter or a preprint.
RIS_GENERIC = "GEN"


def ris_type(paper_id: str) -> str:
    """``RIS_PREPRINT`` for an arXiv id, else ``RIS_GENERIC``."""
    return RIS_PREPRINT if arxiv_id(paper_id) else RIS_GENERIC


def to_ris(papers: Sequence[Paper]) -> str:
    """One record per paper, tagged lines ``TAG  - value``: TY (``ris_type``), ID (the paper id), TI, an AU per
    author as RIS wants names ("Lastname, Firstname, Suffix": ``reading.last_first``), PY, AB, DO when the id is a
    DOI, UR when the id says where the paper is; ER ends it, and a blank line follows. Values on one line with their
    TeX rendered (RIS has no escaping and its readers no TeX)."""
    lines = []
    for paper in papers:
        lines += [f"TY  - {ris_type(paper.id)}", f"ID  - {one_line(paper.id)}", f"TI  - {readable(paper.title)}"]
        lines += [f"AU  - {last_first(name)}" for name in joined_authors(paper.authors) if last_first(name)]
        if paper.year is not None:
            lines.append(f"PY  - {paper.year}")
        if paper.abstract:
            lines.append(f"AB  - {readable(paper.abstract)}")
        doi = doi_of(paper.id)
        if doi:
            lines.append(f"DO  - {doi}")
        url = paper_url(paper.id)
        if url:
            lines.append(f"UR  - {url}")
        lines += ["ER  - ", ""]
    return "\n".join(lines) + ("\n" if lines else "")
