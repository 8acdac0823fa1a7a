"""``retrieval fetch`` against loopback servers that answer as OpenAlex, Semantic Scholar and arXiv do
(``tests/fetch_servers.py``: real HTTP on 127.0.0.1, the documented shapes, scripted faults), through the client
the code uses (httpx). No other network: a test that would reach another address fails instead."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("httpx")

from retrieval import RetrievalConfig, commands  # noqa: E402
from retrieval.corpus import read_papers  # noqa: E402
from retrieval.corpus.fetch import Policy, fetch_arxiv, fetch_openalex, fetch_s2, side_files  # noqa: E402
from retrieval.corpus.fetch import arxiv as arxiv_module  # noqa: E402
from retrieval.corpus.fetch import openalex as openalex_module  # noqa: E402
from retrieval.corpus.fetch import run as run_module  # noqa: E402
from retrieval.corpus.fetch import s2 as s2_module  # noqa: E402
from retrieval.corpus.fetch import session as session_module  # noqa: E402
from retrieval.corpus.fetch.state import FetchRun  # noqa: E402
from retrieval.errors import FetchError  # noqa: E402
from retrieval.interfaces.cli import fetch as cli_fetch  # noqa: E402
from tests.fetch_servers import (  # noqa: E402
    S2API,
    ArxivAPI,
    Fault,
    OpenAlexAPI,
    Server,
    arxiv_corpus,
    eprint,
    openalex_corpus,
    s2_corpus,
    s2_id,
)

REPO = Path(__file__).resolve().parents[1]
#: Fast and patient enough for a loopback server: no interval, short backoff.
FAST = Policy(tries=4, timeout=5.0, backoff=0.01, interval=0.0)


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch):
    for name in ("OPENALEX_API_KEY", "OPENALEX_MAILTO", "S2_API_KEY", "SEMANTIC_SCHOLAR_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def openalex():
    with Server(OpenAlexAPI(openalex_corpus())) as server:
        yield server


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def leftovers(out: Path) -> list[str]:
    """The fetch's files that exist beside ``out`` (and ``out`` itself)."""
    return sorted(p.name for p in [out, *side_files(out).values()] if p.exists())


def cli(*argv: str, cwd: Path, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "retrieval", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
        **kw,
    )


def fast_options(server: Server) -> list[str]:
    return ["--base-url", server.url, "--interval", "0", "--backoff", "0.01", "--tries", "4"]


