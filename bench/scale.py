"""Scale benchmark: ours against bm25s, SQLite FTS5, tantivy and rank_bm25 on 100K/500K synthetic papers and hepth.

    python bench/scale.py                                   # 100K and 500K synthetic, hepth, every peer
    python bench/scale.py --sizes 100000 --no-hepth         # one size
    python bench/scale.py --quick                           # smoke run: 20K papers + hepth, few queries
    python bench/scale.py --peers retrieval,bm25s --queries 50 --long-queries 20 --workdir /tmp/bench
    python bench/scale.py --sizes 500000 --no-hepth --reuse-indexes   # on the indexes an earlier run built

Every engine builds and queries the same corpus with the same queries in the same order, each step in its own
process (bench/peers.py), so its peak RSS is its own; the figures are measured side by side in one run and each
table has a ratio column ours / peer. Each corpus has three query sets (bench/queries.py): short (2-6 terms,
synthetic only), long (50-150 terms drawn like abstracts; hepth: title+abstract) and one 2,000-word query, timed
--huge-repeats times; FTS5 and rank_bm25, whose long queries take seconds to minutes, run part of them (see
plan()). Corpora, query sets and every index live in --workdir (default ~/.cache/retrieval/bench), never in the
repository; a generated corpus is reused when its size and seed match, an index only with --reuse-indexes. The
exactness check compares our lexical top 10 with bm25s's (float64 build, same tokens, scores times (k1 + 1)) for
every query of every set. Results: bench/results/scale.json (raw numbers, machine) and bench/results/scale.md (the
tables); --quick writes them under the work directory instead. See bench/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import peers  # noqa: E402
import queries as qsets  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
HEPTH = REPO.parent / "shared" / "data" / "hepth"
RESULTS = REPO / "bench" / "results"
TOL = 1e-6  # relative tolerance of the exactness check
INDEX_NAMES = {"retrieval": "retrieval.db", "bm25s": "bm25s", "fts5": "fts5.db", "tantivy": "tantivy"}
TARGET_SIZE = 500_000


# -- running workers -------------------------------------------------------------------------------------------
def run_worker(engine: str, mode: str, timeout: float, **opts) -> dict:
    """Run one worker process and return its JSON (or a failure record: the run goes on)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", engine, mode]
    for key, value in opts.items():
        if value is not None:
            cmd += [f"--{key.replace('_', '-')}", str(value)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"status": "failed", "reason": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - start
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
        signal = f" (signal {-proc.returncode}{': killed, likely out of memory' if proc.returncode == -9 else ''})"
        reason = f"exit {proc.returncode}{signal if proc.returncode < 0 else ''}"
        tail = proc.stderr.strip().splitlines()[-3:]
        return {"status": "failed", "reason": reason + (f": {tail[-1][:200]}" if tail else ""), "stderr_tail": tail}
    result = json.loads(lines[-1])
    result["worker_wall_seconds"] = wall
    return result


def cold_start(key: str, index: Path, query: str, runs: int, cwd: Path) -> dict:
    """A fresh interpreter per run: time from just before its spawn to its first answer (and, inside it, from
    its first statement, i.e. imports + open + query), and its peak RSS; medians and max over ``runs``."""
    samples = []
    for _ in range(runs):
        code = peers.cold_code(key)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", code, repr(t0), str(index), query],
                              capture_output=True, text=True, cwd=cwd)  # fmt: skip
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-1:] or [""]
            return {"status": "failed", "reason": f"exit {proc.returncode}: {tail[0][:200]}"}
        samples.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return {
        "status": "ok",
        "runs": runs,
        "spawn_to_answer_ms": statistics.median(s["spawn_to_answer"] for s in samples) * 1000,
        "in_process_ms": statistics.median(s["in_process"] for s in samples) * 1000,
        "rss_mib": max(s["rss_mib"] for s in samples),
        "samples_ms": [s["spawn_to_answer"] * 1000 for s in samples],
    }


# -- statistics -----------------------------------------------------------------------------------------------
def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p * len(ordered)) - 1))]


def latency(seconds: list[float], postings: list[int]) -> dict:
    ms = [s * 1000 for s in seconds]
    rates = [p / s for p, s in zip(postings, seconds, strict=True)]
    return {"p50_ms": statistics.median(ms), "p95_ms": pct(ms, 0.95), "mean_ms": statistics.fmean(ms),
            "max_ms": max(ms), "postings_per_s": statistics.median(rates)}  # fmt: skip


def overlap(ours: list[list], theirs: list[list]) -> float:
    """Mean share of our top-10 ids that the peer's top 10 also holds, over the queries both ran."""
    shares = []
    for a, b in zip(ours, theirs, strict=False):
        ids = {pid for pid, _ in a}
        shares.append(len(ids & {pid for pid, _ in b}) / len(ids) if ids else 1.0)
    return statistics.fmean(shares) if shares else float("nan")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOL * max(abs(a), abs(b), 1e-300)


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


def exactness(texts: list[str], ours: list[list], exact: list[dict]) -> dict:
    """Compare our top 10 with bm25s's (float64, scaled by k1 + 1, same tie rule) query by query.

    exact: same ids in the same order, scores within TOL. tie-equivalent: the ids differ only among papers whose
    scores tie (within TOL) at the cut or with each other: the score lists agree, bm25s gives each of our papers
    our score, and the papers strictly above the 10th score are the same. Anything else is a mismatch."""
    n_exact, n_ties, mismatches, max_rel = 0, 0, [], 0.0
    for i, (text, mine, ref) in enumerate(zip(texts, ours, exact, strict=True)):
        theirs, at = ref["top"], ref["at_ours"]
        aligned = [(s, t[1]) for (_, s), t in zip(mine, theirs, strict=False)]
        own = [(s, at[p]) for p, s in mine if at.get(p) is not None]
        max_rel = max([max_rel] + [_rel(a, b) for a, b in aligned + own])
        same_scores = len(mine) == len(theirs) and all(_close(a, b) for a, b in aligned)
        if same_scores and [p for p, _ in mine] == [p for p, _ in theirs]:
            n_exact += 1
            continue
        problems = []
        if len(mine) != len(theirs):
            problems.append(f"ours returned {len(mine)} papers, bm25s {len(theirs)}")
        elif not same_scores:
            problems.append("the score lists differ")
        for pid, s in mine:
            if at.get(pid) is None or not _close(s, at[pid]):
                problems.append(f"{pid}: ours {s!r}, bm25s {at.get(pid)!r}")
        cut = theirs[-1][1] if theirs else 0.0
        above_mine = {p for p, s in mine if s > cut * (1 + TOL)}
        above_theirs = {p for p, s in theirs if s > cut * (1 + TOL)}
        if above_mine != above_theirs:
            problems.append(f"papers above the cut differ: ours only {sorted(above_mine - above_theirs)}, "
                            f"bm25s only {sorted(above_theirs - above_mine)}")  # fmt: skip
        if problems:
            mismatches.append({"query": i, "text": text[:200], "problems": problems, "ours": mine, "bm25s": theirs})
        else:
            n_ties += 1
    return {"queries": len(ours), "exact": n_exact, "tie_equivalent": n_ties, "mismatched": len(mismatches),
            "max_relative_difference": max_rel, "tolerance": TOL, "mismatches": mismatches}  # fmt: skip


