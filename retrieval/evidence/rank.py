"""Stage 4, ranking: edge weights, then personalised PageRank or personalised SALSA over the kept graph.

**Weights.** ``w(u -> v) = Delta(u, v) * age(v)^-beta`` (beta = 0.5; ``age`` in ``retrieval.evidence.config``):
a walker leaving u follows an edge in proportion to how well the cited paper supports u, discounted by the cited
paper's age.

**Personalisation.** The teleport vector p is the caller's mass per paper, normalised to sum to 1. The pipeline
puts it on the seeds only, each seed in proportion to its blend score summed over the sub-queries that picked it
(``teleport="blend"``, the default), or to the number of those sub-queries (``"uniform"``); a seed given by hand
has mass 1.

**Personalised PageRank** (``ranker="ppr"``). With probability ``1 - alpha`` the walker follows an out-edge of its
node in proportion to w, with probability ``alpha`` = 0.15 it jumps to a seed drawn from p:
``x' = (1 - alpha) * (x W + d(x) p) + alpha p``, where W is w normalised by each node's out-weight and d(x) is the
mass on *dangling* nodes (out-weight 0: no kept out-edge, or only edges of weight 0), which is sent along p as
well. This is ``networkx.pagerank(G, alpha=1 - alpha, personalization=p, weight="weight")``.

**Personalised SALSA** (``ranker="salsa"``). SALSA's authority chain takes two steps at a time: from an authority
a back along one of its in-edges to a hub h (in proportion to ``w(h -> a)`` over a's in-weight), then forward along
one of h's out-edges to an authority a' (in proportion to ``w(h -> a')`` over h's out-weight). The same teleport
as above makes it personal (and well defined on a graph of several components): ``x' = (1 - alpha) * (x B F +
d(x) p) + alpha p``, where d(x) is now the mass on papers without in-weight (nobody in the graph cites them). The
score is the authority: a paper is ranked high when it is co-cited, by papers that cite the seeds' neighbourhood,
with papers near the seeds. It is PageRank on the chain ``T = B F``, which the tests build explicitly.

**Iteration.** Power iteration from p until the L1 change between two iterates is below ``tolerance`` (1e-10),
at most ``max_iterations`` (1000) times; both maps contract by ``1 - alpha`` each step, so about
``ln(tolerance) / ln(1 - alpha)`` (140) iterations suffice. Scores sum to 1. Papers are indexed in id order, so
the arithmetic, and the ranking (score descending, ties by id), are deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..bm25 import SCORE_DECIMALS
from ..errors import ConfigError


@dataclass(frozen=True)
class WalkResult:
    """Stationary scores of a walk (summing to 1) and the iterations it took."""

    scores: dict[str, float]
    iterations: int

    def ranking(self, top_k: int | None = None) -> list[tuple[str, float]]:
        """Papers with a positive score, best first, ties by id; the first ``top_k`` when given. Scores are compared
        rounded to ``SCORE_DECIMALS`` places (the walks' tolerance): two papers whose evidence is equal but summed
        in another order tie, and the id decides, not the sum's last bit."""
        ranked = sorted(
            ((pid, s) for pid, s in self.scores.items() if s > 0.0),
            key=lambda item: (-round(item[1], SCORE_DECIMALS), item[0]),
        )
        return ranked if top_k is None else ranked[:top_k]


class _Arrays:
    """The graph as index arrays: papers in id order, and each edge's source, target and weight."""

    def __init__(self, nodes: Sequence[str], edges: Sequence[tuple[str, str, float]], teleport: Mapping[str, float]):
        self.ids = sorted(set(nodes))
        position = {pid: i for i, pid in enumerate(self.ids)}
        missing = sorted({end for u, v, _ in edges for end in (u, v)} - position.keys())
        if missing:
            raise ConfigError(f"edges name papers that are not nodes of the graph: {', '.join(missing[:5])}")
        self.n = len(self.ids)
        self.src = np.array([position[u] for u, _, _ in edges], dtype=np.int64)
        self.dst = np.array([position[v] for _, v, _ in edges], dtype=np.int64)
        self.w = np.array([w for _, _, w in edges], dtype=np.float64)
        if self.w.size and (self.w.min() < 0 or not np.isfinite(self.w).all()):
            raise ConfigError("edge weights must be finite and non-negative")
        p = np.zeros(self.n)
        for pid, mass in teleport.items():
            if pid in position and mass > 0:
                p[position[pid]] += mass
        total = p.sum()
        if total <= 0:
            raise ConfigError("the teleport vector has no mass on a node of the graph: give at least one seed")
        self.p = p / total

    def totals(self, index: np.ndarray) -> np.ndarray:
        return np.bincount(index, weights=self.w, minlength=self.n)


def _iterate(arrays: _Arrays, step, dangling: np.ndarray, alpha: float, tolerance: float, max_iterations: int):
    x = arrays.p.copy()
    for iteration in range(1, max_iterations + 1):
        nxt = (1.0 - alpha) * (step(x) + x[dangling].sum() * arrays.p) + alpha * arrays.p
        change = float(np.abs(nxt - x).sum())
        x = nxt
        if change < tolerance:
            return WalkResult(dict(zip(arrays.ids, x.tolist(), strict=True)), iteration)
    raise ConfigError(
        f"the walk did not converge to {tolerance:g} in {max_iterations} iterations: "
        "raise max_iterations or the tolerance"
    )


def personalised_pagerank(
    nodes: Sequence[str],
    edges: Sequence[tuple[str, str, float]],
    teleport: Mapping[str, float],
    alpha: float = 0.15,
    tolerance: float = 1e-10,
    max_iterations: int = 1000,
) -> WalkResult:
    """Personalised PageRank of ``nodes`` over weighted ``edges`` (u, v, w), teleporting to ``teleport``."""
    g = _Arrays(nodes, edges, teleport)
    if g.n == 0:
        return WalkResult({}, 0)
    out = g.totals(g.src)
    dangling = out <= 0.0
    inverse_out = np.divide(1.0, out, out=np.zeros(g.n), where=~dangling)

    def step(x: np.ndarray) -> np.ndarray:
        return np.bincount(g.dst, weights=g.w * (x * inverse_out)[g.src], minlength=g.n)

    return _iterate(g, step, dangling, alpha, tolerance, max_iterations)


def personalised_salsa(
    nodes: Sequence[str],
    edges: Sequence[tuple[str, str, float]],
    teleport: Mapping[str, float],
    alpha: float = 0.15,
    tolerance: float = 1e-10,
    max_iterations: int = 1000,
) -> WalkResult:
    """Authority scores of personalised SALSA (the chain of the module docstring), teleporting to ``teleport``."""
    g = _Arrays(nodes, edges, teleport)
    if g.n == 0:
        return WalkResult({}, 0)
    in_weight, out_weight = g.totals(g.dst), g.totals(g.src)
    dangling = in_weight <= 0.0
    inverse_in = np.divide(1.0, in_weight, out=np.zeros(g.n), where=~dangling)
    # A hub is reached only along an edge of positive weight, so its out-weight is positive where it matters.
    inverse_out = np.divide(1.0, out_weight, out=np.zeros(g.n), where=out_weight > 0.0)

    def step(x: np.ndarray) -> np.ndarray:
        hubs = np.bincount(g.src, weights=g.w * (x * inverse_in)[g.dst], minlength=g.n)
        return np.bincount(g.dst, weights=g.w * (hubs * inverse_out)[g.src], minlength=g.n)

    return _iterate(g, step, dangling, alpha, tolerance, max_iterations)


def salsa_chain(nodes: Sequence[str], edges: Sequence[tuple[str, str, float]]) -> dict[tuple[str, str], float]:
    """The authority chain ``T[a, a'] = sum over hubs h of B[a, h] F[h, a']`` as a dict of positive entries,
    in plain Python: what ``personalised_salsa`` iterates, written out for the tests and for inspection."""
    in_weight: dict[str, float] = dict.fromkeys(nodes, 0.0)
    out_weight: dict[str, float] = dict.fromkeys(nodes, 0.0)
    cites: dict[str, list[tuple[str, float]]] = {}
    cited_by: dict[str, list[tuple[str, float]]] = {}
    for u, v, w in edges:
        out_weight[u] += w
        in_weight[v] += w
        cites.setdefault(u, []).append((v, w))
        cited_by.setdefault(v, []).append((u, w))
    chain: dict[tuple[str, str], float] = {}
    for a in nodes:
        if in_weight[a] <= 0:
            continue
        for h, w_back in cited_by.get(a, []):
            if w_back <= 0:
                continue
            for target, w_forward in cites[h]:
                if w_forward > 0:
                    key = (a, target)
                    chain[key] = chain.get(key, 0.0) + (w_back / in_weight[a]) * (w_forward / out_weight[h])
    return chain


def seed_vote(
    nodes: Sequence[str],
    edges: Sequence[tuple[str, str, float]],
    teleport: Mapping[str, float],
    citing_weight: float = 0.3,
    self_weight: float = 1.0,
) -> WalkResult:
    """The seeds' vote: one step of the personalised walk in both directions, without normalising by degree.

    With p the teleport vector (normalised to sum 1), every kept edge u -> v of weight w gives
    ``p(u) * w`` to v when u is a seed (a seed cites v: v is a candidate reference) and ``citing_weight *
    p(v) * w`` to u when v is a seed (u cites a seed: follow-up work, 0.3 by default), and every seed keeps
    ``self_weight * p(seed)`` (1) of its own. Scores are normalised to sum to 1; "iterations" is 1. Unlike
    PageRank, a seed with many references gives each of them its whole mass (no ``1 / out-degree`` split), so
    a paper cited by several strong seeds rises above a seed that nothing in the graph cites.
    """
    g = _Arrays(nodes, edges, teleport)
    if g.n == 0:
        return WalkResult({}, 0)
    x = self_weight * g.p
    x = x + np.bincount(g.dst, weights=g.w * g.p[g.src], minlength=g.n)
    x = x + citing_weight * np.bincount(g.src, weights=g.w * g.p[g.dst], minlength=g.n)
    total = float(x.sum())
    if total > 0:
        x = x / total
    return WalkResult(dict(zip(g.ids, x.tolist(), strict=True)), 1)


#: The walks by name (``EvidenceConfig.ranker`` takes one of ``config.RANKERS``, the same names; a test checks).
WALKS = {"vote": seed_vote, "ppr": personalised_pagerank, "salsa": personalised_salsa}