# -- OpenAlex: records, paging, the neighbourhood, and a build and a search of the set -----------------------------
def test_openalex_fetch_with_references_and_citing_builds_and_searches(openalex, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENALEX_API_KEY", "k-123")
    out = tmp_path / "papers.jsonl"
    seen = []
    summary = fetch_openalex(
        out,
        search="sparse attention",
        max=30,
        with_references=True,
        with_citing=True,
        max_hop=3,
        base_url=openalex.url,
        mailto="me@example.org",
        per_page=5,
        policy=FAST,
        progress=lambda phase, done, total: seen.append((phase, done, total)),
    )
    records = {r["id"]: r for r in lines(out)}
    searched = [f"W{n}" for n in range(1, 24) if n != 22]
    # the search's 22 works (W22 is W5 under another id: merged), 3 cited works (W904 the most cited), 3 citing ones
    assert list(records)[:22] == searched
    assert {"W904"} <= set(list(records)[22:25]) and len(records) == 28
    assert set(list(records)[25:]) <= {"W801", "W802", "W803", "W804"}
    w3, w5, w7, w10 = records["W3"], records["W5"], records["W7"], records["W10"]
    assert w3["abstract"] == "We study sparse attention patterns, variant 3 of block routing."
    assert w3["authors"] == ["Ada Lovelace"] and w3["year"] == 2003
    assert w3["doi"] == "10.1000/sa3" and w3["arxiv"] == "2101.00003"
    assert w3["references"] == ["W2", "W1", "W901", "W904"]
    assert w7["year"] is None  # 9999: not a year the readers accept, dropped rather than the paper
    assert w5["references"][-1] == "W905"  # merged from W22, its duplicate
    assert "W5" in w10["references"] and "W22" not in w10["references"]
    assert summary.papers == 28 and summary.searched == 22 and summary.merged == 1 and summary.years_dropped == 1
    assert summary.references_added == 3 and summary.citing_added == 3 and summary.matched == 23
    # cursor paging at the page size asked for, select, the key and the contact on every request
    works = openalex.requests("/works")
    search = [r["query"] for r in works if "search" in r["query"]]
    assert search[0]["cursor"] == "*" and search[1]["cursor"] != "*" and search[0]["per_page"] == "5"
    assert all(r["query"]["api_key"] == "k-123" and r["query"]["mailto"] == "me@example.org" for r in works)
    assert all("abstract_inverted_index" in r["query"]["select"] for r in works)
    assert any(r["query"].get("filter", "").startswith("openalex:W904") for r in works)
    assert any(r["query"].get("filter", "").startswith("cites:W1|W2") for r in works)
    assert ("search", 22, 23) in seen and seen[-1][0] == "citing"
    assert leftovers(out) == ["papers.jsonl"]  # journal, state and lock are gone
    # the set builds, its in-set references are the index's edges, and it searches
    db = tmp_path / "papers.db"
    built = commands.build(db=db, source=out)
    assert built.papers == 28 and built.edges == summary.in_corpus_references
    lexical = RetrievalConfig(ranking="expansion", expand="never")  # W904, cited by every paper, tops the graph's
    hits = commands.search("routing variant 17", db=db, limit=3, config=lexical)
    assert hits.ranked[0].paper.id == "W17"
    assert "W17" in [e.paper.id for e in commands.search("routing variant 17", db=db, limit=3).ranked]
    assert [p.id for _, p in read_papers(out)] == list(records)  # the reader takes the extra keys in its stride


def test_openalex_filters_and_max(openalex, tmp_path):
    out = tmp_path / "p.jsonl"
    summary = fetch_openalex(
        out,
        search="sparse attention",
        max=7,
        years="2003-",
        types=["Article"],
        open_access=True,
        topics=["https://openalex.org/T10001"],
        filters=["language:en"],
        base_url=openalex.url,
        policy=FAST,
    )
    assert summary.papers == 7 and summary.reached_max and summary.matched == 23
    request = openalex.requests("/works")[0]["query"]
    assert request["filter"] == "topics.id:T10001,publication_year:>2002,is_oa:true,type:article,language:en"
    assert request["per_page"] == "7"  # no more than --max asks for


class _RepeatingCursor(OpenAlexAPI):
    """An API that names the page it just gave as the next one: the same works for ever."""

    def __call__(self, request: dict):
        status, headers, body = super().__call__({**request, "query": {**request["query"], "cursor": "*"}})
        answer = json.loads(body)
        answer["meta"]["next_cursor"] = "same"
        return status, headers, json.dumps(answer).encode()


def test_a_cursor_that_repeats_stops_the_fetch_and_keeps_what_it_fetched(tmp_path):
    # Before: 99 requests in 10 s, one new work then duplicates, until killed.
    with Server(_RepeatingCursor(openalex_corpus())) as server:
        out = tmp_path / "p.jsonl"
        with pytest.raises(FetchError, match="its cursor repeats"):
            fetch_openalex(out, search="sparse attention", max=50, per_page=2, base_url=server.url, policy=FAST)
        assert len(server.requests("/works")) == 2  # the first page, and the one that named itself again
    assert not out.exists()


def _nested(status: int = 200):
    depth = 100_000
    return lambda request: (status, {"Content-Type": "application/json"}, b"[" * depth + b"]" * depth)


@pytest.mark.parametrize("status", [200, 400])
def test_an_answer_nested_past_what_json_reads_is_an_answer_that_is_not_json(tmp_path, status):
    # Before: a RecursionError's traceback, from the answer's JSON (200) or the refusal's message (400).
    with Server(_nested(status)) as server, pytest.raises(FetchError) as info:
        fetch_openalex(tmp_path / "p.jsonl", search="sparse attention", base_url=server.url, policy=FAST)
    assert "RecursionError" not in str(info.value)
    assert "not valid JSON (nested too deeply)" in str(info.value) or "400" in str(info.value), info.value


def test_a_state_nested_past_what_json_reads_says_how_to_start_over(openalex, tmp_path):
    out = tmp_path / "p.jsonl"
    Path(f"{out}.fetch-state.json").write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(FetchError, match=r"nested too deeply\): add --restart"):
        fetch_openalex(out, search="sparse attention", base_url=openalex.url, policy=FAST)


def test_a_fetch_stopped_inside_a_chunk_of_citing_works_resumes_there(openalex, tmp_path, monkeypatch):
    # The repeated-cursor guard's set of pages asked for was made only at a chunk's first page: a fetch resumed
    # at a later page of a chunk failed with a NameError.
    options = {"search": "sparse attention", "max": 30, "with_citing": True, "max_hop": 3, "per_page": 2}
    reference = fetch_openalex(tmp_path / "reference.jsonl", base_url=openalex.url, policy=FAST, **options)
    real = openalex_module.OpenAlex._page
    stopped = []

    def page(self, session, params):
        later = str(params.get("filter", "")).startswith("cites:") and params.get("cursor") not in (None, "*")
        if later and not stopped:
            stopped.append(params["cursor"])
            raise KeyboardInterrupt  # Ctrl-C at the second page of a chunk of citing works
        return real(self, session, params)

    monkeypatch.setattr(openalex_module.OpenAlex, "_page", page)
    out = tmp_path / "p.jsonl"
    with pytest.raises(KeyboardInterrupt):
        fetch_openalex(out, base_url=openalex.url, policy=FAST, **options)
    assert stopped
    resumed = fetch_openalex(out, base_url=openalex.url, policy=FAST, **options)
    assert resumed.resumed and resumed.citing_added == reference.citing_added > 0
    assert out.read_bytes() == (tmp_path / "reference.jsonl").read_bytes()


def test_openalex_since_uses_the_free_publication_date_filter(openalex, tmp_path):
    out = tmp_path / "new.jsonl"
    summary = fetch_openalex(out, filters=["type:article"], since="2024-01-01", base_url=openalex.url, policy=FAST)
    assert [r["id"] for r in lines(out)] == ["W801", "W802", "W803", "W804"]
    assert summary.papers == 4
    assert openalex.requests()[0]["query"]["filter"] == "type:article,from_publication_date:2024-01-01"
    fetch_openalex(tmp_path / "c.jsonl", since="2024-01-01", since_field="created", base_url=openalex.url, policy=FAST)
    assert openalex.requests()[-1]["query"]["filter"] == "from_created_date:2024-01-01"
    with pytest.raises(FetchError, match=r"403 Forbidden: from_updated_date requires a paid plan\).*API key"):
        fetch_openalex(
            tmp_path / "u.jsonl", since="2024-01-01", since_field="updated", base_url=openalex.url, policy=FAST
        )


def test_refresh_an_index_with_since_and_add(openalex, tmp_path):
    """The documented refresh: the set as it was, then what was published since, added with --replace."""
    first = tmp_path / "papers.jsonl"
    fetch_openalex(first, search="sparse attention", base_url=openalex.url, policy=FAST)
    db = tmp_path / "papers.db"
    commands.build(db=db, source=first)
    new = tmp_path / "new.jsonl"
    fetch_openalex(new, filters=["type:article"], since="2024-01-01", base_url=openalex.url, policy=FAST)
    added = commands.add(new, db=db, replace=True)
    assert added.added == 4 and added.papers == 26
    assert {"W801", "W803"} <= set(commands.show("W1", db=db).paper.citations)  # the new papers' edges are live


# -- failures: each one a message, retried where it can be -----------------------------------------------------------
def test_429_waits_what_retry_after_says(openalex, tmp_path):
    openalex.faults.append(Fault(429, {"Retry-After": "1"}, b'{"error": "Too Many Requests"}'))
    notices = []
    started = time.monotonic()
    summary = fetch_openalex(
        tmp_path / "p.jsonl",
        search="sparse attention",
        max=3,
        base_url=openalex.url,
        policy=FAST,
        notice=notices.append,
    )
    first, second = openalex.requests()[:2]
    assert second["time"] - first["time"] >= 0.95  # the backoff is 0.01 s: only Retry-After waits a second
    assert time.monotonic() - started < 5
    assert summary.papers == 3 and summary.retries == 1 and summary.waited_seconds >= 1.0
    assert notices and "429 Too Many Requests; trying again in 1.0 s (2 of 4)" in notices[0]


def test_a_rate_limit_longer_than_max_wait_stops_with_when_to_rerun(openalex, tmp_path):
    out = tmp_path / "p.jsonl"
    fetch_policy = Policy(tries=4, timeout=5.0, backoff=0.01, interval=0.0, max_wait=60)
    openalex.faults += [Fault(429, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "25380"}, path="/works")]
    with pytest.raises(FetchError, match=r"asks to wait 7 h 3 min before the next request .*run the same command"):
        fetch_openalex(out, search="sparse attention", base_url=openalex.url, policy=fetch_policy)
    assert leftovers(out) == []  # nothing was committed: nothing is left


