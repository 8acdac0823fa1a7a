"""No lost index: rebuilds over a WAL index whatever else has it open or left behind, killed builds and adds,
environment failures, hostile queries, records and index files. Other processes are real processes.

Each test says what it tries; the counts of cases go to the issue note (``pytest -m slow tests/test_reliability.py``
runs the long kill loops too).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retrieval import ConfigError, InputError, RetrievalClient, RetrievalConfig, RetrievalError
from retrieval.commands import add, build, remove
from retrieval.corpus.paper import Paper
from retrieval.interfaces.cli import main
from retrieval.store.sqlite import files
from retrieval.store.sqlite.build import build_index
from retrieval.store.writer import add_papers
from tests.helpers import corpus


def dump(db: Path) -> dict[str, list]:
    """Every row of every table, sorted: the index's content, to compare before and after."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY 1")]
        return {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall(), key=repr) for t in tables}
    finally:
        conn.close()


def healthy(db: Path) -> int:
    """``PRAGMA integrity_check`` passes and a search answers; returns the number of papers."""
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()
    with RetrievalClient(db) as client:
        client.search("w1 w2")
        return client.stats.n_papers


def cli(*argv: str, cwd: Path | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "retrieval", *argv], cwd=cwd, capture_output=True, text=True, **kwargs)


def spawn(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# A reader in another process: opens the index, answers one search per line on stdin ("hold" keeps a read
# transaction open until the next line), and prints the number of papers it saw.
READER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1])
for line in sys.stdin:
    line = line.strip()
    if line == "hold":
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM papers").fetchone()
    elif line == "release":
        conn.execute("COMMIT")
    elif line == "quit":
        break
    print(conn.execute("SELECT count(*) FROM papers").fetchone()[0], flush=True)
conn.close()
"""


def ask(reader: subprocess.Popen, line: str) -> str:
    reader.stdin.write(line + "\n")
    reader.stdin.flush()
    return reader.stdout.readline().strip()


@pytest.fixture(autouse=True)
def _ctrl_c_as_at_a_terminal():
    """A test that sends this process a SIGINT needs it delivered, as a terminal's process has it: a runner started
    in the background (`pytest &`) starts with SIGINT ignored, which ``main`` leaves ignored, as Python does."""
    before = signal.getsignal(signal.SIGINT)
    if before == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


@pytest.fixture
def base(tmp_path) -> tuple[Path, Path, Path]:
    """An index of 300 papers, 40 more to add, and another corpus of 200 to rebuild from."""
    first = corpus(tmp_path / "first.jsonl", 300, "a")
    more = corpus(tmp_path / "more.jsonl", 40, "m", seed=2)
    other = corpus(tmp_path / "other.jsonl", 200, "o", seed=3)
    db = tmp_path / "x.db"
    build(db=db, source=first)
    return db, more, other


# -- 1. rebuilds over a WAL index ------------------------------------------------------------------------------


def test_rebuild_after_an_add_while_a_reader_stays_open(base):
    db, more, other = base
    reader = spawn(READER, str(db))
    try:
        assert ask(reader, "count") == "300"
        assert cli("add", str(more), "--db", str(db)).returncode == 0
        assert ask(reader, "count") == "340"
        assert cli("build", "--from", str(other), "--db", str(db)).returncode == 0
        assert ask(reader, "count") == "200"  # the open reader sees the new index, not a mix
        ask(reader, "quit")  # its close checkpoints: the old WAL must not reach the new file
    finally:
        reader.communicate(timeout=30)
    assert healthy(db) == 200


def test_an_open_client_follows_a_file_moved_over_its_index_or_removed(base, tmp_path):
    # A long-lived reader (serve, mcp, a notebook) kept answering from the file it had opened: after a `mv` of
    # another index over the path, after the file was removed, and after it was built again there.
    from retrieval.errors import IndexNotFoundError

    db, _, other = base
    elsewhere = tmp_path / "elsewhere.db"
    build(db=elsewhere, source=other)
    with RetrievalClient(db) as client:
        assert client.stats.n_papers == 300
        before = [e.paper.id for e in client.search("w1 w2").ranked]
        assert before and all(pid.startswith("a") for pid in before)
        os.replace(elsewhere, db)  # a rebuild made elsewhere, moved into place
        for name in ("-wal", "-shm"):
            Path(f"{db}{name}").unlink(missing_ok=True)
        assert client.stats.n_papers == 200
        moved = [e.paper.id for e in client.search("w1 w2").ranked]
        assert moved and all(pid.startswith("o") for pid in moved)
        assert client.paper(moved[0]).id == moved[0]
        os.remove(db)
        with pytest.raises(IndexNotFoundError, match="build"):
            client.search("w1 w2")
        with pytest.raises(IndexNotFoundError):
            client.stats  # noqa: B018  (the property reads the index)
        build(db=db, source=tmp_path / "first.jsonl")  # the command the message gives
        assert client.stats.n_papers == 300
        assert [e.paper.id for e in client.search("w1 w2").ranked] == before


def test_rebuild_while_a_reader_holds_a_read_transaction_through_an_add(base):
    db, more, other = base
    reader = spawn(READER, str(db))
    try:
        assert ask(reader, "hold") == "300"
        assert cli("add", str(more), "--db", str(db)).returncode == 0
        assert ask(reader, "count") == "300"  # its snapshot is still the old one
        done = cli("build", "--from", str(other), "--db", str(db))
        assert done.returncode == 0, done.stderr
        assert healthy(db) == 200  # at once, with the reader still holding its snapshot
        assert ask(reader, "release") == "200"
        ask(reader, "quit")
    finally:
        reader.communicate(timeout=30)
    assert healthy(db) == 200


def test_rebuild_over_the_committed_wal_of_a_killed_add(base):
    db, _, other = base
    killed = spawn(
        """
        import os, signal, sqlite3, sys
        conn = sqlite3.connect(sys.argv[1], isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE papers SET title = title || ' (edited)' WHERE rowid % 2 = 0")
        conn.execute("COMMIT")
        os.kill(os.getpid(), signal.SIGKILL)  # right after COMMIT: the WAL keeps the committed frames
        """,
        str(db),
    )
    killed.communicate(timeout=30)
    assert killed.returncode == -signal.SIGKILL
    assert Path(f"{db}-wal").stat().st_size > 0
    done = cli("build", "--from", str(other), "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert healthy(db) == 200
    assert dump(db)["papers"][0][0].startswith("o")


def test_add_during_a_rebuild_is_never_silently_lost(base, tmp_path):
    db, _, other = base
    big_add = corpus(tmp_path / "big.jsonl", 6000, "b", seed=4)
    adding = subprocess.Popen(
        [sys.executable, "-m", "retrieval", "add", str(big_add), "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.3)  # the add holds the writers' lock now
    rebuilt = cli("build", "--from", str(other), "--db", str(db))
    adding.communicate(timeout=120)
    assert adding.returncode == 0
    papers = healthy(db)
    if rebuilt.returncode == 0:  # the build swapped in after the add: the add went first, the build replaced it
        assert papers == 200  # (only possible if the add finished before the build read the index)
    else:
        assert rebuilt.returncode == 1 and "was changed by another process" in rebuilt.stderr
        assert "Traceback" not in rebuilt.stderr
        assert papers == 6300  # the add's papers are there, and the refused build changed nothing


def test_readers_across_rebuilds_see_the_old_or_the_new_index(base, tmp_path):
    db, _, _ = base
    sizes = {300}
    corpora = []
    for i, n in enumerate((120, 260, 80)):
        corpora.append(corpus(tmp_path / f"c{i}.jsonl", n, f"c{i}_", seed=10 + i))
        sizes.add(n)
    watcher = spawn(
        """
        import sys, time
        from retrieval import RetrievalClient
        seen = []
        end = time.monotonic() + float(sys.argv[2])
        with RetrievalClient(sys.argv[1]) as client:  # one connection, open across every rebuild
            while time.monotonic() < end:
                result = client.search("w1 w2 w3", limit=5)
                seen.append(client.stats.n_papers)
                assert result.ranked
        print(sorted(set(seen)), len(seen))
        """,
        str(db),
        "3",
    )
    for source in corpora:
        assert cli("build", "--from", str(source), "--db", str(db)).returncode == 0
    out, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err
    seen = json.loads(out.split("]")[0] + "]")
    assert set(seen) <= sizes and len(seen) >= 1
    assert healthy(db) == 80


def test_a_rebuild_keeps_permissions_and_symlinks(base, tmp_path):
    db, _, other = base
    db.chmod(0o640)
    link = tmp_path / "link.db"
    link.symlink_to(db)
    assert cli("build", "--from", str(other), "--db", str(link)).returncode == 0
    assert link.is_symlink() and link.resolve() == db.resolve()
    assert db.stat().st_mode & 0o777 == 0o640
    assert healthy(db) == 200


def test_a_build_refuses_to_overwrite_what_is_not_an_index(tmp_path, capsys):
    notes = tmp_path / "notes.db"
    notes.write_text("my notes\n")
    assert main(["build", "--db", str(notes)]) == 1
    assert "not a retrieval index" in capsys.readouterr().err and notes.read_text() == "my notes\n"
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE mine (x)")
    assert main(["build", "--db", str(other)]) == 1
    assert "not a retrieval index" in capsys.readouterr().err
    with sqlite3.connect(other) as conn:
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("mine",)]


def test_a_build_never_replaces_a_device_or_a_pipe(tmp_path, capsys):
    # `build --db /dev/null` as root replaced the device with an index file (its size, 0, read as "no index"); a
    # pipe shows it without risking the machine's own /dev/null should this ever break again.
    pipe = tmp_path / "pipe.db"
    os.mkfifo(pipe)
    for target in [pipe]:
        mode = target.stat().st_mode
        assert main(["build", "--db", str(target)]) == 1
        assert "is not a regular file (a device, a pipe or a socket)" in capsys.readouterr().err
        assert target.stat().st_mode == mode  # still what it was
    with pytest.raises(RetrievalError, match="not a regular file"):
        build(db=pipe)
    for argv in (["search", "x"], ["stats"], ["check"], ["remove", "p1"]):  # opening a pipe waited for ever
        done = cli(*argv, "--db", str(pipe), timeout=60)
        assert done.returncode == 1 and "is not a regular file" in done.stderr, (argv, done.stderr)


DROPPED_STOP = """
import os, signal, sys
from retrieval.interfaces.cli import main
from retrieval.store.sqlite import build as build_module

real = build_module.check_replaceable


class Dropper:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10_000):  # the handler runs in here, and Python drops what it raises
            pass


