"""Checks of settings, shared by every configuration: each raises ``ConfigError`` naming the setting, the value
it got and what it takes."""

from __future__ import annotations

from collections.abc import Iterable

from .errors import ConfigError


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
