"""Value types for the command-line options, shared by every subcommand (argparse turns their errors into a
usage message and exit code 2). On the search floor: the query type parses a ``Query``."""

from __future__ import annotations

import argparse

from .config import RELATIONS
from .validate import LIMITS


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


def positive_int(text: str) -> int:
    return _whole_number(text, 1, "a number of at least 1")


def bounded(name: str, least: int = 1):
    """A whole number from ``least`` to ``LIMITS[name]`` (the documented bound of that setting)."""

    def parse(text: str) -> int:
        expected = "0 or more" if least == 0 else f"a number of at least {least}"
        return _whole_number(text, least, expected, LIMITS[name])

    parse.__name__ = name  # argparse names the type in its messages
    return parse


def hops(text: str) -> int:
    value = _number(text, int, "0, 1 or 2")
    if not 0 <= value <= 2:
        raise argparse.ArgumentTypeError(f"hops are 0, 1 or 2, got {value}")
    return value


def year(text: str) -> int:
    value = _number(text, int, "a year")
    if not 1000 <= value <= 2100:
        raise argparse.ArgumentTypeError(f"expected a year from 1000 to 2100, got {value}")
    return value


def query(text: str):
    """The query, parsed once (``retrieval.search.query.Query``): a too long or too wide one is a usage error
    (an empty one is a query that matches nothing)."""
    from .errors import ConfigError
    from .search.query import Query

    try:
        return Query.parse(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def unit(text: str) -> float:
    value = _number(text, float, "a number between 0 and 1")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {value}")
    return value


def non_negative(text: str) -> float:
    value = _number(text, float, "a number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of at least 0, got {value}")
    return value


def relations(text: str) -> str:
    unknown = [r for r in text.split(",") if r not in RELATIONS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown relation(s) {', '.join(unknown)}: use {','.join(RELATIONS)}")
    return text
