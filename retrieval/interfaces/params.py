"""The parameters of the operations every front door offers (search, similar, show, explain), each described once:
its name in the library, its type, default, help and bounds. The command line's options, the HTTP API's query
parameters, the web page's search form and the MCP tools' input schemas are made from these descriptions, so a
parameter reads the same everywhere.

The filters (``FILTERS``) are made whole from here: each front door adds every filter listed, and passes it on by
its library name to ``RetrievalClient.search`` and ``similar``. Adding a filter is a ``Param`` in ``FILTERS`` and
its handling in the search code (``retrieval.search.filters``); the front doors follow.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable

from ..validate import LIMITS, check_choice, parse_years

#: ``retrieval.search.blend.SORTS``, repeated: a command line's --help does not import the search code.
SORTS = ("relevance", "citations", "year")

#: What one request may ask for (beyond ``retrieval.validate.LIMITS``, which still apply): a query of at most
#: ``query_chars`` characters (a long abstract is about 2,000), ``limit`` results, ``subqueries`` sub-queries
#: to ``explain``, an evidence graph of ``max_nodes`` papers, and ``top_k`` explained papers.
BOUNDS = {
    "query_chars": 20_000,
    "limit": 100,
    "offset": LIMITS["offset"],
    "subqueries": LIMITS["subqueries"],
    "max_nodes": 5_000,
    "top_k": 50,
    "ids": 50,
    "id_chars": 1_000,
    "explain_edges": 20,  # edges listed per list of each paper in an agent's summary of an evidence run
    "explain_pruned": 200,  # pruned edges listed in it
}


_PARAM_FIELDS = "name help kind default bound low repeat flag http metavar example check choices"


class Param(namedtuple("Param", _PARAM_FIELDS, defaults=(str, None, None, None, False, "", "", None, "", None, ()))):
    """One parameter: ``name`` (the library's keyword), ``help`` (one description for every front door), ``kind``
    (its type in the HTTP API and the MCP schemas), ``default``, ``bound`` (the key of its upper bound in
    ``retrieval.validate.LIMITS`` for the command line, in ``BOUNDS`` for the servers), ``low``,
    ``repeat`` (given once per value: ``--author A --author B``, ``?author=A&author=B``), ``flag`` (the command
    line's option, ``--name`` unless said), ``http`` (the query parameter's name, ``name`` unless said),
    ``metavar``, ``example`` (the web form's placeholder), ``check`` (raises ``ConfigError`` for a value the
    library would refuse: the command line says so as a usage error) and ``choices`` (the values it takes, when
    they are few: the first is the default)."""

    __slots__ = ()

    @property
    def option(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def query_name(self) -> str:
        return self.http or self.name

    def cli_help(self) -> str:
        """The help with the command line's bound, or how to give several values."""
        if self.repeat:
            return f"{self.help}; give {self.option} once for each"
        return self.help + (f" (at most {LIMITS[self.bound]:,})" if self.bound else "")

    def server_help(self) -> str:
        """The help with the servers' bounds."""
        if self.bound is None:
            return self.help
        return f"{self.help}, {self.low} to {BOUNDS[self.bound]:,}"

    def schema_bounds(self) -> dict:
        """The bounds as JSON schema (shown in the schema, checked by ``Service`` with the library's messages)."""
        if self.choices:
            return {"enum": list(self.choices)}
        return {} if self.bound is None else {"minimum": self.low, "maximum": BOUNDS[self.bound]}


YEAR = Param(
    "year",
    "only papers of these years: 1998-2001, 1998-, -2001 or 1998 (a paper without a year fails)",
    kind=str | int | None,
    metavar="RANGE",
    example="1998-2001",
    check=parse_years,
)


def _author(name: str) -> None:
    """Refuse (``ConfigError``) an author name that no paper's author can match: one without letters."""
    from ..corpus.names import check_author  # the filters' own check, imported when a name is given

    check_author(name)


AUTHORS = Param(
    "authors",
    "only papers by all of these authors: a surname (Maldacena) or a name (J. Maldacena, 'Maldacena, Juan'); case, "
    "accents and initials are matched",
    kind=list[str] | None,
    repeat=True,
    flag="--author",
    http="author",
    metavar="NAME",
    example="Maldacena",
    check=_author,
)
SORT = Param(
    "sort",
    "the order of the results: relevance (the ranking's), citations (most cited first) or year (newest first); "
    "ties keep the ranking's order",
    kind=str | None,
    metavar="ORDER",
    example="relevance",
    check=lambda text: check_choice("sort", text, SORTS),
    choices=SORTS,
)
#: Every filter of search and similar, and their order (``SORT``), in the order the front doors show them.
FILTERS = (YEAR, AUTHORS, SORT)

LIMIT = Param("limit", "results to return", kind=int, default=10, bound="limit", low=1)
OFFSET = Param("offset", "results to skip first: the next page", kind=int, default=0, bound="offset", low=0)
EXCLUDE = Param("exclude", "paper ids to leave out of the results, e.g. papers already read", kind=list[str] | None)
PAPER_ID = Param(
    "paper_id",
    "the paper's id, as search, similar or explain results give it (arXiv:ID, an arxiv.org address or arXiv's DOI "
    "name the e-print too)",
)

#: ``retrieval.search.papers.LINK_SORTS``, repeated: a command line's --help does not import the search code.
LINK_SORTS = ("citations", "year", "id")
#: ``show``'s page of a paper's references and of its citing papers (a much-cited paper has thousands): how many of
#: each, in which order, from where in each list. One default for every front door but the web page's.
LINKS_LIMIT = Param(
    "limit",
    "references and citing papers to list, of each (the totals say how many there are)",
    kind=int,
    default=20,
    bound="limit",
    low=1,
)
LINKS_SORT = Param(
    "sort",
    "the order of the references and citing papers: citations (the most cited first), year (the newest first) or id",
    kind=str,
    default=LINK_SORTS[0],
    metavar="ORDER",
    choices=LINK_SORTS,
)
REFERENCES_OFFSET = Param("references_offset", "references to skip first: the next page of them", kind=int, default=0)
CITATIONS_OFFSET = Param("citations_offset", "citing papers to skip first: the next page of them", kind=int, default=0)
#: The paging of ``show``, in the order the front doors take it.
LINKS = (LINKS_LIMIT, LINKS_SORT, REFERENCES_OFFSET, CITATIONS_OFFSET)


def filter_values(values: dict[str, object]) -> dict[str, object]:
    """The filters among ``values`` (keyed by library name) as the library takes them: a repeated one as a tuple,
    another as text (None: not asked for)."""
    out = {}
    for f in FILTERS:
        value = values.get(f.name)
        out[f.name] = tuple(value or ()) if f.repeat else (None if value is None else str(value))
    return out


def with_filters(fn: Callable, annotate: Callable[[Param], object], rename: bool = False) -> Callable:
    """``fn`` (whose last parameter is ``**filters``) with a signature that lists every filter, annotated by
    ``annotate(param)`` and defaulting to None, named by the HTTP API's names when ``rename``: FastAPI and the MCP
    SDK build their schemas from it and call ``fn`` with those keywords."""
    import inspect  # the servers' start pays for it, a command line's --help does not

    signature = inspect.signature(fn)
    given = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    extra = [
        inspect.Parameter(
            f.query_name if rename else f.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotate(f)
        )
        for f in FILTERS
    ]
    fn.__signature__ = signature.replace(parameters=given + extra)
    return fn


def library_names(values: dict[str, object]) -> dict[str, object]:
    """``values`` keyed by the HTTP API's names, keyed by the library's instead."""
    return {f.name: values[f.query_name] for f in FILTERS if f.query_name in values}


def check_filters(values: dict[str, object], renamed: bool = True) -> None:
    """A request's filters (by their library names, as ``library_names`` gives them) checked as the library checks
    them (``parse_years``; an author name needs a letter), with a ``ConfigError`` that names the parameter as the
    request named it: the HTTP API's name (``year``, ``author``) when ``renamed``, else the library's (``year``,
    ``authors``, as the agent tools name them), where the library's own message names the command line's option
    (``--year``, ``--author``): a client of a server has no options."""
    from ..corpus.names import check_author

    year = values.get(YEAR.name)
    if year is not None:
        parse_years(str(year), name=YEAR.query_name if renamed else YEAR.name)
    authors = AUTHORS.query_name if renamed else AUTHORS.name
    for name in values.get(AUTHORS.name) or ():
        check_author(name, authors, f"{authors}=Maldacena" if renamed else f'{authors}=["Maldacena"]')
