"""Reads with a time budget: a progress handler on SQLite, ``statement_timeout`` on PostgreSQL, each stopped read a
``QueryTimeoutError`` that says what to do (a server's requests could otherwise hold a thread for ever: a search
against a server that held a lock hung for as long as the lock was held)."""

from __future__ import annotations

import time

import pytest

from retrieval import RetrievalClient
from retrieval.errors import QueryTimeoutError

LONG_QUERY = " ".join(["computer program language system data structure algorithm time sharing"] * 3)


def test_a_sqlite_read_past_its_budget_is_stopped_with_a_message(cacm_db):
    db, _ = cacm_db
    with RetrievalClient(db) as client:  # the default budget: ample
        expected = [r.paper.id for r in client.search(LONG_QUERY).ranked]
    assert expected
    with RetrievalClient(db, timeout=1e-6) as client, pytest.raises(QueryTimeoutError) as stopped:
        client.search(LONG_QUERY)
    assert "budget" in str(stopped.value) and "--query-timeout" in str(stopped.value)
    with RetrievalClient(db, timeout=None) as client:  # no budget at all
        assert [r.paper.id for r in client.search(LONG_QUERY).ranked] == expected


def _lock_every_table(url: str):
    import psycopg

    conn = psycopg.connect(url)
    tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'retrieval'")]
    conn.execute("LOCK TABLE " + ", ".join(f"retrieval.{t}" for t in tables) + " IN ACCESS EXCLUSIVE MODE")
    return conn


def test_a_postgresql_read_past_its_statement_timeout_is_stopped_and_the_client_goes_on(demo_pg):
    with RetrievalClient(demo_pg, timeout=0.5) as client:
        expected = [r.paper.id for r in client.search("attention sparsity").ranked]
        held = _lock_every_table(demo_pg)
        try:
            began = time.monotonic()
            with pytest.raises(QueryTimeoutError) as stopped:
                client.search("attention sparsity")
            assert time.monotonic() - began < 5
        finally:
            held.close()
        assert "0.5 s budget" in str(stopped.value) and "postgres@" in str(stopped.value)
        # Said as what it was, a lock another session held, not as a query to narrow.
        assert "stayed locked by another session" in str(stopped.value), stopped.value
        assert "narrow the query" not in str(stopped.value)
        assert [r.paper.id for r in client.search("attention sparsity").ranked] == expected


def test_a_long_lived_client_waits_one_budget_and_stops_when_interrupted(demo_pg):
    """A client that has searched before sends its next search's terms with the snapshot's beginning. When that
    beginning waited out the budget on a lock, it was begun again without them, to wait a second budget; and an
    ``interrupt`` during it was taken for a failed guess the same way. Both now end the read."""
    import threading

    from retrieval.store.sql.executor import Trace

    trace = Trace()
    with RetrievalClient(demo_pg, timeout=0.5, tracer=trace) as client:
        expected = [r.paper.id for r in client.search("attention sparsity").ranked]
        held = _lock_every_table(demo_pg)
        try:
            since = len(trace.statements)
            with pytest.raises(QueryTimeoutError):
                client.search("attention sparsity")
            names = [s.name for s in trace.statements[since:]]
            assert names.count("begin the read snapshot") == 1, names
            assert "end the read snapshot whose guess failed" not in names
        finally:
            held.close()
        assert [r.paper.id for r in client.search("attention sparsity").ranked] == expected
    with RetrievalClient(demo_pg, timeout=None) as client:  # no budget: only the interrupt ends the wait
        client.search("attention sparsity")
        held = _lock_every_table(demo_pg)
        release = threading.Timer(20, held.close)  # a read that waits the lock out ends the test, not hangs it
        release.start()
        try:
            threading.Timer(0.5, client.interrupt).start()
            began = time.monotonic()
            with pytest.raises(Exception):  # noqa: B017 - the cancelled read's error, whichever the driver gives
                client.search("attention sparsity")
            assert time.monotonic() - began < 10
        finally:
            release.cancel()
            held.close()
        assert [r.paper.id for r in client.search("attention sparsity").ranked] == expected


def test_a_postgresql_read_that_is_slow_without_a_lock_is_said_to_be_slow(demo_pg):
    from retrieval.store.sql.dialect import statement

    until_stopped = statement(_UNTIL_STOPPED)
    with (
        RetrievalClient(demo_pg, timeout=0.3) as client,
        client.snapshot() as snap,
        pytest.raises(QueryTimeoutError) as stopped,
    ):
        snap.rows("a statement that runs until stopped", until_stopped)
    assert "narrow the query" in str(stopped.value) and "locked" not in str(stopped.value)


_UNTIL_STOPPED = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n WHERE x > 0"
_CTRL_C_SCRIPT = """
import sys
from retrieval import RetrievalClient
from retrieval.errors import RetrievalError
with RetrievalClient(sys.argv[1]) as client, client.snapshot() as snap:
    print("ready", flush=True)
    try:
        snap.rows("a statement that runs until stopped", sys.argv[2])
    except KeyboardInterrupt:
        print("KeyboardInterrupt")
    except RetrievalError as exc:
        print(type(exc).__name__, exc)
"""


