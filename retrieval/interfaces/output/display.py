"""Human output that fits the terminal: pure functions from results, papers and evidence runs to lines of at
most ``width`` columns (``terminal_width()`` is the one function here that looks outside).

A table has one line per paper: rank, id, year, first author, as much of the title as fits, and with ``scores``
the score. The title comes first for width: the author column is narrow at 80 columns (the family name, "et al."
where it fits, else "+" for more authors) and widens with the terminal; ids are never shortened while the title
keeps some room (they are what ``show`` and ``similar`` take). Text is shown as a reader reads it: TeX rendered
(``reading.text``). Widths count terminal columns (a wide CJK character is two, a combining accent none), and the
same input always gives the same lines.

What is shown by default is what a researcher reads: the papers and one line saying which results these are and
how many papers match. The ranking's internals (scores, the formula, the graph's expansion, how many candidates
were ranked) are for ``verbose`` (``-v``) and ``why`` (``--why``).

Nothing here imports more than the standard library's lightest modules, so that ``retrieval search`` starts as
fast as before (bench/cli_start.py); pylatexenc is imported only when a text has TeX in it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence

from .reading import authors as joined_authors
from .reading import family_name, one_line
from .reading import text as readable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ...corpus.paper import Paper
    from ...evidence.records import EdgeRecord, EvidenceRun, PaperExplanation
    from ...search.blend import RetrievalResult

#: The narrowest output: a terminal, ``COLUMNS`` or a pipe that says less still gets 80 columns.
MIN_WIDTH = 80
#: The widest: a ``COLUMNS`` past it (a typo of many digits) is read as this many, not laid out (or allocated) whole.
MAX_WIDTH = 1000
ELLIPSIS = "…"
#: How much of a query messages quote.
QUERY_SHOWN = 60
AUTHOR_MAX = 20  # columns of the author column at most, on a wide terminal
AUTHOR_NARROW = 12  # ... and at 80 columns, where the title comes first
TITLE_MIN = 20  # the title keeps this much before the author column narrows or goes
SEP = "  "


def count(n: int, word: str, plural: str | None = None) -> str:
    """``n`` and ``word``, plural unless ``n`` is 1: "1 paper", "2,524 papers", "3 sub-queries"."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def terminal_width(minimum: int = MIN_WIDTH) -> int:
    """The width to print to: ``$COLUMNS`` if it is a number, else the terminal's if stdout is one, else 80; never
    less than ``minimum`` (``MIN_WIDTH``) nor more than ``MAX_WIDTH``. What ``shutil.get_terminal_size`` does,
    without importing ``shutil`` (a few ms of every search's start)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 80
    return min(max(minimum, columns), max(minimum, MAX_WIDTH))


def _char_columns(char: str) -> int:
    import unicodedata  # only for text that is not ASCII

    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def columns(text: str) -> int:
    """How many terminal columns ``text`` takes."""
    if text.isascii():
        return len(text)
    return sum(_char_columns(char) for char in text)


def fit(text: str, width: int) -> str:
    """``text`` on one line in at most ``width`` columns: cut, with an ellipsis, when it is longer."""
    text = one_line(text)
    if columns(text) <= width:
        return text
    if width <= 0:
        return ""
    if text.isascii():  # a column a character
        return text[: width - 1].rstrip() + ELLIPSIS
    kept, used = [], 0
    for char in text:
        size = columns(char)
        if used + size > width - 1:
            break
        kept.append(char)
        used += size
    return "".join(kept).rstrip() + ELLIPSIS


def pad(text: str, width: int) -> str:
    """``text`` fitted to ``width`` columns and padded with spaces to exactly that."""
    text = fit(text, width)
    return text + " " * (width - columns(text))


def shorten(text: str, n: int = QUERY_SHOWN) -> str:
    """The first ``n`` characters of ``text`` on one line, and an ellipsis when there was more (for quoting a
    query in a message: a pasted abstract is not echoed back whole)."""
    text = one_line(text)
    return text if len(text) <= n else text[:n].rstrip() + ELLIPSIS


def _cut(text: str, width: int) -> str:
    """The longest start of ``text`` that takes at most ``width`` columns."""
    if columns(text) <= width:
        return text
    used = 0
    for i, char in enumerate(text):
        used += columns(char)
        if used > width:
            return text[:i]
    return text


def wrap(text: str, width: int, indent: int = 0, hanging: int = 0) -> list[str]:
    """``text`` on one line or more of at most ``width`` columns, broken at spaces, the first indented by
    ``indent`` spaces and the others by ``indent + hanging``; a word longer than a line is cut."""
    first = " " * min(indent, width - 1)
    rest = " " * min(indent + hanging, width - 1)
    lines: list[str] = []
    current, has_words = first, False  # the line being filled, with its indentation
    for word in one_line(text).split(" "):
        if not word:
            continue
        candidate = current + " " + word if has_words else current + word
        if columns(candidate) <= width:
            current, has_words = candidate, True
            continue
        if has_words:
            lines.append(current)
            current = rest
        candidate, lead = current + word, len(current)  # lead: the line's indentation
        while columns(candidate) > width:  # a word longer than a line
            head = _cut(candidate, width)
            if len(head) <= lead:  # a wide character where one column is left: take it all the same
                head = candidate[: lead + 1]
            lines.append(head)
            candidate, lead = rest + candidate[len(head) :], len(rest)
        current, has_words = candidate, True
    if has_words:
        lines.append(current)
    return lines


def clauses(pieces: Sequence[str], width: int, sep: str = "; ", hanging: int = 2) -> list[str]:
    """``pieces`` joined by ``sep`` on lines of at most ``width`` columns, a line broken between two pieces
    where it can be (the next lines indented by ``hanging``), within a piece only when it is longer than a line."""
    mark = sep.rstrip()  # what ends a line broken after a piece
    lines: list[str] = []
    current = ""
    for piece in (one_line(p) for p in pieces):
        if current and columns(current + sep + piece + mark) <= width:
            current += sep + piece
            continue
        if current:
            lines.append(current + mark)
        indent = hanging if lines else 0
        parts = wrap(piece, width - len(mark), indent=indent, hanging=hanging - indent)
        lines += parts[:-1]
        current = parts[-1] if parts else ""
    if current:
        lines.append(current)
    return lines


def surname(name: str) -> str:
    """The family name in an author's name as the corpus gives it, TeX rendered (``reading.name_parts``): before
    the comma of "Maldacena, Juan", else the last word of "Juan M. Maldacena" with its particles ("van
    Nieuwenhuizen"), a "Jr." or "III" after it skipped; a name whose last word has no letter ("Author 1-8") is
    kept whole."""
    return family_name(one_line(name))


def first_author(authors: Sequence[str]) -> str:
    """The first author's surname, with "et al." when there are more ("Witten et al."); "" for none."""
    authors = joined_authors(authors)
    if not authors:
        return ""
    first = surname(authors[0])
    return f"{first} et al." if len(authors) > 1 else first


def author_cell(authors: Sequence[str], width: int, short: bool = False) -> str:
    """The first author in at most ``width`` columns: "Witten et al." where it fits (and not ``short``), else
    "Witten+" (a "+" for the other authors), else the surname cut."""
    authors = joined_authors(authors)
    if not authors:
        return ""
    first = surname(authors[0])
    if len(authors) == 1:
        return fit(first, width)
    for text in (f"{first}+",) if short else (f"{first} et al.", f"{first}+"):
        if columns(text) <= width:
            return text
    return fit(first, width - 1) + "+" if width > 2 else fit(first, width)


def _year(year: int | None) -> str:
    return "" if year is None else str(year)


def _table(
    rows: Sequence[tuple[str | None, str, str, Sequence[str] | None, str, str | None]],
    width: int,
    header: bool = True,
    indent: int = 0,
    cited: Sequence[str] | None = None,
) -> list[str]:
    """Lines of a table of ``(rank, id, year, authors, title, score)`` rows (rank, authors, score None: no such
    column; authors: the paper's list, shown by ``author_cell``), each at most ``width`` columns; ``cited``, a
    cell per row for a "cited" column (how many papers of the index cite it) after the year."""
    if not rows:
        return []
    cited_w = max(5, *(len(c) for c in cited)) if cited else 0
    ranks = rows[0][0] is not None
    authors = any(row[3] for row in rows)
    scores = rows[0][5] is not None
    rank_w = max(1, *(len(row[0]) for row in rows)) if ranks else 0
    id_w = max(2, *(columns(row[1]) for row in rows))
    score_w = max(5, *(len(row[5]) for row in rows)) if scores else 0
    # The author column's widest: AUTHOR_NARROW at 80 columns, growing with the terminal up to AUTHOR_MAX. A table
    # writes its first authors one way: "Witten et al." where every one fits, else "Witten+".
    cap = min(AUTHOR_MAX, AUTHOR_NARROW + max(0, width - MIN_WIDTH) // 4)
    short = authors and any(columns(first_author(row[3] or ())) > cap for row in rows)
    cells = [author_cell(row[3] or (), cap, short) for row in rows] if authors else []
    author_w = max(6, *(columns(cell) for cell in cells)) if authors else 0
    widest = author_w

    def title_room(id_w: int, author_w: int) -> int:
        used = indent + (rank_w + 2 if ranks else 0) + id_w + 2 + 4 + 2 + (author_w + 2 if author_w else 0)
        used += cited_w + 2 if cited_w else 0
        return width - used - (score_w + 2 if scores else 0)

    if authors and title_room(id_w, author_w) < TITLE_MIN:
        author_w = max(8, author_w - (TITLE_MIN - title_room(id_w, author_w)))
        if title_room(id_w, author_w) < TITLE_MIN:
            author_w = 0
    if title_room(id_w, author_w) < TITLE_MIN:  # ids too long for any title: cut them, as a last resort
        id_w = max(8, id_w - (TITLE_MIN - title_room(id_w, author_w)))
    title_w = max(1, title_room(id_w, author_w))

    def line(row: tuple, author: str, head: bool = False, cites: str = "cited") -> str:
        rank, pid, year, _, title, score = row
        out = [rank.rjust(rank_w)] if ranks else []
        out += [pad(pid, id_w), year.rjust(4)]
        if cited_w:
            out.append(cites.rjust(cited_w))
        if author_w:
            out.append(pad(author, author_w))
        title = title if head else readable(title)
        out.append(pad(title, title_w) if scores else fit(title, title_w))
        if scores:
            out.append((score or "").rjust(score_w))
        return (" " * indent + SEP.join(out)).rstrip()

    if author_w and author_w < widest:  # narrowed to leave the title room: the cells again, at the new width
        cells = [author_cell(row[3] or (), author_w, short) for row in rows]
    names = ("#" if ranks else None, "id", "year", None, "title", "score" if scores else None)
    lines = [line(names, "author", head=True)] if header else []
    return lines + [
        line(row, cells[i] if author_w else "", cites=cited[i] if cited else "") for i, row in enumerate(rows)
    ]


def entry_score(entry) -> float:
    """A ranked entry's score: ``final_score`` (a search's ``RankedPaper``), else ``score``."""
    return entry.final_score if hasattr(entry, "final_score") else entry.score


def table_lines(
    entries: Sequence,
    width: int,
    offset: int = 0,
    explain: Callable[[object], str] | None = None,
    score: Callable[[object], float] | None = None,
    header: bool = True,
    scores: bool = True,
) -> list[str]:
    """The table of ranked ``entries`` (each with ``.paper``), ranked from ``offset + 1``; with ``scores`` a
    score column (as ``entry_score`` finds it unless ``score`` says how to get it); with ``explain``, a second
    line per entry, indented, with what it returns."""
    get_score = score or entry_score
    rows = [
        (str(offset + i), e.paper.id, _year(e.paper.year), e.paper.authors, e.paper.title,
         f"{get_score(e):.4f}" if scores else None)
        for i, e in enumerate(entries, start=1)
    ]  # fmt: skip
    counts = [getattr(e, "citations", None) for e in entries]
    cited = [f"{n:,}" if n is not None else "" for n in counts] if any(n is not None for n in counts) else None
    table = _table(rows, width, header=header, cited=cited)
    if explain is None:
        return table
    indent = len(str(offset + len(entries))) + 2
    lines = table[:1] if header else []
    for entry, row_line in zip(entries, table[1:] if header else table, strict=True):
        lines.append(row_line)
        lines.extend(wrap(explain(entry), width, indent=indent, hanging=2))
    return lines


def result_lines(
    result: RetrievalResult, width: int, why: bool = False, offset: int = 0, scores: bool = False
) -> list[str]:
    """A search result's table (ranks from ``offset + 1``; ``scores``: with the score column), with ``why`` a
    line per entry with the blend's terms (``entry.why(result.config)``, or ``entry.why()`` for a result without
    a ``config``); one "no results" line for an empty result. Any result with ``ranked`` entries (``.paper``,
    ``.final_score``, ``.why()``), ``query`` and ``metrics["wall_time_ms"]`` will do."""
    if not result.ranked:
        return no_results_line(result, width, offset).split("\n")
    config = getattr(result, "config", None)  # a result of another kind: its entries' why() need none
    explain = (lambda r: r.why(config)) if config is not None else (lambda r: r.why())
    return table_lines(result.ranked, width, offset, explain=explain if why else None, scores=scores)


def no_results_line(result: RetrievalResult, width: int, offset: int = 0) -> str:
    """The line saying there are no results: the query shortened, the time; past the last page, how far the
    ranking went."""
    ms = result.metrics["wall_time_ms"]
    length = getattr(result, "length", result.hit_count)
    tail = f" past {offset:,} (the ranking ends at {length:,}; {ms:.1f} ms)" if offset and length else f" ({ms:.1f} ms)"
    room = width - len("no results for ''") - len(tail) - 1  # the query as long as the line allows, at most 60
    text = f"no results for {shorten(result.query, max(10, min(QUERY_SHOWN, room)))!r}{tail}"
    return "\n".join(wrap(text, width, hanging=2))


def no_similar_lines(result, seeds: str, width: int) -> list[str]:
    """The lines saying ``similar`` found no papers (a ``SimilarResult``): past the last page, how far it went;
    with filters, that they let none through."""
    ms = result.wall_time_ms
    if result.offset and result.matched:
        about = "" if result.matched_exact else "about "
        ends = f"the list ends at {about}{result.matched:,}"
        text = f"no papers like {seeds} past {result.offset:,} ({ends}; {ms:.1f} ms)"
    elif result.filters:
        text = f"no papers like {seeds} pass the filters ({ms:.1f} ms)"
    else:
        text = f"no papers like {seeds} ({ms:.1f} ms)"
    return wrap(text, width, hanging=2)


def results_span(offset: int, n: int) -> str:
    """Which results a page holds: "result 1", "results 1-10", "results 11-20"."""
    return f"result {offset + 1:,}" if n == 1 else f"results {offset + 1:,}-{offset + n:,}"


def matched_clause(matched: int, exact: bool = True) -> str:
    """How many papers match the query: "1 paper matches the query", "about 2,500 papers match the query"."""
    verb = "matches" if matched == 1 else "match"
    return f"{'' if exact else 'about '}{count(matched, 'paper')} {verb} the query"


def summary_lines(
    result: RetrievalResult, width: int, offset: int = 0, matched: int | None = None, verbose: bool = False
) -> list[str]:
    """The lines under a search's table: which results these are and how many papers match the query (one
    count: ``matched``, by default the result's own, "about" when its ``matched_exact`` is false; not said when
    None), and the time. With ``verbose``, the ranking's internals as well: the scores, how many candidates were
    ranked, the formula, which ranking ran and whether the graph was expanded."""
    if not result.ranked:
        return []
    m, config = result.metrics, result.config
    n = len(result.ranked)
    exact = True
    if matched is None:
        matched, exact = getattr(result, "matched", None), getattr(result, "matched_exact", True)
    first = [results_span(offset, n)]
    if matched is not None:
        first.append(matched_clause(matched, exact))
    lines = clauses(first, width)
    lines[-1] += f" ({m['wall_time_ms']:.1f} ms)" if columns(lines[-1]) + 12 <= width else ""
    if not verbose:
        return lines
    ranked = f"top {m['top_score']:.4f}, average {m['avg_score']:.4f} over {count(m['hit_count'], 'ranked candidate')}"
    lines += wrap(ranked, width, hanging=2)
    graph = "1/.6/.3 by hops" if config.ranking == "hops" else "evidence"
    semantic = result.expansion.get("semantic", {})  # the text vectors' term, where the blend had one
    similar = f" + {config.w_semantic:g}*semantic({semantic['model']})" if semantic.get("used") else ""
    formula = (
        f"final = {config.w_bm25:g}*bm25/max + {config.w_graph:g}*graph({graph}){similar} + "
        f"{config.w_recency:g}*recency"
    )
    model = result.expansion.get("model") if config.ranking == "learned" else None
    if model:
        formula = f"final = learned model {model['name']}: sum of weight*feature over {model['features']} features"
    lines += wrap(formula, width, hanging=2)
    auto = result.expansion.get("auto")
    if auto:
        chosen = "the learned model" if auto["ranking"] == "learned" else "the policy"
        lines += wrap(
            f"ranking auto: {chosen} (the matching papers are cited {auto['cited_by_mean']:.1f} times on average; "
            f"the policy below {auto['threshold']:g})", width, hanging=2,
        )  # fmt: skip
    feedback = result.expansion.get("cocited")
    if feedback:
        lines += wrap(
            f"co-citation feedback: the top {feedback['depth']} re-ranked by how often they are cited beside the top "
            f"{feedback['feedback']} (weight {feedback['weight']:g}; {count(feedback['raised'], 'paper')} raised"
            + (f"; {count(feedback['left_out'], 'paper')} cited more than {feedback['max_cited']:,} times took no "
               "part: cited beside everything" if feedback.get("left_out") else "") + ")",
            width, hanging=2,
        )  # fmt: skip
    gate = result.expansion.get("gate", {})
    if gate:
        state = "expanded" if gate["fired"] else "not expanded"
        added = f"{count(result.expansion.get('candidates_added', 0), 'paper')} added"
        lines += clauses([f"graph: {state} ({gate['reason']})", added], width)
    return lines


def paper_lines(
    paper: Paper,
    width: int,
    refs: Mapping[str, Paper] | None = None,
    citing: Mapping[str, Paper] | None = None,
    limit: int | None = None,
    *,
    page=None,
) -> list[str]:
    """One paper's page: id and year, title, every author, the abstract, then its references and the papers
    citing it as tables (id, year, first author, title). ``refs`` and ``citing`` map ids to the papers of the
    corpus (their title, year, authors); a reference outside the corpus is listed by its id. ``limit``: rows
    per list at most (None: all), and a line saying how many more there are. ``page``: the ``PaperPage`` whose
    lists ``paper`` holds a page of (``retrieval show --limit``): each list's heading gives its total, the rows
    shown and their order, and the line after it how many there are beyond and the option that shows them."""
    refs, citing = refs or {}, citing or {}
    lines = [fit(paper.id + (f" ({paper.year})" if paper.year is not None else ""), width)]
    lines.extend(wrap(readable(paper.title) or "(no title)", width))
    if paper.authors:
        lines.extend(wrap(", ".join(readable(a) for a in joined_authors(paper.authors)), width, hanging=2))
    if paper.abstract:
        lines.append("")
        lines.extend(wrap(readable(paper.abstract), width))

    def listing(title: str, ids: Sequence[str], known: Mapping[str, Paper], kind: str = "") -> None:
        lines.append("")
        start, total = (getattr(page, f"{kind}_offset"), getattr(page, f"{kind}_total")) if page else (0, len(ids))
        if page is not None and (start or len(ids) < total):
            order = {"citations": "the most cited first", "year": "the newest first"}.get(page.sort, "by id")
            span = f"{start + 1:,}" + (f"-{start + len(ids):,}" if len(ids) > 1 else "")
            title += f"; {span}, {order}" if ids else f"; none from {start + 1:,} on"
        lines.extend(wrap(title, width, hanging=2))
        shown = list(ids if limit is None else ids[:limit])
        rows = []
        for pid in shown:
            other = known.get(pid)
            if other is None:
                rows.append((None, pid, "", None, "(not in the corpus)", None))
            else:
                rows.append((None, pid, _year(other.year), other.authors, other.title, None))
        cited = [f"{page.cited_by.get(pid, 0):,}" for pid in shown] if page is not None and page.cited_by else None
        lines.extend(_table(rows, width, header=False, indent=2, cited=cited))
        beyond = total - start - len(shown)
        if beyond > 0:
            option = f" (--{kind}-offset {start + len(shown)})" if page is not None and kind else ""
            lines.append(f"  and {beyond:,} more{option}")

    references = list(paper.references)
    total = page.references_total if page is not None else len(references)
    if total:
        inside = page.references_in_corpus if page is not None else sum(1 for pid in references if pid in refs)
        listing(f"references: {total:,} ({inside:,} in the corpus)", references, refs, "references")
    else:
        lines.extend(["", "references: none listed"])
    cited_by = list(paper.citations)
    total = page.citations_total if page is not None else len(cited_by)
    if total:
        listing(f"cited by {count(total, 'paper')} of the corpus", cited_by, citing, "citations")
    else:
        lines.extend(["", "cited by no paper of the corpus"])
    return lines


# -- retrieval explain -------------------------------------------------------------------------------------------


def _edge(edge: EdgeRecord) -> str:
    return f"Delta {edge.delta:.2f} ({edge.support.covered}/{edge.claims_citing} claims), w {edge.weight:.3f}"


def _explanation_lines(explanation: PaperExplanation, run: EvidenceRun, width: int, indent: int, links: int):
    node = explanation.node
    texts = []
    if node.seed is not None:
        if node.seed.explicit:
            texts.append(f"seed (given), relevance {node.seed.relevance:.2f}")
        for hit in node.seed.hits:
            texts.append(
                f"seed of sub-query {hit.subquery} {shorten(run.subqueries[hit.subquery], 40)!r}: rank "
                f"{hit.rank}, bm25 {hit.bm25:.2f} ({hit.bm25_norm:.2f} of the best), recency {hit.recency:.2f}"
            )
    # The strongest seed edges first; pruned ones last, with their reason.
    via = sorted(explanation.via, key=lambda link: (not link.edge.kept, -link.edge.weight, link.seed))
    for link in via[:links]:
        verb = "cited by seed" if link.relation == "reference" else "cites seed"
        state = "" if link.edge.kept else f"  [pruned: {link.edge.reason}]"
        texts.append(f"{verb} {link.seed}: {_edge(link.edge)}{state}")
    if len(via) > links:
        rest = via[links:]
        pruned = sum(1 for link in rest if not link.edge.kept)
        texts.append(f"and {len(rest)} more seed {'edge' if len(rest) == 1 else 'edges'} ({pruned} pruned)")
    seeds = {link.seed for link in explanation.via}
    inbound = [e for e in explanation.in_edges if e.citing not in seeds]
    if inbound:
        shown = ", ".join(f"{e.citing} ({_edge(e)})" for e in inbound[:3])
        more = f" and {len(inbound) - 3} more" if len(inbound) > 3 else ""
        texts.append(f"also cited in the graph by {shown}{more}")
    return [line for text in texts for line in wrap(text, width, indent=indent, hanging=2)]


def run_lines(run: EvidenceRun, width: int, links_shown: int = 4, pruned_shown: int = 10) -> list[str]:
    """``retrieval explain``'s account of a run: sizes, health, the returned papers (a table as ``search``'s,
    without authors, which a run does not load) each with its reasons, and the first ``pruned_shown`` pruned
    edges; ``links_shown`` seed edges per paper."""
    size, cfg = run.size, run.config
    trimmed = f", trimmed from {size.found_nodes:,} / {size.found_edges:,}" if size.trimmed else ""
    subs = len(run.subqueries) - 1
    subqueries = f" with {count(subs, 'sub-query', 'sub-queries')}" if subs else ""
    kept_nodes = sum(1 for node in run.nodes.values() if node.kept)
    pruning = f"tau {cfg.tau:g}, theta {cfg.theta:g}" if cfg.prune else "pruning off"
    statements = [  # each a list of clauses, joined by "; " (the ranker's by ", "), broken between them
        [f"query: {shorten(run.query)!r}{subqueries}"],
        [f"seeds: {len(run.seeds)}", f"evidence graph |V| = {size.nodes:,}, |E| = {size.edges:,}{trimmed} "
         f"(cap {size.cap or 'none'}, {size.cap_policy})", count(size.claims, "claim")],
        [f"scorer {run.scorer}: {count(run.scorer_calls, 'call')} (announced bound {size.scorer_bound:,})"],
        [f"kept {count(kept_nodes, 'paper')} and {count(len(run.kept_edges), 'edge')}",
         f"pruned {count(len(run.pruned_edges), 'edge')} ({pruning})",
         f"dropped {count(len(run.dropped_nodes), 'paper')}"],
    ]  # fmt: skip
    lines = [line for pieces in statements for line in clauses(pieces, width)]
    walk = f"citing {cfg.vote_citing:g}, own {cfg.vote_self:g}" if cfg.ranker == "vote" else f"alpha {cfg.alpha:g}"
    ranker = [f"ranker {cfg.ranker}: {walk}", f"beta {cfg.beta:g}",
              f"reference year {run.reference_year} ({cfg.recency})", count(run.iterations, "iteration"),
              f"{run.timings_ms.get('total', 0.0):.0f} ms"]  # fmt: skip
    lines += clauses(ranker, width, sep=", ")
    lines.append(f"status: {run.health.status}")
    for warning in run.health.warnings:
        lines.extend(wrap(f"warning: {warning}", width, indent=2, hanging=2))
    if run.run_id is not None:
        text = f"saved as run {run.run_id} (tables evidence_runs, evidence_run_nodes, evidence_run_edges)"
        lines.extend(wrap(text, width, hanging=2))
    lines.append("")
    explanations = run.explanations()
    if not explanations:
        lines.append("no paper ranked")
    else:
        rows = [
            (str(rank), e.node.paper_id, _year(e.node.year), None, e.node.title, f"{e.node.score:.5f}")
            for rank, e in enumerate(explanations, start=1)
        ]
        table = _table(rows, width)
        lines.append(table[0])
        indent = len(str(len(explanations))) + 2
        for explanation, row_line in zip(explanations, table[1:], strict=True):
            lines.append(row_line)
            lines.extend(_explanation_lines(explanation, run, width, indent, links_shown))
    pruned = run.pruned_edges
    if pruned:
        lines.append("")
        text = f"pruned edges ({min(pruned_shown, len(pruned))} of {len(pruned):,}; --json lists all):"
        lines.extend(wrap(text, width, hanging=2))
        for edge in pruned[:pruned_shown]:
            lines.extend(wrap(f"{edge.citing} -> {edge.cited}: {edge.reason}", width, indent=2, hanging=4))
    return lines
