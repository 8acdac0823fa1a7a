"""The query log (``retrieval log``): off by default, a row per search and explain when on, never failing a search
(read-only and locked files), listed, filtered by time, as JSON and as a plot; older revisions."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from retrieval import RetrievalConfig, SchemaVersionError
from retrieval.commands import build, log_enable, log_entries, search
from retrieval.evidence.pipeline import explain_index
from retrieval.interfaces.cli import main
from retrieval.store import querylog
from retrieval.store.database import READABLE_REVISIONS
from retrieval.store.schema.migrate import downgrade, migrate


def run(capsys, *argv):
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _warn_afresh(monkeypatch):
    """Each test is a new process as far as the once-per-process warning goes."""
    monkeypatch.setattr(querylog, "_warned", False)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("querylog") / "built.db"
    build(db=path)
    return path


@pytest.fixture
def db(built, tmp_path) -> Path:
    """A private copy of the demo index (each test turns its log on and off)."""
    path = tmp_path / "index" / "log.db"
    path.parent.mkdir()
    source, copy = sqlite3.connect(built), sqlite3.connect(path)
    try:
        source.backup(copy)
        copy.execute("PRAGMA journal_mode = WAL")
    finally:
        source.close()
        copy.close()
    return path


def rows(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM query_log").fetchone()[0]


def test_a_fresh_build_has_the_table_and_the_log_is_off(db, capsys):
    with sqlite3.connect(db) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert {"query_log", "ix_query_log_logged_at"} <= names
        assert conn.execute("SELECT value FROM index_info WHERE key = 'query_log'").fetchone() is None
    assert not querylog.is_enabled(db)
    search("attention sparsity", db=db)
    code, out, err = run(capsys, "search", "attention sparsity", "--db", db)
    assert code == 0 and err == ""
    assert rows(db) == 0
    code, out, _ = run(capsys, "log", "--db", db)
    assert code == 0 and out.strip() == "0 logged queries; the query log is off (`retrieval log on` turns it on)"


def test_on_logs_each_search_and_explain_with_its_numbers(db, capsys):
    code, out, _ = run(capsys, "log", "on", "--db", db)
    assert code == 0 and "is on" in out
    assert querylog.is_enabled(db)
    before = datetime.now(timezone.utc) - timedelta(milliseconds=1)  # the log keeps milliseconds
    code, out, err = run(capsys, "search", "attention sparsity", "--db", db, "--json", "--limit", 5)
    assert code == 0 and err == ""
    shown = json.loads(out)
    config = RetrievalConfig(expand="always", max_hops=2)
    result = search("low rank adapter", db=db, config=config, limit=None)
    run_ = explain_index("attention sparsity", db=db)
    after = datetime.now(timezone.utc)

    first, second, third = log_entries(db)
    assert first["kind"] == "search" and first["query"] == "attention sparsity"
    assert first["result_ids"] == [r["id"] for r in shown["results"]] and len(first["result_ids"]) == 5
    metrics = shown["metrics"]
    assert (first["hit_count"], first["top_score"]) == (metrics["hit_count"], metrics["top_score"])
    assert first["avg_score"] == metrics["avg_score"] and first["wall_ms"] == metrics["wall_time_ms"]
    # the default ranking (auto) chose the learned model, which always expands: the log says what ran
    assert shown["expansion"]["auto"]["ranking"] == "learned"
    assert first["gate_fired"] is shown["expansion"]["gate"]["fired"] is True
    assert (first["page_limit"], first["page_offset"]) == (5, 0)
    ran = RetrievalConfig(ranking="learned").to_dict()
    assert first["settings"] == json.loads(json.dumps(ran))  # every field, as JSON
    assert before <= datetime.fromisoformat(first["logged_at"]) <= after
    assert first["logged_at"].endswith("+00:00")

    assert second["result_ids"] == [entry.paper.id for entry in result.ranked]
    assert second["gate_fired"] is True and second["page_limit"] is None
    assert second["settings"]["expand"] == "always" and second["settings"]["max_hops"] == 2
    assert second["hit_count"] == result.hit_count and second["wall_ms"] == result.wall_time_ms

    assert third["kind"] == "explain" and third["gate_fired"] is None
    assert third["result_ids"] == [pid for pid, _ in run_.top]
    assert third["hit_count"] == len(run_.ranking) and third["top_score"] == run_.ranking[0][1]
    assert third["page_limit"] == run_.config.top_k and third["settings"] == run_.config.to_dict()
    assert [e["id"] for e in log_entries(db)] == [first["id"], second["id"], third["id"]]


def test_a_log_row_changed_by_hand_is_named_not_a_traceback(db, capsys):
    """A row whose settings or result ids are not JSON made `retrieval log` fail with a JSONDecodeError."""
    assert run(capsys, "log", "on", "--db", db)[0] == 0
    for query in ("attention sparsity", "low rank adapter", "mixture of experts"):
        assert run(capsys, "search", query, "--db", db)[0] == 0
    first, second, third = log_entries(db)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE query_log SET settings = '{not json' WHERE id = ?", (second["id"],))
    code, _, err = run(capsys, "log", "--db", db)
    assert code == 1 and "Traceback" not in err
    assert f"is damaged: the query log's row {second['id']!r} (logged at {second['logged_at']}) holds settings" in err
    assert [e["id"] for e in log_entries(db, since=third["logged_at"])] == [third["id"]]  # the way around it


def test_off_again_logs_nothing_more_and_keeps_the_rows(db, capsys):
    assert log_enable(True, db=db) is False
    assert log_enable(True, db=db) is True  # it was on
    search("attention sparsity", db=db)
    code, out, _ = run(capsys, "log", "off", "--db", db)
    assert code == 0 and "is off" in out
    search("attention sparsity", db=db)
    explain_index("attention sparsity", db=db)
    assert rows(db) == 1
    code, out, _ = run(capsys, "log", "off", "--db", db)
    assert code == 0 and "(it was not on)" in out


def _make_read_only(path: Path) -> bool:
    """Make the index file and its folder read-only for this process: chmod, or, for root (whom modes do not
    stop), ``chattr +i``. False when neither takes."""
    path.chmod(0o444)
    path.parent.chmod(0o555)
    try:
        with open(path, "r+b"):
            pass
    except PermissionError:
        return True
    for target in (path, path.parent):
        done = subprocess.run(["chattr", "+i", str(target)], capture_output=True)
        if done.returncode != 0:
            return False
    return True


def _make_writable(path: Path) -> None:
    for target in (path.parent, path):
        subprocess.run(["chattr", "-i", str(target)], capture_output=True)
    path.parent.chmod(0o755)
    path.chmod(0o644)


def test_a_read_only_index_is_searched_and_says_once_that_it_logs_nothing(db, capsys):
    log_enable(True, db=db)
    for side in ("-wal", "-shm"):
        assert not Path(f"{db}{side}").exists()
    try:
        if not _make_read_only(db):
            pytest.skip("cannot make a file read-only here (neither chmod nor chattr +i takes)")
        for _ in range(3):
            code, out, err = run(capsys, "search", "attention sparsity", "--db", db, "--json")
            assert code == 0 and json.loads(out)["results"]
            if _ == 0:
                assert err.startswith("retrieval: warning: the query log is on but queries are not being logged")
                assert err.count("\n") == 1, err
            else:
                assert err == "", err  # once per process, not per query
        assert explain_index("attention sparsity", db=db).top
        assert capsys.readouterr().err == ""
    finally:
        _make_writable(db)
    assert rows(db) == 0


def test_a_locked_index_is_searched_without_waiting_for_the_lock(db, capsys):
    log_enable(True, db=db)
    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another writer, mid-transaction (an add, say)
        holder.execute("INSERT INTO index_info (key, value) VALUES ('held', 'yes')")
        started = time.perf_counter()
        for _ in range(3):
            result = search("attention sparsity", db=db)
            assert result.ranked
        elapsed = time.perf_counter() - started
        err = capsys.readouterr().err
        assert err.count("retrieval: warning:") == 1 and "locked" in err, err
        assert elapsed < 3 * (querylog.BUSY_TIMEOUT_MS / 1000 + 1.0)
        holder.execute("ROLLBACK")
    finally:
        holder.close()
    assert rows(db) == 0
    search("attention sparsity", db=db)  # the lock is gone: logged again
    assert rows(db) == 1


def test_since_filters_by_time_and_json_parses(db, capsys):
    log_enable(True, db=db)
    for text in ("attention sparsity", "low rank adapter", "graph neural network"):
        search(text, db=db)
    with sqlite3.connect(db) as conn:  # the first two as if logged earlier
        conn.execute("UPDATE query_log SET logged_at = '2026-01-02T10:00:00.000+00:00' WHERE id = 1")
        conn.execute("UPDATE query_log SET logged_at = '2026-03-04T23:30:00.000+00:00' WHERE id = 2")
    assert [e["id"] for e in log_entries(db, since="2026-03-01")] == [2, 3]
    assert [e["id"] for e in log_entries(db, since="2026-03-05T01:00+02:00")] == [2, 3]  # 23:00 UTC
    assert [e["id"] for e in log_entries(db, since="2026-03-05T00:00Z")] == [3]
    assert [e["id"] for e in log_entries(db, since=datetime.now(timezone.utc) + timedelta(days=1))] == []

    code, out, _ = run(capsys, "log", "--db", db, "--since", "2026-03-01", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["enabled"] is True and data["since"] == "2026-03-01T00:00:00.000+00:00"
    assert [e["query"] for e in data["entries"]] == ["low rank adapter", "graph neural network"]
    assert all(isinstance(e["result_ids"], list) and isinstance(e["settings"], dict) for e in data["entries"])

    code, out, _ = run(capsys, "log", "--db", db, "--since", "2026-03-01")
    assert code == 0 and "2 logged queries since 2026-03-01" in out and "low rank adapter" in out
    with pytest.raises(SystemExit) as exit_info:
        main(["log", "--db", str(db), "--since", "last tuesday"])
    assert exit_info.value.code == 2
    assert "expected a date or a time in ISO 8601" in capsys.readouterr().err


def test_the_table_sends_no_control_character_a_logged_query_holds(db, capsys):
    """A query sent to the API with a terminal's escape sequence in it reached the terminal raw in `log`."""
    log_enable(True, db=db)
    search("attention \x1b[2J\x1b]0;pwned\x07 sparsity", db=db)
    code, out, _ = run(capsys, "log", "--db", db)
    assert code == 0 and "\x1b" not in out and "\x07" not in out
    assert "attention [2J ]0;pwned sp" in out and out.rstrip().endswith("1 logged query; the query log is on")


