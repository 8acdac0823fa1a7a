"""The query log (``retrieval log on``): one row per search, similar or explain in the index's ``query_log`` table,
so that a later pass can plot hit counts, scores and latency over time.

Off by default, and per index: the ``index_info`` key ``query_log`` is ``on`` or ``off`` (absent means off; the
table exists from schema revision 0005). ``enable`` writes the key like any writer (the writers' lock, one
transaction); on an index without the table, turning the log on asks for ``retrieval upgrade`` first rather than
upgrading (copying, perhaps re-indexing) a whole index as the side effect of a switch.

Writing a row never fails the command that logs it. The row is written after the command's read snapshot has
ended, on a short writable connection of its own (searches read on a read-only one), opened only when the flag
is on: one ``BEGIN IMMEDIATE`` ... ``COMMIT`` with a busy timeout of ``BUSY_TIMEOUT_MS``. It does not take the
writers' ``flock``: a build or an add holds SQLite's write lock while it writes, so a row then waits at most the
busy timeout and is dropped, and waiting the writers' 120 s would stall a search. Any failure (a read-only
file or folder, a locked index, a full disk, an index without the table) drops the row and prints one warning
on stderr, once per process. ``synchronous = NORMAL`` on that connection: a power cut may lose the last rows of
the log, never the index (WAL mode).

``settings`` holds every field of the command's configuration (``RetrievalConfig``, ``EvidenceConfig``), not only
those that differ from the defaults, so a row means the same after a later version changes a default.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from ..errors import ConfigError, NotAnIndexError, RetrievalError, SchemaVersionError
from .backend import Backend, backend_of
from .database import KNOWN_REVISIONS, index_revision, store_error
from .sql.dialect import statement
from .sql.executor import Executor

#: The ``index_info`` key that switches the log, and its two values.
FLAG_KEY = "query_log"
ON, OFF = "on", "off"
#: The schema revision that added the ``query_log`` table.
LOG_REVISION = "0005"
#: The commands that log.
KINDS = ("search", "similar", "explain")
#: How long a row waits for another writer before it is dropped: a search is not held up noticeably.
BUSY_TIMEOUT_MS = 50
#: How long ``retrieval log on|off`` waits for another writer (as a saved evidence run does).
ENABLE_BUSY_TIMEOUT_MS = 10_000

FLAG_SQL = f"SELECT value FROM index_info WHERE key = '{FLAG_KEY}'"
SET_FLAG_SQL = (
    "INSERT INTO index_info (key, value) VALUES (:key, :value) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
COUNT_SQL = "SELECT count(*) FROM query_log"

INSERT_SQL = """\
INSERT INTO query_log (
    logged_at, kind, query, settings, hit_count, top_score, avg_score, wall_ms, gate_fired, result_ids,
    page_limit, page_offset
)
VALUES (
    :logged_at, :kind, :query, :settings, :hit_count, :top_score, :avg_score, :wall_ms, :gate_fired, :result_ids,
    :page_limit, :page_offset
)"""

COLUMNS = (
    "id", "logged_at", "kind", "query", "settings", "hit_count", "top_score", "avg_score", "wall_ms", "gate_fired",
    "result_ids", "page_limit", "page_offset",
)  # fmt: skip

ENTRIES_SQL = f"""\
SELECT {", ".join(COLUMNS)}
FROM query_log
WHERE logged_at >= :since
ORDER BY id"""
for _sql in (FLAG_SQL, SET_FLAG_SQL, COUNT_SQL, INSERT_SQL, ENTRIES_SQL):  # one text for both dialects
    statement(_sql)

#: Whether this process has said already that it cannot write the log (it says so once).
_warned = False


# -- the switch ---------------------------------------------------------------------------------------------------
def enable(path: str | os.PathLike[str] | Backend, on: bool) -> bool:
    """Turn the query log of the index at ``path`` on or off; returns whether it was on before. The rows
    already logged stay when it is turned off. An index at revision 0004 has no log: turning it on there raises
    ``SchemaVersionError`` naming ``retrieval upgrade`` (turning it off is a no-op)."""
    backend = backend_of(path)
    backend.check()  # an index this version reads (older revisions: the upgrade message)
    revision = index_revision(backend.location)
    if revision not in KNOWN_REVISIONS[KNOWN_REVISIONS.index(LOG_REVISION) :]:
        if on:
            raise SchemaVersionError(
                f"{backend.shown} has schema revision {revision!r}, which has no query log (it came with "
                f"{LOG_REVISION!r}): upgrade it once with `retrieval upgrade --db {backend.shown}`, then run "
                "`retrieval log on` again"
            )
        return False
    with backend.write_transaction(ENABLE_BUSY_TIMEOUT_MS, "switch the query log of") as conn:
        before = conn.execute(FLAG_SQL).fetchone()
        conn.execute(SET_FLAG_SQL, {"key": FLAG_KEY, "value": ON if on else OFF})
    return before is not None and before[0] == ON


def is_enabled(index: str | os.PathLike[str] | Mapping[str, str]) -> bool:
    """Whether queries on ``index`` are logged: ``index`` is the index's path (one primary-key read on a
    read-only connection of its own) or its ``index_info`` as a snapshot read it (no read at all)."""
    if isinstance(index, Mapping):
        return index.get(FLAG_KEY) == ON
    rows = _read(backend_of(index), "query log: is it on", FLAG_SQL)
    return bool(rows) and rows[0][0] == ON


def _read(backend: Backend, name: str, sql: str, params: Mapping[str, object] | None = None) -> list[tuple]:
    """The rows of ``sql`` on a read-only connection of its own to the index of ``backend``."""
    conn = backend.connect()
    try:
        return Executor(conn, None, backend.location).rows(name, sql, params)
    finally:
        conn.close()


# -- writing ------------------------------------------------------------------------------------------------------
def record_if_enabled(
    path: str | os.PathLike[str],
    kind: str,
    query: object,
    config: object,
    result: object,
    info: Mapping[str, str] | None = None,
    **details,
) -> bool:
    """``record`` if the log of the index at ``path`` is on; never raises (see ``record``). Call it after the
    command's read snapshot has ended; ``info``, the ``index_info`` that snapshot read, saves a read."""
    try:
        on = is_enabled(path if info is None else info)
    except Exception as exc:  # the log never fails a search
        _warn(path, exc)
        return False
    return record(path, kind, query, config, result, **details) if on else False


