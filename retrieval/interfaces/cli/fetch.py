"""The ``retrieval fetch`` subcommand: parsing and printing only; the work is ``retrieval.corpus.fetch``
(``fetch_openalex``, ``fetch_s2``, ``fetch_arxiv``, each returning a ``FetchSummary``).

``retrieval fetch openalex|s2|arxiv ... -o papers.jsonl`` writes a corpus file that ``build --from`` and ``add``
read. The fetch modules (and httpx) are imported only once the options are parsed. An option the library refuses
is a usage error (exit 2); a failure of the fetch (unreachable, refused, a rate limit past its wait) is one line and
exit 1; Ctrl-C or SIGTERM is one line, exit 130, with what was kept and how to continue.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date

from ...errors import ConfigError, RetrievalError
from ...validate import parse_years
from .options import non_negative, positive_int, seconds

#: The defaults of ``retrieval.corpus.fetch`` (``run.DEFAULT_MAX``, ``session.TRIES``, ``session.TIMEOUT``,
#: ``session.MAX_WAIT``), named here so that ``--help`` does not import httpx.
DEFAULT_MAX = 10_000
TRIES = 6
TIMEOUT = 30.0
MAX_WAIT = 600.0
#: Each source's name, label and base URL (``retrieval.corpus.fetch.<source>.BASE_URL``: a test keeps them equal).
SOURCES = {
    "openalex": ("OpenAlex", "https://api.openalex.org"),
    "s2": ("Semantic Scholar", "https://api.semanticscholar.org/graph/v1"),
    "arxiv": ("arXiv", "https://export.arxiv.org/api"),
}
PHASES = {"search": "search", "references": "cited papers", "citing": "citing papers"}

DESCRIPTION = (
    "Fetch a corpus from OpenAlex, Semantic Scholar or arXiv into a JSONL file that `retrieval build --from` and "
    "`retrieval add` read. Resumable: a fetch that stops (killed, offline, rate limited) continues where it stopped "
    "when the same command runs again; the output is written whole at the end. Example: retrieval fetch openalex "
    '--search "sparse attention" --max 2000 --with-references -o papers.jsonl && retrieval build --from papers.jsonl'
)


def _date(text: str) -> str:
    try:
        return date.fromisoformat(text.strip()).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a date as YYYY-MM-DD, such as 2024-01-31, got {text!r}") from None


def _years(text: str) -> str:
    try:
        parse_years(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _wait(text: str) -> float:
    value = non_negative(text)
    if value > 86_400:
        raise argparse.ArgumentTypeError(f"expected at most a day (86400 s), got {text}")
    return value


def _common(p: argparse.ArgumentParser, source: str) -> None:
    """The options every source takes: the output, the bounds, the neighbourhood, the politeness."""
    label, base = SOURCES[source]
    p.add_argument(
        "-o",
        "--out",
        required=True,
        metavar="FILE",
        help="the corpus file to write (JSONL; .gz: gzip), replaced whole when the fetch is done; its "
        "journal and state are kept beside it until then",
    )
    p.add_argument(
        "--max",
        type=positive_int,
        metavar="N",
        help=f"papers the search fetches at most (default {DEFAULT_MAX:,}; with --ids-from, every id)",
    )
    p.add_argument(
        "--with-references",
        action="store_true",
        help="also fetch the papers the fetched ones cite most (one hop), so that the set has the "
        "citation edges the graph pass follows",
    )
    p.add_argument("--with-citing", action="store_true", help="also fetch papers that cite the fetched ones (one hop)")
    p.add_argument(
        "--max-hop",
        type=positive_int,
        metavar="N",
        help="papers each of --with-references and --with-citing adds at most (default: --max)",
    )
    p.add_argument(
        "--base-url",
        default=base,
        metavar="URL",
        help=f"the API's root, for a mirror or a test server (default {base})",
    )
    p.add_argument(
        "--timeout",
        type=seconds,
        default=TIMEOUT,
        metavar="SECONDS",
        help=f"seconds to wait for an answer before trying again (default {TIMEOUT:g})",
    )
    p.add_argument(
        "--tries",
        type=positive_int,
        default=TRIES,
        metavar="N",
        help=f"tries per request on 429, 5xx, timeouts and dropped connections (default {TRIES})",
    )
    p.add_argument(
        "--backoff",
        type=non_negative,
        default=1.0,
        metavar="SECONDS",
        help="the first wait before trying again, doubled each time up to 60 s, with jitter (default 1)",
    )
    p.add_argument(
        "--interval",
        type=non_negative,
        metavar="SECONDS",
        help=f"seconds between requests (default: what {label} asks for)",
    )
    p.add_argument(
        "--max-wait",
        type=_wait,
        default=MAX_WAIT,
        metavar="SECONDS",
        help=f"the longest rate-limit wait (Retry-After) slept through; longer, the fetch stops and says "
        f"when to run it again (default {MAX_WAIT:g})",
    )
    p.add_argument("--restart", action="store_true", help="discard an unfinished fetch to the same file and start over")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")


def _openalex_args(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Works from the OpenAlex API (cursor paging, 100 a page), abstracts rebuilt from abstract_inverted_index, "
        "referenced_works as references. Ids of topics, concepts, sources, authors and institutions are OpenAlex "
        "ids (look them up on openalex.org). An API key (free) from --api-key or $OPENALEX_API_KEY."
    )
    p.add_argument("--search", metavar="TEXT", help="words to find in titles, abstracts and full texts")
    p.add_argument(
        "--topic", action="append", default=[], metavar="ID", help="a topic (T10001...); repeat: any of them"
    )
    p.add_argument("--concept", action="append", default=[], metavar="ID", help="a concept (C41008148...)")
    p.add_argument(
        "--source",
        dest="source_ids",
        action="append",
        default=[],
        metavar="ID",
        help="a journal or venue (S4306400194...)",
    )
    p.add_argument("--author", action="append", default=[], metavar="ID", help="an author (A5023888391...)")
    p.add_argument("--institution", action="append", default=[], metavar="ID", help="an institution (I136199984...)")
    p.add_argument("--year", type=_years, metavar="RANGE", help="publication years: 2019, 2019-2023, 2019- or -2023")
    p.add_argument("--open-access", action="store_true", help="open-access works only (is_oa:true)")
    p.add_argument("--type", action="append", default=[], metavar="TYPE", help="a work type (article, preprint, ...)")
    p.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="FILTER",
        help="any other OpenAlex filter as written, such as language:en",
    )
    p.add_argument(
        "--since",
        type=_date,
        metavar="DATE",
        help="works published on or after DATE (from_publication_date): to refresh an index",
    )
    p.add_argument(
        "--since-field",
        choices=("publication", "created", "updated"),
        default="publication",
        help="what --since filters on: publication (the default, free), or created / updated (OpenAlex's "
        "from_created_date / from_updated_date, for paid plans)",
    )
    p.add_argument("--mailto", metavar="EMAIL", help="a contact address sent with each request ($OPENALEX_MAILTO)")
    p.add_argument("--api-key", metavar="KEY", help="an OpenAlex API key ($OPENALEX_API_KEY)")
    p.add_argument(
        "--per-page",
        type=positive_int,
        default=100,
        metavar="N",
        help="works a page (default 100, the most OpenAlex documents; 200 where a mirror allows)",
    )
    _common(p, "openalex")
    p.set_defaults(func=_cmd_fetch, fetch_from="openalex", fetch_parser=p)


def _s2_args(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Papers from the Semantic Scholar Graph API: bulk search (token paging, 1,000 ids a page), each page read "
        "through paper/batch for its references; or the papers of --ids-from (an arXiv fetch's output: its "
        "references). An API key from --api-key or $S2_API_KEY goes in the x-api-key header."
    )
    p.add_argument("--search", metavar="TEXT", help='bulk search query: words, "phrases", + AND, | OR, - NOT')
    p.add_argument(
        "--ids-from",
        metavar="FILE",
        help="look up these papers instead of searching: a JSONL file of papers (arXiv ids and DOIs are "
        "looked up) or a file of ids, one a line",
    )
    p.add_argument("--year", type=_years, metavar="RANGE", help="publication years: 2019, 2019-2023, 2019- or -2023")
    p.add_argument("--venue", action="append", default=[], metavar="NAME", help="a venue; repeat: any of them")
    p.add_argument(
        "--field-of-study",
        action="append",
        default=[],
        metavar="FIELD",
        help="a field of study (Computer Science, Medicine, ...)",
    )
    p.add_argument(
        "--type",
        action="append",
        default=[],
        metavar="TYPE",
        help="a publication type (JournalArticle, Conference, Review, ...)",
    )
    p.add_argument("--open-access", action="store_true", help="papers with an open-access PDF only")
    p.add_argument("--min-citations", type=positive_int, metavar="N", help="papers cited at least N times")
    p.add_argument("--since", type=_date, metavar="DATE", help="papers published on or after DATE: to refresh an index")
    p.add_argument("--api-key", metavar="KEY", help="a Semantic Scholar API key ($S2_API_KEY)")
    _common(p, "s2")
    p.set_defaults(func=_cmd_fetch, fetch_from="s2", fetch_parser=p)


def _arxiv_args(p: argparse.ArgumentParser) -> None:
    p.description = (
        "E-prints from the arXiv API (Atom), by category and submission date, a month a query, one request every "
        "3 s. arXiv lists no references: run `retrieval fetch s2 --ids-from` on the output to get them."
    )
    p.add_argument("--category", action="append", default=[], metavar="CAT", help="a category (cs.IR, hep-th, ...)")
    p.add_argument("--search", metavar="TEXT", help="words to find (all of them, in any field)")
    p.add_argument("--query", metavar="QUERY", help="arXiv's own query syntax, such as 'ti:transformer AND au:bengio'")
    p.add_argument("--since", type=_date, metavar="DATE", help="submitted on or after DATE")
    p.add_argument("--until", type=_date, metavar="DATE", help="submitted on or before DATE (default: today)")
    _common(p, "arxiv")
    p.set_defaults(func=_cmd_fetch, fetch_from="arxiv", fetch_parser=p)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``retrieval fetch`` on its parser ``p``: a subcommand per source."""
    p.description = DESCRIPTION
    sources = p.add_subparsers(dest="fetch_source", required=True, metavar="SOURCE")
    for name, adder, summary in (
        ("openalex", _openalex_args, "works from OpenAlex: search, filters, references and citing works"),
        ("s2", _s2_args, "papers from Semantic Scholar: bulk search or ids, with references and citations"),
        ("arxiv", _arxiv_args, "e-prints from arXiv by category and date (no references)"),
    ):
        adder(sources.add_parser(name, help=summary, formatter_class=p.formatter_class))


