"""``retrieval mcp``: the agent tools through the official SDK's own client, over stdio, against a real server
process (``python -m retrieval mcp --db ...``) on a real index. Every session is bounded in time, so a server
that hangs fails the test instead of hanging the run."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

anyio = pytest.importorskip("anyio")
pytest.importorskip("mcp.server.mcpserver")  # the SDK, version 2 or later

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

from retrieval.commands import log_enable  # noqa: E402
from retrieval.config import RetrievalConfig  # noqa: E402
from retrieval.errors import RetrievalError  # noqa: E402
from retrieval.evidence.config import RANKERS, EvidenceConfig  # noqa: E402
from retrieval.evidence.pipeline import explain  # noqa: E402
from retrieval.interfaces import cli  # noqa: E402
from retrieval.interfaces.service import BOUNDS, _paper_ids, summarise  # noqa: E402
from retrieval.search.client import RetrievalClient  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SESSION_SECONDS = 60  # a whole session: start, every call, shutdown
CALL_SECONDS = 30  # one request


def session(db: Path, body, errlog: Path):
    """Start ``retrieval mcp --db db``, initialise a ``ClientSession`` and run ``body(session)`` in it; the
    server's stderr goes to ``errlog``. Returns what ``body`` returns."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "retrieval", "mcp", "--db", str(db)], cwd=ROOT)

    async def main():
        with anyio.fail_after(SESSION_SECONDS), open(errlog, "w", encoding="utf-8") as err:
            async with (
                stdio_client(params, errlog=err) as (read, write),
                ClientSession(read, write, read_timeout_seconds=CALL_SECONDS) as client,
            ):
                await client.initialize()
                return await body(client)

    return anyio.run(main)


def calls(db: Path, tmp_path: Path, *requests: tuple[str, dict]):
    """The results of ``requests`` (tool name, arguments), in order, in one session."""

    async def body(client):
        return [await client.call_tool(name, arguments) for name, arguments in requests]

    results = session(db, body, tmp_path / "server.err")
    assert "Traceback" not in (tmp_path / "server.err").read_text(encoding="utf-8")
    return results


def data(result) -> dict:
    """A successful call's JSON object: its structured content, which its text content says too."""
    assert not result.is_error, result.content[0].text
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def untimed(value):
    """``value`` as JSON (lists for tuples), without its wall-clock times, which differ between two runs."""
    if isinstance(value, dict):
        return {k: untimed(v) for k, v in value.items() if not k.endswith("_ms")}
    if isinstance(value, (list, tuple)):
        return [untimed(v) for v in value]
    return value


def approx_floats(value):
    """``value`` with each float as ``pytest.approx`` of itself (relative 1e-12)."""
    if isinstance(value, dict):
        return {k: approx_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [approx_floats(v) for v in value]
    return pytest.approx(value, rel=1e-12, abs=1e-15) if isinstance(value, float) else value


def library_message(call) -> str:
    with pytest.raises(RetrievalError) as caught:
        call()
    return str(caught.value)


def test_list_tools_gives_the_four_tools_with_typed_schemas(demo_db, tmp_path):
    async def body(client):
        return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in session(demo_db, body, tmp_path / "server.err")}
    assert set(tools) == {"search", "similar", "show", "explain"}
    schemas = {name: tool.input_schema for name, tool in tools.items()}
    assert schemas["search"]["required"] == ["query"]
    assert schemas["similar"]["required"] == ["paper_ids"]
    assert schemas["show"]["required"] == ["paper_id"]
    assert schemas["explain"]["required"] == ["query"]
    search = schemas["search"]["properties"]
    assert set(search) == {"query", "limit", "offset", "year", "authors", "sort"}
    assert search["query"]["type"] == "string"
    assert (search["limit"]["type"], search["limit"]["minimum"], search["limit"]["maximum"]) == (
        "integer", 1, BOUNDS["limit"],
    )  # fmt: skip
    assert search["limit"]["default"] == 10 and search["offset"]["maximum"] == BOUNDS["offset"]
    assert {"type": "array", "items": {"type": "string"}} in search["authors"]["anyOf"]
    similar = schemas["similar"]["properties"]
    assert set(similar) == {"paper_ids", "limit", "offset", "exclude", "year", "authors", "sort"}
    assert similar["paper_ids"]["type"] == "array" and similar["paper_ids"]["items"] == {"type": "string"}
    assert similar["paper_ids"]["maxItems"] == BOUNDS["ids"]
    # bounds the tools enforce, in their schemas too (they were in the descriptions only)
    assert search["query"]["maxLength"] == BOUNDS["query_chars"] and similar["exclude"]["maxItems"] == BOUNDS["ids"]
    explained = schemas["explain"]["properties"]
    assert explained["query"]["maxLength"] == BOUNDS["query_chars"]
    assert explained["subqueries"]["maxItems"] == BOUNDS["subqueries"]
    assert schemas["show"]["properties"]["paper_id"]["type"] == "string"
    show = schemas["show"]["properties"]
    assert set(show) == {"paper_id", "limit", "sort", "references_offset", "citations_offset"}
    assert (show["limit"]["default"], show["limit"]["maximum"], show["sort"]["enum"]) == (
        20, BOUNDS["limit"], ["citations", "year", "id"],
    )  # fmt: skip
    explain_props = schemas["explain"]["properties"]
    assert set(explain_props) == {"query", "subqueries", "top_k", "max_nodes", "ranker", "edges", "pruned"}
    assert explain_props["edges"]["maximum"] == BOUNDS["explain_edges"]
    assert explain_props["ranker"]["enum"] == list(RANKERS)
    assert explain_props["top_k"]["maximum"] == BOUNDS["top_k"]
    assert explain_props["max_nodes"]["maximum"] == BOUNDS["max_nodes"]
    for name, tool in tools.items():
        assert all(prop.get("description") for prop in tool.input_schema["properties"].values()), name
        for prop in tool.input_schema["properties"].values():  # `sort`'s null default was outside its enum
            assert "enum" not in prop or prop.get("default", prop["enum"][0]) in prop["enum"], (name, prop)
        assert "Returns JSON" in tool.description and "Use it" in tool.description, name
        assert tool.annotations.read_only_hint is True, name
        assert tool.output_schema["type"] == "object", name


