"""The learned ranking: the shipped model file (loads, is the one docs/eval/learned.md reports, ranks
deterministically), scores against a plain-Python dot product, coordinate ascent, and ``retrieval train`` end to
end on a generated corpus, whose model the next search on that index uses."""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retrieval import RetrievalClient, RetrievalConfig
from retrieval.errors import ConfigError, InputError
from retrieval.eval.learned_modes import held_out_model
from retrieval.eval.train import (
    QueryData,
    coordinate_ascent,
    cross_validate,
    fit,
    mean_ndcg,
    ndcg,
    ndcg_rows,
    with_derived,
)
from retrieval.interfaces.cli import main
from retrieval.search.learned import (
    BASE_FEATURES,
    CANDIDATE_FEATURES,
    DERIVED_FEATURES,
    FEATURES,
    MODEL_VERSION,
    SHIPPED_MODEL,
    RankerModel,
    beside,
)
from retrieval.store.sqlite.build import build_index
from tests.helpers import write_jsonl

REPO = Path(__file__).resolve().parents[1]
TOPICS = (
    "quark gluon plasma viscosity",
    "neural network pruning sparsity",
    "citation graph random walk",
    "protein folding energy landscape",
    "black hole entropy counting",
    "sparse attention transformer memory",
)
PER_TOPIC = 12


def pid(topic: int, i: int) -> str:
    return f"t{topic}p{i:02d}"


def records() -> list[dict]:
    """Six topics of twelve papers; paper 11 of each (the query paper) cites papers 0-6 of its topic; papers 2-10
    cite papers 0 and 1; the texts share their topic's words, so BM25 alone cannot tell the cited ones apart."""
    out = []
    for t, words in enumerate(TOPICS):
        for i in range(PER_TOPIC):
            refs = [pid(t, 0), pid(t, 1)] if 2 <= i <= 10 else []
            if i == PER_TOPIC - 1:
                refs = [pid(t, j) for j in range(7)]
            out.append({
                "id": pid(t, i), "title": f"{words.title()} note {i}",
                "abstract": f"We study {words} with method m{t}x{i % 4}. {words.split()[0]} again.",
                "year": 1990 + i, "authors": [f"Author {t}{i}"], "references": refs,
            })  # fmt: skip
    return out


def queries(recs: list[dict]) -> list[dict]:
    by_id = {r["id"]: r for r in recs}
    out = []
    for t in range(len(TOPICS)):
        paper = by_id[pid(t, PER_TOPIC - 1)]
        out.append({"qid": paper["id"], "query": f"{paper['title']}. {paper['abstract']}",
                    "relevant": paper["references"]})  # fmt: skip
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("learned")
    recs = records()
    corpus = write_jsonl(base / "papers.jsonl", recs)
    qfile = write_jsonl(base / "queries.jsonl", queries(recs))
    from retrieval import read_jsonl

    db = base / "index.db"
    build_index((p for _, p in read_jsonl(corpus)), db, source="generated")
    return {"corpus": corpus, "queries": qfile, "db": db, "cache": base / "cache", "base": base}


# -- the shipped model -----------------------------------------------------------------------------------------


SETS = ("hepth", "hepth-titles", "ml-arxiv", "ml-arxiv-titles", "cacm")


def test_the_shipped_model_loads_and_is_the_one_the_report_used():
    data = json.loads(SHIPPED_MODEL.read_text(encoding="utf-8"))
    model = RankerModel.load(SHIPPED_MODEL)
    assert data["format"] == "retrieval-ranker" and data["version"] == MODEL_VERSION == 1
    assert model.name == "ranker-v3" and SHIPPED_MODEL.name == "ranker-v3.json"
    assert model.features == FEATURES  # the candidate features, the vote's, and the query-level products
    assert model.uses_vote and model.candidates["relations"] == ["references", "citing"]
    assert "run from each start" in data["fitted"]["method"]
    assert set(model.features) <= set(FEATURES) and len(model.weights) == len(model.features)
    assert model.sha256 == hashlib.sha256(SHIPPED_MODEL.read_bytes()).hexdigest()
    trained = {s["name"]: s for s in data["training_sets"]}
    assert set(trained) == set(SETS)
    for entry in trained.values():
        assert re.fullmatch(r"[0-9a-f]{64}", entry["corpus"]["sha256"])
        assert re.fullmatch(r"[0-9a-f]{64}", entry["queries"]["sha256"])
    cv = data["cross_validation"]
    assert cv["kind"] == "hold-one-corpus-out"
    assert [f["held_out"] for f in cv["folds"]] == ["hepth+hepth-titles", "ml-arxiv+ml-arxiv-titles", "cacm"]
    # docs/eval/learned.md names the sha256 of the model file its figures were measured with
    report = (REPO / "docs" / "eval" / "learned.md").read_text(encoding="utf-8")
    assert f"sha256 `{model.sha256}`" in report


