"""``docs/eval/time-honest.md``'s tables from the reports ``retrieval eval`` wrote under both protocols.

    python bench/time_honest.py                     # reads docs/eval/time-honest/<set>-<protocol>/report.json
    python bench/time_honest.py --out th.md         # writes the tables to a file

Run the evaluations first (the commands are in ``docs/eval/time-honest.md``). For each citation set it also counts,
with the protocol's own clock, how many papers the time-honest protocol hid from the average query.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from retrieval.eval.protocol import TIME_HONEST  # noqa: E402
from retrieval.eval.runner import prepare  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
REPORTS = ROOT / "docs" / "eval" / "time-honest"
MODES = ("bm25", "policy", "rel-references", "rm3", "policy-rm3", "learned-cv", "auto")


def hidden(name: str) -> tuple[float, int]:
    """Mean papers newer than the query paper (the time-honest exclusion, query papers not counted) and how
    many papers have a day."""
    evalset = prepare(SHARED / name / "papers.jsonl", SHARED / name / "queries-dev.jsonl", TIME_HONEST, None).evalset
    clock = evalset.chronology
    sizes = [len(clock.newer(q.qid) - evalset.removed) for q in evalset.queries]
    return sum(sizes) / len(sizes), clock.by_day


def rows(name: str, protocol: str) -> list[str]:
    path = REPORTS / f"{name}-{protocol}" / "report.json"
    if not path.exists():
        return [f"| {name} | {protocol} | (no report at {path.relative_to(ROOT)}) | | | | | |"]
    report = json.loads(path.read_text(encoding="utf-8"))
    p = report["protocol"]
    out = []
    for mode in MODES:
        m = report["modes"].get(mode)
        if m is None:
            continue
        r = m["pooled_recall"]
        out.append(
            f"| {name} | {protocol} ({p['queries_evaluated']}) | {mode} | {m['ndcg@10']:.4f} | {r['@10']:.4f} | "
            f"{r['@50']:.4f} | {m['mrr']:.4f} | {m['candidates_mean']:,.1f} |"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", help="write the tables here (default: print them)")
    args = parser.parse_args(argv)
    lines = [
        "| set | protocol (queries) | mode | nDCG@10 | recall@10 | recall@50 | MRR | candidates |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    notes = []
    for name in ("hepth", "ml-arxiv"):
        for protocol in ("citation", "time-honest"):
            lines += rows(name, protocol)
        if (SHARED / name / "papers.jsonl").exists():
            mean, by_day = hidden(name)
            notes.append(f"- {name}: {mean:,.1f} papers newer than the query paper hidden per query on average "
                         f"({by_day:,} papers dated by day).")  # fmt: skip
    lines += rows("cacm", "judged")
    text = "\n".join(lines + [""] + notes) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
