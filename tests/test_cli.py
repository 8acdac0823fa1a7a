"""The CLI end to end: through ``main(argv)`` and through new processes."""

import json
import subprocess
import sys

import pytest
from conftest import paper, shared_corpus, write_jsonl

from retrieval.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_build_search_stats(tmp_path, capsys):
    db = str(tmp_path / "demo.db")
    code, out, _ = run(capsys, "build", "--db", db)
    assert code == 0 and "100 papers, 185 citation edges, 0 dangling references" in out
    code, out, _ = run(capsys, "search", "attention sparsity", "--db", db, "--limit", "3", "--lesson")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["#", "id", "year"] and len(lines[1:4]) == 3
    assert "Attention Sparsity" in lines[1]
    assert "3 of 42 hits shown" in out
    code, out, _ = run(capsys, "search", "attention sparsity", "--db", db, "--limit", "3")
    assert code == 0 and "graph: not expanded (20 seeds match" in out
    code, out, _ = run(capsys, "stats", "--db", db)
    assert code == 0 and "papers" in out and "schema_revision" in out


def test_search_json_shape(demo_db, capsys):
    code, out, _ = run(capsys, "search", "low rank adapter", "--db", str(demo_db), "--json", "--limit", "5")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"query", "results", "metrics", "expansion"}
    assert data["query"] == "low rank adapter" and len(data["results"]) == 5
    assert set(data["results"][0]) == {
        "id", "title", "year", "bm25_score", "graph_distance", "recency_score", "final_score", "graph_score",
        "reached",
    }  # fmt: skip
    assert set(data["expansion"]["gate"]) >= {"mode", "fired", "survivors", "reason"}
    assert set(data["metrics"]) == {"hit_count", "avg_score", "top_score", "wall_time_ms"}
    finals = [r["final_score"] for r in data["results"]]
    assert finals == sorted(finals, reverse=True)


def test_options_change_the_search(demo_db, capsys):
    _, out, _ = run(capsys, "search", "dataset distillation", "--db", str(demo_db), "--json", "--hops", "0",
                    "--top-k-lexical", "4", "--limit", "50", "--lesson")  # fmt: skip
    data = json.loads(out)
    assert data["metrics"]["hit_count"] == 4 and {r["graph_distance"] for r in data["results"]} == {0}


def test_empty_query_exits_zero_with_zeroed_metrics(demo_db, capsys):
    for query in ["", "...!?"]:
        code, out, _ = run(capsys, "search", query, "--db", str(demo_db), "--json")
        data = json.loads(out)
        assert code == 0 and data["results"] == []
        assert (data["metrics"]["hit_count"], data["metrics"]["avg_score"], data["metrics"]["top_score"]) == (0, 0, 0)


def test_sql_flag_prints_the_statements(demo_db, capsys):
    code, out, _ = run(capsys, "search", "attention", "--db", str(demo_db), "--sql")
    assert code == 0
    assert "FROM json_each(:query_terms)" in out and "LIMIT :k" in out
    assert "-- expansion: references" in out and "-- expansion: citing" in out and "row_number() OVER" in out
    assert '"query_terms": "[\\"attention\\"]"' in out
    code, out, _ = run(capsys, "search", "attention", "--db", str(demo_db), "--sql", "--lesson")
    assert "WITH RECURSIVE" in out and "-- expansion" not in out


def test_missing_index_exits_one_and_suggests_build(tmp_path, capsys):
    code, _, err = run(capsys, "search", "x", "--db", str(tmp_path / "none.db"))
    assert code == 1
    assert "no index at" in err and "retrieval build" in err


def test_bad_corpus_exits_one_with_file_and_line(tmp_path, capsys):
    bad = write_jsonl(tmp_path / "bad.jsonl", [paper("a"), paper("a")])
    code, _, err = run(capsys, "build", "--from", str(bad), "--db", str(tmp_path / "x.db"))
    assert code == 1 and "bad.jsonl:2: duplicate id 'a'" in err
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(
    "argv",
    [[], ["frobnicate"], ["search"], ["search", "x", "--limit", "0"], ["search", "x", "--hops", "-1"],
     ["search", "x", "--hops", "two"], ["build", "--bogus"]],
)  # fmt: skip
def test_usage_errors_exit_two(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_db_from_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RETRIEVAL_DB", str(tmp_path / "env.db"))
    assert run(capsys, "build")[0] == 0
    assert (tmp_path / "env.db").exists()
    code, out, _ = run(capsys, "stats", "--json")
    assert code == 0 and json.loads(out)["papers"] == 100


def _cli(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "retrieval", *argv], cwd=cwd, capture_output=True, text=True)


def test_build_in_one_process_search_in_another(tmp_path):
    built = _cli("build", "--db", "demo.db", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    first = _cli("search", "retrieval augmentation", "--db", "demo.db", "--json", cwd=tmp_path)
    second = _cli("search", "retrieval augmentation", "--db", "demo.db", "--json", cwd=tmp_path)
    assert first.returncode == second.returncode == 0
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert a["results"] == b["results"] and a["results"][0]["title"].startswith("Retrieval Augmentation")


@pytest.mark.slow
def test_hepth_builds_and_answers_from_a_new_process(tmp_path):
    corpus = shared_corpus("hepth")
    built = _cli("build", "--from", str(corpus), "--db", "hepth.db", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    assert "29,555 papers, 352,768 citation edges" in built.stdout
    found = _cli("search", "black hole entropy", "--db", "hepth.db", "--json", cwd=tmp_path)
    assert found.returncode == 0
    assert "entropy" in json.loads(found.stdout)["results"][0]["title"].lower()


def test_build_takes_a_number_of_workers(tmp_path, capsys):
    db = str(tmp_path / "w.db")
    assert main(["build", "--workers", "0", "--db", db]) == 0
    assert "built" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:
        main(["build", "--workers", "-1", "--db", db])
    assert exit_info.value.code == 2
    assert "expected 0 or more, got -1" in capsys.readouterr().err
