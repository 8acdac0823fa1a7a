"""A PostgreSQL build cleans up after earlier killed builds: their schemas on the server and their folders in the
temporary folder, and never a running build's (``retrieval.store.postgres.build``, "After a killed build").

The killed builds are real processes (``retrieval build``) killed with SIGKILL at three points: in the SQLite
phase (only the folder exists), during the load into the new schema, and in the middle of the swap; each runs
with its own ``TMPDIR``, so no other user's or test's folders are looked at.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from retrieval import commands
from retrieval.commands import build
from retrieval.store.postgres import build as pgbuild
from tests.helpers import corpus, paper, write_jsonl

psycopg = pytest.importorskip("psycopg")

#: Seconds a test waits for a build to reach a point, or for the server to end a killed build's session.
WAIT = 60.0


def _pg(url: str):
    return psycopg.connect(url, autocommit=True)


def _schemas(url: str) -> set[str]:
    """The schemas of the database whose names begin as the index's do."""
    with _pg(url) as conn:
        return {row[0] for row in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'retrieval%'")}


def _marked(url: str) -> set[str]:
    """The schemas marked as a build's."""
    with _pg(url) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE obj_description(oid, 'pg_namespace') = %s", (pgbuild.BUILD_MARK,)
        )
        return {row[0] for row in rows}


def _folders(tmpdir: Path) -> set[str]:
    return {path.name for path in tmpdir.glob("retrieval-pgbuild-*")}


def _papers(url: str) -> list[str]:
    with _pg(url) as conn:
        return [row[0] for row in conn.execute('SELECT id FROM "retrieval".papers ORDER BY id')]


def _statement(monitor, like: str, waiting: bool = False) -> bool:
    """Whether another session of the monitor's database runs a statement that begins as ``like`` (waiting for a
    lock). One connection polls: a new one per look could miss a short load."""
    row = monitor.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND state = 'active' AND query LIKE %s AND (NOT %s OR wait_event_type = 'Lock')",
        (like + "%", waiting),
    ).fetchone()
    return row[0] > 0


def _sessions(monitor) -> int:
    """Other client sessions connected to the monitor's database."""
    return monitor.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend'"
    ).fetchone()[0]


def _until(condition, proc: subprocess.Popen | None, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert proc is None or proc.poll() is None, f"the build ended before {what}"
        assert time.monotonic() < deadline, f"no {what} after {WAIT:.0f} s"
        time.sleep(0.01)


def _cli_build(url: str, source: Path, tmpdir: Path, log: Path, *extra: str) -> subprocess.Popen:
    """``retrieval build`` of ``source`` into ``url`` in a process of its own, ``tmpdir`` its temporary folder."""
    env = {**os.environ, "TMPDIR": str(tmpdir)}
    command = [sys.executable, "-m", "retrieval", "build", "--from", str(source), "--db", url, *extra]
    with open(log, "ab") as err:
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=err)


@pytest.mark.parametrize("point", ["sqlite", "copy", "swap"])
def test_a_build_removes_what_a_build_killed_at_any_point_left(tmp_path, pg_database, point):
    url = pg_database(f"kill{point}")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    log = tmp_path / "stderr.txt"
    first = write_jsonl(tmp_path / "first.jsonl", [paper("a", "black hole entropy"), paper("b", "string theory")])
    assert _cli_build(url, first, tmpdir, log).wait(timeout=WAIT) == 0, log.read_text()
    big = corpus(tmp_path / "big.jsonl", 20000 if point == "sqlite" else 4000, "k")
    blocker = None
    if point == "swap":  # the swap's last statement waits for this transaction: killed with its renames done
        blocker = _pg(url)
        blocker.execute("BEGIN")
        database = blocker.execute("SELECT current_database()").fetchone()[0]
        blocker.execute(f'ALTER DATABASE "{database}" SET search_path = "retrieval", public')
    monitor = _pg(url)
    killed = _cli_build(url, big, tmpdir, log, "--workers", "0")
    try:
        if point == "sqlite":
            _until(lambda: any((tmpdir / name).iterdir() for name in _folders(tmpdir)), killed, "folder with a file")
            assert _marked(url) == set()  # the schema comes after the SQLite phase
        elif point == "copy":
            _until(lambda: _statement(monitor, "COPY"), killed, "load into the new schema")
        else:
            _until(lambda: _statement(monitor, "ALTER DATABASE", waiting=True), killed, "swap waiting")
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=WAIT)
        if blocker is not None:
            blocker.execute("ROLLBACK")
            blocker.close()
    assert killed.returncode == -signal.SIGKILL
    _until(lambda: _sessions(monitor) == 0, None, "end of the killed build's session")
    monitor.close()

    left_folders, left_schemas = _folders(tmpdir), _marked(url)
    assert len(left_folders) == 1  # what the issue is about: nothing removes these by itself
    assert all(name.startswith("retrieval_build_") for name in left_schemas)
    assert len(left_schemas) == (0 if point == "sqlite" else 1)
    assert _schemas(url) == {"retrieval", *left_schemas}  # the swap left no retrieval_old_* schema either
    assert _papers(url) == ["a", "b"]  # and the index is the one before the killed build

    again = write_jsonl(tmp_path / "again.jsonl", [paper("x", "entanglement entropy"), paper("y", "holography")])
    assert _cli_build(url, again, tmpdir, log).wait(timeout=WAIT) == 0, log.read_text()
    assert _folders(tmpdir) == set()
    assert _schemas(url) == {"retrieval"}
    assert [r.paper.id for r in commands.search("entanglement", db=url).ranked] == ["x"]


