"""Corpora and query sets for bench/scale.py: cached synthetic corpora, document frequencies, seeded queries.

Three query sets per corpus:

- short (synthetic only): 2-6 distinct terms (uniformly) from the corpus's own vocabulary, each term from a
  document-frequency band chosen with fixed probabilities, so a query mixes selective and unselective terms as
  real ones do:

  - rare:   2 <= df < N/1000            (probability 0.35)
  - mid:    N/1000 <= df < N/20         (probability 0.40)
  - common: df >= N/20                  (probability 0.25)

- long: on a synthetic corpus, 50-150 distinct terms (uniformly), drawn like an abstract: tokens drawn one at a
  time in proportion to their collection frequency (occurrences in the corpus) until the query holds its number
  of distinct terms, a token drawn again kept again (a query counts it twice, as an abstract would); on hepth,
  the dev set's whole title+abstract texts;
- one 2,000-word query: on a synthetic corpus 2,000 tokens drawn the same way; on hepth the abstracts of other
  papers (seeded, none of them a dev query's paper) concatenated and cut at the 2,000th token.

Each set has its own seed derived from the query seed. Everything generated is written beside the corpus in the
work directory.
"""

from __future__ import annotations

import bisect
import itertools
import json
import math
import random
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import synthetic  # noqa: E402

BANDS = (("rare", 0.35), ("mid", 0.40), ("common", 0.25))
TERMS_PER_QUERY = (2, 6)
LONG_TERMS_PER_QUERY = (50, 150)
HUGE_WORDS = 2000
STATS_VERSION = 2  # of the document-frequency cache: 2 added collection frequencies


def band_edges(n_docs: int) -> tuple[int, int]:
    """df below the first edge is rare, below the second mid, else common."""
    return max(3, math.ceil(n_docs / 1000)), max(4, math.ceil(n_docs / 20))


def band_of(df: int, n_docs: int) -> str:
    mid, common = band_edges(n_docs)
    return "rare" if df < mid else "mid" if df < common else "common"


def ensure_synthetic(workdir: Path, n_papers: int, seed: int) -> Path:
    """The synthetic corpus of ``n_papers`` (seed ``seed``) in ``workdir``, generated unless a complete file of
    that size and seed is already there (a sidecar written after the file records both, and its byte size)."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"synthetic-{n_papers}-seed{seed}.jsonl"
    meta_path = path.with_suffix(".meta.json")
    if path.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("papers") == n_papers and meta.get("seed") == seed and meta.get("bytes") == path.stat().st_size:
            print(f"  reusing {path} ({n_papers:,} papers, seed {seed})", flush=True)
            return path
    print(f"  generating {n_papers:,} synthetic papers (seed {seed}) into {path} ...", flush=True)
    tmp = path.with_suffix(".jsonl.tmp")
    synthetic.write(tmp, n_papers, seed)
    tmp.replace(path)
    meta_path.write_text(json.dumps({"papers": n_papers, "seed": seed, "bytes": path.stat().st_size}) + "\n")
    return path


def doc_freqs(corpus: Path, cache_dir: Path) -> dict:
    """``{"n_docs", "n_tokens", "postings", "df": {term: df}, "cf": {term: occurrences}}`` under our tokeniser,
    cached by file size and modification time in ``cache_dir``."""
    from peers import read_docs

    from retrieval.text import tokenise

    cache_dir.mkdir(parents=True, exist_ok=True)
    cache = cache_dir / f"{corpus.stem}.df.json"
    stat = corpus.stat()
    key = {"file": str(corpus), "bytes": stat.st_size, "mtime": stat.st_mtime, "version": STATS_VERSION}
    if cache.exists():
        data = json.loads(cache.read_text())
        if data.get("key") == key:
            return data
    print(f"  counting document frequencies in {corpus.name} ...", flush=True)
    df: Counter[str] = Counter()
    cf: Counter[str] = Counter()
    n_docs = n_tokens = 0
    for _, title, abstract in read_docs(corpus):
        tokens = tokenise(f"{title} {abstract}")
        n_docs += 1
        n_tokens += len(tokens)
        df.update(set(tokens))
        cf.update(tokens)
    data = {"key": key, "n_docs": n_docs, "n_tokens": n_tokens, "postings": sum(df.values()), "df": dict(df),
            "cf": dict(cf)}  # fmt: skip
    cache.write_text(json.dumps(data))
    return data


def synthetic_queries(stats: dict, n_queries: int, seed: int) -> list[dict]:
    """``n_queries`` seeded queries of 2-6 distinct terms, each term drawn from a df band (see the module)."""
    rng = random.Random(seed)
    n_docs = stats["n_docs"]
    pools: dict[str, list[str]] = {name: [] for name, _ in BANDS}
    for term in sorted(stats["df"]):
        df = stats["df"][term]
        if df >= 2:
            pools[band_of(df, n_docs)].append(term)
    names = [name for name, _ in BANDS if pools[name]]
    weights = [p for name, p in BANDS if pools[name]]
    out = []
    for _ in range(n_queries):
        terms: list[str] = []
        length = rng.randint(*TERMS_PER_QUERY)
        while len(terms) < length:
            term = rng.choice(pools[rng.choices(names, weights)[0]])
            if term not in terms:
                terms.append(term)
        out.append({"text": " ".join(terms)})
    return out


class TokenDraw:
    """Draws tokens of a corpus in proportion to their collection frequency: an abstract's word distribution."""

    def __init__(self, stats: dict, rng: random.Random) -> None:
        self.rng = rng
        self.terms = sorted(stats["cf"])
        self.cumulative = list(itertools.accumulate(stats["cf"][t] for t in self.terms))

    def __call__(self) -> str:
        return self.terms[bisect.bisect_right(self.cumulative, self.rng.random() * self.cumulative[-1])]


