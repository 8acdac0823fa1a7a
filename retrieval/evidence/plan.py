"""Sub-queries: the query itself, then any given on the command line, in a plan file, or by a planner.

A plan file is either JSON or plain text:

- JSON: a list of strings, ``["dark energy equation of state", "supernova distances"]``, or an object with a
  ``"subqueries"`` list, ``{"subqueries": [...]}`` (other keys are ignored, so a planner's output can carry notes);
- text: one sub-query per line; blank lines and lines starting with ``#`` are ignored.

The file is read as JSON when its first non-blank character is ``[`` or ``{``, as text otherwise.

A planner is any ``Callable[[str], list[str]]`` (a language model behind a function, say): it is called once
with the query and its sub-queries are added after the others. Nothing requires one.

The list always starts with the query itself (sub-query 0), so a run without any sub-query is the plain query.
Sub-queries with no token, and repeats (same tokens in the same order), are dropped: they would bring the same
seeds twice.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import InputError
from ..text import tokenise

Planner = Callable[[str], list[str]]

PLAN_FORMAT = 'a JSON list of strings, {"subqueries": [strings]}, or plain text with one sub-query per line'


def read_plan(path: str | os.PathLike[str]) -> list[str]:
    """The sub-queries of a plan file (see the module docstring for the two formats)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"no plan file at {path}: give a file of sub-queries ({PLAN_FORMAT})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the plan file {path} ({exc}): give a UTF-8 text file") from None
    stripped = text.lstrip()
    if stripped[:1] in ("[", "{"):
        return _from_json(path, stripped)
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _from_json(path: Path, text: str) -> list[str]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg}); a plan file is {PLAN_FORMAT}") from None
    except (ValueError, RecursionError) as exc:  # a number of 4,300+ digits; nesting deeper than Python reads
        said = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InputError(f"{path}: cannot read it as JSON ({said}); a plan file is {PLAN_FORMAT}") from None
    items = data.get("subqueries") if isinstance(data, dict) else data
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise InputError(f"{path}: expected {PLAN_FORMAT}")
    return [item.strip() for item in items if item.strip()]


def collect_subqueries(
    query: str,
    subqueries: Iterable[str] | None = None,
    plan: str | os.PathLike[str] | None = None,
    planner: Planner | None = None,
) -> list[str]:
    """The query followed by its sub-queries (given, from ``plan``, from ``planner``), without repeats."""
    candidates = [query, *(subqueries or [])]
    if plan is not None:
        candidates.extend(read_plan(plan))
    if planner is not None:
        proposed = planner(query)
        if not isinstance(proposed, list) or not all(isinstance(item, str) for item in proposed):
            raise InputError(f"the planner must return a list of strings, got {type(proposed).__name__}")
        candidates.extend(proposed)
    out: list[str] = [query]
    seen = {tuple(tokenise(query))}
    for text in candidates[1:]:
        key = tuple(tokenise(text))
        if key and key not in seen:
            seen.add(key)
            out.append(text.strip())
    return out
