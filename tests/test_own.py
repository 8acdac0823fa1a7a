"""Fitting the learned ranking on an index's own citations (``retrieval train --own``, ``retrieval.eval.own``):
which papers become queries (against a plain count of the records), that each is left out of its own search
(its candidates and the citation counts its references get), the model file and the search that uses it, the
evaluation modes fitted on the evaluation index, and the errors."""

from __future__ import annotations

import hashlib
import io
import json
import math
import random
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from retrieval import RetrievalClient, RetrievalConfig
from retrieval.errors import ConfigError, InputError
from retrieval.eval.learned_modes import own_model_path
from retrieval.eval.own import PARALLEL_MIN_PAPERS, extract_own, own_queries, sample_key, train_own
from retrieval.eval.train import NO_FOLDS
from retrieval.interfaces.cli import main
from retrieval.search.learned import BASE_FEATURES, SHIPPED_MODEL, beside, load_cached
from retrieval.store.sqlite.build import build_index
from tests.helpers import BACKENDS, index_on, write_jsonl

TOPICS = (
    "quark gluon plasma viscosity hydrodynamics",
    "neural network pruning sparsity lottery",
    "citation graph random walk ranking",
    "protein folding energy landscape funnel",
    "black hole entropy microstate counting",
    "sparse attention transformer memory routing",
    "galaxy cluster lensing dark matter",
    "compiler register allocation graph colouring",
)
PER_TOPIC = 20


def records(seed: int = 3) -> list[dict]:
    """Eight topics of twenty papers; from the sixth on, each cites three to six earlier papers of its topic (and
    some an id that is no paper of the corpus), the texts sharing their topic's words and a few of their own."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(300)]
    out = []
    for t, words in enumerate(TOPICS):
        for i in range(PER_TOPIC):
            refs = []
            if i >= 5:
                refs = [f"t{t}p{j:02d}" for j in sorted(rng.sample(range(i), rng.randint(3, min(6, i))))]
                if i % 7 == 0:
                    refs.append(f"absent{t}{i}")  # a reference outside the corpus: never a relevant paper
            own = " ".join(rng.sample(vocab, 6))
            cited = " ".join(words.split()[: 2 + i % 3])
            out.append({
                "id": f"t{t}p{i:02d}", "title": f"{cited} {own.split()[0]} study {i}",
                "abstract": f"We study {words} and {own}. {cited} again with {rng.choice(vocab)}.",
                "year": 1990 + i, "authors": [f"Author {t}{i % 5}"], "references": refs,
            })  # fmt: skip
    return out


def in_corpus_references(recs: list[dict]) -> dict[str, set[str]]:
    ids = {r["id"] for r in recs}
    return {r["id"]: {ref for ref in r["references"] if ref in ids} for r in recs}


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("own")
    recs = records()
    corpus = write_jsonl(base / "papers.jsonl", recs)
    from retrieval import read_jsonl

    db = base / "index.db"
    build_index((p for _, p in read_jsonl(corpus)), db, source="generated")
    return {"records": recs, "corpus": corpus, "db": db, "base": base}


@pytest.fixture(scope="module", params=BACKENDS)
def either(request, files):
    """The generated corpus's index on each backend: a file, or a database on a PostgreSQL server."""
    if request.param == "sqlite":
        return files["db"]
    return index_on(request, "postgresql", _papers(files["records"]), "own")


def test_the_queries_are_the_papers_citing_enough_of_the_index_in_sha256_order(files, either):
    refs = in_corpus_references(files["records"])
    for least, sample in ((3, 1000), (5, 1000), (3, 25)):
        expected = sorted((pid for pid, r in refs.items() if len(r) >= least), key=sample_key)[:sample]
        with RetrievalClient(either) as client:
            got = own_queries(client, sample, least)
        assert [q.paper_id for q in got] == expected and expected
        by_id = {r["id"]: r for r in files["records"]}
        for q in got:
            assert q.references == refs[q.paper_id]  # the reference outside the corpus is not one
            assert (q.title, q.abstract) == (by_id[q.paper_id]["title"], by_id[q.paper_id]["abstract"])
            assert q.forms() == [("abstract", f"{q.title}. {q.abstract}"), ("title", q.title)]
    assert sample_key("t0p05") == hashlib.sha256(b"t0p05").hexdigest()