def long_queries(stats: dict, n_queries: int, seed: int) -> list[dict]:
    """``n_queries`` seeded queries of 50-150 distinct terms drawn like abstracts (see the module)."""
    rng = random.Random(f"long:{seed}")
    draw = TokenDraw(stats, rng)
    out = []
    for _ in range(n_queries):
        wanted = rng.randint(*LONG_TERMS_PER_QUERY)
        tokens: list[str] = []
        distinct: set[str] = set()
        while len(distinct) < wanted:
            tokens.append(draw())
            distinct.add(tokens[-1])
        out.append({"text": " ".join(tokens)})
    return out


def huge_query_synthetic(stats: dict, seed: int, words: int = HUGE_WORDS) -> dict:
    """One seeded query of ``words`` tokens drawn like an abstract's."""
    draw = TokenDraw(stats, random.Random(f"huge:{seed}"))
    return {"text": " ".join(draw() for _ in range(words))}


def huge_query_hepth(corpus: Path, queries_path: Path, seed: int, words: int = HUGE_WORDS) -> dict:
    """The abstracts of seeded papers that are no dev query's paper, concatenated and cut at the ``words``-th
    token (of the lowercased text, as every engine lowercases), with the ids of the papers used."""
    from peers import _TOKEN, read_docs

    qids = {json.loads(line)["qid"] for line in queries_path.read_text(encoding="utf-8").splitlines() if line.strip()}
    docs = [(pid, abstract) for pid, _, abstract in read_docs(corpus) if pid not in qids and abstract.strip()]
    random.Random(f"huge:{seed}").shuffle(docs)
    parts, used, count = [], [], 0
    for pid, abstract in docs:
        parts.append(abstract.lower())
        used.append(pid)
        count += len(_TOKEN.findall(parts[-1]))
        if count >= words:
            break
    text = " ".join(parts)
    ends = [m.end() for m in _TOKEN.finditer(text)]
    return {"text": text[: ends[min(words, len(ends)) - 1]], "papers": used}