def test_ctrl_c_during_a_sqlite_read_is_an_interrupt_not_a_file_error(demo_db):
    """A Ctrl-C that arrives while SQLite runs a statement reaches Python as the deadline's progress handler is
    called, and the sqlite3 module turns it into an "interrupted" error: it is the interrupt again (the CLI says
    "interrupted", exit 130), not "cannot read the index (interrupted)". A statement stopped by ``interrupt``
    from another thread stays a store error; one past its deadline a timeout."""
    import signal
    import subprocess
    import sys
    import threading

    proc = subprocess.Popen(
        [sys.executable, "-c", _CTRL_C_SCRIPT, str(demo_db), _UNTIL_STOPPED],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal's process has it
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert out.strip() == "KeyboardInterrupt"
    from retrieval.errors import StoreError

    with RetrievalClient(demo_db) as client, client.snapshot() as snap:
        threading.Timer(0.3, client.interrupt).start()
        with pytest.raises(StoreError, match="interrupted"):
            snap.rows("a statement stopped from another thread", _UNTIL_STOPPED)


_SHARED_SCRIPT = """
import json, sys, threading
from retrieval import RetrievalClient
queries = ["attention sparsity", "routing block", "pruning"]
with RetrievalClient(sys.argv[1]) as client:
    got, errors = [], []
    def work(i):
        try:
            for j in range(20):
                q = queries[(i + j) % 3]
                got.append((q, [[r.paper.id, r.final_score] for r in client.search(q, limit=5).ranked]))
                if j % 5 == 0:
                    got.append(("similar", [r.paper.id for r in client.similar("p001", limit=5).ranked]))
                if j % 7 == 0:
                    got.append(("paper", client.paper("p002").id))
        except BaseException as exc:
            errors.append(repr(exc))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
print(json.dumps({"got": got, "errors": errors}))
"""


def test_one_client_shared_by_threads_takes_turns_and_answers_as_alone(demo_db):
    """Threads sharing one client (with its default read budget, a progress handler that calls back into
    Python): each snapshot has the connection to itself, and every answer is the one a thread alone gets (the
    process hung for good: one thread held the connection inside SQLite, waiting for the interpreter in the
    progress handler, while another held the interpreter, waiting for the connection)."""
    import json
    import subprocess
    import sys

    queries = ["attention sparsity", "routing block", "pruning"]
    with RetrievalClient(demo_db) as client:
        alone = {q: [[r.paper.id, r.final_score] for r in client.search(q, limit=5).ranked] for q in queries}
        alone["similar"] = [r.paper.id for r in client.similar("p001", limit=5).ranked]
        alone["paper"] = "p002"
    done = subprocess.run(
        [sys.executable, "-c", _SHARED_SCRIPT, str(demo_db)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["errors"] == [] and len([q for q, _ in out["got"] if q in queries]) == 80
    assert all(answer == alone[q] for q, answer in out["got"])


def test_reads_without_a_budget_and_a_builds_swap_stop_waiting_for_a_lock_with_a_message(pg_database, capsys,
                                                                                        monkeypatch):  # fmt: skip
    """``stats`` and ``check`` (reads without a time budget) and a rebuild's swap waited for as long as another
    session held the index's tables locked: now as long as a writer waits for another, then a message, the index
    as it was."""
    import psycopg

    from retrieval.commands import build, stats
    from retrieval.corpus.paper import Paper
    from retrieval.errors import StoreError
    from retrieval.interfaces.cli import main
    from retrieval.store.postgres import connection, write

    url = pg_database("locked")
    build(db=url, semantic="none")
    before = stats(url)
    monkeypatch.setattr(connection, "LOCK_WAIT", 1.0, raising=False)
    held = _lock_every_table(url)
    try:
        for command in ("stats", "check"):
            began = time.monotonic()
            assert main([command, "--db", url]) == 1
            assert time.monotonic() - began < 10
            err = capsys.readouterr().err
            assert "stayed locked by another session for 1 s" in err and "Traceback" not in err, err
        began = time.monotonic()
        with pytest.raises(StoreError, match=r"cannot open the index at .*another session held a lock on its tables"):
            build(db=url, source=[Paper("x1", "Another paper", "Its text.", 2020, source="test")], semantic="none")
        assert time.monotonic() - began < 30
    finally:
        held.close()
    # A writer that does not end (holding the writers' lock): the build runs, and its swap waits, then stops.
    writer = psycopg.connect(url, autocommit=True)
    writer.execute("SELECT pg_advisory_lock(%s)", (write.WRITER_LOCK_KEY,))
    try:
        with pytest.raises(StoreError, match=r"cannot write to the index at .*another session held a lock on its"):
            build(db=url, source=[Paper("x1", "Another paper", "Its text.", 2020, source="test")], semantic="none")
    finally:
        writer.close()
    after = stats(url)
    assert (after["papers"], after["built_at"]) == (before["papers"], before["built_at"])
    with psycopg.connect(url) as conn:  # the built schema was dropped, not left beside the index
        left = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'retrieval%'").fetchall()
    assert left == [("retrieval",)], left
