"""Automatic sub-queries for long queries: one per sentence, the multi-query seeding without a language model.

A query of at least ``min_tokens`` tokens (default 40: a title and an abstract, not a search box's words) is split
with ``retrieval.text.sentences`` (on ``.``, ``!`` or ``?`` followed by white space). A sentence of fewer than
``min_part`` (5) tokens is joined to the next one (the last, to the one before), so a title such as "Dark
energy." or an abbreviation's full stop does not make a sub-query of its own. The parts keep their order; at most
``max_parts`` are returned: when there are more, the longest (by tokens; ties by position) are kept, in their
order. A query shorter than ``min_tokens``, or one that is a single sentence, gives no sub-query: it is its own
only sub-query already.

Each part becomes a sub-query after the query itself (``collect_subqueries`` drops repeats), and its BM25 list
seeds the graph like any other sub-query's, with ``split_seeds`` (3) seeds each (see ``seeds``): a sentence is
a narrower query than the abstract, so its top few papers are the ones that add a topic the whole query misses.
"""

from __future__ import annotations

from ..text import sentences, tokenise

#: The fewest tokens a part keeps on its own.
MIN_PART = 5
#: The fewest tokens a query has to be split.
MIN_TOKENS = 40


def split_query(text: str, min_tokens: int = MIN_TOKENS, max_parts: int = 8, min_part: int = MIN_PART) -> list[str]:
    """The sentence sub-queries of ``text`` (see the module docstring); ``[]`` for a short or one-sentence query."""
    if len(tokenise(text)) < min_tokens:
        return []
    parts: list[str] = []
    pending = ""
    for sentence in sentences(text):
        joined = f"{pending} {sentence}".strip() if pending else sentence
        if len(tokenise(joined)) < min_part:
            pending = joined
            continue
        parts.append(joined)
        pending = ""
    if pending:
        if parts:
            parts[-1] = f"{parts[-1]} {pending}"
        else:
            parts.append(pending)
    if len(parts) < 2:
        return []
    if len(parts) > max_parts:
        longest = sorted(range(len(parts)), key=lambda i: (-len(tokenise(parts[i])), i))[:max_parts]
        parts = [parts[i] for i in sorted(longest)]
    return parts
