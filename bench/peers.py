"""The engines bench/scale.py measures, as workers: each build, query run and cold start is its own process.

A worker is started by the harness as ``python bench/scale.py --worker ENGINE MODE --corpus FILE --index PATH
--queries FILE [--reference FILE]`` and prints one JSON object on its last stdout line, with the process's peak
RSS in it (see ``peak_rss_mib``), so every engine's memory figure is its own. An engine's module is imported
inside its worker only: no process ever holds two engines.

The queries file holds the query sets, in the order they run: ``{"sets": [{"name", "texts", "warm", "budget", "limit",
"full", "default"}]}``, already cut to what this engine runs (the harness writes one file per engine). A query
worker answers ``{"sets": {name: {"seconds": [...], "top": [...]}}}``: each set warmed with its first query
(unless ``warm`` is false: the 2,000-word query's set is that query repeated, timed from its first run), then
timed one query at a time, stopping once ``budget`` seconds are spent if the set has one, and abandoning a query
that runs past ``limit`` seconds if the set has one (its top is then null and the set ends there: the set's
``abandoned_after``); ours also times the full search of the sets marked ``full`` and the default search of the
sets marked ``default``.

Engines: ``retrieval`` (ours), ``bm25s`` (float32, numpy backend, one thread), ``fts5`` (SQLite FTS5 ``bm25()``),
``tantivy`` (tantivy-py, default writer threads), ``rank_bm25`` (BM25Okapi, in memory only: built and queried in
one process). ``bm25s`` also has an ``exact`` mode: a float64 build that recomputes each query's top 10 under our
tie rule, for the exactness check of ours.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ENGINES = ("retrieval", "bm25s", "fts5", "tantivy", "rank_bm25")
K1, B = 1.5, 0.75
TOP_K = 10

# The same pattern as retrieval.text.tokenise, over the folded text (the harness checks they agree on every
# query): the peers' cold starts use it on their ASCII queries, so that they are not charged for importing our
# package (folding an ASCII text without a backslash is lowercasing it).
_TOKEN = re.compile(r"[^\W_]+")


def peak_rss_mib() -> float:
    """This process's peak resident set size so far, in MiB: ``VmHWM`` of /proc/self/status, the high-water mark
    of this process image's own memory. (``ru_maxrss`` is kept across fork and exec on Linux, so a child spawned
    by a 50 MiB harness would report at least 50 MiB; it is the fallback where /proc is missing.)"""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def path_bytes(path: Path) -> int:
    """Size of a file (with its -wal and -shm companions) or of a directory tree."""
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")) if p.exists())


def read_docs(corpus: Path) -> Iterator[tuple[str, str, str]]:
    """``(id, title, abstract)`` of each record; the indexed text is ``title + " " + abstract``, as ours."""
    with open(corpus, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                rec = json.loads(line)
                yield rec["id"], rec.get("title") or "", rec.get("abstract") or ""


def _fresh(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm"), Path(f"{path}-journal")):
        if p.is_file():
            p.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)


class QueryTimeout(Exception):
    """A query abandoned at its time limit."""


_deadline: list[float] = []  # the running query's deadline while it has one (FTS5's progress handler reads it)


def _alarm(signum, frame) -> None:
    raise QueryTimeout


def _limited(search, q: str, limit: float):
    """``search(q)``, abandoned after ``limit`` seconds with QueryTimeout: SIGALRM interrupts Python code (rank_bm25);
    SQLite runs a query without returning to Python, so FTS5's progress handler checks ``_deadline`` instead."""
    _deadline.append(time.perf_counter() + limit)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        return search(q)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _deadline.clear()


def _timed_queries(
    search, queries: list[str], warm: bool = True, budget: float | None = None, limit: float | None = None
) -> tuple[list[float], list]:
    """Warm with the first query (if ``warm``), then time every query in order, stopping after the query that
    takes the time spent past ``budget`` seconds (if given); a query that runs past ``limit`` seconds (if given)
    is abandoned, its result None, and the set ends there. Returns the seconds and what each returned."""
    if not queries:
        return [], []
    if warm:
        search(queries[0])
    seconds, results = [], []
    for q in queries:
        start = time.perf_counter()
        try:
            result = search(q) if limit is None else _limited(search, q, limit)
        except QueryTimeout:
            result = None
        seconds.append(time.perf_counter() - start)
        results.append(result)
        if result is None or (budget is not None and sum(seconds) >= budget):
            break
    return seconds, results


def _tops(results: list[list[tuple[str, float]] | None]) -> list[list[list] | None]:
    return [None if hits is None else [[pid, float(score)] for pid, score in hits] for hits in results]


