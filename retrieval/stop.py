"""A stop asked for by Ctrl-C or SIGTERM, remembered as well as raised.

The command line's handlers raise ``KeyboardInterrupt``; Python prints and drops an exception raised while it
runs a garbage collector's or a weak reference's callback, so a signal landing there never reached the command,
which went on and replaced the index (exit 0). The handlers also set a flag here, and a writer calls ``check()``
just before its point of no return (the swap of a built index), which raises the stop the callback dropped.

Once a writer has committed its change (``saved``), a stop is only remembered: the command has done what it was
asked, and its last steps (closing, the summary) finish, rather than report "nothing was changed" of a change
that was made.
"""

from __future__ import annotations

_requested = False
_saved = False


def request(signum: int | None = None, frame: object = None) -> None:
    """The handler of SIGINT and SIGTERM on the command line: remember the stop, then raise it (unless the
    command's change is saved already)."""
    global _requested
    _requested = True
    if not _saved:
        raise KeyboardInterrupt


def requested() -> bool:
    """Whether a stop was asked for since ``reset``."""
    return _requested


def is_saved() -> bool:
    """Whether the command's change is saved (``saved``) since ``reset``."""
    return _saved


def saved() -> None:
    """A writer's change is committed (or swapped in): from now on a stop is remembered, not raised."""
    global _saved
    _saved = True


def staged() -> None:
    """What was just saved is a copy still to be put in place (the file a PostgreSQL build copies from): a stop
    stops the command again, and one that arrived while it was saved (remembered only) is raised now."""
    global _saved
    _saved = False
    check()


def check() -> None:
    """Raise ``KeyboardInterrupt`` if a stop was asked for since ``reset`` (whether or not it was raised), unless
    the command's change is saved already."""
    if _requested and not _saved:
        raise KeyboardInterrupt


def reset() -> None:
    """Forget a stop and a saved change: a command begins."""
    global _requested, _saved
    _requested = _saved = False