# -- one corpus -----------------------------------------------------------------------------------------------
SETS = ("short", "long", "huge")  # the order the sets run in, in every worker
SET_TITLES = {"short": "2-6-term queries", "long": "50-150-term queries", "huge": "2,000-word query"}
HEPTH_TITLES = {**SET_TITLES, "long": "title+abstract queries"}
SLOW = ("fts5", "rank_bm25")  # engines that run the long sets in part (see plan)


def plan(engine: str, name: str, count: int, n_docs: int, synthetic: bool, args) -> dict:
    """How much of the set ``name`` (``count`` queries) ``engine`` runs: ``{"n": queries (0: skipped),
    "repeats": runs of each, "budget": seconds for the set or None, "limit": seconds for one query or None,
    "note": why it is cut, or None}``.

    Every engine runs every query, the 2,000-word one ``--huge-repeats`` times, except: rank_bm25 runs the
    first ``--slow-queries`` of the short set beyond 100K papers and of the hepth set; on synthetic corpora, FTS5
    and rank_bm25 run the long set's first ``--slow-long-queries``, stopping once ``--slow-budget`` seconds are
    spent, without a warm-up query (both keep nothing from one query to the next but the page cache, warm by
    then); and they run the 2,000-word query once, abandoned after ``--slow-query-limit`` seconds (its figure is
    then a lower bound)."""
    full = {"n": count, "repeats": 1, "budget": None, "limit": None, "note": None}
    if name == "huge":
        if engine not in SLOW:
            return {**full, "repeats": args.huge_repeats}
        limit = args.slow_query_limit
        return {**full, "limit": limit, "note": f"{engine} runs the 2,000-word query once (abandoned at {limit:.0f} s)"}
    if engine == "rank_bm25" and (not synthetic or (name == "short" and n_docs > 100_000)):
        n = min(args.slow_queries, count)
        return {**full, "n": n}
    if engine in SLOW and name == "long" and synthetic:
        return {**full, "n": min(args.slow_long_queries, count), "budget": args.slow_budget,
                "note": f"{engine} runs the long set's first {min(args.slow_long_queries, count)} queries at most, "
                        f"stopping after {args.slow_budget:.0f} s, with no warm-up query"}  # fmt: skip
    return full


def worker_sets(engine: str, sets: dict[str, list[dict]], plans: dict[str, dict], hepth: bool) -> list[dict]:
    """The sets ``engine`` runs, cut to its plan, as the workers read them."""
    out = []
    for name, qs in sets.items():
        p = plans[name]
        if not p["n"]:
            continue
        texts = [q["text"] for q in qs[: p["n"]] for _ in range(p["repeats"])]
        warm = name != "huge" and p["budget"] is None
        out.append({"name": name, "texts": texts, "warm": warm, "budget": p["budget"], "limit": p["limit"],
                    "full": name != "huge", "default": hepth and name == "long"})  # fmt: skip
    return out


def reusable(record: Path, corpus_key: dict) -> dict | None:
    """The build record of an index built earlier from this very corpus (``--reuse-indexes``), or None."""
    if not record.exists():
        return None
    data = json.loads(record.read_text())
    return data if data.get("corpus") == corpus_key and data.get("status") == "ok" else None


