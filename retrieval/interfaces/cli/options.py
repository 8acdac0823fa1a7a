"""Value types for the command-line options, shared by every subcommand (argparse turns their errors into a
usage message and exit code 2). On the search floor: the query type parses a ``Query``."""

from __future__ import annotations

import argparse

from ...config import DB_ENV_VAR, DEFAULT_DB, QUERY_TIMEOUT, RELATIONS
from ...text import DEFAULT_STEM, DEFAULT_STOPWORDS, NONE, STOP_WORD_LISTS
from ...validate import LIMITS, YEAR_RANGE

#: ``--db``'s help, on every command that opens an index.
DB_HELP = f"index file or PostgreSQL URL (default: ${DB_ENV_VAR}, else ./{DEFAULT_DB})"

#: The input formats (``retrieval.corpus.jsonl.FORMATS``, which a test keeps equal), named here so that parsing
#: a search does not import the readers.
FORMATS = ("jsonl", "openalex", "s2")
FORMAT_HELP = "input format: jsonl, openalex or s2 (default: detected from the first record)"


def stemmer(text: str) -> str:
    """``--stem``'s value: a stemmer PyStemmer has (imported only when one is named), or ``none``; another is a
    usage error, as an unknown ``--stopwords`` is."""
    from ...errors import ConfigError
    from ...text import Analyser

    if not text.strip():  # ``--stem "$UNSET"``: not the same as leaving it out, nor as ``none``
        raise argparse.ArgumentTypeError(f"is empty: give a Snowball stemmer's name (english, ...) or {NONE}")
    try:
        Analyser(stem=text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def add_analysis_options(p: argparse.ArgumentParser, what: str = "", default: str | None = None) -> None:
    """``--stem`` and ``--stopwords`` on ``p`` (``build``, and ``eval`` and ``train`` for their indexes, ``what``);
    ``default`` names where an option left out comes from (both are then None), else the build's defaults."""
    p.add_argument(
        "--stem",
        metavar="LANGUAGE",
        type=stemmer,
        default=None if default else DEFAULT_STEM,
        help=f"stem {what}terms with this Snowball stemmer (PyStemmer: english, porter, german, ...; {NONE} for no "
        f"stemming); default: {default or DEFAULT_STEM or NONE}",
    )
    p.add_argument(
        "--stopwords",
        choices=[*STOP_WORD_LISTS, NONE],
        default=None if default else DEFAULT_STOPWORDS,
        help=f"drop these stop words (english: Lucene's 33; {NONE} to keep every word); default: "
        f"{default or DEFAULT_STOPWORDS or NONE}. Both are recorded in the index",
    )


def index_location(text: str) -> str:
    """``--db``'s value: an empty one is refused (``--db "$UNSET"`` would otherwise mean the default index)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"is empty: give the index's file or PostgreSQL URL, or leave --db out for the default (${DB_ENV_VAR}, "
            f"else ./{DEFAULT_DB})"
        )
    if "://" in text:  # a URL of a kind retrieval does not know is a mistake in the command, as an empty one is
        from ...config import resolve_db
        from ...errors import ConfigError

        try:
            resolve_db(text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("--db ")) from None
    return text


def shard_urls(text: str) -> str:
    """``--shards``' value, checked as the build reads it (``parse_shards``: PostgreSQL URLs, at least one, each
    database once, no more than are supported): a wrong one is a usage error. It stays text: the build parses it
    again."""
    from ...errors import ConfigError, StoreError
    from ...store.postgres.shards import parse_shards

    try:
        parse_shards(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--shards ")) from None
    except StoreError:  # no server driver to read the URLs with: the build says what to install (exit 1)
        pass
    return text


def _number(text: str, kind: type, expected: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def _whole_number(text: str, least: int, expected: str, most: int | None = None) -> int:
    value = _number(text, int, "a whole number")
    if value < least:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
    if most is not None and value > most:
        raise argparse.ArgumentTypeError(f"expected at most {most:,}, got {value:,}")
    return value


def seconds(text: str) -> float:
    """A duration from 0.1 s to an hour."""
    value = _number(text, float, "a number of seconds")
    if not 0.1 <= value <= 3600:  # also false for NaN
        raise argparse.ArgumentTypeError(f"expected seconds from 0.1 to 3600, got {text}")
    return value


def add_query_timeout(p: argparse.ArgumentParser) -> None:
    """``--query-timeout``, for the commands that serve requests."""
    p.add_argument(
        "--query-timeout",
        type=seconds,
        default=QUERY_TIMEOUT,
        metavar="SECONDS",
        help=f"stop a read that takes longer, answering that it did (default {QUERY_TIMEOUT:g}; on PostgreSQL each "
        "statement's statement_timeout)",
    )


def positive_int(text: str) -> int:
    return _whole_number(text, 1, "a number of at least 1")


SEMANTIC_HELP = (
    "auto, wordllama (pip install 'retrieval[semantic]'), none, or the folder of a sentence-transformers model "
    "(pip install 'retrieval[transformer]'; read offline, on the CPU)"
)


def semantic_model(text: str) -> str:
    """``--semantic``'s value: a model retrieval knows, ``auto``, ``none`` or a sentence-transformers model folder
    (as ``retrieval.embed.requested`` takes it); anything else is a usage error."""
    from ...embed import requested
    from ...errors import ConfigError

    try:
        requested(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--semantic ")) from None
    return text


def bounded(name: str, least: int = 1):
    """A whole number from ``least`` to ``LIMITS[name]`` (the documented bound of that setting)."""

    def parse(text: str) -> int:
        expected = "0 or more" if least == 0 else f"a number of at least {least}"
        return _whole_number(text, least, expected, LIMITS[name])

    parse.__name__ = name  # argparse names the type in its messages
    return parse


def hops(text: str) -> int:
    """Citation hops: 0 or more (more than 2 is clamped to 2 by the configuration, with a warning)."""
    value = _number(text, int, "0, 1 or 2")
    if value < 0:
        raise argparse.ArgumentTypeError(f"hops are 0, 1 or 2, got {value}")
    return min(value, 1_000)


def year(text: str) -> int:
    value = _number(text, int, "a year")
    if not YEAR_RANGE[0] <= value <= YEAR_RANGE[1]:
        raise argparse.ArgumentTypeError(f"expected a year from {YEAR_RANGE[0]} to {YEAR_RANGE[1]}, got {value}")
    return value


def query(text: str) -> str:
    """The query's text, checked: a too long one is a usage error (an empty one is a query that matches nothing).
    It stays text: the search reads its syntax and analyses it as its index does, and counts its terms then (too
    many is a usage error of the command too)."""
    from ...errors import ConfigError
    from ...search import syntax
    from ...search.query import checked_text

    try:
        syntax.parse(text)  # a year: it cannot read is a usage error, as --year's is
        return checked_text(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def checked(param):
    """The option type of ``param`` (``retrieval.interfaces.params.Param``): its text, once ``param.check`` has
    taken it, so a value the library would refuse is a usage error."""

    def parse(text: str) -> str:
        from ...errors import ConfigError

        if not text.strip():  # ``--year "$UNSET"`` filtered nothing, silently
            example = f" (such as {param.example})" if getattr(param, "example", None) else ""
            raise argparse.ArgumentTypeError(f"is empty: give {param.metavar or 'a value'}{example}, or leave it out")
        try:
            if param.check is not None:
                param.check(text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    parse.__name__ = param.name  # argparse names the type in its messages
    return parse


def unit(text: str) -> float:
    value = _number(text, float, "a number between 0 and 1")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {value}")
    return value


def non_negative(text: str) -> float:
    value = _number(text, float, "a number")
    if not value >= 0 or value == float("inf"):  # NaN compares false
        raise argparse.ArgumentTypeError(f"expected a finite number of at least 0, got {value}")
    return value


def number_in(least: float, most: float):
    """A number from ``least`` to ``most``."""

    def parse(text: str) -> float:
        value = _number(text, float, f"a number from {least:g} to {most:g}")
        if not least <= value <= most:  # NaN compares false
            raise argparse.ArgumentTypeError(f"expected a number from {least:g} to {most:g}, got {value}")
        return value

    parse.__name__ = "number"
    return parse


def relations(text: str) -> str:
    unknown = [r for r in text.split(",") if r not in RELATIONS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown relation(s) {', '.join(unknown)}: use {','.join(RELATIONS)}")
    return text


#: The output formats (``retrieval.interfaces.output.export.FORMATS``, which a test keeps equal), named here so
#: that parsing a search does not import the exporters.
OUTPUT_FORMATS = ("json", "jsonl", "csv", "bibtex", "ris")


def add_output_args(p, why: bool = True) -> None:
    """``--format``, ``--json`` (its shorthand) and, with ``why``, ``--why`` and ``-v``/``--verbose``: the output
    options of every command that prints ranked papers (``args.format`` is None for the table). ``p``: a parser,
    or one of its argument groups."""
    p.add_argument(
        "--format",
        choices=OUTPUT_FORMATS,
        help="print json, jsonl (one object per result), csv, bibtex or ris (default: a table that fits the terminal)",
    )
    p.add_argument("--json", dest="format", action="store_const", const="json", help="the same as --format json")
    if why:
        p.add_argument("--why", action="store_true", help="a second line per result: the terms of its score")
        p.add_argument(
            "-v",
            "--verbose",
            action="store_true",
            help="the ranking's internals too: a score column, the formula, the graph's expansion, the candidates",
        )


class AtMost(argparse.Action):
    """``action="append"`` that takes at most ``most`` values: one more is a usage error, as a value's own check
    is (the library's bound on them would be a runtime error, exit 1)."""

    def __init__(self, *args, most: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.most = most

    def __call__(self, parser, namespace, value, option_string=None) -> None:
        values = list(getattr(namespace, self.dest, None) or [])
        if len(values) >= self.most:
            parser.error(f"{option_string} is given more than {self.most} times (at most {self.most}): give fewer")
        setattr(namespace, self.dest, [*values, value])
