"""Filters before the top k (years, authors, excluded words, phrases), paging and matched counts: checked against
plain-Python computations over the same papers, on both the pruned and the scored-filter paths."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval import RetrievalClient, read_jsonl
from retrieval.corpus.names import matches, name_key, name_words
from retrieval.corpus.paper import Paper
from retrieval.errors import ConfigError
from retrieval.search import lexical
from retrieval.search.filters import Filters, contains
from retrieval.validate import parse_years
from tests.helpers import BACKENDS, index_on, shared_corpus
from tests.reference import ReferenceBM25, analysed, close, tokens

WORDS = [f"w{i}" for i in range(40)] + ["black", "hole", "entropy", "string", "the", "of"]
AUTHORS = [
    "Juan M. Maldacena",
    "J. Maldacena",
    "Erwin Schrödinger",
    'E. Schr\\"odinger',
    "Schrodinger, Erwin",
    "Edward Witten",
    "Ana van der Berg",
    "Zoë Ólafsdóttir",
]


def _papers(seed: int = 3, n: int = 160) -> list[Paper]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        pid = f"p{i:03d}"
        words = rng.choices(WORDS, k=rng.randint(3, 30))
        if rng.random() < 0.3:
            at = rng.randrange(len(words))
            words[at:at] = ["black", "hole"]
        year = None if i % 17 == 0 else rng.randint(1990, 2005)
        authors = rng.sample(AUTHORS, rng.randint(0, 3))
        refs = [f"p{j:03d}" for j in rng.sample(range(n), 4) if j != i]
        out.append(Paper(pid, " ".join(words[:4]), " ".join(words[4:]), year, authors, refs, source="t"))
    return out


@pytest.fixture(scope="module", params=BACKENDS)
def corpus(request):
    """The synthetic corpus on each backend in turn (the filters' statements have a text per dialect)."""
    papers = _papers()
    return index_on(request, request.param, papers, "filters"), {p.id: p for p in papers}


def _passes(p: Paper, years=None, authors=(), exclude=(), phrases=(), exclude_phrases=()) -> bool:
    """The filter's definition in plain Python."""
    if years is not None:
        lo, hi = years
        if p.year is None or (lo is not None and p.year < lo) or (hi is not None and p.year > hi):
            return False
    for name in authors:
        asked = name_words(name)
        if not any(matches(asked, name_key(a)[1]) for a in p.authors):
            return False
    # words and phrases as the index analyses text (the default analysis: stemmed, stop words dropped); a phrase
    # in the title or in the abstract, not across the two
    words = analysed(p.text)
    if any(term in words for w in exclude for term in analysed(w)):
        return False

    def holds(ph) -> bool:
        wanted = tuple(analysed(" ".join(ph)))
        return contains(analysed(p.title), wanted) or contains(analysed(p.abstract or ""), wanted)

    if any(holds(ph) for ph in exclude_phrases):
        return False
    return all(holds(ph) for ph in phrases)


def holds_phrase(p: Paper, phrase: tuple[str, ...], words=None) -> bool:
    """Whether the title or the abstract of ``p`` holds ``phrase`` (each read by ``words``, the tokeniser by
    default): a phrase does not run from the title's last word into the abstract's first."""
    words = tokens if words is None else words
    return contains(words(p.title), phrase) or contains(words(p.abstract or ""), phrase)


def _expected(papers: dict, query: str, k: int, **filters) -> list[tuple[str, float]]:
    ref = ReferenceBM25({pid: p.text for pid, p in papers.items()})
    scores = {pid: s for pid, s in ref.scores(query).items() if _passes(papers[pid], **filters)}
    return sorted(scores.items(), key=lambda kv: (-round(kv[1], 10), kv[0]))[:k]


FILTER_CASES = [
    {"years": (1995, 2000)},
    {"years": (None, 1992)},
    {"years": (2004, None)},
    {"authors": ("Maldacena",)},
    {"authors": ("Schrodinger",)},
    {"authors": ("J. Maldacena", "Witten")},
    {"exclude": ("entropy",)},
    {"exclude": ("w1", "w2", "w3")},
    {"phrases": (("black", "hole"),)},
    {"years": (1990, 2003), "exclude": ("w5",), "phrases": (("black", "hole"),)},
    {"exclude_phrases": (("black", "hole"),)},
    {"phrases": (("w1",),), "exclude_phrases": (("black", "hole"), ("w2", "w3"))},
]


@pytest.fixture(params=["overfetch", "scored"])
def path(request, monkeypatch):
    """Both ways a filtered top k runs: the pruned top k + rejected (forced pruned), and scoring those that pass."""
    if request.param == "overfetch":
        monkeypatch.setattr(lexical, "OVERFETCH_MAX", 10**9)
        monkeypatch.setattr(lexical, "READ_COST", 0.0)
        monkeypatch.setattr(lexical, "LOOKUP_COST", 0.0)
    else:
        monkeypatch.setattr(lexical, "OVERFETCH_MAX", -1)  # never overfetch
    return request.param


@pytest.mark.parametrize("case", FILTER_CASES)
@pytest.mark.parametrize("query", ["black hole entropy", "w1 w7 string of", "hole"])
def test_filtered_top_k_equals_the_reference_over_the_papers_that_pass(corpus, path, case, query):
    db, papers = corpus
    # Filters hold terms, as the client makes them from the query's words (the reference analyses them alike).
    filters = Filters.make(year=case.get("years"), authors=case.get("authors", ()),
                           exclude=[t for w in case.get("exclude", ()) for t in analysed(w)],
                           phrases=[analysed(" ".join(ph)) for ph in case.get("phrases", ())],
                           exclude_phrases=[analysed(" ".join(ph)) for ph in case.get("exclude_phrases", ())],
                           )  # fmt: skip
    expected = _expected(papers, query, 10, **case)
    with RetrievalClient(db) as client:
        got = client.lexical.search(query, 10, filters=filters)
        plain = client.lexical.search(query, 10, filters=filters, exhaustive=True)
        count = client.lexical.matched(query, filters)
    assert [pid for pid, _ in got] == [pid for pid, _ in expected] == [pid for pid, _ in plain]
    assert all(close(a, b) for (_, a), (_, b) in zip(got, expected, strict=True))
    everything = _expected(papers, query, 10**6, **case)
    assert count.exact and count.count == len(everything)


def test_a_filter_is_not_the_survivors_of_an_unfiltered_top_k(corpus):
    """The bug of masking an unfiltered top k: a rare year's best paper lies outside the unfiltered top 10."""
    db, papers = corpus
    query = "black hole"
    with RetrievalClient(db) as client:
        unfiltered = [pid for pid, _ in client.lexical.search(query, 10)]
        years = {papers[pid].year for pid in unfiltered}
        year = next(y for y in range(1990, 2006) if y not in years and _expected(papers, query, 1, years=(y, y)))
        got = client.lexical.search(query, 10, filters=Filters.make(year=(year, year)))
    assert got and all(papers[pid].year == year for pid, _ in got)
    assert [pid for pid, _ in got] == [pid for pid, _ in _expected(papers, query, 10, years=(year, year))]


def test_search_ranks_only_papers_that_pass_even_those_the_graph_adds(corpus):
    db, papers = corpus
    with RetrievalClient(db) as client:
        config = client.config.replace(expand="always")
        result = client.search("black hole entropy", config, limit=50, year="1996-1999")
        unfiltered = client.search("black hole entropy", config, limit=200)
    assert result.ranked and all(1996 <= r.paper.year <= 1999 for r in result.ranked)
    assert any(r.graph_distance not in (None, 0) for r in unfiltered.ranked)  # the walk did add papers
    assert result.matched == len(_expected(papers, "black hole entropy", 10**6, years=(1996, 1999)))


def test_query_syntax_excludes_and_requires_phrases(corpus):
    db, papers = corpus
    with RetrievalClient(db) as client:
        excluded = client.search("black hole -entropy", limit=100)
        phrase = client.search('"hole black"', limit=100)
        fields = client.search("string author:Maldacena year:1995-2000", limit=100)
        plain = client.search('"hole black"', limit=100, syntax=False)
    assert excluded.ranked and all("entropy" not in tokens(r.paper.text) for r in excluded.ranked)
    # a phrase is matched on the analysed text: "hole of black" holds "hole black", its stop word dropped
    expected = {pid for pid, p in papers.items() if holds_phrase(p, ("hole", "black"), analysed)}
    assert {r.paper.id for r in phrase.ranked} <= expected and len(phrase.ranked) == min(100, phrase.length)
    assert phrase.matched == len(expected)
    assert all(any("Maldacena" in a for a in r.paper.authors) and 1995 <= r.paper.year <= 2000 for r in fields.ranked)
    assert fields.ranked
    assert plain.matched > phrase.matched  # without syntax the quotes are nothing
    with RetrievalClient(db) as client:  # -"black hole" was read as "black hole", the papers it asked to leave out
        without = client.search('hole -"black hole"', limit=200)
    kept = {pid for pid, p in papers.items() if "hole" in tokens(p.text)}
    kept -= {pid for pid, p in papers.items() if holds_phrase(p, ("black", "hole"))}
    assert kept and without.matched == len(kept) and without.ranked
    assert not any(holds_phrase(r.paper, ("black", "hole")) for r in without.ranked)
    assert without.filters.to_dict()["exclude_phrases"] == ["black hole"] and not without.warnings


def test_a_word_to_leave_out_that_the_tokeniser_splits_leaves_out_its_phrase(corpus):
    """``-black-hole`` left out every paper holding black or hole (hep-th's ``-N=4`` dropped some 6,000 papers
    without "N=4"); it now leaves out those holding black then hole, as ``-"black hole"`` does."""
    db, papers = corpus
    with RetrievalClient(db) as client:
        words = client.config.replace(ranking="expansion", expand="never")  # the papers the words find, no others
        split = client.search("string entropy -black-hole", words, limit=300)
        quoted = client.search('string entropy -"black hole"', words, limit=300)
    kept = {pid for pid, p in papers.items() if {"string", "entropy"} & set(tokens(p.text))}
    gone = {pid for pid in kept if holds_phrase(papers[pid], ("black", "hole"))}
    with_either = {pid for pid in kept - gone if {"black", "hole"} & set(tokens(papers[pid].text))}
    assert gone and with_either  # the corpus tells the two readings apart
    assert split.matched == len(kept - gone) == quoted.matched
    assert {r.paper.id for r in split.ranked} == {r.paper.id for r in quoted.ranked} == kept - gone
    # read as the phrase it splits into, shown as it was written
    assert split.filters.exclude_phrases == (("black", "hole"),) and not split.filters.exclude
    assert split.filters.to_dict()["exclude_phrases"] == ["black-hole"]


@pytest.mark.parametrize(
    ("query", "text", "exclude", "phrases", "authors"),
    [
        ('K\\"ahler Schr\\"odinger', 'K\\"ahler Schr\\"odinger', (), (), ()),  # TeX's umlaut, not two quotes
        ('string author:Lindstr\\"om', "string", (), (), ('Lindstr\\"om',)),
        (
            '"Schr\\"odinger equation" -K\\"ahler',
            'Schr\\"odinger equation',
            ('K\\"ahler',),
            ('Schr\\"odinger equation',),
            (),
        ),  # fmt: skip
        ("black hole -4d -1PI", "black hole", ("4d", "1PI"), (), ()),  # a word with a letter in it
        ("spin -1 and -1/2", "spin -1 and -1/2", (), (), ()),  # numbers stay words of the query
        ('a "b c" -d', "a b c", ("d",), ("b c",), ()),
    ],
)
def test_the_query_syntax_reads_tex_quotes_and_words_that_begin_with_a_digit(query, text, exclude, phrases, authors):
    """``K\\"ahler Schr\\"odinger`` was the phrase ``ahler Schr`` (no result on hep-th, where 786 papers hold both
    words), ``author:Lindstr\\"om`` the author ``Lindstr\\``, and ``-4d`` a scored word."""
    from retrieval.search.syntax import parse

    parsed = parse(query)
    assert (parsed.text, parsed.exclude, parsed.phrases, parsed.authors) == (text, exclude, phrases, authors)
    assert not parsed.warnings


@given(st.text(alphabet=' "-:abN4\u00e9yor\t', max_size=40))
def test_plain_text_reads_as_the_same_words_and_nothing_else(text):
    """``syntax.plain`` (a paper's title searched from its page): no filter, no warning, the same tokens."""
    from retrieval.search.syntax import parse, plain

    parsed = parse(plain(text))
    assert not (parsed.exclude or parsed.phrases or parsed.authors or parsed.year or parsed.exclude_phrases)
    assert not parsed.warnings
    assert tokens(parsed.text) == tokens(text)


def test_every_title_of_the_corpora_read_plain_is_its_words():
    """The same on every title of hep-th, ml-arxiv and CACM, TeX and all (``\\o N`` is one word to the
    tokeniser, so a mark after a control word becomes ``{}`` and a space)."""
    from retrieval.search.syntax import parse, plain

    checked = 0
    for name in ("hepth", "ml-arxiv", "cacm"):
        for _, p in read_jsonl(shared_corpus(name)):
            parsed = parse(plain(p.title))
            assert not (parsed.exclude or parsed.phrases or parsed.authors or parsed.year or parsed.warnings), p.title
            assert tokens(parsed.text) == tokens(p.title), p.title
            checked += 1
    assert checked > 30_000


def test_a_title_searched_from_its_page_is_read_as_words():
    """hep-th/0012159's title, "M -theory on AdS_4 ...", left out every paper holding "theory", itself too."""
    from retrieval.search.syntax import parse, plain

    title = 'M -theory on AdS_4 x S^7: Self -dual "branes" and Schr\\"odinger year:1999'
    assert parse(title).exclude  # read as syntax, it leaves papers out
    assert plain(title) == 'M theory on AdS_4 x S^7: Self dual branes and Schr\\"odinger year 1999'


def test_a_field_with_a_minus_or_an_author_past_the_bounds_is_the_query_s_usage_error(corpus, capsys):
    """``-author:Witten`` left out the papers holding the words "author" and "witten" (Witten's own stayed), with
    no word said; an author: of 301 characters, or 21 of them, was a runtime error (exit 1) where the same name
    given as --author is a usage error (exit 2)."""
    from retrieval.interfaces.cli import main
    from retrieval.search.syntax import parse

    db, _ = corpus
    with pytest.raises(ConfigError, match=r"the query's '-author:Witten': a search cannot leave out an author's"):
        parse("string theory -author:Witten")
    with pytest.raises(ConfigError, match=r"'-Year:1999': a search cannot leave out years .* such as year:1998-2001"):
        parse("string theory -Year:1999")
    assert parse("string -authority").exclude == ("authority",)  # a word, as before
    long_name = "x" * 301
    many = " ".join(f"author:N{chr(97 + i)}" for i in range(21))
    for query, said in (
        ("black -author:Witten", "a search cannot leave out an author's papers"),
        (f"black author:{long_name}", "the query's author: 'xxxxx"),
        (f"black {many}", "the query filters by at most 20 authors (a paper by all of them), got 21 author: fields"),
    ):
        with pytest.raises(SystemExit) as usage:
            main(["search", query, "--db", str(db)])
        assert usage.value.code == 2 and said in capsys.readouterr().err, query
    for command in (["search", "black"], ["similar", "p001"]):
        options = [arg for i in range(21) for arg in ("--author", f"N{chr(97 + i)}")]
        with pytest.raises(SystemExit) as usage:
            main([*command, *options, "--db", str(db)])
        err = capsys.readouterr().err
        assert usage.value.code == 2 and "--author is given more than 20 times (at most 20)" in err, command
    # 11 in the query and 10 as --author: each within its bound, together past it (was a runtime error, exit 1)
    some = " ".join(f"author:N{chr(97 + i)}" for i in range(11))
    options = [arg for i in range(10) for arg in ("--author", f"M{chr(97 + i)}")]
    for command in (["search", f"black {some}"],):
        with pytest.raises(SystemExit) as usage:
            main([*command, *options, "--db", str(db)])
        err = capsys.readouterr().err
        assert usage.value.code == 2 and "at most 20 authors (a paper by all of them), got 21" in err, command
    with RetrievalClient(db) as client, pytest.raises(ConfigError, match="cannot leave out an author's papers"):
        client.search("black -author:Witten")


def test_a_long_query_says_which_filters_it_reads_as_words(corpus):
    """Past 32 words a query is plain words: its ``-entropy`` and ``author:Strominger`` were searched for, so the
    papers it asked to leave out ranked first, and nothing said so."""
    from retrieval.search.syntax import SYNTAX_MAX_WORDS, parse

    db, _ = corpus
    words = " ".join(["black hole"] * SYNTAX_MAX_WORDS)
    parsed = parse(f'{words} -entropy author:Strominger year:1999 state-of-the-art -3b<5a "dual" note: x')
    assert parsed.text.endswith('-entropy author:Strominger year:1999 state-of-the-art -3b<5a "dual" note: x')
    assert parsed.warnings == (
        f"the query has more than {SYNTAX_MAX_WORDS} words, so it is read as plain words (a pasted text's dashes "
        "and colons are prose): '-entropy', 'author:Strominger', 'year:1999' are searched as words, not as "
        "filters; give the author and years as --author and --year, or shorten the query",
    )
    assert not parse(f'{words} state-of-the-art "dual" note: x -3b<5a').warnings  # prose: nothing to say
    with RetrievalClient(db) as client:
        result = client.search(f"{words} -entropy", limit=5)
    assert any("'-entropy' is searched as words, not as filters" in w for w in result.warnings)


@given(st.text(alphabet=' "\\-:abN4\ue000', max_size=30))
def test_the_syntax_gives_every_tex_quote_back_and_never_its_stand_in(text):
    from retrieval.search.syntax import parse

    parsed = parse(text)
    values = [parsed.text, *parsed.exclude, *parsed.phrases, *parsed.authors, *parsed.exclude_phrases, *parsed.warnings]
    if "\ue000" not in text:
        assert not any("\ue000" in value for value in values)
    if '\\"' in text and "\ue000" not in text and not parsed.warnings:
        # every TeX quote given back once: a phrase's words are also in the text searched, so counted there
        once = [parsed.text, *parsed.exclude, *parsed.authors, *parsed.exclude_phrases]
        assert sum(value.count('\\"') for value in once) == text.count('\\"')


def test_a_tex_quote_in_an_author_filter_of_the_query_finds_the_author(corpus):
    db, papers = corpus
    with RetrievalClient(db) as client:
        asked = client.search('string author:Schr\\"odinger', limit=200)
        given = client.search("string", authors=["Schrödinger"], limit=200)
    expected = {pid for pid, p in papers.items() if "string" in tokens(p.text) and _passes(p, authors=("Schrodinger",))}
    assert expected and asked.matched == len(expected) == given.matched
    assert [r.paper.id for r in asked.ranked] == [r.paper.id for r in given.ranked]


def test_the_ranked_candidates_counted_do_not_depend_on_the_page(corpus):
    """``hit_count`` (``-v``'s "over N ranked candidates", the JSON's metrics, the query log) added as much of the
    BM25 list as the page reached: 129 at ``--limit 10``, 516 at ``--limit 500`` for one CACM query."""
    db, _ = corpus
    with RetrievalClient(db) as client:
        config = client.config.replace(ranking="expansion", expand="never", top_k_lexical=5)
        short = client.search("w1 w2 w3 hole", config, limit=3)
        long = client.search("w1 w2 w3 hole", config, limit=150)
        past = client.search("w1 w2 w3 hole", config, limit=10, offset=9_000)
    assert short.hit_count == long.hit_count == past.hit_count < long.length
    assert (short.top_score, short.average_score) == (long.top_score, long.average_score)
    assert past.length == long.length == len(long.ranked) and not past.ranked


def test_paging_walks_one_ranking(corpus):
    db, _ = corpus
    with RetrievalClient(db) as client:
        whole = client.search("black hole string", limit=40)
        pages = [client.search("black hole string", limit=10, offset=o) for o in (0, 10, 20, 30)]
    assert [r.paper.id for page in pages for r in page.ranked] == [r.paper.id for r in whole.ranked]
    assert pages[2].to_dict()["results"][0]["rank"] == 21
    assert all(page.matched == whole.matched for page in pages)


def test_matched_counts_every_paper_with_a_query_word(corpus, monkeypatch):
    db, papers = corpus
    expected = sum(1 for p in papers.values() if {"w1", "w2"} & set(tokens(p.text)))
    with RetrievalClient(db) as client:
        assert client.search("w1 w2", limit=5).matched == expected
        monkeypatch.setattr(lexical, "COUNT_EXACT_MAX", 0)  # estimated: near, and said to be an estimate
        estimate = client.search("w1 w2", limit=5)
    assert not estimate.matched_exact and abs(estimate.matched - expected) <= 0.25 * expected


def test_warnings_say_what_the_query_could_not_use(corpus):
    db, _ = corpus
    with RetrievalClient(db) as client:
        absent = client.search("qqqq zzzz")
        partly = client.search("black qqqq")
        surname = client.search("maldacena")
        field = client.search("title:black")
        empty = client.search("black author: year:")  # searched as the words "author" and "year", silently
    assert not absent.ranked and "nothing to rank" in absent.warnings[0] and absent.matched == 0
    assert partly.ranked and any("'qqqq'" in w for w in partly.warnings)
    assert any("--author maldacena" in w for w in surname.warnings)
    assert any("title: is not a field" in w for w in field.warnings) and field.ranked
    said = [w for w in empty.warnings if "has nothing after it" in w]
    assert said == [
        "author: has nothing after it (write author:Maldacena, with no space): 'author' is searched as a word",
        "year: has nothing after it (write year:1998-2001, with no space): 'year' is searched as a word",
    ]


def test_filters_that_let_no_paper_through_say_which(corpus):
    """A search whose filters let nothing through read as a query no paper matched ("no results for 'black'"),
    with no warning, or one that said the phrase's words were ranked on."""
    db, papers = corpus
    years = [p.year for p in papers.values() if p.year]
    by_witten = {p.year for p in papers.values() if any("Witten" in a for a in p.authors)}
    not_witten = min(set(years) - by_witten)  # a year with papers, none of them Witten's
    with RetrievalClient(db) as client:
        nobody = client.search("black", authors="Nobodyxyz")
        phrase = client.search('"hole black entropy" black')
        old = client.search("black", year=(min(years) - 20, min(years) - 10))
        both = client.search(f"black author:Witten year:{not_witten}")
        fine = client.search('"black hole" author:Witten')
        with pytest.raises(ConfigError, match="the query's author: '!!' has no letters: .* such as author:Maldacena"):
            client.search("black author:!!")
    assert not nobody.ranked and "no paper passes the filters: no paper is by 'Nobodyxyz'" in nobody.warnings
    assert not any(contains(tokens(p.text), ("hole", "black", "entropy")) for p in papers.values())
    assert not phrase.ranked and 'no paper holds the phrase "hole black entropy"' in phrase.warnings[-1]
    assert not old.ranked and f"no paper is of the years {min(years) - 20}-{min(years) - 10}" in old.warnings[-1]
    assert not both.ranked and both.warnings[-1] == (
        "no paper passes all the filters together (each lets some through): loosen one of them"
    )
    assert fine.ranked and not any(w.startswith("no paper passes") for w in fine.warnings)


@pytest.mark.parametrize(
    ("text", "years"),
    [("1998-2001", (1998, 2001)), ("1998-", (1998, None)), ("-2001", (None, 2001)), ("1998", (1998, 1998))],
)
def test_year_ranges(text, years):
    assert parse_years(text) == years


@pytest.mark.parametrize("text", ["98-01", "2001-1998", "x", "-", "999-", "1998-2001-2002"])
def test_bad_year_ranges_say_what_to_give(text):
    with pytest.raises(ConfigError, match="year"):
        parse_years(text)


def test_limits_and_offsets_are_checked(corpus):
    db, _ = corpus
    with RetrievalClient(db) as client:
        for bad in ({"limit": -5}, {"limit": 0}, {"offset": -1}, {"offset": 10**6}):
            with pytest.raises(ConfigError):
                client.search("black", **bad)


@pytest.mark.parametrize(
    ("asked", "stored", "expected"),
    [
        ("Maldacena", "Juan M. Maldacena", True),
        ("J. Maldacena", "Juan M. Maldacena", True),
        ("juan maldacena", "J. M. Maldacena", True),
        ("J. M. Maldacena", "Juan Maldacena", False),  # two given names asked, one there
        ("Pedro Maldacena", "Juan M. Maldacena", False),
        ("MALDACENA", "maldacena, juan", True),
        ("Schrödinger", 'E. Schr\\"odinger', True),
        ('Schr\\"{o}dinger', "Erwin Schrödinger", True),
        ("Schrodinger", "Schrödinger, Erwin", True),
        ("Erwin", "Erwin Schrödinger", False),  # a given name alone is not a surname
        ("Olafsdottir", "Zoë Ólafsdóttir", True),
        ("van der Berg", "Ana van der Berg", True),
        ("Witten", "Edward Witten Jr", True),  # the surname is the last word but a suffix (it was "jr")
        ("Witten", "Edward Witten Smith", False),  # the surname is the last word unless a comma says otherwise
        ("Jones", "Jones, Jr., Robert", True),
    ],
)
def test_author_names_match_case_and_accents_aside(asked, stored, expected):
    assert matches(name_words(asked), name_key(stored)[1]) is expected


def test_surname_forms():
    assert name_key("Schrodinger, Erwin") == name_key("Erwin Schrödinger") == ("schrodinger", "erwin schrodinger")
    assert name_key('E. Schr\\"odinger')[0] == "schrodinger"
    assert name_key("Ana van der Berg") == ("berg", "ana van der berg")
    assert name_key("  ") == ("", "")


def test_the_python_api_takes_a_year_as_text_a_number_or_a_pair_and_checks_each(demo_db):
    """A program's ``year``: a range's text, one year, or ``(first, last)`` (None an open end), each checked as
    the option's text is (an int raised TypeError; a reversed pair or ``("a", "b")`` returned nothing, silently;
    a pair of huge ints raised OverflowError)."""
    with RetrievalClient(demo_db) as client:
        for given, as_text in (
            (2020, "2020"),
            ((2019, 2021), "2019-2021"),
            ((2019, None), "2019-"),
            ([None, 2019], "-2019"),
        ):
            got = [(r.paper.id, r.paper.year) for r in client.search("attention", limit=100, year=given).ranked]
            assert got and got == [(r.paper.id, r.paper.year) for r in client.search(
                "attention", limit=100, year=as_text).ranked]  # fmt: skip
        for bad, says in (((2025, 2000), "ends before it starts"), (("a", "b"), "year must be a range"),
                          ((float("nan"), None), "year must be a range"), ((-10**30, 10**30), "years run from"),
                          ([1998, 1999, 2000], "year must be a range"), (True, "year must be a range")):  # fmt: skip
            with pytest.raises(ConfigError, match=says):
                client.search("attention", year=bad)
            with pytest.raises(ConfigError, match=says):
                client.similar("p001", year=bad)


def test_the_author_filter_is_bounded_as_every_other_input(demo_db):
    """5,000 author names, or one of 60,000 characters, were taken (and echoed back whole) by every front door."""
    from fastapi.testclient import TestClient

    from retrieval.interfaces.cli import main
    from retrieval.interfaces.http.app import create_app
    from retrieval.interfaces.service import Service
    from retrieval.validate import LIMITS

    most, chars = LIMITS["authors"], LIMITS["author_chars"]
    with RetrievalClient(demo_db) as client:
        client.search("attention", authors=["Vaswani"] * most)  # at the bound: taken
        client.search("attention", authors=["V" * chars])
        with pytest.raises(ConfigError, match=f"at most {most} authors"):
            client.search("attention", authors=["Vaswani"] * (most + 1))
        with pytest.raises(ConfigError, match=f"at most {chars}"):
            client.similar("p001", authors=["V" * (chars + 1)])
    service = Service(demo_db)
    try:
        got = TestClient(create_app(service)).get("/search", params={"q": "attention", "author": ["V"] * 5000})
        assert got.status_code == 400 and f"at most {most} authors" in got.json()["error"]
    finally:
        service.close()
    with pytest.raises(SystemExit) as usage:
        main(["search", "attention", "--db", str(demo_db), "--author", "V" * (chars + 1)])
    assert usage.value.code == 2


def test_the_python_api_takes_one_id_as_a_string_and_refuses_what_is_no_id(demo_db):
    """``exclude="p002"`` and ``papers("p001")`` take the string as one id (they read its characters:
    nothing was excluded, no paper found); what is not a string is a ``ConfigError`` naming the argument, and
    a closed client says it is closed (a raw sqlite3 error before)."""
    from retrieval.errors import StoreError

    client = RetrievalClient(demo_db)
    assert "p002" in [r.paper.id for r in client.similar("p001", limit=20).ranked]
    assert "p002" not in [r.paper.id for r in client.similar("p001", limit=20, exclude="p002").ranked]
    assert list(client.papers("p001")) == ["p001"]
    for bad in (5, None, [None], b"p001"):
        with pytest.raises(ConfigError, match="paper_ids"):
            client.similar(bad)
    with pytest.raises(ConfigError, match="paper_ids: a paper id is a string, got bytes"):
        client.papers([b"p001"])
    client.close()
    for read in (lambda: client.search("attention"), lambda: client.similar("p001"), lambda: client.paper("p002")):
        with pytest.raises(StoreError, match="is closed: open a new one"):
            read()


@pytest.fixture(scope="module", params=BACKENDS)
def suffixed(request):
    papers = [
        Paper("s1", "quantum groups", authors=["Alexander Kirillov Jr."]),
        Paper("s2", "quantum black holes", authors=["Curtis G. Callan Jr.", "Juan M. Maldacena"]),
        Paper("s3", "quantum computing", authors=["Carr III, J. W."]),
        Paper("s4", "quantum fields", authors=["Peter Kirillov"]),
        Paper("s5", "quantum strings", authors=["B. Stefanski Jr", "Jr."]),
    ]
    return index_on(request, request.param, papers, "suffixes")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Kirillov", {"s1", "s4"}),
        ("A. Kirillov", {"s1"}),
        ("Kirillov Jr", {"s1", "s4"}),  # a suffix asked for is left out, as a stored one is
        ("Callan", {"s2"}),
        ("C. G. Callan", {"s2"}),
        ("Carr", {"s3"}),
        ("J. W. Carr", {"s3"}),
        ("Stefanski", {"s5"}),
        ("Maldacena", {"s2"}),
    ],
)
def test_an_author_with_a_suffix_is_found_by_the_surname(suffixed, name, expected):
    """The surname of "Alexander Kirillov Jr." was stored as "jr": `--author Kirillov` missed the paper and
    `--author Jr` found every "Jr" of the index (123 hep-th authors)."""
    with RetrievalClient(suffixed) as client:
        got = {e.paper.id for e in client.search("quantum", authors=[name], limit=10).ranked}
    assert got == expected


