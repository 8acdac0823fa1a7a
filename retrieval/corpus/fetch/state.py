"""A fetch's files beside its output, and how a fetch that was killed continues where it stopped.

For an output ``papers.jsonl`` a running fetch keeps, in the same folder:

- ``papers.jsonl.partial``, the journal: the records fetched so far, one per line, appended a page at a time
  (written, flushed and fsynced before the state says so);
- ``papers.jsonl.fetch-state.json``, the state: the request (source, query, filters, bounds), the phase (the
  search, then the references, then the citing papers), where the next page starts (a cursor, a token, an offset),
  the journal's committed length in bytes and the counts so far; replaced atomically (a new file renamed over it)
  after each page;
- ``papers.jsonl.fetch-lock``, a lock (``flock``) that a second fetch to the same output finds taken.

A page is committed when the state that covers it is renamed into place. A fetch killed at any moment (SIGKILL
included) leaves a state and a journal whose first ``journal_bytes`` bytes are exactly the committed pages: the
next run with the same request cuts the journal back to that length (dropping a page appended but not committed),
reads the ids and DOIs it holds, and asks for the next page from the saved position. So no record is written
twice and none is skipped; a run with another request is refused (``--restart`` discards the old one).

Only when every phase is done is the output written: the journal's records with papers found twice under two ids
(one DOI) merged into the first, references to the dropped id rewritten to the kept one, to a temporary file
renamed over the output (fsynced, then the folder). Until then the output is left as it was, and a failed or
interrupted fetch leaves nothing half-written under its name; a fetch that fails before its first page is
committed leaves no file at all.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from ...errors import FetchError
from .records import merge

#: The state file's format; a state of another version is refused with what to do.
STATE_VERSION = 1
JOURNAL_SUFFIX = ".partial"
STATE_SUFFIX = ".fetch-state.json"
LOCK_SUFFIX = ".fetch-lock"
TEMP_SUFFIX = ".fetch-tmp"
#: Reasons kept for records skipped as unreadable (the summary quotes them).
REASONS_KEPT = 3


def side_files(out: str | os.PathLike[str]) -> dict[str, Path]:
    """The files a fetch to ``out`` keeps beside it: ``journal``, ``state``, ``lock`` and ``temp``."""
    out = Path(out)
    return {
        "journal": out.with_name(out.name + JOURNAL_SUFFIX),
        "state": out.with_name(out.name + STATE_SUFFIX),
        "lock": out.with_name(out.name + LOCK_SUFFIX),
        "temp": out.with_name(out.name + TEMP_SUFFIX),
    }


@contextlib.contextmanager
def _writing(path: Path, doing: str) -> Iterator[None]:
    """Turn a failure to write ``path`` into a ``FetchError`` that says what failed and what to do."""
    try:
        yield
    except OSError as exc:
        raise FetchError(
            f"cannot {doing} {path} ({exc.strerror or exc}): check that the folder exists, may be written to and "
            "has free space"
        ) from None


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a platform without directory handles: the rename is as durable as it gets there
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class FetchRun:
    """The output, journal and state of one fetch (use it as a context manager: ``with FetchRun(...) as run``).

    ``request`` (a JSON-able dict) identifies the fetch: a state saved for another request is refused, or
    discarded with ``restart``. ``phases`` are the fetch's phases in order; ``run.phase`` is the current one and
    ``run.position`` where it continues (``{}`` at its start)."""

    def __init__(
        self, out: str | os.PathLike[str], source: str, request: dict, phases: list[str], restart: bool = False
    ) -> None:
        self.out = Path(out)
        files = side_files(self.out)
        self.journal_path = files["journal"]
        self.state_path = files["state"]
        self.lock_path = files["lock"]
        self.temp_path = files["temp"]
        self.source = source
        self.request = json.loads(json.dumps(request))  # what a saved state compares equal to
        self.phases = [*phases, "finalize"]
        self.restart = restart
        self.resumed = False
        self.seen: set[str] = set()
        self.dois: dict[str, str] = {}
        self.state: dict = {}
        self._journal = None
        self._lock = None
        self.pending: dict[str, int] = {}  # tallies noted since the last commit

    # -- opening: the lock, the state, the journal --------------------------------------------------------------
    def __enter__(self) -> FetchRun:
        folder = self.out.parent
        if not folder.is_dir():
            raise FetchError(f"the folder {folder} does not exist: create it, or give another --out")
        self._take_lock()
        try:
            self._load()
        except BaseException:
            self._release_lock()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        self._release_lock()

    def _take_lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # no flock on this platform: two fetches to one output are the user's to avoid
            return
        with _writing(self.lock_path, "create the lock file"):
            handle = open(self.lock_path, "a+b")  # noqa: SIM115 - held until the fetch ends
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise FetchError(
                f"another `retrieval fetch` is writing {self.out} now: wait for it to finish, or give another --out"
            ) from None
        self._lock = handle

    def _release_lock(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                self.lock_path.unlink()  # removed while held: a fetch that waits for it finds a fresh one
            self._lock.close()
            self._lock = None

    def _load(self) -> None:
        if self.restart:
            self._discard()
        if not self.state_path.exists():
            # No state: nothing was committed (a journal without one is a first page that was not).
            self.journal_path.unlink(missing_ok=True)
            self.state = self._fresh_state()
            return
        try:
            state = json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            reason = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise FetchError(
                f"cannot read {self.state_path} ({reason}): add --restart to start the fetch over (it removes it)"
            ) from None
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise FetchError(
                f"{self.state_path} was written by another version of retrieval: add --restart to start over"
            )
        if state.get("request") != self.request:
            raise FetchError(
                f"{self.state_path} belongs to an unfinished fetch with other options "
                f"({_difference(state.get('request') or {}, self.request)}): run that fetch again to finish it, "
                "or add --restart to discard it and start this one"
            )
        self.state = state
        self.resumed = True
        self._recover_journal()

    def _fresh_state(self) -> dict:
        return {
            "version": STATE_VERSION,
            "source": self.source,
            "request": self.request,
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "phase": self.phases[0],
            "position": {},
            "journal_bytes": 0,
            "lines": {},
            "counts": {},
            "tallies": {},
            "reasons": [],
            "seconds": 0.0,
        }

    def _recover_journal(self) -> None:
        """Cut the journal back to its committed length and read the ids and DOIs it holds."""
        committed = int(self.state.get("journal_bytes", 0))
        size = self.journal_path.stat().st_size if self.journal_path.exists() else 0
        if size < committed:
            raise FetchError(
                f"{self.journal_path} is shorter than {self.state_path} says ({size:,} of {committed:,} bytes): it "
                "was changed by hand; add --restart to start the fetch over"
            )
        if size > committed:  # a page appended by a fetch killed before its state was saved
            with _writing(self.journal_path, "truncate"), open(self.journal_path, "r+b") as handle:
                handle.truncate(committed)
                os.fsync(handle.fileno())
        for record in self.records():
            self._remember(record)

    def _discard(self) -> None:
        for path in (self.state_path, self.journal_path, self.temp_path):
            with _writing(path, "remove"):
                path.unlink(missing_ok=True)

    # -- reading --------------------------------------------------------------------------------------------
    @property
    def phase(self) -> str:
        return self.state["phase"]

    @property
    def position(self) -> dict:
        return self.state["position"]

    def count(self, phase: str) -> int:
        """Papers the phase ``phase`` added (new ids under new DOIs)."""
        return int(self.state["counts"].get(phase, 0))

    @property
    def papers(self) -> int:
        """Distinct papers committed so far."""
        return sum(int(v) for v in self.state["counts"].values())

    def records(self, phase: str | None = None) -> Iterator[dict]:
        """The committed records, in the order they were fetched; only those of ``phase`` when given."""
        first, last = 0, None
        if phase is not None:
            lines = self.state["lines"]
            before = self.phases[: self.phases.index(phase)]
            first = sum(int(lines.get(p, 0)) for p in before)
            last = first + int(lines.get(phase, 0))
        if not self.journal_path.exists():
            return
        committed = int(self.state.get("journal_bytes", 0))
        with open(self.journal_path, "rb") as handle:
            read = 0
            for number, line in enumerate(handle):
                read += len(line)
                if read > committed or (last is not None and number >= last):
                    break
                if number >= first:
                    yield json.loads(line)

    def _remember(self, record: dict) -> None:
        self.seen.add(record["id"])
        doi = record.get("doi")
        if doi and doi not in self.dois:
            self.dois[doi] = record["id"]

    # -- writing --------------------------------------------------------------------------------------------
    def tally(self, key: str, n: int = 1, reason: str | None = None) -> None:
        """Count ``n`` more of ``key`` (``skipped``, ``years_dropped``, ...), saved with the next commit; a
        ``reason`` is kept for the summary (the first few)."""
        self.pending[key] = self.pending.get(key, 0) + n
        if reason and len(self.state["reasons"]) < REASONS_KEPT and reason not in self.state["reasons"]:
            self.state["reasons"].append(reason)

    def note(self, key: str, value: object) -> None:
        """Keep ``value`` under ``key`` in the state (the API's count of matches), saved with the next commit."""
        self.state[key] = value

    def commit(self, records: list[dict], position: dict, finished: bool = False, limit: int | None = None) -> int:
        """Append the records not seen before (at most ``limit`` new papers) and save the state with the phase's
        next ``position`` (or, ``finished``, the next phase): one page, committed. Returns the new papers.

        A record whose id was seen is skipped; one with a new id and a DOI seen under another id is kept in the
        journal and merged into the first when the output is written (it is not a new paper)."""
        phase = self.phase
        lines: list[bytes] = []
        added = 0
        for record in records:
            if limit is not None and added >= limit:
                break
            if record["id"] in self.seen:
                self.tally("duplicates")
                continue
            doi = record.get("doi")
            if not (doi and doi in self.dois):
                added += 1
            else:
                self.tally("merged")
            self._remember(record)
            lines.append((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
        if lines:
            data = b"".join(lines)
            with _writing(self.journal_path, "write to"):
                if self._journal is None:
                    self._journal = open(self.journal_path, "ab")  # noqa: SIM115 - closed by __exit__
                self._journal.write(data)
                self._journal.flush()
                os.fsync(self._journal.fileno())
            self.state["journal_bytes"] = int(self.state["journal_bytes"]) + len(data)
            self.state["lines"][phase] = int(self.state["lines"].get(phase, 0)) + len(lines)
        self.state["counts"][phase] = self.count(phase) + added
        tallies = self.state["tallies"]
        for key, n in self.pending.items():
            tallies[key] = int(tallies.get(key, 0)) + n
        self.pending = {}
        if finished:
            self.state["phase"] = self.phases[self.phases.index(phase) + 1]
            self.state["position"] = {}
        else:
            self.state["position"] = position
        self.save()
        return added

    def skip_to(self, phase: str) -> None:
        """Go on to ``phase`` (a later one) at once: the phases between are not asked for."""
        if self.phases.index(phase) > self.phases.index(self.phase):
            self.state["phase"] = phase
            self.state["position"] = {}
            self.save()

    def add_seconds(self, seconds: float) -> None:
        """Count ``seconds`` more spent on the fetch (saved with the next commit or ``save``)."""
        self.state["seconds"] = float(self.state.get("seconds", 0.0)) + seconds

    def save(self) -> None:
        """Write the state to a temporary file and rename it over the state file (fsynced: a commit)."""
        text = json.dumps(self.state, ensure_ascii=False, indent=1)
        temporary = self.state_path.with_name(self.state_path.name + ".tmp")
        with _writing(self.state_path, "save the fetch's state in"):
            with open(temporary, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.state_path)
        _fsync_folder(self.state_path.parent)

    # -- the output -----------------------------------------------------------------------------------------
    def finalize(self) -> dict:
        """Write the output (see the module docstring) and remove the journal and the state; returns what the
        set holds: ``papers``, ``with_abstract``, ``with_references``, ``references`` and ``in_corpus``
        (references to papers of the set: the citation edges a build makes), ``merged`` (papers found twice)."""
        alias: dict[str, str] = {}
        extra: dict[str, list[dict]] = {}
        first_by_doi: dict[str, str] = {}
        ids: set[str] = set()
        for record in self.records():
            doi = record.get("doi")
            kept = first_by_doi.get(doi) if doi else None
            if kept is not None:
                alias[record["id"]] = kept
                extra.setdefault(kept, []).append(record)
            else:
                ids.add(record["id"])
                if doi:
                    first_by_doi[doi] = record["id"]
        stats = {"papers": 0, "with_abstract": 0, "with_references": 0, "references": 0, "in_corpus": 0}
        opener = gzip.open if self.out.name.endswith(".gz") else open
        with _writing(self.temp_path, "write"):
            with opener(self.temp_path, "wb") as handle:
                for record in self.records():
                    if record["id"] in alias:
                        continue
                    for other in extra.get(record["id"], ()):
                        record = merge(record, other)
                    refs = [alias.get(r, r) for r in record.get("references", [])]
                    record["references"] = [r for r in dict.fromkeys(refs) if r != record["id"]]
                    handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
                    stats["papers"] += 1
                    stats["with_abstract"] += bool(record.get("abstract"))
                    stats["with_references"] += bool(record["references"])
                    stats["references"] += len(record["references"])
                    stats["in_corpus"] += sum(1 for r in record["references"] if r in ids)
                handle.flush()
                if hasattr(handle, "fileno"):
                    os.fsync(handle.fileno())
            if opener is gzip.open:  # gzip's file object closes its own handle: sync the bytes it wrote
                fd = os.open(self.temp_path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        with _writing(self.out, "replace"):
            os.replace(self.temp_path, self.out)
        _fsync_folder(self.out.parent)
        stats["merged"] = len(alias)
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        for path in (self.state_path, self.journal_path):
            path.unlink(missing_ok=True)
        return stats


def _difference(then: dict, now: dict) -> str:
    """The options that differ between two requests, shortly: ``max: 2000 then, 3000 now``."""
    keys = [k for k in sorted(set(then) | set(now)) if then.get(k) != now.get(k)]
    shown = [f"{k}: {json.dumps(then.get(k))} then, {json.dumps(now.get(k))} now" for k in keys[:3]]
    return "; ".join(shown) + (f" and {len(keys) - 3} more" if len(keys) > 3 else "")
