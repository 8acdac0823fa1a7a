"""Which query-time signal predicts where graph expansion pays: per-query signals and benefits on every
development set, their correlations, and the recall@10-versus-candidates curve of a gate on each signal against
a random gate.

    python bench/gate.py                                   # hepth, ml-arxiv, cacm from ../shared/data
    python bench/gate.py --sets cacm --limit-queries 10    # a quick look
    python bench/gate.py --out docs/eval/gate              # where gate.md's figures and PNGs go

Each query runs as the evaluation runs it (the citation protocol's cached index, ``retrieval eval``'s protocol and
cache): the shared BM25 list (top 100), then the shipped policy (``RetrievalConfig()``) twice, with the expansion
always on and always off. *Benefit* is recall@10 (and nDCG@10) of always minus never. *Candidates* are the
papers each ranking scored (``hit_count``). A gate that fires on a subset of queries gets always's ranking and
candidates there and never's elsewhere, so its pooled recall@10 and mean candidates for any firing set follow from
the two runs. A gate on a signal fires on the queries of highest (or, for a signal whose correlation with the
benefit is negative, lowest) value first, ties by qid; sweeping its threshold traces a curve from never (fires on
none) to always (fires on all). A random gate firing on a share r of the queries gets, in expectation, r of the
way from never to always on both axes: the straight line between the two ends.

Signals, all observable before any candidate is scored (the walk's own statements run, but not the candidates'
BM25 scoring and blend):

- ``query_terms``: distinct query terms the index has;
- ``survivors``: the current gate's count, seeds whose BM25 reaches 0.3 of the query's attainable score;
- ``top_match``: the best seed's share of the attainable score; ``mean_match``: the seeds' mean share;
- ``score_gap``: 1 - (20th seed's score / best seed's score); ``seed_entropy``: the normalised entropy of the
  seeds' BM25 scores;
- ``seed_degree``: the seeds' mean citation degree (in + out); ``linked_seeds``: the share of seeds with any edge;
- ``added``: papers the expansion would add (after its caps); ``coherence``: the share of added papers reached
  from two or more seeds (the seeds' neighbourhoods overlap).

Writes ``gate-<set>.png`` (the curves) and ``gate.json`` (the tables) into ``--out``, and one record per query
(``signals-<set>.jsonl``) into ``--signals-dir``; prints the tables ``docs/eval/gate.md`` quotes. ``--reuse``
redraws from the saved signals without running a query.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval import RetrievalClient, RetrievalConfig  # noqa: E402
from retrieval.eval.cache import resolve_cache_dir  # noqa: E402
from retrieval.eval.runner import open_index, prepare  # noqa: E402
from retrieval.search import expansion, lexical  # noqa: E402
from retrieval.search.memo import QueryMemo  # noqa: E402
from retrieval.search.query import Query  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
SETS = ("hepth", "ml-arxiv", "cacm")
DEPTH = 100
SIGNALS = (
    "query_terms",
    "survivors",
    "top_match",
    "mean_match",
    "score_gap",
    "seed_entropy",
    "seed_degree",
    "linked_seeds",
    "added",
    "coherence",
)
#: The per-query caps on the papers the expansion adds (``max_candidates``) studied as a graded gate, and the
#: cap every other variant keeps (the default before this study).
CAPS = (25, 50, 100, 200, 400)
OLD_MAX_CANDIDATES = 1000
#: The shipped default after it (``RetrievalConfig().max_candidates``).
NEW_MAX_CANDIDATES = 100
#: The target of issue 15: at least this share of always-expand recall@10 ...
KEEP_RECALL = 0.97
#: ... for at most this share of its candidates (on hepth).
MAX_CANDIDATES = 0.80


def recall_at(ranking: list[str], relevant: frozenset[str], k: int = 10) -> int:
    return sum(1 for pid in ranking[:k] if pid in relevant)


def ndcg_at(ranking: list[str], relevant: frozenset[str], k: int = 10) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, pid in enumerate(ranking[:k]) if pid in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / ideal if ideal else 0.0


def signals(snap, wq, seeds: list[tuple[str, float]], cfg: RetrievalConfig) -> dict:
    """The query-time signals of one query (see the module docstring)."""
    mass = wq.attainable or 1.0
    scores = [s for _, s in seeds]
    total = sum(scores) or 1.0
    probs = [s / total for s in scores if s > 0]
    entropy = -sum(p * math.log(p) for p in probs) / math.log(len(probs)) if len(probs) > 1 else 0.0
    ids = [pid for pid, _ in seeds]
    degrees = dict(snap.rows("gate study: seed degrees", expansion.DEGREE_SQL, {"sources": json.dumps(ids)}))
    always = cfg.replace(expand="always")
    gate = expansion.decide(wq, seeds, always)
    grown = expansion.expand(snap, seeds, always, gate)
    seed_ids = set(ids)
    added = [pid for pid in grown.evidence if pid not in seed_ids]
    shared = sum(1 for pid in added if len({r.source for r in grown.reaches.get(pid, [])}) >= 2)
    return {
        "query_terms": len(wq.terms),
        "survivors": sum(1 for s in scores if s / mass >= cfg.gate_threshold),
        "top_match": scores[0] / mass if scores else 0.0,
        "mean_match": sum(scores) / len(scores) / mass if scores else 0.0,
        "score_gap": 1.0 - scores[-1] / scores[0] if scores and scores[0] > 0 else 0.0,
        "seed_entropy": entropy,
        "seed_degree": sum(degrees.get(pid, 0) for pid in ids) / len(ids) if ids else 0.0,
        "linked_seeds": sum(1 for pid in ids if degrees.get(pid, 0) > 0) / len(ids) if ids else 0.0,
        "added": len(added),
        "coherence": shared / len(added) if added else 0.0,
    }


def study(name: str, cache_dir: Path, limit: int | None) -> list[dict]:
    """One record per query of the set: its signals, and recall/nDCG@10 and candidates of always and never."""
    corpus, queries = SHARED / name / "papers.jsonl", SHARED / name / "queries-dev.jsonl"
    prepared = prepare(corpus, queries, "auto", limit)
    cached = open_index(prepared, cache_dir, None)
    cfg = RetrievalConfig(max_candidates=OLD_MAX_CANDIDATES, expand="auto")  # always, never, the gate as they were
    modes = {"always": cfg.replace(expand="always"), "never": cfg.replace(expand="never"), "default": cfg}
    modes.update({f"cap{c}": cfg.replace(expand="always", max_candidates=c) for c in CAPS})
    modes.update({f"auto-cap{c}": cfg.replace(max_candidates=c) for c in CAPS})
    out = []
    with RetrievalClient(db=cached.path) as client:
        for q in prepared.evalset.queries:
            parsed = Query.parse(q.text)
            bm25 = client.lexical.search(parsed, max(DEPTH, cfg.top_k_lexical))
            memo = QueryMemo()  # the walk's statements and the candidates' BM25 scores, shared by the variants
            client.cache_statements(memo.statements)
            try:
                with client.snapshot() as snap:
                    wq = lexical.weigh(snap, parsed)
                    seeds = bm25[: cfg.top_k_lexical]
                    record = {"qid": q.qid, "relevant": len(q.relevant), **signals(snap, wq, seeds, cfg)}
                for label, setting in modes.items():
                    result = client.rank(parsed, bm25, setting, limit=None, full=False, memo=memo)
                    ranking = [r.paper.id for r in result.ranked]
                    record[f"{label}_hits"] = recall_at(ranking, q.relevant)
                    record[f"{label}_hits50"] = recall_at(ranking, q.relevant, 50)
                    record[f"{label}_ndcg"] = ndcg_at(ranking, q.relevant)
                    record[f"{label}_candidates"] = result.hit_count
                    if label == "default":
                        record["default_fired"] = bool(result.expansion.get("gate", {}).get("fired"))
            finally:
                client.cache_statements(None)
            out.append(record)
    return out


def pearson(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sx = math.sqrt(sum((x - mx) ** 2 for x in xs))
    sy = math.sqrt(sum((y - my) ** 2 for y in ys))
    return sxy / (sx * sy) if sx > 0 and sy > 0 else 0.0


def ranks(xs: list[float]) -> list[float]:
    """Average ranks (ties share the mean rank), for Spearman's rho."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    out = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for m in range(i, j + 1):
            out[order[m]] = (i + j) / 2.0
        i = j + 1
    return out