def _options(args: argparse.Namespace) -> dict:
    """The library's options of the chosen source, from the parsed arguments."""
    common = {"max": args.max, "base_url": args.base_url}
    if args.fetch_from == "openalex":
        return {
            **common,
            "search": args.search,
            "topics": args.topic,
            "concepts": args.concept,
            "sources": args.source_ids,
            "authors": args.author,
            "institutions": args.institution,
            "years": args.year,
            "open_access": args.open_access,
            "types": args.type,
            "filters": args.filter,
            "since": args.since,
            "since_field": args.since_field,
            "mailto": args.mailto,
            "api_key": args.api_key,
            "per_page": args.per_page,
            "with_references": args.with_references,
            "with_citing": args.with_citing,
            "max_hop": args.max_hop,
        }
    if args.fetch_from == "s2":
        return {
            **common,
            "search": args.search,
            "ids_from": args.ids_from,
            "years": args.year,
            "venues": args.venue,
            "fields_of_study": args.field_of_study,
            "types": args.type,
            "open_access": args.open_access,
            "min_citations": args.min_citations,
            "since": args.since,
            "api_key": args.api_key,
            "with_references": args.with_references,
            "with_citing": args.with_citing,
            "max_hop": args.max_hop,
        }
    return {
        **common,
        "search": args.search,
        "query": args.query,
        "categories": args.category,
        "since": args.since,
        "until": args.until,
    }


