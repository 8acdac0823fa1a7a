"""Exports (``retrieval.interfaces.output.export``): every format parsed back with its own reader (bibtexparser, csv,
json, rispy and the RIS tags line by line, Zotero's RIS import rules), the BibTeX escaping against awkward text,
TeX rendered where the format is not TeX, and ``--format`` on ``search`` and ``explain``."""

from __future__ import annotations

import csv
import io
import json
import re

import bibtexparser
import pytest
import rispy
from bibtexparser.middlewares import LatexDecodingMiddleware
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.corpus.paper import Paper
from retrieval.interfaces.cli import options as cli_types
from retrieval.interfaces.output import export, reading
from tests.test_display import S2_ID, _result, output_db, output_papers, run  # noqa: F401 (a fixture)

RIS_LINE = re.compile(r"^([A-Z][A-Z0-9])  - (.*)$")


def parse_bibtex(text: str, decode: bool = False):
    library = bibtexparser.parse_string(text, append_middleware=[LatexDecodingMiddleware()] if decode else None)
    assert not library.failed_blocks, [block.error for block in library.failed_blocks]
    return library.entries


def parse_ris(text: str) -> list[dict[str, list[str]]]:
    """Records as ``tag -> values``; every non-blank line must be a tag line, every record end with ER."""
    records, current = [], None
    for line in text.splitlines():
        if not line.strip():
            continue
        match = RIS_LINE.match(line)
        assert match, line
        tag, value = match.groups()
        if tag == "TY":
            assert current is None
            current = {}
        assert current is not None, line
        if tag == "ER":
            records.append(current)
            current = None
        else:
            current.setdefault(tag, []).append(value)
    assert current is None
    return records


def test_formats_are_the_ones_the_cli_offers():
    assert export.FORMATS == cli_types.OUTPUT_FORMATS


def test_bibtex_parses_back_with_every_field():
    papers = output_papers()
    entries = parse_bibtex(export.export(papers, "bibtex"))
    assert [e.entry_type for e in entries] == ["misc"] * len(papers)
    keys = [e.key for e in entries]
    assert len(set(keys)) == len(keys) and all(re.fullmatch(r"[a-z][a-z0-9]*", key) for key in keys)
    by_key = {e.key: e for e in entries}
    maldacena = by_key["maldacena1997large"]
    assert maldacena["title"] == "The Large $N$ Limit of Superconformal Field Theories and Supergravity"
    assert maldacena["author"] == "Juan M. Maldacena" and maldacena["year"] == "1997"
    assert (maldacena["eprint"], maldacena["archivePrefix"], maldacena["primaryClass"]) == (
        "hep-th/9711200", "arXiv", "hep-th"
    )  # fmt: skip
    assert maldacena["url"] == "https://arxiv.org/abs/hep-th/9711200"
    assert maldacena["abstract"] == "We show that black hole entropy and large N gauge theories are dual."
    gubser = by_key["gubser1998gauge"]
    assert gubser["author"].split(" and ") == ["S. S. Gubser", "I. R. Klebanov", "A. M. Polyakov"]
    new_style = by_key["brezin2012schrodinger"]
    assert new_style["eprint"] == "1234.5678" and "primaryClass" not in new_style.fields_dict
    assert by_key["number02017black"]["url"] == "https://openalex.org/W2741809807"
    assert by_key["smith2001hyperkahler"]["url"] == f"https://www.semanticscholar.org/paper/{S2_ID}"
    undated = by_key["anonblack"]  # no author, no year
    assert "year" not in undated.fields_dict and "author" not in undated.fields_dict
    assert "url" not in by_key["author2005entropy"].fields_dict  # an id that says nowhere