def test_search_equals_the_library_for_the_same_query_and_settings(demo_db, tmp_path):
    asked = [
        {"query": "attention sparsity", "limit": 5},
        {"query": "attention sparsity", "limit": 3, "offset": 3, "year": "2020-"},
        {"query": "attention sparsity", "authors": ["Coauthor 1-7"]},
        {"query": "attention", "year": 2024},
    ]
    results = calls(demo_db, tmp_path, *[("search", a) for a in asked])
    with RetrievalClient(demo_db) as client:
        for arguments, result in zip(asked, results, strict=True):
            got = data(result)
            settings = {k: v for k, v in arguments.items() if k != "query"}
            if "year" in settings:
                settings["year"] = str(settings["year"])
            expected = client.search(arguments["query"], **settings)
            assert got["results"], arguments
            assert [(e["id"], e["final_score"]) for e in got["results"]] == [
                (r.paper.id, r.final_score) for r in expected.ranked
            ]
            assert [e.pop("abstract") for e in got["results"]] == [r.paper.abstract for r in expected.ranked]
            assert untimed(got) == untimed(expected.to_dict())


def test_similar_show_and_explain_match_the_library(demo_db, tmp_path):
    with RetrievalClient(demo_db) as client:
        first = client.search("attention sparsity", RetrievalConfig(ranking="expansion", expand="auto"), limit=2).ranked
        ids = [r.paper.id for r in first]
        similar, excluded, shown, explained = calls(
            demo_db, tmp_path,
            ("similar", {"paper_ids": ids[:1]}),
            ("similar", {"paper_ids": ids, "exclude": ["p003"], "limit": 4, "year": "2019-"}),
            ("show", {"paper_id": ids[0]}),
            ("explain", {"query": "attention sparsity", "subqueries": ["head pruning"], "top_k": 5,
                         "max_nodes": 50, "ranker": "salsa"}),
        )  # fmt: skip
        expected = client.similar(ids[:1])
        got = data(similar)
        assert [(e["id"], e["score"]) for e in got["results"]] == [(e.paper.id, e.score) for e in expected.ranked]
        assert untimed(got) == untimed(expected.to_dict())
        expected = client.similar(ids, 4, exclude=["p003"], year="2019-")
        got = data(excluded)
        assert got["results"] and "p003" not in [e["id"] for e in got["results"]]
        assert untimed(got) == untimed(expected.to_dict())
        page = data(shown)
        assert page == untimed(client.show(ids[0], limit=20).to_dict())
        assert page["references"] and page["authors"]
        config = EvidenceConfig(top_k=5, max_nodes=50, ranker="salsa")
        run = explain(client, "attention sparsity", subqueries=["head pruning"], config=config)
        got = data(explained)
        assert "graph" not in got  # a bounded summary of what `retrieval explain --json` prints
        assert [e["paper_id"] for e in got["results"]] == [pid for pid, _ in run.top]
        # The support scores' last bits vary between two runs of the pipeline in one process (what the client
        # read before): equal to 1e-12, the ranking and everything else exactly.
        assert untimed(got) == approx_floats(untimed(summarise(run)))