def _held_out_figure(name: str) -> float:
    for fold in RankerModel.load(SHIPPED_MODEL).meta["cross_validation"]["folds"]:
        if name in fold["held_out"].split("+"):
            return fold.get("test_ndcg@10_per_set", {}).get(name, fold["test_ndcg@10"])
    raise AssertionError(f"no fold held {name} out")


def test_the_shipped_folds_are_the_reported_held_out_figures_and_the_default_never_loses_to_bm25():
    # each set's held-out nDCG@10 is the committed report's learned-cv row; the default (auto) is at or above
    # BM25 on every set
    for name in SETS:
        report = json.loads((REPO / "docs" / "eval" / "learned" / name / "report.json").read_text(encoding="utf-8"))
        modes = report["modes"]
        assert _held_out_figure(name) == pytest.approx(modes["learned-cv"]["ndcg@10"], abs=1e-4)
        assert modes["auto"]["ndcg@10"] >= modes["bm25"]["ndcg@10"]


def test_the_previous_model_ranker_v2_still_loads_and_ranks(files):
    v2 = RankerModel.load(SHIPPED_MODEL.with_name("ranker-v2.json"))
    assert v2.name == "ranker-v2" and not v2.uses_vote and "coupling" in v2.candidates["relations"]
    with RetrievalClient(files["db"]) as client:
        result = client.search(TOPICS[1], RetrievalConfig(ranking="learned", model=v2))
    assert result.ranked and "vote" not in result.expansion
    assert all(set(e.contributions) == set(v2.features) for e in result.ranked)


def test_the_previous_model_ranker_v1_still_loads_and_ranks(files):
    v1 = SHIPPED_MODEL.with_name("ranker-v1.json")
    model = RankerModel.load(v1)
    assert model.name == "ranker-v1" and model.features == CANDIDATE_FEATURES
    with RetrievalClient(files["db"]) as client:
        result = client.search(TOPICS[1], RetrievalConfig(ranking="learned", model=str(v1)))
    assert result.ranked and all(set(e.contributions) == set(CANDIDATE_FEATURES) for e in result.ranked)
    assert "vote" not in result.expansion  # a model without the vote's features does not pay for it
    for entry in result.ranked:
        assert sum(entry.contributions.values()) == pytest.approx(entry.final_score, abs=1e-12)


def test_the_shipped_model_is_packaged():
    tomllib = pytest.importorskip("tomllib")
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert "models/*.json" in setuptools["package-data"]["retrieval"]
    assert SHIPPED_MODEL.parent.name == "models" and SHIPPED_MODEL.parent.parent.name == "retrieval"


def test_a_held_out_fold_is_found_by_its_corpus_sha():
    model = RankerModel.load(SHIPPED_MODEL)
    fold = model.meta["cross_validation"]["folds"][0]
    cv = held_out_model(model, fold["held_out_inputs"]["corpus"]["sha256"])
    assert list(cv.weights) == fold["weights"] and cv.name.endswith(fold["held_out"])
    assert held_out_model(model, "0" * 64) is model  # a corpus it was not trained on: held out already
    assert held_out_model(model, None) is model
    broken = RankerModel(model.features, model.weights, model.scales, name="broken",
                         meta={"training_sets": model.meta["training_sets"]})  # fmt: skip
    with pytest.raises(ConfigError, match="no fold that held it out"):
        held_out_model(broken, fold["held_out_inputs"]["corpus"]["sha256"])


