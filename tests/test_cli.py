"""The CLI end to end: through ``main(argv)`` and through new processes."""

import json
import re
import subprocess
import sys

import pytest

from retrieval.interfaces.cli import main
from tests.helpers import paper, shared_corpus, write_jsonl


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
    assert "results 1-3; 20 papers match the query" in out and "final =" not in out  # internals with -v only
    code, out, _ = run(capsys, "search", "attention sparsity", "--db", db, "--limit", "3", "-v")
    # the default: auto, which picks the learned model on the demo corpus's well-cited papers, and says so
    assert code == 0 and "ranking auto: the learned model (the matching papers are cited" in out
    assert "final = learned model ranker-v3" in out and " ranked candidates" in out
    code, out, _ = run(
        capsys, "search", "attention sparsity", "--db", db, "--limit", "3", "-v", "--ranking", "expansion"
    )
    assert code == 0 and "graph: expanded (expansion is always on)" in out and "ranking auto" not in out
    # the gate, when asked for: by --expand auto, or by one of its settings
    for gate in (["--expand", "auto"], ["--gate-threshold", "0.3"]):
        code, out, _ = run(capsys, "search", "attention sparsity", "--db", db, "--limit", "3", "-v", *gate)
        assert code == 0 and "graph: not expanded (20 seeds match" in out and "ranking auto" not in out
    code, out, _ = run(capsys, "search", "attention sparsity", "--db", db, "--limit", "3", "-v", "--expand", "always")
    assert code == 0 and "graph: expanded (expansion is always on)" in out and "ranking auto" not in out
    code, out, _ = run(capsys, "stats", "--db", db)
    assert code == 0 and "papers" in out and "schema_revision" in out


def test_search_help_is_grouped_with_the_query_and_filters_first(capsys):
    """``search --help`` listed twelve ranking options before ``--year`` and ``--author``: it now lists the query
    and its filters, then the output, then the ranking's settings as advanced."""
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    out = capsys.readouterr().out
    groups = [out.index(name) for name in ("query and filters:", "output:", "ranking (advanced):")]
    assert groups == sorted(groups)
    filters, output, ranking = (out[a:b] for a, b in zip(groups, groups[1:] + [len(out)], strict=True))
    assert all(option in filters for option in ("--year", "--author", "--offset", "--limit", "--plain", "--db"))
    assert all(option in output for option in ("--format", "--json", "--why", "-v, --verbose", "--sql"))
    for option in (
        "--ranking",
        "--lesson",
        "--top-k-lexical",
        "--hops",
        "--expand",
        "--relations",
        "--prf",
        "--gate-threshold",
        "--gate-survivors",
        "--max-neighbours",
        "--max-candidates",
        "--model",
    ):
        assert option in ranking and option not in filters + output, option
    usage = out.split("\n\n")[0]
    assert "--top-k-lexical" not in usage and "--year" in usage


def test_search_json_shape(demo_db, capsys):
    code, out, _ = run(capsys, "search", "low rank adapter", "--db", str(demo_db), "--json", "--limit", "5")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {
        "query", "results", "offset", "matched", "matched_exact", "length", "filters", "warnings", "metrics",
        "expansion",
    }  # fmt: skip
    assert data["query"] == "low rank adapter" and len(data["results"]) == 5
    assert data["offset"] == 0 and data["filters"] is None and data["warnings"] == [] and data["matched"] > 5
    assert set(data["results"][0]) == {
        "rank", "id", "title", "year", "authors", "bm25_score", "graph_distance", "recency_score", "final_score",
        "graph_score", "reached", "why", "features", "contributions", "model", "citations", "cocited",
    }  # fmt: skip
    assert [r["rank"] for r in data["results"]] == [1, 2, 3, 4, 5] and data["results"][0]["authors"]
    assert set(data["expansion"]["gate"]) >= {"mode", "fired", "survivors", "reason"}
    assert data["expansion"]["auto"]["ranking"] == "learned" and data["expansion"]["model"]["name"].startswith(
        "ranker-v3"
    )
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


def _printed_statements(out: str) -> list[tuple[str, str, dict]]:
    """``(name, sql, params)`` of each statement ``--sql`` printed."""
    parts = re.split(r"^-- \d+\. (.*)$", out, flags=re.M)[1:]
    statements = []
    for name, body in zip(parts[::2], parts[1::2], strict=True):
        sql, _, rest = body.strip().partition(";")
        match = re.search(r"^-- parameters: (.*)$", rest, flags=re.M)
        statements.append((name, sql.strip(), json.loads(match.group(1)) if match else {}))
    return statements