def load_sets(path: Path) -> list[dict]:
    return json.loads(path.read_text())["sets"]


def run_sets(search, sets: list[dict]) -> dict:
    """Time ``search`` over every set in order: ``{name: {"seconds", "top"}}``."""
    out = {}
    for qs in sets:
        seconds, results = _timed_queries(search, qs["texts"], qs.get("warm", True), qs.get("budget"), qs.get("limit"))
        out[qs["name"]] = {"seconds": seconds, "top": _tops(results)}
        if results and results[-1] is None:
            out[qs["name"]]["abandoned_after"] = seconds[-1]
    return out


def _top_by_rule(scores, ids: list[str], k: int = TOP_K) -> list[tuple[str, float]]:
    """The ``k`` best positive scores of a full score vector, ties broken by paper id ascending (our rule)."""
    import numpy as np

    positive = int(np.count_nonzero(scores > 0))
    if positive == 0:
        return []
    if positive <= k:
        cand = np.flatnonzero(scores > 0)
    else:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        cand = np.flatnonzero(scores >= kth * (1 - 1e-9))
    order = sorted(cand.tolist(), key=lambda i: (-float(scores[i]), ids[i]))
    return [(ids[i], float(scores[i])) for i in order[:k]]


# -- retrieval (ours) ---------------------------------------------------------------------------------------
def retrieval_build(corpus: Path, index: Path) -> dict:
    from retrieval.commands import build

    _fresh(index)
    start = time.perf_counter()
    # The peers are given the plain tokeniser's tokens, so ours is built without stemming or stop words: every
    # engine indexes the same terms, which the exactness check against bm25s needs.
    summary = build(db=index, source=corpus, stem=None, stopwords=None)
    seconds = time.perf_counter() - start
    return {"build_seconds": seconds, "api_seconds": summary.seconds, "papers": summary.papers,
            "terms": summary.terms, "postings": summary.postings, "edges": summary.edges,
            "build_rss_mib": peak_rss_mib(), "size_bytes": path_bytes(index),
            "size_with_texts_bytes": path_bytes(index)}  # fmt: skip


def retrieval_query(index: Path, sets: list[dict]) -> dict:
    """Per set: the lexical top 10 (``BM25Index.search``), then, where the set asks for them, the full search
    without loading the papers (``full=False``, top 10) and the default search (``search(q)``, default config)."""
    from retrieval import RetrievalClient

    out = {}
    with RetrievalClient(db=index) as client:
        for qs in sets:
            texts, warm = qs["texts"], qs.get("warm", True)
            seconds, results = _timed_queries(lambda q: client.lexical.search(q, top_k=TOP_K), texts, warm)
            entry = out[qs["name"]] = {"seconds": seconds, "top": _tops(results)}
            if qs.get("full"):
                entry["full_seconds"], _ = _timed_queries(
                    lambda q: client.search(q, full=False, limit=TOP_K), texts, warm
                )
            if qs.get("default"):
                entry["default_seconds"], _ = _timed_queries(client.search, texts, warm)
    return {"sets": out, "query_rss_mib": peak_rss_mib()}


# -- bm25s ----------------------------------------------------------------------------------------------------
def _bm25s_index(corpus: Path, dtype: str):
    """A bm25s retriever over our tokeniser's tokens (ids mapped through one vocabulary, as bm25s does for
    tokens; streaming keeps one token list in memory at a time), and the papers' ids."""
    import bm25s

    from retrieval.text import tokenise

    vocab: dict[str, int] = {}
    doc_ids: list[list[int]] = []
    ids: list[str] = []
    start = time.perf_counter()
    for pid, title, abstract in read_docs(corpus):
        ids.append(pid)
        doc_ids.append([vocab.setdefault(t, len(vocab)) for t in tokenise(f"{title} {abstract}")])
    tokenise_seconds = time.perf_counter() - start
    retriever = bm25s.BM25(k1=K1, b=B, method="lucene", dtype=dtype)
    retriever.index((doc_ids, vocab), show_progress=False)
    del doc_ids
    return retriever, ids, tokenise_seconds