def test_500_then_success_and_a_truncated_body_are_retried(openalex, tmp_path):
    openalex.faults += [Fault(500, body=b'{"error": "oops"}'), Fault(truncate=True)]
    out = tmp_path / "p.jsonl"
    summary = fetch_openalex(out, search="sparse attention", max=4, per_page=4, base_url=openalex.url, policy=FAST)
    assert [r["id"] for r in lines(out)] == ["W1", "W2", "W3", "W4"]
    assert summary.retries == 2 and len(openalex.requests()) == 3


def test_a_timeout_is_retried_and_bounded(openalex, tmp_path):
    policy = Policy(tries=3, timeout=0.3, backoff=0.01, interval=0.0)
    openalex.faults.append(Fault(sleep=1.0))
    summary = fetch_openalex(
        tmp_path / "p.jsonl", search="sparse attention", max=2, per_page=2, base_url=openalex.url, policy=policy
    )
    assert summary.papers == 2 and summary.retries == 1
    openalex.faults += [Fault(sleep=1.0) for _ in range(3)]
    started = time.monotonic()
    with pytest.raises(FetchError, match=r"failed 3 times \(last: no answer within 0.3 s\)"):
        fetch_openalex(tmp_path / "q.jsonl", search="sparse attention", base_url=openalex.url, policy=policy)
    assert time.monotonic() - started < 3


