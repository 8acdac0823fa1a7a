"""The semantic signal: papers' vectors written by a build with ``--semantic``, kept by add, replace and remove on
both backends, and blended by the policy exactly as ``retrieval.search.semantic`` says (checked against a
computation of its own from the encoder and the stored rows)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("wordllama", reason="the semantic extra (pip install 'retrieval[semantic]') is not installed")

from retrieval import embed  # noqa: E402
from retrieval.commands import build, stats  # noqa: E402
from retrieval.config import RetrievalConfig  # noqa: E402
from retrieval.corpus.paper import Paper  # noqa: E402
from retrieval.errors import ConfigError  # noqa: E402
from retrieval.eval.cache import cache_key  # noqa: E402
from retrieval.search.client import RetrievalClient  # noqa: E402
from retrieval.store.writer import add_papers, remove_papers  # noqa: E402
from tests.helpers import BACKENDS  # noqa: E402

POLICY = RetrievalConfig(ranking="expansion")

TEXTS = {
    "a1": ("Sparse attention in long-context transformers", "Attention over long sequences made sparse."),
    "a2": ("Block selection in transformer routing", "Tokens are routed to blocks of experts."),
    "a3": ("Mixture of experts for language models", "Experts chosen per token by a learned router."),
    "b1": ("Black hole entropy from string theory", "Counting microstates of extremal black holes."),
    "b2": ("Holographic entanglement entropy", "Minimal surfaces in anti de Sitter space compute entropy."),
    "b3": ("Gravitational waves from binary mergers", "Detection of waves from merging black holes."),
    "c1": ("Query expansion with relevance feedback", "Pseudo relevance feedback improves document retrieval."),
    "c2": ("Dense passage retrieval for questions", "Dual encoders retrieve passages for open questions."),
    "c3": ("Citation recommendation with graphs", "Citation graphs help recommend papers to cite."),
}
REFS = {"a2": ["a1"], "a3": ["a1", "a2"], "b2": ["b1"], "b3": ["b1"], "c2": ["c1"], "c3": ["c1", "c2"]}


def _papers(texts=TEXTS) -> list[Paper]:
    return [
        Paper(pid, title, abstract, 2000 + i, [f"Author {pid}"], REFS.get(pid, []), source="test")
        for i, (pid, (title, abstract)) in enumerate(sorted(texts.items()))
    ]


def _build(request, backend: str, label: str, semantic: str | None = "wordllama"):
    shards = None
    if backend == "sqlite":
        where = request.getfixturevalue("tmp_path_factory").mktemp(label) / f"{label}.db"
    elif backend == "sharded":
        where, shards = request.getfixturevalue("sharded_database")(label)
    else:
        where = request.getfixturevalue("pg_database")(label)
    build(db=where, source=_papers(), semantic=semantic, shards=shards)
    return where


def _stored(where) -> dict[str, np.ndarray]:
    """Every ``paper_vectors`` row, read with the backend's own driver (not through the package's reader)."""
    sql = "SELECT paper_id, vector FROM paper_vectors ORDER BY paper_id"
    if isinstance(where, str) and where.startswith("postgresql"):
        import psycopg

        with psycopg.connect(where, options="-c search_path=retrieval") as conn:
            rows = conn.execute(sql).fetchall()
    else:
        with sqlite3.connect(where) as conn:
            rows = conn.execute(sql).fetchall()
    return {pid: np.frombuffer(bytes(blob), dtype="<f2").astype(np.float32) for pid, blob in rows}


def _fresh(texts: dict) -> dict[str, np.ndarray]:
    """The vectors of ``texts`` encoded now, in one call: what the stored rows must equal (to float16)."""
    ids = sorted(texts)
    rows = embed.encoder("wordllama").encode([f"{texts[p][0]} {texts[p][1]}" for p in ids])
    return dict(zip(ids, rows, strict=True))


def _assert_vectors(where, texts: dict) -> None:
    stored, fresh = _stored(where), _fresh(texts)
    assert sorted(stored) == sorted(fresh)
    for pid, vector in fresh.items():
        assert stored[pid].shape == (256,)
        np.testing.assert_allclose(stored[pid], vector, atol=2e-3, err_msg=pid)


def test_the_encoder_gives_unit_vectors_and_checks_its_weights(monkeypatch):
    enc = embed.encoder("wordllama")
    rows = enc.encode(["sparse attention", "black hole entropy", ""])
    assert rows.shape == (3, 256) and rows.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(rows[:2], axis=1), 1.0, rtol=1e-5)
    assert float(rows[0] @ rows[1]) < 0.99  # two topics, two directions
    np.testing.assert_array_equal(enc.encode(["sparse attention"])[0], rows[0])  # deterministic
    with pytest.raises(ConfigError, match="use one of wordllama"):
        embed.encoder("minilm")
    # Weights that are not the published ones are refused, naming what to do.
    monkeypatch.setattr(embed, "_LOADED", {})
    monkeypatch.setitem(embed.MODELS, "wordllama", (256, embed.MODELS["wordllama"][1], "0" * 64))
    with pytest.raises(ConfigError, match="not the published ones.*force-reinstall"):
        embed.encoder("wordllama")


def test_pack_and_unpack_refuse_a_row_of_the_wrong_size():
    rows = np.array([[0.5, -0.25, 1.0]], dtype=np.float32)
    np.testing.assert_array_equal(embed.unpack(embed.pack(rows), 3), rows)
    with pytest.raises(ValueError, match="not 4 float16 values"):
        embed.unpack(embed.pack(rows), 4)


@pytest.mark.parametrize("backend", [*BACKENDS, "sharded"])
def test_a_build_stores_each_papers_vector_and_every_writer_keeps_them(request, backend):
    where = _build(request, backend, "semkeep")
    _assert_vectors(where, TEXTS)
    assert stats(where)["semantic_model"] == "wordllama"

    texts = dict(TEXTS)
    texts["d1"] = ("Sparse mixture routing", "A router picks sparse experts for each token.")
    add_papers([Paper("d1", *texts["d1"], 2020, source="test")], where)
    _assert_vectors(where, texts)

    texts["a1"] = ("Efficient attention", "Linear attention replaces the softmax over long sequences.")
    add_papers([Paper("a1", *texts["a1"], 2001, source="test")], where, replace=True)
    _assert_vectors(where, texts)

    remove_papers(["b2", "d1"], where)
    del texts["b2"], texts["d1"]
    _assert_vectors(where, texts)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_policy_blends_each_candidates_cosine_over_the_best(request, backend):
    where = _build(request, backend, "semblend")
    stored = _stored(where)
    enc = embed.encoder("wordllama")
    for query in ("sparse attention routing", "entropy of black holes", "retrieval of papers with citations"):
        with RetrievalClient(config=POLICY, db=where) as client:
            result = client.search(query)
        entries = [e for e in result.ranked if e.semantic_norm is not None]
        assert entries and len(entries) == len(result.ranked)
        q = enc.encode([query])[0]
        cosines = {e.paper.id: float(stored[e.paper.id] @ q) for e in entries}
        best = max(cosines.values())
        for e in entries:
            assert e.semantic_norm == pytest.approx(cosines[e.paper.id] / best, abs=1e-6)
            without = POLICY.w_bm25 * e.bm25_norm + POLICY.w_graph * e.graph_score + POLICY.w_recency * e.recency_score
            assert e.final_score == pytest.approx(without + POLICY.w_semantic * e.semantic_norm, abs=1e-9)
            assert f"1*semantic {e.semantic_norm:.3f}" in e.why()
        assert result.expansion["semantic"] == {"model": "wordllama", "used": True, "vectors": len(entries)}
        assert [e.final_score for e in result.ranked] == sorted((e.final_score for e in result.ranked), reverse=True)


def test_without_its_weight_an_index_with_vectors_ranks_as_one_without(request):
    with_vectors = _build(request, "sqlite", "semoff")
    plain = _build(request, "sqlite", "plain", semantic=None)
    assert _stored(plain) == {}
    off = POLICY.replace(w_semantic=0.0)
    for query in ("sparse attention routing", "entropy of black holes", "citation graphs"):
        with RetrievalClient(config=off, db=with_vectors) as a, RetrievalClient(config=POLICY, db=plain) as b:
            ra, rb = a.search(query), b.search(query)
        assert [(e.paper.id, e.final_score) for e in ra.ranked] == [(e.paper.id, e.final_score) for e in rb.ranked]
        assert all(e.semantic_norm is None for e in ra.ranked + rb.ranked)
        assert "semantic" not in rb.ranked[0].why()


def test_an_index_whose_model_is_not_the_installed_one_ranks_without_it_and_says_so(request, monkeypatch):
    where = _build(request, "sqlite", "semother")
    monkeypatch.setattr(embed, "_LOADED", {})
    monkeypatch.setitem(embed.MODELS, "wordllama", (256, embed.MODELS["wordllama"][1], "0" * 64))
    with RetrievalClient(config=POLICY, db=where) as client:
        result = client.search("sparse attention")
    assert result.ranked and all(e.semantic_norm is None for e in result.ranked)
    assert any("ranked without the semantic signal" in w and "force-reinstall" in w for w in result.warnings)
    # An add would write papers without their vectors: refused, nothing written.
    with pytest.raises(ConfigError, match="not the published ones"):
        add_papers([Paper("z1", "Another paper", "Text.", 2020, source="test")], where)
    assert "z1" not in _stored(where)


def test_the_evaluation_index_with_vectors_is_a_cache_entry_of_its_own():
    plain = cache_key("c" * 64, "q" * 64, "citation")
    assert cache_key("c" * 64, "q" * 64, "citation", None) == plain
    assert cache_key("c" * 64, "q" * 64, "citation", "wordllama") != plain


def test_the_cli_builds_with_vectors_and_refuses_an_unknown_model(tmp_path):
    db = tmp_path / "cli.db"
    run = [sys.executable, "-m", "retrieval"]
    done = subprocess.run([*run, "build", "--db", str(db), "--semantic", "wordllama"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "INFO" not in done.stderr  # the model's package configures no logging of ours
    assert len(_stored(db)) == 100
    shown = subprocess.run([*run, "stats", "--db", str(db)], capture_output=True, text=True)
    assert "wordllama" in shown.stdout
    why = subprocess.run([*run, "search", "attention", "--db", str(db), "--ranking", "expansion", "--why"],
                         capture_output=True, text=True)  # fmt: skip
    assert why.returncode == 0 and "*semantic " in why.stdout
    # -v gives the formula that ranked: it left out the semantic term (and still does where it took no part)
    for options, said in ((["--ranking", "expansion"], True), (["--lesson"], False)):
        verbose = subprocess.run([*run, "search", "attention", "--db", str(db), "-v", *options], capture_output=True,
                                 text=True)  # fmt: skip
        formula = " ".join(verbose.stdout.split("final = ")[1].split("\n")[:2])
        assert ("*semantic" in formula) is said, (options, formula)
        assert not said or "0.5*graph(evidence) + 1*semantic(wordllama) + 0.05*recency" in formula, formula
    bad = subprocess.run([*run, "build", "--db", str(tmp_path / "x.db"), "--semantic", "bogus"], capture_output=True,
                         text=True)  # fmt: skip
    assert bad.returncode == 2 and "--semantic" in bad.stderr and not (tmp_path / "x.db").exists()


def test_check_finds_a_paper_without_its_vector(request):
    from retrieval.commands import check

    where = _build(request, "sqlite", "semcheck")
    report = check(where)
    assert not report.problems and "paper_vectors" in report.checked
    with sqlite3.connect(where) as conn:
        conn.execute("DELETE FROM paper_vectors WHERE paper_id = 'b1'")
        conn.execute("UPDATE paper_vectors SET vector = x'0000' WHERE paper_id = 'c2'")
    report = check(where)
    assert not report.ok
    shown = repr([(p.invariant, p.count, p.examples) for p in report.problems])
    assert "paper_vectors" in shown and "paper 'b1' has no vector" in shown
    assert "paper 'c2' has a vector of 2 bytes, where wordllama gives 512 bytes (256 float16 values)" in shown


def test_eval_with_vectors_ranks_cacm_by_the_policy_with_the_signal_and_says_so(tmp_path):
    from retrieval.eval.runner import run_eval
    from tests.helpers import shared_corpus

    corpus = shared_corpus("cacm")
    queries = corpus.with_name("queries-dev.jsonl")
    common = {"modes": ["bm25", "policy"], "cache_dir": tmp_path / "cache", "jobs": 1}
    plain = run_eval(corpus, queries, tmp_path / "plain", semantic="none", **common)
    with_vectors = run_eval(corpus, queries, tmp_path / "sem", semantic="wordllama", **common)
    assert "Semantic signal" not in (tmp_path / "plain" / "report.md").read_text()
    assert (
        "Semantic signal: the index searched keeps each paper's vector of `wordllama`"
        in (tmp_path / "sem" / "report.md").read_text()
    )
    assert with_vectors.inputs["semantic"] == "wordllama" and "semantic" not in plain.inputs
    # BM25 reads no vectors; the policy's ranking changes with them.
    assert with_vectors.modes["bm25"]["ndcg@10"] == plain.modes["bm25"]["ndcg@10"]
    assert with_vectors.modes["policy"]["ndcg@10"] > plain.modes["policy"]["ndcg@10"]

    # The default (auto) is retrieval build's: CACM's citations are sparse, so its index keeps the vectors.
    default = run_eval(corpus, queries, tmp_path / "default", **common)
    assert default.inputs["semantic"] == "wordllama"
    assert default.modes["policy"]["ndcg@10"] == with_vectors.modes["policy"]["ndcg@10"]


def test_auto_encodes_only_where_the_citations_are_sparse(tmp_path):
    assert embed.auto_encoder(2, 3) == (None, None)  # 1.5 edges a paper: the graph ranks, no vectors
    assert embed.auto_encoder(2, 2)[0] is embed.encoder("wordllama")
    assert embed.auto_encoder(0, 0) == (None, None)
    sparse = build(db=tmp_path / "sparse.db", source=_papers())  # 8 edges over 9 papers: the default encodes
    assert sparse.semantic == "wordllama" and not sparse.notes
    assert sorted(_stored(tmp_path / "sparse.db")) == sorted(TEXTS)
    assert stats(tmp_path / "sparse.db")["semantic_model"] == "wordllama"
    papers = _papers()
    ids = [p.id for p in papers]
    dense = [Paper(p.id, p.title, p.abstract, p.year, p.authors, ids[max(0, i - 2) : i], source="test")
             for i, p in enumerate(papers)]  # fmt: skip
    summary = build(db=tmp_path / "dense.db", source=dense)
    assert summary.edges / summary.added > embed.AUTO_MAX_EDGES
    assert summary.semantic is None and not summary.notes and _stored(tmp_path / "dense.db") == {}
    off = build(db=tmp_path / "off.db", source=_papers(), semantic="none")
    assert off.semantic is None and _stored(tmp_path / "off.db") == {}
    with pytest.raises(ConfigError, match="use one of wordllama, auto, none, or the folder a model was saved to"):
        build(db=tmp_path / "bad.db", source=_papers(), semantic="bogus")
    assert not (tmp_path / "bad.db").exists()


def test_auto_without_the_package_builds_without_vectors_and_says_how_to_add_them(tmp_path):
    corpus = tmp_path / "sparse.jsonl"
    records = [{"id": p.id, "title": p.title, "abstract": p.abstract, "year": p.year, "references": p.references}
               for p in _papers()]  # fmt: skip
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    cli = "import sys; sys.modules['wordllama'] = None; from retrieval.interfaces.cli import main; sys.exit(main())"
    args = ["build", "--db", str(tmp_path / "s.db"), "--from", str(corpus)]
    without = subprocess.run([sys.executable, "-c", cli, *args], capture_output=True, text=True)
    assert without.returncode == 0, without.stderr
    assert "retrieval: note: no text vectors: the corpus has 0.89 citation edges a paper" in without.stderr
    assert "pip install 'retrieval[semantic]'" in without.stderr and "Traceback" not in without.stderr
    assert "text vectors" not in without.stdout and _stored(tmp_path / "s.db") == {}
    asked = subprocess.run([sys.executable, "-c", cli, *args, "--semantic", "wordllama"], capture_output=True,
                           text=True)  # fmt: skip
    assert asked.returncode == 1 and "pip install 'retrieval[semantic]'" in asked.stderr, asked.stderr
    with_it = subprocess.run([sys.executable, "-m", "retrieval", *args], capture_output=True, text=True)
    assert with_it.returncode == 0 and "note" not in with_it.stderr, with_it.stderr
    assert ", text vectors by wordllama, " in with_it.stdout and len(_stored(tmp_path / "s.db")) == len(TEXTS)
