"""Checks of settings, shared by every configuration: each raises ``ConfigError`` naming the setting, the value
it got and what it takes."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from .errors import ConfigError

#: The upper bounds of the settings that decide how much work one query does: each option and each
#: configuration refuses more, so that no request runs for minutes or takes gigabytes (README, "Limits").
LIMITS = {
    "query_chars": 100_000,  # characters of a query
    "query_terms": 2_000,  # distinct terms of a query (a long draft has a few hundred)
    "limit": 1_000,  # results returned by one search
    "offset": 9_000,  # results skipped before them (a page of the first 10,000)
    "similar_seeds": 100,  # papers given to `similar` as one reading list
    "exclude": 10_000,  # papers `similar` leaves out (those already read)
    "authors": 20,  # names of one author filter (a paper by all of them)
    "author_chars": 300,  # characters of one of them
    "top_k_lexical": 200,  # BM25 seeds
    "lexical_depth": 1_000,  # BM25 list ranked by the expansion ranking
    "gate_min_survivors": 1_000,
    "max_neighbours": 200,  # per paper and relation
    "max_candidates": 10_000,  # papers the graph may add
    "fanout": 1_000,  # intermediate papers of co-citation and coupling
    "workers": 32,  # tokenising processes of a build
    "jobs": 32,  # worker processes of an evaluation
    "top_k": 1_000,  # papers an evidence run returns
    "seeds_per_subquery": 100,
    "seed_pool": 1_000,
    "max_claims": 20,
    "subqueries": 10,  # sub-queries of one evidence run (each seeds the graph: its memory grows with them)
    "max_iterations": 100_000,
    "max_nodes": 100_000,  # papers of an evidence graph
}


def check_int(name: str, value: object, minimum: int, maximum: int | None = None, *, allow_none: bool = False) -> None:
    """``value`` is a whole number (not a bool) in ``[minimum, maximum]``, or None when ``allow_none``."""
    if value is None and allow_none:
        return
    extra = " or None" if allow_none else ""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number{extra}, got {shown_value(value)}")
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"between {minimum:,} and {maximum:,}" if maximum is not None else f"at least {minimum:,}"
        raise ConfigError(f"{name} must be {bounds}{extra}, got {shown_value(value)}")


def check_number(name: str, value: object, minimum: float = 0.0, maximum: float | None = None) -> None:
    """``value`` is a finite real number (not a bool, NaN or infinite) in ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {shown_value(value)}")
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"between {minimum:g} and {maximum:g}" if maximum is not None else f"at least {minimum:g}"
        raise ConfigError(f"{name} must be {bounds}, got {value}")


def check_choice(name: str, value: object, choices: Iterable[str]) -> None:
    """``value`` is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {shown_value(value)}")


#: Years a filter may name (the same bounds as the records' years).
YEAR_RANGE = (1000, 2100)


def shown_value(value: object) -> str:
    """A value a user gave, as a message shows it: a string quoted and cut (``quoted``), else its repr."""
    return quoted(value) if isinstance(value, str) else repr(value)[:60]


def quoted(text: str, most: int = 60) -> str:
    """``text`` quoted for a message, cut to ``most`` characters: an id or a word a user gave may be of any length,
    and a message that echoes it whole is as long."""
    if len(text) <= most:
        return repr(text)
    return f"{text[:most]!r}... ({len(text):,} characters)"


def quoted_list(texts: list[str], most: int = 5) -> str:
    """The first ``most`` of ``texts``, each ``quoted``, joined by commas, and how many more there are."""
    shown = ", ".join(quoted(text) for text in texts[:most])  # a pasted run of characters is one word: cut
    return shown + (f" and {len(texts) - most} more" if len(texts) > most else "")


_YEARS = re.compile(r"^\s*(\d{4})?\s*(-)?\s*(\d{4})?\s*$")


def parse_years(text: str | None, name: str = "--year") -> tuple[int | None, int | None] | None:
    """``"1998-2001"``, ``"1998-"``, ``"-2001"`` or ``"1998"`` as ``(first, last)`` (None for an open end);
    ``name``, where the text came from, as messages name it (``year:`` in a query's text)."""
    if text is None or not str(text).strip():
        return None
    found = _YEARS.match(str(text))
    if not found or not (found.group(1) or found.group(3)):
        raise ConfigError(f"{name} {quoted(str(text))} is not a year range: give 1998, 1998-2001, 1998- or -2001")
    first, dash, last = found.groups()
    lo = int(first) if first else None
    hi = int(last) if last else (lo if not dash else None)
    for year in (lo, hi):
        if year is not None and not YEAR_RANGE[0] <= year <= YEAR_RANGE[1]:
            raise ConfigError(f"{name} {quoted(str(text))}: years run from {YEAR_RANGE[0]} to {YEAR_RANGE[1]}")
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"{name} {quoted(str(text))} ends before it starts: give the earlier year first")
    return lo, hi


def year_range(value: object, name: str = "--year") -> tuple[int | None, int | None] | None:
    """A year filter as a program may give it: a range's text (``parse_years``), one year (``1998``), or
    ``(first, last)`` with None for an open end; checked as the text is (years in ``YEAR_RANGE``, the earlier
    first). ``ConfigError`` for anything else."""
    if value is None or isinstance(value, str):
        return parse_years(value, name)
    if isinstance(value, int) and not isinstance(value, bool):
        return parse_years(str(value), name)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        lo, hi = value
        if all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in (lo, hi)):
            for year in (lo, hi):
                if year is not None and not YEAR_RANGE[0] <= year <= YEAR_RANGE[1]:
                    raise ConfigError(f"year {shown_value(value)}: years run from {YEAR_RANGE[0]} to {YEAR_RANGE[1]}")
            if lo is not None and hi is not None and lo > hi:
                raise ConfigError(f"year {shown_value(value)} ends before it starts: give the earlier year first")
            return None if lo is None and hi is None else (lo, hi)
    raise ConfigError(
        f"year must be a range such as '1998-2001', a year (1998) or (first, last) with None for an open end; "
        f"got {shown_value(value)}"
    )


def paper_id_of(value: object, name: str) -> str:
    """One paper id a program gives: a string; ``ConfigError`` naming ``name`` otherwise (a list, None)."""
    if not isinstance(value, str):
        raise ConfigError(f"{name}: a paper id is a string, got {type(value).__name__} {repr(value)[:40]}")
    return value


def text_list(value: object, name: str, what: str = "a text", each: str = "each is a string") -> list[str]:
    """Texts a program gives: one as a string (not its characters), or an iterable of strings; ``ConfigError``
    naming ``name`` otherwise, in the words ``what`` (the one thing) and ``each`` (what each must be)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, (bytes, bytearray)) or not hasattr(value, "__iter__"):
        raise ConfigError(f"{name}: give {what} or a list of them, got {type(value).__name__}")
    texts = list(value)
    for text in texts:
        if not isinstance(text, str):
            raise ConfigError(f"{name}: {each}, got {type(text).__name__} {repr(text)[:40]}")
    return texts


def paper_id_list(value: object, name: str) -> list[str]:
    """Paper ids a program gives: one id as a string (not its characters), or an iterable of strings."""
    return text_list(value, name, "a paper id (a string)", "a paper id is a string")
