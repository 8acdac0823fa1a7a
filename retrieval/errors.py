"""One small exception hierarchy: every error the library raises on purpose is a ``RetrievalError``, and the
CLI turns each into ``retrieval: error: <message>`` and exit code 1. Every message says what to do next."""

from __future__ import annotations


class RetrievalError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(RetrievalError, ValueError):
    """A setting or option is out of range, of the wrong type, unknown, or sets a limit the request exceeds."""


class InputError(RetrievalError):
    """A file, record or value handed to retrieval is missing or malformed; names ``file:line`` when it can."""

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None) -> None:
        self.source = source
        self.line = line
        super().__init__(message)

    @classmethod
    def at(cls, source: str, line: int, reason: str) -> InputError:
        """The error for line ``line`` of the file ``source``: ``source:line: reason``."""
        error = cls(f"{source}:{line}: {reason}", source=source, line=line)
        error.reason = reason
        return error


class PaperNotFoundError(InputError):
    """No paper with the id asked for is in the index."""


class TooLargeError(ConfigError):
    """A request asks for more work than the documented bounds allow (a query too long, too many terms)."""


class IndexNotFoundError(RetrievalError):
    """There is no index file where one was asked for."""


class NotAnIndexError(RetrievalError):
    """The file exists but is not a complete ``retrieval`` index (not SQLite, another database, unfinished)."""


class SchemaVersionError(RetrievalError):
    """The index was written by another schema revision or tokeniser: upgrade it or rebuild it."""


class StoreError(RetrievalError):
    """The index or an output file could not be read or written (locked, read-only, permissions, disk full)."""


class OverloadedError(RetrievalError):
    """The server has as many requests in flight as it admits: retry shortly (HTTP 503 with ``Retry-After``)."""


class QueryTimeoutError(StoreError):
    """A read took longer than its time budget and was stopped (a server's ``--query-timeout``)."""


class FetchError(RetrievalError):
    """A fetch from a bibliographic API failed (unreachable, refused, rate limited past its wait, or answered
    something unusable); what was fetched before stays resumable."""