def bm25s_build(corpus: Path, index: Path) -> dict:
    _fresh(index)
    with_corpus = index.with_name(index.name + "-with-corpus")
    _fresh(with_corpus)
    start = time.perf_counter()
    retriever, ids, tokenise_seconds = _bm25s_index(corpus, "float32")
    retriever.save(index, show_progress=False)
    seconds = time.perf_counter() - start
    rss = peak_rss_mib()
    (index.parent / f"{index.name}.ids.json").write_text(json.dumps(ids))  # id of each row, outside save()'s dir
    docs = ({"id": pid, "title": t, "abstract": a} for pid, t, a in read_docs(corpus))
    retriever.save(with_corpus, corpus=docs, show_progress=False)
    return {"build_seconds": seconds, "tokenise_seconds": tokenise_seconds, "papers": len(ids),
            "build_rss_mib": rss, "size_bytes": path_bytes(index),
            "size_with_texts_bytes": path_bytes(with_corpus)}  # fmt: skip


def bm25s_query(index: Path, sets: list[dict]) -> dict:
    import bm25s

    from retrieval.text import tokenise

    retriever = bm25s.BM25.load(index)
    ids = json.loads((index.parent / f"{index.name}.ids.json").read_text())

    def search(q: str) -> list[tuple[str, float]]:
        docs, scores = retriever.retrieve([tokenise(q)], k=TOP_K, show_progress=False, n_threads=0)
        return [(ids[d], s * (K1 + 1)) for d, s in zip(docs[0].tolist(), scores[0].tolist(), strict=False) if s > 0]

    import numpy as np

    def kernel(q: str) -> list[tuple[str, float]]:
        # bm25s's scoring kernel alone: the score vector and an argpartition top k (no retrieve() around them)
        scores = retriever.get_scores(tokenise(q))
        top = np.argpartition(scores, len(scores) - TOP_K)[-TOP_K:]
        return [(ids[d], float(scores[d]) * (K1 + 1)) for d in top.tolist() if scores[d] > 0]

    return {"sets": run_sets(search, sets), "kernel_sets": run_sets(kernel, sets), "query_rss_mib": peak_rss_mib()}


def bm25s_exact(corpus: Path, sets: list[dict], reference: Path) -> dict:
    """Float64 bm25s: for each query of each set, its full score vector times (k1 + 1), its top 10 under our tie
    rule, and the score it gives each paper of our top 10 (``reference``: our lists, ``{set: [top, ...]}``)."""
    from retrieval.text import tokenise

    retriever, ids, _ = _bm25s_index(corpus, "float64")
    row = {pid: i for i, pid in enumerate(ids)}
    ours = json.loads(reference.read_text())
    out: dict[str, list] = {}
    for qs in sets:
        answers = out[qs["name"]] = []
        for q, our_top in zip(qs["texts"], ours[qs["name"]], strict=False):
            tokens = [t for t in tokenise(q) if t in retriever.vocab_dict]
            if not tokens:
                answers.append({"top": [], "at_ours": {}})
                continue
            scores = retriever.get_scores(tokens) * (K1 + 1)
            at_ours = {pid: float(scores[row[pid]]) if pid in row else None for pid, _ in our_top}
            answers.append({"top": [[pid, s] for pid, s in _top_by_rule(scores, ids)], "at_ours": at_ours})
    return {"sets": out, "rss_mib": peak_rss_mib()}


# -- SQLite FTS5 ---------------------------------------------------------------------------------------------
FTS5_SCHEMA = "CREATE VIRTUAL TABLE docs USING fts5(pid UNINDEXED, body, tokenize = 'unicode61 remove_diacritics 0')"
FTS5_QUERY = "SELECT pid, rank FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT 10"


def fts5_match(tokens: list[str]) -> str:
    """Our tokens as an OR of quoted terms (a repeated token repeats its phrase, as ours counts it twice)."""
    return " OR ".join(f'"{t}"' for t in tokens)


def fts5_build(corpus: Path, index: Path) -> dict:
    import sqlite3

    _fresh(index)
    start = time.perf_counter()
    conn = sqlite3.connect(index)
    conn.execute(FTS5_SCHEMA)
    with conn:
        conn.executemany(
            "INSERT INTO docs(pid, body) VALUES (?, ?)", ((p, f"{t} {a}") for p, t, a in read_docs(corpus))
        )
    with conn:
        conn.execute("INSERT INTO docs(docs) VALUES ('optimize')")
    conn.close()
    seconds = time.perf_counter() - start
    return {"build_seconds": seconds, "build_rss_mib": peak_rss_mib(), "size_bytes": path_bytes(index),
            "size_with_texts_bytes": path_bytes(index)}  # fmt: skip