def test_a_suffix_alone_is_no_author_to_filter_by(suffixed):
    with RetrievalClient(suffixed) as client, pytest.raises(ConfigError, match="'Jr' is a suffix, not a surname"):
        client.search("quantum", authors=["Jr"])


def test_one_string_is_one_item_and_a_wrong_type_is_a_config_error_everywhere(demo_db):
    """What a program's mistakes gave (an audit of the Python API): a string read as its characters (an evidence
    run of ten one-letter sub-queries, seeds of single characters, BM25 scores of 'p', '0', '1'), built-in
    exceptions (TypeError, AttributeError) where the library promises a ``ConfigError``, a float ``top_k`` that
    reached SQL and blamed the index, and settings of the wrong type taken as true."""
    from retrieval import RetrievalConfig
    from retrieval.evidence.config import EvidenceConfig
    from retrieval.evidence.pipeline import explain
    from retrieval.validate import LIMITS

    with RetrievalClient(demo_db) as client:
        one = explain(client, "attention sparsity", subqueries="head pruning")
        assert one.subqueries == ["attention sparsity", "head pruning"]
        seeded = explain(client, "attention sparsity", seeds="p001")
        assert [s.paper_id for s in seeded.seeds] == ["p001"]
        assert list(client.lexical.scores("attention", "p001")) == ["p001"]
        assert len(client.graph.expand("p001", 1)) > 1
        assert client.graph.expand("p001", 1) == client.graph.expand(["p001"], 1)
        mistakes = [
            (lambda: client.show(None), "paper_id: a paper id is a string, got NoneType"),
            (lambda: client.show(["p001"]), "paper_id: a paper id is a string, got list"),
            (lambda: client.paper(5), "paper_id: a paper id is a string, got int"),
            (lambda: client.resolve([None]), "paper_ids: a paper id is a string"),
            (lambda: client.lexical.search("attention", top_k=2.5), "top_k must be a whole number, got 2.5"),
            (lambda: client.lexical.search("attention", top_k=None), "top_k must be a whole number"),
            (lambda: explain(client, None), "a query is a string, got NoneType"),
            (lambda: explain(client, "attention", config={"top_k": 5}), "config must be an EvidenceConfig"),
            (lambda: explain(client, "attention", seeds=5), "seeds: give a paper id"),
            (lambda: explain(client, "attention", subqueries=[f"topic {i}" for i in range(LIMITS["subqueries"] + 1)]),
             f"at most {LIMITS['subqueries']} sub-queries"),
            (lambda: RetrievalConfig(hub_weighting="false"), "hub_weighting must be True or False, got 'false'"),
            (lambda: RetrievalConfig(hub_weighting=None), "hub_weighting must be True or False, got None"),
            (lambda: RetrievalConfig(relations=None), "relations must be some of"),
            (lambda: RetrievalClient(demo_db, timeout=-1), "timeout must be at least 0"),
            (lambda: RetrievalClient(demo_db, timeout=0), "timeout must be more than 0 seconds"),
            (lambda: RetrievalClient(demo_db, timeout=float("nan")), "timeout must be a finite number, got nan"),
            (lambda: RetrievalClient(demo_db, timeout="x"), "timeout must be a finite number, got 'x'"),
        ]  # fmt: skip
        from retrieval.commands import check
        from retrieval.errors import InputError

        mistakes += [
            (lambda: client.rank("attention", "p001"), "hits must be a list of (paper id, BM25 score) pairs"),
            (lambda: check(demo_db, limit="x"), "limit must be a whole number, got 'x'"),
        ]
        for call, says in mistakes:
            with pytest.raises(ConfigError) as raised:
                call()
            assert says in str(raised.value), (says, str(raised.value))
        hits = client.lexical.search("attention", 5)
        assert client.rank("attention", hits).ranked
        with pytest.raises(InputError, match="the hits given name the paper 'nope', which the index lacks"):
            client.rank("attention", [*hits, ("nope", 1.0)])  # it said the index was damaged
        assert EvidenceConfig().prune is True  # (the evidence settings were checked already)


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ({"w_graph": float("inf")}, "w_graph must be a finite number, got inf"),
        ({"w_bm25": float("-inf")}, "w_bm25 must be a finite number"),
        ({"w_bm25": 1e308}, r"w_bm25 must be between 0 and 1e\+06"),
        ({"w_cocited": float("nan")}, "w_cocited must be a finite number"),
    ],
)
def test_a_blend_weight_must_be_finite_and_bounded(setting, says, demo_db):
    """An infinite weight (or one that carries scores past a double's range) was taken: every score became inf,
    `why()` printed `inf*graph`, and the JSON of a result held `Infinity`, which is not JSON."""
    import json

    from retrieval import RetrievalConfig

    with pytest.raises(ConfigError, match=says):
        RetrievalConfig(**setting)
    with RetrievalClient(demo_db) as client:
        result = client.search("attention", config=RetrievalConfig(w_graph=1e6))
    assert all(math.isfinite(r.final_score) for r in result.ranked)
    json.loads(json.dumps(result.to_dict(), allow_nan=False))


def test_an_author_in_the_query_and_one_given_as_a_string_both_filter(demo_db):
    """``authors="A"`` beside ``author:B`` in the query's text once dropped B: both must hold."""
    with RetrievalClient(demo_db) as client:
        papers = client.papers([f"p{n:03d}" for n in range(1, 101)])
        pair = next(p for p in (papers.values() if isinstance(papers, dict) else papers) if len(p.authors) >= 2)
        first, second = pair.authors[0].split()[-1], pair.authors[1].split()[-1]
        for authors in (second, [second]):
            result = client.search(f"{pair.title} author:{first}", authors=authors, limit=50)
            assert sorted(result.filters.authors) == sorted([first, second])
            assert pair.id in [e.paper.id for e in result.ranked]
            for entry in result.ranked:
                surnames = {author.split()[-1] for author in entry.paper.authors}
                assert {first, second} <= surnames, (entry.paper.id, entry.paper.authors)