def test_a_bad_call_is_a_tool_error_with_the_librarys_message(demo_db, tmp_path):
    results = calls(
        demo_db, tmp_path,
        ("search", {"query": "   "}),
        ("search", {"query": "attention", "limit": BOUNDS["limit"] + 1}),
        ("search", {"query": "attention", "offset": -1}),
        ("show", {"paper_id": "no/such-paper"}),
        ("similar", {"paper_ids": ["no/such-paper"]}),
        ("similar", {"paper_ids": []}),
        ("explain", {"query": "attention", "top_k": BOUNDS["top_k"] + 1}),
        ("show", {"paper_id": " "}),  # named as this tool's argument (it was `id`, the HTTP API's)
        ("search", {"query": "attention sparsity", "limit": 1}),  # the server still answers after errors
    )  # fmt: skip
    with RetrievalClient(demo_db) as client:
        from retrieval.interfaces.service import Service

        service = Service(demo_db)
        expected = [
            "query is empty: give the words to search for",
            library_message(lambda: service.search("attention", limit=BOUNDS["limit"] + 1)),
            library_message(lambda: service.search("attention", offset=-1)),
            library_message(lambda: client.show("no/such-paper")),
            library_message(lambda: client.similar(["no/such-paper"])),
            library_message(lambda: client.similar([])),
            library_message(lambda: service.explain("attention", settings={"top_k": BOUNDS["top_k"] + 1})),
            library_message(lambda: _paper_ids(" ", "paper_id")),
        ]
        service.close()
    for result, message in zip(results, expected, strict=False):
        assert result.is_error
        text = result.content[0].text
        assert text.endswith(message), (text, message)  # after the SDK's "Error executing tool <name>: "
        assert "Traceback" not in text and "\n" not in text
    assert "limit must be between 1 and 100" in expected[1] and "no/such-paper" in expected[3]
    assert expected[7].startswith("paper_id")
    assert data(results[-1])["results"]


def test_arguments_of_the_wrong_type_or_unknown_are_one_line_naming_them(demo_db, tmp_path):
    # Before: pydantic's multi-line report with its links; `limit: true` and `limit: "5"` taken as numbers; an
    # unknown argument dropped silently; `year: true` read as the year 1.
    results = calls(
        demo_db, tmp_path,
        ("search", {}),
        ("search", {"query": 5}),
        ("search", {"query": "attention", "limit": True}),
        ("search", {"query": "attention", "limit": "5"}),
        ("search", {"query": "attention", "year": True}),
        ("search", {"query": "attention", "bogus": 1, "also": 2}),
        ("similar", {"paper_ids": "p001"}),
        ("explain", {"query": "attention", "ranker": "nope"}),
        ("search", {"query": "attention", "limit": 1}),
    )  # fmt: skip
    texts = [result.content[0].text for result in results]
    assert all(result.is_error for result in results[:-1]), texts
    for text in texts[:-1]:
        assert "\n" not in text and "pydantic" not in text and "Traceback" not in text, text
    assert texts[0] == "Error executing tool search: query is required"
    assert texts[1] == "Error executing tool search: query: input should be a valid string, got 5"
    assert texts[2] == "Error executing tool search: limit: input should be a valid integer, got True"
    assert texts[3] == "Error executing tool search: limit: input should be a valid integer, got '5'"
    assert texts[4].startswith("Error executing tool search: year: input should be a valid") and "got True" in texts[4]
    assert texts[5].startswith("Error executing tool search: unknown argument(s) also, bogus: it takes ")
    assert texts[6].startswith("Error executing tool similar: paper_ids: input should be a valid list, got 'p001'")
    assert texts[7] == "Error executing tool explain: ranker: input should be 'vote', 'ppr' or 'salsa', got 'nope'"
    assert data(results[-1])["results"]