def test_each_query_paper_is_left_out_of_its_own_search(files, either):
    recs = files["records"]
    refs = in_corpus_references(recs)
    cited_by: dict[str, int] = {}
    for r in refs.values():
        for ref in r:
            cited_by[ref] = cited_by.get(ref, 0) + 1
    with RetrievalClient(either) as client:
        queries = own_queries(client, 30, 3)
        abstracts, titles = extract_own(client, queries)
    assert [q.qid for q in abstracts.queries] == [q.paper_id for q in queries] == [q.qid for q in titles.queries]
    column = BASE_FEATURES.index("in_degree")
    checked = 0
    for data in (*abstracts.queries, *titles.queries):
        assert data.qid not in data.ids  # never its own candidate
        assert data.n_relevant == len(refs[data.qid])
        assert [pid for pid, r in zip(data.ids, data.relevant, strict=True) if r] == sorted(
            set(data.ids) & refs[data.qid]
        )
        for pid, row in zip(data.ids, data.x, strict=True):
            # the citations its paper makes are not counted: each reference is cited once less than in the index
            less = 1 if pid in refs[data.qid] else 0
            assert row[column] == pytest.approx(math.log1p(cited_by.get(pid, 0) - less), abs=1e-12)
            checked += less
    assert checked > 50


def test_the_searches_shared_by_worker_processes_give_the_same_sets(files, either):
    """Two worker processes, each on its own connection, extract what one process does, in the same order."""
    with RetrievalClient(either) as client:
        queries = own_queries(client, 60, 3)
        assert len(queries) >= PARALLEL_MIN_PAPERS
        alone = extract_own(client, queries)
        shared = extract_own(client, queries, jobs=2)
    for one, two in zip(alone, shared, strict=True):
        assert [q.qid for q in two.queries] == [q.qid for q in one.queries] == [q.paper_id for q in queries]
        for a, b in zip(one.queries, two.queries, strict=True):
            assert (a.ids, a.relevant.tolist(), a.n_relevant) == (b.ids, b.relevant.tolist(), b.n_relevant)
            assert a.x.tobytes() == b.x.tobytes()


def test_the_model_fitted_by_worker_processes_is_the_same_file(files, tmp_path):
    """Searches and fits shared by two processes write the bytes one process does."""
    train_own(files["db"], tmp_path / "one.json", sample=60, rounds=2, jobs=1)
    train_own(files["db"], tmp_path / "two.json", sample=60, rounds=2, jobs=2)
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "two.json").read_bytes()
    assert len(json.loads((tmp_path / "two.json").read_text())["cross_validation"]["folds"]) == 5


def test_train_own_writes_a_model_the_next_search_uses_and_the_same_bytes_twice(files, capsys):
    db = files["db"]
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["train", "--own", "--db", str(db), "--sample", "40", "--rounds", "2", "--name", "mine"])
    assert code == 0, capsys.readouterr().err
    text = out.getvalue()
    assert "fitted on 40 papers of" in text and "cross-validation (5-fold over queries)" in text
    written = beside(db)
    data = json.loads(written.read_text(encoding="utf-8"))
    assert data["name"] == "mine" and len(data["cross_validation"]["folds"]) == 5
    # over the candidates a default search ranks: the shipped model's (references and citing papers)
    assert data["candidates"] == load_cached(SHIPPED_MODEL).candidates
    assert data["candidates"]["relations"] == ["references", "citing"]
    assert data["own_citations"]["papers_sampled"] == 40 and data["own_citations"]["min_references"] == 3
    assert [s["name"] for s in data["training_sets"]] == ["own-abstracts", "own-titles"]
    assert all(s["queries_used"] == 40 for s in data["training_sets"])
    sha = hashlib.sha256(written.read_bytes()).hexdigest()
    assert sha[:12] in text
    with RetrievalClient(db) as client:
        result = client.search(TOPICS[2], RetrievalConfig(ranking="learned"))
        default = client.search(TOPICS[2])  # the default ranking picks the learned model on a cited corpus
    assert result.expansion["model"]["sha256"] == sha
    assert all(e.why().startswith("mine: ") for e in result.ranked)
    assert default.expansion["auto"]["ranking"] == "learned" and default.expansion["model"]["sha256"] == sha
    again = files["base"] / "again.json"
    summary = train_own(db, again, name="mine", sample=40, rounds=2)
    assert summary["sha256"] == sha and again.read_bytes() == written.read_bytes()