def _as_executed(sql: str, params: dict) -> re.Pattern:
    """What SQLite's trace shows for ``sql`` run with ``params``: each placeholder expanded to its literal
    (a float to 15 significant digits, so any number matches there)."""
    pieces = re.split(r"(:\w+)", sql)
    pattern = ""
    for i, piece in enumerate(pieces):
        if i % 2 == 0:
            pattern += re.escape(piece)
            continue
        value = params[piece[1:]]
        if isinstance(value, float):
            pattern += r"[-+0-9.eEInf]+"
        elif isinstance(value, int):
            pattern += re.escape(str(value))
        else:
            pattern += re.escape("'" + str(value).replace("'", "''") + "'")
    return re.compile(pattern, re.S)


@pytest.mark.parametrize("options", [["--expand", "always"], ["--lesson"], ["--expand", "always", "--hops", "2"]])
def test_sql_flag_prints_exactly_the_statements_that_ran(demo_db, capsys, monkeypatch, options):
    """Every statement SQLite executed during the search (its own trace, below our executor) is printed, in
    order, with the parameters it ran with; and nothing else is."""
    import retrieval.store.backend as backend_module

    executed: list[str] = []
    real_connect = backend_module.connect

    def traced_connect(path, readonly=True):
        conn = real_connect(path, readonly)
        conn.set_trace_callback(executed.append)
        return conn

    monkeypatch.setattr(backend_module, "connect", traced_connect)
    code, out, _ = run(capsys, "search", "attention", "--db", str(demo_db), "--sql", *options)
    assert code == 0
    printed = _printed_statements(out)
    assert len(printed) == len(executed) > 8
    for (name, sql, params), ran in zip(printed, executed, strict=True):
        assert _as_executed(sql, params).fullmatch(ran), name
    names = [name for name, _, _ in printed]
    opening = [n for n in names if n.startswith("open: ")]
    assert names[: len(opening)] == opening and "open: the schema revision" in opening  # the check, first
    assert names[len(opening) : len(opening) + 3] == [
        "begin the read snapshot",
        "index statistics",
        "lexical: the query's terms",
    ]
    assert names[-1] == "end the read snapshot"
    if "--lesson" in options:
        assert "citation walk (recursive CTE)" in names and not any(n.startswith("expansion") for n in names)
    else:
        hops = 2 if "2" in options else 1
        assert [n for n in names if n.startswith("expansion: ")] == [
            step
            for hop in range(1, hops + 1)
            for step in (f"expansion: degrees of the hop-{hop} sources", f"expansion: references, hop {hop}",
                         f"expansion: citing, hop {hop}")
        ]  # fmt: skip


def test_missing_index_exits_one_and_suggests_build(tmp_path, capsys):
    code, _, err = run(capsys, "search", "x", "--db", str(tmp_path / "none.db"))
    assert code == 1
    assert "no index at" in err and "retrieval build" in err


SERVER = "postgresql://postgres@127.0.0.1:1/absent"  # a closed local port: nothing is reached


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "--db", SERVER, "black holes"],
        ["stats", "--db", SERVER],
        ["explain", "--db", SERVER, "black holes"],
        ["show", "--db", SERVER, "p1"],
        ["similar", "--db", SERVER, "p1"],
        ["check", "--db", SERVER],
        ["upgrade", "--db", SERVER],
        ["log", "--db", SERVER],
        ["remove", "--db", SERVER, "p1"],
        ["add", "--db", SERVER, "CORPUS"],
        ["build", "--db", SERVER, "--from", "CORPUS"],
        ["build", "--db", SERVER, "--shards", f"{SERVER}1,{SERVER}2", "--from", "CORPUS"],
    ],
    ids=lambda argv: " ".join(a for a in argv if not a.startswith(("postgresql", "CORPUS"))),
)
def test_a_server_index_without_the_driver_says_what_to_install(argv, tmp_path, capsys, monkeypatch):
    """The PostgreSQL driver is an optional extra: without it, every command on a server's index says what to
    install and exits 1 (search, stats, explain and the rest ended in an ImportError's traceback)."""
    corpus = write_jsonl(tmp_path / "corpus.jsonl", [paper("p1", "Black holes")])
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed: importing it fails
    assert main([str(corpus) if a == "CORPUS" else a for a in argv]) == 1
    err = capsys.readouterr().err
    assert "pip install 'retrieval[postgresql]'" in err and "Traceback" not in err, err


