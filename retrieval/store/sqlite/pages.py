"""Laying a sorted, empty WITHOUT ROWID table's B-tree straight into the database file: the bulk build's postings.

Why: SQLite inserts a row of ``term_freq`` in about half a microsecond however it is handed over (a JSON array
unpacked by ``json_each``, ``executemany`` of tuples is slower still), and a full build has tens of millions of
postings, which made loading them the longest phase of a build. The rows are already sorted, so their B-tree can
be written as SQLite itself would write it when it builds an index (every page full, in key order), page by
page with numpy, in the documented file format (https://www.sqlite.org/fileformat2.html, sections 1.6 and
2.1-2.3). SQLite then reads, checks and updates the table as any other (``PRAGMA integrity_check`` passes, adds
and removes work on it; the tests check both).

What it writes: the table's root stays where ``CREATE TABLE`` put it; the other pages are appended at the end of
the file, leaves first, in key order. Each record is encoded as SQLite encodes integers (the smallest serial type,
0 and 1 as types 8 and 9), so the pages hold what ``INSERT`` would have put there, only fuller. The database header's
page count and change counter are updated last; a connection that has the file open sees the change at the start
of its next transaction, as it would see another process's write.

Only the simple, common layout is handled: a rollback-journal file (not WAL), no auto-vacuum, integer columns
between 0 and 2**31 - 1. ``write_sorted_table`` returns False, having written nothing, for anything else, and
the caller inserts the rows with SQL instead.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ...workers import follow_parent

#: Entries encoded per batch (bounds the memory the encoding takes: about 40 bytes an entry).
BATCH = 1 << 21
_LEAF, _INTERIOR = 0x0A, 0x02  # index B-tree page types
_MAX_VALUE = 2**31 - 1  # serial types 1-4 (and 8, 9) only
_PENDING_BYTE = 0x40000000  # the page holding this offset is SQLite's lock-byte page: never a B-tree page


class _Header:
    """The fields of the 100-byte database header the writer reads and updates."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        size = int.from_bytes(raw[16:18], "big")
        self.page_size = 65536 if size == 1 else size
        self.usable = self.page_size - raw[20]
        self.change_counter = int.from_bytes(raw[24:28], "big")
        self.pages = int.from_bytes(raw[28:32], "big")
        self.valid_for = int.from_bytes(raw[92:96], "big")
        self.schema_format = int.from_bytes(raw[44:48], "big")
        self.ok = (
            raw[:16] == b"SQLite format 3\x00"
            and raw[18] == 1  # rollback journal, not WAL: the file itself is up to date
            and raw[19] == 1
            and int.from_bytes(raw[52:56], "big") == 0  # no auto-vacuum: no pointer-map pages to keep
            and self.change_counter == self.valid_for  # the page count in the header is valid
            and self.usable >= 480
        )


def _size(values: np.ndarray, small_literals: bool) -> np.ndarray:
    """Each value's length in a record, as SQLite chooses it for an integer of 0 to 2**31 - 1: 1 to 4 bytes,
    none for 0 and 1 in schema format 4 (types 8 and 9)."""
    size = (values > 127).astype(np.uint8)
    size += values > 32767
    size += values > 8388607
    size += values > 1 if small_literals else 1
    return size