def test_bibtex_escapes_what_would_break_an_entry_and_keeps_tex_and_unicode():
    awkward = output_papers()[5]  # {unbalanced & 50% of \ the {\cal N}, Hyperk\"ahler, a lone \ in the abstract
    (entry,) = parse_bibtex(export.to_bibtex([awkward]))
    assert entry["title"] == (
        r"Hyperk\"ahler black hole entropy: \textbraceleft{}unbalanced \& 50\% of \textbackslash{} the "
        r"\textbraceleft{}\cal N\textbraceright{} = 4 case"
    )
    assert entry["abstract"] == r"Black hole entropy with a \% sign, an \& and a lone \textbackslash{} backslash."
    assert entry["author"] == "Smith, John and Jones Jr."
    (decoded,) = parse_bibtex(export.to_bibtex([awkward]), decode=True)
    assert decoded["abstract"] == "Black hole entropy with a % sign, an & and a lone \\ backslash."
    assert decoded["title"].startswith("Hyperkähler black hole entropy:")
    (unicode,) = parse_bibtex(export.to_bibtex([output_papers()[3]]), decode=True)
    assert unicode["title"] == "Schrödinger black holes: 黑洞熵 entropy and the naïve counting"
    assert unicode["author"] == "Édouard Brézin and Zoë Ørsted"
    # Balanced TeX stays TeX; math keeps _ and ^, text outside math gets them escaped.
    tex = export.tex
    kept = r"Softly-Broken {\cal N} = 4 and $AdS_5 \times S^5$"
    assert tex(kept) == kept
    assert tex("QCD_{3+1} at 100% & #1") == r"QCD\_{3+1} at 100\% \& \#1"
    assert tex("a lone $ sign") == r"a lone \$ sign" and tex("a\nb") == "a b"
    assert tex("}{") == r"\textbraceright{}\textbraceleft{}" and tex("\\") == r"\textbackslash{}"
    organisation = parse_bibtex(export.to_bibtex([Paper("o", "T", authors=["Smith and Sons", "A. B"])]))[0]
    assert organisation["author"] == "{Smith and Sons} and A. B"


def test_a_doi_or_url_with_a_brace_or_backslash_keeps_every_entry_whole():
    # `doi = {10.1000/a{b}` left a brace open: bibtexparser read on to the end of the file and lost the entries
    # after it; `10.1000/xyz"}` closed the field early.
    papers = [Paper("10.1000/a{b", "zeta one", authors=["Alpha"]), Paper("10.1000/xyz\"}", "zeta two"),
              Paper("10.1000/back\\slash", "zeta three"), Paper("p4", "zeta four")]  # fmt: skip
    entries = parse_bibtex(export.to_bibtex(papers))
    assert [e["title"] for e in entries] == ["zeta one", "zeta two", "zeta three", "zeta four"]
    assert [e.fields_dict["doi"].value for e in entries[:3]] == [
        "10.1000/a%7Bb",
        '10.1000/xyz"%7D',
        "10.1000/back%5Cslash",
    ]
    assert entries[0]["url"] == "https://doi.org/10.1000/a%7Bb"


def test_bibtex_writes_a_suffix_where_bibtex_reads_one():
    """hep-th lists "Curtis G. Callan" and "Jr." as two authors; BibTeX gets one, in its "Last, Jr, First" form."""
    from bibtexparser.middlewares import SeparateCoAuthors, SplitNameParts

    text = export.to_bibtex([Paper("hep-th/9510134", "T", authors=["Curtis G. Callan", "Jr.", "Juan M. Maldacena"])])
    (entry,) = parse_bibtex(text)
    assert entry["author"] == "Callan, Jr., Curtis G. and Juan M. Maldacena"
    library = bibtexparser.parse_string(text, append_middleware=[SeparateCoAuthors(), SplitNameParts()])
    callan, maldacena = library.entries[0]["author"]
    assert (callan.last, callan.jr, callan.first) == (["Callan"], ["Jr."], ["Curtis", "G."])
    assert (maldacena.last, maldacena.first) == (["Maldacena"], ["Juan", "M."])