def test_the_version_to_a_full_device_exits_one_with_a_message():
    # Before: its OSError (No space left on device) came as a traceback, raised while the options were parsed.
    with open("/dev/full", "w") as full:
        argv = [sys.executable, "-m", "retrieval", "--version"]
        done = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 1 and "No space left on device" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_build_whose_summary_cannot_be_printed_says_the_index_was_built(tmp_path):
    """Before: "No space left on device" alone, exit 1, as if the build had failed, though the index was swapped in."""
    db = tmp_path / "built.db"
    with open("/dev/full", "w") as full:
        argv = [sys.executable, "-m", "retrieval", "build", "--db", str(db), "--semantic", "none"]
        done = subprocess.run(argv, stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "the change was saved, but then: [Errno 28] No space left on device" in done.stderr, done.stderr
    assert main(["stats", "--db", str(db)]) == 0  # the index is there, whole


@pytest.mark.parametrize("columns", ["99999999999999999999", "9999999999"])
def test_a_columns_of_many_digits_is_read_as_the_widest_width(demo_db, columns, capsys, monkeypatch):
    # Before: an OverflowError's traceback, or the whole width laid out (23 GB, killed by the kernel).
    from retrieval.interfaces.output.display import MAX_WIDTH

    monkeypatch.setenv("COLUMNS", columns)
    assert main(["search", "attention", "--db", str(demo_db), "-v", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert out and max(len(line) for line in out.splitlines()) <= MAX_WIDTH


def test_bad_corpus_exits_one_with_file_and_line(tmp_path, capsys):
    bad = write_jsonl(tmp_path / "bad.jsonl", [paper("a"), paper("a")])
    code, _, err = run(capsys, "build", "--from", str(bad), "--db", str(tmp_path / "x.db"))
    assert code == 1 and "bad.jsonl:2: duplicate id 'a'" in err
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(
    "argv",
    [[], ["frobnicate"], ["search"], ["search", "x", "--limit", "0"], ["search", "x", "--hops", "-1"],
     ["search", "x", "--hops", "two"], ["build", "--bogus"],
     ["eval", "--corpus", "c.jsonl", "--queries", "q.jsonl", "--out", "o", "--jobs", "33"]],  # was taken: 33 workers
)  # fmt: skip
def test_usage_errors_exit_two(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage:" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["search", "x"], ["stats"], ["similar", "p001"], ["build"]])
def test_an_unknown_option_is_said_by_the_command_s_own_usage(command, capsys):
    """It was said under the program's usage line, ``usage: retrieval [-h] [--version] COMMAND ...``, which names
    none of the command's options."""
    with pytest.raises(SystemExit) as info:
        main([*command, "--frobnicate"])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.startswith(f"usage: retrieval {command[0]} ") and f"retrieval {command[0]}: error: unrecognized" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["search", "black hole", "--json", "--sql"], "--sql prints the statements a search ran instead of"),
        (["search", "black hole", "--format", "csv", "--sql"], "leave out --sql for the csv results"),
        (["remove", "p001", "--db", ""], "argument --db: is empty"),
        (["stats", "--db", "  "], "argument --db: is empty"),
        (["similar", *[f"p{i:03d}" for i in range(1, 102)]], "similar takes at most 100 paper ids, got 101"),
        (["search", "attention", "--author", ""], "argument --author: is empty: give NAME"),
        (["search", "attention", "--author", " ! "], "--author ' ! ' has no letters"),
        (["search", "attention", "--year", ""], "argument --year: is empty: give RANGE (such as 1998-2001)"),
        (["similar", "p001", "--year", " "], "argument --year: is empty"),
        (["build", "--stem", ""], "argument --stem: is empty: give a Snowball stemmer's name (english, ...) or none"),
        (["similar", "p001", "--author", "!!!"], "--author '!!!' has no letters"),
        (["show", "p001", "--citations-offset", "99999999999"], "argument --citations-offset: expected at most"),
        (["search", "x", "--db", "postgresq://h/db"], "argument --db: postgresq://... is not a kind of index"),
        (["build", "--shards", " , "], "argument --shards: needs at least one PostgreSQL URL"),
        (
            ["build", "--shards", "postgresql://h/a,postgresql://h/a"],
            "argument --shards: names the same database twice",
        ),
        (["build", "--shards", "postgresql://h/a,b.db"], "argument --shards: takes PostgreSQL URLs"),
        (["build", "--shards", "postgresql://h/a"], "--shards needs a PostgreSQL coordinator: --db postgresql://"),
        (["search", "-entropy"], "a word to leave out goes inside the quoted query: retrieval search 'black hole"),
        (["search", "black hole", "-entropy"], "unrecognized arguments: -entropy; a word to leave out goes inside"),
        (["show", "-x"], "a value that starts with '-' goes after --: retrieval show -- -x"),
        (["show", "-x", "--db", "my index.db"], "goes after --: retrieval show --db 'my index.db' -- -x"),
        (["show", "--", "-x", "--db", "my.db"], "options go before the --: retrieval show --db my.db -- -x"),
    ],
)
def test_usage_errors_found_after_parsing_exit_two_too(argv, says, demo_db, capsys, monkeypatch):
    """Options that could not run as given are usage errors (exit 2, nothing done): --sql with an export format
    (it printed the statements alone where JSON was asked for), an empty --db (it meant the default index: a
    script's `--db "$UNSET"` removed papers from ./retrieval.db), and bounds the library checked (exit 1, the
    message naming the library's parameter rather than the option). So are a --db URL of no known kind, --shards
    naming no server, or a file, or given for a SQLite index (each was exit 1, a runtime error), and a value that
    starts with a dash, which argparse takes for an option: the message says where it goes."""
    monkeypatch.setenv("RETRIEVAL_DB", str(demo_db))
    before = demo_db.stat().st_mtime_ns
    with pytest.raises(SystemExit) as info:
        main(argv)
    out, err = capsys.readouterr()
    assert info.value.code == 2 and out == ""
    assert says in err and "usage:" in err and "Traceback" not in err
    assert demo_db.stat().st_mtime_ns == before


def test_db_from_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RETRIEVAL_DB", str(tmp_path / "env.db"))
    assert run(capsys, "build")[0] == 0
    assert (tmp_path / "env.db").exists()
    code, out, _ = run(capsys, "stats", "--json")
    assert code == 0 and json.loads(out)["papers"] == 100


def test_a_blank_db_from_the_environment_says_so(tmp_path, capsys, monkeypatch):
    """``RETRIEVAL_DB=' '`` read as a path of one space: "no index at  : build one with `retrieval build --db  `"."""
    from retrieval import RetrievalClient
    from retrieval.errors import ConfigError

    monkeypatch.setenv("RETRIEVAL_DB", " ")
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, "search", "black")
    assert code == 1 and "$RETRIEVAL_DB is blank (' '): unset it, or set it to an index's path or URL" in err
    with pytest.raises(ConfigError, match=r"--db is blank \('\\t'\)"):
        RetrievalClient("\t")
    assert list(tmp_path.iterdir()) == []


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
    summaries = {}
    for workers in ("0", "2"):
        db = str(tmp_path / f"w{workers}.db")
        code, out, _ = run(capsys, "build", "--workers", workers, "--db", db)
        assert code == 0
        summaries[workers] = re.sub(r", [0-9.]+ s$", "", out.strip().removeprefix(f"built {db}: "))
        code, out, _ = run(capsys, "stats", "--db", db, "--json")
        summaries[workers] += f"; {json.loads(out)['postings']} postings"
    assert summaries["0"] == summaries["2"]
    assert summaries["0"].startswith("100 papers, 185 citation edges, 0 dangling references")
    with pytest.raises(SystemExit) as exit_info:
        main(["build", "--workers", "-1", "--db", str(tmp_path / "w.db")])
    assert exit_info.value.code == 2
    assert "expected 0 or more, got -1" in capsys.readouterr().err