def curve(records: list[dict], signal: str, descending: bool) -> list[tuple[float, float, float]]:
    """``(share fired, pooled recall@10, mean candidates)`` for a gate firing on the first 0..n queries by
    ``signal`` (highest first when ``descending``), ties by qid; one point per distinct threshold."""
    n = len(records)
    relevant = sum(r["relevant"] for r in records) or 1
    order = sorted(records, key=lambda r: ((-r[signal] if descending else r[signal]), r["qid"]))
    hits = sum(r["never_hits"] for r in records)
    cands = sum(r["never_candidates"] for r in records)
    points = [(0.0, hits / relevant, cands / n)]
    for i, r in enumerate(order, start=1):
        hits += r["always_hits"] - r["never_hits"]
        cands += r["always_candidates"] - r["never_candidates"]
        if i == n or order[i][signal] != r[signal]:  # a threshold can only fall between distinct values
            points.append((i / n, hits / relevant, cands / n))
    return points


def best_under(points, recall_target: float, cand_limit: float):
    """The point of ``points`` with the fewest candidates that keeps ``recall_target`` (None when none does),
    and whether it also stays within ``cand_limit``."""
    ok = [p for p in points if p[1] >= recall_target - 1e-12]
    if not ok:
        return None, False
    p = min(ok, key=lambda p: (p[2], -p[1]))
    return p, p[2] <= cand_limit + 1e-9


