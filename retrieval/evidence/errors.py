"""The evidence pipeline's errors: ``RetrievalError`` subclasses whose messages say what to do next."""

from __future__ import annotations

from ..errors import RetrievalError


class EvidenceError(RetrievalError):
    """Base class of the evidence pipeline's errors."""


class PlanFileError(EvidenceError):
    """A plan file (sub-queries) is missing or malformed; the message names the file and the fix."""


class GraphTooLargeError(EvidenceError):
    """The evidence graph exceeds the node cap and the cap policy is to refuse."""


class ScorerError(EvidenceError):
    """A support scorer broke its contract (wrong matrix shape, values outside [0, 1], or a call count that
    differs from the announced bound)."""


class AuditStoreError(EvidenceError):
    """A run cannot be saved in, or read from, the index file."""