@pytest.mark.parametrize(
    "name, written, parts",
    [
        (r"Mariana Gra\~na", "Mariana Graña", (["Mariana"], ["Graña"], [])),  # ~ read as a space between names
        (r"Jo\~ao P. Rodrigues", "João P. Rodrigues", (["João", "P."], ["Rodrigues"], [])),
        ("Thacher Jr., H. C.", "Thacher, Jr., H. C.", (["H.", "C."], ["Thacher"], ["Jr."])),  # CACM's form
        ("Carr III, J. W.", "Carr, III, J. W.", (["J.", "W."], ["Carr"], ["III"])),
        ("Curtis G. Callan, Jr.", "Callan, Jr., Curtis G.", (["Curtis", "G."], ["Callan"], ["Jr."])),  # one string
        ("K.I.Bolotin", "K.I. Bolotin", (["K.I."], ["Bolotin"], [])),  # initials run into the surname
        ("Greniewski, M,", "Greniewski, M", (["M"], ["Greniewski"], [])),  # a trailing comma failed the entry
        # BibTeX's own "Last, Jr, First": the suffix was read as a given name ("Smith, Jr. John")
        ("Smith, Jr., John", "Smith, Jr., John", (["John"], ["Smith"], ["Jr."])),
    ],
)
def test_bibtex_names_split_as_the_corpus_means_them(name, written, parts):
    """Names BibTeX's parser (and bibtexparser's SplitNameParts) took apart wrongly, from hep-th and CACM."""
    from bibtexparser.middlewares import SeparateCoAuthors, SplitNameParts

    text = export.to_bibtex([Paper("p1", "T", year=1960, authors=[name])])
    library = bibtexparser.parse_string(text, append_middleware=[SeparateCoAuthors(), SplitNameParts()])
    assert not library.failed_blocks and parse_bibtex(text)[0]["author"] == written
    (author,) = library.entries[0]["author"]
    assert (author.first, author.last, author.jr) == parts
    key = export.citation_keys([Paper("p1", "T", year=1960, authors=[name])])[0]
    assert key == export.ascii_word(parts[1][0]) + "1960t"  # "thacher1960t", not "jr1960t"


def test_ris_writes_a_suffix_after_the_given_names():
    assert [reading.last_first(n) for n in ("Thacher Jr., H. C.", "Curtis G. Callan, Jr.", "Greniewski, M,")] == [
        "Thacher, H. C., Jr.",
        "Callan, Curtis G., Jr.",
        "Greniewski, M",
    ]


@pytest.mark.parametrize("title", [r"The set \{x \\}", r"Line one\\{x\}", r"a \\\{ b \\}"])
def test_a_tex_line_break_beside_a_brace_keeps_the_entry_whole(title):
    """``\\\\}`` was counted as an escaped brace: the braces seemed balanced, the line break became a space and a
    bare brace ended the field (bibtexparser 2 lost the author, year and abstract, or the whole entry)."""
    text = export.to_bibtex([Paper("hep-th/9711200", title, year=1997, authors=["A. Author"], abstract="Words.")])
    library = bibtexparser.parse_string(text)
    assert not library.failed_blocks and len(library.entries) == 1
    entry = library.entries[0]
    assert entry["title"] == export.tex(title) and entry["year"] == "1997" and entry["abstract"] == "Words."


def _braces_balance(value: str) -> bool:
    depth = 0
    for char in value:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            return False
    return depth == 0


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab {}\\$%&#_^~\"'@,=") + ["é", "黑", "\n"]), max_size=40))
def test_any_title_gives_one_entry_with_balanced_braces(title):
    text = export.to_bibtex([Paper("hep-th/9711200", title, year=1997, authors=["A. Author"])])
    (entry,) = parse_bibtex(text)
    assert entry["title"] == export.tex(title) and _braces_balance(entry["title"])  # as BibTeX counts them
    assert entry["year"] == "1997" and entry["author"] == "A. Author"


def test_citation_keys_are_ascii_and_deduplicated():
    same = [Paper(str(i), "The Large N Limit", year=1997, authors=["Juan Maldacena"]) for i in range(3)]
    other = Paper("x", "A limit", year=1997, authors=["Maldacena, J."])
    folded = Paper("y", "Über die Quantenmechanik", year=1926, authors=["Erwin Schrödinger"])
    tex_name = Paper("z", r"$\theta$ vacua", year=1976, authors=[r"G. 't Hooft", "x"])
    keys = export.citation_keys([*same, other, folded, tex_name])
    assert keys[:3] == ["maldacena1997largea", "maldacena1997largeb", "maldacena1997largec"]
    assert keys[3:] == ["maldacena1997limit", "schrodinger1926uber", "hooft1976vacua"]
    clash = [Paper("1", "Large"), Paper("2", "Large"), Paper("3", "Largea")]
    assert export.citation_keys(clash) == ["anonlargeb", "anonlargec", "anonlargea"]
    assert export.citation_keys(clash) == export.citation_keys(clash)  # deterministic