def test_tries_are_bounded_and_a_refusal_is_not_retried(openalex, tmp_path):
    openalex.faults += [Fault(503) for _ in range(4)]
    with pytest.raises(FetchError, match=r"failed 4 times \(last: 503 Service Unavailable\): the service has trouble"):
        fetch_openalex(tmp_path / "p.jsonl", search="sparse attention", base_url=openalex.url, policy=FAST)
    assert len(openalex.requests()) == 4
    openalex.faults += [Fault(429) for _ in range(4)]  # no Retry-After: the backoff, then a message
    with pytest.raises(FetchError, match=r"still answers 429 Too Many Requests after 4 tries: run the same command"):
        fetch_openalex(tmp_path / "p.jsonl", search="sparse attention", base_url=openalex.url, policy=FAST)
    assert len(openalex.requests()) == 8
    with pytest.raises(FetchError, match=r"refused the request \(400 Bad Request: bogus is not a valid filter\)"):
        fetch_openalex(tmp_path / "p.jsonl", filters=["bogus:1"], base_url=openalex.url, policy=FAST)
    assert len(openalex.requests()) == 9
    openalex.faults.append(Fault(401, body=b'{"error": "Unauthorized", "message": "invalid api_key"}'))
    with pytest.raises(FetchError, match=r"401 Unauthorized: invalid api_key\): OpenAlex asks for an API key: set"):
        fetch_openalex(tmp_path / "p.jsonl", search="x", base_url=openalex.url, policy=FAST)


