"""Whole-file work on an index: the writers' lock, temporary files, and swapping a finished index in.

**Why not a rename.** An index in WAL mode is three files: ``NAME``, ``NAME-wal`` and ``NAME-shm``. Renaming a
new file over ``NAME`` leaves the old ``-wal`` and ``-shm`` beside it, and the next process to open ``NAME``, or
a reader that still has the old file open and checkpoints when it closes, writes the old WAL's pages into the
new file, which is then malformed. So a finished index is copied *into* the existing one with SQLite's backup
API, under SQLite's own write lock: the copy is one write transaction in the target's WAL, readers see the old
index or the new one and never a mix, and a kill mid-copy leaves the old index as it was. Only where there is no
index yet is the new file renamed into place (stale ``-wal`` / ``-shm`` files of a deleted index removed
first). The copy keeps the target's inode, so its permissions, owner and any symlink to it stay as they were.

**The writers' lock.** Builds, adds, removes, upgrades and saved evidence runs take an exclusive ``flock`` on
the index file for as long as they write (readers never take it). ``flock`` locks are independent of the POSIX
record locks SQLite uses, so the two never interfere; the kernel drops a lock when its process dies, however it
dies. A build records what the index held when it started and swaps in only if nothing else wrote meanwhile, so
an ``add`` racing a rebuild is refused with a message, never silently lost.

**A descriptor is never closed.** Closing *any* descriptor of a file drops every POSIX lock the process holds on
it, SQLite's included: a client of the same process then reads without its locks, and another process's writer,
finding no other connection, checkpoints and deletes the ``-wal`` and ``-shm`` this process still maps, so the
client no longer sees later writes. So the lock and the header's read go through one descriptor per file, kept
open while the process lives (``_kept``; closed once its file is deleted or replaced), and threads of the process
exclude each other with a lock of their own, since a ``flock`` does not exclude holders of the same descriptor.

**Temporary files.** A build or an upgrade writes ``.NAME.XXXX.building`` (or ``.upgrading``) beside the target
and holds a ``flock`` on it while it lives. A later build removes such files whose lock it can take: their
writer is gone (killed, or the machine went down), and nobody else's files match the pattern.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ... import stop
from ...errors import StoreError
from ..database import _uri, connect, store_error

#: Seconds a writer waits for another writer to finish before it gives up with a message.
LOCK_TIMEOUT = 120.0
#: Temporary files of a build and of an upgrade.
TEMP_SUFFIXES = (".building", ".upgrading")
#: Files SQLite keeps beside a database.
SIDE_SUFFIXES = ("-journal", "-wal", "-shm")

# Every schema revision has these tables: an add changes the papers' rowids, a remove the statistics.
FINGERPRINT_SQL = """\
SELECT (SELECT group_concat(key || '=' || value, ';') FROM (SELECT key, value FROM index_info ORDER BY key)),
       (SELECT max(rowid) FROM papers),
       (SELECT count(*) FROM papers)"""


_KEPT: dict[tuple[int, int], tuple[int, threading.Lock]] = {}  # (device, inode) -> its descriptor, its threads' lock
_KEPT_GUARD = threading.Lock()
_SPARE: list[int] = []  # descriptors opened twice for one file (replaced and back): open too, never used


def _kept(path: Path) -> tuple[int, threading.Lock]:
    """The descriptor this process keeps open on the file at ``path`` (read-only; opened at the first call) and
    the lock its threads take for the writers' lock (see the module). Descriptors of files since deleted or
    replaced are closed here: no connection reads those any more."""
    with _KEPT_GUARD:
        st = os.stat(path)
        held = _KEPT.get((st.st_dev, st.st_ino))
        if held is not None:
            return held
        for key, (fd, guard) in list(_KEPT.items()):
            if os.fstat(fd).st_nlink == 0 and not guard.locked():
                os.close(fd)
                del _KEPT[key]
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        st = os.fstat(fd)  # the file opened, should the path have been replaced since the stat
        held = _KEPT.setdefault((st.st_dev, st.st_ino), (fd, threading.Lock()))
        if held[0] != fd:
            _SPARE.append(fd)  # closing it would drop the locks too
        return held


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise


class WriterLock:
    """``with WriterLock(path):`` holds the writers' lock on the index file ``path`` (see the module)."""

    def __init__(self, path: Path, timeout: float | None = None) -> None:
        self.path = Path(path)
        self.timeout = LOCK_TIMEOUT if timeout is None else timeout
        self.fd: int | None = None
        self._guard: threading.Lock | None = None

    def __enter__(self) -> WriterLock:
        try:
            fd, guard = _kept(self.path)
        except OSError as exc:
            raise StoreError(f"cannot open {self.path} to write to it ({exc.strerror}): {_advice(exc)}") from None
        deadline = time.monotonic() + self.timeout
        # Another thread of this process first, then another process. A Ctrl-C while waiting (short waits, so it is
        # acted on at once) leaves neither lock held.
        while not guard.acquire(timeout=0.05):
            self._waited_too_long(deadline)
        try:
            while not _try_flock(fd):
                self._waited_too_long(deadline)
                time.sleep(0.05)
        except BaseException:
            guard.release()
            raise
        self.fd, self._guard = fd, guard
        return self

    def _waited_too_long(self, deadline: float) -> None:
        if time.monotonic() >= deadline:
            raise StoreError(
                f"another process has been writing to {self.path} for {self.timeout:.0f} s (a build, add, "
                "remove or upgrade): nothing was changed; try again when it has finished"
            )

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)  # not closed: see the module
            self._guard.release()
            self.fd, self._guard = None, None