@pytest.mark.parametrize(
    ("pid", "expected"),
    [("hep-th/9711200", "hep-th/9711200"), ("math.AG/0101001", "math.AG/0101001"), ("1234.5678", "1234.5678"),
     ("2101.00001v2", "2101.00001v2"), ("arXiv:1706.03762", "1706.03762"), ("W2741809807", None), ("p001", None),
     ("hep-th/97112", None), (S2_ID, None)],
)  # fmt: skip
def test_arxiv_ids(pid, expected):
    assert export.arxiv_id(pid) == expected


def test_ris_parses_back_line_by_line():
    papers = output_papers()
    records = parse_ris(export.export(papers, "ris"))
    assert len(records) == len(papers)
    for record, p in zip(records, papers, strict=True):
        kind = "UNPB" if export.arxiv_id(p.id) else "GEN"  # an e-print is unpublished work; the rest unknown
        assert record["TY"] == [kind] and record["ID"] == [p.id] and record["TI"] == [reading.text(p.title)]
        assert record.get("AU", []) == [reading.last_first(a) for a in p.authors]
        assert record.get("PY") == ([str(p.year)] if p.year is not None else None)
        assert record.get("AB") == ([reading.text(p.abstract)] if p.abstract else None)
    assert records[0]["UR"] == ["https://arxiv.org/abs/hep-th/9711200"]
    assert records[0]["TI"] == ["The Large N Limit of Superconformal Field Theories and Supergravity"]  # no TeX
    assert records[0]["AU"] == ["Maldacena, Juan M."]  # "Lastname, Firstname", as RIS wants
    assert records[2]["AU"] == ["Gubser, S. S.", "Klebanov, I. R.", "Polyakov, A. M."]
    assert records[3]["AU"] == ["Brézin, Édouard", "Ørsted, Zoë"]
    assert records[5]["AU"] == ["Smith, John", "Jones, Jr."] and records[5]["TI"][0].startswith("Hyperkähler")
    assert export.to_ris([]) == ""


def test_ris_round_trips_through_rispy():
    """rispy (a maintained RIS reader and writer) reads every record back, and writes what it read so that it
    reads the same again."""
    papers = output_papers() + [
        Paper("hep-th/9510134", "Extremal Black Holes As Fundamental Strings", r"$\alpha'$ and 50% of it", 1995,
              ["Curtis G. Callan", "Jr.", "Juan M. Maldacena"]),
        Paper("10.1103/PhysRevD.55.5112", "M theory as a matrix model", "", 1997, ["T. Banks", "W. Fischler"]),
    ]  # fmt: skip
    text = export.to_ris(papers)
    entries = rispy.loads(text)
    assert len(entries) == len(papers)
    for entry, p in zip(entries, papers, strict=True):
        assert entry["id"] == p.id and entry["title"] == reading.text(p.title)
        assert entry["type_of_reference"] == ("UNPB" if export.arxiv_id(p.id) else "GEN")
        assert entry.get("authors", []) == [reading.last_first(a) for a in reading.authors(p.authors)]
        assert entry.get("year") == (str(p.year) if p.year is not None else None)
    callan, banks = entries[-2], entries[-1]
    assert callan["authors"] == ["Callan, Curtis G., Jr.", "Maldacena, Juan M."]  # "Jr." is not an author
    assert callan["abstract"] == "α' and 50% of it"
    assert banks["doi"] == "10.1103/PhysRevD.55.5112" and banks["urls"] == ["https://doi.org/10.1103/PhysRevD.55.5112"]
    assert rispy.loads(rispy.dumps(entries)) == entries