def run_corpus(label: str, corpus: Path, sets: dict[str, list[dict]], stats: dict, args, synthetic: bool) -> dict:
    cdir = args.workdir / "indexes" / label
    cdir.mkdir(parents=True, exist_ok=True)
    n_docs = stats["n_docs"]
    stat = corpus.stat()
    corpus_key = {"file": shown(corpus, args.workdir), "bytes": stat.st_size, "mtime": stat.st_mtime}
    first = next(iter(sets.values()))[0]["text"]
    out: dict = {"engines": {}, "plans": {}}
    for engine in args.peers:
        t = time.perf_counter()
        plans = out["plans"][engine] = {n: plan(engine, n, len(qs), n_docs, synthetic, args) for n, qs in sets.items()}
        qfile = cdir / f"queries-{engine}.json"
        qfile.write_text(json.dumps({"sets": worker_sets(engine, sets, plans, not synthetic)}))
        what = ", ".join(f"{p['n']} {n}" if n != "huge" else f"2,000-word ×{p['repeats']}"
                         for n, p in plans.items() if p["n"])  # fmt: skip
        if engine == "rank_bm25":
            print(f"  [{label}] rank_bm25: build + queries ({what}) in one process ...", flush=True)
            r = run_worker("rank_bm25", "run", args.slow_timeout, corpus=corpus, queries=qfile,
                           mem_cap_gb=args.mem_cap_gb)  # fmt: skip
            out["engines"][engine] = {"build": r, "query": r}
        else:
            index = cdir / INDEX_NAMES[engine]
            record = cdir / f"{INDEX_NAMES[engine]}.build.json"
            built = reusable(record, corpus_key) if args.reuse_indexes and index.exists() else None
            if built:
                print(f"  [{label}] {engine}: reusing the index built {built['built_at']} ...", flush=True)
                entry = out["engines"][engine] = {"build": {**built, "reused": True}}
            else:
                print(f"  [{label}] {engine}: build ...", flush=True)
                record.unlink(missing_ok=True)
                entry = out["engines"][engine] = {"build": run_worker(engine, "build", args.timeout, corpus=corpus,
                                                                       index=index)}  # fmt: skip
                if entry["build"]["status"] == "ok":
                    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
                    record.write_text(json.dumps({**entry["build"], "corpus": corpus_key, "built_at": when,
                                                  "retrieval_sources": source_digest()}) + "\n")  # fmt: skip
            if entry["build"]["status"] == "ok":
                print(f"  [{label}] {engine}: queries ({what}), {args.cold_runs} cold starts ...", flush=True)
                entry["query"] = run_worker(engine, "query", args.timeout, index=index, queries=qfile)
                entry["cold"] = cold_start(engine, index, first, args.cold_runs, args.workdir)
                if engine == "retrieval":
                    entry["cold_full"] = cold_start("retrieval-full", index, first, args.cold_runs, args.workdir)
        for part in ("build", "query", "cold"):
            r = out["engines"][engine].get(part)
            if r and r.get("status") != "ok":
                print(f"  [{label}] {engine}: {part} FAILED: {r.get('reason')}", flush=True)
        print(f"  [{label}] {engine}: done in {time.perf_counter() - t:.1f} s", flush=True)
    out["cold_python"] = cold_start("python", Path("-"), "-", args.cold_runs, args.workdir)

    ours = out["engines"].get("retrieval", {}).get("query", {})
    out["notes"] = []
    for engine, entry in out["engines"].items():
        runs = entry.get("query", {}).get("sets", {}).get("huge", {}).get("top", [])
        if any(top != runs[0] for top in runs[1:]):
            out["notes"].append(f"**{engine}'s runs of the 2,000-word query did not all return the same top 10**")
    if ours.get("status") == "ok" and "bm25s" in args.peers and not args.no_exact:
        ref = cdir / "retrieval-top.json"
        # our list for each query (the 2,000-word query's first run: its repeats return the same list)
        tops = {name: ours["sets"][name]["top"][: len(qs)] for name, qs in sets.items() if name in ours["sets"]}
        ref.write_text(json.dumps(tops))
        qfile = cdir / "queries-exact.json"
        qfile.write_text(json.dumps({"sets": [{"name": n, "texts": [q["text"] for q in sets[n]]} for n in tops]}))
        print(f"  [{label}] exactness: float64 bm25s over "
              f"{', '.join(f'{len(sets[n])} {n}' for n in tops)} queries ...", flush=True)  # fmt: skip
        r = run_worker("bm25s", "exact", args.timeout, corpus=corpus, queries=qfile, reference=ref)
        if r["status"] == "ok":
            out["exactness"] = {
                n: exactness([q["text"] for q in sets[n]], tops[n], r["sets"][n]) for n in tops if n in r["sets"]
            }
        else:
            out["exactness"] = {"status": "failed", "reason": r["reason"]}
    return out


def _key(name: str, base: str) -> str:
    """The figure's key: the short set keeps the names it had before the long sets came."""
    if name == "short":
        return {"p50": "lex_p50", "p95": "lex_p95", "identical": "identical_top10"}.get(base, base)
    return f"{name}_{base}"


def figures(run: dict, postings: dict[str, list[int]], total_postings: int, n_papers: int) -> dict[str, dict]:
    """Per engine, the figures of the tables (missing where an engine has no such figure)."""
    out: dict[str, dict] = {}
    ours_sets = run["engines"].get("retrieval", {}).get("query", {}).get("sets", {})
    for engine, entry in run["engines"].items():
        b, q, c = entry.get("build", {}), entry.get("query", {}), entry.get("cold", {})
        f: dict = {"status": b.get("status"), "reason": b.get("reason") or q.get("reason"), "n": {},
                   "skipped": [n for n, p in run["plans"][engine].items() if not p["n"]]}  # fmt: skip
        if b.get("status") == "ok":
            f.update(build_s=b["build_seconds"], build_pps=n_papers / b["build_seconds"], build_rss=b["build_rss_mib"])
            if "size_bytes" in b:
                f.update(size_mb=b["size_bytes"] / 1e6, size_texts_mb=b["size_with_texts_bytes"] / 1e6,
                         bytes_per_posting=b["size_bytes"] / total_postings)  # fmt: skip
            if b.get("reused"):
                f["reused"] = {"built_at": b["built_at"], "retrieval_sources": b.get("retrieval_sources")}
        if q.get("status") == "ok":
            f["query_rss"] = q["query_rss_mib"]
            for name, res in q["sets"].items():
                f["n"][name] = len(res["seconds"])
                if name == "huge":
                    f["huge_ms"] = statistics.median(res["seconds"]) * 1000
                    if "abandoned_after" in res:
                        f["huge_abandoned"] = True
                else:
                    lat = latency(res["seconds"], postings[name][: len(res["seconds"])])
                    f.update({_key(name, "p50"): lat["p50_ms"], _key(name, "p95"): lat["p95_ms"],
                              _key(name, "pps"): lat["postings_per_s"] / 1e6})  # fmt: skip
                for kind in ("full", "default"):
                    if f"{kind}_seconds" in res:
                        lat = latency(res[f"{kind}_seconds"], postings[name][: len(res[f"{kind}_seconds"])])
                        f.update({_key(name, f"{kind}_p50"): lat["p50_ms"], _key(name, f"{kind}_p95"): lat["p95_ms"]})
                mine = ours_sets.get(name, {}).get("top")
                if mine is not None and engine != "retrieval":
                    # abandoned queries (top None) left out
                    pairs = [(a, b) for a, b in zip(mine, res["top"][:1] if name == "huge" else res["top"],
                                                    strict=False) if b is not None]  # fmt: skip
                    if pairs:
                        f[_key(name, "overlap")] = 100 * overlap([a for a, _ in pairs], [b for _, b in pairs])
                        f[_key(name, "identical")] = sum([p for p, _ in a] == [p for p, _ in b] for a, b in pairs)
        if c.get("status") == "ok":
            f.update(cold_ms=c["spawn_to_answer_ms"], cold_in_ms=c["in_process_ms"], cold_rss=c["rss_mib"])
        if entry.get("cold_full", {}).get("status") == "ok":
            f.update(cold_full_ms=entry["cold_full"]["spawn_to_answer_ms"], cold_full_rss=entry["cold_full"]["rss_mib"])
        out[engine] = f
    kernel = run["engines"].get("bm25s", {}).get("query", {}).get("kernel_sets")
    if kernel:  # bm25s's kernel (get_scores + argpartition), timed in the same worker: a column of its own
        f = {"status": "ok", "n": {}, "skipped": []}
        for name, res in kernel.items():
            f["n"][name] = len(res["seconds"])
            if name == "huge":
                f["huge_ms"] = statistics.median(res["seconds"]) * 1000
            else:
                lat = latency(res["seconds"], postings[name][: len(res["seconds"])])
                f.update({_key(name, "p50"): lat["p50_ms"], _key(name, "p95"): lat["p95_ms"],
                          _key(name, "pps"): lat["postings_per_s"] / 1e6})  # fmt: skip
        out[KERNEL] = f
    return out


