"""Files written for a user (a model, a graph, a report, a run file): whole or not at all.

A regular file, or a path where there is none yet, is written to a temporary file beside it and renamed over it, so
a failed write (a full disk, a stop) leaves what was there. A symbolic link is followed: its target is replaced and
the link stays a link. Anything else (``/dev/stdout``, ``/dev/null``, a named pipe) is a stream, written in place:
renaming over it would put a regular file where a device was. Errors are ``OSError``, for the caller to name the
file and the option it came from (``filename`` is the path as given, never the temporary file's).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path


def replace_text(path: str | os.PathLike[str], text: str | Iterable[str]) -> Path:
    """Write ``text`` (a string, or lines to join) to ``path`` as UTF-8 with ``\\n`` line ends, whole or not at
    all (see the module); returns ``path``."""
    out = Path(path)
    chunks = [text] if isinstance(text, str) else text
    try:
        mode = os.stat(out).st_mode  # through links: /dev/stdout is one, to a pipe or a terminal
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(out))
        with open(out, "w", encoding="utf-8", newline="\n") as handle:  # a device or a pipe: a stream
            handle.writelines(chunks)
        return out
    real = Path(os.path.realpath(out))  # a regular file (or none yet): the link's target is replaced
    tmp = real.with_name(f".{real.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)  # left by a process of the same number that was killed
    try:
        with open(tmp, "x", encoding="utf-8", newline="\n") as handle:  # created with the umask's mode, as open makes
            handle.writelines(chunks)
        if mode is not None:
            os.chmod(tmp, stat.S_IMODE(mode))  # the replaced file's permissions, not a new file's
        os.replace(tmp, real)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):  # named as the user gave it, not as the temporary file
            raise OSError(exc.errno, exc.strerror or str(exc), str(out)) from None
        raise
    return out
