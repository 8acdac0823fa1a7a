"""Worker processes, set up one way for every part that uses them (the bulk build's tokenisers, the evaluation's
query workers): how they start, that they die with their parent, and that Ctrl-C is the parent's to handle.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def default_workers() -> int:
    """Worker processes by default: one per core, at most two (the machines this runs on have two)."""
    return min(2, os.cpu_count() or 1)


def context():
    """Fork where there is fork: workers start in milliseconds and, unlike spawn, do not re-run the caller's main
    module (a script without a ``__main__`` guard would otherwise recurse)."""
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def follow_parent(parent: int) -> None:
    """In a worker: die with the parent ``parent`` (Linux sends SIGKILL when it dies, however it dies), and leave
    Ctrl-C to it, which shuts the pool down and reports once (no traceback per worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl
            pass
    if os.getppid() != parent:  # the parent died before the request above took effect
        os._exit(1)
