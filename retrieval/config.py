"""Settings: the index location (the one place that reads the environment) and the search configuration."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError

DB_ENV_VAR = "RETRIEVAL_DB"
DEFAULT_DB = "retrieval.db"

#: The most hops the citation walk takes; larger requests are clamped to it.
MAX_HOPS = 2
#: graph_score by hop distance: a seed, a neighbour of a seed, a neighbour of a neighbour.
GRAPH_SCORES = {0: 1.0, 1: 0.6, 2: 0.3}


def resolve_db_path(db: str | os.PathLike[str] | None = None) -> Path:
    """The index file to use: ``db`` if given, else ``$RETRIEVAL_DB``, else ``./retrieval.db``."""
    if db is not None and str(db) != "":
        return Path(db)
    from_env = os.environ.get(DB_ENV_VAR)
    if from_env:
        return Path(from_env)
    return Path(DEFAULT_DB)


@dataclass(frozen=True)
class RetrievalConfig:
    """How a search is run and its results blended.

    ``final_score = w_bm25 * bm25_norm + w_graph * graph_score + w_recency * recency_score``, where bm25_norm
    is the paper's BM25 score over the best lexical score, graph_score is 1.0 / 0.6 / 0.3 at 0 / 1 / 2 hops,
    and recency_score ramps linearly over the corpus's years. ``max_hops`` above 2 is clamped to 2.
    """

    top_k_lexical: int = 10
    max_hops: int = 2
    w_bm25: float = 0.5
    w_graph: float = 0.3
    w_recency: float = 0.2

    def __post_init__(self) -> None:
        if isinstance(self.top_k_lexical, bool) or not isinstance(self.top_k_lexical, int):
            raise ConfigError(f"top_k_lexical must be an integer, got {self.top_k_lexical!r}")
        if self.top_k_lexical < 1:
            raise ConfigError(f"top_k_lexical must be at least 1, got {self.top_k_lexical}")
        if isinstance(self.max_hops, bool) or not isinstance(self.max_hops, int):
            raise ConfigError(f"max_hops must be an integer, got {self.max_hops!r}")
        if self.max_hops < 0:
            raise ConfigError(f"max_hops must be 0, 1 or 2 (larger values are clamped to 2), got {self.max_hops}")
        if self.max_hops > MAX_HOPS:
            object.__setattr__(self, "max_hops", MAX_HOPS)
        for name in ("w_bm25", "w_graph", "w_recency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
                raise ConfigError(f"{name} must be a non-negative number, got {value!r}")