def check_then_drop(target):
    Dropper()  # collected at once: the signal lands in its finaliser
    return real(target)


build_module.check_replaceable = check_then_drop
sys.exit(main(sys.argv[1:]))
"""


def test_a_stop_a_garbage_collectors_callback_dropped_still_stops_the_build(base):
    # A SIGTERM (or Ctrl-C) handled while Python ran a finaliser: its KeyboardInterrupt was printed and dropped,
    # and the build went on, swapped in and exited 0. Then it stopped, but Python printed "Exception ignored in
    # ... Traceback ... KeyboardInterrupt" above the command's one line.
    db, _, other = base
    before = dump(db)
    done = subprocess.run(
        [sys.executable, "-c", DROPPED_STOP, "build", "--from", str(other), "--db", str(db)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 130
    assert done.stderr.splitlines() == ["retrieval: interrupted; nothing was changed"], done.stderr
    assert dump(db) == before


def test_an_error_a_library_makes_of_a_stop_is_the_stop(base, monkeypatch, capsys):
    """SQLAlchemy turns a Ctrl-C inside its transaction into ``PendingRollbackError`` at its next call, which
    reached the user as a traceback (exit 1)."""
    from retrieval import stop
    from retrieval.store.sqlite import build as build_module

    db, _, other = base
    before = dump(db)
    real = build_module.check_replaceable

    def stopped_then_wrapped(target):
        try:
            stop.request()  # the handler, as a Ctrl-C inside the library runs it
        except KeyboardInterrupt:
            raise RuntimeError("Can't reconnect until invalid transaction is rolled back") from None
        return real(target)

    monkeypatch.setattr(build_module, "check_replaceable", stopped_then_wrapped)
    assert main(["build", "--from", str(other), "--db", str(db)]) == 130
    assert capsys.readouterr().err.splitlines() == ["retrieval: interrupted; nothing was changed"]
    assert dump(db) == before


@pytest.mark.parametrize("command", ["add", "build"])
def test_a_stop_after_the_change_is_saved_lets_the_command_finish(base, monkeypatch, capsys, command):
    """A Ctrl-C or SIGTERM that lands once the commit (or the swap) is done said "interrupted; nothing was
    changed", exit 130, of a change that was made: a retried add then found its papers in the index already."""
    from retrieval import commands

    db, more, other = base
    real = getattr(commands, command)

    def done_then_stopped(*args, **kwargs):
        summary = real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # the change is saved; the summary is not printed yet
        return summary

    monkeypatch.setattr(commands, command, done_then_stopped)
    argv = ["add", str(more)] if command == "add" else ["build", "--from", str(other)]
    assert main([*argv, "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert ("added 40 papers" if command == "add" else "built") in out
    assert "nothing was changed" not in err and "after the change was saved" in err
    assert healthy(db) == (340 if command == "add" else 200)


def _stop_soon(seconds: float):
    import threading

    timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_a_stop_while_an_add_waits_for_another_programs_lock_stops_it_at_once(base, monkeypatch, capsys):
    """SQLite's wait for its write lock runs in C, where Python's handler waits: a Ctrl-C was acted on only once
    another program let go or the busy timeout (30 s) ran out."""
    import threading

    from retrieval.store import writer

    db, more, _ = base
    before = dump(db)
    monkeypatch.setattr(writer, "_BUSY_TIMEOUT_MS", 120_000)
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another program writing to the file, for 30 s
    letting_go = threading.Timer(30.0, lambda: holder.execute("ROLLBACK"))
    letting_go.start()
    stopping = _stop_soon(0.5)
    began = time.monotonic()
    try:
        assert main(["add", str(more), "--db", str(db)]) == 130
        waited = time.monotonic() - began
    finally:
        stopping.cancel()
        letting_go.cancel()
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
    assert waited < 15, waited  # not the other program's 30 s
    assert "interrupted; nothing was changed" in capsys.readouterr().err
    assert dump(db) == before


def test_a_stop_while_a_rebuild_waits_to_swap_in_stops_it_and_keeps_the_index(base, monkeypatch, capsys):
    """The swap held Ctrl-C and SIGTERM for its whole wait for another program's lock (up to 120 s), then
    swapped the new index in and exited 0, as if no one had asked it to stop."""
    import threading

    db, _, other = base
    before = dump(db)
    monkeypatch.setattr(files, "LOCK_TIMEOUT", 120.0)
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    letting_go = threading.Timer(6.0, lambda: holder.execute("ROLLBACK"))
    letting_go.start()
    real = files._swap_in
    stopping: list = []

    def stopped_while_waiting(new, target, expected):
        stopping.append(_stop_soon(0.5))  # the build is done; the swap waits for the holder
        return real(new, target, expected)

    monkeypatch.setattr(files, "_swap_in", stopped_while_waiting)
    try:
        assert main(["build", "--from", str(other), "--db", str(db)]) == 130
    finally:
        for timer in stopping:
            timer.cancel()
        letting_go.cancel()
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
    assert "interrupted; nothing was changed" in capsys.readouterr().err
    assert dump(db) == before
    assert not [p for p in db.parent.iterdir() if p.name.startswith(".x.db.")]


def test_stale_wal_files_of_a_deleted_index_are_not_replayed(base, tmp_path):
    db, more, other = base
    reader = spawn(READER, str(db))
    ask(reader, "hold")
    assert cli("add", str(more), "--db", str(db)).returncode == 0
    wal = Path(f"{db}-wal").read_bytes()
    reader.communicate("release\nquit\n", timeout=30)
    db.unlink()
    Path(f"{db}-wal").write_bytes(wal)  # left behind, as by a user who deleted only the main file
    assert cli("build", "--from", str(other), "--db", str(db)).returncode == 0
    assert healthy(db) == 200


# -- 2. killed builds and adds ------------------------------------------------------------------------------------


def _our_processes(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_a_killed_build_leaves_the_old_index_and_no_orphans(tmp_path, sig):
    big = corpus(tmp_path / "big.jsonl", 60000, "k", seed=5)  # a build of a few seconds: the kills land inside it
    db = tmp_path / "k.db"
    build(db=db)
    before = dump(db)
    rng = random.Random(sig)
    for _ in range(2):
        started = subprocess.Popen(
            [sys.executable, "-m", "retrieval", "build", "--from", str(big), "--db", str(db)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # not a background run's SIG_IGN
        )
        time.sleep(rng.uniform(1.0, 1.8))  # past the start of the workers (8,000 papers), before the end
        started.send_signal(sig)
        _, err = started.communicate(timeout=60)
        if started.returncode == 0:  # it finished first: nothing to check of this kill, and the index is the new one
            before = dump(db)
            continue
        deadline = time.monotonic() + 5
        while _our_processes(str(big)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _our_processes(str(big)) == [], "tokeniser workers outlived the build"
        assert "Traceback" not in err
        if sig != signal.SIGKILL:
            assert started.returncode == 130 and "interrupted; nothing was changed" in err
            assert not list(tmp_path.glob(".k.db.*")), "the interrupted build left its temporary file"
        assert dump(db) == before
    assert cli("build", "--db", str(db)).returncode == 0
    assert not list(tmp_path.glob(".k.db.*"))  # a later build removed what a SIGKILL left


@pytest.mark.slow
def test_builds_and_adds_killed_at_many_points(tmp_path):
    big = corpus(tmp_path / "big.jsonl", 9000, "k", seed=6)
    extra = corpus(tmp_path / "extra.jsonl", 3000, "e", seed=7)
    db = tmp_path / "m.db"
    build(db=db)
    rng = random.Random(7)
    tried = 0
    for point in range(16):
        before = dump(db)
        command = ["build", "--from", str(big)] if point % 2 == 0 else ["add", str(extra), "--replace"]
        run = subprocess.Popen([sys.executable, "-m", "retrieval", *command, "--db", str(db)], stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.2, 3.0))
        run.kill()
        run.communicate(timeout=60)
        tried += 1
        after = dump(db)
        if after != before:  # it committed before the kill: the new state is complete
            healthy(db)
            if command[0] == "build":
                assert len(after["papers"]) == 9000
            else:
                assert {r[0] for r in after["papers"]} >= {f"e{i:06d}" for i in range(3000)}
    assert tried == 16


# -- 3. environment failures are messages ------------------------------------------------------------------


FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from retrieval.interfaces.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("command", ["add", "build", "build-schema", "explain"])
def test_a_full_disk_is_a_message_and_changes_nothing(base, tmp_path, command):
    """``build-schema``: the disk full before the build's tables were made, while the schema was written (by
    Alembic, through SQLAlchemy): that was a traceback."""
    db, more, _ = base
    big = corpus(tmp_path / "big.jsonl", 3000, "f", seed=8)
    if command == "explain":  # a graph of some hundred papers: a saved run of more than the limit below
        build(db=db, source=big)
    before = dump(db)
    argv = {
        "add": ["add", str(big), "--db", str(db)],
        "build": ["build", "--from", str(big), "--db", str(db)],
        "build-schema": ["build", "--from", str(big), "--db", str(db)],
        "explain": ["explain", "w1 w2 w3", "--db", str(db), "--save", "--seeds", "100", "--top-k", "500"],
    }[command]
    # A file may not grow past the limit: the WAL (from 0) and the temporary build file hit it; the -shm (32 KiB)
    # does not.
    limit = str({"explain": 40_000, "build-schema": 8192}.get(command, db.stat().st_size + 200_000))
    done = subprocess.run([sys.executable, "-c", FULL_DISK, limit, *argv], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.startswith("retrieval: error: ")
    assert str(db.name) in done.stderr or "disk" in done.stderr
    assert dump(db) == before
    assert not list(tmp_path.glob(".x.db.*"))


def test_a_full_disk_during_an_add_that_upgrades_names_the_index_and_leaves_it_old(base, tmp_path):
    """An add on an older revision writes on an upgraded copy: a full disk then is said of the index (not of the
    copy's temporary name), and the index stays at its revision, as it was."""
    from retrieval.store.schema.migrate import downgrade

    db, _, _ = base
    big = corpus(tmp_path / "big.jsonl", 3000, "f", seed=8)
    downgrade(db, "0004")
    before = db.read_bytes()
    limit = str(db.stat().st_size + 200_000)
    argv = ["add", str(big), "--db", str(db)]
    done = subprocess.run([sys.executable, "-c", FULL_DISK, limit, *argv], capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("retrieval: error: ") and "Traceback" not in done.stderr
    assert str(db) in done.stderr and ".upgrading" not in done.stderr, done.stderr
    assert db.read_bytes() == before
    assert not list(tmp_path.glob(".x.db.*"))


def test_a_locked_index_is_a_message(base, monkeypatch, capsys):
    db, more, _ = base
    from retrieval.store import writer

    monkeypatch.setattr(writer, "_BUSY_TIMEOUT_MS", 100)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another program writing to the file
    try:
        assert main(["add", str(more), "--db", str(db)]) == 1
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    err = capsys.readouterr().err
    assert "is locked by another process" in err and "try again" in err
    assert healthy(db) == 300


def test_a_rebuild_gives_up_on_another_programs_write_lock_as_a_writer_does(base, monkeypatch, capsys):
    """Another program's write transaction on the index: the rebuild's copy waits ``LOCK_TIMEOUT`` for it, then
    says the file is locked, the index as it was (the copy retried for ever, silently: here it would finish only
    when the other program let go, after some seconds)."""
    import threading

    db, _, other = base
    monkeypatch.setattr(files, "LOCK_TIMEOUT", 0.3)
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    letting_go = threading.Timer(8.0, lambda: holder.execute("ROLLBACK"))
    letting_go.start()
    try:
        assert main(["build", "--from", str(other), "--db", str(db)]) == 1
    finally:
        letting_go.cancel()
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()
    err = capsys.readouterr().err
    assert "is locked by another process" in err and "try again" in err
    assert healthy(db) == 300
    assert not [p for p in db.parent.iterdir() if p.name.endswith(".building")]
    assert main(["build", "--from", str(other), "--db", str(db)]) == 0 and healthy(db) == 200


def test_a_writer_waits_for_another_writer_then_says_so(base, monkeypatch, capsys):
    db, more, _ = base
    monkeypatch.setattr(files, "LOCK_TIMEOUT", 0.3)
    with files.WriterLock(db.resolve()):
        assert main(["add", str(more), "--db", str(db)]) == 1
    assert "another process has been writing to" in capsys.readouterr().err
    assert main(["add", str(more), "--db", str(db)]) == 0


def test_a_client_sees_other_processes_writes_after_its_own_process_wrote(base, tmp_path):
    """The writers' lock opened the index file and closed it after each write, and closing a descriptor drops every
    POSIX lock the process holds on the file, SQLite's too: another process's writer, seeing no other connection,
    deleted the -wal and -shm this process still mapped, and from its second write on a client left open here
    answered from the old index for as long as it lived."""
    db, more, _ = base
    with RetrievalClient(db) as client:
        assert client.stats.n_papers == 300
        add(more, db=db)  # this process writes
        remove(["m000000"], db=db)
        assert client.stats.n_papers == 339
        for k in range(3):  # then another process, three times
            extra = tmp_path / f"extra{k}.jsonl"
            extra.write_text(json.dumps({"id": f"x{k}", "title": f"quasar{k} zebrafish"}) + "\n")
            assert cli("add", str(extra), "--db", str(db)).returncode == 0
            truth = sqlite3.connect(db).execute("SELECT count(*) FROM papers").fetchone()[0]
            assert truth == 340 + k
            assert client.stats.n_papers == truth, k
            assert [e.paper.id for e in client.search(f"quasar{k}").ranked] == [f"x{k}"]
    assert healthy(db) == 340 + 2


def test_the_writers_lock_excludes_another_thread_of_the_same_process(base):
    """The lock is one descriptor per file in a process now (it is never closed), and a ``flock`` does not
    exclude holders of the same descriptor: threads take turns by a lock of their own."""
    import threading

    db, _, _ = base
    outcome: list[str] = []

    def second() -> None:
        try:
            with files.WriterLock(db.resolve(), timeout=0.3):
                outcome.append("held")
        except RetrievalError as exc:
            outcome.append(str(exc))

    with files.WriterLock(db.resolve()):
        thread = threading.Thread(target=second)
        thread.start()
        thread.join(10)
    assert len(outcome) == 1 and "has been writing to" in outcome[0]
    thread = threading.Thread(target=second)  # once released, taken
    thread.start()
    thread.join(10)
    assert outcome[1:] == ["held"]


NOBODY = 65534
REPO = Path(__file__).resolve().parents[1]


def _as_nobody() -> list[str] | None:
    """A command line that runs ``retrieval`` as another user (``nobody``), or None where none can: this
    interpreter when that user may run it, else the system's Python 3 with the source tree on its path (reading
    an index and adding to one need only the standard library)."""
    if os.geteuid() != 0:
        return None
    for python, env in ((sys.executable, {}), ("/usr/bin/python3", {"PYTHONPATH": str(REPO)})):
        try:
            probe = subprocess.run(
                [python, "-c", "import retrieval.interfaces.cli"],
                user=NOBODY,
                capture_output=True,
                env={**os.environ, **env},
            )
        except OSError:
            continue
        if probe.returncode == 0:
            return ["env", *(f"{k}={v}" for k, v in env.items()), python, "-m", "retrieval"]
    return None


def _immutable(path: Path, on: bool) -> bool:
    """``chattr +i``: even root may not create files in an immutable folder (as on a read-only medium)."""
    try:
        done = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True)
    except OSError:
        return False
    return done.returncode == 0


@pytest.fixture
def public_dir():
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="retrieval-ro-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    subprocess.run(["chmod", "-R", "u+w", str(folder)], check=False)
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def test_a_read_only_index_is_searchable(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "ro.db"
    build(db=db)
    for side in ("-wal", "-shm"):
        Path(f"{db}{side}").unlink(missing_ok=True)
    before = dump(db)
    if not _immutable(folder, True):
        pytest.skip("chattr +i is not available here")
    try:  # no -shm can be made in the folder: a reader falls back to an immutable open
        done = cli("search", "attention sparsity", "--db", str(db), "--json")
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["results"][0]["title"].startswith("Attention Sparsity")
        refused = cli("add", str(db), "--db", str(db))
        assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
        assert refused.stderr.startswith("retrieval: error: ")
        rebuilt = cli("build", "--db", str(db))
        assert rebuilt.returncode == 1 and "Traceback" not in rebuilt.stderr, rebuilt.stderr
        assert "permissions or read-only" in rebuilt.stderr
    finally:
        _immutable(folder, False)
    assert dump(db) == before


def test_a_read_only_copy_with_writes_left_in_its_wal_is_refused_not_read_as_before_them(tmp_path):
    """A copy made while an add's writes were still in the -wal (a reader held its snapshot, so no checkpoint),
    without its -shm, in a folder no -shm can be made in: every command read the index as before the add (300
    papers, not 340; `show` of an added paper: no such paper), and `check` called it consistent."""
    import shutil

    first = corpus(tmp_path / "first.jsonl", 300, "a")
    more = corpus(tmp_path / "more.jsonl", 40, "m", seed=2)
    live = tmp_path / "live"
    live.mkdir()
    db = live / "x.db"
    build(db=db, source=first)
    holder = sqlite3.connect(db)
    holder.execute("BEGIN")
    holder.execute("SELECT count(*) FROM papers").fetchone()  # a read snapshot: the add's pages stay in the -wal
    assert cli("add", str(more), "--db", str(db)).returncode == 0
    folder = tmp_path / "copy"
    folder.mkdir()
    shutil.copy(db, folder / "x.db")
    shutil.copy(f"{db}-wal", folder / "x.db-wal")
    holder.close()
    assert (folder / "x.db-wal").stat().st_size > 0
    if not _immutable(folder, True):
        pytest.skip("chattr +i is not available here")
    try:
        for argv in (["stats"], ["show", "m000001"], ["check"], ["search", "w1"]):
            done = cli(*argv, "--db", str(folder / "x.db"))
            assert done.returncode == 1 and "Traceback" not in done.stderr, (argv, done.stdout, done.stderr)
            assert "has writes in x.db-wal" in done.stderr and "open the index once where it can be written" in (
                done.stderr
            ), done.stderr
    finally:
        _immutable(folder, False)
    assert cli("stats", "--db", str(folder / "x.db")).returncode == 0  # writable again: the writes are read
    with sqlite3.connect(folder / "x.db") as conn:
        assert conn.execute("SELECT count(*) FROM papers").fetchone()[0] == 340


def test_unreadable_input_and_index_are_messages(public_dir):
    command = _as_nobody()
    if command is None:
        pytest.skip("needs root, and a Python another user may run, to test permissions")
    private = public_dir / "private.db"
    build(db=private)
    private.chmod(0o600)  # root's, unreadable by the user below
    shared = public_dir / "shared.db"
    build(db=shared)
    shared.chmod(0o666)
    public_dir.chmod(0o777)
    source = corpus(public_dir / "in.jsonl", 5)
    source.chmod(0o600)
    before = dump(shared)
    try:
        for argv, expected in (
            (["search", "x", "--db", str(private)], "cannot open"),
            (["stats", "--db", str(private)], "permission denied"),
            (["add", str(source), "--db", str(shared)], "cannot read"),
            (["build", "--db", str(public_dir / "sub" / "new.db")], "permissions"),
        ):
            public_dir.chmod(0o755 if argv[0] == "build" else 0o777)
            done = subprocess.run([*command, *argv], user=NOBODY, capture_output=True, text=True, cwd="/")
            assert done.returncode == 1, (argv, done.stderr)
            assert "Traceback" not in done.stderr and done.stderr.startswith("retrieval: error: "), done.stderr
            assert expected in done.stderr, (argv, done.stderr)
    finally:
        public_dir.chmod(0o755)
    assert dump(shared) == before


def test_side_files_another_user_left_are_named_when_they_block_a_write(public_dir):
    """A search by another user leaves the index's ``-wal`` and ``-shm`` files as theirs: every later write by the
    index's owner failed "it is read-only ... check that you may write to the file and its folder", both of
    which they may."""
    command = _as_nobody()
    if command is None:
        pytest.skip("needs root, and a Python another user may run, to test permissions")
    shared = public_dir / "shared.db"
    build(db=shared)
    more = corpus(public_dir / "more.jsonl", 5, "m", seed=2)
    public_dir.chmod(0o777)
    shared.chmod(0o666)
    more.chmod(0o644)
    holder = sqlite3.connect(f"file:{shared}?mode=ro", uri=True)  # root's search, its side files left as they are
    holder.execute("SELECT count(*) FROM papers").fetchone()
    sides = [Path(f"{shared}{suffix}") for suffix in ("-wal", "-shm")]
    for side in sides:
        if side.exists():
            side.chmod(0o644)
    before = dump(shared)
    try:
        done = subprocess.run([*command, "add", str(more), "--db", str(shared)], user=NOBODY, capture_output=True,
                              text=True, cwd="/")  # fmt: skip
    finally:
        holder.close()
        public_dir.chmod(0o755)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert any(f"{side.name} belongs to user root" in done.stderr for side in sides), done.stderr
    assert dump(shared) == before


def test_a_read_only_index_file_is_said_to_be_so_and_left_without_side_files(public_dir):
    """A write to an index file the user may only read blamed "t.db-wal belongs to user ... (a search of theirs
    left it)": the write itself had made ``-wal`` and ``-shm`` with the index's read-only mode, and they kept
    refusing every write once the index was made writable again."""
    command = _as_nobody()
    if command is None:
        pytest.skip("needs root, and a Python another user may run, to test permissions")
    index = public_dir / "ro.db"
    build(db=index)
    before = dump(index)
    for side in ("-wal", "-shm"):
        Path(f"{index}{side}").unlink(missing_ok=True)
    more = corpus(public_dir / "more.jsonl", 5, "m", seed=2)
    more.chmod(0o644)
    index.chmod(0o444)
    public_dir.chmod(0o777)  # the folder is the user's to write in: only the file is read-only

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([*command, *argv], user=NOBODY, capture_output=True, text=True, cwd="/")

    try:
        for argv in (["add", str(more), "--db", str(index)], ["remove", "p000001", "--db", str(index)],
                     ["build", "--from", str(more), "--db", str(index)], ["upgrade", "--db", str(index)]):  # fmt: skip
            done = run(*argv)
            assert done.returncode == 1 and "Traceback" not in done.stderr, (argv, done.stderr)
            assert f"{index}: the file is read-only for this user: make it writable" in done.stderr, done.stderr
            assert not any(Path(f"{index}{side}").exists() for side in ("-wal", "-shm")), argv
        assert dump(index) == before
        index.chmod(0o400)  # not even readable: it was called "read-only" all the same
        for argv in (["add", str(more), "--db", str(index)], ["remove", "p000001", "--db", str(index)]):
            done = run(*argv)
            assert done.returncode == 1 and "Traceback" not in done.stderr, (argv, done.stderr)
            assert "this user may neither read nor write the file (permission denied)" in done.stderr, done.stderr
            assert "read-only" not in done.stderr
        index.chmod(0o444)
        assert dump(index) == before
        for side in ("-wal", "-shm"):  # root's read just now left them (another user's: a case of its own)
            Path(f"{index}{side}").unlink(missing_ok=True)
        index.chmod(0o666)  # made writable: the next write goes through (one that needs no NumPy, which the
        done = run("log", "on", "--db", str(index))  # Python this user may run may lack)
        assert done.returncode == 0, done.stderr
    finally:
        public_dir.chmod(0o755)
    assert dump(index)["index_info"] != before["index_info"]  # the log's switch, written


def test_what_sqlite_says_of_a_read_only_disk_and_of_damaged_text_is_said_plainly(tmp_path, monkeypatch):
    """A write on a file system mounted read-only was told to "check that the file and its folder exist and that
    you may read them"; an index whose text is not UTF-8 any more was "cannot write to" with SQLite's words."""
    from retrieval.errors import NotAnIndexError
    from retrieval.store.database import store_error

    db = tmp_path / "x.db"
    build(db=db)
    damaged = store_error(sqlite3.OperationalError("Could not decode to UTF-8 column 'term' with text 'x'"), db,
                          "write to")  # fmt: skip
    assert isinstance(damaged, NotAnIndexError) and "is damaged" in str(damaged) and "rebuild" in str(damaged)
    plain = store_error(sqlite3.OperationalError("unable to open database file"), db, "write to")
    assert "read-only" not in str(plain)

    class ReadOnly:
        f_flag = os.ST_RDONLY

    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly())  # a read-only mount, which a test cannot make
    refused = store_error(sqlite3.OperationalError("unable to open database file"), db, "write to")
    assert "mounted read-only" in str(refused) and str(tmp_path) in str(refused)


def test_a_later_build_removes_only_its_own_stale_temporaries(tmp_path):
    db = tmp_path / "x.db"
    build(db=db)
    dead = tmp_path / ".x.db.abc123.building"  # a killed build's: nobody holds its lock
    dead.write_bytes(b"half an index")
    Path(f"{dead}-journal").write_bytes(b"j")
    foreign = [tmp_path / ".y.db.abc123.building", tmp_path / "x.db.building", tmp_path / ".x.db.notes"]
    for path in foreign:
        path.write_text("not ours")
    live = files.TempIndex(db, ".building")  # a build still running: it holds its file's lock
    try:
        assert files.remove_stale_temporaries(db) == [dead]
        assert not dead.exists() and not Path(f"{dead}-journal").exists()
        assert live.path.exists() and all(path.exists() for path in foreign)
    finally:
        live.discard()


# -- 4. hostile index files ------------------------------------------------------------------------------------


HOSTILE = {
    "no term_freq": "DROP TABLE term_freq",
    "no doc_freq": "DROP TABLE doc_freq",
    "no doc_len": "DROP TABLE doc_len",
    "no citations": "DROP VIEW citations",
    "no citation_links": "DROP TABLE citation_links",
    "no paper_keys": "DROP TABLE paper_keys",
    "no paper_authors": "DROP TABLE paper_authors",
    "no postings BLOBs": "DROP TABLE postings",
    "n_papers 0": "UPDATE index_info SET value = '0' WHERE key = 'n_papers'",
    "n_papers -5": "UPDATE index_info SET value = '-5' WHERE key = 'n_papers'",
    "n_papers abc": "UPDATE index_info SET value = 'abc' WHERE key = 'n_papers'",
    "n_papers 1": "UPDATE index_info SET value = '1' WHERE key = 'n_papers'",
    "n_papers 1e9": "UPDATE index_info SET value = '1000000000' WHERE key = 'n_papers'",
    "k1 text": "UPDATE index_info SET value = 'large' WHERE key = 'k1'",
    "k1 missing": "DELETE FROM index_info WHERE key = 'k1'",
    "k1 -1": "UPDATE index_info SET value = '-1' WHERE key = 'k1'",
    "b 7": "UPDATE index_info SET value = '7' WHERE key = 'b'",
    "total_tokens 0": "UPDATE index_info SET value = '0' WHERE key = 'total_tokens'",
    "every df 0": "UPDATE doc_freq SET df = 0",
    "years reversed": "UPDATE index_info SET value = '3000' WHERE key = 'min_year'",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_index_file_is_refused_with_what_is_wrong(demo_db, tmp_path, name, capsys):
    db = tmp_path / "hostile.db"
    db.write_bytes(demo_db.read_bytes())
    with sqlite3.connect(db) as conn:
        conn.execute(HOSTILE[name])
    code = main(["search", "attention sparsity", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 1, name
    assert err.startswith("retrieval: error: ") and "rebuild" in err and str(db) in err, err
    with pytest.raises(RetrievalError), RetrievalClient(db) as client:
        client.search("attention sparsity")


# -- 5. hostile queries, options and records ----------------------------------------------------------------


ANY_CHARACTER = st.characters(blacklist_categories=())  # surrogates and controls included


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(st.text(ANY_CHARACTER, max_size=80), st.sampled_from(["'; DROP TABLE papers; --", "\x00", "a\x00b"])))
def test_any_query_through_the_api_answers_or_refuses(demo_db, query):
    before = demo_db.stat().st_mtime_ns
    with RetrievalClient(demo_db) as client:
        result = client.search(query, limit=5)
        assert len(result.ranked) <= 5
        json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")  # printable as UTF-8
    assert demo_db.stat().st_mtime_ns == before


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(ANY_CHARACTER, min_size=1, max_size=40))
def test_any_query_through_the_cli_answers_or_refuses(demo_db, capsys, query):
    for extra in ([], ["--json"], ["--sql"]):
        try:
            code = main(["search", query, "--db", str(demo_db), *extra])
        except SystemExit as exc:  # a usage error
            code = exc.code
        out, err = capsys.readouterr()
        assert code in (0, 2) and "Traceback" not in err
        if extra == ["--json"] and code == 0:
            json.loads(out)


def test_invalid_utf8_in_a_query_under_a_strict_stdout(demo_db, tmp_path):
    env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict", "LC_ALL": "C.UTF-8"}
    raw = b"attention \xff\xfe sparsity"
    for extra in (["--json"], []):
        done = subprocess.run(
            [sys.executable.encode(), b"-m", b"retrieval", b"search", raw, b"--db", str(demo_db).encode(), *extra],
            capture_output=True,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        assert b"Traceback" not in done.stderr
    db = tmp_path / "s.db"
    build(db=db)
    done = subprocess.run(
        [sys.executable.encode(), b"-m", b"retrieval", b"explain", raw, b"--db", str(db).encode(), b"--save"],
        capture_output=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as conn:
        assert "\ufffd" in conn.execute("SELECT query FROM evidence_runs").fetchone()[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["--top-k-lexical", "1000000"],
        ["--max-neighbours", "1000000"],
        ["--max-candidates", "1000000"],
        ["--limit", "100000"],
        ["--offset", "100000"],
        ["--hops", "-1"],  # more than 2 is clamped with a warning (tests/test_search_cli.py)
        ["--gate-threshold", "nan"],
    ],
)
def test_options_beyond_their_documented_bounds_are_usage_errors(demo_db, argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(["search", "attention", "--db", str(demo_db), *argv])
    assert info.value.code == 2 and "usage:" in capsys.readouterr().err


def test_a_query_too_large_is_refused_fast(demo_db, capsys):
    wide = " ".join(f"term{i}" for i in range(10_000))
    started = time.monotonic()
    with pytest.raises(SystemExit) as info:
        main(["search", wide, "--db", str(demo_db)])
    assert info.value.code == 2 and "distinct terms" in capsys.readouterr().err
    with RetrievalClient(demo_db) as client, pytest.raises(ConfigError, match="distinct terms"):
        client.search(wide)
    assert time.monotonic() - started < 5


def test_the_heaviest_allowed_settings_stay_bounded(demo_db):
    every = ("references", "citing", "cocitation", "coupling")
    cfg = {"top_k_lexical": 200, "max_neighbours": 200, "max_candidates": 10_000, "relations": every, "max_hops": 2}
    from retrieval import RetrievalConfig

    with RetrievalClient(demo_db, RetrievalConfig(**cfg)) as client:
        assert client.search("attention sparsity study").ranked
    with pytest.raises(ConfigError):
        RetrievalConfig(top_k_lexical=1_000_000)


RECORD = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.text(ANY_CHARACTER, max_size=8), st.integers(), st.none()),
        "title": st.one_of(st.text(ANY_CHARACTER, max_size=20), st.integers(), st.none(), st.lists(st.text())),
        "abstract": st.one_of(st.text(ANY_CHARACTER, max_size=40), st.none(), st.booleans()),
        "year": st.one_of(st.integers(-(10**20), 10**20), st.floats(), st.text(max_size=4), st.none()),
        "authors": st.one_of(st.lists(st.text(ANY_CHARACTER, max_size=6), max_size=3), st.text(max_size=3)),
        "references": st.one_of(st.lists(st.text(ANY_CHARACTER, max_size=6), max_size=3), st.integers()),
    },
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(RECORD, min_size=1, max_size=4), st.booleans())
def test_any_jsonl_records_build_or_are_refused_with_their_line(demo_db, tmp_path_factory, records, as_add):
    folder = tmp_path_factory.mktemp("fuzz")
    db = folder / "f.db"
    db.write_bytes(demo_db.read_bytes())
    before = dump(db)
    source = folder / "in.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    argv = ["add", str(source), "--db", str(db)] if as_add else ["build", "--from", str(source), "--db", str(db)]
    try:
        code = main(argv)
    except SystemExit as exc:  # pragma: no cover - no usage error expected
        code = exc.code
    if code == 0:
        healthy(db)
    else:
        assert code == 1
        assert dump(db) == before
        assert not list(folder.glob(".f.db.*"))


def test_api_callers_get_input_errors_for_bad_papers(tmp_path):
    with pytest.raises(RetrievalError, match="appears twice"):
        build_index([Paper("a", "t"), Paper("a", "t")], tmp_path / "d.db")
    db = tmp_path / "e.db"
    build(db=db)
    with pytest.raises(RetrievalError, match="already in the index"):
        add_papers([Paper("p001", "again")], db)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda db: RetrievalClient(db, config="fast"), "config must be a RetrievalConfig"),
        (lambda db: RetrievalClient(db, config={"k1": 1.2}), "config: no setting 'k1'"),
        (lambda db: RetrievalClient(db).search("attention", config={"top_k_lexical": 0}), "top_k_lexical must be"),
        (lambda db: RetrievalClient(db).search("attention", authors=5), "authors must be a name or a list"),
        (lambda db: RetrievalClient(db).search("attention", authors=[None]), "authors must be a name or a list"),
        (lambda db: RetrievalClient(db).similar(["p001"], authors=5), "authors must be a name or a list"),
        (lambda db: build(5), "db must be an index's path or URL"),
        (lambda db: RetrievalClient(b"x.db"), "db must be an index's path or URL"),
        (lambda db: build(db.parent / "w.db", workers="x"), "workers must be a whole number"),
        (lambda db: RetrievalConfig()._replace(top_k_lexical=-1), "top_k_lexical must be between"),
        (lambda db: RetrievalConfig._make([0] * len(RetrievalConfig._fields)), "top_k_lexical must be between"),
        (lambda db: remove(None, db), "ids: give a paper id (a string) or a list of them, got NoneType"),
        (lambda db: remove(5, db), "ids: give a paper id (a string) or a list of them, got int"),
        (lambda db: remove(b"p001", db), "got bytes"),
        (lambda db: remove(["p001", 7], db), "a paper id is a string, got int"),
        (lambda db: add([Paper("x", "t")], db, progress=5), "progress must be a callable"),
        (lambda db: build(db.parent / "p.db", progress=5), "progress must be a BuildProgress or a callable"),
        (lambda db: build(db.parent / "w.db", workers=33), "workers must be between 0 and 32"),
    ],
)
def test_an_api_argument_of_the_wrong_type_is_a_config_error_that_names_it(demo_db, tmp_path, call, words):
    db = tmp_path / "copy.db"
    db.write_bytes(demo_db.read_bytes())
    before = db.read_bytes()
    with pytest.raises(ConfigError, match=re.escape(words)):
        call(db)
    assert db.read_bytes() == before
    assert not (tmp_path / "p.db").exists() and not (tmp_path / "w.db").exists()


@pytest.mark.parametrize(
    "paper, words",
    [
        (Paper("x", "t", field_sources=["x"]), "'field_sources' must map field names to source names"),
        (Paper("x", "t", source=None), "'source' must be a string, got"),
    ],
)
def test_a_paper_object_with_a_field_of_the_wrong_type_is_an_input_error(demo_db, tmp_path, paper, words):
    db = tmp_path / "copy.db"
    db.write_bytes(demo_db.read_bytes())
    with pytest.raises(InputError, match=re.escape(words)):
        add([paper], db)
    with pytest.raises(InputError, match=re.escape(words)):
        build(tmp_path / "new.db", [paper])


def test_a_config_given_as_a_dict_is_that_config(demo_db):
    settings = {"top_k_lexical": 5, "max_hops": 2, "ranking": "hops"}
    with RetrievalClient(demo_db, config=settings) as by_dict, RetrievalClient(demo_db) as plain:
        assert by_dict.config == RetrievalConfig(**settings)
        expected = plain.search("attention sparsity", config=RetrievalConfig(**settings))
        for got in (by_dict.search("attention sparsity"), plain.search("attention sparsity", config=settings)):
            assert [(e.paper.id, e.final_score) for e in got.ranked] == [
                (e.paper.id, e.final_score) for e in expected.ranked
            ]


@pytest.mark.parametrize("name", ["x%d.db", "q?mode=memory.db", "h#a sh.db", "naïve ü.db", "%(here)s.db"])
def test_any_file_name_the_filesystem_allows_is_a_path(tmp_path, name):
    from retrieval.store.schema.migrate import downgrade

    db = tmp_path / name
    assert main(["build", "--db", str(db)]) == 0
    assert db.exists() and sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".db") == [name]
    assert main(["add", str(corpus(tmp_path / "m.jsonl", 3, "m")), "--db", str(db)]) == 0
    downgrade(db, "0003")  # the migrations get the same path, not a URL or a config string
    assert main(["upgrade", "--db", str(db)]) == 0
    assert healthy(db) == 103


def test_a_pipe_a_dash_a_folder_or_a_dangling_link_is_named_for_what_it_is(demo_db, tmp_path, capsys):
    """A pipe was "no corpus file at /dev/stdin" (it exists), and a build through a link to a missing file could
    not open the missing file: each is said as what it is, with what to do, and nothing changes."""
    db = tmp_path / "copy.db"
    db.write_bytes(demo_db.read_bytes())
    before = db.read_bytes()
    fifo = tmp_path / "papers.fifo"
    os.mkfifo(fifo)
    for source, words in (
        (str(fifo), "is not a regular file (a pipe or a device)"),
        ("-", "papers are not read from standard input (-)"),
        (str(tmp_path), "is a folder, not a corpus file"),
    ):
        assert main(["add", source, "--db", str(db)]) == 1
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err
    assert db.read_bytes() == before
    link = tmp_path / "link.db"
    link.symlink_to(tmp_path / "missing.db")
    assert main(["build", "--db", str(link)]) == 1
    err = capsys.readouterr().err
    assert "is a symbolic link to" in err and "which does not exist" in err
    assert not (tmp_path / "missing.db").exists() and link.is_symlink()
    # reading through it, or through links in a loop, said "no index at ...: build one" (a build there is refused)
    loop_a, loop_b = tmp_path / "a.db", tmp_path / "b.db"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    for where, target in ((link, tmp_path / "missing.db"), (loop_a, loop_b)):
        assert main(["search", "x", "--db", str(where)]) == 1
        err = capsys.readouterr().err
        assert f"{where} is a symbolic link to {target}, which leads to no file" in err, err


def test_an_index_on_a_read_only_mount_is_said_to_be_there_not_to_need_chmod(tmp_path, capsys):
    """An index on a file system mounted read-only was said to be "read-only for this user" with `chmod u+w` as the
    cure, which cannot work there."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", str(mount)],
                                           capture_output=True).returncode:  # fmt: skip
        pytest.skip("needs root and a kernel that lets it mount a file system")
    try:
        index = mount / "x.db"
        build(db=index, semantic="none")
        more = corpus(tmp_path / "more.jsonl", 3, "m", seed=2)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        for argv in (["add", str(more), "--db", str(index)], ["remove", "p001", "--db", str(index)],
                     ["build", "--db", str(index)], ["log", "on", "--db", str(index)]):  # fmt: skip
            assert main(argv) == 1, argv
            err = capsys.readouterr().err
            assert f"{index}: the file system that holds it is mounted read-only" in err, (argv, err)
            assert "chmod" not in err and "nothing was changed" in err, err
        with RetrievalClient(index) as client:  # it still answers searches
            assert client.search("attention").ranked
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