# -- ranking -------------------------------------------------------------------------------------------------


def plain_score(data: dict, features: dict) -> float:
    """The model file's score of one candidate, from the JSON alone: sum of weight * feature / scale."""
    return sum(w * features[f] / s for f, w, s in zip(data["features"], data["weights"], data["scales"], strict=True))


def test_scores_are_the_dot_product_and_the_ranking_is_deterministic(files):
    data = json.loads(SHIPPED_MODEL.read_text(encoding="utf-8"))
    cfg = RetrievalConfig(ranking="learned", model=str(SHIPPED_MODEL))
    with RetrievalClient(files["db"]) as client:
        first = client.search(TOPICS[2], cfg)
        second = client.search(TOPICS[2], cfg)
    assert [e.paper.id for e in first.ranked] == [e.paper.id for e in second.ranked]
    assert [e.final_score for e in first.ranked] == [e.final_score for e in second.ranked]
    assert len(first.ranked) >= 10
    for entry in first.ranked:
        assert set(entry.features) == set(FEATURES)
        assert entry.final_score == pytest.approx(plain_score(data, entry.features), abs=1e-12)
        assert sum(entry.contributions.values()) == pytest.approx(entry.final_score, abs=1e-12)
    keys = [(-round(e.final_score, 10), e.paper.id) for e in first.ranked]
    assert keys == sorted(keys)  # score, then id
    assert first.expansion["model"]["name"] == "ranker-v3"
    assert first.expansion["model"]["sha256"] == hashlib.sha256(SHIPPED_MODEL.read_bytes()).hexdigest()


def test_the_density_features_match_a_plain_reference_and_the_training_rows(tmp_path):
    from retrieval import Paper

    # six papers with the same words, of which only a1 -> b2 is linked: linked = 2/6 of the lexical hits
    db = tmp_path / "partly.db"
    papers = [
        Paper(i, "identical twin text", "the same words", 2000 + n)
        for n, i in enumerate(["a1", "b2", "c3", "d4", "e5", "f6"])
    ]
    papers[0] = Paper("a1", "identical twin text", "the same words", 2000, references=["b2"])
    build_index(papers, db, source="partly")
    with RetrievalClient(db) as client:
        result = client.search("identical twin text", RetrievalConfig(ranking="learned"))
    rows = [e.features for e in result.ranked]
    lexical = [v for v in rows if v["lexical_rr"] > 0]
    reached = [v for v in lexical if v["n_references"] + v["n_citing"] + v["n_cocitation"] + v["n_coupling"] > 0]
    linked = len(reached) / len(lexical)
    assert len(lexical) == 6 and linked == pytest.approx(2 / 6)
    for v in rows:
        for r in ("references", "citing", "cocitation", "coupling"):
            assert v[f"ev_{r}_x_linked"] == pytest.approx(v[f"ev_{r}"] * linked, abs=1e-15)
        assert v["bm25_norm_x_unlinked"] == pytest.approx(v["bm25_norm"] * (1 - linked), abs=1e-15)
    # training completes cached base rows to the same values the search computed
    ids = sorted(range(len(rows)), key=lambda i: result.ranked[i].paper.id)
    base = np.array([[rows[i][f] for f in BASE_FEATURES] for i in ids])
    q = with_derived(QueryData("q", [result.ranked[i].paper.id for i in ids], base, np.zeros(len(ids)), 1))
    full = np.array([[rows[i][f] for f in FEATURES] for i in ids])
    assert q.x.shape == (len(ids), len(FEATURES)) and np.allclose(q.x, full, rtol=0, atol=1e-15)


def test_without_links_the_density_features_fall_back_to_bm25(tmp_path):
    db = tmp_path / "unlinked.db"
    build_index([_paper(i) for i in ("a1", "b2", "c3")], db, source="unlinked")
    with RetrievalClient(db) as client:
        result = client.search("identical twin text", RetrievalConfig(ranking="learned"))
    for entry in result.ranked:
        assert all(entry.features[f] == 0.0 for f in DERIVED_FEATURES if f.endswith("_x_linked"))
        assert entry.features["bm25_norm_x_unlinked"] == entry.features["bm25_norm"]