class _Bars:
    """A progress bar per phase on the terminal (tqdm: papers, rate, time left); none in a pipe. Notices are
    written above the bar."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.bar = None
        self.phase = None
        self.tty = sys.stderr.isatty()

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if not self.tty:
            return
        from tqdm import tqdm

        if phase != self.phase:
            self.close(done=True)
            self.phase = phase
            self.bar = tqdm(
                total=total,
                desc=f"{self.label}: {PHASES.get(phase, phase)}",
                unit="papers",
                file=sys.stderr,
                dynamic_ncols=True,
                mininterval=0.2,
            )
        if total is not None and self.bar.total != total:
            self.bar.total = total
        self.bar.update(done - self.bar.n)

    def notice(self, line: str) -> None:
        text = f"retrieval: {line}"
        if self.bar is not None:
            from tqdm import tqdm

            tqdm.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr)

    def close(self, done: bool = False) -> None:
        """Close the bar; ``done`` (its phase finished): full, though the estimate counted papers found twice."""
        if self.bar is not None:
            if done and self.bar.total is not None and self.bar.n < self.bar.total:
                self.bar.total = self.bar.n
                self.bar.refresh()
            self.bar.close()
            self.bar = None


def _cmd_fetch(args: argparse.Namespace) -> int:
    if args.fetch_from == "arxiv" and (args.with_references or args.with_citing):
        args.fetch_parser.error(
            "arXiv lists no references or citing papers: fetch the set, then get them from Semantic Scholar with "
            "`retrieval fetch s2 --ids-from FILE --with-references`"
        )
    from ...corpus import fetch  # loaded when the command runs: httpx and the sources

    label = SOURCES[args.fetch_from][0]
    bars = _Bars(label)
    policy = fetch.Policy(
        tries=args.tries, timeout=args.timeout, backoff=args.backoff, max_wait=args.max_wait, interval=args.interval
    )
    function = {"openalex": fetch.fetch_openalex, "s2": fetch.fetch_s2, "arxiv": fetch.fetch_arxiv}[args.fetch_from]
    try:
        summary = function(
            args.out, restart=args.restart, policy=policy, progress=bars, notice=bars.notice, **_options(args)
        )
    except ConfigError as exc:  # an option the library refuses: a usage error
        bars.close()
        args.fetch_parser.error(str(exc))
    except KeyboardInterrupt as exc:
        bars.close()
        message = getattr(exc, "message", "interrupted: run the same command again to continue")
        print(f"retrieval: {message}", file=sys.stderr)
        return 130
    except RetrievalError:
        bars.close()
        raise
    bars.close(done=True)
    for note in summary.notes:
        print(f"retrieval: note: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(summary.to_dict(), ensure_ascii=False, indent=2))
    else:
        print("\n".join(summary_lines(summary, label)))
    return 0


def summary_lines(s, label: str) -> list[str]:
    """The closing summary of a fetch for a person: what was fetched, what the set holds, what to run next."""
    hop = []
    if s.references_added:
        hop.append(f"{s.references_added:,} cited papers")
    if s.citing_added:
        hop.append(f"{s.citing_added:,} citing papers")
    matched = f" of about {s.matched:,} matching" if isinstance(s.matched, int) else ""
    if s.given is not None:
        matched = f" of the {s.given:,} ids given"
    lines = [
        f"fetched {s.papers:,} paper{'' if s.papers == 1 else 's'} from {label} into {s.path}: {s.searched:,}{matched}"
        + (
            f" (stopped at --max {s.max:,})"
            if s.reached_max and isinstance(s.matched, int) and s.matched > s.max
            else ""
        )
        + (f", and {' and '.join(hop)} added" if hop else ""),
        f"  {s.with_abstract:,} with an abstract, {s.with_references:,} with references; {s.in_corpus_references:,} "
        f"of their {s.references:,} references point inside the set (citation edges once built)",
    ]
    dropped = []
    if s.merged:
        dropped.append(f"{s.merged:,} found twice (one DOI) merged")
    if s.duplicates:
        dropped.append(f"{s.duplicates:,} repeated answers skipped")
    if s.not_found:
        dropped.append(f"{s.not_found:,} ids not found")
    if s.skipped:
        dropped.append(f"{s.skipped:,} unreadable records skipped ({'; '.join(s.skip_reasons)})")
    if s.years_dropped:
        dropped.append(f"{s.years_dropped:,} impossible years left empty")
    if dropped:
        lines.append("  " + ", ".join(dropped))
    waited = f", {s.waited_seconds:.1f} s waited" if s.waited_seconds else ""
    resumed = "; continued an unfinished fetch" if s.resumed else ""
    lines.append(f"  {s.requests:,} requests ({s.retries:,} tried again{waited}), {s.seconds:.1f} s{resumed}")
    if s.papers:
        lines.append(
            f"next: retrieval build --from {s.path}   (or, to refresh an index: retrieval add {s.path} --replace)"
        )
    return lines