def _cells(columns: Sequence[np.ndarray], sizes: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The leaf cells of the rows ``columns`` (one array per column; ``sizes``: each column's ``_size``),
    concatenated: ``(bytes, offsets)``, where row i's cell is ``bytes[offsets[i]:offsets[i + 1]]``: the payload's
    length, the record header (its own length and a serial type per column), then each column's big-endian
    bytes."""
    n, k = len(columns[0]), len(columns)
    widths = [max(1, int(size.max(initial=0))) for size in sizes]  # bytes a column takes at most here
    matrix = np.empty((n, 2 + k + sum(widths)), dtype=np.uint8)
    keep = np.empty(matrix.shape, dtype=bool)
    keep[:, : 2 + k] = True
    payload = np.full(n, 1 + k, dtype=np.int64)  # the header: its length byte and the serial types
    first = 2 + k
    for c, (values, size, width) in enumerate(zip(columns, sizes, widths, strict=True)):
        # The serial type: 1-4 for that many bytes; 8 + the value for a 0 or 1 held in none.
        matrix[:, 2 + c] = np.where(size == 0, 8 + values, size)
        payload += size
        be = values.astype(">u4").view(np.uint8).reshape(n, 4)
        matrix[:, first : first + width] = be[:, 4 - width :]
        # Of the column's `width` bytes, the last `size` are its value's.
        np.greater_equal(np.arange(width, dtype=np.uint8), (width - size)[:, None], out=keep[:, first : first + width])
        first += width
    matrix[:, 0] = payload  # below 128: a one-byte varint
    matrix[:, 1] = 1 + k
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(payload + 1, out=offsets[1:])
    return matrix[keep], offsets


def _runs(costs: np.ndarray, capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Split entries of ``costs`` bytes into pages of at most ``capacity`` bytes, in order, one entry between
    two pages going up to their parent (an index B-tree holds each key once). Returns ``(starts, ends)``: page p
    holds entries ``starts[p]:ends[p]`` and entry ``ends[p]`` goes up, for every page but the last."""
    ends_at = np.cumsum(costs, dtype=np.int64)
    # Bucket b holds the entries that end in (b * capacity, (b + 1) * capacity]: after its first entry, which goes
    # up, they take less than `capacity` bytes (and bucket 0 at most that), and no bucket is empty (an entry is
    # far smaller than a page). The first entry of every bucket but the first goes up.
    buckets = (int(ends_at[-1]) - 1) // capacity + 1
    firsts = np.searchsorted(ends_at, np.arange(1, buckets, dtype=np.int64) * capacity, side="right")
    starts = np.r_[0, firsts + 1]
    ends = np.r_[firsts, len(costs)]
    if len(firsts) and ends[-1] == starts[-1]:  # the last bucket is its one entry, which would leave a page empty
        firsts[-1] -= 1  # the page before gives its last entry up instead (it keeps at least one)
        starts[-1] -= 1
        ends[-2] -= 1
    return starts, ends


def _roots(conn: sqlite3.Connection, table: str, indexes: Sequence[str]) -> list[int] | None:
    """The root pages of ``table`` and of ``indexes``, when ``table`` is an empty WITHOUT ROWID table whose
    indexes are exactly ``indexes`` (else None: an index left out would miss the rows)."""
    row = conn.execute("SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    if row is None or "WITHOUT ROWID" not in row[1].upper():
        return None
    listed = conn.execute("SELECT name, rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = ?", [table])
    found = dict(listed.fetchall())
    if set(found) != set(indexes):
        return None
    if conn.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() is not None:
        return None
    return [int(row[0])] + [int(found[name]) for name in indexes]


class Layout:
    """Where the rows of one B-tree go: each value's length, and the entries of every page, level by level. It
    depends on the rows and the file's page size alone, so it can be made before the file is ready for the pages
    (``layout``)."""

    def __init__(self, columns: Sequence[np.ndarray], page_size: int, usable: int, small_literals: bool) -> None:
        self.columns = columns
        self.key = (page_size, usable, small_literals)
        # Each value's length and each row's leaf cell's (the bytes are made a batch at a time when written).
        self.sizes = [_size(values, small_literals) for values in columns]
        cell = np.full(len(columns[0]), 2 + len(columns), dtype=np.uint8)  # lengths of payload, header, types
        for size in self.sizes:
            cell += size
        cell = cell.astype(np.int64)
        starts, ends = _runs(cell + 2, usable - 8)  # a cell and its 2-byte pointer; an 8-byte leaf header
        self.levels = [(starts, ends)]
        promoted = ends[:-1]  # the entries between the leaves, in order
        while len(self.levels[-1][0]) > 1:
            # An interior cell: its left child's page number, then the leaf cell's bytes; a 12-byte page header.
            s, e = _runs(cell[promoted] + 4 + 2, usable - 12)
            self.levels.append((s, e))
            promoted = promoted[e[:-1]]


def _plan(tree, page_size: int, usable: int, small: bool) -> Layout | None:
    if isinstance(tree, Layout):
        return tree
    return Layout(tree, page_size, usable, small) if len(tree[0]) else None  # None: an empty index, left as it is


def _writable(columns: Sequence[np.ndarray]) -> bool:
    if len(columns) > 100 or any(len(x) != len(columns[0]) for x in columns):
        return False
    return not any(len(x) and (int(x.min()) < 0 or int(x.max()) > _MAX_VALUE) for x in columns)


def layout(path: str | os.PathLike[str], columns: Sequence[np.ndarray]) -> Layout | None:
    """The layout of a B-tree of ``columns`` in the database at ``path`` (None where this writer would refuse
    the file or the values); ``write_sorted_table`` takes it in place of the columns."""
    with open(path, "rb") as handle:
        header = _Header(handle.read(100))
    if not header.ok or not len(columns[0]) or not _writable(columns):
        return None
    return Layout(columns, header.page_size, header.usable, header.schema_format >= 4)


def write_sorted_table(
    conn: sqlite3.Connection,
    path: str | os.PathLike[str],
    table: str,
    columns: Sequence[np.ndarray] | Layout,
    progress: Callable[[int], None] | None = None,
    indexes: dict[str, Sequence[np.ndarray] | Layout] | None = None,
    processes: int = 1,
) -> bool:
    """Write the rows ``columns`` (one array per column, in the table's record order: its primary key's
    columns, then the others; sorted by the primary key, unique) into the empty WITHOUT ROWID ``table`` of the
    database at ``path``, which ``conn`` has open with no transaction in progress; and into each of its
    ``indexes`` (all of them, empty), the entries given for it (its columns, then the primary key's columns it
    lacks; sorted; for a partial index only the rows it covers). ``progress`` is called with the rows and
    entries written so far; ``processes`` > 1 shares the work with that many processes in all (forked: they
    inherit the arrays). Any of the column lists may be given as its ``layout``, made beforehand. Returns False,
    having written nothing, when the file or the values are of a kind this writer does not handle (see the
    module); the caller then inserts the rows with SQL."""
    if conn.in_transaction:
        raise RuntimeError("write_sorted_table needs the connection outside a transaction")
    indexes = indexes or {}
    trees = [columns, *indexes.values()]
    rows = [tree.columns if isinstance(tree, Layout) else tree for tree in trees]
    if len(rows[0][0]) == 0 or not all(isinstance(tree, Layout) or _writable(tree) for tree in trees):
        return False
    roots = _roots(conn, table, list(indexes))
    if roots is None:
        return False
    with open(path, "r+b") as handle:
        fd = handle.fileno()
        header = _Header(os.pread(fd, 100, 0))
        if not header.ok or os.fstat(fd).st_size != header.pages * header.page_size:
            return False
        for root in roots:
            root_page = os.pread(fd, header.page_size, (root - 1) * header.page_size)
            if root_page[0] != _LEAF or int.from_bytes(root_page[3:5], "big") != 0:
                return False
        small = header.schema_format >= 4
        plans = [_plan(tree, header.page_size, header.usable, small) for tree in trees]
        if any(plan is not None and plan.key != (header.page_size, header.usable, small) for plan in plans):
            return False
        next_page, written = header.pages + 1, 0
        for root, plan in zip(roots, plans, strict=True):
            if plan is None:
                continue  # an empty index stays as CREATE INDEX left it

            def told(done: int, before: int = written) -> None:
                if progress:
                    progress(before + done)

            next_page = _write_tree(fd, header, root, plan, next_page, told, processes)
            written += len(plan.columns[0])
        counter = (header.change_counter + 1) % 2**32
        os.pwrite(fd, counter.to_bytes(4, "big") + (next_page - 1).to_bytes(4, "big"), 24)
        os.pwrite(fd, counter.to_bytes(4, "big"), 92)
    return True


def _write_tree(fd: int, header: _Header, root: int, plan: Layout, next_page: int, progress, processes) -> int:
    """Write one B-tree laid out by ``plan``, rooted at ``root``, its other pages from ``next_page`` on;
    returns the page after its last."""
    page_size, usable = header.page_size, header.usable
    columns, types, levels = plan.columns, plan.sizes, plan.levels
    # Page numbers: the root stays where it is; every other page is appended, the leaves first, past the page
    # that holds the byte at 1 GiB, which SQLite keeps for its locks and never uses.
    lock_page = _PENDING_BYTE // page_size + 1
    numbers = []
    for depth, (s, _) in enumerate(levels):
        if depth == len(levels) - 1:
            numbers.append(np.array([root], dtype=np.int64))
        else:
            pages = np.arange(next_page, next_page + len(s) + 1, dtype=np.int64)
            pages = pages[pages != lock_page][: len(s)]
            numbers.append(pages)
            next_page = int(pages[-1]) + 1
    _write_leaves(fd, page_size, usable, columns, types, levels[0], numbers[0], progress, processes)
    _write_interiors(fd, page_size, usable, columns, types, levels, numbers)
    return next_page


def _write_leaves(fd, page_size, usable, columns, types, runs, numbers, progress, processes: int = 1) -> None:
    """Write the leaf pages, a batch at a time; with ``processes`` > 1, the batches are shared with forked
    processes (they inherit the rows, and write their pages to the file themselves)."""
    starts, ends = runs
    n_pages = len(starts)
    per_batch = max(1, BATCH // max(1, int((ends - starts).max()) + 1))
    batches = [(first, min(first + per_batch, n_pages)) for first in range(0, n_pages, per_batch)]
    args = (fd, page_size, usable, columns, types, starts, ends, numbers)
    helpers = []
    if processes > 1 and len(batches) > 1 and "fork" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("fork")
        for k in range(1, processes):
            helper = context.Process(target=_leaf_helper, args=(batches[k::processes], *args), daemon=True)
            helper.start()
            helpers.append(helper)
        mine = batches[0::processes]
    else:
        mine = batches
    try:
        for first, last in mine:
            _write_leaf_batch(first, last, *args)
            if progress:  # the helpers write the batches between these at the same pace
                progress(int(ends[last - 1]))
        for helper in helpers:
            helper.join()
            if helper.exitcode != 0:
                raise RuntimeError(f"a process writing index pages failed (exit code {helper.exitcode})")
        if progress:
            progress(int(ends[-1]))
    finally:
        for helper in helpers:
            if helper.is_alive():
                helper.kill()
                helper.join()


def _leaf_helper(batches, *args) -> None:
    """In a forked process: write ``batches`` of leaf pages, then leave at once (nothing of the parent's to
    clean up here: no atexit handlers, no buffers flushed twice)."""
    follow_parent(os.getppid())  # die with the parent, however it dies; Ctrl-C is the parent's to handle
    code = 1
    try:
        for first, last in batches:
            _write_leaf_batch(first, last, *args)
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def _write_leaf_batch(first, last, fd, page_size, usable, columns, types, starts, ends, numbers) -> None:
    lo, hi = int(starts[first]), int(ends[last - 1])  # the batch's entries (with the ones that go up)
    data, offsets = _cells([c[lo:hi] for c in columns], [z[lo:hi] for z in types])
    s, e = starts[first:last] - lo, ends[first:last] - lo
    counts = e - s
    length = offsets[e] - offsets[s]
    content = usable - length
    pages = np.zeros((last - first, page_size), dtype=np.uint8)
    pages[:, 0] = _LEAF
    pages[:, 3], pages[:, 4] = counts >> 8, counts & 0xFF
    pages[:, 5], pages[:, 6] = (content >> 8) & 0xFF, content & 0xFF  # 65536 is written as 0
    # Cell pointers: each cell's offset in its page, the cells laid in key order from `content` on.
    page_of = np.repeat(np.arange(last - first), counts)
    rank = np.arange(len(page_of)) - np.repeat(np.cumsum(counts) - counts, counts)
    entry = np.repeat(s, counts) + rank
    pointer = content[page_of] + offsets[entry] - offsets[s][page_of]
    column = 8 + 2 * rank
    pages[page_of, column] = pointer >> 8
    pages[page_of, column + 1] = pointer & 0xFF
    for p in range(last - first):
        pages[p, content[p] : usable] = data[offsets[s[p]] : offsets[e[p]]]
    _pwrite_pages(fd, pages, numbers[first:last], page_size)


def _write_interiors(fd, page_size, usable, columns, types, levels, numbers) -> None:
    for depth in range(1, len(levels)):
        # The entries of this level: those that went up from the level below, in order.
        entries = _promoted(levels, depth)
        data, offsets = _cells([c[entries] for c in columns], [z[entries] for z in types])
        starts, ends = levels[depth]
        children = numbers[depth - 1]
        for p, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            page = bytearray(page_size)
            cells = [
                children[i].item().to_bytes(4, "big") + data[offsets[i] : offsets[i + 1]].tobytes() for i in range(s, e)
            ]
            content = usable - sum(map(len, cells))
            page[0] = _INTERIOR
            page[3:5] = (e - s).to_bytes(2, "big")
            page[5:7] = (content & 0xFFFF).to_bytes(2, "big")
            page[8:12] = children[e].item().to_bytes(4, "big")  # the right-most child: the page after the last cell
            at = content
            for i, body in enumerate(cells):
                page[12 + 2 * i : 14 + 2 * i] = at.to_bytes(2, "big")
                page[at : at + len(body)] = body
                at += len(body)
            os.pwrite(fd, bytes(page), (int(numbers[depth][p]) - 1) * page_size)


def _promoted(levels, depth: int) -> np.ndarray:
    """The global row numbers of the entries held by the pages of level ``depth`` (in order)."""
    entries = levels[0][1][:-1]  # between the leaves
    for d in range(1, depth):
        entries = entries[levels[d][1][:-1]]
    return entries


def _pwrite_pages(fd: int, pages: np.ndarray, numbers: np.ndarray, page_size: int) -> None:
    """Write ``pages`` at their page ``numbers``, each run of consecutive numbers in one call."""
    breaks = np.flatnonzero(np.diff(numbers) != 1) + 1
    for run_pages, run_numbers in zip(np.split(pages, breaks), np.split(numbers, breaks), strict=True):
        view = memoryview(np.ascontiguousarray(run_pages).reshape(-1))
        offset, done = (int(run_numbers[0]) - 1) * page_size, 0
        while done < len(view):
            done += os.pwrite(fd, view[done:], offset + done)


def file_pages(path: str | os.PathLike[str]) -> int:
    """The page count in the header of the database at ``path`` (for tests)."""
    return int.from_bytes(Path(path).read_bytes()[28:32], "big")