def test_equal_scores_tie_by_id(tmp_path):
    # Identical papers with no links: every feature but the lexical rank is equal, so a model without it gives
    # equal scores, and the order is by id; the shipped model orders them by id as well (their BM25 list's order).
    ids = ["z9", "a1", "m5", "b2"]
    db = tmp_path / "ties.db"
    build_index([_paper(i) for i in ids], db, source="ties")
    weights = [1.0 if f in ("bm25_norm", "recency", "in_degree") else 0.0 for f in FEATURES]
    flat = RankerModel(FEATURES, weights, [1.0] * len(FEATURES), name="flat")
    with RetrievalClient(db) as client:
        result = client.search("identical twin text", RetrievalConfig(ranking="learned", model=flat))
        shipped = client.search("identical twin text", RetrievalConfig(ranking="learned"))
    assert [e.paper.id for e in result.ranked] == sorted(ids)
    assert len({e.final_score for e in result.ranked}) == 1
    assert [e.paper.id for e in shipped.ranked] == sorted(ids)


def _paper(pid: str):
    from retrieval import Paper

    return Paper(pid, "identical twin text", "the same words", 2000)


def test_a_linear_model_in_memory_ranks_by_its_weights(files):
    weights = [0.0] * len(FEATURES)
    weights[FEATURES.index("year_gap")] = -1.0  # the newest first
    model = RankerModel(FEATURES, weights, [1.0] * len(FEATURES), name="newest")
    with RetrievalClient(files["db"]) as client:
        result = client.search(TOPICS[0], RetrievalConfig(ranking="learned", model=model))
    years = [e.paper.year for e in result.ranked]
    assert years == sorted(years, reverse=True)
    assert result.ranked[0].why().startswith("newest: year_gap")


def test_a_bad_model_file_is_a_clear_error(files, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}', encoding="utf-8")
    with RetrievalClient(files["db"]) as client, pytest.raises(InputError, match="not a retrieval ranker file"):
        client.search("quark", RetrievalConfig(ranking="learned", model=str(bad)))
    assert main(["search", "quark", "--db", str(files["db"]), "--model", str(tmp_path / "absent.json")]) == 1
    err = capsys.readouterr().err
    assert "cannot read the model file" in err and "Traceback" not in err
    with pytest.raises(ConfigError, match="model must be"):
        RetrievalConfig(ranking="learned", model=3)


N_SHIPPED = len(json.loads(SHIPPED_MODEL.read_text(encoding="utf-8"))["features"])


