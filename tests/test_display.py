"""Human output that fits the terminal (``retrieval.interfaces.output.display``): the pure functions, and the CLI's
search, explain, show and writer summaries through ``main``, on a real index of papers with awkward ids, titles
(TeX among them) and authors."""

from __future__ import annotations

import json
from importlib.metadata import version

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval.config import RetrievalConfig
from retrieval.corpus.paper import Paper
from retrieval.interfaces.cli import main
from retrieval.interfaces.output import display
from retrieval.search.blend import RankedPaper, RetrievalResult
from retrieval.store.sqlite.build import build_index
from tests.helpers import paper as paper_record
from tests.helpers import write_jsonl

LONG_TITLE = (
    "Black hole entropy from the holographic principle: a systematic study of microstate counting in "
    "supersymmetric string compactifications, with applications to extremal and near-extremal solutions"
)
S2_ID = "0123456789abcdef0123456789abcdef01234567"


def output_papers() -> list[Paper]:
    """Papers about black hole entropy whose ids, titles and authors are hard to print and to export."""
    return [
        Paper("hep-th/9711200", "The Large $N$ Limit of Superconformal Field Theories and Supergravity",
              "We show that black hole entropy and large N gauge theories are dual.", 1997, ["Juan M. Maldacena"],
              ["hep-th/9802150", "hep-th/0000001"]),
        Paper("hep-th/9802150", "Anti de Sitter Space and Holography", "Black hole entropy in anti de Sitter space.",
              1998, ["Edward Witten"]),
        Paper("hep-th/9802109", "Gauge Theory Correlators from Non-Critical String Theory",
              "Correlators and black hole entropy.", 1998, ["S. S. Gubser", "I. R. Klebanov", "A. M. Polyakov"],
              ["hep-th/9711200"]),
        Paper("1234.5678", "Schrödinger black holes: 黑洞熵 entropy and the naïve counting", "Black hole entropy.",
              2012, ["Édouard Brézin", "Zoë Ørsted"], ["hep-th/9711200"]),
        Paper("W2741809807", LONG_TITLE, "Black hole entropy, black hole entropy, entropy.", 2017,
              [f"Author Number{i}" for i in range(12)], ["hep-th/9711200", "hep-th/9802150"]),
        Paper(S2_ID, "Hyperk\\\"ahler black hole entropy: {unbalanced & 50% of \\ the {\\cal N} = 4 case",
              "Black hole entropy with a % sign, an & and a lone \\ backslash.", 2001, ["Smith, John", "Jones Jr."],
              ["1234.5678"]),
        Paper("bh-7", "Black hole entropy without a date", "Black hole entropy.", None, []),
        Paper("bh-8", "Entropy of black holes, again", "Black hole entropy, once more.", 2005, ["A. Author"],
              ["bh-7"]),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def output_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("output") / "output.db"
    build_index(output_papers(), path)
    return path


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _entry(p: Paper, score: float, **numbers) -> RankedPaper:
    return RankedPaper(p, 1.0, numbers.get("distance", 0), 0.5, score, 1.0, 0.25)


def _result(papers: list[Paper], query: str = "black hole entropy", hit_count: int = 42) -> RetrievalResult:
    ranked = [_entry(p, 1.0 - i / 100) for i, p in enumerate(papers)]
    return RetrievalResult(query, ranked, hit_count, 0.8, 1.0, 3.25, RetrievalConfig(), {})


# -- the pure functions ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [80, 100, 132, 250])
def test_the_table_fits_the_width_and_keeps_ids_whole(width):
    papers = [p for p in output_papers() if p.id != S2_ID]
    lines = display.result_lines(_result(papers), width, scores=True)
    assert all(display.columns(line) <= width for line in lines)
    assert lines[0].split() == ["#", "id", "year", "author", "title", "score"]
    assert len(lines) == 1 + len(papers)
    for rank, (line, p) in enumerate(zip(lines[1:], papers, strict=True), start=1):
        cells = line.split()
        assert cells[0] == str(rank) and cells[1] == p.id and cells[-1] == f"{1.0 - (rank - 1) / 100:.4f}"
        assert (str(p.year) in cells) == (p.year is not None)
    others = "+" if width < 100 else " et al."  # at 80 columns the author column is narrow: "Gubser+"
    assert "Maldacena" in lines[1] and f"Gubser{others}" in lines[3] and f"Brézin{others}" in lines[4]
    assert "Black hole entropy from" in lines[5] and ("…" in lines[5]) == (width < 250)
    ends = {display.columns(line) for line in lines}
    assert len(ends) == 1  # the scores are one column, at the right (a wide character counts two)
    assert display.result_lines(_result(papers), width, scores=True) == lines  # deterministic
    plain = display.result_lines(_result(papers), width)  # the default: no score column
    assert plain[0].split() == ["#", "id", "year", "author", "title"]
    assert [line.split()[:2] for line in plain[1:]] == [line.split()[:2] for line in lines[1:]]


def test_the_title_gets_most_of_80_columns():
    """At 80 columns the title is the widest column: more than half the line, where it had 25 to 35 columns."""
    papers = [Paper(f"hep-th/97112{i:02d}", LONG_TITLE, "", 1997, ["Andrew Strominger", "Cumrun Vafa"])
              for i in range(10)]  # fmt: skip
    lines = display.result_lines(_result(papers), 80)
    header = lines[0]
    title_width = 80 - header.index("title")
    assert title_width >= 40 and all(len(line) <= 80 for line in lines)
    assert lines[1].split()[3] == "Strominger+" and lines[1].rstrip().endswith("…")
    assert header.index("title") - header.index("author") <= display.AUTHOR_NARROW + 2


def test_a_long_id_takes_the_author_column_before_any_of_the_title():
    papers = output_papers()
    narrow = display.result_lines(_result(papers), 80, scores=True)
    wide = display.result_lines(_result(papers), 120, scores=True)
    assert narrow[0].split() == ["#", "id", "year", "title", "score"] and all(len(line) <= 80 for line in narrow)
    assert wide[0].split() == ["#", "id", "year", "author", "title", "score"]
    row = narrow[1 + [p.id for p in papers].index(S2_ID)]
    assert row.split()[1] == S2_ID and "Hyperk" in row
    tiny = display.table_lines(_result([Paper("x" * 90, "A title", year=2000)]).ranked, 80)
    assert all(len(line) <= 80 for line in tiny) and "…" in tiny[1]  # an id longer than a line: cut, at last


def test_ranks_count_from_the_offset():
    lines = display.result_lines(_result(output_papers()[:3]), 80, offset=20)
    assert [line.split()[0] for line in lines[1:]] == ["21", "22", "23"]


def test_why_adds_an_indented_line_per_entry_that_fits():
    result = _result(output_papers())
    lines = display.result_lines(result, 80, why=True)
    assert all(display.columns(line) <= 80 for line in lines)
    rows = [i for i, line in enumerate(lines) if line[:2].strip().isdigit()]
    assert len(rows) == len(result.ranked)
    for entry, start, end in zip(result.ranked, rows, rows[1:] + [len(lines)], strict=True):
        explanation = lines[start + 1 : end]
        assert explanation and all(line.startswith("   ") for line in explanation)
        assert " ".join(line.strip() for line in explanation) == entry.why(result.config)


def test_no_results_does_not_echo_a_long_query():
    query = "entropy " * 2048  # 16 KB
    result = RetrievalResult(query, [], 0, 0.0, 0.0, 1.5, RetrievalConfig(), {})
    lines = display.result_lines(result, 80)
    assert len(lines) == 1 and len(lines[0]) <= 80
    assert lines[0].startswith("no results for 'entropy entropy") and "…'" in lines[0] and "1.5 ms" in lines[0]
    assert display.summary_lines(result, 80) == []
    assert display.shorten(query) == query[:60].rstrip() + "…" and display.shorten("short") == "short"


def test_summary_lines_say_which_results_and_one_count():
    """One count, worded so that it cannot be taken for another: which results these are, and how many papers
    match the query; the ranking's internals (the candidates ranked, the formula, the gate) only when verbose."""
    result = _result(output_papers()[:3])
    result.expansion = {"gate": {"fired": False, "reason": "20 seeds match >= 0.3 of the query: " + "x " * 60}}
    lines = display.summary_lines(result, 80, offset=10, matched=2248)
    assert lines == ["results 11-13; 2,248 papers match the query (3.2 ms)"]
    assert "42" not in " ".join(lines) and "hits" not in " ".join(lines)
    verbose = display.summary_lines(result, 80, offset=10, matched=2248, verbose=True)
    assert verbose[0] == lines[0] and all(len(line) <= 80 for line in verbose)
    assert verbose[1] == "top 1.0000, average 0.8000 over 42 ranked candidates"
    assert any(line.startswith("final = 1*bm25/max + 0.5*graph(evidence)") for line in verbose)
    assert any(line.startswith("graph: not expanded (20 seeds match") for line in verbose)
    one = _result(output_papers()[:1])
    assert display.summary_lines(one, 200, matched=1) == ["result 1; 1 paper matches the query (3.2 ms)"]
    assert display.summary_lines(one, 200) == ["result 1 (3.2 ms)"]  # a result that counted nothing
    about = display.summary_lines(_result(output_papers()[:3]), 80, matched=5000)
    assert about[0].startswith("results 1-3; 5,000 papers match")


def test_first_author_and_surname():
    assert display.surname("Juan M. Maldacena") == "Maldacena"
    assert display.surname("Maldacena, Juan") == "Maldacena"
    assert display.surname("Martin Luther King Jr.") == "King"
    assert display.surname("  Édouard\tBrézin ") == "Brézin"
    assert display.surname("") == ""
    assert display.first_author([]) == "" and display.first_author(["E. Witten"]) == "Witten"
    assert display.first_author(["E. Witten", "N. Seiberg"]) == "Witten et al."
    # Names the table used to get wrong: TeX, initials run into the surname, particles, no surname at all.
    assert display.surname(r"M\'aximo Ba\~nados") == "Bañados"
    assert display.surname("S.N.Solodukhin") == "Solodukhin"
    assert display.surname("Peter van Nieuwenhuizen") == "van Nieuwenhuizen"
    assert display.surname("Author 1-8") == "Author 1-8"  # the demo corpus's names: not "1-8"
    assert display.first_author(["Curtis G. Callan", "Jr.", "Juan M. Maldacena"]) == "Callan et al."
    assert display.author_cell(["Andrew Strominger", "Cumrun Vafa"], 12) == "Strominger+"
    assert display.author_cell(["Andrew Strominger", "Cumrun Vafa"], 20) == "Strominger et al."
    assert display.author_cell(["Andrew Strominger"], 6) == "Strom…"


def test_the_demo_corpus_shows_its_authors_names(demo_db, capsys):
    """The demo corpus's authors are "Author 1-8", "Coauthor 1-8": the table showed "1-8 et al."."""
    code, out, _ = run(capsys, "search", "attention sparsity", "--db", str(demo_db), "--limit", "3")
    assert code == 0
    rows = out.splitlines()[1:4]
    assert all(" Author " in row for row in rows) and not any(" 1-" in row.split("Author")[0] for row in rows)


def test_plurals_are_right_for_one():
    assert display.count(1, "paper") == "1 paper" and display.count(2524, "paper") == "2,524 papers"
    assert display.count(1, "sub-query", "sub-queries") == "1 sub-query"
    assert display.count(3, "sub-query", "sub-queries") == "3 sub-queries"
    page = Paper("x", "A title", citations=["y"])
    assert "cited by 1 paper of the corpus" in display.paper_lines(page, 80, citing={"y": Paper("y", "Y")})


def test_columns_fit_and_pad_count_wide_and_combining_characters():
    assert display.columns("abc") == 3 and display.columns("黑洞") == 4 and display.columns("e\u0301") == 1
    assert display.fit("黑洞熵 entropy", 5) == "黑洞…" and display.columns(display.fit("黑洞熵 entropy", 5)) == 5
    assert display.pad("ab", 4) == "ab  " and display.fit("a\nb\tc", 10) == "a b c"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.integers(min_value=10, max_value=120), st.integers(0, 8), st.integers(0, 8))
