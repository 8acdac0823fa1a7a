"""``retrieval eval``: the metrics against pytrec_eval and hand-checked cases, the protocol on real index files,
the cache, determinism, bad input, the subcommand, and one run on the real CACM collection."""

from __future__ import annotations

import io
import json
import random
import sqlite3
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from retrieval import RetrievalClient, RetrievalConfig
from retrieval.errors import ConfigError, InputError, RetrievalError
from retrieval.eval import MODES, BlendMode, run_eval
from retrieval.eval.metrics import CUTOFFS, effectiveness, library_measures, pooled_recall, rank_scores
from retrieval.eval.trec import trec_id
from retrieval.interfaces.cli import main
from retrieval.interfaces.cli.eval import ProgressBar
from tests.helpers import SHARED_DATA, write_jsonl
from tests.reference import analysed

pytrec_eval = pytest.importorskip("pytrec_eval", reason="the eval extra (pytrec_eval) is not installed")
pytest.importorskip("ir_measures", reason="the eval extra (ir-measures) is not installed")
pytest.importorskip("matplotlib", reason="the eval extra (matplotlib) is not installed")


# -- a small corpus of citation-recommendation queries ------------------------------------------------------

TOPICS = (
    "quark gluon plasma viscosity",
    "neural network pruning sparsity",
    "citation graph random walk",
    "protein folding energy landscape",
)
PER_TOPIC = 10


def pid(topic: int, i: int) -> str:
    return f"t{topic}p{i:02d}"


def corpus_records() -> list[dict]:
    """Four topics of ten papers. Paper 9 of each topic is a query paper: it cites papers 0-5 of its topic and the
    next topic's query paper; papers 3 and 6 of each topic cite their query paper (edges that must go)."""
    records = []
    for t, words in enumerate(TOPICS):
        for i in range(PER_TOPIC):
            refs = []
            if i >= 2:
                refs += [pid(t, 0), pid(t, 1)]
            if i in (3, 6):
                refs.append(pid(t, 9))
            if i == 9:
                refs = [pid(t, j) for j in range(6)] + [pid((t + 1) % len(TOPICS), 9), "outside/0001"]
            records.append(
                {
                    "id": pid(t, i),
                    "title": f"{words.title()} study {i}",
                    "abstract": f"We examine {words} with method m{t}x{i}. The {words.split()[0]} results hold.",
                    "year": 1995 + i,
                    "authors": [f"Author {t}{i}"],
                    "references": refs,
                }
            )
    return records


def citation_queries(records: list[dict]) -> list[dict]:
    by_id = {r["id"]: r for r in records}
    queries = []
    for t in range(len(TOPICS)):
        paper = by_id[pid(t, 9)]
        relevant = [r for r in paper["references"] if r != "outside/0001"]
        if t == 0:
            relevant.append("not-in-corpus")
        queries.append({"qid": paper["id"], "query": f"{paper['title']}. {paper['abstract']}", "relevant": relevant})
    return queries