def analyse(name: str, records: list[dict]) -> dict:
    n = len(records)
    relevant = sum(r["relevant"] for r in records) or 1
    always = (sum(r["always_hits"] for r in records) / relevant, sum(r["always_candidates"] for r in records) / n)
    never = (sum(r["never_hits"] for r in records) / relevant, sum(r["never_candidates"] for r in records) / n)
    default = (sum(r["default_hits"] for r in records) / relevant, sum(r["default_candidates"] for r in records) / n)
    benefit = [(r["always_hits"] - r["never_hits"]) / max(1, r["relevant"]) for r in records]
    ndcg_benefit = [r["always_ndcg"] - r["never_ndcg"] for r in records]
    rows = {}
    for s in SIGNALS:
        xs = [float(r[s]) for r in records]
        rho = pearson(ranks(xs), ranks(benefit))
        rows[s] = {
            "pearson_recall": pearson(xs, benefit),
            "spearman_recall": rho,
            "spearman_ndcg": pearson(ranks(xs), ranks(ndcg_benefit)),
        }
        # Both firing orders are tried (the one the correlation suggests, and its reverse: a signal may predict
        # cost rather than benefit); the one with fewer candidates at 97% recall@10 is kept and reported.
        options = []
        for descending in (rho >= 0, rho < 0):
            pts = curve(records, s, descending)
            best, within = best_under(pts, KEEP_RECALL * always[0], MAX_CANDIDATES * always[1])
            options.append((best[2] if best else math.inf, descending, pts, best, within))
        _, descending, pts, best, within = min(options, key=lambda o: o[0])
        rows[s]["descending"] = descending
        rows[s]["curve"] = pts
        rows[s]["best_at_97"] = None if best is None else {"fired": best[0], "recall10": best[1], "candidates": best[2]}
        rows[s]["meets_target"] = within

    # the random gate at the firing share the best signal needs for 97% recall, for comparison
    def pooled(label: str) -> dict:
        return {
            "recall10": sum(r[f"{label}_hits"] for r in records) / relevant,
            "recall50": sum(r[f"{label}_hits50"] for r in records) / relevant,
            "ndcg10": sum(r[f"{label}_ndcg"] for r in records) / n,
            "candidates": sum(r[f"{label}_candidates"] for r in records) / n,
        }

    variants = {label: pooled(label) for label in ["always", "never", "default"]}
    variants.update({f"cap{c}": pooled(f"cap{c}") for c in CAPS})
    variants.update({f"auto-cap{c}": pooled(f"auto-cap{c}") for c in CAPS})
    return {
        "set": name,
        "queries": n,
        "variants": variants,
        "always": {"recall10": always[0], "candidates": always[1]},
        "never": {"recall10": never[0], "candidates": never[1]},
        "default": {
            "recall10": default[0],
            "candidates": default[1],
            "fired": sum(r["default_fired"] for r in records) / n,
        },
        "positive_benefit_share": sum(1 for b in benefit if b > 0) / n,
        "negative_benefit_share": sum(1 for b in benefit if b < 0) / n,
        "random_at_97": {
            "fired": (KEEP_RECALL * always[0] - never[0]) / (always[0] - never[0]) if always[0] > never[0] else 0.0
        },
        "signals": rows,
    }


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    a, v = result["always"], result["never"]
    ax.plot([v["candidates"], a["candidates"]], [v["recall10"], a["recall10"]], "k--", lw=1.5, label="random gate")
    for s, row in result["signals"].items():
        pts = row["curve"]
        ax.plot(
            [p[2] for p in pts],
            [p[1] for p in pts],
            lw=1.2,
            label=f"{s} ({'high' if row['descending'] else 'low'} first)",
        )
    caps = [result["variants"][f"cap{c}"] for c in CAPS] + [a]
    ax.plot([c["candidates"] for c in caps], [c["recall10"] for c in caps], "s-", color="black", lw=1.5,
            label=f"graded: always, at most {', '.join(map(str, CAPS))}, {OLD_MAX_CANDIDATES} added")  # fmt: skip
    d = result["default"]
    ax.plot([d["candidates"]], [d["recall10"]], "ko", label=f"the gate before, at most {OLD_MAX_CANDIDATES} added")
    new = result["variants"][f"auto-cap{NEW_MAX_CANDIDATES}"]
    ax.plot(
        [new["candidates"]],
        [new["recall10"]],
        "r*",
        ms=12,
        label=f"new default: the gate, at most {NEW_MAX_CANDIDATES} added",
    )
    ax.axhline(KEEP_RECALL * a["recall10"], color="grey", lw=0.8, ls=":")
    ax.axvline(MAX_CANDIDATES * a["candidates"], color="grey", lw=0.8, ls=":")
    ax.set_xlabel("candidates scored per query (mean)")
    ax.set_ylabel("recall@10 (pooled)")
    ax.set_title(
        f"{result['set']}: gate on each signal, {result['queries']} queries (dotted: 97% recall, 80% candidates)"
    )
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(result: dict) -> str:
    a, v, d = result["always"], result["never"], result["default"]
    lines = [
        f"### {result['set']} ({result['queries']} queries)",
        "",
        f"always: recall@10 {a['recall10']:.4f}, {a['candidates']:.1f} candidates; never: {v['recall10']:.4f}, "
        f"{v['candidates']:.1f}; the gate before (at most 1000 added): {d['recall10']:.4f}, "
        f"{d['candidates']:.1f}, fires on "
        f"{d['fired']:.1%}. Expansion raises recall@10 on {result['positive_benefit_share']:.1%} of the queries and "
        f"lowers it on {result['negative_benefit_share']:.1%}. A random gate needs to fire on "
        f"{result['random_at_97']['fired']:.1%} of the queries for 97% of always's recall@10.",
        "",
        "| signal | fires first | Spearman vs recall@10 gain | Spearman vs nDCG@10 gain | Pearson vs recall@10 gain "
        "| fewest candidates at >= 97% recall@10 (share of always) | fired | meets 97% / 80% |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for s, row in result["signals"].items():  # noqa: B007 - the table of signals
        best = row["best_at_97"]
        cands = f"{best['candidates']:.1f} ({best['candidates'] / a['candidates']:.1%})" if best else "-"
        fired = f"{best['fired']:.1%}" if best else "-"
        lines.append(
            f"| `{s}` | {'high' if row['descending'] else 'low'} | {row['spearman_recall']:+.3f} | "
            f"{row['spearman_ndcg']:+.3f} | {row['pearson_recall']:+.3f} | {cands} | {fired} | "
            f"{'yes' if row['meets_target'] else 'no'} |"
        )
    lines += [
        "",
        "| variant | recall@10 | share of always | recall@50 | nDCG@10 | candidates | share of always |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, v in result["variants"].items():
        lines.append(
            f"| {label} | {v['recall10']:.4f} | {v['recall10'] / a['recall10']:.1%} | {v['recall50']:.4f} | "
            f"{v['ndcg10']:.4f} | {v['candidates']:.1f} | {v['candidates'] / a['candidates']:.1%} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default=",".join(SETS), help="comma-separated, of hepth, ml-arxiv, cacm")
    parser.add_argument("--out", default="docs/eval/gate", help="directory for the PNGs, signals and gate.json")
    parser.add_argument("--cache-dir", help="the evaluation indexes' cache (default: retrieval eval's)")
    parser.add_argument("--limit-queries", type=int, help="the first N evaluable queries of each set")
    parser.add_argument(
        "--signals-dir",
        default="reports/gate",
        help="directory for the per-query signals-<set>.jsonl (default reports/gate, which git ignores)",
    )
    parser.add_argument("--reuse", action="store_true", help="read signals-<set>.jsonl from --signals-dir, run nothing")
    args = parser.parse_args(argv)
    out, signals_dir = Path(args.out), Path(args.signals_dir)
    out.mkdir(parents=True, exist_ok=True)
    signals_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        if not (SHARED / name / "papers.jsonl").exists():
            print(f"skipping {name}: no {SHARED / name / 'papers.jsonl'} (the shared data lives beside the repo)")
            continue
        path = signals_dir / f"signals-{name}.jsonl"
        if args.reuse and path.exists():
            records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        else:
            records = study(name, resolve_cache_dir(args.cache_dir), args.limit_queries)
            path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records), encoding="utf-8")
        result = analyse(name, records)
        plot(result, out / f"gate-{name}.png")
        results.append(result)
        print(table(result) + "\n")
    for result in results:  # the curves are in the PNGs; the JSON keeps the tables
        for row in result["signals"].values():
            del row["curve"]
    (out / "gate.json").write_text(json.dumps(results, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