def test_wrap_never_exceeds_the_width_and_keeps_every_word(text, width, indent, hanging):
    lines = display.wrap(text, width, indent=indent, hanging=hanging)
    assert all(display.columns(line) <= width or len(line.strip()) == 1 for line in lines)
    assert "".join("".join(line.split()) for line in lines) == "".join(display.one_line(text).split())


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=1, max_value=100))
def test_fit_is_at_most_the_width(text, width):
    fitted = display.fit(text, width)
    assert display.columns(fitted) <= width
    assert fitted == display.one_line(text) or fitted.endswith("…")


def test_paper_page_lists_references_and_citing_papers():
    papers = {p.id: p for p in output_papers()}
    page = papers["hep-th/9711200"]
    page.citations = ["hep-th/9802109", "1234.5678", "W2741809807"]
    lines = display.paper_lines(page, 80, refs=papers, citing=papers, limit=2)
    assert all(display.columns(line) <= 80 for line in lines)
    assert lines[:3] == [
        "hep-th/9711200 (1997)",
        "The Large N Limit of Superconformal Field Theories and Supergravity",  # its TeX rendered
        "Juan M. Maldacena",
    ]
    text = "\n".join(lines)
    assert "references: 2 (1 in the corpus)" in text and "cited by 3 papers of the corpus" in text
    assert any(line.split()[:2] == ["hep-th/9802150", "1998"] and "Witten" in line for line in lines)
    assert any(line.split()[:1] == ["hep-th/0000001"] and "(not in the corpus)" in line for line in lines)
    assert "  and 1 more" in lines
    tex = display.paper_lines(papers[S2_ID], 80)
    assert tex[1].startswith("Hyperkähler black hole entropy:") and "\\" not in tex[1]
    bare = display.paper_lines(Paper("x", "A title"), 80)
    assert "references: none listed" in bare and "cited by no paper of the corpus" in bare


