"""The semantic signal trained on the corpus itself: latent semantic analysis (LSA) in place of WordLlama's vectors.

Issue 28 asks for two kinds of semantic signal, each measured and kept only where it earns its place: one trained
on the user's own corpus at build time (no download), and a small pretrained encoder (``--semantic wordllama``,
``docs/eval/semantic.md``). This script measures the first kind without adding it to the index format: it fits
LSA on the evaluation index's papers (query papers removed, as the evaluation removes them), hands the fitted
model to ``retrieval eval`` as the index's semantic model, and writes the usual report. The policy's blend then
adds ``1 * semantic_norm`` from the LSA cosines exactly as it does from WordLlama's.

LSA as fitted here (Deerwester et al. 1990, with the usual log-entropy-like weighting simplified to log tf-idf):
the index's own analyser (Snowball english stemming, Lucene's english stop words) turns each paper's title and
abstract into terms; a paper is the row of (1 + ln tf) * ln(N / df) over them; a truncated SVD keeps ``--dims``
singular triplets (scipy's ``svds``, ARPACK); a text is folded in as its weighted term row times V_k / s_k and
scaled to unit length, so papers and queries share the space. Terms the fit never saw are ignored.

    python bench/semantic_lsa.py --corpus ../shared/data/cacm/papers.jsonl \
        --queries ../shared/data/cacm/queries-dev.jsonl --out /tmp/lsa/cacm

Needs scipy (it comes with the ``bench`` extra). One process runs every query, so that the fitted model is the
one the searches use. The evaluation index is cached apart from the others (``--cache-dir``, default
``~/.cache/retrieval/eval-lsa``), under the model's name: the dimensions and the fit's digest.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import time
from collections import Counter
from pathlib import Path

import numpy as np
from scipy.sparse import csr_matrix, diags
from scipy.sparse.linalg import svds

from retrieval import embed
from retrieval.corpus import read_papers
from retrieval.eval.protocol import AUTO
from retrieval.eval.runner import prepare, run_eval
from retrieval.text import Analyser

ANALYSER = Analyser("english", "english")


class LsaModel:
    """A fitted LSA space: ``embed`` folds texts into it (the interface ``retrieval.embed.Encoder`` calls)."""

    def __init__(self, vocabulary: dict[str, int], idf: np.ndarray, fold: np.ndarray) -> None:
        self.vocabulary = vocabulary
        self.idf = idf
        self.fold = fold

    def embed(self, texts: list[str], norm: bool = False, batch_size: int = 0) -> np.ndarray:
        rows = np.zeros((len(texts), self.fold.shape[1]), dtype=np.float32)
        for i, text in enumerate(texts):
            counts = Counter(t for t in ANALYSER.analyse(text) if t in self.vocabulary)
            if counts:
                columns = np.fromiter((self.vocabulary[t] for t in counts), dtype=np.int64, count=len(counts))
                weights = np.fromiter((1.0 + math.log(n) for n in counts.values()), dtype=np.float64)
                rows[i] = (weights * self.idf[columns]) @ self.fold[columns]
        return rows

    def digest(self) -> str:
        return hashlib.sha256(self.fold.tobytes() + self.idf.tobytes()).hexdigest()


def fit(texts: list[str], dims: int) -> LsaModel:
    """LSA of ``texts`` with ``dims`` dimensions (log tf-idf rows, truncated SVD, fold-in by V_k / s_k)."""
    vocabulary: dict[str, int] = {}
    rows, columns, values = [], [], []
    for i, text in enumerate(texts):
        for term, n in Counter(ANALYSER.analyse(text)).items():
            rows.append(i)
            columns.append(vocabulary.setdefault(term, len(vocabulary)))
            values.append(1.0 + math.log(n))
    matrix = csr_matrix((values, (rows, columns)), shape=(len(texts), len(vocabulary)))
    df = np.bincount(np.asarray(columns), minlength=len(vocabulary))
    idf = np.log(len(texts) / df)
    # svds starts ARPACK from a random vector: a fixed start makes the fit, and so every figure, repeatable.
    start = np.random.default_rng(42).standard_normal(min(matrix.shape))
    _, singular, vt = svds(matrix @ diags(idf), k=dims, v0=start)
    return LsaModel(vocabulary, idf, (vt.T / singular).astype(np.float32))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, type=Path)
    parser.add_argument("--queries", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path, help="the report's folder")
    parser.add_argument("--dims", type=int, default=256, help="LSA dimensions (default 256, WordLlama's)")
    parser.add_argument("--runs-dir", type=Path, help="the TREC run files' folder (default: --out)")
    parser.add_argument("--modes", default="bm25,policy,auto")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "retrieval" / "eval-lsa")
    args = parser.parse_args()

    removed = prepare(args.corpus, args.queries, AUTO, None).evalset.removed
    texts = [embed.paper_text(p.title, p.abstract) for _, p in read_papers(args.corpus) if p.id not in removed]
    started = time.perf_counter()
    model = fit(texts, args.dims)
    print(f"LSA fitted on {len(texts):,} papers, {len(model.vocabulary):,} terms, {args.dims} dimensions "
          f"in {time.perf_counter() - started:.1f} s")  # fmt: skip
    digest = model.digest()
    name = f"lsa{args.dims}-{digest[:8]}"  # a cached evaluation index is reused only for the same fit
    # The fitted model stands in as an index model for this process: the build records its name and digest, and
    # every search of the run (one process: jobs=1) finds it loaded.
    embed._LOADED[name] = embed.Encoder(name, args.dims, digest, model)
    run_eval(
        args.corpus,
        args.queries,
        args.out,
        modes=args.modes.split(","),
        cache_dir=args.cache_dir,
        runs_dir=args.runs_dir,
        semantic=name,
        jobs=1,
    )
    print(f"report: {args.out / 'report.md'}")


if __name__ == "__main__":
    main()
