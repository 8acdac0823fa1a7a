"""The parameters described once (``retrieval.interfaces.params``): every front door makes its options from the
descriptions, so a filter added to ``FILTERS`` appears on the command line, in the HTTP API's schema, in the web
page's form and in the MCP tools' schemas, with the same help, and nothing else needs writing for it to appear."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest

from retrieval.interfaces import cli
from retrieval.interfaces import params as params_module
from retrieval.interfaces.params import FILTERS, Param

pytest.importorskip("fastapi")

VENUE = Param("venue", "only papers of this venue (a test's filter)", kind=str | None, metavar="NAME", example="JHEP")


@pytest.fixture
def venue(monkeypatch):
    """A filter no front door knows by name, added to the description only."""
    monkeypatch.setattr(params_module, "FILTERS", (*FILTERS, VENUE))


def test_every_filter_is_in_every_front_door(demo_db, venue, capsys):
    from fastapi.testclient import TestClient

    from retrieval.interfaces.http.app import create_app
    from retrieval.interfaces.mcp import make_server
    from retrieval.interfaces.service import Service

    for command in ("search", "similar"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        assert "--venue NAME" in capsys.readouterr().out
    service = Service(demo_db)
    with TestClient(create_app(service)) as client:
        openapi = client.get("/openapi.json").json()
        form = client.get("/?q=").text
    for path in ("/search", "/similar/{paper_id}"):
        listed = {p["name"]: p for p in openapi["paths"][path]["get"]["parameters"]}
        assert listed["venue"]["description"] == VENUE.help and {"year", "author"} <= set(listed)
    assert 'name="venue"' in form and "venue: JHEP" in form
    tools = asyncio.run(make_server(service, ThreadPoolExecutor(1)).list_tools())
    for tool in tools:
        if tool.name in ("search", "similar"):
            assert tool.input_schema["properties"]["venue"]["description"] == VENUE.help
    service.close()


def test_a_filter_reads_the_same_on_every_front_door(demo_db, capsys):
    """One help text per filter: the CLI's help, the API's parameter and the tool's schema say the same."""
    from fastapi.testclient import TestClient

    from retrieval.interfaces.http.app import create_app
    from retrieval.interfaces.service import Service

    with pytest.raises(SystemExit):
        cli.main(["search", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    with TestClient(create_app(Service(demo_db))) as client:
        listed = {p["name"]: p for p in client.get("/openapi.json").json()["paths"]["/search"]["get"]["parameters"]}
    for f in FILTERS:
        assert " ".join(f.help.split()) in shown
        assert listed[f.query_name]["description"] == f.server_help()


def test_the_sorts_the_front_doors_offer_are_the_library_s():
    from retrieval.interfaces.params import SORTS as offered
    from retrieval.search.blend import SORTS

    assert offered == SORTS
