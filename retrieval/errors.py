"""One small exception hierarchy: every error the library raises on purpose is a ``RetrievalError``."""

from __future__ import annotations


class RetrievalError(Exception):
    """Base class of every error this package raises on purpose (the CLI exits 1 on these)."""


class ConfigError(RetrievalError, ValueError):
    """A setting is out of range or of the wrong type."""


class InputError(RetrievalError):
    """A corpus record is malformed; the message names ``file:line`` and the reason."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        super().__init__(f"{source}:{line}: {reason}")


class IndexNotFoundError(RetrievalError):
    """The index file does not exist."""


class NotAnIndexError(RetrievalError):
    """The file exists but is not a ``retrieval`` index (or not SQLite at all)."""


class SchemaVersionError(RetrievalError):
    """The index was written by another schema revision that this version cannot use."""
