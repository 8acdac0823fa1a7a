"""Value types for the command-line options, shared by every subcommand (argparse turns their errors into a
usage message and exit code 2)."""

from __future__ import annotations

import argparse

from .config import RELATIONS


def _number(text: str, kind: type, expected: str):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def _whole_number(text: str, least: int, expected: str) -> int:
    value = _number(text, int, "a whole number")
    if value < least:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {value}")
    return value


def positive_int(text: str) -> int:
    return _whole_number(text, 1, "a number of at least 1")


def non_negative_int(text: str) -> int:
    return _whole_number(text, 0, "0 or more")


def hops(text: str) -> int:
    value = _number(text, int, "0, 1 or 2")
    if value < 0:
        raise argparse.ArgumentTypeError(f"hops cannot be negative (got {value}); use 0, 1 or 2")
    return value


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
