"""The evaluation's own errors; each is a ``RetrievalError``, so the CLI prints it and exits 1.

A malformed line of a query file raises the package's ``InputError`` (``file:line: reason``) instead.
"""

from __future__ import annotations

from ..errors import RetrievalError


class EvalError(RetrievalError):
    """An evaluation cannot run as asked (missing file, unknown mode, nothing left to evaluate, ...)."""


class QueryFileError(EvalError):
    """The query file is missing, empty, or holds no query that can be evaluated."""


class ProtocolError(EvalError):
    """The query file does not fit the corpus or the requested protocol."""