def closed_port() -> int:
    """A loopback port nothing listens on: bound, noted, closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_is_one_message_exit_1_and_nothing_written(tmp_path):
    port = closed_port()
    done = cli(
        "fetch",
        "openalex",
        "--search",
        "x",
        "-o",
        "papers.jsonl",
        "--base-url",
        f"http://127.0.0.1:{port}",
        "--backoff",
        "0.01",
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(f"retrieval: error: cannot reach 127.0.0.1:{port} (")
    assert "Traceback" not in done.stderr and "check the network connection" in done.stderr
    assert leftovers(tmp_path / "papers.jsonl") == []
    assert "3 tries" in done.stderr  # a connection that cannot be made is given up on fast


def test_a_failure_after_some_pages_keeps_them_and_the_rerun_finishes(openalex, tmp_path):
    """A fetch that fails midway (a 400 on the fourth page) keeps the pages it committed; the rerun asks for the
    fourth page again, and a page appended but never committed (a kill between the two writes) is dropped."""
    reference = tmp_path / "reference.jsonl"
    fetch_openalex(reference, search="sparse attention", per_page=3, base_url=openalex.url, policy=FAST)
    out = tmp_path / "p.jsonl"
    api = openalex.app
    calls = {"n": 0}

    def failing(request):
        calls["n"] += 1
        if calls["n"] == 4:
            return 400, {"Content-Type": "application/json"}, b'{"error": "bad", "message": "transient bad"}'
        return api(request)

    openalex.app = failing
    with pytest.raises(FetchError, match=r"the 9 papers fetched so far are kept in p.jsonl.partial: run the same"):
        fetch_openalex(out, search="sparse attention", per_page=3, base_url=openalex.url, policy=FAST)
    openalex.app = api
    files = side_files(out)
    assert leftovers(out) == ["p.jsonl.fetch-state.json", "p.jsonl.partial"]
    state = json.loads(files["state"].read_text())
    assert state["journal_bytes"] == files["journal"].stat().st_size and state["counts"] == {"search": 9}
    with open(files["journal"], "ab") as journal:  # a page written, the state not yet: what a kill can leave
        journal.write(b'{"id": "W1", "title": "half a page"}\n{"id": "W99", "tit')
    before = len(openalex.requests())
    summary = fetch_openalex(out, search="sparse attention", per_page=3, base_url=openalex.url, policy=FAST)
    assert summary.resumed and out.read_bytes() == reference.read_bytes()
    assert openalex.requests()[before]["query"]["cursor"] == state["position"]["cursor"]
    assert leftovers(out) == ["p.jsonl"]


def test_another_request_is_refused_until_restart(openalex, tmp_path):
    out = tmp_path / "p.jsonl"
    with FetchRun(out, "openalex", {"search": "a"}, ["search"]) as run:
        run.commit([{"id": "W1", "title": "t"}], {"cursor": "x"})
    with pytest.raises(FetchError, match=r"belongs to an unfinished fetch with other options .*--restart"):
        fetch_openalex(out, search="sparse attention", max=2, base_url=openalex.url, policy=FAST)
    summary = fetch_openalex(out, search="sparse attention", max=2, base_url=openalex.url, policy=FAST, restart=True)
    assert [r["id"] for r in lines(out)] == ["W1", "W2"] and not summary.resumed


def test_two_fetches_to_one_file_do_not_mix(openalex, tmp_path):
    out = tmp_path / "p.jsonl"
    taken = pytest.raises(FetchError, match="another `retrieval fetch` is writing")
    with FetchRun(out, "openalex", {"search": "a"}, ["search"]), taken:
        fetch_openalex(out, search="sparse attention", base_url=openalex.url, policy=FAST)


# -- the CLI: a kill and a resume, Ctrl-C, usage errors ----------------------------------------------------------
def _wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _committed_pages(out: Path) -> int:
    state = side_files(out)["state"]
    try:
        return json.loads(state.read_text())["lines"].get("search", 0)
    except (OSError, ValueError, KeyError):
        return 0


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_killed_fetch_resumes_without_duplicates_or_gaps(openalex, tmp_path, sig):
    argv = [
        "fetch",
        "openalex",
        "--search",
        "sparse attention",
        "--per-page",
        "2",
        "--with-references",
        "--max-hop",
        "4",
        *fast_options(openalex),
    ]
    reference = cli(*argv, "-o", "reference.jsonl", "--json", cwd=tmp_path)
    assert reference.returncode == 0, reference.stderr
    assert json.loads(reference.stdout)["papers"] == 26
    openalex.delay = 0.15  # each page takes a while: the kill lands mid-fetch
    out = tmp_path / "papers.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "retrieval", *argv, "-o", "papers.jsonl"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal's process has it: a test run started in the background (`pytest &`, CI) ignores
        # SIGINT, and its children would inherit that and finish the fetch.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    _wait_for(lambda: _committed_pages(out) >= 6)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=30)
    assert not out.exists()  # nothing half-written under the output's name
    if sig == signal.SIGINT:
        assert process.returncode == 130
        assert stderr.strip().splitlines()[-1].startswith("retrieval: interrupted; the ")
        assert "papers fetched so far are kept in papers.jsonl.partial: run the same command" in stderr
        assert "Traceback" not in stderr
    kept = _committed_pages(out)
    assert 6 <= kept < 22
    openalex.delay = 0.0
    before = len(openalex.requests())
    resumed = cli(*argv, "-o", "papers.jsonl", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "continuing the unfinished fetch into papers.jsonl" in resumed.stderr
    assert openalex.requests()[before]["query"]["cursor"] != "*"  # it went on from the saved cursor
    assert out.read_bytes() == (tmp_path / "reference.jsonl").read_bytes()
    ids = [r["id"] for r in lines(out)]
    assert len(ids) == len(set(ids)) == 26
    assert leftovers(out) == ["papers.jsonl"]


def test_cli_summary_build_and_search(openalex, tmp_path):
    done = cli(
        "fetch",
        "openalex",
        "--search",
        "sparse attention",
        "--max",
        "10",
        "--with-references",
        "-o",
        "papers.jsonl",
        *fast_options(openalex),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout
    # the ten papers cite five others; one of them (W22) is W5 again, merged: four cited papers are new
    assert text.startswith(
        "fetched 14 papers from OpenAlex into papers.jsonl: 10 of about 23 matching (stopped at "
        "--max 10), and 4 cited papers added"
    )
    assert "1 found twice (one DOI) merged" in text
    assert "next: retrieval build --from papers.jsonl" in text
    assert "note: no OpenAlex API key" in done.stderr
    built = cli("build", "--from", "papers.jsonl", "--db", "p.db", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    found = cli("search", "block routing variant 4", "--db", "p.db", "--json", "--expand", "never", cwd=tmp_path)
    assert json.loads(found.stdout)["results"][0]["id"] == "W4"


def test_usage_errors_exit_2(tmp_path):
    bad_id = cli("fetch", "openalex", "--author", "Bengio", "-o", "p.jsonl", cwd=tmp_path)
    assert bad_id.returncode == 2 and "'Bengio' is not an OpenAlex id" in bad_id.stderr
    nothing = cli("fetch", "openalex", "-o", "p.jsonl", cwd=tmp_path)
    assert nothing.returncode == 2 and "give --search, a filter" in nothing.stderr
    date = cli("fetch", "s2", "--since", "yesterday", "-o", "p.jsonl", cwd=tmp_path)
    assert date.returncode == 2 and "expected a date as YYYY-MM-DD" in date.stderr
    refs = cli("fetch", "arxiv", "--category", "cs.IR", "--with-references", "-o", "p.jsonl", cwd=tmp_path)
    assert refs.returncode == 2 and "retrieval fetch s2 --ids-from FILE --with-references" in refs.stderr
    assert list(tmp_path.iterdir()) == []


def test_fetch_help_does_not_import_httpx(tmp_path):
    code = (
        "import sys\nfrom retrieval.interfaces.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
        "    pass\nprint('IMPORTED', sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'numpy', "
        "'sqlalchemy')))\n"
    )
    for argv in (["--help"], ["fetch", "--help"], ["fetch", "openalex", "--help"]):
        done = subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, capture_output=True, text=True)
        assert done.stdout.strip().splitlines()[-1] == "IMPORTED []", argv


def test_names_kept_in_two_places_agree():
    assert cli_fetch.SOURCES["openalex"][1] == openalex_module.BASE_URL
    assert cli_fetch.SOURCES["s2"][1] == s2_module.BASE_URL
    assert cli_fetch.SOURCES["arxiv"][1] == arxiv_module.BASE_URL
    assert cli_fetch.DEFAULT_MAX == run_module.DEFAULT_MAX
    assert (cli_fetch.TRIES, cli_fetch.TIMEOUT, cli_fetch.MAX_WAIT) == (
        session_module.TRIES,
        session_module.TIMEOUT,
        session_module.MAX_WAIT,
    )


# -- Semantic Scholar ---------------------------------------------------------------------------------------------
def test_s2_bulk_search_batch_references_and_citing(tmp_path, monkeypatch):
    monkeypatch.setenv("S2_API_KEY", "s2-key")
    api = S2API(s2_corpus(), bulk_page=4, citations_most=2)
    with Server(api) as server:
        out = tmp_path / "s2.jsonl"
        summary = fetch_s2(
            out,
            search="graph retrieval",
            with_references=True,
            with_citing=True,
            max_hop=2,
            base_url=server.url + "/graph/v1",
            policy=FAST,
        )
        records = {r["id"]: r for r in lines(out)}
        searched = [s2_id(n) for n in range(1, 11)]
        assert list(records)[:10] == searched
        assert set(list(records)[10:12]) == {s2_id(52), s2_id(51)}  # the two cited most
        assert set(list(records)[12:]) <= {s2_id(n) for n in (60, 61, 62, 63)} and len(records) == 14
        two = records[s2_id(2)]
        assert two["references"] == [s2_id(1), s2_id(50), s2_id(52)]  # the unresolved one left out
        assert two["doi"] == "10.2000/gr2" and records[s2_id(9)]["arxiv"] == "2301.00009"
        assert records[s2_id(4)]["abstract"] == ""
        assert summary.matched == 10 and summary.citing_added == 2
        bulk = server.requests("/search/bulk")
        assert [r["query"].get("token") for r in bulk] == [None, "4", "8"]
        assert all(r["headers"]["x-api-key"] == "s2-key" for r in server.requests())
        batches = [json.loads(r["body"]) for r in server.requests("/paper/batch")]
        assert batches[0] == {"ids": searched[:4]}
        citing = [r for r in server.requests("/paper/batch") if "citations" in r["query"]["fields"]]
        assert [len(json.loads(r["body"])["ids"]) for r in citing][:3] == [10, 5, 2]  # refused, split in halves
        db = tmp_path / "s2.db"
        assert commands.build(db=db, source=out).edges == summary.in_corpus_references


def test_s2_since_and_year(tmp_path):
    with Server(S2API(s2_corpus())) as server:
        summary = fetch_s2(
            tmp_path / "n.jsonl.gz",
            search="graph retrieval",
            since="2024-01-01",
            years="2020-",
            base_url=server.url + "/graph/v1",
            policy=FAST,
        )
        query = server.requests("/search/bulk")[0]["query"]
        assert query["publicationDateOrYear"] == "2024-01-01:" and query["year"] == "2020-"
        assert summary.papers == 2  # papers 9 and 10 (2024, 2025)
    assert [p.year for _, p in read_papers(tmp_path / "n.jsonl.gz")] == [2024, 2025]  # a .gz output is gzip


# -- arXiv, and its join with Semantic Scholar ---------------------------------------------------------------------
def test_arxiv_by_category_and_date_then_references_from_s2(tmp_path):
    eprints = arxiv_corpus()
    eprints[1]["authors"] = ["Grace   Hopper", " ", "Alan\tTuring"]  # a blank name dropped, the others one line
    with Server(ArxivAPI(eprints)) as arxiv_server:
        arxiv_out = tmp_path / "arxiv.jsonl"
        summary = fetch_arxiv(
            arxiv_out,
            categories=["cs.IR"],
            since="2023-01-01",
            until="2023-02-28",
            base_url=arxiv_server.url + "/api",
            policy=FAST,
        )
        queries = [r["query"] for r in arxiv_server.requests()]
    assert summary.papers == 10 and summary.matched == 10
    assert queries[0]["search_query"] == "cat:cs.IR AND submittedDate:[202301010000 TO 202302282359]"
    assert queries[1]["search_query"] == "cat:cs.IR AND submittedDate:[202301010000 TO 202301312359]"
    assert queries[2]["search_query"].endswith("submittedDate:[202302010000 TO 202302282359]")
    assert all(q["sortBy"] == "submittedDate" and q["sortOrder"] == "ascending" for q in queries[1:])
    eprints = {r["id"]: r for r in lines(arxiv_out)}
    first = eprints["2301.00001"]
    assert first["title"] == "Graph retrieval e-print 1" and first["abstract"] == "We retrieve with graphs, method 1."
    assert first["year"] == 2023 and first["authors"] == ["Alan Turing"] and first["references"] == []
    assert first["arxiv"] == "2301.00001" and eprints["2302.00007"]["doi"] == "10.9999/j.ir.7"
    assert eprints["2301.00002"]["authors"] == ["Grace Hopper", "Alan Turing"]
    assert [p.authors for _, p in read_papers(arxiv_out) if p.id == "2301.00002"] == [["Grace Hopper", "Alan Turing"]]
    # the join: Semantic Scholar looks the e-prints up by arXiv id and gives them references
    with Server(S2API(s2_corpus())) as s2_server:
        joined = tmp_path / "papers.jsonl"
        result = fetch_s2(
            joined,
            ids_from=arxiv_out,
            with_references=True,
            with_citing=True,
            base_url=s2_server.url + "/graph/v1",
            policy=FAST,
        )
        asked = json.loads(s2_server.requests("/paper/batch")[0]["body"])["ids"]
        citations = [
            json.loads(r["body"])["ids"]
            for r in s2_server.requests("/paper/batch")
            if "citations" in r["query"]["fields"]
        ]
    assert asked[0] == "ARXIV:2301.00001" and "ARXIV:2301.00009" in asked and len(asked) == 10
    records = {r["id"]: r for r in lines(joined)}
    nine = records[s2_id(9)]  # found: Semantic Scholar's id and references, the arXiv id kept
    assert nine["arxiv"] == "2301.00009" and nine["references"] == [s2_id(8), s2_id(51), s2_id(52)]
    assert records["2301.00001"]["references"] == []  # not found: kept as arXiv gave it
    assert result.not_found == 8 and result.searched == 10 and result.references_added == 4
    assert citations == [[s2_id(9), s2_id(10)]]  # citing papers of Semantic Scholar's papers only
    assert s2_id(63) in records and result.citing_added == 1  # 63 cites 10; 10 cites 9, in the set already


def test_arxiv_answering_the_same_page_whatever_start_asks_ends_the_month(tmp_path, monkeypatch):
    """An API that ignores ``start`` (a proxy's cache, an outage page) was asked 60 times per month, a request
    every few seconds, for entries already fetched: after ``REPEATS_MOST`` such pages the month is cut, said."""
    months = [(1, 40), (2, 3)]  # 40 e-prints in January, 3 in February
    api = ArxivAPI([
        eprint(f"230{m}.{i:05d}", f"Paper {m}-{i}", "Text.", f"2023-0{m}-{1 + i % 27:02d}T12:00:00Z")
        for m, n in months for i in range(1, n + 1)
    ])  # fmt: skip

    def stuck(request):  # January's pages all start at 0
        query = request["query"]
        return api({**request, "query": {**query, "start": "0"}} if "20230101" in query["search_query"] else request)

    monkeypatch.setattr(arxiv_module, "PAGE", 4)
    with Server(stuck) as server:
        out = tmp_path / "a.jsonl"
        summary = fetch_arxiv(out, categories=["cs.IR"], since="2023-01-01", until="2023-02-28",
                              base_url=server.url + "/api", policy=FAST)  # fmt: skip
        asked = server.requests("/api/query")
    assert summary.papers == 4 + 3  # January's first page, all of February
    # the whole range's count; January: its first page, then REPEATS_MOST repeats; February: one page
    assert len(asked) == 1 + 1 + arxiv_module.REPEATS_MOST + 1
    assert any("pages in a row with no entry not fetched before (at 16 of 40)" in note for note in summary.notes)


def test_arxiv_empty_page_is_asked_again_and_an_error_feed_is_a_message(tmp_path):
    api = ArxivAPI(arxiv_corpus())
    calls = {"n": 0}

    def flaky(request):
        calls["n"] += 1
        if calls["n"] == 2:  # the second page: no entries, though the total says there are more
            return api({**request, "query": {**request["query"], "start": "999"}})
        return api(request)

    with Server(flaky) as server:
        out = tmp_path / "a.jsonl"
        old_page = arxiv_module.PAGE
        arxiv_module.PAGE = 4
        try:
            summary = fetch_arxiv(out, categories=["cs.IR"], base_url=server.url + "/api", policy=FAST)
        finally:
            arxiv_module.PAGE = old_page
        assert summary.papers == 10 and summary.retries == 1
        with pytest.raises(FetchError, match=r"arXiv refused the query \(malformed query: unbalanced parentheses\)"):
            fetch_arxiv(tmp_path / "b.jsonl", query="ti:(graph", base_url=server.url + "/api", policy=FAST)


def test_a_fetched_name_is_written_as_the_projects_reader_takes_it(tmp_path):
    """A source's author name with a control character (or only spaces) was written as given, and the project's
    own reader then refused the fetched file at that line."""
    from retrieval.corpus.fetch.records import project_record
    from retrieval.corpus.paper import Paper

    record = project_record(Paper("W1", "T", authors=["Ann\x01Lee", " ", "Bo\tChen", "Cy Doe"]))
    assert record["authors"] == ["Ann Lee", "Bo Chen", "Cy Doe"]
    path = tmp_path / "fetched.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert [p.authors for _, p in read_papers(path)] == [["Ann Lee", "Bo Chen", "Cy Doe"]]


def test_a_key_header_does_not_follow_a_redirect_to_another_origin():
    """Semantic Scholar's ``x-api-key`` went along a redirect to another host (httpx drops only Authorization)."""

    def answer(request):
        return 200, {"Content-Type": "application/json"}, b'{"ok": true}'

    with Server(answer) as home, Server(answer) as away:
        elsewhere = f"http://localhost:{away.port}/paper/batch"  # another origin: localhost, not 127.0.0.1
        home.faults.append(Fault(307, {"Location": elsewhere}))
        home.faults.append(Fault(307, {"Location": f"{home.url}/moved"}))
        with session_module.Session(home.url, headers={"x-api-key": "SECRET"}, interval=0) as session:
            assert session.get_json("/paper/batch") == {"ok": True}
            assert session.get_json("/first") == {"ok": True}
    (sent,) = away.requests()
    assert "x-api-key" not in sent["headers"]
    assert all(r["headers"].get("x-api-key") == "SECRET" for r in home.requests())  # its own redirect: kept
    assert [r["path"] for r in home.requests()] == ["/paper/batch", "/first", "/moved"]


def test_answers_of_the_wrong_shape_are_messages_not_tracebacks(openalex, tmp_path):
    """An OpenAlex page whose ``next_cursor`` is not text was ``TypeError: unhashable type``; a Semantic Scholar
    citing batch holding something else than papers was ``AttributeError``."""
    page = {"meta": {"next_cursor": {"a": 1}}, "results": [{"id": "https://openalex.org/W77", "title": "x"}]}
    openalex.faults.append(Fault(200, body=json.dumps(page).encode(), path="/works"))
    with pytest.raises(FetchError, match="next cursor is not text"):
        fetch_openalex(tmp_path / "o.jsonl", search="x", base_url=openalex.url, policy=FAST)
    with Server(S2API(s2_corpus(), bulk_page=4)) as server:
        server.faults.append(Fault(200, body=b'["oops", null]', path="/paper/batch"))
        server.faults.append(Fault(200, body=b'["oops", null]', path="/paper/batch"))
        out = tmp_path / "s2.jsonl"
        fetch_s2(out, search="graph retrieval", max=2, with_citing=True, max_hop=2,
                 base_url=server.url + "/graph/v1", policy=FAST)  # fmt: skip
    assert all(isinstance(r["id"], str) for r in lines(out))


def test_given_records_a_reader_refuses_are_skipped_not_written(tmp_path):
    """``fetch s2 --ids-from`` wrote given records as they were: ``"authors": "Jane Doe"`` (a file ``build`` then
    refused) and ``"references": "2101.00001"`` (written split into characters)."""
    given = tmp_path / "given.jsonl"
    rows = [  # arXiv e-prints the server does not know: written as given, when the reader takes them
        {"id": "2101.00097", "title": "kept as given", "authors": ["Jane Doe"], "references": ["2101.00098"]},
        {"id": "2101.00098", "title": "authors as one string", "authors": "Jane Doe"},
        {"id": "2101.00099", "title": "references as one string", "references": "2101.00001"},
    ]
    given.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with Server(S2API(s2_corpus())) as server:
        out = tmp_path / "s2.jsonl"
        summary = fetch_s2(out, ids_from=given, base_url=server.url + "/graph/v1", policy=FAST)
    assert [r["id"] for r in lines(out)] == ["2101.00097"]
    assert summary.skipped == 2
    assert commands.build(db=tmp_path / "g.db", source=out).papers == 1  # the file is one build reads
