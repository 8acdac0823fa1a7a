"""Evidence-graph ranking (the Crase method): seeds from sub-queries, their 1.5-hop citation graph built in SQL,
edge support scoring and pruning, recency-aware personalised PageRank or SALSA, and an audit trail.

``explain(client, query, ...)`` runs it and returns an ``EvidenceRun`` that says, for every returned paper, which
seeds and edges brought it in, with their Delta and weights, and why every pruned edge was pruned.

The names below are loaded on first use, so that registering ``retrieval explain`` on the command line does not
import NumPy for every other command.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "EvidenceConfig": "config",
    "to_dot": "export",
    "to_graphml": "export",
    "write_dot": "export",
    "write_graphml": "export",
    "explain": "pipeline",
    "explain_index": "pipeline",
    "Planner": "plan",
    "collect_subqueries": "plan",
    "read_plan": "plan",
    "personalised_pagerank": "rank",
    "personalised_salsa": "rank",
    "EdgeRecord": "records",
    "EvidenceRun": "records",
    "Health": "records",
    "NodeRecord": "records",
    "PaperExplanation": "records",
    "save_run": "save",
    "SupportScorer": "support",
    "TfidfCosineScorer": "support",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