def test_a_bad_filter_is_named_as_the_tool_names_it_not_as_the_command_lines_option(demo_db, tmp_path):
    results = calls(
        demo_db, tmp_path,
        ("search", {"query": "attention", "year": "nineties"}),
        ("similar", {"paper_ids": ["p001"], "year": "2001-1998"}),
        ("search", {"query": "attention", "authors": ["--"]}),
    )  # fmt: skip
    texts = [result.content[0].text for result in results]
    assert all(result.is_error for result in results), texts
    assert texts[0].endswith("year 'nineties' is not a year range: give 1998, 1998-2001, 1998- or -2001"), texts[0]
    assert "year '2001-1998' ends before it starts" in texts[1]
    assert "authors '--' has no letters" in texts[2]
    assert not any("--year" in text or "--author" in text for text in texts), texts


def test_nothing_is_written_to_the_index_even_with_the_query_log_on(demo_db, tmp_path):
    db = tmp_path / "logged.db"
    shutil.copyfile(demo_db, db)
    log_enable(True, db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    calls(
        db, tmp_path,
        ("search", {"query": "attention sparsity"}),
        ("similar", {"paper_ids": ["p008"]}),
        ("show", {"paper_id": "p008"}),
        ("explain", {"query": "attention sparsity"}),
    )  # fmt: skip
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        assert conn.execute("select count(*) from query_log").fetchone() == (0,)
        assert conn.execute("select count(*) from evidence_runs").fetchone() == (0,)


RAW_MESSAGES = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize",
     "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
     "params": {"name": "search", "arguments": {"query": "attention sparsity", "limit": 2}}},
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "show", "arguments": {"paper_id": "x"}}},
]  # fmt: skip


def raw_session(command: list[str], err: Path, messages=RAW_MESSAGES) -> tuple[dict, str, int, str]:
    """A raw client: each of ``messages`` in and its reply read, then stdin closed. A message is a dict (a reply
    is read where it has an id) or a line sent as it is (a reply is always read). Returns the replies by id
    (those with a null id in a list under ``None``), what stdout carried after them, the exit code and stderr (a
    watchdog kills the server after 60 s)."""
    with open(err, "w", encoding="utf-8") as errlog:
        server = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, text=True, cwd=ROOT
        )
        watchdog = threading.Timer(60, server.kill)
        watchdog.start()
        try:
            replies = {}
            for message in messages:
                server.stdin.write((message if isinstance(message, str) else json.dumps(message)) + "\n")
                server.stdin.flush()
                if isinstance(message, str) or "id" in message:
                    reply = json.loads(server.stdout.readline())
                    if reply["id"] is None:
                        replies.setdefault(None, []).append(reply)
                    else:
                        replies[reply["id"]] = reply
            server.stdin.close()  # the client goes away
            rest = server.stdout.read()
            code = server.wait()
        finally:
            watchdog.cancel()
            server.kill()
    return replies, rest, code, err.read_text(encoding="utf-8")


def test_stdout_carries_only_the_protocol_and_the_server_exits_cleanly_when_the_client_closes(demo_db, tmp_path):
    command = [sys.executable, "-m", "retrieval", "mcp", "--db", str(demo_db)]
    replies, rest, code, logged = raw_session(command, tmp_path / "server.err")
    assert code == 0, logged
    assert rest == ""
    assert set(replies) == {1, 2, 3} and all(reply["jsonrpc"] == "2.0" for reply in replies.values())
    assert replies[1]["result"]["serverInfo"]["name"] == "retrieval"
    with RetrievalClient(demo_db) as client:  # what the library's default search ranks first
        expected = client.search("attention sparsity", limit=2).ranked[0].paper.id
    assert replies[2]["result"]["structuredContent"]["results"][0]["id"] == expected
    assert replies[3]["result"]["isError"] is True
    assert "Traceback" not in logged
    assert "retrieval mcp: serving" in logged and "retrieval mcp: search: 2 result(s)" in logged