#: Zotero's RIS import (zotero/translators, RIS.js, "lastUpdated" 2026-01-05): ``importTypeMap``'s own entries
#: (the types it reads but does not write) merged with ``exportTypeMap`` reversed, as the translator builds it; a
#: TY in neither becomes ``DEFAULT_IMPORT_TYPE``. No TY there is Zotero's "preprint" item type: a preprint exported
#: from Zotero is written as ``DEFAULT_EXPORT_TYPE``, GEN, and read back as a journal article.
ZOTERO_RIS_TYPES = {
    "ABST": "journalArticle", "ADVS": "film", "AGGR": "document", "ANCIENT": "document", "CHART": "artwork",
    "CLSWK": "book", "CPAPER": "conferencePaper", "CTLG": "magazineArticle", "DBASE": "dataset", "EBOOK": "book",
    "ECHAP": "bookSection", "EDBOOK": "book", "EJOUR": "journalArticle", "EQUA": "document", "FIGURE": "artwork",
    "GEN": "journalArticle", "GOVDOC": "report", "GRNT": "document", "INPR": "manuscript",
    "JFULL": "journalArticle", "LEGAL": "case", "MULTI": "videoRecording", "MUSIC": "audioRecording",
    "PAMP": "manuscript", "SER": "book", "STAND": "report", "UNBILL": "manuscript", "UNPD": "manuscript",
    "WEB": "webpage", "ART": "artwork", "SOUND": "audioRecording", "BILL": "bill", "BLOG": "blogPost",
    "BOOK": "book", "CHAP": "bookSection", "CASE": "case", "COMP": "computerProgram", "CONF": "conferencePaper",
    "DICT": "dictionaryEntry", "ENCYC": "encyclopediaArticle", "ICOMM": "email", "DATA": "dataset",
    "MPCT": "film", "HEAR": "hearing", "JOUR": "journalArticle", "PCOMM": "letter", "MGZN": "magazineArticle",
    "MANSCPT": "manuscript", "MAP": "map", "NEWS": "newspaperArticle", "PAT": "patent", "SLIDE": "presentation",
    "RPRT": "report", "STAT": "statute", "THES": "thesis", "VIDEO": "videoRecording", "ELEC": "webpage",
}  # fmt: skip
ZOTERO_DEFAULT_IMPORT_TYPE = "journalArticle"


def zotero_ris_item(record: dict[str, list[str]]) -> dict:
    """A record read as Zotero's RIS translator reads these tags: the item type from TY, an author from each AU
    (``lastName`` before the first comma, ``firstName`` the rest after it; no comma: one field), TI the title,
    AB the abstract, PY the date, UR the url, DO the DOI."""
    item = {"itemType": ZOTERO_RIS_TYPES.get(record["TY"][0].strip().upper(), ZOTERO_DEFAULT_IMPORT_TYPE)}
    creators = []
    for value in record.get("AU", []):
        last = re.split(r"\s*,\s*", value)[0]
        first = re.sub(r"^\s*,\s*", "", value[len(last) :])
        creators.append({"lastName": last, "firstName": first} if first else {"lastName": last, "fieldMode": 1})
    item["creators"] = creators
    for tag, field in (("TI", "title"), ("AB", "abstractNote"), ("PY", "date"), ("UR", "url"), ("DO", "DOI")):
        if tag in record:
            item[field] = record[tag][0]
    return item


def test_zotero_reads_each_author_and_field_of_the_ris():
    records = parse_ris(export.to_ris(output_papers()))
    maldacena, gubser = zotero_ris_item(records[0]), zotero_ris_item(records[2])
    assert maldacena["creators"] == [{"lastName": "Maldacena", "firstName": "Juan M."}]
    assert [c["lastName"] for c in gubser["creators"]] == ["Gubser", "Klebanov", "Polyakov"]
    assert maldacena["title"].startswith("The Large N Limit") and maldacena["date"] == "1997"
    assert maldacena["url"] == "https://arxiv.org/abs/hep-th/9711200"
    assert maldacena["abstractNote"].startswith("We show that black hole entropy")
    particle = zotero_ris_item(parse_ris(export.to_ris([Paper("x", "T", authors=["Gerard 't Hooft"])]))[0])
    assert particle["creators"] == [{"lastName": "'t Hooft", "firstName": "Gerard"}]
    # The e-print's type: what RIS calls unpublished work. Zotero has no RIS type for its preprints and reads it
    # as its default, a journal article, as it read the JOUR written before.
    assert records[0]["TY"] == [export.RIS_PREPRINT] == ["UNPB"]
    assert "preprint" not in ZOTERO_RIS_TYPES.values() and "UNPB" not in ZOTERO_RIS_TYPES
    assert maldacena["itemType"] == "journalArticle"
    assert rispy.TYPE_OF_REFERENCE_MAPPING["UNPB"] == "Unpublished work"