def record(
    path: str | os.PathLike[str],
    kind: str,
    query: object,
    config: object,
    result: object,
    *,
    limit: int | None = None,
    offset: int | None = None,
    ids: list[str] | None = None,
    extra: Mapping[str, object] | None = None,
) -> bool:
    """Append one row for a ``kind`` command (search, similar, explain) that ran ``query`` (a string, or an object
    with ``.text``) under ``config`` (an object with ``to_dict()``, or a mapping) and returned ``result``: a
    ``RetrievalResult`` (hit count, scores, wall time, the gate, the filters, the returned entries), a
    ``SimilarResult`` (its matched count, the returned entries and their scores; no gate) or an ``EvidenceRun``
    (its ranking and returned papers; no gate). ``ids`` overrides the returned ids, ``limit`` and ``offset`` say
    which page was asked for (``offset`` defaults to the result's own, ``limit`` of an ``EvidenceRun`` to its
    ``top_k``); ``extra`` adds settings that are not configuration fields (filters, say) to ``settings``.

    True when the row was written. Never raises: a failure is one warning on stderr per process, and False.
    """
    try:
        row = _row(kind, query, config, result, limit, offset, ids, extra)
        with backend_of(path).log_transaction(BUSY_TIMEOUT_MS) as conn:
            conn.execute(INSERT_SQL, row)
        return True
    except Exception as exc:  # the log never fails a search
        _warn(path, exc)
        return False


def _row(kind: str, query: object, config: object, result: object, limit, offset, ids, extra) -> dict:
    from datetime import datetime, timezone  # only when a row is written: a plain search does not import it

    if kind not in KINDS:
        raise ConfigError(f"a query log row is of kind {', '.join(KINDS)}, got {kind!r}")
    if hasattr(result, "ranked"):  # RetrievalResult, SimilarResult
        returned = [entry.paper.id for entry in result.ranked]
        gate = (getattr(result, "expansion", None) or {}).get("gate") or {}
        fired = gate.get("fired")
        # A result without the search's metrics (similar): its matched count, and the scores of what it returned.
        page = [getattr(entry, "final_score", getattr(entry, "score", 0.0)) for entry in result.ranked]
        numbers = (
            getattr(result, "hit_count", getattr(result, "matched", len(page))),
            getattr(result, "top_score", max(page, default=0.0)),
            getattr(result, "average_score", sum(page) / len(page) if page else 0.0),
            result.wall_time_ms,
        )
    elif hasattr(result, "ranking"):  # EvidenceRun
        scores = [score for _, score in result.ranking]
        returned = [pid for pid, _ in result.top]
        fired = None
        mean = sum(scores) / len(scores) if scores else 0.0
        numbers = (len(scores), max(scores, default=0.0), mean, result.timings_ms.get("total", 0.0))
        if limit is None:
            limit = result.config.top_k
    else:
        raise ConfigError(f"cannot log a {type(result).__name__}: give a RetrievalResult or an EvidenceRun")
    if config is None:
        config = getattr(result, "config", None)
    settings = dict(config) if isinstance(config, Mapping) else (config.to_dict() if config is not None else {})
    filters = getattr(result, "filters", None)
    if filters:  # the search's filters (years, authors) are settings too
        settings["filters"] = filters.to_dict()
    settings.update(extra or {})
    if offset is None:
        offset = getattr(result, "offset", 0)
    hit_count, top_score, avg_score, wall_ms = numbers
    return {
        "logged_at": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
        "kind": kind,
        "query": query if isinstance(query, str) else str(getattr(query, "text", query)),
        "settings": json.dumps(settings, ensure_ascii=False, default=str),
        "hit_count": int(hit_count),
        "top_score": float(top_score),
        "avg_score": float(avg_score),
        "wall_ms": float(wall_ms),
        "gate_fired": None if fired is None else bool(fired),
        "result_ids": json.dumps(list(returned if ids is None else ids), ensure_ascii=False),
        "page_limit": limit,
        "page_offset": offset or 0,
    }