#: The column of bm25s's scoring kernel (``bench/peers.py``: ``get_scores`` and an argpartition top 10).
KERNEL = "bm25s kernel"


# -- tables ---------------------------------------------------------------------------------------------------
ROWS = [  # key, label, format, the query set it belongs to (None: none), subset-sensitive
    ("build_s", "build (s)", "{:,.1f}", None, False),
    ("build_pps", "build (papers/s)", "{:,.0f}", None, False),
    ("build_rss", "build peak RSS (MiB)", "{:,.0f}", None, False),
    ("size_mb", "index on disk (MB)", "{:,.1f}", None, False),
    ("size_texts_mb", "index + titles/abstracts on disk (MB)", "{:,.1f}", None, False),
    ("bytes_per_posting", "index bytes per posting", "{:,.2f}", None, False),
    ("cold_ms", "cold open + first query, from spawn (ms)", "{:,.1f}", None, False),
    ("cold_in_ms", "  of which imports + open + query (ms)", "{:,.1f}", None, False),
    ("cold_rss", "cold process peak RSS (MiB)", "{:,.1f}", None, False),
    ("lex_p50", "lexical top-10 p50 (ms)", "{:,.2f}", "short", True),
    ("lex_p95", "lexical top-10 p95 (ms)", "{:,.2f}", "short", True),
    ("pps", "postings/s, median (M)", "{:,.3g}", "short", True),
    ("long_p50", "long queries lexical top-10 p50 (ms)", "{:,.2f}", "long", True),
    ("long_p95", "long queries lexical top-10 p95 (ms)", "{:,.2f}", "long", True),
    ("long_pps", "long queries postings/s, median (M)", "{:,.3g}", "long", True),
    ("huge_ms", "2,000-word query, median (ms)", "{:,.1f}", "huge", False),
    ("query_rss", "query process peak RSS (MiB)", "{:,.0f}", None, False),
    ("full_p50", "full search p50 (ms)", "{:,.2f}", "short", False),
    ("full_p95", "full search p95 (ms)", "{:,.2f}", "short", False),
    ("long_full_p50", "long queries full search p50 (ms)", "{:,.2f}", "long", False),
    ("long_full_p95", "long queries full search p95 (ms)", "{:,.2f}", "long", False),
    ("long_default_p50", "default search (`search(q)`), title+abstract queries p50 (ms)", "{:,.2f}", "long", False),
    ("long_default_p95", "default search (`search(q)`), title+abstract queries p95 (ms)", "{:,.2f}", "long", False),
    ("cold_full_ms", "cold open + first full search (ms)", "{:,.1f}", None, False),
    ("overlap", "top-10 overlap with ours (%)", "{:.1f}", "short", False),
    ("identical_top10", "queries whose top-10 ids equal ours", "{:,}", "short", False),
    ("long_overlap", "long queries: top-10 overlap with ours (%)", "{:.1f}", "long", False),
    ("long_identical", "long queries whose top-10 ids equal ours", "{:,}", "long", False),
    ("huge_overlap", "2,000-word query: top-10 overlap with ours (%)", "{:.1f}", "huge", False),
]
NO_RATIO = {"overlap", "identical_top10", "long_overlap", "long_identical", "huge_overlap"}
IN_MEMORY = {"size_mb", "size_texts_mb", "bytes_per_posting", "cold_ms", "cold_in_ms", "cold_rss"}


def _subset_value(key: str, name: str, run: dict, n: int, postings: list[int]) -> float | None:
    """Our figure ``key`` of set ``name`` over our first ``n`` queries (for a peer that ran only those)."""
    seconds = run["engines"]["retrieval"]["query"]["sets"][name]["seconds"]
    lat = latency(seconds[:n], postings[:n])
    return {_key(name, "p50"): lat["p50_ms"], _key(name, "p95"): lat["p95_ms"],
            _key(name, "pps"): lat["postings_per_s"] / 1e6}[key]  # fmt: skip