def test_a_line_that_is_no_message_is_answered_with_json_rpcs_error_and_the_session_goes_on(demo_db, tmp_path):
    """JSON-RPC 2.0 answers a line that is not JSON with a parse error (-32700) and JSON that is no message with an
    invalid request (-32600), under the request's id where it can be read (a client waits on that id), else
    null; the requests after it are served as usual. The SDK alone answered none of them (a client hung)."""
    search = {"name": "search", "arguments": {"query": "attention sparsity", "limit": 2}}
    lines = [
        *RAW_MESSAGES[:2],
        "this is not json",
        '{"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": {"name": "search", "arguments": ',
        '{"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": '
        '{"name": "search", "arguments": {"query": "a\\ud800b"}}}',  # a lone surrogate: no Unicode text
        '{"id": 13, "method": "tools/list"}',  # no "jsonrpc"
        '{"jsonrpc": "2.0", "id": 14}',  # neither a request nor a response
        "[]",
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": search},
    ]
    command = [sys.executable, "-m", "retrieval", "mcp", "--db", str(demo_db)]
    replies, rest, code, logged = raw_session(command, tmp_path / "server.err", lines)
    assert code == 0, logged
    assert rest == "" and "Traceback" not in logged
    codes = {key: reply["error"]["code"] for key, reply in replies.items() if key not in (None, 1, 2)}
    assert codes == {12: -32700, 13: -32600, 14: -32600}  # 11 cut short: its id cannot be read
    assert [reply["error"]["code"] for reply in replies[None]] == [-32700, -32700, -32600]
    assert all(reply["jsonrpc"] == "2.0" and set(reply) == {"jsonrpc", "id", "error"} for reply in replies[None])
    assert "Parse error" in replies[None][0]["error"]["message"] and "\\ud800" in replies[12]["error"]["message"]
    assert (
        "Invalid Request" in replies[13]["error"]["message"] and '"jsonrpc": "2.0"' in replies[13]["error"]["message"]
    )
    assert replies[2]["result"]["structuredContent"]["results"], "the session goes on"
    assert logged.count("retrieval mcp: answered") == 6  # (the SDK may log through rich, which wraps long lines)


def test_a_stray_print_or_warning_during_a_call_goes_to_stderr(demo_db, tmp_path):
    """Whatever a handler prints (a library's print, a warning) must never reach the protocol channel."""
    patched = (
        "import sys, warnings\n"
        "from retrieval.interfaces.service import Service\n"
        "search = Service.search\n"
        "def noisy(self, *a, **k):\n"
        "    print('stray print'); warnings.warn('stray warning'); sys.stdout.flush()\n"
        "    return search(self, *a, **k)\n"
        "Service.search = noisy\n"
        "from retrieval.interfaces.cli import main\n"
        f"sys.exit(main(['mcp', '--db', {str(demo_db)!r}]))\n"
    )
    replies, rest, code, logged = raw_session([sys.executable, "-c", patched], tmp_path / "server.err")
    assert code == 0, logged
    assert rest == "" and set(replies) == {1, 2, 3}
    assert replies[2]["result"]["structuredContent"]["results"]
    assert "stray print" in logged and "stray warning" in logged


def test_a_missing_index_exits_1_with_the_usual_message_and_nothing_on_stdout(tmp_path):
    missing = tmp_path / "missing.db"
    done = subprocess.run(
        [sys.executable, "-m", "retrieval", "mcp", "--db", str(missing)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(f"retrieval: error: no index at {missing}")
    assert not missing.exists()


def test_without_the_sdk_it_says_to_install_the_serve_extra(demo_db, monkeypatch, capsys):
    for name in ("mcp", "mcp.server", "mcp.server.mcpserver"):
        monkeypatch.setitem(sys.modules, name, None)  # `import mcp...` raises ImportError
    assert cli.main(["mcp", "--db", str(demo_db)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "install retrieval[serve]" in err and err.startswith("retrieval: error: ")


def test_the_tools_answer_again_once_the_postgresql_server_has_restarted(restartable_pg, tmp_path):
    """``retrieval mcp`` keeps its worker threads (and their connections) for life: after the server's restart
    each opens a new connection at its next call instead of failing for good."""
    import psycopg

    from retrieval import build

    server, restart = restartable_pg
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute("DROP DATABASE IF EXISTS mcp_restarts")
        conn.execute("CREATE DATABASE mcp_restarts")
    url = server.rsplit("/", 1)[0] + "/mcp_restarts"
    build(db=url)
    arguments = {"query": "attention sparsity", "limit": 5}

    async def body(client):
        before = [data(await client.call_tool("search", arguments)) for _ in range(4)]
        await anyio.to_thread.run_sync(restart)
        after = [data(await client.call_tool("search", arguments)) for _ in range(4)]
        return before, after

    before, after = session(url, body, tmp_path / "server.err")
    assert [untimed(a["results"]) for a in after] == [untimed(b["results"]) for b in before]
    assert "Traceback" not in (tmp_path / "server.err").read_text(encoding="utf-8")


def test_an_unknown_id_of_any_length_is_quoted_at_most_60_characters(demo_db, tmp_path):
    (shown,) = calls(demo_db, tmp_path, ("show", {"paper_id": "q" * 500}))
    assert shown.is_error
    text = shown.content[0].text
    assert "q" * 60 in text and "q" * 61 not in text and len(text) < 300
