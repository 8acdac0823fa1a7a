"""What a full build reports while it runs: its phases in order, each with its progress where it has one.

A build calls ``start(phase, total, unit)`` as each phase begins, ``update(done)`` as it advances (``done``
counted from the phase's start; ``None`` while a single long SQL statement runs, so that a display can show the
time passing) and ``finish()`` when it ends. ``retrieval build`` draws each phase as its own bar with its rate and
estimate (``retrieval.interfaces.cli``); a plain callable ``progress(done)``, as ``build_index`` has always
accepted, is told the papers read and nothing else.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager

READING = "reading papers"
SORTING = "sorting postings"
LOADING = "loading postings"
INDEXING = "building indexes"
CITATIONS = "indexing citations"
IN_DEGREES = "counting in-degrees"
STATISTICS = "statistics"
SWAP = "checkpoint and swap"
#: Only a build with ``--semantic``, between loading and the statistics: the papers' text vectors.
VECTORS = "encoding vectors"
#: Every phase of a full build, in the order a build reports them (the indexes of the papers and citations are
#: built while the postings are sorted: their phases show what is left to wait for once the sort is done).
PHASES = (READING, SORTING, INDEXING, CITATIONS, IN_DEGREES, LOADING, STATISTICS, SWAP)

#: SQLite virtual-machine steps between two ticks of a long statement (a few milliseconds of work).
TICK_STEPS = 100_000


class BuildProgress:
    """Receives a build's phases; every method does nothing here (subclass what you need)."""

    def start(self, phase: str, total: int | None = None, unit: str = "") -> None:
        """``phase`` begins; ``total`` is what ``update`` counts up to, when known."""

    def update(self, done: int | None = None) -> None:
        """``done`` so far in the current phase; None: still working, nothing to count."""

    def finish(self) -> None:
        """The current phase has ended."""


class _PapersRead(BuildProgress):
    """A plain ``progress(done)`` callable, told the papers read (what ``build_index`` has always called)."""

    def __init__(self, callback: Callable[[int], None]) -> None:
        self.callback = callback
        self.phase: str | None = None

    def start(self, phase: str, total: int | None = None, unit: str = "") -> None:
        self.phase = phase

    def update(self, done: int | None = None) -> None:
        if self.phase == READING and done is not None:
            self.callback(done)


def as_progress(progress: BuildProgress | Callable[[int], None] | None) -> BuildProgress:
    """``progress`` as a ``BuildProgress``: one as it is, a callable told the papers read, None ignored."""
    if progress is None:
        return BuildProgress()
    if isinstance(progress, BuildProgress) or hasattr(progress, "start"):
        return progress  # type: ignore[return-value]
    return _PapersRead(progress)


@contextmanager
def phase(
    progress: BuildProgress,
    name: str,
    total: int | None = None,
    unit: str = "",
    conn: sqlite3.Connection | None = None,
) -> Iterator[None]:
    """``with phase(progress, name, ...):`` reports ``name`` started, then finished when the block ends (however
    it ends: a display closes its line before an error is printed).

    With ``conn``, the statements that run on it in the block tick ``progress.update(None)`` every
    ``TICK_STEPS`` steps, so that a long ``CREATE INDEX`` shows its time passing. A Ctrl-C (or SIGTERM, which
    the CLI turns into one) during such a statement stops it at once and is raised as ``KeyboardInterrupt``,
    as anywhere else in a build."""
    progress.start(name, total, unit)
    raised: list[BaseException] = []
    if conn is not None:

        def tick() -> int:
            try:
                progress.update(None)
            except BaseException as exc:  # a Ctrl-C, or the display failing: stop the statement, raise it below
                raised.append(exc)
                return 1
            return 0

        conn.set_progress_handler(tick, TICK_STEPS)
    try:
        yield
    except sqlite3.OperationalError as exc:
        # The statement was stopped from tick(); a signal that arrived just outside its try stops it too (the
        # exception is then dropped by sqlite3, and only "interrupted" says why): both are the Ctrl-C they were.
        if raised:
            raise raised[0] from None
        if conn is not None and str(exc) == "interrupted":
            raise KeyboardInterrupt from None
        raise
    finally:
        if conn is not None:
            conn.set_progress_handler(None, 0)
        progress.finish()
