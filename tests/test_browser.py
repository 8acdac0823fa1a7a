"""The web pages in a real browser: headless Chromium (the Debian package ``chromium``) against a real ``uvicorn``
server on a free loopback port, started and stopped by these tests. Chromium's own ``--dump-dom`` gives the page
as the browser built it, and ``--screenshot`` draws it; no Playwright, no network.

Skipped, with the reason, on a machine without a Chromium binary (``$CHROMIUM``, else ``chromium`` on the PATH),
unless ``$RETRIEVAL_REQUIRE_BROWSER`` is set, as CI may set it: then a missing browser fails the run. CI installs
it (``apt-get install -y chromium``). Every subprocess has a timeout, and the browser and the server
are killed, with their children, however a test ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

import httpx  # noqa: E402

from retrieval import RetrievalClient  # noqa: E402
from tests.test_web import by_id, elements, listed_links, zotero_embedded_metadata  # noqa: E402


def _chromium() -> str | None:
    given = os.environ.get("CHROMIUM")
    if given:
        return given if Path(given).exists() or shutil.which(given) else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


CHROMIUM = _chromium()
if CHROMIUM is None and os.environ.get("RETRIEVAL_REQUIRE_BROWSER"):  # CI: a missing browser is a failure
    pytest.fail("RETRIEVAL_REQUIRE_BROWSER is set but there is no Chromium binary", pytrace=False)
if CHROMIUM is None:
    pytest.skip(
        "no Chromium binary (install the Debian package: apt-get install -y chromium, or set $CHROMIUM); "
        "the browser tests need one",
        allow_module_level=True,
    )

#: Flags for a headless run as root, offline, leaving nothing behind but the fresh profile folder we remove.
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
]  # fmt: skip
BROWSER_TIMEOUT = 90
SERVER_START_TIMEOUT = 30
QUERY = "attention sparsity"
EVIDENCE_QUERY = "compiler optimization"  # on CACM: a graph with pruned edges and dropped papers


def _run(argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run ``argv`` in its own process group; on a timeout the whole group (the browser's helpers too) is killed."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"{Path(argv[0]).name} took more than {timeout} s: {' '.join(argv[-2:])}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # helpers the browser left running
            os.killpg(process.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def browse(url: str, *extra: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        done = _run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, url], BROWSER_TIMEOUT)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done


def dump_dom(url: str) -> str:
    """The page's DOM as Chromium serialises it once loaded."""
    dom = browse(url, "--dump-dom").stdout.decode("utf-8")
    assert "<html" in dom, dom[:500]
    return dom


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SERVER = (
    "import sys, uvicorn\n"
    "from retrieval.interfaces.http.app import create_app\n"
    "from retrieval.interfaces.service import Service\n"
    "uvicorn.run(create_app(Service(sys.argv[1])), host='127.0.0.1', port=int(sys.argv[2]), log_level='warning')\n"
)