class TempIndex:
    """A new empty file beside ``target`` (same filesystem), ``.NAME.XXXX<suffix>``, readable as any new file is
    (``mkstemp`` alone makes it private), and locked for as long as this object lives."""

    def __init__(self, target: Path, suffix: str) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self.fd = fd
        self.path = Path(name)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(name, 0o666 & ~umask)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def discard(self) -> None:
        """Remove the file and whatever SQLite kept beside it."""
        discard(self.path)
        self.close()


def discard(path: Path) -> None:
    """Remove an unfinished file and whatever SQLite kept beside it (``-journal``, ``-wal``, ``-shm``)."""
    for suffix in ("", *SIDE_SUFFIXES):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Remove the temporary files of builds and upgrades of ``target`` whose writer is gone; returns them."""
    removed = []
    for suffix in TEMP_SUFFIXES:
        for path in sorted(target.parent.glob(f".{target.name}.*{suffix}")):
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                if _try_flock(fd):  # its writer would hold the lock: it is gone
                    discard(path)
                    removed.append(path)
            finally:
                os.close(fd)
    return removed


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` starts with SQLite's file header (read through the descriptor kept for it: see the
    module)."""
    return os.pread(_kept(path)[0], 16, 0) == b"SQLite format 3\x00"


def fingerprint(conn: sqlite3.Connection) -> tuple:
    """What changes whenever papers are added to or removed from an index, in any schema revision."""
    return tuple(conn.execute(FINGERPRINT_SQL).fetchone())


def read_fingerprint(path: Path) -> tuple | None:
    """``fingerprint`` of the index at ``path``; None where there is no readable index. (A writer's connection,
    not a read-only one: its close removes the ``-wal`` and ``-shm`` files, which a read-only one leaves.)"""
    try:
        conn = sqlite3.connect(_uri(path), uri=True)
    except sqlite3.Error:
        return None
    try:
        return fingerprint(conn)
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def check_replaceable(target: Path) -> tuple | None:
    """Before a build over ``target``: remove stale temporaries, refuse a file that is not an index (a build would
    destroy it), and return the index's fingerprint (None when there is none yet or it is damaged)."""
    remove_stale_temporaries(target)
    if target.is_symlink() and not target.exists():
        raise StoreError(
            f"{target} is a symbolic link to {os.readlink(target)}, which does not exist: a build writes beside the "
            "path it is given and replaces it, so give the link's target itself as --db (or remove the link)"
        )
    if not target.exists():
        return None
    if target.is_dir():
        raise StoreError(
            f"{target} is a folder, not an index file: give the index file's path as --db (such as "
            f"{target / 'retrieval.db'})"
        )
    if not target.is_file():  # a device, a pipe, a socket: never replaced
        raise StoreError(
            f"{target} is not a regular file (a device, a pipe or a socket): a build would replace it with an index "
            "file; give a file path as --db"
        )
    if target.stat().st_size == 0:
        return None
    try:
        sqlite = is_sqlite(target)
    except OSError as exc:
        raise StoreError(f"cannot read {target} ({exc.strerror}): {_advice(exc)}") from None
    if sqlite:
        check_writable(target, "replace")  # before the build, and before an open leaves read-only side files
        try:
            conn = sqlite3.connect(_uri(target), uri=True)
            try:
                tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            finally:
                conn.close()
        except sqlite3.DatabaseError:
            return None  # a damaged index: the build replaces it
        if {"papers", "index_info"} <= tables:
            return read_fingerprint(target)
    raise StoreError(
        f"{target} exists and is not a retrieval index: a build would overwrite it; choose another --db, or "
        "remove that file first"
    )