def test_a_model_file_nested_too_deeply_or_with_a_huge_number_is_named_and_one_with_a_bom_is_read(tmp_path):
    """Deep nesting and a number of 5,000 digits were Python tracebacks (RecursionError, ValueError); a byte order
    mark, which the corpus reader takes, was refused."""
    bad = tmp_path / "bad.json"
    for text in ("[" * 100_000 + "]" * 100_000, '{"weights": [' + "9" * 5000 + "]}"):
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=f"{bad} is not a JSON ranker file"):
            RankerModel.load(bad)
    marked = tmp_path / "marked.json"
    marked.write_bytes(b"\xef\xbb\xbf" + SHIPPED_MODEL.read_bytes())
    assert RankerModel.load(marked).weights == RankerModel.load(SHIPPED_MODEL).weights


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("candidates", "x", "candidates"),
        ("candidates", ["top_k_lexical", 20], "candidates"),
        ("candidates", None, "candidates"),
        ("candidates", {"relations": "foo"}, "candidates.relations"),
        ("candidates", {"relations": ["foo"]}, "candidates.relations"),
        ("candidates", {"relations": []}, "candidates.relations"),
        ("candidates", {"relations": [["references"]]}, "candidates.relations"),
        ("candidates", {"max_hops": "1"}, "candidates.max_hops"),
        ("candidates", {"max_hops": 3}, "candidates.max_hops"),
        ("candidates", {"top_k_lexical": 2.5}, "candidates.top_k_lexical"),
        ("candidates", {"lexical_depth": 0}, "candidates.lexical_depth"),
        ("candidates", {"max_neighbours": "30"}, "candidates.max_neighbours"),
        ("candidates", {"max_candidates": True}, "candidates.max_candidates"),
        ("candidates", {"fanout": [100]}, "candidates.fanout"),
        ("candidates", {"hub_weighting": "yes"}, "candidates.hub_weighting"),
        ("candidates", {"expand": 3}, "candidates.expand"),
        ("candidates", {"hopz": 3}, "candidates"),
        ("features", "bm25_norm", "features"),
        ("features", None, "features"),
        ("features", {"bm25_norm": 1}, "features"),
        ("features", [1] * N_SHIPPED, "features"),
        ("features", ["bm25_norm"] * N_SHIPPED, "features"),
        ("weights", "abc", "weights"),
        ("weights", {"a": 1}, "weights"),
        ("weights", 0.5, "weights"),
        ("weights", [True] * N_SHIPPED, "weights"),
        ("weights", ["1"] * N_SHIPPED, "weights"),
        ("scales", None, "scales"),
        ("scales", [[1.0]] * N_SHIPPED, "scales"),
        # finite, and the scores overflowed to infinity (written as `Infinity`, which is no JSON): bounded now
        ("weights", [1e308] * N_SHIPPED, "weights"),
        ("weights", [-2e6] + [0.1] * (N_SHIPPED - 1), "weights"),
        ("scales", [1e-300] * N_SHIPPED, "scales"),
        ("scales", [1e7] * N_SHIPPED, "scales"),
        ("name", 5, "name"),
        ("name", None, "name"),
        ("version", True, "version"),
    ],
)
def test_a_model_file_with_a_field_of_the_wrong_type_names_the_file_and_the_field(
    files, tmp_path, capsys, field, value, named
):
    # every field of the shipped model set to a value of the wrong type or out of range: an InputError naming
    # the file, the field and what it must be, never a ValueError or TypeError from inside the loader
    data = json.loads(SHIPPED_MODEL.read_text(encoding="utf-8"))
    data[field] = value
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        RankerModel.load(bad)
    message = str(caught.value)
    assert str(bad) in message and named in message and "must" in message, message
    assert main(["search", "quark", "--db", str(files["db"]), "--model", str(bad)]) == 1
    err = capsys.readouterr().err
    assert str(bad) in err and named in err and "Traceback" not in err


# -- fitting -------------------------------------------------------------------------------------------------