def test_terminal_width_reads_columns_and_is_at_least_80(monkeypatch):
    monkeypatch.setenv("COLUMNS", "132")
    assert display.terminal_width() == 132
    monkeypatch.setenv("COLUMNS", "40")
    assert display.terminal_width() == 80
    monkeypatch.setenv("COLUMNS", "wide")
    assert display.terminal_width() >= 80  # not a number: the terminal's, or 80 when there is none


# -- the CLI -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("columns", ["80", "120"])
def test_search_prints_a_table_that_fits_the_terminal(output_db, capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = run(capsys, "search", "black hole entropy", "--db", str(output_db), "--why", "--limit", "8")
    assert code == 0
    lines = out.splitlines()
    assert all(display.columns(line) <= int(columns) for line in lines), max(lines, key=display.columns)
    assert lines[0].split()[:3] == ["#", "id", "year"]
    assert any(line.split()[:2] == ["1", lines[1].split()[1]] for line in lines[1:2])
    assert S2_ID in out and "W2741809807" in out and "results 1-8; " in out and "hits" not in out
    assert sum(1 for line in lines if "*bm25" in line and "*graph" in line) >= 8  # a --why line per result
    assert "Hyperkähler" in out and 'Hyperk\\"ahler' not in out  # TeX rendered in the table


def test_search_shows_the_ranking_internals_only_when_asked(output_db, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    argv = ["search", "black hole entropy", "--db", str(output_db), "--limit", "3"]
    _, plain, _ = run(capsys, *argv)
    _, verbose, _ = run(capsys, *argv, "-v")
    assert plain.splitlines()[0].split() == ["#", "id", "year", "cited", "author", "title"]
    assert plain.splitlines()[-1].startswith("results 1-3; ") and "final =" not in plain and "graph:" not in plain
    assert verbose.splitlines()[0].split()[-1] == "score"
    assert "ranked candidates" in verbose and "final =" in verbose and "graph: " in verbose
    same = run(capsys, *argv, "--verbose")[1]
    assert same.splitlines()[:4] == verbose.splitlines()[:4] and len(same.splitlines()) == len(verbose.splitlines())


def test_explain_fits_the_terminal(output_db, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "explain", "black hole entropy " * 40, "--db", str(output_db), "--top-k", "6")
    assert code == 0
    lines = out.splitlines()
    assert all(display.columns(line) <= 80 for line in lines), max(lines, key=display.columns)
    assert lines[0].startswith("query: 'black hole entropy black") and "…'" in lines[0]
    assert "|V| =" in out and "status:" in out
    header = next(line for line in lines if line.split()[:2] == ["#", "id"])
    assert header.split() == ["#", "id", "year", "title", "score"]


def test_writers_print_their_summary_as_json(tmp_path, capsys):
    db = str(tmp_path / "w.db")
    code, out, _ = run(capsys, "build", "--db", db, "--json")
    built = json.loads(out)
    assert code == 0 and built["papers"] == 100 and built["edges"] == 185 and built["path"] == db
    more = write_jsonl(tmp_path / "more.jsonl", [paper_record("new-1", "black hole entropy")])
    code, out, _ = run(capsys, "add", str(more), "--db", db, "--json")
    assert code == 0 and (json.loads(out)["added"], json.loads(out)["papers"]) == (1, 101)
    code, out, _ = run(capsys, "remove", "new-1", "--db", db, "--json")
    assert code == 0 and (json.loads(out)["removed"], json.loads(out)["papers"]) == (1, 100)
    code, out, _ = run(capsys, "upgrade", "--db", db, "--json")
    upgraded = json.loads(out)
    assert code == 0 and upgraded["upgraded"] is False and upgraded["from_revision"] == upgraded["to_revision"]
    code, out, _ = run(capsys, "remove", "p001", "--db", db)
    assert out.startswith("removed 1 paper from") and "; 99 papers now" in out and not out.startswith("{")


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"retrieval {version('retrieval')}"
