"""The ``retrieval eval`` subcommand: parsing and printing only; the work is ``retrieval.eval.run_eval``.

The main CLI imports this module only when ``retrieval eval`` runs, and calls ``add_arguments`` on the
subcommand's parser. Errors are ``RetrievalError`` subclasses, which the main CLI prints before exiting 1.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from ...eval.cache import DEFAULT_CACHE_DIR
from ...eval.modes import MODES
from ...eval.protocol import AUTO, PROTOCOLS, TIME_HONEST
from .options import FORMAT_HELP, FORMATS, SEMANTIC_HELP, add_analysis_options, bounded, positive_int, semantic_model


class ProgressBar:
    """A progress bar per stage on a terminal stream (tqdm: count, rate, time left); ``None`` from
    ``for_stream`` when the stream is not a terminal. Called with ``(stage, done, total)``."""

    labels = {"index": "building the evaluation index", "queries": "queries", "features": "queries' features",
              "own citations": "papers asked (own citations)"}  # fmt: skip

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.stage: str | None = None
        self.bar = None

    @classmethod
    def for_stream(cls, stream: TextIO) -> ProgressBar | None:
        return cls(stream) if stream.isatty() else None

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            self.close()
            from tqdm import tqdm

            self.stage = stage
            self.bar = tqdm(
                total=total,
                desc=self.labels.get(stage, stage),
                file=self.stream,
                dynamic_ncols=True,
                mininterval=0.2,
                bar_format="[{bar:30}] {n_fmt}/{total_fmt} {desc} [{elapsed}<{remaining}, {rate_fmt}]",
                unit="papers" if stage == "index" else "queries",
            )
        if total != self.bar.total:
            self.bar.total = total
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _mode_list(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in MODES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown mode(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(MODES)}"
        )
    return names


def _cmd_eval(args: argparse.Namespace) -> int:
    from ...eval.runner import REPORT_JSON, REPORT_MD, run_eval

    if args.dates is not None and args.protocol not in (AUTO, TIME_HONEST):  # a usage error, said as one
        args.eval_parser.error(
            f"--dates applies to the time-honest protocol, not --protocol {args.protocol}: add --protocol "
            "time-honest, or drop --dates"
        )
    bar = ProgressBar.for_stream(sys.stderr)
    try:
        report = run_eval(
            args.corpus,
            args.queries,
            args.out,
            modes=args.modes,
            cache_dir=args.cache_dir,
            runs_dir=args.runs_dir,
            limit_queries=args.limit_queries,
            protocol=args.protocol,
            dates=args.dates,
            progress=bar,
            jobs=args.jobs,
            semantic=args.semantic,
            format=args.format,
            stem=args.stem,
            stopwords=args.stopwords,
        )
    finally:
        if bar:
            bar.close()
    p = report.protocol
    print(
        f"{p['queries_evaluated']:,} queries evaluated ({p['queries_skipped']:,} skipped), protocol {p['kind']}, "
        f"{p['query_papers_removed']:,} query papers removed from the index"
    )
    for warning in p.get("warnings", ()):
        print(f"warning: {warning}", file=sys.stderr)
    if p["queries_skipped"] or p["relevant_not_in_corpus_dropped"]:
        print(
            f"note: {p['queries_skipped']:,} queries skipped for want of a relevant paper and "
            f"{p['relevant_not_in_corpus_dropped']:,} relevant ids not in the corpus dropped; see report.md",
            file=sys.stderr,
        )
    print(f"{'mode':<14} {'nDCG@10':>8} {'MRR':>7} {'R@10':>7} {'R@50':>7} {'R@100':>7} {'MAP@10':>7} (recall pooled)")
    for name, row in report.modes.items():
        pooled = row["pooled_recall"]
        print(
            f"{name:<14} {row['ndcg@10']:8.4f} {row['mrr']:7.4f} {pooled['@10']:7.4f} {pooled['@50']:7.4f} "
            f"{pooled['@100']:7.4f} {row['map']['@10']:7.4f}"
        )
    timing = report.timing
    print(
        f"index {timing['index']['status']} ({timing['index']['seconds']:.1f} s), total {timing['total_seconds']:.1f} s"
    )
    print(f"wrote {args.out}/{REPORT_MD}, {args.out}/{REPORT_JSON}; run files and qrels in {args.runs_dir or args.out}")
    return 0


DESCRIPTION = (
    "Evaluate the retrieval modes on a corpus and a query file. When qids are corpus papers (citation "
    "recommendation) every query paper is removed from the index searched. Writes report.md, "
    "report.json, recall_at_k.png and one TREC run file per mode."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``retrieval eval`` on its parser ``p``."""
    p.description = DESCRIPTION
    p.add_argument("--corpus", required=True, metavar="FILE", help="corpus of papers, one JSON record a line")
    p.add_argument("--format", choices=FORMATS, help="the corpus's " + FORMAT_HELP)
    p.add_argument("--queries", required=True, metavar="FILE", help='JSONL queries {"qid", "query", "relevant"}')
    p.add_argument("--out", required=True, metavar="DIR", help="directory for report.md, report.json and the plot")
    p.add_argument(
        "--runs-dir", metavar="DIR", help="directory for the TREC run files and their qrels (default: --out)"
    )
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help=f"where evaluation indexes are cached by content hash (default: {DEFAULT_CACHE_DIR})",
    )
    p.add_argument(
        "--modes",
        type=_mode_list,
        metavar="LIST",
        help=f"comma-separated modes to compare (default: all of {','.join(MODES)}; under --protocol time-honest, "
        "those that can leave newer papers out)",
    )
    p.add_argument(
        "--limit-queries",
        type=positive_int,
        metavar="N",
        help="evaluate only the first N evaluable queries, for a quick look (the same cached index)",
    )
    p.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default=AUTO,
        help="citation: remove query papers; judged: remove nothing; time-honest: citation, and each query sees no "
        "paper newer than its own; auto (default): citation or judged, from the files",
    )
    add_analysis_options(p, "the evaluation index's ")
    p.add_argument(
        "--semantic",
        type=semantic_model,
        default="auto",
        metavar="MODEL",
        help="build the evaluation index with the papers' vectors of this model, so the policy's blend has its "
        f"semantic signal: {SEMANTIC_HELP}. auto (default): as retrieval build decides it",
    )
    p.add_argument(
        "--dates",
        metavar="FILE",
        help="time-honest: `id<TAB>YYYY-MM-DD` per line, papers compared by day (default: dates.tsv beside --corpus, "
        "else by year)",
    )
    p.add_argument(
        "--jobs",
        type=bounded("jobs"),
        metavar="N",
        help="worker processes that share the queries (default: one per core, at most 2; 1 = this process only); "
        "the figures do not depend on it",
    )
    p.set_defaults(func=_cmd_eval, eval_parser=p)