@contextmanager
def _signals_held() -> Iterator[list[int]]:
    """Hold Ctrl-C and SIGTERM for the block (their Python handlers would raise in the middle of it): the
    signals that arrived are listed, and the caller decides what they mean once the block is over. Outside the
    main thread (where handlers cannot be set) nothing is held."""
    arrived: list[int] = []
    previous = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, lambda signum, frame: arrived.append(signum))
    except ValueError:  # not the main thread
        pass
    try:
        yield arrived
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def swap_in(new: Path, target: Path, expected: tuple | None = None) -> None:
    """Put the finished index ``new`` in place of ``target`` (see the module docstring); ``new`` is removed.

    ``expected`` is the target's fingerprint when the caller started: if another writer changed the target
    since, nothing is swapped in and ``StoreError`` says so. A Ctrl-C or SIGTERM stops the wait for the writers'
    lock at once; one that arrives during the swap itself is held: it stops a copy still waiting for another
    program's transaction, and is raised if the swap failed. Once the swap is done the change is saved
    (``retrieval.stop.saved``): a later stop lets the command finish, since "interrupted, nothing changed"
    would be false.
    """
    stop.check()  # a stop a garbage collector's callback dropped (``retrieval.stop``): nothing swapped in
    _swap_in(new, target, expected)
    stop.saved()


@contextmanager
def _stop_held() -> Iterator[list[int]]:
    """``_signals_held`` for a point of no return (a swap, a commit): a stop that arrived while the block
    failed is raised as the stop; one that arrived while it succeeded is the caller's to weigh."""
    with _signals_held() as arrived:
        try:
            yield arrived
        except BaseException:
            if arrived:
                raise KeyboardInterrupt from None
            raise


def _swap_in(new: Path, target: Path, expected: tuple | None) -> None:
    if not os.path.lexists(target) or (target.exists() and target.stat().st_size == 0):
        with _stop_held():
            for suffix in SIDE_SUFFIXES:  # an old index's leftovers would be replayed into the new file
                Path(f"{target}{suffix}").unlink(missing_ok=True)
            os.replace(new, target)
        return
    real = target.resolve()
    check_writable(real, "replace", target)
    with WriterLock(real), _stop_held() as arrived:
        dest = sqlite3.connect(_uri(real), uri=True, isolation_level=None)
        try:
            dest.execute(f"PRAGMA busy_timeout = {int(LOCK_TIMEOUT * 1000)}")
            try:
                now = fingerprint(dest)
            except sqlite3.DatabaseError:  # a damaged file, which nothing can be reading: replace it whole
                dest.close()
                for suffix in SIDE_SUFFIXES:
                    Path(f"{real}{suffix}").unlink(missing_ok=True)
                os.replace(new, real)
                return
            if expected is not None and now != expected:
                raise StoreError(
                    f"{target} was changed by another process (an add, remove or saved run) while this ran: the "
                    "new index was not swapped in and nothing was lost; run the command again"
                )
            source = sqlite3.connect(f"{_uri(new)}?mode=ro", uri=True)
            try:
                # One write transaction on the target: readers see old or new, never a mix. The copy asks for the
                # target's write lock in short waits (Python retries a busy step for ever, and SQLite's own wait
                # runs in C, deaf to a stop): waited for here, as long as any writer waits, or until a stop.
                dest.execute(f"PRAGMA busy_timeout = {WAIT_SLICE_MS}")
                source.backup(dest, progress=_lock_waited(target, arrived))
            finally:
                source.close()
            try:  # best effort, after the commit: a reader may hold the WAL for now, and its close checkpoints
                dest.execute("PRAGMA busy_timeout = 0")
                dest.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.OperationalError:
                pass
        finally:
            dest.close()
    discard(new)