_IMPORTED = (
    "import sys\n"
    "from retrieval.interfaces.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit:\n"
    "    pass\n"
    "heavy = ('numpy', 'sqlalchemy', 'alembic', 'retrieval.eval', 'retrieval.evidence',\n"
    "         'retrieval.store.sqlite.bulk')\n"
    "print('IMPORTED', sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(heavy)))\n"
)


@pytest.mark.parametrize("argv", [["search", "attention sparsity"], ["--help"], ["search", "--help"]])
def test_search_and_help_import_no_heavy_module(demo_db, tmp_path, argv):
    done = subprocess.run(
        [sys.executable, "-c", _IMPORTED, *argv, *(["--db", str(demo_db)] if argv[0] == "search" else [])],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "IMPORTED []"
    if argv == ["search", "attention sparsity"]:
        assert "Attention Sparsity study" in done.stdout


def test_explain_and_eval_load_their_modules_when_they_run(capsys):
    for command, option in (("explain", "--ranker"), ("eval", "--corpus")):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        assert option in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["--help"], ["search", "--help"]])
def test_help_imports_neither_typing_nor_inspect(tmp_path, argv):
    """``--help`` stays as quick as a parser: the parameter descriptions it reads need neither module."""
    code = _IMPORTED.replace("heavy = (", "heavy = ('typing', 'inspect', ")
    done = subprocess.run([sys.executable, "-c", code, *argv], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "IMPORTED []"


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_options_of_a_number_at_least_0_refuse_nan_and_infinity(demo_db, capsys, value):
    """`explain --beta` and `fetch --backoff` took nan and inf (nan < 0 is false): a usage error now."""
    for argv, expected in (
        (["explain", "--db", str(demo_db), "black holes", "--beta", value], "expected a number from 0 to 10"),
        (["fetch", "arxiv", "--category", "hep-th", "-o", "x.jsonl", "--backoff", value],
         "expected a finite number of at least 0"),
    ):  # fmt: skip
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        assert expected in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["search", "black hole"], ["stats"], ["remove", "p001"], ["check"]])
def test_a_folder_given_as_the_index_is_named_as_one(argv, tmp_path, capsys):
    """SQLite reads a folder as a disk I/O error ("check the disk (full, removed, read-only?)"): the message says
    it is a folder and which path to give."""
    folder = tmp_path / "indexes"
    folder.mkdir()
    code, out, err = run(capsys, *argv, "--db", str(folder))
    assert code == 1 and out == ""
    assert f"{folder} is a folder, not an index file" in err and str(folder / "retrieval.db") in err
    assert "disk" not in err and list(folder.iterdir()) == []