def hepth_queries(path: Path, n_queries: int) -> list[dict]:
    """The first ``n_queries`` dev queries (whole title+abstract texts), with their query paper's id."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [{"text": rec["query"], "qid": rec["qid"]} for rec in map(json.loads, lines[:n_queries])]


def annotate(queries: list[dict], stats: dict) -> None:
    """Add each query's distinct terms, their df bands and the postings they cover (sum of df) in place."""
    from retrieval.text import tokenise

    df, n_docs = stats["df"], stats["n_docs"]
    for q in queries:
        tokens = tokenise(q["text"])
        terms = list(dict.fromkeys(tokens))
        q["tokens"] = len(tokens)
        q["terms"] = len(terms)
        q["bands"] = dict(Counter(band_of(df[t], n_docs) if t in df else "absent" for t in terms))
        q["postings"] = sum(df.get(t, 0) for t in terms)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p * len(ordered)) - 1))]


def describe(queries: list[dict], stats: dict) -> dict:
    """The distribution of a query set: terms per query, df bands of its terms, postings covered."""
    postings = [q["postings"] for q in queries]
    bands: Counter[str] = Counter()
    for q in queries:
        bands.update(q["bands"])
    mid, common = band_edges(stats["n_docs"])
    return {
        "queries": len(queries),
        "terms_per_query": dict(sorted(Counter(q["terms"] for q in queries).items())),
        "terms_per_query_median": statistics.median(q["terms"] for q in queries),
        "terms_per_query_quartiles": [_pct([q["terms"] for q in queries], p) for p in (0.25, 0.5, 0.75)],
        "tokens_per_query_median": statistics.median(q["tokens"] for q in queries),
        "band_edges": {"rare": f"df < {mid}", "mid": f"{mid} <= df < {common}", "common": f"df >= {common}"},
        "term_bands": dict(bands),
        "postings_median": statistics.median(postings),
        "postings_p95": _pct(postings, 0.95),
        "postings_max": max(postings),
    }


def describe_one(query: dict, stats: dict) -> str:
    """One query (the 2,000-word one) described: its tokens, distinct terms, df bands and postings covered."""
    total = sum(query["bands"].values())
    bands = ", ".join(f"{b} {n} ({100 * n / total:.0f}%)" for b, n in query["bands"].items())
    source = f" (abstracts of {len(query['papers'])} papers)" if query.get("papers") else ""
    return (
        f"one query{source} of {query['tokens']:,} tokens, {query['terms']:,} distinct terms ({bands}), covering "
        f"{query['postings']:,} postings ({100 * query['postings'] / stats['postings']:.0f}% of the corpus's)."
    )


def describe_text(summary: dict) -> str:
    counts = summary["terms_per_query"]
    if len(counts) <= 10:
        tpq = "(terms: queries) " + ", ".join(f"{k}: {v}" for k, v in counts.items())
    else:
        quartiles = summary.get("terms_per_query_quartiles")
        tpq = f"from {min(counts)} to {max(counts)}" + (
            f" (quartiles {', '.join(map(str, quartiles))})" if quartiles else ""
        )
    total = sum(summary["term_bands"].values())
    bands = ", ".join(f"{b} {n} ({100 * n / total:.0f}%)" for b, n in summary["term_bands"].items())
    edges = "; ".join(f"{b}: {e}" for b, e in summary["band_edges"].items())
    tokens = summary.get("tokens_per_query_median")
    repeats = (
        f" (tokens, repeats counted: median {tokens})" if tokens and tokens != summary["terms_per_query_median"] else ""
    )
    return (
        f"{summary['queries']} queries; distinct terms per query {tpq}; "
        f"median {summary['terms_per_query_median']}{repeats}.\n"
        f"Query terms by df band ({edges}): {bands}.\n"
        f"Postings covered per query (sum of the terms' df): median {summary['postings_median']:,}, "
        f"p95 {summary['postings_p95']:,}, max {summary['postings_max']:,}."
    )
