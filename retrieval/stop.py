"""A stop asked for by Ctrl-C or SIGTERM, remembered as well as raised.

The command line's handlers raise ``KeyboardInterrupt``; Python prints and drops an exception raised while it
runs a garbage collector's or a weak reference's callback, so a signal landing there never reached the command,
which went on and replaced the index (exit 0). The handlers also set a flag here, and a writer calls ``check()``
just before its point of no return (the swap of a built index), which raises the stop the callback dropped.
"""

from __future__ import annotations

_requested = False


def request(signum: int | None = None, frame: object = None) -> None:
    """The handler of SIGINT and SIGTERM on the command line: remember the stop, then raise it."""
    global _requested
    _requested = True
    raise KeyboardInterrupt


def check() -> None:
    """Raise ``KeyboardInterrupt`` if a stop was asked for since ``reset`` (whether or not it was raised)."""
    if _requested:
        raise KeyboardInterrupt


def reset() -> None:
    """Forget a stop: a command begins."""
    global _requested
    _requested = False