def test_a_build_leaves_a_running_builds_schema_and_folder(tmp_path, pg_database, monkeypatch):
    """Only what has no owner is removed: a running build's schema and folder (their locks held here, as a build
    holds them), unmarked schemas (an older version's) and anything else named alike stay."""
    url = pg_database("live")
    build(db=url, source=write_jsonl(tmp_path / "a.jsonl", [paper("a", "black hole entropy")]))
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))

    live = _pg(url)  # a build that is running: its session holds its schema's lock
    pgbuild.claim_schema(live, "retrieval_build_1_1")
    gone = _pg(url)  # a build killed after it made its schema: its session ended
    pgbuild.claim_schema(gone, "retrieval_build_2_2")
    gone.close()
    with _pg(url) as conn:
        conn.execute('CREATE SCHEMA "retrieval_build_3_3"')  # an older version's: no mark, never taken for dead
        conn.execute('CREATE SCHEMA "retrieval_build_x"')  # marked, but not a name a build gives
        conn.execute('COMMENT ON SCHEMA "retrieval_build_x" IS \'' + pgbuild.BUILD_MARK.replace("'", "''") + "'")

    dead = tmpdir / "retrieval-pgbuild-dead0000"  # a killed build's folder: nobody holds its lock
    (dead / "sub").mkdir(parents=True)
    (dead / "sub" / "index.db").write_bytes(b"half an index")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("not ours")
    (tmpdir / "retrieval-pgbuild-link0000").symlink_to(elsewhere)
    (tmpdir / "retrieval-pgbuild-file0000").write_text("a file, not a build's folder")
    (tmpdir / "retrieval-pgbuild-").mkdir()  # tempfile never makes an empty name
    (tmpdir / "retrieval-shardbuild-abcd1234").mkdir()  # a sharded build's: not this build's to judge
    with pgbuild.build_folder() as running:
        assert running.parent == tmpdir
        build(db=url, source=write_jsonl(tmp_path / "b.jsonl", [paper("b", "string theory")]))
        assert running.is_dir()
        assert not dead.exists()
        assert (elsewhere / "keep.txt").exists() and (tmpdir / "retrieval-pgbuild-link0000").is_symlink()
        assert (tmpdir / "retrieval-pgbuild-file0000").is_file() and (tmpdir / "retrieval-pgbuild-").is_dir()
        assert (tmpdir / "retrieval-shardbuild-abcd1234").is_dir()
        assert _schemas(url) == {"retrieval", "retrieval_build_1_1", "retrieval_build_3_3", "retrieval_build_x"}
        assert _marked(url) == {"retrieval_build_1_1", "retrieval_build_x"}  # the index itself carries no mark
        assert _papers(url) == ["b"]

        live.close()  # the running build is gone now: the next build removes its schema, not the folder yet
        build(db=url, source=write_jsonl(tmp_path / "c.jsonl", [paper("c", "gauge theory")]))
        assert _schemas(url) == {"retrieval", "retrieval_build_3_3", "retrieval_build_x"}
        assert running.is_dir()
    assert not running.exists()  # the block's end removes its own folder


def test_a_schema_that_cannot_be_dropped_is_a_warning_not_a_failure(tmp_path, pg_database, monkeypatch):
    url = pg_database("stuck")
    build(db=url, source=write_jsonl(tmp_path / "a.jsonl", [paper("a", "black hole entropy")]))
    gone = _pg(url)
    pgbuild.claim_schema(gone, "retrieval_build_4_4")
    gone.execute('CREATE TABLE "retrieval_build_4_4".t (x int)')
    gone.close()
    reader = _pg(url)  # someone reading a table of it (a DBA looking): the drop waits, then gives up
    reader.execute("BEGIN")
    reader.execute('SELECT * FROM "retrieval_build_4_4".t')
    monkeypatch.setattr(pgbuild, "DROP_LOCK_TIMEOUT", 1)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    try:
        summary = build(db=url, source=write_jsonl(tmp_path / "b.jsonl", [paper("b", "string theory")]))
    finally:
        reader.execute("ROLLBACK")
        reader.close()
    assert [w for w in summary.warnings if "retrieval_build_4_4" in w and "drop it by hand" in w]
    assert _papers(url) == ["b"]
    assert build(db=url, source=write_jsonl(tmp_path / "c.jsonl", [paper("c", "gauge")])).warnings == []
    assert _schemas(url) == {"retrieval"}  # once nobody reads it, the next build drops it