def test_the_table_fits_80_columns(db, capsys):
    log_enable(True, db=db)
    search("attention sparsity " * 40 + "\nsecond line", db=db)
    explain_index("attention sparsity", db=db)
    code, out, _ = run(capsys, "log", "--db", db)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["time", "(UTC)", "kind", "hits", "top", "ms", "gate", "query"]
    assert len(lines) == 5 and lines[-1] == "2 logged queries; the query log is on"
    assert all(len(line) <= 80 for line in lines), [len(line) for line in lines]
    assert lines[1].endswith("...") and " search " in lines[1] and " explain " in lines[2]


def test_the_plot_is_a_png(db, tmp_path, capsys):
    out = tmp_path / "log.png"
    code, _, err = run(capsys, "log", "--db", db, "--plot", out)
    assert code == 1 and "no entries to plot" in err and not out.exists()
    log_enable(True, db=db)
    for text in ("attention sparsity", "low rank adapter"):
        search(text, db=db)
    explain_index("attention sparsity", db=db)
    code, printed, _ = run(capsys, "log", "--db", db, "--plot", out)
    assert code == 0 and "drew 3 logged queries" in printed
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # entries there are, none since the date: that date is the matter, not whether the log is on
    code, _, err = run(capsys, "log", "--db", db, "--plot", tmp_path / "later.png", "--since", "2999-01-01")
    assert code == 1 and "no entries since 2999-01-01" in err and "to plot: give an earlier --since" in err
    assert not (tmp_path / "later.png").exists()


