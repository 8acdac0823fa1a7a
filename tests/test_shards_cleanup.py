"""A sharded build cleans up after earlier killed sharded builds: their coordinator schemas, foreign servers and
shard schemas, and their folders in the temporary folder; never a running build's, nor the live index's
(``retrieval.store.postgres.shards``, "After a killed build").

The killed builds are real processes (``retrieval build --shards``) killed with SIGKILL at three points: during the
load of the second shard, in the middle of the swap, and just after the swap, while the replaced index's shard
schemas are being dropped (the new index is live, the old one's servers and schemas are left). Each runs with its
own ``TMPDIR``, so no other user's or test's folders are looked at. The helpers are the single server's test's.
"""

from __future__ import annotations

import signal
import tempfile

import pytest

from retrieval import commands
from retrieval.commands import build
from retrieval.config import DatabaseURL
from retrieval.store.postgres import build as pgbuild
from retrieval.store.postgres import shards as pgshards
from tests.helpers import corpus, paper, write_jsonl
from tests.test_postgres_build_cleanup import WAIT, _cli_build, _marked, _pg, _sessions, _statement, _until

psycopg = pytest.importorskip("psycopg")


def _schemas(url: str) -> set[str]:
    """The schemas of the database whose names begin as the index's do."""
    with _pg(url) as conn:
        return {row[0] for row in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'retrieval%'")}


def _servers(url: str) -> dict[str, bool]:
    """The coordinator's foreign servers, each with whether it carries a build's mark."""
    with _pg(url) as conn:
        rows = conn.execute(
            "SELECT srvname, obj_description(oid, 'pg_foreign_server') IS NOT DISTINCT FROM %s FROM pg_foreign_server",
            (pgshards.SERVER_MARK,),
        )
        return dict(rows.fetchall())


def _layout(url: str) -> list[dict]:
    with _pg(url) as conn:
        return pgshards._old_layout(conn)


def _folders(tmpdir) -> set[str]:
    return {path.name for path in tmpdir.glob("retrieval-shardbuild-*")}


def _ids(url: str, query: str) -> list[str]:
    return [r.paper.id for r in commands.search(query, db=url).ranked]


def _only_the_index(coordinator: str, shards: list[str]) -> None:
    """Every server holds the live index's objects and nothing else of the index's kind."""
    layout = _layout(coordinator)
    assert _schemas(coordinator) == {"retrieval"}
    assert _servers(coordinator) == {entry["server"]: False for entry in layout}  # the index's carry no mark
    for url, entry in zip(shards, layout, strict=True):
        assert _schemas(url) == {entry["schema"]}


@pytest.mark.parametrize("point", ["copy", "swap", "replaced"])
def test_a_sharded_build_removes_what_a_sharded_build_killed_at_any_point_left(
    tmp_path, sharded_database, monkeypatch, point
):
    coordinator, shards = sharded_database(f"kill{point}")
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    log = tmp_path / "stderr.txt"
    first = write_jsonl(tmp_path / "first.jsonl", [paper("a", "black hole entropy"), paper("b", "string theory")])
    build(db=coordinator, source=first, shards=shards)
    old = _layout(coordinator)
    big = corpus(tmp_path / "big.jsonl", 4000, "k")
    monitors = [_pg(url) for url in (coordinator, *shards)]
    blocker = None
    if point == "swap":  # the swap's last statement waits for this transaction: killed with its renames done
        blocker = _pg(coordinator)
        blocker.execute("BEGIN")
        database = blocker.execute("SELECT current_database()").fetchone()[0]
        blocker.execute(f'ALTER DATABASE "{database}" SET search_path = "retrieval", public')
    elif point == "replaced":  # a reader of the replaced index's first shard: the drop after the swap waits for it
        blocker = _pg(shards[0])
        blocker.execute("BEGIN")
        blocker.execute(f'SELECT * FROM "{old[0]["schema"]}".papers')
    killed = _cli_build(coordinator, big, tmpdir, log, "--shards", ",".join(shards), "--workers", "0")
    try:
        if point == "copy":
            _until(lambda: _statement(monitors[2], "COPY"), killed, "load into the second shard")
        elif point == "swap":
            _until(lambda: _statement(monitors[0], "ALTER DATABASE", waiting=True), killed, "swap waiting")
        else:
            _until(lambda: _statement(monitors[1], "DROP SCHEMA", waiting=True), killed, "drop of the old waiting")
    finally:
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=WAIT)
        if blocker is not None:
            blocker.execute("ROLLBACK")
            blocker.close()
    assert killed.returncode == -signal.SIGKILL
    for monitor in monitors:
        _until(lambda m=monitor: _sessions(m) == 0, None, "end of the killed build's sessions")
        monitor.close()

    # What the killed build left, on every server: nothing removes it by itself.
    live = _layout(coordinator)
    assert (live != old) == (point == "replaced")  # killed after the swap: its index is the live one
    left_schemas = _marked(coordinator)
    assert len(left_schemas) == (0 if point == "replaced" else 1)
    assert all(name.startswith("retrieval_build_") for name in left_schemas)
    assert _schemas(coordinator) == {"retrieval", *left_schemas}  # and no retrieval_old_* schema
    servers = _servers(coordinator)
    assert {name for name, marked in servers.items() if not marked} == {entry["server"] for entry in live}
    assert len([name for name, marked in servers.items() if marked]) == len(shards)  # the killed's, or the old's
    for url, entry in zip(shards, live, strict=True):
        assert len(_schemas(url)) == 2 and entry["schema"] in _schemas(url)
    assert len(_folders(tmpdir)) == (0 if point == "replaced" else 1)  # after the swap: its folder was gone
    query = "w7" if point == "replaced" else "entropy"
    expected = _ids(coordinator, query)
    if point == "replaced":
        assert expected and all(pid.startswith("k") for pid in expected)
    else:
        assert expected == ["a"]

    # The cleanup leaves the live index, and only it, on every server; the index answers as before.
    with _pg(coordinator) as conn:
        dropped, warnings = pgshards.remove_stale_builds(conn)
    assert warnings == []
    assert set(dropped) == left_schemas | {name for name, marked in servers.items() if marked}
    _only_the_index(coordinator, shards)
    assert _layout(coordinator) == live
    assert _ids(coordinator, query) == expected

    # And a new build removes the killed build's folder, and is the index.
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))
    again = write_jsonl(tmp_path / "again.jsonl", [paper("x", "entanglement entropy"), paper("y", "holography")])
    assert build(db=coordinator, source=again, shards=shards).warnings == []
    assert _folders(tmpdir) == set()
    _only_the_index(coordinator, shards)
    assert _ids(coordinator, "entanglement") == ["x"]


