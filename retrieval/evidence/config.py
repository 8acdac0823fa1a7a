"""The evidence pipeline's settings, with their defaults, and the age of a paper.

Defaults (each explained where it is used):

- sub-queries: a query of at least ``split_min_tokens`` = 40 tokens (a title and abstract) is also split into
  sentence sub-queries (``split="sentences"``, at most ``split_max`` = 8; ``retrieval.search.split``), each
  adding its top ``split_seeds`` = 3 papers as seeds; ``split="none"`` turns this off;
- seeds: ``seeds_per_subquery`` m = 15 papers per sub-query (the query and given sub-queries), picked from a BM25
  list ``seed_pool`` = 30 deep by ``(1 - seed_recency_weight) * bm25 / max bm25 + seed_recency_weight *
  age^-beta`` with weight 0 (see below);
- graph: the 1.5-hop neighbourhood of the seeds, capped at ``max_nodes`` = 2000 papers, trimmed (``cap_policy``
  ``"trim"``) or refused (``"refuse"``);
- support: ``max_claims`` = 3 sentences per paper; ``coverage="soft"``: Delta = ``support_floor + (1 -
  support_floor) * mean over the citing paper's claims of min(1, best support / theta)`` with ``theta`` = 0.1
  (TF-IDF cosine) and floor 0.05, so an edge between unrelated claims has Delta 0.05, not 0 (``"hard"``, the
  earlier rule: the share of claims whose best support reaches theta); an edge is pruned when Delta is below
  ``tau`` = 0.1, that is when the citing paper's claims average less than 1/19 of theta's support;
- weights: ``w(u -> v) = Delta(u, v)^support_power * age(v)^-beta`` with ``support_power`` = 0 and ``beta`` = 0
  (every kept edge weighs 1: see below), ``age = reference year - year + 1`` (at least 1);
- ranking: the seeds' vote (``ranker="vote"``, ``retrieval.evidence.rank.seed_vote``: a paper scores the
  teleport mass of each seed that cites it, ``vote_citing`` = 0.3 of that of each seed it cites, and a seed
  ``vote_self`` = 1 of its own), or personalised PageRank (``"ppr"``) or SALSA (``"salsa"``) with teleport
  ``alpha`` = 0.15 to the seeds, each seed weighted by its blend score (``teleport="blend"``; ``"uniform"``: by
  the number of sub-queries that picked it), power iteration until the L1 change is below ``tolerance`` = 1e-10.

``EvidenceConfig.crase()`` gives the walk of the Crase paper as it was first shipped here: PPR, 10 seeds, no
automatic sub-queries, weights ``Delta * age^-beta`` with beta 0.5, and tau 0.3 (with ``coverage="hard"`` as
well, exactly the earlier defaults).

How the defaults were chosen (on the first 100 hepth and 150-200 ml-arxiv dev queries and CACM's 26; checked on
all 500 + 500 + 26 in docs/eval, whose figures are quoted here): the vote beats PPR by 0.2 nDCG@10 on hepth
(0.568 against 0.370) and 0.12 on ml-arxiv (0.456 against 0.334), because PageRank splits a seed's mass over
its references (a hub penalty) and keeps most of the mass on the seeds themselves; weighting the vote's edges by
Delta (power 0.25, 0.5, 1) or by age (beta 0.5) lost nDCG@10 on hepth and ml-arxiv (Delta^1: -0.015 and -0.037,
CACM +0.036), so both ship at 0; sentence sub-queries add 0.017 (hepth) and 0.003 (ml-arxiv); 15 seeds beat 10
and 20; ``vote_self`` 1 beats 2 and 3 on hepth and ml-arxiv (CACM prefers 2-3). Pruning at tau 0.1 removes 3-8%
of the edges, every one of which weighs 1 unpruned, and costs 0.002 nDCG@10 on hepth and ml-arxiv (CACM
+0.003); higher tau costs more (0.2: -0.013 on 100 hepth queries). The seed recency weight was checked on
all three dev sets earlier: every weight tried (0.05, 0.1, 0.2) lost nDCG@10 against 0 on ml-arxiv and CACM and
was level on hepth, so it ships at 0.
"""

from __future__ import annotations

import datetime
from dataclasses import asdict, dataclass

from ..errors import ConfigError
from ..validate import LIMITS, YEAR_RANGE, check_choice, check_int, check_number

RANKERS = ("vote", "ppr", "salsa")
RECENCY = ("corpus", "query-year")
CAP_POLICIES = ("trim", "refuse")
TELEPORTS = ("blend", "uniform")
COVERAGES = ("soft", "hard")
SPLITS = ("sentences", "none")
#: The age discount exponent's range (``beta``).
BETA_RANGE = (0.0, 10.0)