def figures_table(run: dict, figs: dict[str, dict], postings: dict[str, list[int]]) -> tuple[str, list[str]]:
    engines = list(figs)
    peers_ = [e for e in engines if e != "retrieval"]
    ours = figs.get("retrieval", {})
    head = ["figure", *engines, *(f"ours / {p}" for p in peers_ if "retrieval" in figs)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = set()
    for key, label, fmt, name, subset in ROWS:
        if not any(key in f for f in figs.values()):
            continue
        cells = [label]
        for e in engines:
            f = figs[e]
            if key == "build_s" and f.get("status") != "ok":
                cells.append(f"failed: {f.get('reason')}")
            elif key == "huge_ms" and f.get("huge_abandoned"):
                cells.append(f"> {fmt.format(f[key])} (abandoned)")
            elif key in f:
                cells.append(fmt.format(f[key]))
            elif key == "huge_overlap" and f.get("huge_abandoned"):
                cells.append("abandoned")
            elif key in IN_MEMORY and e == "rank_bm25":
                cells.append("in memory")
            elif name in f.get("skipped", ()):
                cells.append("skipped")
            else:
                cells.append("—")
        if "retrieval" in figs:
            for p in peers_:
                mine, theirs = ours.get(key), figs[p].get(key)
                if key in NO_RATIO or mine is None or theirs is None or not theirs:
                    cells.append("")
                    continue
                n, n_ours = figs[p]["n"].get(name), ours["n"].get(name)
                if subset and n and n_ours and n < n_ours:
                    mine = _subset_value(key, name, run, n, postings[name])
                    what = "queries" if name == "short" else f"{name} queries"
                    notes.add(f"ratios against {p} on {what} use our figure over the same first {n} queries")
                bound = "< " if key == "huge_ms" and figs[p].get("huge_abandoned") else ""
                cells.append(f"{bound}{mine / theirs:.3g}")
        lines.append("| " + " | ".join(cells) + " |")
    if KERNEL in figs:
        notes.add(f"{KERNEL}: bm25s's `get_scores` and an argpartition top 10, timed in bm25s's query process "
                  "after its `retrieve()` runs (the same queries)")  # fmt: skip
    for engine, plans in run["plans"].items():
        for name, p in plans.items():
            ran = figs.get(engine, {}).get("n", {}).get(name)
            if p["note"] and (name == "huge" or ran is not None):
                notes.add(p["note"] + (f" (ran {ran})" if name == "long" and ran is not None else ""))
    reused = [f"{e} built {f['reused']['built_at']}" for e, f in figs.items() if f.get("reused")]
    if reused:
        notes.add(f"indexes reused from earlier runs (--reuse-indexes), their build and size figures those runs': "
                  f"{', '.join(reused)}")  # fmt: skip
    return "\n".join(lines), sorted(notes)


def exactness_text(exs: dict | None, titles: dict[str, str]) -> str:
    if not exs:
        return "Exactness check not run (needs both retrieval and bm25s)."
    if exs.get("status") == "failed":
        return f"Exactness check failed to run: {exs['reason']}"
    lines = [
        f"Exactness of our lexical top 10 against bm25s (float64 build, our tokens, score × (k1+1), ties by id, "
        f"tolerance {TOL:g} relative):"
    ]
    for name, ex in exs.items():
        lines.append(
            f"- {titles[name]}: **{ex['exact']} of {ex['queries']} identical**, {ex['tie_equivalent']} equal up to "
            f"ties, **{ex['mismatched']} mismatched**; largest relative score difference "
            f"{ex['max_relative_difference']:.2e}."
        )
        for m in ex["mismatches"][:10]:
            lines.append(f"  - {name} query {m['query']} `{m['text'][:80]}`: " + "; ".join(m["problems"][:4]))
            lines.append(f"    - ours:  {', '.join(f'{p} {s:.9g}' for p, s in m['ours'])}")
            lines.append(f"    - bm25s: {', '.join(f'{p} {s:.9g}' for p, s in m['bm25s'])}")
        if len(ex["mismatches"]) > 10:
            lines.append(f"  - ... {len(ex['mismatches']) - 10} more in scale.json")
    return "\n".join(lines)


def _fmt(value: float, unit: str) -> str:
    if unit == "×":
        return f"{value:.2f}×"
    return f"{value:,.0f} {unit}" if abs(value) >= 100 else f"{value:,.1f} {unit}"


def _distance(measured: float, target: float, upper: bool, unit: str) -> tuple[str, str]:
    met = measured <= target if upper else measured >= target
    gap = abs(measured - target)
    if met:
        return "met", f"{_fmt(gap, unit)} to spare ({measured / target:.2f}× the target)"
    return "**not met**", f"{_fmt(gap, unit)} {'over' if upper else 'short'} ({measured / target:.2f}× the target)"


# corpus ("hepth" or "synthetic": the 500K one), target, key, bound, upper bound?, unit
TARGETS = [
    ("hepth", "title+abstract queries lexical top-10 p50 <= 2× bm25s kernel", "long_p50/kernel", 2, True, "×"),
    ("hepth", "title+abstract queries lexical top-10 p95 <= 3× bm25s kernel", "long_p95/kernel", 3, True, "×"),
    ("hepth", "2,000-word query <= 2× bm25s kernel", "huge_ms/kernel", 2, True, "×"),
    ("synthetic", "50-150-term queries lexical top-10 p50 <= 2× bm25s kernel", "long_p50/kernel", 2, True, "×"),
    ("synthetic", "50-150-term queries lexical top-10 p50 ahead of tantivy", "long_p50/tantivy", 1, True, "×"),
    ("synthetic", "  (for information: 2,000-word query / bm25s kernel)", "huge_ms/kernel", None, True, "×"),
    ("hepth", "title+abstract queries lexical top-10 p50 <= 15 ms", "long_p50", 15, True, "ms"),
    ("hepth", "title+abstract queries lexical top-10 p95 <= 40 ms", "long_p95", 40, True, "ms"),
    ("hepth", "2,000-word query <= 100 ms", "huge_ms", 100, True, "ms"),
    ("hepth", "default search (`search(q)`), title+abstract queries p50 <= 40 ms", "long_default_p50", 40, True, "ms"),
    ("synthetic", "50-150-term queries lexical top-10 p50 <= 50 ms", "long_p50", 50, True, "ms"),
    ("synthetic", "50-150-term queries lexical top-10 p95 <= 150 ms", "long_p95", 150, True, "ms"),
    ("synthetic", "  (for information: 2,000-word query)", "huge_ms", None, True, "ms"),
    ("synthetic", "2-6-term queries lexical top-10 p50 <= 4 ms", "lex_p50", 4, True, "ms"),
    ("synthetic", "2-6-term queries lexical top-10 p95 <= 20 ms", "lex_p95", 20, True, "ms"),
    ("synthetic", "full search (2-6 terms) p50 <= 15 ms", "full_p50", 15, True, "ms"),
    ("synthetic", "full search (2-6 terms) p95 <= 50 ms", "full_p95", 50, True, "ms"),
    ("synthetic", "  (for information: full search, 50-150 terms, p50)", "long_full_p50", None, True, "ms"),
    ("synthetic", "build >= 10,000 papers/s", "build_pps", 10_000, False, "papers/s"),
    ("synthetic", "file <= 2× bm25s's index with its corpus", "size_texts_mb", 2.0, True, "×"),
    ("synthetic", "  (for information: file / bm25s's index without its corpus)", "size_mb", None, True, "×"),
    ("synthetic", "cold open + first lexical query <= 50 ms (from spawn)", "cold_ms", 50, True, "ms"),
    ("synthetic", "cold process peak RSS <= 100 MiB", "cold_rss", 100, True, "MiB"),
    ("synthetic", "  (for information: cold open + first full search <= 50 ms)", "cold_full_ms", 50, True, "ms"),
    ("synthetic", "  (for information: its peak RSS <= 100 MiB)", "cold_full_rss", 100, True, "MiB"),
]
RATIO_TARGETS = {"size_texts_mb", "size_mb"}  # measured as ours / bm25s


def targets_table(corpora: dict[str, dict], synthetic_label: str | None, hepth_label: str | None) -> tuple[str, list]:
    """Each target against its corpus (hepth, or the 500K synthetic one: ``synthetic_label``), with bm25s's
    figure and ours / bm25s beside it where bm25s has one."""
    rows = []
    for where, name, key, target, upper, unit in TARGETS:
        label = hepth_label if where == "hepth" else synthetic_label
        figs = corpora[label]["figures"] if label else {}
        ours, bm = figs.get("retrieval", {}), figs.get("bm25s", {})
        row = {"target": name, "corpus": label or f"(no {where} corpus in this run)", "measured": None, "unit": unit,
               "bm25s": bm.get(key), "status": "not measured", "distance": ""}  # fmt: skip
        value = ours.get(key)
        if "/" in key:  # ours / a peer's figure, measured in the same run
            base, peer = key.split("/")
            theirs = figs.get(KERNEL if peer == "kernel" else peer, {}).get(base)
            value = ours[base] / theirs if ours.get(base) is not None and theirs else None
            row["bm25s"] = None
        elif key in RATIO_TARGETS:
            value = value / bm[key] if value is not None and bm.get(key) else None
            row["bm25s"] = None
        if value is not None:
            row["measured"] = value
            if target is None:
                row["status"] = "for information"
            else:
                row["status"], row["distance"] = _distance(value, target, upper, unit)
        rows.append(row)
    lines = ["| target | corpus | measured | bm25s (ours / bm25s) | status | distance |", "|---|---|---|---|---|---|"]
    for r in rows:
        m = "—" if r["measured"] is None else _fmt(r["measured"], r["unit"])
        b = ""
        if r["bm25s"] and r["measured"] is not None:
            b = f"{_fmt(r['bm25s'], r['unit'])} ({r['measured'] / r['bm25s']:.3g}×)"
        lines.append(f"| {r['target']} | {r['corpus']} | {m} | {b} | {r['status']} | {r['distance']} |")
    return "\n".join(lines), rows


# -- machine and settings -------------------------------------------------------------------------------------
def source_digest() -> str:
    """A digest of our package's sources and migrations: the run records it at its start and end, and warns
    when they differ (the code measured changed during the run)."""
    import hashlib

    digest = hashlib.sha256()
    for path in sorted([*(REPO / "retrieval").rglob("*.py"), *(REPO / "migrations").rglob("*.py")]):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def shown(path: Path, workdir: Path) -> str:
    """``path`` as the results record it: inside the work directory by its name there, the shared data by its
    place beside the repository, the work directory itself with the home folder as ``~``; never a machine's
    absolute path."""
    path = Path(path).resolve()
    for base, label in ((Path(workdir).resolve(), "<workdir>"), (REPO.parent.resolve(), "..")):
        if path == base or base in path.parents:
            return f"{label}/{path.relative_to(base)}" if path != base else label
    home = Path.home().resolve()
    return f"~/{path.relative_to(home)}" if home in path.parents else path.name


def machine() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    cpu = "unknown"
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = 0
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemTotal"):
                ram = int(line.split()[1]) * 1024
    versions = {}
    for pkg in ("retrieval", "bm25s", "tantivy", "rank-bm25", "numpy", "scipy"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    return {"platform": platform.platform(), "cpu": cpu, "cores": os.cpu_count(), "ram_gib": round(ram / 2**30, 1),
            "python": platform.python_version(), "sqlite": sqlite3.sqlite_version, "packages": versions,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}  # fmt: skip


NOTES = """\
Notes. Ratios are ours / peer: below 1 is better for ours on times, sizes and RSS, above 1 on papers/s and \
postings/s. Latencies are warm (every file of the engine's index read once just before its queries, so it is \
in the OS page cache, and one query first), one query at a time, the same queries in the same order; \
postings/s is the sum of the query's distinct terms' document frequencies over its latency, median over queries. \
"Long queries": 50-150 distinct terms drawn like abstracts on synthetic corpora, whole titles + abstracts on \
hepth; the 2,000-word query: median of its runs (FTS5 and rank_bm25: one run, "abandoned" when stopped at its \
limit, its figure then a lower bound). \
Cold figures run a fresh interpreter with the OS page cache warm (caches are not dropped); "from spawn" includes \
the interpreter's own start (given under each table). bm25s: float32, numpy backend, one \
thread, fed our tokens; index = its save() directory, + texts = saved with its corpus. FTS5: one column, \
unicode61 remove_diacritics 0, its own bm25() (k1=1.2, b=0.75), OR of the query's terms, ORDER BY rank, after \
'optimize'. tantivy: default tokenizer, default writer (threads chosen by tantivy: both cores here), body stored, \
OR of term queries, k1=1.2. rank_bm25: BM25Okapi k1=1.5, b=0.75, idf ln((N-df+0.5)/(df+0.5)) with negative \
values floored at 0.25 × mean idf (ours adds 1 inside the log), pure Python over per-document dicts, in memory \
only (no index file, no cold start). Overlap with FTS5, tantivy and rank_bm25 is for information: their \
formulas differ from ours by design."""


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        peers.worker_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,500000", help="synthetic corpus sizes (default 100000,500000)")
    parser.add_argument("--hepth", action=argparse.BooleanOptionalAction, default=True, help="the real hepth corpus")
    parser.add_argument("--peers", default=",".join(peers.ENGINES), help="engines to run (default all)")
    parser.add_argument("--queries", type=int, default=200, help="short queries per corpus, hepth's (default 200)")
    parser.add_argument("--long-queries", type=int, default=100, help="50-150-term queries per synthetic corpus")
    parser.add_argument("--huge-repeats", type=int, default=5, help="timed runs of the 2,000-word query (default 5)")
    parser.add_argument("--query-seed", type=int, default=7)
    parser.add_argument("--seed", type=int, default=42, help="synthetic corpus seed (default 42)")
    parser.add_argument("--workdir", type=Path, default=Path.home() / ".cache" / "retrieval" / "bench")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 20K papers, 30 short and 20 long queries, 3 cold starts, 3 runs of the "
                             "2,000-word query, FTS5 and rank_bm25 cut further (10, 5, 10 s)")  # fmt: skip
    parser.add_argument("--reuse-indexes", action="store_true",
                        help="reuse an index this harness built earlier from the same corpus file (its build "
                             "figures are then that build's); for partial runs, not for the record")  # fmt: skip
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--slow-queries", type=int, default=30, help="rank_bm25's query cap beyond 100K / on hepth")
    parser.add_argument("--slow-long-queries", type=int, default=10,
                        help="FTS5's and rank_bm25's cap on synthetic long queries (default 10)")  # fmt: skip
    parser.add_argument("--slow-budget", type=float, default=180,
                        help="seconds after which FTS5 and rank_bm25 stop a synthetic long set")  # fmt: skip
    parser.add_argument("--slow-query-limit", type=float, default=60,
                        help="seconds after which FTS5 and rank_bm25 abandon the 2,000-word query")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=7200, help="seconds per worker (default 7200)")
    parser.add_argument("--slow-timeout", type=float, default=2400, help="seconds for rank_bm25 (default 2400)")
    parser.add_argument("--mem-cap-gb", type=float, default=16, help="rank_bm25's address-space cap (GiB)")
    parser.add_argument("--no-exact", action="store_true", help="skip the exactness check against bm25s")
    args = parser.parse_args()
    args.workdir = args.workdir.expanduser().resolve()
    if args.quick:
        quick = (("sizes", "20000"), ("queries", 30), ("long_queries", 20), ("cold_runs", 3), ("huge_repeats", 3),
                 ("slow_queries", 10), ("slow_long_queries", 5), ("slow_query_limit", 10))  # fmt: skip
        for name, value in quick:
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    out_dir = args.out or (args.workdir / "results-quick" if args.quick else RESULTS)
    sizes = [int(s.lower().replace("k", "000")) for s in args.sizes.split(",") if s.strip()]
    args.peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = set(args.peers) - set(peers.ENGINES)
    if unknown:
        sys.exit(f"unknown peers {sorted(unknown)}: choose from {', '.join(peers.ENGINES)}")
    args.peers = [e for e in peers.ENGINES if e in args.peers]  # ours first: the others are compared with it

    from retrieval.text import fold, tokenise

    started = time.perf_counter()
    digest = source_digest()
    result: dict = {"settings": {"sizes": sizes, "hepth": args.hepth, "peers": args.peers, "queries": args.queries,
                                 "long_queries": args.long_queries, "huge_words": qsets.HUGE_WORDS,
                                 "huge_repeats": args.huge_repeats, "query_seed": args.query_seed,
                                 "corpus_seed": args.seed, "quick": args.quick, "cold_runs": args.cold_runs,
                                 "rank_bm25_query_cap": args.slow_queries,
                                 "slow_long_query_cap": args.slow_long_queries, "slow_budget_s": args.slow_budget,
                                 "slow_query_limit_s": args.slow_query_limit, "reuse_indexes": args.reuse_indexes,
                                 "k1": peers.K1, "b": peers.B, "top_k": peers.TOP_K,
                                 "workdir": shown(args.workdir, REPO),
                                 "command": " ".join(["python bench/scale.py", *sys.argv[1:]])},
                    "machine": machine(), "corpora": {}}  # fmt: skip
    jobs = [(f"synthetic-{n // 1000}K", n) for n in sizes]
    if args.hepth:
        if (HEPTH / "papers.jsonl").exists() and (HEPTH / "queries-dev.jsonl").exists():
            jobs.append(("hepth", None))
        else:
            print(f"skipping hepth: no papers.jsonl / queries-dev.jsonl in {HEPTH} (the shared data folder)")
    md = [f"# Scale benchmark ({result['machine']['date'][:10]})", "",
          f"`{result['settings']['command']}` on {result['machine']['cpu']}, {result['machine']['cores']} cores, "
          f"{result['machine']['ram_gib']} GiB RAM; Python {result['machine']['python']}, SQLite "
          f"{result['machine']['sqlite']}; " + ", ".join(f"{k} {v}" for k, v in result["machine"]["packages"].items()
                                                        if v) + f" (sources {digest})."]  # fmt: skip
    for label, n in jobs:
        print(f"\n== {label} ==", flush=True)
        t = time.perf_counter()
        seed = args.query_seed
        if n is None:
            corpus = HEPTH / "papers.jsonl"
            stats = qsets.doc_freqs(corpus, args.workdir / "hepth")
            sets = {"long": qsets.hepth_queries(HEPTH / "queries-dev.jsonl", args.queries),
                    "huge": [qsets.huge_query_hepth(corpus, HEPTH / "queries-dev.jsonl", seed)]}  # fmt: skip
            base = args.workdir / "hepth"
            paths = {"long": base / f"queries-dev-first{len(sets['long'])}.json",
                     "huge": base / f"query-{qsets.HUGE_WORDS}-words-seed{seed}.json"}  # fmt: skip
            titles = HEPTH_TITLES
        else:
            corpus = qsets.ensure_synthetic(args.workdir, n, args.seed)
            stats = qsets.doc_freqs(corpus, args.workdir)
            sets = {"short": qsets.synthetic_queries(stats, args.queries, seed),
                    "long": qsets.long_queries(stats, args.long_queries, seed),
                    "huge": [qsets.huge_query_synthetic(stats, seed)]}  # fmt: skip
            stem = corpus.stem
            paths = {"short": corpus.with_name(f"{stem}.queries-{args.queries}-seed{seed}.json"),
                     "long": corpus.with_name(f"{stem}.long-queries-{args.long_queries}-seed{seed}.json"),
                     "huge": corpus.with_name(f"{stem}.query-{qsets.HUGE_WORDS}-words-seed{seed}.json")}  # fmt: skip
            titles = SET_TITLES
        print(f"  corpus: {stats['n_docs']:,} papers, {len(stats['df']):,} terms, {stats['postings']:,} postings")
        summaries, described = {}, []
        for name, qs in sets.items():
            qsets.annotate(qs, stats)
            paths[name].write_text(json.dumps({"queries": qs}, indent=1))
            bad = [q["text"][:60] for q in qs if peers._TOKEN.findall(fold(q["text"])) != tokenise(q["text"])]
            if bad:
                sys.exit(f"the peers' inline tokeniser disagrees with retrieval.text.tokenise on {bad[:3]}")
            summaries[name] = qsets.describe(qs, stats)
            text = qsets.describe_one(qs[0], stats) if name == "huge" else qsets.describe_text(summaries[name])
            described.append(f"**{titles[name]}** (`{shown(paths[name], args.workdir)}`): {text}")
        for line in described:
            print("  " + line.replace("**", "").replace("\n", "\n    "), flush=True)
        run = run_corpus(label, corpus, sets, stats, args, synthetic=n is not None)
        postings = {name: [q["postings"] for q in qs] for name, qs in sets.items()}
        figs = figures(run, postings, stats["postings"], stats["n_docs"])
        table, notes = figures_table(run, figs, postings)
        notes += run["notes"]
        python_ms = run["cold_python"].get("spawn_to_answer_ms", float("nan"))
        ours_build = run["engines"].get("retrieval", {}).get("build", {})
        if ours_build.get("postings") not in (None, stats["postings"]):
            notes.append(f"our index counts {ours_build['postings']:,} postings, the harness {stats['postings']:,}")
        reused = figs.get("retrieval", {}).get("reused")
        if reused and reused.get("retrieval_sources") != digest:
            notes.append(f"**our index was built by other sources ({reused.get('retrieval_sources')}) than this "
                         f"run's ({digest})**: rebuild it (no --reuse-indexes) if its format changed")  # fmt: skip
        section = [
            f"## {label}: {stats['n_docs']:,} papers, {len(stats['df']):,} terms, {stats['postings']:,} postings",
            "",
            *(line.replace("\n", "  \n") + "\n" for line in described),
            table,
            "",
            *(f"- {note}" for note in notes),
            f"- cold figures include the interpreter's own start: {python_ms:.0f} ms for `python -c pass`; their "
            f"query is the first of the {titles[next(iter(sets))]}",
            "",
            exactness_text(run.get("exactness"), titles),
        ]
        print("\n" + "\n".join(section), flush=True)
        md += ["", *section]
        engines_raw = {}
        for engine, entry in run["engines"].items():
            raw = {}
            for part, r in entry.items():
                raw[part] = dict(r) if isinstance(r, dict) else r
                if isinstance(r, dict) and "sets" in r:
                    raw[part]["sets"] = {k: {f: v for f, v in s.items() if f != "top"} for k, s in r["sets"].items()}
            engines_raw[engine] = raw
        result["corpora"][label] = {
            "corpus": shown(corpus, args.workdir), "papers": stats["n_docs"], "terms": len(stats["df"]),
            "tokens": stats["n_tokens"], "postings": stats["postings"],
            "query_sets": {name: {"title": titles[name], "file": shown(paths[name], args.workdir),
                                  "summary": summaries[name], "postings": postings[name]} for name in sets},
            "plans": run["plans"], "figures": figs, "engines": engines_raw, "cold_python": run["cold_python"],
            "exactness": run.get("exactness"), "notes": notes, "seconds": time.perf_counter() - t,
        }  # fmt: skip
        print(f"  ({label} took {time.perf_counter() - t:.0f} s)", flush=True)

    print("\n" + NOTES)
    md += ["", NOTES]
    synth = [(label, n) for label, n in jobs if n is not None]
    hepth = "hepth" if any(n is None for _, n in jobs) else None
    if synth or hepth:
        label, size = (None, None)
        if synth:
            label, size = next(((lb, s) for lb, s in synth if s == TARGET_SIZE), max(synth, key=lambda j: j[1]))
        table, rows = targets_table(result["corpora"], label, hepth)
        caveat = "" if size in (None, TARGET_SIZE) else (
            f" The synthetic targets are set for the 500K corpus; this run has no 500K corpus, so they are shown "
            f"against {label} for orientation only."
        )  # fmt: skip
        section = ["## Targets", "", f"Ours, each target met or not and by how much, on the corpus named.{caveat}", "",
                   table]  # fmt: skip
        print("\n" + "\n".join(section))
        md += ["", *section]
        result["targets"] = {"synthetic_corpus": label, "hepth": hepth, "rows": rows}
    result["seconds"] = time.perf_counter() - started
    result["retrieval_source_digest"] = {"start": digest, "end": source_digest()}
    if result["retrieval_source_digest"]["end"] != digest:
        warning = ("**Warning: the retrieval package's sources changed during this run**, so the figures for ours "
                   "may mix two versions of the code: run it again.")  # fmt: skip
        print("\n" + warning.replace("**", ""))
        md += ["", warning]
    md += ["", f"Whole run: {result['seconds'] / 60:.1f} min. Raw numbers: scale.json."]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scale.json").write_text(json.dumps(result, indent=1) + "\n")
    (out_dir / "scale.md").write_text("\n".join(md) + "\n")
    print(f"\nwrote {out_dir / 'scale.md'} and {out_dir / 'scale.json'} ({result['seconds']:.0f} s in all)")


if __name__ == "__main__":
    main()
