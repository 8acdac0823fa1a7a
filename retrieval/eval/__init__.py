"""``retrieval eval``: recall and MAP of every retrieval mode on a corpus and a query file, side by side.

``run_eval(corpus, queries, out)`` applies the protocol (``protocol``), builds or reuses the evaluation index
(``cache``), runs each mode of the registry (``modes.MODES``) on every query, and writes the report
(``report``, ``trec``, ``plot``). The metrics are described in ``metrics``, the Graph-RAG tables in ``graphrag``.
ir-measures (with pytrec_eval) and matplotlib are imported only when a run needs them (the ``eval`` extra).
"""

from .errors import EvalError, ProtocolError, QueryFileError
from .metrics import CUTOFFS
from .modes import MODES, BlendMode, LexicalMode, Mode, ModeOutput
from .report import EvalReport
from .runner import run_eval

__all__ = [
    "CUTOFFS",
    "MODES",
    "BlendMode",
    "EvalError",
    "EvalReport",
    "LexicalMode",
    "Mode",
    "ModeOutput",
    "ProtocolError",
    "QueryFileError",
    "run_eval",
]