@dataclass(frozen=True)
class EvidenceConfig:
    """How an evidence run picks seeds, builds and prunes its graph, and ranks it (see the module docstring)."""

    seeds_per_subquery: int = 15
    seed_pool: int = 30
    seed_recency_weight: float = 0.0
    max_nodes: int | None = 2000
    cap_policy: str = "trim"
    max_claims: int = 3
    theta: float = 0.1
    tau: float = 0.1
    prune: bool = True
    coverage: str = "soft"
    support_floor: float = 0.05
    split: str = "sentences"
    split_min_tokens: int = 40
    split_max: int = 8
    split_seeds: int = 3
    support_power: float = 0.0
    beta: float = 0.0
    recency: str = "corpus"
    query_year: int | None = None
    ranker: str = "vote"
    vote_citing: float = 0.3
    vote_self: float = 1.0
    alpha: float = 0.15
    teleport: str = "blend"
    tolerance: float = 1e-10
    max_iterations: int = 1000
    top_k: int = 10
    off_topic_ratio: float = 0.1

    def __post_init__(self) -> None:
        for name in ("seeds_per_subquery", "seed_pool", "max_claims", "max_iterations", "top_k"):
            check_int(name, getattr(self, name), 1, LIMITS[name])
        check_int("split_min_tokens", self.split_min_tokens, 1, LIMITS["query_terms"])
        check_int("split_max", self.split_max, 1, 50)
        check_int("split_seeds", self.split_seeds, 1, LIMITS["seeds_per_subquery"])
        if self.max_nodes is not None:
            check_int("max_nodes", self.max_nodes, 1, LIMITS["max_nodes"])
        if self.query_year is not None:
            check_int("query_year", self.query_year, *YEAR_RANGE)  # the years a record may have, as --query-year
        for name, lo, hi in (
            ("seed_recency_weight", 0.0, 1.0),
            ("theta", 0.0, 1.0),
            ("tau", 0.0, 1.0),
            ("off_topic_ratio", 0.0, 1.0),
            ("support_floor", 0.0, 1.0),
            ("vote_citing", 0.0, 1.0),
            ("vote_self", 0.0, 10.0),
        ):
            check_number(name, getattr(self, name), lo, hi)
        check_number("beta", self.beta, *BETA_RANGE)
        check_number("support_power", self.support_power, 0.0, 10.0)
        check_number("alpha", self.alpha, 0.0, 1.0)
        if not 0.0 < self.alpha < 1.0:
            raise ConfigError(f"alpha (the teleport probability) must lie strictly between 0 and 1, got {self.alpha}")
        check_number("tolerance", self.tolerance, 0.0, None)
        if self.tolerance <= 0.0:
            raise ConfigError(f"tolerance must be positive, got {self.tolerance}")
        check_choice("ranker", self.ranker, RANKERS)
        check_choice("recency", self.recency, RECENCY)
        check_choice("cap_policy", self.cap_policy, CAP_POLICIES)
        check_choice("teleport", self.teleport, TELEPORTS)
        check_choice("coverage", self.coverage, COVERAGES)
        check_choice("split", self.split, SPLITS)
        if not isinstance(self.prune, bool):
            raise ConfigError(f"prune must be True or False, got {self.prune!r}")

    @classmethod
    def crase(cls, **changes) -> EvidenceConfig:
        """The Crase walk as first shipped: PPR, 10 seeds, no split, ``w = Delta * age^-0.5``, hard coverage at
        theta 0.1 and tau 0.3 (the earlier defaults); ``changes`` override any field."""
        base = {
            "ranker": "ppr",
            "seeds_per_subquery": 10,
            "split": "none",
            "support_power": 1.0,
            "beta": 0.5,
            "coverage": "hard",
            "support_floor": 0.0,
            "tau": 0.3,
        }
        return cls(**{**base, **changes})

    def reference_year(self, corpus_latest: int | None) -> int | None:
        """The year ages are counted from: the corpus's latest year (``recency="corpus"``), or the query's year
        (``recency="query-year"``: ``query_year``, else the current calendar year, when the query is asked)."""
        if self.recency == "corpus":
            return corpus_latest
        return self.query_year if self.query_year is not None else datetime.date.today().year

    def to_dict(self) -> dict:
        return asdict(self)


def age(year: int | None, reference_year: int | None, earliest_year: int | None) -> int:
    """A paper's age in years, counting its own year as 1: ``max(1, reference_year - year + 1)``.

    A paper of the reference year has age 1 (so ``age^-beta`` = 1); a paper newer than the reference year (possible
    with ``recency="query-year"``) also has age 1 rather than a fraction. A paper without a year is treated as the
    corpus's earliest year (the oldest, so the most discounted: no year is no evidence of recency); with no
    reference year at all (a corpus without years) every age is 1.
    """
    if reference_year is None:
        return 1
    if year is None:
        year = earliest_year if earliest_year is not None else reference_year
    return max(1, reference_year - year + 1)
