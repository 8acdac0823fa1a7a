"""``retrieval eval``: recall and MAP of every retrieval mode on a corpus and a query file, side by side.

``run_eval(corpus, queries, out)`` applies the protocol (``protocol``), builds or reuses the evaluation index
(``cache``), runs each mode of the registry (``modes.MODES``, the evidence modes among them) on every query, and
writes the report (``report``, ``trec``, ``plot``). The metrics are described in ``metrics``, the Graph-RAG
tables in ``graphrag``. ir-measures (with pytrec_eval) and matplotlib are imported only when a run needs them
(the ``eval`` extra). Names are imported on first use (``retrieval._lazy``).
"""

from __future__ import annotations

from .._lazy import lazy_exports

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (a query process starts faster)
if TYPE_CHECKING:
    from .metrics import CUTOFFS
    from .modes import MODES, BlendMode, LexicalMode, Mode
    from .records import ModeOutput
    from .report import EvalReport
    from .runner import run_eval

_EXPORTS = {
    "BlendMode": ".modes",
    "CUTOFFS": ".metrics",
    "EvalReport": ".report",
    "LexicalMode": ".modes",
    "MODES": ".modes",
    "Mode": ".modes",
    "ModeOutput": ".records",
    "run_eval": ".runner",
}


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


__all__ = [
    "BlendMode",
    "CUTOFFS",
    "EvalReport",
    "LexicalMode",
    "MODES",
    "Mode",
    "ModeOutput",
    "run_eval",
]