def test_csv_parses_back_with_the_stdlib_reader():
    result = _result(output_papers())
    rows = list(csv.reader(io.StringIO(export.export(result, "csv", offset=10))))
    assert rows[0] == ["rank", "id", "year", "title", "authors", "citations", "score"]
    assert len(rows) == 1 + len(result.ranked)
    for row, entry in zip(rows[1:], result.ranked, strict=True):
        rank, pid, year, title, authors, cited, score = row
        assert pid == entry.paper.id and title == reading.text(entry.paper.title)
        assert cited == ("" if entry.citations is None else str(entry.citations))
        assert float(score) == entry.final_score
        assert year == ("" if entry.paper.year is None else str(entry.paper.year))
        assert authors.split("; ") == entry.paper.authors or (authors == "" and not entry.paper.authors)
    assert rows[1][3] == "The Large N Limit of Superconformal Field Theories and Supergravity"  # TeX rendered
    assert rows[6][3].startswith("Hyperkähler black hole entropy:")
    assert [row[0] for row in rows[1:]] == [str(rank) for rank in range(11, 11 + len(result.ranked))]
    plain = list(csv.reader(io.StringIO(export.export(output_papers()[:1], "csv"))))
    assert plain[1][0] == "1" and plain[1][-1] == ""  # a plain paper has no score


def test_jsonl_is_one_object_per_result():
    result = _result(output_papers())
    lines = export.export(result, "jsonl", offset=5).splitlines()
    objects = [json.loads(line) for line in lines]
    assert [o["rank"] for o in objects] == list(range(6, 6 + len(result.ranked)))
    assert [o["id"] for o in objects] == [r.paper.id for r in result.ranked]
    assert all(o["authors"] == r.paper.authors for o, r in zip(objects, result.ranked, strict=True))
    as_papers = [json.loads(line) for line in export.export(output_papers()[:2], "jsonl").splitlines()]
    assert as_papers[0]["abstract"] and as_papers[1]["rank"] == 2
    records = [(p, 0.5, {"paper_id": p.id}) for p in output_papers()[:2]]
    given = [json.loads(line) for line in export.export(records, "jsonl").splitlines()]
    assert given[0] == {"rank": 1, "paper_id": "hep-th/9711200", "authors": ["Juan M. Maldacena"]}


def test_json_is_the_documents_to_dict():
    result = _result(output_papers()[:2])
    assert json.loads(export.export(result, "json")) == json.loads(json.dumps(result.to_dict()))
    assert json.loads(export.export(output_papers()[:1], "json"))[0]["id"] == "hep-th/9711200"
    assert json.loads(export.export([], "json", document={"a": 1})) == {"a": 1}
    with pytest.raises(ValueError, match="unknown export format"):
        export.export([], "xml")


# -- the CLI -----------------------------------------------------------------------------------------------------