@pytest.mark.parametrize("content", ["", "\n\n"])
def test_building_from_a_file_without_papers_names_the_file(content, tmp_path, capsys):
    """An empty corpus file (or one of blank lines): the message names it ("the index would hold no papers"
    named nothing), and no index is left."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text(content)
    code, out, err = run(capsys, "build", "--from", str(empty), "--db", str(tmp_path / "x.db"))
    assert code == 1 and out == ""
    assert "empty.jsonl holds no papers: nothing to index" in err
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize("option", ["--graphml", "--dot"])
def test_explain_says_which_graph_file_it_cannot_write(option, demo_db, tmp_path, capsys):
    """A folder, or a file in a folder that does not exist, given as the graph's file: the message names the
    option and the path (it printed the system's error alone: "[Errno 21] Is a directory: ...")."""
    for target, reason in ((tmp_path, "Is a directory"), (tmp_path / "absent" / "g.out", "No such file")):
        code, out, err = run(capsys, "explain", "attention", "--db", str(demo_db), option, str(target))
        assert code == 1
        assert "cannot write the graph as" in err and f"to {target} ({reason}" in err and f"give {option} a file" in err


def test_explain_exports_carry_each_papers_citation_count(demo_db, capsys):
    """explain's CSV left its citations column empty and its JSON lines had no count: both give the papers of the
    index citing each paper, as a search's exports do."""
    import csv
    import io

    from retrieval import RetrievalClient

    code, out, _ = run(capsys, "explain", "attention", "--db", str(demo_db), "--top-k", "5", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and rows
    with RetrievalClient(demo_db) as client:
        papers = client.papers([row["id"] for row in rows])
    assert [int(row["citations"]) for row in rows] == [len(papers[row["id"]].citations) for row in rows]
    assert any(int(row["citations"]) > 0 for row in rows)
    code, out, _ = run(capsys, "explain", "attention", "--db", str(demo_db), "--top-k", "5", "--format", "jsonl")
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["citations"] for line in lines] == [int(row["citations"]) for row in rows]


def test_retrieval_search_is_callable_whatever_was_imported_first(demo_db):
    """``retrieval.search`` is a function and a package's name: importing the package (``RetrievalClient`` does)
    put the package where the function was, and ``search(...)`` raised "'module' object is not callable"."""
    program = (
        "import sys\n"
        "from retrieval import RetrievalClient\n"
        "from retrieval import search\n"
        "import retrieval\n"
        "a = [e.paper.id for e in search('attention sparsity', sys.argv[1], limit=3).ranked]\n"
        "b = [e.paper.id for e in retrieval.search('attention sparsity', db=sys.argv[1], limit=3).ranked]\n"
        "with RetrievalClient(sys.argv[1]) as client:\n"
        "    c = [e.paper.id for e in client.search('attention sparsity', limit=3).ranked]\n"
        "print(a == b == c and len(a) == 3)\n"
    )
    done = subprocess.run([sys.executable, "-c", program, str(demo_db)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"