def _warn(path: str | os.PathLike[str], exc: BaseException) -> None:
    """Say once per process that the log cannot be written, and why."""
    global _warned
    if _warned:
        return
    _warned = True
    text = str(exc).lower()
    if "no such table" in text or ("query_log" in text and "does not exist" in text):
        why = f"{path} has no query_log table: upgrade it with `retrieval upgrade --db {path}`"
    elif _is_store_error(path, exc):
        why = str(backend_of(path).error(exc, "write the query log to"))
    else:
        why = str(exc) if isinstance(exc, RetrievalError) else f"{type(exc).__name__}: {exc}"
    text = f"retrieval: warning: the query log is on but queries are not being logged ({why})"
    from contextlib import suppress  # only on a failure (a search process does not import contextlib)

    with suppress(Exception):  # an unprintable warning is no reason to fail a search
        print(text, file=sys.stderr)


def _is_store_error(path: str | os.PathLike[str], exc: BaseException) -> bool:
    try:
        return backend_of(path).is_error(exc)
    except RetrievalError:  # not a location at all: the message says so already
        return False


# -- reading ------------------------------------------------------------------------------------------------------
def since_bound(since: object) -> str:
    """``since`` (an ISO 8601 date or time as text, a ``date`` or a ``datetime``; a time without a zone is UTC) as
    the text ``logged_at`` is compared with."""
    from datetime import date, datetime, timezone

    if isinstance(since, datetime):
        moment = since
    elif isinstance(since, date):
        moment = datetime(since.year, since.month, since.day)
    else:
        text = str(since).strip()
        try:
            moment = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise ConfigError(
                f"expected a date or a time in ISO 8601 (2026-12-01, 2026-12-01T09:30, 2026-12-01T09:30:00+01:00), "
                f"got {text!r}"
            ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds")


def entries(path: str | os.PathLike[str], since: object = None) -> list[dict]:
    """The logged rows of the index at ``path``, oldest first (from ``since`` on when given, see
    ``since_bound``): dicts of the table's columns, with ``settings`` and ``result_ids`` decoded from JSON and
    ``gate_fired`` True, False or None. An index at revision 0004 has none."""
    bound = "" if since is None else since_bound(since)
    backend = backend_of(path)
    backend.check()
    conn = backend.connect()
    try:
        executor = Executor(conn, None, backend.location)
        if not backend.has_table(executor.rows, "query_log"):
            return []
        rows = executor.rows("query log: entries", ENTRIES_SQL, {"since": bound})
    finally:
        conn.close()
    out = []
    for values in rows:
        entry = dict(zip(COLUMNS, values, strict=True))
        for column in ("settings", "result_ids"):
            try:
                entry[column] = json.loads(entry[column])
            except (TypeError, ValueError, RecursionError):  # a row changed by hand
                raise NotAnIndexError(
                    f"{backend.shown} is damaged: the query log's row {entry['id']!r} (logged at "
                    f"{entry['logged_at']}) holds {column} that is not JSON: delete that row of query_log, or read "
                    "the log from a time after it (`retrieval log --since TIME`)"
                ) from None
        entry["gate_fired"] = None if entry["gate_fired"] is None else bool(entry["gate_fired"])
        out.append(entry)
    return out


def plot(rows: list[dict], out: str | os.PathLike[str], title: str = "query log") -> Path:
    """Draw ``rows`` (from ``entries``) as a PNG at ``out``: hit count, top score and wall time over time, one
    panel each, a marker per query and colour per kind. matplotlib's Agg canvas, no pyplot (no display needed)."""
    from datetime import datetime

    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise RetrievalError(
            "the query log plot needs matplotlib: install it with `pip install 'retrieval[eval]'`"
        ) from None
    if not rows:
        raise RetrievalError("the query log has no entries to plot (is it on? `retrieval log on`)")
    out = Path(out)
    fig = Figure(figsize=(10.0, 7.5), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(3, 1, sharex=True)
    panels = (("hit_count", "hit count"), ("top_score", "top score"), ("wall_ms", "wall time (ms)"))
    kinds = [kind for kind in KINDS if any(row["kind"] == kind for row in rows)]
    for ax, (column, label) in zip(axes, panels, strict=True):
        for i, kind in enumerate(kinds):
            mine = [row for row in rows if row["kind"] == kind]
            times = [datetime.fromisoformat(row["logged_at"]) for row in mine]
            ax.plot(times, [row[column] for row in mine], marker="o", markersize=3, linestyle="-", linewidth=0.6,
                    color=f"C{i}", label=kind)  # fmt: skip
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[0].set_title(f"{title}: {len(rows):,} queries", fontsize=10)
    axes[0].legend(fontsize=8, loc="best")
    axes[-1].set_xlabel("time (UTC)")
    fig.autofmt_xdate()
    try:
        fig.savefig(out, format="png", metadata={"Software": None})
    except OSError as exc:
        raise store_error(exc, out, "write") from None
    return out