def test_search_json_is_format_json_and_every_format_parses(output_db, capsys):  # noqa: F811
    argv = ["search", "black hole entropy", "--db", str(output_db), "--limit", "5"]
    _, shorthand, _ = run(capsys, *argv, "--json")
    _, long_form, _ = run(capsys, *argv, "--format", "json")
    data = json.loads(shorthand)
    assert json.loads(long_form)["results"] == data["results"] and len(data["results"]) == 5
    ids = [r["id"] for r in data["results"]]
    _, out, _ = run(capsys, *argv, "--format", "jsonl")
    assert [json.loads(line)["id"] for line in out.splitlines()] == ids
    _, out, _ = run(capsys, *argv, "--format", "csv")
    assert [row[1] for row in list(csv.reader(io.StringIO(out)))[1:]] == ids
    _, out, _ = run(capsys, *argv, "--format", "bibtex")
    entries = parse_bibtex(out)
    assert [e["title"] for e in entries] == [export.tex(r["title"]) for r in data["results"]]
    _, out, _ = run(capsys, *argv, "--format", "ris")
    assert [r["ID"] for r in parse_ris(out)] == [[pid] for pid in ids]


def test_show_csv_gives_the_papers_citation_count_as_search_does(output_db, capsys):  # noqa: F811
    # the citations column is a count (papers of the index citing the paper), never the page's list of citing
    # papers; a page of 2 of the 3 citing papers still counts all 3, and a paper nobody cites gives 0
    _, out, _ = run(capsys, "search", "Large N Limit Superconformal", "--db", str(output_db), "--format", "csv")
    searched = {row[1]: row[5] for row in list(csv.reader(io.StringIO(out)))[1:]}
    for pid, cited in (("hep-th/9711200", "3"), ("bh-8", "0")):
        code, out, _ = run(capsys, "show", pid, "--db", str(output_db), "--limit", "2", "--format", "csv")
        rows = list(csv.reader(io.StringIO(out)))
        assert code == 0 and rows[0][5] == "citations" and len(rows) == 2
        assert rows[1][1] == pid and rows[1][5] == cited, rows
    assert searched["hep-th/9711200"] == "3"


def test_explain_exports_its_returned_papers(output_db, capsys):  # noqa: F811
    argv = ["explain", "black hole entropy", "--db", str(output_db), "--top-k", "4"]
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0
    run_json = json.loads(out)
    ids = [r["node"]["paper_id"] if "node" in r else r["paper_id"] for r in run_json["results"]]
    _, formatted, _ = run(capsys, *argv, "--format", "json")
    assert json.loads(formatted)["results"] == run_json["results"]
    _, out, _ = run(capsys, *argv, "--format", "bibtex")
    entries = parse_bibtex(out)
    assert len(entries) == len(ids) and all("author" in e.fields_dict or e.key.startswith("anon") for e in entries)
    _, out, _ = run(capsys, *argv, "--format", "csv")
    rows = list(csv.reader(io.StringIO(out)))[1:]
    assert [row[1] for row in rows] == ids and all(float(row[6]) > 0 for row in rows)
    _, out, _ = run(capsys, *argv, "--format", "jsonl")
    assert [json.loads(line)["rank"] for line in out.splitlines()] == list(range(1, len(ids) + 1))


CONTROLS = ["\x1b", "\x07", "\x00", "\x7f", "\x85", "\x9b", "\u2028", "\u2029", "\x0b", "\x0c", "\t", "\n", "\r"]


def _has_control(text: str) -> bool:
    return any((ord(c) < 32 and c != "\n") or 127 <= ord(c) < 160 or c in "\u2028\u2029" for c in text)


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from([*"ab [m", *CONTROLS]), max_size=30),
    st.text(alphabet=st.sampled_from([*"cd ", *CONTROLS]), max_size=30),
)
def test_no_control_character_of_a_title_or_abstract_reaches_an_export(title, abstract):
    """A title's ESC reached the CSV, BibTeX and RIS exports (a terminal they are printed to takes it as an escape
    sequence; a line-based reader may split on the separators): every export drops them as the table does."""
    paper = Paper("hep-th/9711200", f"Red {title} title", abstract=f"An {abstract}", year=1997, authors=["A. Author"])
    result = _result([paper])
    for fmt in ("csv", "bibtex", "ris"):
        out = export.export(result, fmt).replace("\r\n", "\n")
        assert not _has_control(out), (fmt, out)
    (record,) = parse_ris(export.export(result, "ris"))
    assert record["TI"][0].startswith("Red") and record["TI"][0].endswith("title")
    assert reading.text(paper.title) == record["TI"][0] and not _has_control(reading.text(paper.abstract))