@pytest.fixture(scope="module")
def citation_files(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("citation")
    records = corpus_records()
    return write_jsonl(folder / "papers.jsonl", records), write_jsonl(
        folder / "queries.jsonl", citation_queries(records)
    )


@pytest.fixture(scope="module")
def citation_run(citation_files, tmp_path_factory):
    corpus, queries = citation_files
    base = tmp_path_factory.mktemp("citation-run")
    report = run_eval(corpus, queries, base / "out", cache_dir=base / "cache", modes=LESSON_MODES)
    return report, base


# The lesson's modes: the hop and seed tables are defined over their walk.
LESSON_MODES = ["bm25", "blend-1hop", "blend-2hop"]


def test_every_registered_mode_runs(citation_files, tmp_path):
    corpus, queries = citation_files
    report = run_eval(corpus, queries, tmp_path / "out", cache_dir=tmp_path / "cache")
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert set(data["modes"]) == set(MODES)
    assert report.protocol["query_papers_removed"] == 4
    texts = {json.loads(line)["qid"]: json.loads(line)["query"] for line in queries.read_text().splitlines()}
    with RetrievalClient(only_index(tmp_path / "cache")) as client:  # the evaluation index, searched directly
        expected_bm25 = {qid: [p for p, _ in client.lexical.search(text, 100)] for qid, text in texts.items()}
    for name in MODES:
        rankings = trec_rankings(tmp_path / "out" / f"run.{name}.trec")
        assert set(rankings) == set(texts), name  # every query answered
        for qid, ranking in rankings.items():
            assert 1 <= len(ranking) <= 100 and len(set(ranking)) == len(ranking), (name, qid)
            assert not set(ranking) & set(texts), (name, qid)  # the query papers were removed from the index
        row = data["modes"][name]
        assert 0.0 <= row["ndcg@10"] <= 1.0 and 0.0 <= row["mrr"] <= 1.0
        pooled = [row["pooled_recall"][f"@{k}"] for k in CUTOFFS]
        assert pooled == sorted(pooled), name  # recall never falls as K grows
    assert trec_rankings(tmp_path / "out" / "run.bm25.trec") == expected_bm25


def only_index(cache: Path) -> Path:
    files = sorted(cache.glob("*.db"))
    assert len(files) == 1, files
    return files[0]


def trec_rankings(path: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        qid, _, doc, rank, score, _tag = line.split()
        out.setdefault(qid, []).append(doc)
        assert int(rank) == len(out[qid])
    return out


# -- metrics ------------------------------------------------------------------------------------------------


def test_pooled_recall_hand_checked():
    rankings = {"a": ["d1", "x", "d2", "y"], "b": ["y", "e1"]}
    qrels = {"a": frozenset({"d1", "d2", "d3"}), "b": frozenset({"e1"})}
    # found at 1, 2, 3: a has d1 | d1 | d1, d2 ; b has - | e1 | e1. Relevant in all: 4.
    assert pooled_recall(rankings, qrels, 1) == pytest.approx(1 / 4)
    assert pooled_recall(rankings, qrels, 2) == pytest.approx(2 / 4)
    assert pooled_recall(rankings, qrels, 3) == pytest.approx(3 / 4)
    macro = effectiveness(rankings, qrels).means["recall@5"]
    assert macro == pytest.approx((2 / 3 + 1) / 2)  # macro differs from pooled (3/4): the queries weigh alike
    assert pooled_recall({}, qrels, 5) == 0.0


def test_crase_map_and_the_others_hand_checked():
    # q1: relevant at ranks 1 and 3, a third relevant paper never retrieved; q2: first relevant at rank 3.
    rankings = {"q1": ["r1", "n1", "r2", "n2", "n3"], "q2": ["n1", "n2", "s1"]}
    qrels = {"q1": frozenset({"r1", "r2", "r3"}), "q2": frozenset({"s1"})}
    per_query = library_measures(rankings, qrels)
    # AP@K = (1/|Rel|) sum_{i<=K} Prec@i * rel_i, the denominator being |Rel| = 3 even at K = 2.
    assert per_query["q1"]["map@5"] == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert per_query["q2"]["map@5"] == pytest.approx((1 / 3) / 1)
    assert per_query["q1"]["recall@5"] == pytest.approx(2 / 3)
    assert per_query["q1"]["mrr"] == 1.0 and per_query["q2"]["mrr"] == pytest.approx(1 / 3)
    import math

    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert per_query["q1"]["ndcg@10"] == pytest.approx((1 + 1 / math.log2(4)) / ideal)
    means = effectiveness(rankings, qrels).means
    assert means["map@5"] == pytest.approx(((1 + 2 / 3) / 3 + 1 / 3) / 2)


def test_the_library_scores_our_order_not_its_tie_break():
    # With equal scores trec_eval would put "z" first (ties go by document id, descending) and find it at rank 1.
    per_query = library_measures({"q": ["a", "z"]}, {"q": frozenset({"z"})})
    assert per_query["q"]["mrr"] == 0.5
    assert rank_scores(["a", "z", "b"]) == {"a": 3.0, "z": 2.0, "b": 1.0}


def test_a_query_with_an_empty_ranking_counts_as_zero():
    rankings = {"hit": ["x"], "empty": []}
    qrels = {"hit": frozenset({"x"}), "empty": frozenset({"y"}), "absent": frozenset({"z"})}
    result = effectiveness(rankings, qrels)
    assert set(result.per_query) == {"hit", "empty", "absent"}
    assert result.means["mrr"] == pytest.approx(1 / 3) and result.means["recall@10"] == pytest.approx(1 / 3)


def crase_ap(ranking: list[str], relevant: frozenset[str], k: int) -> float:
    """AP@K exactly as the Crase paper writes it, independently of any library."""
    hits, total = 0, 0.0
    for i, doc in enumerate(ranking[:k], start=1):
        if doc in relevant:
            hits += 1
            total += hits / i
    return total / len(relevant)


def test_standard_measures_agree_with_pytrec_eval_on_a_random_run():
    rng = random.Random(7)
    pool = [f"d{i:03d}" for i in range(300)]
    qrels = {f"q{q}": frozenset(rng.sample(pool, rng.randint(1, 30))) for q in range(40)}
    rankings = {}
    for qid, relevant in qrels.items():
        # bias the rankings towards relevant papers so every measure takes varied values
        candidates = sorted(relevant) + rng.sample(pool, 120)
        rng.shuffle(candidates)
        rankings[qid] = list(dict.fromkeys(candidates))[: rng.randint(0, 100)]
    rankings["q0"] = []  # an empty ranking is part of the test
    ours = library_measures(rankings, qrels)

    names = {f"recall_{k}": f"recall@{k}" for k in CUTOFFS} | {f"map_cut_{k}": f"map@{k}" for k in CUTOFFS}
    names |= {"ndcg_cut_10": "ndcg@10", "recip_rank": "mrr"}
    cuts = ",".join(map(str, CUTOFFS))
    evaluator = pytrec_eval.RelevanceEvaluator(
        {q: dict.fromkeys(rel, 1) for q, rel in qrels.items()},
        {f"recall.{cuts}", f"map_cut.{cuts}", "ndcg_cut.10", "recip_rank"},
    )
    direct = evaluator.evaluate({q: rank_scores(r) for q, r in rankings.items() if r})
    for qid in qrels:
        for trec_name, name in names.items():
            expected = direct[qid][trec_name] if qid in direct else 0.0
            assert ours[qid][name] == pytest.approx(expected, abs=1e-12), (qid, name)
        for k in CUTOFFS:  # the Crase AP@K is trec_eval's map_cut
            assert ours[qid][f"map@{k}"] == pytest.approx(crase_ap(rankings[qid], qrels[qid], k), abs=1e-12)
    found = sum(len(set(rankings[q][:20]) & qrels[q]) for q in qrels)
    assert effectiveness(rankings, qrels).pooled_recall[20] == pytest.approx(found / sum(map(len, qrels.values())))


# -- the protocol -------------------------------------------------------------------------------------------


def test_citation_protocol_counts(citation_run):
    report, _ = citation_run
    p = report.protocol
    records = corpus_records()
    removed = {pid(t, 9) for t in range(len(TOPICS))}
    ids = {r["id"] for r in records}
    edges = {(r["id"], ref) for r in records for ref in r["references"] if ref in ids and ref != r["id"]}
    assert p["kind"] == "citation"
    assert p["query_papers_removed"] == 4 and p["index_papers"] == len(records) - 4
    assert p["citation_edges_removed"] == sum(1 for a, b in edges if a in removed or b in removed) == 4 * 7 + 4 * 2
    assert p["relevant_removed_query_papers_dropped"] == 4  # each query cited the next query paper
    assert p["relevant_not_in_corpus_dropped"] == 1
    assert p["queries_evaluated"] == 4 and p["queries_skipped"] == 0
    assert p["mean_relevant"] == 6.0 and p["base_rate"] == pytest.approx(6.0 / 36)


def test_a_query_paper_is_never_retrieved_and_its_edges_are_gone(citation_run):
    report, base = citation_run
    removed = {pid(t, 9) for t in range(len(TOPICS))}
    for mode, name in report.files["runs"].items():
        rankings = trec_rankings(base / "out" / name)
        assert set(rankings) == removed, mode
        assert not removed & {doc for docs in rankings.values() for doc in docs}, mode
    conn = sqlite3.connect(only_index(base / "cache"))
    try:
        marks = ",".join("?" * len(removed))
        args = sorted(removed)
        assert conn.execute(f"SELECT count(*) FROM papers WHERE id IN ({marks})", args).fetchone()[0] == 0
        citing = conn.execute(f"SELECT count(*) FROM citations WHERE citing_id IN ({marks})", args).fetchone()[0]
        cited = conn.execute(f"SELECT count(*) FROM citations WHERE cited_id IN ({marks})", args).fetchone()[0]
        assert (citing, cited) == (0, 0)
        assert conn.execute(f"SELECT count(*) FROM term_counts WHERE paper_id IN ({marks})", args).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM papers").fetchone()[0] == 36
        assert conn.execute("SELECT count(*) FROM citations WHERE cited_id = 'outside/0001'").fetchone()[0] == 0
    finally:
        conn.close()


def test_without_the_protocol_the_query_paper_would_come_first(citation_files, tmp_path):
    corpus, queries = citation_files
    report = run_eval(
        corpus, queries, tmp_path / "out", cache_dir=tmp_path / "cache", protocol="judged", modes=["bm25"]
    )
    assert report.protocol["query_papers_removed"] == 0
    rankings = trec_rankings(tmp_path / "out" / "run.bm25.trec")
    assert all(ranking[0] == qid for qid, ranking in rankings.items())  # what the protocol prevents


def test_graph_tables(citation_run):
    report, _ = citation_run
    assert [row["hop"] for row in report.by_hop] == [0, 1, 2]
    assert report.by_hop[0]["candidates_mean"] == 10.0
    reach = [row["reach_pooled"] for row in report.by_hop]
    assert reach == sorted(reach)  # more hops never reach fewer relevant papers
    buckets = report.by_seed_quality
    assert [b["bucket"] for b in buckets] == ["0", "1-3", "4-7", "8+"]
    assert sum(b["queries"] for b in buckets) == 4
    for b in buckets:
        for g in b["with_graph"]:
            for k in (10, 50):
                if b["queries"]:
                    assert g[f"lift@{k}"] == pytest.approx(g[f"recall@{k}"] - b["bm25"][f"recall@{k}"])
                else:
                    assert g[f"lift@{k}"] is None


def test_outputs_are_written(citation_run):
    report, base = citation_run
    out = base / "out"
    assert (out / "recall_at_k.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text()
    assert "## Recall@K, pooled" in md and "## Graph-RAG: by hop" in md and "## Timing" in md
    data = json.loads((out / "report.json").read_text())
    assert set(data["modes"]) == {"bm25", "blend-1hop", "blend-2hop"}
    assert set(data["modes"]["bm25"]["pooled_recall"]) == {f"@{k}" for k in CUTOFFS}
    assert data["inputs"]["corpus"]["file"].endswith("/papers.jsonl") and len(data["inputs"]["corpus"]["sha256"]) == 64
    assert str(base) not in json.dumps(data)  # no absolute path of this machine


def test_judged_queries_remove_nothing(tmp_path):
    records = corpus_records()
    # qid "t0p00" is a paper id, but its text is not that paper's: a judged query, as CACM's "1" is.
    queries = [
        {"qid": "t0p00", "query": "protein folding energy", "relevant": [pid(3, 2), pid(3, 4)]},
        {"qid": "q2", "query": "random walk", "relevant": [pid(2, 1)]},
    ]
    corpus = write_jsonl(tmp_path / "papers.jsonl", records)
    qfile = write_jsonl(tmp_path / "queries.jsonl", queries)
    report = run_eval(corpus, qfile, tmp_path / "out", cache_dir=tmp_path / "cache", modes=["bm25"])
    assert report.protocol["kind"] == "judged" and report.protocol["query_papers_removed"] == 0
    assert report.protocol["index_papers"] == len(records)
    with pytest.raises(InputError, match="--protocol judged"):
        run_eval(corpus, qfile, tmp_path / "out2", cache_dir=tmp_path / "cache", protocol="citation")


def test_mixed_query_file_is_refused(citation_files, tmp_path):
    corpus, queries = citation_files
    lines = queries.read_text().splitlines() + [json.dumps({"qid": "q9", "query": "plasma", "relevant": ["t0p01"]})]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="--protocol citation"):
        run_eval(corpus, mixed, tmp_path / "out", cache_dir=tmp_path / "cache")


def test_adding_a_mode_is_one_registry_entry(citation_files, tmp_path, monkeypatch):
    corpus, queries = citation_files
    monkeypatch.setitem(MODES, "blend-0hop", BlendMode("blend-0hop", "the seeds alone, blended", hops=0))
    report = run_eval(corpus, queries, tmp_path / "out", cache_dir=tmp_path / "cache", modes=["bm25", "blend-0hop"])
    row = report.modes["blend-0hop"]
    assert row["candidates_mean"] == 10.0 and row["ranking_length_mean"] == 10.0
    assert (tmp_path / "out" / "run.blend-0hop.trec").exists()


# -- the cache and determinism --------------------------------------------------------------------------------


def test_second_run_hits_the_cache_and_gives_the_same_report(citation_files, citation_run, tmp_path):
    corpus, queries = citation_files
    first, base = citation_run
    cached = only_index(base / "cache")
    stamp = cached.stat().st_mtime_ns
    second = run_eval(corpus, queries, tmp_path / "out", cache_dir=base / "cache", modes=LESSON_MODES)
    assert first.timing["index"]["status"] == "built" and second.timing["index"]["status"] == "hit"
    assert cached.stat().st_mtime_ns == stamp and only_index(base / "cache") == cached
    # everything but the timing is byte-identical, the run files too
    a = json.loads((base / "out" / "report.json").read_text())
    b = json.loads((tmp_path / "out" / "report.json").read_text())
    assert a.pop("timing") != {} and b.pop("timing") != {}
    assert json.dumps(a) == json.dumps(b)
    assert first.to_json(timing=False) == second.to_json(timing=False)
    for name in first.files["runs"].values():
        assert (base / "out" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_an_unusable_cache_entry_is_rebuilt(citation_files, citation_run, tmp_path, damage):
    corpus, queries = citation_files
    first, _ = citation_run
    cache = tmp_path / "cache"
    run_eval(corpus, queries, tmp_path / "a", cache_dir=cache, modes=LESSON_MODES)
    entry = only_index(cache)
    for sidecar in (entry.with_name(entry.name + "-wal"), entry.with_name(entry.name + "-shm")):
        sidecar.unlink(missing_ok=True)
    if damage == "garbage":
        entry.write_bytes(bytes(range(256)) * 40)  # not SQLite at all: a build refused to overwrite it
    else:
        entry.write_bytes(entry.read_bytes()[:4096])
    again = run_eval(corpus, queries, tmp_path / "b", cache_dir=cache, modes=LESSON_MODES)
    assert again.timing["index"]["status"] == "rebuilt"
    assert first.to_json(timing=False) == again.to_json(timing=False)
    assert only_index(cache) == entry


def test_a_fresh_build_gives_the_same_report(citation_files, citation_run, tmp_path):
    corpus, queries = citation_files
    first, _ = citation_run
    again = run_eval(corpus, queries, tmp_path / "out", cache_dir=tmp_path / "other-cache", modes=LESSON_MODES)
    assert again.timing["index"]["status"] == "built"
    assert first.to_json(timing=False) == again.to_json(timing=False)


def test_worker_processes_give_the_same_report_and_run_files(citation_files, citation_run, tmp_path, monkeypatch):
    from retrieval.eval import runner

    corpus, queries = citation_files
    first, base = citation_run
    monkeypatch.setattr(runner, "PARALLEL_MIN_QUERIES", 1)
    monkeypatch.setattr(runner, "CHUNK_QUERIES", 1)  # every query a task: the runs come back out of order
    shared = run_eval(corpus, queries, tmp_path / "out", cache_dir=base / "cache", modes=LESSON_MODES, jobs=2)
    assert shared.timing["jobs"] == 2 and first.timing["jobs"] == 1
    assert "by 2 worker processes" in (tmp_path / "out" / "report.md").read_text()
    assert first.to_json(timing=False) == shared.to_json(timing=False)
    for name in first.files["runs"].values():
        assert (base / "out" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()
    assert set(shared.timing["modes"]) == set(first.timing["modes"])


def test_another_query_file_gets_its_own_index(citation_files, tmp_path):
    corpus, queries = citation_files
    run_eval(corpus, queries, tmp_path / "a", cache_dir=tmp_path / "cache", modes=["bm25"])
    fewer = write_jsonl(tmp_path / "fewer.jsonl", [json.loads(line) for line in queries.read_text().splitlines()][:2])
    report = run_eval(corpus, fewer, tmp_path / "b", cache_dir=tmp_path / "cache", modes=["bm25"])
    assert report.protocol["query_papers_removed"] == 2 and len(list((tmp_path / "cache").glob("*.db"))) == 2


def test_limit_queries_keeps_the_first_and_the_same_index(citation_files, citation_run, tmp_path):
    corpus, queries = citation_files
    _, base = citation_run
    report = run_eval(corpus, queries, tmp_path / "out", cache_dir=base / "cache", limit_queries=2, modes=["bm25"])
    assert report.timing["index"]["status"] == "hit"
    assert report.protocol["queries_evaluated"] == 2 and report.protocol["query_papers_removed"] == 4
    assert list(trec_rankings(tmp_path / "out" / "run.bm25.trec")) == [pid(0, 9), pid(1, 9)]


# -- bad input ------------------------------------------------------------------------------------------------


def test_empty_query_file_is_refused(citation_files, tmp_path):
    corpus, _ = citation_files
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n")
    with pytest.raises(InputError, match="holds no queries"):
        run_eval(corpus, empty, tmp_path / "out", cache_dir=tmp_path / "cache")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("{not json", "invalid JSON"),
        ('["a list"]', "expected a JSON object"),
        ('{"qid": "q", "query": "x", "relevant": [], "qid": "r"}', "the key 'qid' is written twice in one object; "),
        ('{"query": "x", "relevant": []}', "missing 'qid'"),
        ('{"qid": "q", "relevant": []}', "no 'query'"),
        ('{"qid": 7, "query": "x", "relevant": []}', "'qid' must be a non-empty string, got 7: write it in quotes"),
        ('{"qid": "q", "query": ["x"], "relevant": []}', "'query' must be a string, got"),
        ('{"qid": "q", "query": "x", "relevant": "t0p01"}', "'relevant' must be a list"),
        ('{"qid": "t0p09", "query": "x", "relevant": []}', "repeats line 1"),
        # a lone surrogate crashed the process in the metrics' library (SIGSEGV, no message)
        ('{"qid": "a\\ud800", "query": "x", "relevant": ["t0p01"]}', r"query 'a\\\\ud800': 'qid' holds a lone"),
        ('{"qid": "q", "query": "x \\udc80", "relevant": []}', "query 'q': 'query' holds a lone surrogate"),
        ('{"qid": "q", "query": "x", "relevant": ["\\udfff"]}', "'relevant' holds a lone surrogate"),
    ],
)
def test_malformed_query_line_names_file_and_line(citation_files, tmp_path, line, reason):
    corpus, queries = citation_files
    bad = tmp_path / "bad.jsonl"
    bad.write_text(queries.read_text().splitlines()[0] + "\n" + line + "\n")
    with pytest.raises(InputError, match=reason) as info:
        run_eval(corpus, bad, tmp_path / "out", cache_dir=tmp_path / "cache")
    assert str(info.value).startswith(f"{bad}:2: ")


def test_queries_without_relevant_papers_are_skipped_and_counted(citation_files, tmp_path):
    corpus, queries = citation_files
    good = [json.loads(line) for line in queries.read_text().splitlines()]
    good[1]["relevant"] = ["nowhere/1", "nowhere/2"]  # no relevant id in the corpus
    good[2]["relevant"] = [pid(3, 9)]  # only another query paper, removed by the protocol
    good[3]["relevant"] = []  # nothing at all
    qfile = write_jsonl(tmp_path / "queries.jsonl", good)
    report = run_eval(corpus, qfile, tmp_path / "out", cache_dir=tmp_path / "cache", modes=["bm25"])
    p = report.protocol
    assert p["queries_evaluated"] == 1 and p["queries_skipped"] == 3
    reasons = {s["qid"]: s["reason"] for s in p["skipped"]}
    assert "none of its relevant ids is a paper of the corpus" in reasons[pid(1, 9)]
    assert "removed by the protocol" in reasons[pid(2, 9)]
    assert "empty relevant list" in reasons[pid(3, 9)]
    assert p["relevant_not_in_corpus_dropped"] == 3  # "not-in-corpus" of the first query and the two above
    assert "## Skipped queries (3)" in (tmp_path / "out" / "report.md").read_text()


def test_a_query_file_for_another_corpus_is_refused(citation_files, tmp_path):
    corpus, _ = citation_files
    other = write_jsonl(tmp_path / "other.jsonl", [{"qid": "x1", "query": "plasma", "relevant": ["elsewhere/1"]}])
    with pytest.raises(InputError, match="belongs to this corpus"):
        run_eval(corpus, other, tmp_path / "out", cache_dir=tmp_path / "cache")


def test_bad_arguments(citation_files, tmp_path):
    corpus, queries = citation_files
    with pytest.raises(ConfigError, match="unknown mode"):
        run_eval(corpus, queries, tmp_path / "out", modes=["bm25", "magic"], cache_dir=tmp_path / "cache")
    with pytest.raises(InputError, match="no corpus file"):
        run_eval(tmp_path / "nope.jsonl", queries, tmp_path / "out", cache_dir=tmp_path / "cache")
    with pytest.raises(InputError, match="no query file"):
        run_eval(corpus, tmp_path / "nope.jsonl", tmp_path / "out", cache_dir=tmp_path / "cache")
    with pytest.raises(RetrievalError):
        run_eval(corpus, queries, tmp_path / "out", cache_dir=tmp_path / "cache", protocol="sometimes")


# -- the subcommand -------------------------------------------------------------------------------------------


def test_eval_subcommand(citation_files, tmp_path, capsys):
    corpus, queries = citation_files
    argv = ["eval", "--corpus", str(corpus), "--queries", str(queries), "--out", str(tmp_path / "out")]
    argv += ["--cache-dir", str(tmp_path / "cache"), "--runs-dir", str(tmp_path / "runs"), "--modes", "bm25,blend-1hop"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "4 queries evaluated" in out and "blend-1hop" in out and "blend-2hop" not in out
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "qrels.trec",
        "run.blend-1hop.trec",
        "run.bm25.trec",
    ]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["recall_at_k.png", "report.json", "report.md"]
    # Again into the same folders with one mode: the other mode's run, of the earlier report, is not left there
    # beside the new qrels (it was, and no report listed it).
    # A run of the user's own in that folder, named as no mode is, stays (it was deleted with no word said).
    (tmp_path / "runs" / "run.mybaseline.trec").write_text("q1 Q0 p1 1 1 mine\n")
    assert main([*argv[:-1], "bm25"]) == 0
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == [
        "qrels.trec",
        "run.bm25.trec",
        "run.mybaseline.trec",
    ]
    assert (tmp_path / "runs" / "run.mybaseline.trec").read_text() == "q1 Q0 p1 1 1 mine\n"


@given(st.text(min_size=1))
def test_a_trec_id_is_one_column_and_decodes_to_the_id(text):
    written = trec_id(text)
    assert written.split() == [written]  # one column, whatever whitespace the id holds
    assert unquote(written, errors="strict") == text
    if "%" not in text and not any(ch.isspace() for ch in text):
        assert written == text


def test_trec_eval_with_c_on_the_written_files_gives_the_report(tmp_path):
    # A query with an empty ranking has no line in a run file: the qrels written beside the runs, measured with
    # trec_eval's -c (every qrels query counts), give the report's figures. A qid with a space keeps one column.
    records = corpus_records()
    queries = [
        {"qid": "q one", "query": "protein folding energy", "relevant": [pid(3, 2), pid(3, 4)]},
        {"qid": "q2", "query": "random walk", "relevant": [pid(2, 1), pid(0, 3)]},
        {"qid": "q%3", "query": "zebra xylophone", "relevant": [pid(1, 1)]},  # no word in the corpus: empty
    ]
    corpus = write_jsonl(tmp_path / "papers.jsonl", records)
    qfile = write_jsonl(tmp_path / "queries.jsonl", queries)
    run_eval(corpus, qfile, tmp_path / "out", cache_dir=tmp_path / "cache", modes=["bm25", "auto"])
    data = json.loads((tmp_path / "out" / "report.json").read_text())
    assert data["files"]["qrels"] == "qrels.trec"
    qrels: dict[str, dict[str, int]] = {}
    for line in (tmp_path / "out" / "qrels.trec").read_text().splitlines():
        qid, zero, doc, rel = line.split()  # four columns: the space in "q one" is encoded
        qrels.setdefault(qid, {})[doc] = int(rel)
    assert qrels == {
        "q%20one": {pid(3, 2): 1, pid(3, 4): 1},
        "q2": {pid(0, 3): 1, pid(2, 1): 1},
        "q%253": {pid(1, 1): 1},
    }
    for mode in ("bm25", "auto"):
        run: dict[str, dict[str, float]] = {}
        for line in (tmp_path / "out" / f"run.{mode}.trec").read_text().splitlines():
            qid, _, doc, _rank, score, _tag = line.split()
            run.setdefault(qid, {})[doc] = float(score)
        assert "q%253" not in run and set(run) == {"q%20one", "q2"}
        per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recip_rank"}).evaluate(run)
        # trec_eval -c: a qrels query the run does not name counts as 0
        ndcg = sum(per_query.get(q, {}).get("ndcg_cut_10", 0.0) for q in qrels) / len(qrels)
        mrr = sum(per_query.get(q, {}).get("recip_rank", 0.0) for q in qrels) / len(qrels)
        assert data["modes"][mode]["ndcg@10"] == pytest.approx(ndcg, abs=5e-7), mode  # the report keeps 6 decimals
        assert data["modes"][mode]["mrr"] == pytest.approx(mrr, abs=5e-7), mode
        assert 0 < mrr < 1


def test_the_corpus_format_can_be_given_as_build_takes_it(citation_files, citation_run, tmp_path, capsys):
    corpus, queries = citation_files
    first, _ = citation_run
    given = run_eval(
        corpus, queries, tmp_path / "out", cache_dir=tmp_path / "cache", modes=LESSON_MODES, format="jsonl"
    )
    assert given.modes == first.modes and given.inputs["corpus"]["format"] == "jsonl"
    with pytest.raises(InputError, match="looks like the project's own format: give --format jsonl"):
        run_eval(corpus, queries, tmp_path / "out2", cache_dir=tmp_path / "cache", modes=["bm25"], format="s2")
    argv = ["eval", "--corpus", str(corpus), "--format", "openalex", "--queries", str(queries)]
    assert main(argv + ["--out", str(tmp_path / "out3"), "--cache-dir", str(tmp_path / "cache")]) == 1
    assert "give --format jsonl" in capsys.readouterr().err  # an option eval has
    train_argv = ["train", "--corpus", str(corpus), "--format", "s2", "--queries", str(queries)]
    assert main(train_argv + ["--out", str(tmp_path / "m.json"), "--cache-dir", str(tmp_path / "cache")]) == 1
    assert "give --format jsonl" in capsys.readouterr().err and not (tmp_path / "m.json").exists()


def test_progress_bar_only_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert ProgressBar.for_stream(io.StringIO()) is None
    stream = Terminal()
    bar = ProgressBar.for_stream(stream)
    bar("index", 5, 10)
    bar("queries", 1, 4)
    bar.close()
    text = stream.getvalue()
    assert "5/10 building the evaluation index" in text and "1/4 queries" in text and text.endswith("\n")


def test_eval_subcommand_rejects_bad_options(capsys):
    base = ["eval", "--corpus", "c", "--queries", "q", "--out", "o"]
    for extra in (["--modes", "bm25,magic"], ["--limit-queries", "0"], ["--protocol", "maybe"]):
        with pytest.raises(SystemExit) as info:
            main(base + extra)
        assert info.value.code == 2
    assert "choose from bm25" in capsys.readouterr().err


# -- the real CACM collection ---------------------------------------------------------------------------------


def test_cacm_dev_set(tmp_path):
    folder = SHARED_DATA / "cacm"
    if not (folder / "papers.jsonl").exists():
        pytest.skip(f"the shared CACM data is not here ({folder}); it lives in ../shared/data beside the repo")
    report = run_eval(folder / "papers.jsonl", folder / "queries-dev.jsonl", tmp_path / "out", cache_dir=tmp_path)
    p = report.protocol
    assert p["kind"] == "judged" and p["query_papers_removed"] == 0 and p["index_papers"] == 3204
    assert p["queries_evaluated"] == 26 and p["queries_skipped"] == 0
    assert report.inputs["corpus"]["file"] == "cacm/papers.jsonl"
    bm25 = report.modes["bm25"]
    assert 0.2 < bm25["ndcg@10"] < 0.6 and 0.0 < bm25["pooled_recall"]["@50"] <= bm25["pooled_recall"]["@100"]
    assert report.modes["blend-1hop"]["candidates_mean"] < report.modes["blend-2hop"]["candidates_mean"]


def test_blend_modes_sharing_a_memo_rank_as_they_do_alone(citation_files, citation_run):
    # The candidates' BM25 scores are computed once per query and shared by its modes: the results are the same
    # as without the memo, and a mode that reuses scores is charged for them.
    from retrieval.eval.modes import MODES as REGISTRY
    from retrieval.eval.records import LexicalPass
    from retrieval.search.memo import QueryMemo
    from retrieval.search.query import Query

    _, base = citation_run
    corpus, queries = citation_files
    text = json.loads(queries.read_text().splitlines()[0])["query"]
    with RetrievalClient(only_index(base / "cache")) as client:
        bm25 = client.lexical.search(text, 10)  # short, so the graph's candidates need scoring
        alone = LexicalPass(Query.parse(text), bm25, len(bm25))
        shared = LexicalPass(Query.parse(text), bm25, len(bm25), memo=QueryMemo())
        charges = []
        for name in ("blend-2hop", "blend-1hop", "policy", "rel-all"):
            mode = REGISTRY[name]
            expected = mode.run(client, alone, client.config, 100)
            got = mode.run(client, shared, client.config, 100)
            assert (got.ranking, got.candidates, got.distances) == (
                expected.ranking,
                expected.candidates,
                expected.distances,
            )
            charges.append(shared.memo.take_charge())
    assert charges[0] == 0.0 and charges[1] > 0  # one hop reaches a subset of what two hops reached


def test_the_policy_mode_is_the_policy_and_auto_is_the_default_search(citation_files, citation_run):
    # "policy" stays the hand-weighted policy now that the default ranking is auto; "auto" ranks as a default
    # search does (under the shipped model's held-out fold, which for a corpus it was not trained on is the model)
    from retrieval.eval.modes import MODES as REGISTRY
    from retrieval.eval.records import LexicalPass
    from retrieval.search.query import Query

    _, base = citation_run
    _, queries = citation_files
    text = json.loads(queries.read_text().splitlines()[0])["query"]
    with RetrievalClient(only_index(base / "cache")) as client:
        bm25 = client.lexical.search(text, 100)
        lexical = LexicalPass(Query.parse(text), bm25, len(bm25))
        policy = client.search(text, RetrievalConfig(ranking="expansion"), limit=100)
        default = client.search(text, limit=100)
        assert REGISTRY["policy"].run(client, lexical, client.config, 100).ranking == [
            r.paper.id for r in policy.ranked
        ]
        assert REGISTRY["auto"].run(client, lexical, client.config, 100).ranking == [r.paper.id for r in default.ranked]
    assert default.expansion["auto"]["ranking"] in ("learned", "expansion")


def test_the_analysis_builds_an_index_of_its_own_and_the_report_says_which(citation_files, tmp_path):
    """``--stem`` and ``--stopwords`` analyse the evaluation index as ``retrieval build`` would: a cache entry of
    their own (the plain one is not reused), recorded in the report, and BM25 ranks as on such a build."""
    corpus, queries = citation_files
    cache = tmp_path / "cache"
    plain = run_eval(corpus, queries, tmp_path / "plain", cache_dir=cache, modes=["bm25"])
    stemmed = run_eval(corpus, queries, tmp_path / "stemmed", cache_dir=cache, modes=["bm25"], stem="english",
                       stopwords="english")  # fmt: skip
    assert plain.inputs["analysis"] == {"stemmer": "none", "stopwords": "none"}
    assert stemmed.inputs["analysis"] == {"stemmer": "english", "stopwords": "english"}
    assert "- Analysis: stemmer `english`, stop words `english`" in (tmp_path / "stemmed" / "report.md").read_text()
    built = sorted(cache.glob("*.db"))
    assert len(built) == 2
    infos = []
    for path in built:
        with sqlite3.connect(path) as conn:
            infos.append(dict(conn.execute("SELECT key, value FROM index_info WHERE key IN ('stemmer', 'stopwords')")))
    assert sorted(i["stemmer"] for i in infos) == ["", "english"]
    with sqlite3.connect(built[0]) as a, sqlite3.connect(built[1]) as b:
        terms = [set(t for (t,) in c.execute("SELECT term FROM doc_freq")) for c in (a, b)]
    assert "the" in terms[0] ^ terms[1]  # the stop word is a term of the plain index only
    # BM25's candidates: the papers holding a query term, as the index analyses text ("plasmas" is "plasma")
    short = [{"qid": f"q{t}", "query": f"{words.split()[-1]}s of the", "relevant": [pid(t, 0)]}
             for t, words in enumerate(TOPICS)]  # fmt: skip
    judged = run_eval(corpus, write_jsonl(tmp_path / "short.jsonl", short), tmp_path / "short", cache_dir=cache,
                      modes=["bm25"], stem="english", stopwords="english")  # fmt: skip
    texts = [set(analysed(f"{r['title']} {r['abstract']}", "english", "english")) for r in corpus_records()]
    matching = [sum(1 for words in texts if words & set(analysed(q["query"], "english", "english"))) for q in short]
    assert min(matching) > 0
    assert judged.modes["bm25"]["candidates_mean"] == pytest.approx(sum(matching) / len(matching))
    with pytest.raises(ConfigError, match="no stemmer 'klingon'"):
        run_eval(corpus, queries, tmp_path / "x", cache_dir=cache, modes=["bm25"], stem="klingon")
    argv = ["eval", "--corpus", str(corpus), "--queries", str(queries), "--out", str(tmp_path / "cli"),
            "--cache-dir", str(cache), "--modes", "bm25", "--stem", "english", "--stopwords", "english"]  # fmt: skip
    assert main(argv) == 0
    assert json.loads((tmp_path / "cli" / "report.json").read_text())["inputs"]["analysis"]["stemmer"] == "english"
    assert len(list(cache.glob("*.db"))) == 3  # the CLI's run found the stemmed entry (and the judged set its own)