class Server:
    """A uvicorn process serving ``db`` on a free loopback port, and its base URL."""

    def __init__(self, db: Path, log: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-c", SERVER, str(db), str(self.port)], stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + SERVER_START_TIMEOUT
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"the server did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)

    def page(self, path: str, **params) -> str:
        return f"{self.url}{path}" + (f"?{urlencode(params)}" if params else "")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


@pytest.fixture(scope="module")
def server(demo_db, tmp_path_factory):
    running = Server(demo_db, tmp_path_factory.mktemp("server") / "demo.log")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def cacm_server(cacm_db, tmp_path_factory):
    running = Server(cacm_db[0], tmp_path_factory.mktemp("server") / "cacm.log")
    try:
        yield running
    finally:
        running.stop()


def test_a_search_shows_the_expected_first_result(server, demo_db):
    dom = dump_dom(server.page("/", q=QUERY))
    with RetrievalClient(demo_db) as client:
        first = client.search(QUERY).ranked[0]
        result = client.search(QUERY, limit=10)  # a page of the web view
    shown = elements(dom, "result", tag="li")
    assert shown, "no result on the page"
    assert shown[0]["data-id"] == first.paper.id
    assert [r["data-id"] for r in shown] == [e.paper.id for e in result.ranked]
    assert by_id(dom, "summary")["data-matched"] == str(result.matched)
    assert result.ranked[0].why() in dom.replace("&gt;", ">")


def test_the_paper_page_lists_the_references(server, demo_db):
    with RetrievalClient(demo_db) as client:
        ranked = client.search("study", limit=100).ranked
        pid = next(e.paper.id for e in ranked if client.show(e.paper.id).paper.references)
        page = client.show(pid)
    dom = dump_dom(server.page(f"/paper/{pid}"))
    listed = listed_links(dom)
    assert page.paper.references and set(page.paper.references) <= set(listed)
    for ref in page.paper.references:
        if ref in page.linked:
            assert f'href="/paper/{ref}"' in dom


def _check_evidence_view(running: Server, query: str) -> dict:
    """The whole evidence graph (``view=all``) draws as many nodes and edges as it says, and as ``POST /explain``
    has (all of them when the graph is under the cap), with the seeds marked; returns the page's counts."""
    dom = dump_dom(running.page("/explain-view", q=query, view="all"))
    graph = httpx.post(f"{running.url}/explain", json={"query": query}, timeout=60).raise_for_status().json()["graph"]
    drawn = by_id(dom, "drawn")
    nodes = elements(dom, "node", tag="circle")
    seeds = elements(dom, "node", "seed", tag="circle")
    kept = elements(dom, "edge", "kept", tag="path")
    pruned = elements(dom, "edge", "pruned", tag="path")
    assert len(nodes) == int(drawn["data-nodes"]) == len(graph["nodes"]) == int(drawn["data-nodes-total"])
    assert {n["data-id"] for n in nodes} == {n["paper_id"] for n in graph["nodes"]}
    assert len(seeds) == int(drawn["data-seeds"]) > 0
    assert {n["data-id"] for n in seeds} == {n["paper_id"] for n in graph["nodes"] if n["role"] == "seed"}
    assert len(kept) + len(pruned) == int(drawn["data-edges"]) == len(graph["edges"])
    assert len(kept) == int(drawn["data-kept"]) == sum(e["kept"] for e in graph["edges"])
    assert len(pruned) == int(drawn["data-pruned"])
    said = f"{len(nodes):,} of {len(graph['nodes']):,} papers"
    assert said in dom
    return {"nodes": len(nodes), "pruned": len(pruned), "dropped": len(elements(dom, "node", "dropped"))}


def test_the_evidence_view_draws_what_the_json_has(server):
    counts = _check_evidence_view(server, QUERY)
    assert counts["nodes"] > 10


def test_the_evidence_view_draws_pruned_edges_and_dropped_papers(cacm_server):
    counts = _check_evidence_view(cacm_server, EVIDENCE_QUERY)
    assert counts["pruned"] > 0 and counts["dropped"] > 0


def test_the_evidence_views_papers_link_to_their_pages(cacm_server):
    """The default view: the seeds and the top papers, each a link to its page, the whole graph a link away."""
    dom = dump_dom(cacm_server.page("/explain-view", q=EVIDENCE_QUERY))
    answer = httpx.post(f"{cacm_server.url}/explain", json={"query": EVIDENCE_QUERY}, timeout=60).raise_for_status()
    data = answer.json()
    drawn = {n["data-id"] for n in elements(dom, "node", tag="circle")}
    seeds = {n["paper_id"] for n in data["graph"]["nodes"] if n["role"] == "seed"}
    assert drawn == seeds | {r["paper_id"] for r in data["results"]} and by_id(dom, "drawn")["data-view"] == "top"
    links = {a["href"] for a in elements(dom, "paper-link", tag="a")}
    assert links == {f"/paper/{pid}" for pid in drawn}
    assert not elements(dom, "edge", "pruned", tag="path") and "view=all" in by_id(dom, "view-toggle")["href"]
    first = data["results"][0]["paper_id"]
    page = dump_dom(cacm_server.page(f"/paper/{first}"))  # where a click on the first paper goes
    assert by_id(page, "references") and first in page


def test_zotero_reads_a_preprint_from_the_paper_pages_dom(tmp_path_factory):
    """The Zotero connector reads the page the browser built: its meta tags there make an arXiv e-print a preprint
    with its title, authors, date, abstract and PDF."""
    from retrieval.store.sqlite.build import build_index
    from tests.test_display import output_papers

    db = tmp_path_factory.mktemp("zotero") / "output.db"
    build_index(output_papers(), db)
    running = Server(db, db.with_suffix(".log"))
    try:
        dom = dump_dom(running.page("/paper/hep-th/9711200"))
    finally:
        running.stop()
    item = zotero_embedded_metadata(dom)
    assert item["itemType"] == "preprint"
    assert item["title"] == "The Large N Limit of Superconformal Field Theories and Supergravity"
    assert item["creators"] == [{"lastName": "Maldacena", "firstName": "Juan M.", "creatorType": "author"}]
    assert item["date"] == "1997" and item["abstractNote"].startswith("We show that black hole entropy")
    assert item["attachments"][0]["url"] == "https://arxiv.org/pdf/hep-th/9711200"


def test_an_unknown_paper_is_a_404_page_in_the_browser(server):
    url = server.page("/paper/no/such/paper")
    assert httpx.get(url, timeout=30).status_code == 404
    dom = dump_dom(url)
    assert elements(dom, "error")[0]["data-status"] == "404"
    assert "no paper" in dom


@pytest.mark.parametrize("path, params", [("/", {"q": QUERY}), ("/explain-view", {"q": QUERY})])
def test_the_pages_draw_to_a_screenshot(server, tmp_path, path, params):
    shot = tmp_path / "page.png"
    browse(server.page(path, **params), f"--screenshot={shot}", "--window-size=1280,900")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 900)
    assert len(data) > 20_000  # a drawn page, not a blank one