def _lock_waited(target: Path, arrived: list[int]):
    """A backup's progress callback that gives up, with the message a locked index gets, once the copy has waited
    ``LOCK_TIMEOUT`` seconds for the target's write lock (another program's transaction), or as soon as a stop
    has ``arrived`` while it waits (nothing is copied yet)."""
    since: list[float] = []

    def progress(status: int, remaining: int, total: int) -> None:
        if status not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
            since.clear()
            return
        if arrived:
            raise KeyboardInterrupt
        if not since:
            since.append(time.monotonic())
        elif time.monotonic() - since[0] > LOCK_TIMEOUT:
            raise store_error(sqlite3.OperationalError("database is locked"), target, "write to")

    return progress


@contextmanager
def _immediate(conn: sqlite3.Connection, saves: bool = False) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` on ``conn`` (SQLite's write lock taken now, not at the first write), committed when the
    block ends, rolled back on any error (a rollback SQLite already did, as on a full disk, does not hide the
    cause). ``saves``: the commit is the index's own (not a copy's), after which the change is saved
    (``retrieval.stop.saved``)."""
    _begin_immediate(conn)
    try:
        yield conn
        if saves:
            stop.check()  # a stop a garbage collector's callback dropped: nothing committed
        with _stop_held():  # a stop while SQLite commits: the change is made or not, and said as it is
            conn.execute("COMMIT")
            if saves:  # the index itself, not a copy still to be swapped in
                stop.saved()
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


#: How long one wait for a write lock lasts inside SQLite (a transaction's begin, a swap's copy), where no
#: Ctrl-C is acted on: the waits are repeated from Python up to the whole timeout.
WAIT_SLICE_MS = 100


def _begin_immediate(conn: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE`` within the connection's busy timeout, asked for in slices of ``WAIT_SLICE_MS`` so that
    a Ctrl-C or SIGTERM while another program holds the lock stops the wait at once (SQLite's own wait runs in C,
    where Python's handlers wait for it to end)."""
    timeout_ms = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    deadline = time.monotonic() + timeout_ms / 1000
    conn.execute(f"PRAGMA busy_timeout = {min(WAIT_SLICE_MS, timeout_ms)}")
    try:
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                text = str(exc).lower()
                if ("locked" not in text and "busy" not in text) or time.monotonic() >= deadline:
                    raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {timeout_ms}")


def check_writable(path: Path, doing: str, named: Path | None = None) -> None:
    """Refuse a write to an index file this user may not write before SQLite opens it: its open would fail, and
    leave ``-wal`` and ``-shm`` files beside it with the index's read-only mode, which then block every later
    write, even once the index is made writable."""
    if os.path.isfile(path) and not os.access(path, os.W_OK):
        where = named or path
        if not os.access(path, os.R_OK):  # not "read-only": this user may not read it either
            raise StoreError(
                f"cannot {doing} {where}: this user may neither read nor write the file (permission denied): run "
                f"the command as its owner, or have the owner grant access (`chmod u+rw {where}`, or a group's); "
                "nothing was changed"
            )
        if _read_only_mount(path):  # os.access says no for any file there: chmod would not help
            raise StoreError(
                f"cannot {doing} {where}: the file system that holds it is mounted read-only: copy the index to a "
                "writable place and point --db at the copy (or remount it read-write); nothing was changed"
            )
        raise StoreError(
            f"cannot {doing} {where}: the file is read-only for this user: make it writable (`chmod u+w {where}`, "
            "as its owner) and run the command again, or work on a copy; nothing was changed"
        )


def _read_only_mount(path: Path) -> bool:
    """Whether ``path`` lies on a file system mounted read-only (``ST_RDONLY``; False where that cannot be told)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs (not POSIX), or the path gone meanwhile
        return False


@contextmanager
def write_transaction(
    path: Path, busy_timeout_ms: int, doing: str, lock: bool = True, named: Path | None = None
) -> Iterator[sqlite3.Connection]:
    """``with write_transaction(path, ...) as conn``: one write transaction on the index at ``path``, under the
    writers' lock (unless not ``lock``: a ``TempIndex`` of this process, which its own lock keeps); committed when
    the block ends, rolled back on any error (a rollback SQLite already did, as on a full disk, does not hide the
    cause). Environment failures become messages saying what failed (``doing``: "write to", "save the run in") to
    ``named`` (default ``path``: a copy is named by the index it will replace)."""
    check_writable(path, doing, named)
    with WriterLock(path.resolve()) if lock else contextlib.nullcontext():
        try:
            conn = connect(path, readonly=False)
            try:
                conn.isolation_level = None
                conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
                conn.execute("PRAGMA journal_mode = WAL")
                with _immediate(conn, saves=lock):
                    yield conn
                # Into the file itself now: closing is not enough when another connection (a search's, read-only)
                # is open, and a copy of the file alone would lose what was written. PASSIVE never waits for a
                # reader; what a reader still holds goes in at the next checkpoint.
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            finally:
                conn.close()
        except sqlite3.Error as exc:
            raise store_error(exc, named or path, doing) from None


#: The sample ``ANALYZE`` reads per index (``PRAGMA analysis_limit``): planner statistics in seconds, not minutes.
ANALYSIS_LIMIT = 1000
#: An add or remove refreshes the planner's statistics once the papers have grown or shrunk by this factor since
#: they were gathered: a plan made for a 20-paper index joins a 30,000-paper one in the wrong order.
STALE_STATISTICS_FACTOR = 2


def refresh_planner_statistics(conn: sqlite3.Connection, force: bool = False) -> bool:
    """``ANALYZE`` (from a sample of ``ANALYSIS_LIMIT`` rows per index) in ``conn``'s transaction, if ``force`` or
    if ``sqlite_stat1`` is missing or counts the papers ``STALE_STATISTICS_FACTOR`` times off the papers now;
    returns whether it ran. A build gathers them once (``force``); an add or remove only when they went stale."""
    if not force:
        papers = conn.execute("SELECT value FROM index_info WHERE key = 'n_papers'").fetchone()
        try:
            stats = conn.execute("SELECT stat FROM sqlite_stat1 WHERE tbl = 'papers'").fetchall()
        except sqlite3.OperationalError:  # no sqlite_stat1 table: never analysed
            stats = []
        counted = max((int(stat.split()[0]) for (stat,) in stats if stat and stat.split()[0].isdigit()), default=0)
        now = int(papers[0]) if papers else 0
        if counted and counted / STALE_STATISTICS_FACTOR <= now <= counted * STALE_STATISTICS_FACTOR:
            return False
    conn.execute(f"PRAGMA analysis_limit = {ANALYSIS_LIMIT}")
    conn.execute("ANALYZE")
    return True


@contextmanager
def log_transaction(path: Path, busy_ms: int) -> Iterator[sqlite3.Connection]:
    """``with log_transaction(path, busy_ms) as conn``: one short write transaction on the index at ``path`` (a
    query log row) that waits at most ``busy_ms`` for SQLite's lock and never for the writers' lock; the file is
    never created (``mode=rw``: an index removed since the search stays removed)."""
    conn = sqlite3.connect(_uri(path) + "?mode=rw", uri=True, isolation_level=None, timeout=busy_ms / 1000)
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_ms)}")
        conn.execute("PRAGMA synchronous = NORMAL")  # a power cut may lose the last log rows, never the index
        with _immediate(conn):
            yield conn
    finally:
        conn.close()


def _advice(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "check that you may write to the file and its folder (a permissions or read-only problem)"
    if exc.errno == errno.ENOSPC:
        return "free some disk space and try again"
    return "check the path and try again"