def test_on_and_off_take_no_listing_options(db, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["log", "on", "--json", "--db", str(db)])
    assert exit_info.value.code == 2
    assert not querylog.is_enabled(db)


def test_recording_never_raises(tmp_path, capsys):
    assert querylog.record(tmp_path / "absent.db", "search", "q", None, object()) is False
    assert querylog.record_if_enabled(tmp_path / "absent.db", "search", "q", None, object()) is False
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("retrieval: warning:")
    assert not (tmp_path / "absent.db").exists()  # the log never creates a file


def test_an_index_of_revision_0004_has_no_log_and_says_to_upgrade(db, capsys):
    log_enable(True, db=db)
    downgrade(db, "0004")
    with sqlite3.connect(db) as conn:  # the downgrade takes the table and the switch away
        assert conn.execute("SELECT value FROM index_info WHERE key = 'query_log'").fetchone() is None
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'query_log'").fetchone() == (0,)
    code, _, err = run(capsys, "log", "on", "--db", db)
    assert code == 1 and f"`retrieval upgrade --db {db}`" in err
    if "0004" in READABLE_REVISIONS:  # searched as it is, logging nothing and saying nothing
        code, out, err = run(capsys, "search", "attention sparsity", "--db", db)
        assert code == 0 and "Attention Sparsity" in out and err == ""
        assert log_entries(db) == []
        assert run(capsys, "log", "off", "--db", db)[0] == 0
    else:  # a later revision holds what every search reads: the upgrade comes first
        with pytest.raises(SchemaVersionError, match="retrieval upgrade"):
            search("attention sparsity", db=db)
    code, out, _ = run(capsys, "upgrade", "--db", db)
    assert code == 0
    assert run(capsys, "log", "on", "--db", db)[0] == 0
    search("attention sparsity", db=db)
    assert rows(db) == 1


def test_the_migration_adds_and_removes_only_the_log(tmp_path):
    path = tmp_path / "m.db"
    migrate(path, "0004")
    with sqlite3.connect(path) as conn:
        before = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    migrate(path, "0005")
    with sqlite3.connect(path) as conn:
        after = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert after - before == {"query_log", "ix_query_log_logged_at"} and before <= after
    downgrade(path, "0004")
    with sqlite3.connect(path) as conn:
        assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master")} == before


def test_similar_and_filtered_searches_are_logged(db):
    from retrieval import commands

    if not hasattr(commands, "similar"):
        pytest.skip("no `similar` command in this version")
    log_enable(True, db=db)
    like = commands.similar(["p008"], db=db, limit=4)
    filtered = search("attention sparsity", db=db, year="2000-2030")
    first, second = log_entries(db)
    assert first["kind"] == "similar" and first["query"] == "p008" and first["gate_fired"] is None
    assert first["result_ids"] == [entry.paper.id for entry in like.ranked] and first["page_limit"] == 4
    assert first["hit_count"] == like.matched and first["top_score"] == max(e.score for e in like.ranked)
    assert second["result_ids"] == [entry.paper.id for entry in filtered.ranked]
    assert second["settings"]["filters"]["year"] == [2000, 2030]