def test_train_own_refuses_what_it_cannot_use(files, capsys, tmp_path):
    db = str(files["db"])
    for argv, message in (
        (["--own", "--db", db, "--corpus", str(files["corpus"])], "--corpus: --own fits on the --db index as it is"),
        (["--own", "--db", db, "--stem", "english"], "--stem: --own fits on the --db index as it is"),
        (["--corpus", str(files["corpus"]), "--queries", "q.jsonl", "--sample", "40"], "--sample goes with --own"),
        (["--db", db], "give judged queries (--corpus FILE --queries FILE"),
        (["--own", "--db", db, "--sample", "5"], "--sample 5: sample at least 20 papers"),
        (["--own", "--db", db, "--jobs", "0"], "--jobs"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main(["train", *argv])
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err
    missing = tmp_path / "missing.db"
    assert main(["train", "--own", "--db", str(missing)]) == 1
    assert f"no index at {missing}: build it first" in capsys.readouterr().err
    assert not beside(missing).exists()
    with pytest.raises(ConfigError, match="sample at least 20 papers"):
        train_own(files["db"], tmp_path / "m.json", sample=5)
    # an index with too few citing papers says how many it has and what to do
    thin = tmp_path / "thin.db"
    recs = [dict(r, references=r["references"][:2]) for r in files["records"]]
    build_index(iter(_papers(recs)), thin, source="generated")
    with pytest.raises(InputError, match="has 0 papers citing at least 3 of its papers: .* --min-references 1"):
        train_own(thin, tmp_path / "m.json")
    assert main(["train", "--own", "--db", str(thin)]) == 1
    assert "has 0 papers citing at least 3" in capsys.readouterr().err
    assert not beside(thin).exists() and not (tmp_path / "m.json").exists()
    lone = [dict(r, references=r["references"] if r["id"] == "t0p19" else []) for r in files["records"]]
    lone_db = tmp_path / "lone.db"
    build_index(iter(_papers(lone)), lone_db, source="generated")
    with pytest.raises(
        InputError, match=r"has 1 paper citing at least 3 of its papers: .*\(try --min-references 1, or"
    ):
        train_own(lone_db, tmp_path / "m.json")
    with pytest.raises(InputError, match=r"has 1 paper citing at least 1 of its papers: .*\(try training on judged"):
        train_own(lone_db, tmp_path / "m.json", min_references=1)


def _papers(recs: list[dict]):
    from retrieval.corpus.paper import Paper

    return [Paper(**r) for r in recs]


def test_the_eval_modes_fit_on_the_evaluation_index_once(files, tmp_path):
    from retrieval.eval.runner import run_eval

    recs = [r for r in files["records"] if r["id"] < "t4"]  # four topics: a fit of a few seconds
    refs = in_corpus_references(recs)
    asked = [r for r in recs if len(refs[r["id"]]) >= 4][:12]
    corpus = write_jsonl(tmp_path / "papers.jsonl", recs)
    qfile = write_jsonl(tmp_path / "queries.jsonl", [
        {"qid": r["id"], "query": f"{r['title']}. {r['abstract']}", "relevant": sorted(refs[r["id"]])} for r in asked
    ])  # fmt: skip
    cache = tmp_path / "cache"
    out = tmp_path / "report"
    report = run_eval(corpus, qfile, out, modes=["bm25", "learned-own", "auto-own"], cache_dir=cache, jobs=1)
    assert {"learned-own", "auto-own"} <= set(report.modes)
    (index,) = [p for p in cache.glob("*.db")]
    model_file = own_model_path(index)
    model = load_cached(model_file)
    assert model.name == "own" and json.loads(model_file.read_text())["own_citations"]["papers_sampled"] >= 20
    # the query papers are not in the evaluation index, so none was asked in the training
    with RetrievalClient(index) as client:
        trained = {q.paper_id for q in own_queries(client)}
    assert trained and not trained & {r["id"] for r in asked}
    # fitted without the folds (the evaluation is the held-out measurement), to the weights a full fit gives
    fitted = json.loads(model_file.read_text())
    assert fitted["cross_validation"] == {"not_run": NO_FOLDS}
    full = train_own(index, tmp_path / "full.json", name="own")
    assert len(full["cross_validation"]["folds"]) == 5
    assert fitted["weights"] == json.loads((tmp_path / "full.json").read_text())["weights"]
    # the fit is timed apart from the queries, and the report says so
    assert 0 < report.timing["prepare_seconds"] < report.timing["total_seconds"] - report.timing["queries_seconds"]
    assert "models fitted on the index in" in (out / "report.md").read_text(encoding="utf-8")
    stamp = model_file.stat().st_mtime_ns
    again = run_eval(corpus, qfile, out, modes=["learned-own"], cache_dir=cache, jobs=1)
    assert model_file.stat().st_mtime_ns == stamp  # kept, not fitted again
    assert again.timing["prepare_seconds"] < 0.05
    assert "models fitted on the index in" not in (out / "report.md").read_text(encoding="utf-8")


def test_the_fit_is_the_same_on_either_backend(files, either, tmp_path):
    """The model fitted on the PostgreSQL copy of the index is the SQLite one's, weight for weight (and the CLI
    takes a server's URL with --out)."""
    reference = train_own(files["db"], tmp_path / "sqlite.json", sample=30, rounds=1)
    out = tmp_path / "either.json"
    with redirect_stdout(io.StringIO()):
        assert main(["train", "--own", "--db", str(either), "--out", str(out), "--sample", "30", "--rounds", "1"]) == 0
    fitted = json.loads(out.read_text(encoding="utf-8"))
    assert fitted["weights"] == pytest.approx(list(reference["weights"].values()), abs=1e-12)
    assert fitted["cross_validation"]["test_ndcg@10_mean"] == reference["cross_validation"]["test_ndcg@10_mean"]


REPO = Path(__file__).resolve().parents[1]
OWN_SETS = {"hep-th abstracts": "hepth", "hep-th titles": "hepth-titles", "ml-arxiv abstracts": "ml-arxiv",
            "ml-arxiv titles": "ml-arxiv-titles", "CACM": "cacm"}  # fmt: skip


def test_the_own_report_quotes_the_committed_reports_and_the_default_stays_above_bm25():
    """docs/eval/own.md's table is the committed reports' figures, and under an own model the default ranking is
    above BM25 on every development set."""
    text = (REPO / "docs" / "eval" / "own.md").read_text(encoding="utf-8")
    for label, name in OWN_SETS.items():
        report = json.loads((REPO / "docs" / "eval" / "own" / name / "report.json").read_text(encoding="utf-8"))
        ndcg = {mode: row["ndcg@10"] for mode, row in report["modes"].items()}
        (row,) = [line for line in text.splitlines() if line.startswith(f"| {label} |")]
        quoted = [float(cell) for cell in row.strip("|").split("|")[1:5]]
        assert quoted == [round(ndcg[m], 4) for m in ("bm25", "auto", "learned-own", "auto-own")], label
        assert ndcg["auto-own"] > ndcg["bm25"], label
