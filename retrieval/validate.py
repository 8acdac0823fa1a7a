"""Checks of settings, shared by every configuration: each raises ``ConfigError`` naming the setting, the value
it got and what it takes."""

from __future__ import annotations

from collections.abc import Iterable

from .errors import ConfigError

#: The upper bounds of the settings that decide how much work one query does: each option and each
#: configuration refuses more, so that no request runs for minutes or takes gigabytes (README, "Limits").
LIMITS = {
    "query_chars": 100_000,  # characters of a query
    "query_terms": 2_000,  # distinct terms of a query (a long draft has a few hundred)
    "limit": 1_000,  # results returned by one search
    "top_k_lexical": 200,  # BM25 seeds
    "lexical_depth": 1_000,  # BM25 list ranked by the expansion ranking
    "gate_min_survivors": 1_000,
    "max_neighbours": 200,  # per paper and relation
    "max_candidates": 10_000,  # papers the graph may add
    "fanout": 1_000,  # intermediate papers of co-citation and coupling
    "workers": 32,  # tokenising processes of a build
    "top_k": 1_000,  # papers an evidence run returns
    "seeds_per_subquery": 100,
    "seed_pool": 1_000,
    "max_claims": 20,
    "max_iterations": 100_000,
    "max_nodes": 100_000,  # papers of an evidence graph
}


def check_int(name: str, value: object, minimum: int, maximum: int | None = None, *, allow_none: bool = False) -> None:
    """``value`` is a whole number (not a bool) in ``[minimum, maximum]``, or None when ``allow_none``."""
    if value is None and allow_none:
        return
    extra = " or None" if allow_none else ""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number{extra}, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"between {minimum:,} and {maximum:,}" if maximum is not None else f"at least {minimum:,}"
        raise ConfigError(f"{name} must be {bounds}{extra}, got {value!r}")


def check_number(name: str, value: object, minimum: float = 0.0, maximum: float | None = None) -> None:
    """``value`` is a real number (not a bool, not NaN) in ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"between {minimum:g} and {maximum:g}" if maximum is not None else f"at least {minimum:g}"
        raise ConfigError(f"{name} must be {bounds}, got {value}")


def check_choice(name: str, value: object, choices: Iterable[str]) -> None:
    """``value`` is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