def fts5_query(index: Path, sets: list[dict]) -> dict:
    import sqlite3

    from retrieval.text import fold

    conn = sqlite3.connect(f"file:{index}?mode=ro", uri=True)

    def search(q: str) -> list[tuple[str, float]]:
        tokens = _TOKEN.findall(fold(q))
        if not _deadline:
            return [(pid, -rank) for pid, rank in conn.execute(FTS5_QUERY, (fts5_match(tokens),))]
        conn.set_progress_handler(lambda: time.perf_counter() > _deadline[0], 100)
        try:
            return [(pid, -rank) for pid, rank in conn.execute(FTS5_QUERY, (fts5_match(tokens),))]
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise QueryTimeout from exc
            raise
        finally:
            conn.set_progress_handler(None, 0)

    return {"sets": run_sets(search, sets), "query_rss_mib": peak_rss_mib()}


# -- tantivy -------------------------------------------------------------------------------------------------
def tantivy_build(corpus: Path, index: Path) -> dict:
    import tantivy

    _fresh(index)
    index.mkdir(parents=True)
    start = time.perf_counter()
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("pid", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("body", stored=True)  # the default tokenizer; stored, as our file holds the texts
    idx = tantivy.Index(builder.build(), path=str(index))
    writer = idx.writer()  # default heap and threads (0: tantivy picks, here both cores)
    for pid, title, abstract in read_docs(corpus):
        writer.add_document(tantivy.Document(pid=pid, body=f"{title} {abstract}"))
    writer.commit()
    writer.wait_merging_threads()
    idx.reload()
    seconds = time.perf_counter() - start
    return {"build_seconds": seconds, "build_rss_mib": peak_rss_mib(), "size_bytes": path_bytes(index),
            "size_with_texts_bytes": path_bytes(index), "segments": len(list(index.glob("*.idx")))}  # fmt: skip


def tantivy_query(index: Path, sets: list[dict]) -> dict:
    import tantivy

    from retrieval.text import fold

    idx = tantivy.Index.open(str(index))
    schema, searcher = idx.schema, idx.searcher()

    def search(q: str) -> list[tuple[str, float]]:
        terms = [(tantivy.Occur.Should, tantivy.Query.term_query(schema, "body", t)) for t in _TOKEN.findall(fold(q))]
        hits = searcher.search(tantivy.Query.boolean_query(terms), TOP_K, count=False).hits
        return [(searcher.doc(addr)["pid"][0], score) for score, addr in hits]

    return {"sets": run_sets(search, sets), "query_rss_mib": peak_rss_mib()}


# -- rank_bm25 (in memory only) ------------------------------------------------------------------------------
def rank_bm25_run(corpus: Path, sets: list[dict]) -> dict:
    """Build and query in one process: rank_bm25 has no index format. Tokens are interned (one string object
    per distinct term) to spare its per-document dicts; the corpus is streamed into its constructor."""
    import numpy as np
    from rank_bm25 import BM25Okapi

    from retrieval.text import tokenise

    ids: list[str] = []

    def docs() -> Iterator[list[str]]:
        for pid, title, abstract in read_docs(corpus):
            ids.append(pid)
            yield [sys.intern(t) for t in tokenise(f"{title} {abstract}")]

    start = time.perf_counter()
    bm25 = BM25Okapi(docs(), k1=K1, b=B)
    build_seconds = time.perf_counter() - start
    build_rss = peak_rss_mib()

    def search(q: str) -> list[tuple[str, float]]:
        scores = bm25.get_scores(tokenise(q))
        top = np.argpartition(-scores, TOP_K)[:TOP_K] if len(scores) > TOP_K else np.arange(len(scores))
        hits = sorted(((ids[i], float(scores[i])) for i in top.tolist()), key=lambda h: (-h[1], h[0]))
        return [h for h in hits if h[1] > 0]

    return {"build_seconds": build_seconds, "build_rss_mib": build_rss, "papers": len(ids),
            "sets": run_sets(search, sets), "query_rss_mib": peak_rss_mib()}  # fmt: skip


# -- cold start: a fresh interpreter, timed from just before its spawn to its first answer ------------------
# argv: t0 (the parent's perf_counter just before the spawn; CLOCK_MONOTONIC is system-wide on Linux), index, query
_COLD_HEAD = "import sys, time\nt_in = time.perf_counter()\n"
_COLD_TAIL = """
t_out = time.perf_counter()
import json, resource
hwm = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")]
maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"spawn_to_answer": t_out - float(sys.argv[1]), "in_process": t_out - t_in, "hits": len(hits),
                  "rss_mib": hwm[0] / 1024, "ru_maxrss_mib": maxrss}))
"""
COLD_CODE = {
    "retrieval": """
from retrieval import RetrievalClient
hits = RetrievalClient(db=sys.argv[2]).lexical.search(sys.argv[3], top_k=10)
""",
    "retrieval-full": """
from retrieval import RetrievalClient
hits = RetrievalClient(db=sys.argv[2]).search(sys.argv[3], full=False, limit=10).ranked
""",
    "bm25s": """
import json, re
from pathlib import Path
import bm25s
retriever = bm25s.BM25.load(sys.argv[2])
ids = json.loads((Path(sys.argv[2]).parent / (Path(sys.argv[2]).name + ".ids.json")).read_text())
docs, scores = retriever.retrieve([re.findall(r"[^\\W_]+", sys.argv[3].lower())], k=10, show_progress=False)
hits = [ids[d] for d in docs[0].tolist()]
""",
    "fts5": """
import re, sqlite3
conn = sqlite3.connect("file:" + sys.argv[2] + "?mode=ro", uri=True)
match = " OR ".join('"' + t + '"' for t in re.findall(r"[^\\W_]+", sys.argv[3].lower()))
hits = conn.execute("SELECT pid, rank FROM docs WHERE docs MATCH ? ORDER BY rank LIMIT 10", (match,)).fetchall()
""",
    "tantivy": """
import re
import tantivy
index = tantivy.Index.open(sys.argv[2])
searcher = index.searcher()
query = tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.term_query(index.schema, "body", t))
                                     for t in re.findall(r"[^\\W_]+", sys.argv[3].lower())])
hits = [searcher.doc(a)["pid"][0] for _, a in searcher.search(query, 10, count=False).hits]
""",
    "python": "\nhits = []\n",  # the interpreter alone: the floor under every cold figure
}


def cold_code(engine: str) -> str:
    return _COLD_HEAD + COLD_CODE[engine] + _COLD_TAIL


# -- the worker's entry point --------------------------------------------------------------------------------
def warm_page_cache(index: Path | None) -> float:
    """Read every file of ``index`` once (not kept in this process), so each engine's queries are timed with its
    files in the OS page cache, as they are where a server has run a while: this machine's page cache does not keep
    a large file between one engine's run and the next. Returns the seconds it took."""
    start = time.perf_counter()
    if index is None or not index.exists():
        return 0.0
    files = [index] if index.is_file() else sorted(p for p in index.rglob("*") if p.is_file())
    buffer = bytearray(8 << 20)
    for path in files:
        with path.open("rb", buffering=0) as f:
            while f.readinto(buffer):
                pass
    return time.perf_counter() - start


def worker_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="scale.py --worker")
    parser.add_argument("engine", choices=ENGINES)
    parser.add_argument("mode", choices=("build", "query", "run", "exact"))
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--index", type=Path)
    parser.add_argument("--queries", type=Path)
    parser.add_argument("--reference", type=Path, help="our top-10 lists (exact mode)")
    parser.add_argument("--mem-cap-gb", type=float, default=None, help="address-space cap (RLIMIT_AS)")
    args = parser.parse_args(argv)
    if args.mem_cap_gb:
        cap = int(args.mem_cap_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    sets = load_sets(args.queries) if args.queries else []
    fn = {
        ("retrieval", "build"): lambda: retrieval_build(args.corpus, args.index),
        ("retrieval", "query"): lambda: retrieval_query(args.index, sets),
        ("bm25s", "build"): lambda: bm25s_build(args.corpus, args.index),
        ("bm25s", "query"): lambda: bm25s_query(args.index, sets),
        ("bm25s", "exact"): lambda: bm25s_exact(args.corpus, sets, args.reference),
        ("fts5", "build"): lambda: fts5_build(args.corpus, args.index),
        ("fts5", "query"): lambda: fts5_query(args.index, sets),
        ("tantivy", "build"): lambda: tantivy_build(args.corpus, args.index),
        ("tantivy", "query"): lambda: tantivy_query(args.index, sets),
        ("rank_bm25", "run"): lambda: rank_bm25_run(args.corpus, sets),
    }.get((args.engine, args.mode))
    if fn is None:
        sys.exit(f"no mode {args.mode!r} for engine {args.engine!r}")
    warmed = warm_page_cache(args.index) if args.mode == "query" else 0.0
    try:
        result = {"status": "ok", **fn()}
        if args.mode == "query":
            result["page_cache_warm_s"] = round(warmed, 3)
    except MemoryError:
        result = {"status": "failed", "reason": f"MemoryError (address space capped at {args.mem_cap_gb} GiB)",
                  "rss_mib": peak_rss_mib()}  # fmt: skip
    result.setdefault("pid", os.getpid())
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    sys.stdout.flush()