def _generated_queries(seed: int = 7, n: int = 30) -> list[QueryData]:
    """Queries whose relevant candidates are those with a high feature 2 (feature 0 is noise)."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(n):
        x = rng.random((40, len(FEATURES)))
        relevant = (x[:, 2] > 0.8).astype(float)
        out.append(QueryData(f"q{q:02d}", [f"d{i:02d}" for i in range(40)], x, relevant, int(relevant.sum())))
    return out


def test_ndcg_matches_a_hand_computed_value():
    q = QueryData("q", ["a", "b", "c"], np.zeros((3, 1)), np.array([0.0, 1.0, 1.0]), 3)
    # scores rank c, a, b: gains 1, 0, 1 over an ideal of three relevant
    got = ndcg(q, np.array([0.5, 0.1, 0.9]))
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert got == pytest.approx((1 + 1 / math.log2(4)) / ideal)
    # a tie goes to the smaller id: a (not relevant) before b, then c
    assert ndcg(q, np.array([0.5, 0.5, 0.0])) == pytest.approx((1 / math.log2(3) + 1 / math.log2(4)) / ideal)
    assert ndcg(q, np.array([0.5, 0.5, 0.0]), cutoff=1) == 0.0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.booleans(), min_size=1, max_size=40),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.integers(min_value=1, max_value=12),
)
def test_ndcg_rows_equals_ndcg_row_by_row(relevant, seed, rows):
    """The batched nDCG coordinate ascent uses is ``ndcg`` on each row, to the bit, ties (by id) included."""
    rng = np.random.default_rng(seed)
    n = len(relevant)
    q = QueryData("q", [f"p{i:03d}" for i in range(n)], np.zeros((n, 1)), np.array(relevant, dtype=float),
                  max(1, sum(relevant)))  # fmt: skip
    scores = np.round(rng.normal(size=(rows, n)), int(rng.integers(0, 3)))  # coarse rounding: many ties
    got = ndcg_rows(q, scores)
    assert got.tolist() == [ndcg(q, row) for row in scores]


def test_coordinate_ascent_improves_the_objective_deterministically():
    data = _generated_queries()
    start = np.zeros(len(FEATURES))
    start[0] = 1.0
    w, history = coordinate_ascent(data, start)
    assert history[0] == pytest.approx(mean_ndcg(data, start / np.abs(start).sum()))
    assert history[-1] > history[0] + 0.2
    assert all(b >= a for a, b in zip(history[:-1], history[1:], strict=True))
    assert history[-1] == pytest.approx(mean_ndcg(data, w))
    assert abs(w[2]) == max(abs(w))  # the informative feature carries the most weight
    again, _ = coordinate_ascent(data, start)
    assert again.tolist() == w.tolist()


def test_cross_validation_holds_out_whole_sets():
    from retrieval.eval.train import SetData

    sets = [SetData(name, _generated_queries(seed, 10), _inputs(name)) for seed, name in ((1, "a"), (2, "b"), (3, "c"))]
    cv = cross_validate(sets, rounds=2)
    assert cv["kind"] == "hold-one-corpus-out"
    assert [(f["held_out"], f["train_queries"], f["test_queries"]) for f in cv["folds"]] == [
        ("a", 20, 10), ("b", 20, 10), ("c", 20, 10)
    ]  # fmt: skip
    scales, w, _ = fit([q for s in sets[1:] for q in s.queries], rounds=2)
    assert cv["folds"][0]["weights"] == [round(float(v), 12) for v in w]
    # the folds fitted by two worker processes: the same record
    assert cross_validate(sets, rounds=2, jobs=2) == cv
    from retrieval.eval.train import fit_many

    # one set or several, each start's ascent in a worker: the fits one process makes
    for trainsets in ([sets[0].queries], [s.queries for s in sets]):
        alone = [fit(t, rounds=2) for t in trainsets]
        for (scales, w, history), (s2, w2, h2) in zip(alone, fit_many(trainsets, rounds=2, jobs=2), strict=True):
            assert (scales.tobytes(), w.tobytes(), history) == (s2.tobytes(), w2.tobytes(), h2)


def _inputs(corpus: str) -> dict:
    return {"corpus": {"file": f"{corpus}/papers.jsonl", "sha256": corpus * 64}, "queries": {}}


def test_the_query_sets_of_one_corpus_are_held_out_together():
    from retrieval.eval.judged import set_name
    from retrieval.eval.train import SetData, by_corpus

    # "a" asked by abstract and by title: the same query papers, so neither may train the fold that tests the other
    titles = [QueryData(q.qid, q.ids, q.x[::-1].copy(), q.relevant[::-1].copy(), q.n_relevant)
              for q in _generated_queries(1, 10)]  # fmt: skip
    sets = [SetData("a", _generated_queries(1, 10), _inputs("a")),
            SetData("b", _generated_queries(2, 10), _inputs("b")),
            SetData("a-titles", titles, _inputs("a"))]  # fmt: skip
    assert [[s.name for s in g] for g in by_corpus(sets)] == [["a", "a-titles"], ["b"]]
    cv = cross_validate(sets, rounds=2)
    assert [(f["held_out"], f["train_queries"], f["test_queries"]) for f in cv["folds"]] == [
        ("a+a-titles", 10, 20), ("b", 20, 10)
    ]  # fmt: skip
    per_set = cv["folds"][0]["test_ndcg@10_per_set"]
    assert set(per_set) == {"a", "a-titles"}
    assert (per_set["a"] + per_set["a-titles"]) / 2 == pytest.approx(cv["folds"][0]["test_ndcg@10"], abs=1e-6)
    # one corpus: k folds over the query ids, a query's two forms in the same fold
    one = cross_validate([sets[0], sets[2]], rounds=1)
    assert one["kind"] == "5-fold over queries"
    assert [f["test_queries"] for f in one["folds"]] == [4] * 5 and [f["train_queries"] for f in one["folds"]] == [
        16
    ] * 5
    assert set_name("data/hepth/papers.jsonl", "data/hepth/queries-dev.jsonl") == "hepth"
    assert set_name("data/hepth/papers.jsonl", "data/hepth/queries-dev-titles.jsonl") == "hepth-titles"


# -- retrieval train, end to end -----------------------------------------------------------------------------


def test_train_writes_a_model_beside_the_index_that_the_next_search_uses(files):
    db = files["db"]
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["train", "--corpus", str(files["corpus"]), "--queries", str(files["queries"]), "--db", str(db),
                     "--cache-dir", str(files["cache"]), "--name", "mine", "--rounds", "3"])  # fmt: skip
    assert code == 0
    text = out.getvalue()
    assert "cross-validation (5-fold over queries)" in text and "every query" in text
    written = beside(db)
    assert written == db.with_name("index.db.ranker.json") and written.is_file()
    data = json.loads(written.read_text(encoding="utf-8"))
    assert data["name"] == "mine" and len(data["cross_validation"]["folds"]) == 5
    assert data["training_sets"][0]["queries_used"] == len(TOPICS)
    sha = hashlib.sha256(written.read_bytes()).hexdigest()
    assert sha[:12] in text
    with RetrievalClient(db) as client:
        result = client.search(TOPICS[4], RetrievalConfig(ranking="learned"))
    assert result.expansion["model"] == {"name": "mine", "features": len(FEATURES), "sha256": sha}
    assert all(e.why().startswith("mine: ") for e in result.ranked)
    # the CLI: --ranking learned, --why and --json show the contributions of the same model
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["search", TOPICS[4], "--db", str(db), "--ranking", "learned", "--json", "--limit", "3"]) == 0
    doc = json.loads(out.getvalue())
    assert doc["expansion"]["model"]["sha256"] == sha
    first = doc["results"][0]
    assert first["model"] == "mine"
    assert sum(first["contributions"].values()) == pytest.approx(first["final_score"], abs=1e-9)
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["search", TOPICS[4], "--db", str(db), "--ranking", "learned", "--why", "--limit", "3"]) == 0
    assert "mine: " in out.getvalue() and "learned model mine" in out.getvalue()
    # the same training twice writes the same bytes
    again = files["base"] / "again.json"
    with redirect_stdout(io.StringIO()):
        code = main(["train", "--corpus", str(files["corpus"]), "--queries", str(files["queries"]), "--out", str(again),
                     "--cache-dir", str(files["cache"]), "--name", "mine", "--rounds", "3"])  # fmt: skip
    assert code == 0
    assert hashlib.sha256(again.read_bytes()).hexdigest() == sha
    assert data["fitted"]["analysis"] == {"stemmer": "none", "stopwords": "none"}
    # trained on indexes analysed another way: recorded in the model, and another fit
    stemmed = files["base"] / "stemmed.json"
    with redirect_stdout(io.StringIO()):
        code = main(["train", "--corpus", str(files["corpus"]), "--queries", str(files["queries"]), "--out",
                     str(stemmed), "--cache-dir", str(files["cache"]), "--name", "mine", "--rounds", "3",
                     "--stem", "english", "--stopwords", "english"])  # fmt: skip
    assert code == 0
    assert json.loads(stemmed.read_text(encoding="utf-8"))["fitted"]["analysis"] == {
        "stemmer": "english", "stopwords": "english"}  # fmt: skip
    # for a stemmed index (--db), the analysis left out is the index's: the model is fitted on text read as it is
    stemmed_db = files["base"] / "stemmed.db"
    assert main(["build", "--from", str(files["corpus"]), "--db", str(stemmed_db), "--stem", "english",
                 "--stopwords", "english"]) == 0  # fmt: skip
    with redirect_stdout(io.StringIO()):
        code = main(["train", "--corpus", str(files["corpus"]), "--queries", str(files["queries"]),
                     "--db", str(stemmed_db), "--cache-dir", str(files["cache"]), "--name", "mine",
                     "--rounds", "3"])  # fmt: skip
    assert code == 0
    beside_stemmed = json.loads(beside(stemmed_db).read_text(encoding="utf-8"))
    assert beside_stemmed["fitted"]["analysis"] == {"stemmer": "english", "stopwords": "english"}
    assert beside_stemmed["weights"] == json.loads(stemmed.read_text(encoding="utf-8"))["weights"]


def test_train_needs_paired_files(files, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--corpus", str(files["corpus"]), "--corpus", str(files["corpus"]),
              "--queries", str(files["queries"]), "--out", str(files["base"] / "x.json")])  # fmt: skip
    assert exit_.value.code == 2  # a usage error
    assert "one --queries per --corpus" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--out", "{base}"], "is a folder: give the model's file, such as {base}/ranker.json"),
        (["--out", "{base}/no/such/folder/m.json"], "there is no folder {base}/no/such/folder for the model file"),
        (["--out", "{base}/m.json", "--name", ""], "--name '': give the model a name"),
        (["--out", "{base}/m.json", "--name", "a\tb"], "--name 'a\\tb': give the model a name"),
    ],
)
def test_train_refuses_where_it_cannot_write_before_it_trains(files, capsys, extra, message):
    base = str(files["base"])
    argv = ["train", "--corpus", str(files["corpus"]), "--queries", str(files["queries"]), "--rounds", "1"]
    argv += ["--cache-dir", str(files["base"] / "never")]  # no training started: the cache stays unmade
    with pytest.raises(SystemExit) as exit_:
        main(argv + [part.format(base=base) for part in extra])
    assert exit_.value.code == 2
    assert message.format(base=base) in capsys.readouterr().err
    assert not (files["base"] / "never").exists() and not list(files["base"].glob(".*.tmp"))


def test_train_beside_an_index_that_is_not_there_says_so_before_it_trains(files, capsys):
    missing = files["base"] / "missing.db"
    argv = ["train", "--corpus", str(files["corpus"]), "--queries", str(files["queries"]), "--db", str(missing)]
    assert main(argv + ["--cache-dir", str(files["base"] / "never")]) == 1
    assert f"no index at {missing} to write the model beside: build it first" in capsys.readouterr().err
    assert not beside(missing).exists() and not (files["base"] / "never").exists()


def test_a_model_that_cannot_be_written_leaves_no_temporary_file(tmp_path):
    model = RankerModel(list(FEATURES), [1.0] + [0.0] * (len(FEATURES) - 1), [1.0] * len(FEATURES), name="m")
    (tmp_path / "taken").mkdir()
    with pytest.raises(InputError, match="cannot write the model file"):
        model.save(tmp_path / "taken")  # a folder is there
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_the_eval_reports_name_the_shipped_model_and_cacm_reproduces(tmp_path):
    sha = hashlib.sha256(SHIPPED_MODEL.read_bytes()).hexdigest()
    for name in SETS:
        report = json.loads((REPO / "docs" / "eval" / "learned" / name / "report.json").read_text(encoding="utf-8"))
        for mode in ("learned", "learned-cv", "auto"):
            assert sha[:12] in report["modes"][mode]["description"]
    pytest.importorskip("ir_measures", reason="the eval extra (ir-measures) is not installed")
    pytest.importorskip("matplotlib", reason="the eval extra (matplotlib) is not installed")
    from retrieval.eval import run_eval
    from tests.helpers import shared_corpus

    corpus = shared_corpus("cacm")
    again = run_eval(corpus, corpus.parent / "queries-dev.jsonl", tmp_path / "out", cache_dir=tmp_path / "cache",
                     modes=["learned", "learned-cv", "auto"])  # fmt: skip
    committed = json.loads((REPO / "docs" / "eval" / "learned" / "cacm" / "report.json").read_text(encoding="utf-8"))
    for mode in ("learned", "learned-cv", "auto"):
        assert round(again.modes[mode]["ndcg@10"], 6) == committed["modes"][mode]["ndcg@10"]  # the JSON's 6 places
        assert {k: round(v, 6) for k, v in again.modes[mode]["pooled_recall"].items()} == committed["modes"][mode][
            "pooled_recall"
        ]