def _made(coordinator: str, shards: list[str], tag: str, *, coordinator_gone: bool, shard_gone: bool):
    """What a sharded build ``tag`` makes before its load, as it makes it: its coordinator schema and its marked
    servers under its lock there, and its schema on the first shard under its lock there. The sessions holding the
    locks are closed as asked (a build killed: both), and those left open returned."""
    conn = _pg(coordinator)
    pgbuild.claim_schema(conn, f"retrieval_build_{tag}")
    with conn.transaction():
        pgshards._create_servers(conn, tag, [DatabaseURL(url) for url in shards])
    shard = _pg(shards[0])
    pgbuild.claim_schema(shard, f"retrieval_shard_{tag}", mark=None)
    shard.execute(f'CREATE TABLE "retrieval_shard_{tag}".papers (id text)')
    for session, gone in ((conn, coordinator_gone), (shard, shard_gone)):
        if gone:
            session.close()
    return [session for session, gone in ((conn, coordinator_gone), (shard, shard_gone)) if not gone]


def test_a_sharded_build_leaves_a_running_builds_objects_on_every_server(tmp_path, sharded_database, monkeypatch):
    """Only what has no owner on every server it lives on is removed: a running build's schemas and servers (their
    locks held here, as a build holds them) stay, and so do a server without the mark (a build's from before the
    mark, or one made by hand), the schemas of a build whose session on a shard is still there, and a single
    server's build's folder; a server whose shard cannot be reached is a warning."""
    coordinator, shards = sharded_database("live")
    build(db=coordinator, source=write_jsonl(tmp_path / "a.jsonl", [paper("a", "black hole entropy")]), shards=shards)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir))

    running = _made(coordinator, shards, "1_1", coordinator_gone=False, shard_gone=False)
    _made(coordinator, shards, "2_2", coordinator_gone=True, shard_gone=True)  # killed
    lingering = _made(coordinator, shards, "5_5", coordinator_gone=True, shard_gone=False)  # its shard session lives
    with _pg(coordinator) as conn:  # no mark: never taken for a killed build's
        conn.execute("CREATE SERVER \"retrieval_3_3_s0\" FOREIGN DATA WRAPPER postgres_fdw OPTIONS (dbname 'x')")
        with conn.transaction():  # a killed build's server whose shard is gone
            pgshards._create_servers(conn, "6_6", [DatabaseURL("postgresql://nobody@127.0.0.1:1/nowhere")])
    with _pg(shards[0]) as conn:
        conn.execute('CREATE SCHEMA "retrieval_shard_3_3"')
    dead = tmpdir / "retrieval-shardbuild-dead0000"  # a killed build's folder: nobody holds its lock
    (dead / "sub").mkdir(parents=True)
    (tmpdir / "retrieval-pgbuild-dead0000").mkdir()  # a single server's build's: not this build's to judge

    with pgbuild.build_folder(pgshards.FOLDER_PREFIX) as folder:
        summary = build(db=coordinator, source=write_jsonl(tmp_path / "b.jsonl", [paper("b", "string theory")]))
        assert [w for w in summary.warnings if "retrieval_6_6_s0" in w and "drop them by hand" in w]
        # not only a killed build's: a replaced index's server whose shard was gone when it was replaced is too
        assert (
            "a left-over (a killed build's or a replaced index's) foreign server retrieval_6_6_s0"
            in summary.warnings[0]
        )
        assert len(summary.warnings) == 1
        assert folder.is_dir() and not dead.exists() and (tmpdir / "retrieval-pgbuild-dead0000").is_dir()
        live = _layout(coordinator)
        assert _schemas(coordinator) == {"retrieval", "retrieval_build_1_1"}
        assert _servers(coordinator) == {
            **{entry["server"]: False for entry in live},
            "retrieval_1_1_s0": True, "retrieval_1_1_s1": True,  # running
            "retrieval_5_5_s0": True,  # its shard's session holds the lock (the second shard has nothing of it)
            "retrieval_3_3_s0": False, "retrieval_6_6_s0": True,
        }  # fmt: skip
        assert _schemas(shards[0]) == {live[0]["schema"], "retrieval_shard_1_1", "retrieval_shard_3_3",
                                       "retrieval_shard_5_5"}  # fmt: skip
        assert _schemas(shards[1]) == {live[1]["schema"]}
        assert _ids(coordinator, "string") == ["b"]

        for session in [*running, *lingering]:  # those builds are gone now: the next build removes the rest
            session.close()
        build(db=coordinator, source=write_jsonl(tmp_path / "c.jsonl", [paper("c", "gauge theory")]))
        live = _layout(coordinator)
        assert _schemas(coordinator) == {"retrieval"}
        assert _servers(coordinator) == {
            **{entry["server"]: False for entry in live},
            "retrieval_3_3_s0": False,
            "retrieval_6_6_s0": True,
        }
        assert _schemas(shards[0]) == {live[0]["schema"], "retrieval_shard_3_3"}
        assert _schemas(shards[1]) == {live[1]["schema"]}
        assert _ids(coordinator, "gauge") == ["c"]
        assert folder.is_dir()
    assert not folder.exists()
