"""Scale benchmark: ours against bm25s, SQLite FTS5, tantivy and rank_bm25 on 100K/500K synthetic papers and hepth.

    python bench/scale.py                                   # 100K and 500K synthetic, hepth, every peer
    python bench/scale.py --sizes 100000 --no-hepth         # one size
    python bench/scale.py --quick                           # smoke run: 20K papers, 30 queries (seconds)
    python bench/scale.py --peers retrieval,bm25s --queries 50 --workdir /tmp/bench

Every engine builds and queries the same corpus with the same queries in the same order, each step in its own
process (bench/peers.py), so its peak RSS is its own; the figures are measured side by side in one run and each
table has a ratio column ours / peer. Corpora, query sets and every index live in --workdir
(default ~/.cache/retrieval/bench), never in the repository; a generated corpus is reused when its size and seed
match. The exactness check compares our lexical top 10 with bm25s's (float64 build, same tokens, scores times
(k1 + 1)) for every query. Results: bench/results/scale.json (raw numbers, machine) and bench/results/scale.md (the
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
def run_corpus(label: str, corpus: Path, qset: list[dict], stats: dict, args, synthetic: bool) -> dict:
    cdir = args.workdir / "indexes" / label
    cdir.mkdir(parents=True, exist_ok=True)
    qfile = cdir / "queries.json"
    qfile.write_text(json.dumps({"queries": qset}))
    texts = [q["text"] for q in qset]
    out: dict = {"engines": {}}
    for engine in args.peers:
        t = time.perf_counter()
        if engine == "rank_bm25":
            limit = None if synthetic and stats["n_docs"] <= 100_000 else min(args.slow_queries, len(qset))
            print(f"  [{label}] rank_bm25: build + {limit or len(qset)} queries in one process ...", flush=True)
            r = run_worker("rank_bm25", "run", args.slow_timeout, corpus=corpus, queries=qfile, limit=limit,
                           mem_cap_gb=args.mem_cap_gb)  # fmt: skip
            out["engines"][engine] = {"build": r, "query": r, "limit": limit}
        else:
            index = cdir / INDEX_NAMES[engine]
            print(f"  [{label}] {engine}: build ...", flush=True)
            entry = out["engines"][engine] = {"build": run_worker(engine, "build", args.timeout, corpus=corpus,
                                                                   index=index)}  # fmt: skip
            if entry["build"]["status"] == "ok":
                print(f"  [{label}] {engine}: {len(qset)} queries, {args.cold_runs} cold starts ...", flush=True)
                entry["query"] = run_worker(engine, "query", args.timeout, index=index, queries=qfile)
                entry["cold"] = cold_start(engine, index, texts[0], args.cold_runs, args.workdir)
                if engine == "retrieval":
                    entry["cold_full"] = cold_start("retrieval-full", index, texts[0], args.cold_runs, args.workdir)
        for part in ("build", "query", "cold"):
            r = out["engines"][engine].get(part)
            if r and r.get("status") != "ok":
                print(f"  [{label}] {engine}: {part} FAILED: {r.get('reason')}", flush=True)
        print(f"  [{label}] {engine}: done in {time.perf_counter() - t:.1f} s", flush=True)
    out["cold_python"] = cold_start("python", Path("-"), "-", args.cold_runs, args.workdir)

    ours = out["engines"].get("retrieval", {}).get("query", {})
    if ours.get("status") == "ok" and "bm25s" in args.peers and not args.no_exact:
        ref = cdir / "retrieval-top.json"
        ref.write_text(json.dumps(ours["top"]))
        print(f"  [{label}] exactness: float64 bm25s over {len(qset)} queries ...", flush=True)
        r = run_worker("bm25s", "exact", args.timeout, corpus=corpus, queries=qfile, reference=ref)
        if r["status"] == "ok":
            out["exactness"] = exactness(texts, ours["top"], r["queries"])
        else:
            out["exactness"] = {"status": "failed", "reason": r["reason"]}
    return out


def figures(run: dict, postings: list[int], total_postings: int, n_papers: int) -> dict[str, dict]:
    """Per engine, the figures of the tables (None where an engine has no such figure)."""
    out: dict[str, dict] = {}
    ours_top = run["engines"].get("retrieval", {}).get("query", {}).get("top")
    for engine, entry in run["engines"].items():
        b, q, c = entry.get("build", {}), entry.get("query", {}), entry.get("cold", {})
        f: dict = {"status": b.get("status"), "reason": b.get("reason") or q.get("reason")}
        if b.get("status") == "ok":
            f.update(build_s=b["build_seconds"], build_pps=n_papers / b["build_seconds"], build_rss=b["build_rss_mib"])
            if "size_bytes" in b:
                f.update(size_mb=b["size_bytes"] / 1e6, size_texts_mb=b["size_with_texts_bytes"] / 1e6,
                         bytes_per_posting=b["size_bytes"] / total_postings)  # fmt: skip
        if q.get("status") == "ok":
            lat = latency(q["seconds"], postings[: len(q["seconds"])])
            f.update(lex_p50=lat["p50_ms"], lex_p95=lat["p95_ms"], pps=lat["postings_per_s"] / 1e6,
                     query_rss=q["query_rss_mib"], n_queries=len(q["seconds"]))  # fmt: skip
            if "full_seconds" in q:
                full = latency(q["full_seconds"], postings)
                f.update(full_p50=full["p50_ms"], full_p95=full["p95_ms"])
            if ours_top is not None and engine != "retrieval":
                f["overlap"] = 100 * overlap(ours_top, q["top"])
                f["identical_top10"] = sum(
                    [p for p, _ in a] == [p for p, _ in b] for a, b in zip(ours_top, q["top"], strict=False)
                )
        if c.get("status") == "ok":
            f.update(cold_ms=c["spawn_to_answer_ms"], cold_in_ms=c["in_process_ms"], cold_rss=c["rss_mib"])
        if entry.get("cold_full", {}).get("status") == "ok":
            f.update(cold_full_ms=entry["cold_full"]["spawn_to_answer_ms"], cold_full_rss=entry["cold_full"]["rss_mib"])
        out[engine] = f
    return out


# -- tables ---------------------------------------------------------------------------------------------------
ROWS = [  # key, label, format, subset-sensitive (ratio recomputed over the peer's queries)
    ("build_s", "build (s)", "{:,.1f}", False),
    ("build_pps", "build (papers/s)", "{:,.0f}", False),
    ("build_rss", "build peak RSS (MiB)", "{:,.0f}", False),
    ("size_mb", "index on disk (MB)", "{:,.1f}", False),
    ("size_texts_mb", "index + titles/abstracts on disk (MB)", "{:,.1f}", False),
    ("bytes_per_posting", "index bytes per posting", "{:,.2f}", False),
    ("cold_ms", "cold open + first query, from spawn (ms)", "{:,.1f}", False),
    ("cold_in_ms", "  of which imports + open + query (ms)", "{:,.1f}", False),
    ("cold_rss", "cold process peak RSS (MiB)", "{:,.1f}", False),
    ("lex_p50", "lexical top-10 p50 (ms)", "{:,.2f}", True),
    ("lex_p95", "lexical top-10 p95 (ms)", "{:,.2f}", True),
    ("pps", "postings/s, median (M)", "{:,.3g}", True),
    ("query_rss", "query process peak RSS (MiB)", "{:,.0f}", False),
    ("full_p50", "full search p50 (ms)", "{:,.2f}", False),
    ("full_p95", "full search p95 (ms)", "{:,.2f}", False),
    ("cold_full_ms", "cold open + first full search (ms)", "{:,.1f}", False),
    ("overlap", "top-10 overlap with ours (%)", "{:.1f}", False),
    ("identical_top10", "queries whose top-10 ids equal ours", "{:,}", False),
]


def _subset_value(key: str, run: dict, n: int, postings: list[int]) -> float | None:
    """Our figure ``key`` over our first ``n`` queries (for a peer that ran only those)."""
    q = run["engines"]["retrieval"]["query"]
    lat = latency(q["seconds"][:n], postings[:n])
    return {"lex_p50": lat["p50_ms"], "lex_p95": lat["p95_ms"], "pps": lat["postings_per_s"] / 1e6}[key]


def figures_table(run: dict, figs: dict[str, dict], postings: list[int]) -> tuple[str, list[str]]:
    engines = list(figs)
    peers_ = [e for e in engines if e != "retrieval"]
    ours = figs.get("retrieval", {})
    head = ["figure", *engines, *(f"ours / {p}" for p in peers_ if "retrieval" in figs)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = set()
    for key, label, fmt, subset in ROWS:
        if not any(key in f for f in figs.values()):
            continue
        cells = [label]
        for e in engines:
            f = figs[e]
            if key == "build_s" and f.get("status") != "ok":
                cells.append(f"failed: {f.get('reason')}")
            elif key in f:
                cells.append(fmt.format(f[key]))
            elif key in ("size_mb", "size_texts_mb", "bytes_per_posting", "cold_ms", "cold_in_ms", "cold_rss") and (
                e == "rank_bm25"
            ):
                cells.append("in memory")
            else:
                cells.append("—")
        if "retrieval" in figs:
            for p in peers_:
                mine, theirs = ours.get(key), figs[p].get(key)
                if key in ("overlap", "identical_top10") or mine is None or theirs is None or not theirs:
                    cells.append("")
                    continue
                n = figs[p].get("n_queries")
                if subset and n and n < ours.get("n_queries", n):
                    mine = _subset_value(key, run, n, postings)
                    notes.add(f"ratios against {p} use our figure over the same first {n} queries")
                cells.append(f"{mine / theirs:.3g}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), sorted(notes)


def exactness_text(ex: dict | None) -> str:
    if not ex:
        return "Exactness check not run (needs both retrieval and bm25s)."
    if ex.get("status") == "failed":
        return f"Exactness check failed to run: {ex['reason']}"
    lines = [
        f"Exactness of our lexical top 10 against bm25s (float64 build, our tokens, score × (k1+1), ties by id, "
        f"tolerance {ex['tolerance']:g} relative): **{ex['exact']} of {ex['queries']} queries identical**, "
        f"{ex['tie_equivalent']} equal up to ties, **{ex['mismatched']} mismatched**; largest relative score "
        f"difference {ex['max_relative_difference']:.2e}."
    ]
    for m in ex["mismatches"][:10]:
        lines.append(f"- query {m['query']} `{m['text'][:80]}`: " + "; ".join(m["problems"][:4]))
        lines.append(f"  - ours:  {', '.join(f'{p} {s:.9g}' for p, s in m['ours'])}")
        lines.append(f"  - bm25s: {', '.join(f'{p} {s:.9g}' for p, s in m['bm25s'])}")
    if len(ex["mismatches"]) > 10:
        lines.append(f"- ... {len(ex['mismatches']) - 10} more in scale.json")
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


def targets_table(label: str, figs: dict[str, dict]) -> tuple[str, list[dict]]:
    ours, bm = figs.get("retrieval", {}), figs.get("bm25s", {})
    rows = []

    def add(name, key, target, upper, unit, value=None):
        v = ours.get(key) if value is None else value
        if v is None:
            rows.append({"target": name, "measured": None, "status": "not measured", "distance": ""})
            return
        status, dist = _distance(v, target, upper, unit)
        rows.append({"target": name, "measured": v, "unit": unit, "status": status, "distance": dist})

    add("lexical top-10 p50 <= 5 ms", "lex_p50", 5, True, "ms")
    add("lexical top-10 p95 <= 50 ms", "lex_p95", 50, True, "ms")
    add("full search p50 <= 20 ms", "full_p50", 20, True, "ms")
    add("build >= 10,000 papers/s", "build_pps", 10_000, False, "papers/s")
    if ours.get("size_mb") and bm.get("size_mb"):
        add("file <= 2× bm25s's index (without its corpus)", None, 2.0, True, "×", ours["size_mb"] / bm["size_mb"])
        add("  (for information: <= 2× bm25s's index with its corpus)", None, 2.0, True, "×",
            ours["size_texts_mb"] / bm["size_texts_mb"])  # fmt: skip
    else:
        add("file <= 2× bm25s's index", None, 2.0, True, "×", None)
    add("cold open + first lexical query <= 50 ms (from spawn)", "cold_ms", 50, True, "ms")
    add("cold process peak RSS <= 100 MB (MiB)", "cold_rss", 100, True, "MiB")
    add("  (for information: cold open + first full search <= 50 ms)", "cold_full_ms", 50, True, "ms")
    add("  (for information: its peak RSS <= 100 MiB)", "cold_full_rss", 100, True, "MiB")
    lines = [f"| target ({label}) | measured | status | distance |", "|---|---|---|---|"]
    for r in rows:
        m = "—" if r["measured"] is None else _fmt(r["measured"], r["unit"])
        lines.append(f"| {r['target']} | {m} | {r['status']} | {r['distance']} |")
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
postings/s. Latencies are warm (one query first), one query at a time, the same queries in the same order; \
postings/s is the sum of the query's distinct terms' document frequencies over its latency, median over queries. \
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
    parser.add_argument("--queries", type=int, default=200, help="queries per corpus (default 200)")
    parser.add_argument("--query-seed", type=int, default=7)
    parser.add_argument("--seed", type=int, default=42, help="synthetic corpus seed (default 42)")
    parser.add_argument("--workdir", type=Path, default=Path.home() / ".cache" / "retrieval" / "bench")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default bench/results)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20K papers, 30 queries, 3 cold starts")
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--slow-queries", type=int, default=30, help="rank_bm25's query cap beyond 100K / on hepth")
    parser.add_argument("--timeout", type=float, default=7200, help="seconds per worker (default 7200)")
    parser.add_argument("--slow-timeout", type=float, default=2400, help="seconds for rank_bm25 (default 2400)")
    parser.add_argument("--mem-cap-gb", type=float, default=16, help="rank_bm25's address-space cap (GiB)")
    parser.add_argument("--no-exact", action="store_true", help="skip the exactness check against bm25s")
    args = parser.parse_args()
    args.workdir = args.workdir.expanduser().resolve()
    if args.quick:
        args.sizes = "20000" if args.sizes == parser.get_default("sizes") else args.sizes
        args.queries = 30 if args.queries == parser.get_default("queries") else args.queries
        args.cold_runs = 3 if args.cold_runs == parser.get_default("cold_runs") else args.cold_runs
    out_dir = args.out or (args.workdir / "results-quick" if args.quick else RESULTS)
    sizes = [int(s.lower().replace("k", "000")) for s in args.sizes.split(",") if s.strip()]
    args.peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = set(args.peers) - set(peers.ENGINES)
    if unknown:
        sys.exit(f"unknown peers {sorted(unknown)}: choose from {', '.join(peers.ENGINES)}")
    args.peers = [e for e in peers.ENGINES if e in args.peers]  # ours first: the others are compared with it

    from retrieval.text import tokenise

    started = time.perf_counter()
    digest = source_digest()
    result: dict = {"settings": {"sizes": sizes, "hepth": args.hepth, "peers": args.peers, "queries": args.queries,
                                 "query_seed": args.query_seed, "corpus_seed": args.seed, "quick": args.quick,
                                 "cold_runs": args.cold_runs, "rank_bm25_query_cap": args.slow_queries,
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
        if n is None:
            corpus = HEPTH / "papers.jsonl"
            stats = qsets.doc_freqs(corpus, args.workdir / "hepth")
            qset = qsets.hepth_queries(HEPTH / "queries-dev.jsonl", args.queries)
            qpath = args.workdir / "hepth" / f"queries-dev-first{len(qset)}.json"
        else:
            corpus = qsets.ensure_synthetic(args.workdir, n, args.seed)
            stats = qsets.doc_freqs(corpus, args.workdir)
            qset = qsets.synthetic_queries(stats, args.queries, args.query_seed)
            qpath = corpus.with_name(f"{corpus.stem}.queries-{args.queries}-seed{args.query_seed}.json")
        qsets.annotate(qset, stats)
        qpath.write_text(json.dumps({"queries": qset}, indent=1))
        bad = [q["text"][:60] for q in qset if peers._TOKEN.findall(q["text"].lower()) != tokenise(q["text"])]
        if bad:
            sys.exit(f"the peers' inline tokeniser disagrees with retrieval.text.tokenise on {bad[:3]}")
        summary = qsets.describe(qset, stats)
        print(f"  corpus: {stats['n_docs']:,} papers, {len(stats['df']):,} terms, {stats['postings']:,} postings")
        print(f"  query set ({qpath}):\n  " + qsets.describe_text(summary).replace("\n", "\n  "), flush=True)
        run = run_corpus(label, corpus, qset, stats, args, synthetic=n is not None)
        postings = [q["postings"] for q in qset]
        figs = figures(run, postings, stats["postings"], stats["n_docs"])
        table, notes = figures_table(run, figs, postings)
        python_ms = run["cold_python"].get("spawn_to_answer_ms", float("nan"))
        ours_build = run["engines"].get("retrieval", {}).get("build", {})
        if ours_build.get("postings") not in (None, stats["postings"]):
            notes.append(f"our index counts {ours_build['postings']:,} postings, the harness {stats['postings']:,}")
        section = [
            f"## {label}: {stats['n_docs']:,} papers, {len(stats['df']):,} terms, {stats['postings']:,} postings",
            "",
            qsets.describe_text(summary).replace("\n", "  \n"),
            "",
            table,
            "",
            *(f"- {note}" for note in notes),
            f"- cold figures include the interpreter's own start: {python_ms:.0f} ms for `python -c pass`",
            "",
            exactness_text(run.get("exactness")),
        ]
        print("\n" + "\n".join(section), flush=True)
        md += ["", *section]
        engines_raw = {}
        for engine, entry in run["engines"].items():
            raw = {}
            for part, r in entry.items():
                if isinstance(r, dict):
                    raw[part] = {k: v for k, v in r.items() if k != "top"}
                else:
                    raw[part] = r
            engines_raw[engine] = raw
        result["corpora"][label] = {
            "corpus": shown(corpus, args.workdir), "papers": stats["n_docs"], "terms": len(stats["df"]),
            "tokens": stats["n_tokens"], "postings": stats["postings"], "query_file": shown(qpath, args.workdir),
            "query_set": summary, "query_postings": postings, "figures": figs, "engines": engines_raw,
            "cold_python": run["cold_python"], "exactness": run.get("exactness"), "notes": notes,
            "seconds": time.perf_counter() - t,
        }  # fmt: skip
        print(f"  ({label} took {time.perf_counter() - t:.0f} s)", flush=True)

    print("\n" + NOTES)
    md += ["", NOTES]
    synth = [(label, n) for label, n in jobs if n is not None]
    if synth:
        label, n = next(((lb, s) for lb, s in synth if s == TARGET_SIZE), max(synth, key=lambda j: j[1]))
        table, rows = targets_table(label, result["corpora"][label]["figures"])
        caveat = "" if n == TARGET_SIZE else (
            f" The targets are set for the 500K corpus; this run has no 500K corpus, so they are shown against "
            f"{label} for orientation only."
        )  # fmt: skip
        section = ["## Targets", "", f"Ours on {label}, each target met or not and by how much.{caveat}", "", table]
        print("\n" + "\n".join(section))
        md += ["", *section]
        result["targets"] = {"corpus": label, "rows": rows}
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
