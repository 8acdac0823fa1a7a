"""The ``retrieval train`` subcommand: parsing and printing only; the work is ``retrieval.eval.judged.train``
(judged queries) and ``retrieval.eval.own.train_own`` (``--own``).

Writes the fitted model beside the index (``<index>.ranker.json``, the index from ``--db`` as everywhere), where a
search with ``--ranking learned`` finds it, or to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ...eval.cache import DEFAULT_CACHE_DIR
from ...eval.own import FEWEST as OWN_FEWEST
from ...eval.own import MIN_REFERENCES as OWN_MIN_REFERENCES
from ...eval.own import SAMPLE as OWN_SAMPLE
from ...eval.protocol import AUTO, PROTOCOLS
from ...text import DEFAULT_STEM, DEFAULT_STOPWORDS
from ...workers import default_workers
from .eval import ProgressBar
from .options import FORMAT_HELP, FORMATS, add_analysis_options, bounded, index_location, positive_int, relations

DESCRIPTION = (
    "Fit the learned ranking (a linear model over BM25, citation-evidence, in-degree and recency features, by "
    "coordinate ascent on nDCG@10) on judged queries in the eval's format, or with --own on the index's own "
    "citations (sampled papers' titles and abstracts asking for their references, each paper left out of its own "
    "search); print its cross-validated figures (hold one set out with several --corpus/--queries pairs, 5-fold "
    "over queries with one or with --own), and write it beside the index (INDEX.ranker.json), where the default "
    "ranking and `retrieval search --ranking learned` use it."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``retrieval train`` on its parser ``p``."""
    p.description = DESCRIPTION
    p.add_argument("--corpus", action="append", metavar="FILE", help="corpus of papers (JSONL); "
                   "repeat with --queries for several sets")  # fmt: skip
    p.add_argument("--queries", action="append", metavar="FILE",
                   help='judged queries (JSONL {"qid", "query", "relevant"}), one per --corpus')  # fmt: skip
    p.add_argument("--own", action="store_true", help="fit on the --db index's own citations instead of judged "
                   "queries: no --corpus or --queries")  # fmt: skip
    p.add_argument("--sample", type=positive_int, default=None, metavar="N",
                   help=f"with --own: papers asked as queries (default {OWN_SAMPLE})")  # fmt: skip
    p.add_argument("--min-references", type=positive_int, default=None, metavar="K",
                   help=f"with --own: the fewest references in the index a sampled paper has (default "
                   f"{OWN_MIN_REFERENCES})")  # fmt: skip
    p.add_argument("--format", choices=FORMATS, help="the corpus files' " + FORMAT_HELP)
    add_analysis_options(p, "the evaluation indexes' ", default="the --db index's, else none")
    p.add_argument(
        "--db",
        type=index_location,
        help="the index whose searches use the model: written beside it as INDEX.ranker.json",
    )
    p.add_argument("--out", metavar="FILE", help="write the model here instead of beside the index")
    p.add_argument("--name", default="ranker", help="the model's name, shown by --why (default: ranker)")
    p.add_argument("--cache-dir", metavar="DIR", help=f"evaluation indexes' cache (default: {DEFAULT_CACHE_DIR})")
    p.add_argument("--limit-queries", type=positive_int, metavar="N", help="use only the first N queries of each set")
    p.add_argument("--protocol", choices=PROTOCOLS, default=AUTO, help="as for `retrieval eval` (default: auto)")
    p.add_argument("--rounds", type=positive_int, default=None, help="coordinate-ascent rounds at most (default 6)")
    p.add_argument(
        "--relations",
        type=relations,
        metavar="LIST",
        help="relations the candidates' expansion follows, comma-separated, of references, citing, "
        "cocitation, coupling (default: all four; co-citation and coupling cost the most per search)",
    )
    p.add_argument(
        "--jobs",
        type=bounded("jobs"),
        metavar="N",
        help="worker processes that share the fits (and with --own the papers' searches; default: one per core, "
        "at most 2; 1 = this process only); the model does not depend on it",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=_cmd_train, train_parser=p)


def _analysis_of(db: str | None) -> tuple[str | None, str | None]:
    """The stemmer and stop words of the index at ``db`` (resolved as everywhere)."""
    from ...search.client import RetrievalClient

    with RetrievalClient(db) as client:
        analyser = client.stats.analyser
    return analyser.stem, analyser.stopwords


def _cmd_train(args: argparse.Namespace) -> int:
    from ...config import resolve_db_path
    from ...errors import ConfigError, IndexNotFoundError
    from ...eval.judged import model_for_index, train
    from ...eval.train import ROUNDS, check_model_name, check_model_path

    if args.own:
        return _cmd_train_own(args)
    if args.sample is not None or args.min_references is not None:
        given = "--sample" if args.sample is not None else "--min-references"
        args.train_parser.error(f"{given} goes with --own (fitting on the index's own citations)")
    if not args.corpus or not args.queries:
        args.train_parser.error(
            "give judged queries (--corpus FILE --queries FILE, repeated for several sets), or --own to fit on the "
            "--db index's own citations"
        )
    if len(args.corpus) != len(args.queries):
        args.train_parser.error(
            f"give one --queries per --corpus ({len(args.corpus)} corpora, {len(args.queries)} query files)"
        )
    if args.out is None:
        index = resolve_db_path(args.db)
        if not index.is_file():
            raise IndexNotFoundError(
                f"no index at {index} to write the model beside: build it first (retrieval build --db {index}), or "
                "give --out FILE"
            )
        out = model_for_index(index)
    else:
        out = Path(args.out)
    try:  # usage errors before the training, not after it
        check_model_name(args.name)
        check_model_path(out)
    except ConfigError as exc:
        args.train_parser.error(str(exc))
    stem, stopwords = args.stem, args.stopwords
    if stem is None or stopwords is None:  # left out: the model is fitted on text analysed as its index's is
        from_index = args.out is None or args.db is not None
        stem, stopwords = _analysis_of(args.db) if from_index else (DEFAULT_STEM, DEFAULT_STOPWORDS)
        stem, stopwords = args.stem or stem, args.stopwords or stopwords
    summary = _with_progress(
        train, list(zip(args.corpus, args.queries, strict=True)), out, name=args.name, cache_dir=args.cache_dir,
        limit_queries=args.limit_queries, protocol=args.protocol, rounds=args.rounds or ROUNDS,
        relations=args.relations.split(",") if args.relations else None, format=args.format,
        stem=stem, stopwords=stopwords, jobs=default_workers() if args.jobs is None else args.jobs,
    )  # fmt: skip
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    _print_summary(summary)
    return 0


def _cmd_train_own(args: argparse.Namespace) -> int:
    """``retrieval train --own``: fit on the ``--db`` index's own citations (``retrieval.eval.own``)."""
    from ...config import resolve_db, resolve_db_path
    from ...errors import ConfigError, IndexNotFoundError
    from ...eval.judged import model_for_index
    from ...eval.own import train_own
    from ...eval.train import ROUNDS, check_model_name, check_model_path

    judged = [name for name, given in (("--corpus", args.corpus), ("--queries", args.queries)) if given]
    judged += [name for name, given in (("--format", args.format), ("--limit-queries", args.limit_queries),
                                         ("--cache-dir", args.cache_dir), ("--relations", args.relations),
                                         ("--stem", args.stem), ("--stopwords", args.stopwords)) if given]  # fmt: skip
    if args.protocol != AUTO:
        judged.append("--protocol")
    if judged:
        args.train_parser.error(
            f"{', '.join(judged)}: --own fits on the --db index as it is (its own papers, text analysis and "
            "citations); leave these out, or train on judged queries without --own"
        )
    # beside an index file; a server's index (a URL) needs --out, its searches take the model with --model
    index = resolve_db_path(args.db) if args.out is None else resolve_db(args.db)
    out = model_for_index(index) if args.out is None else Path(args.out)
    try:
        check_model_name(args.name)
        check_model_path(out)
    except ConfigError as exc:
        args.train_parser.error(str(exc))
    if isinstance(index, Path) and not index.is_file():
        raise IndexNotFoundError(f"no index at {index}: build it first (retrieval build --db {index})")
    sample, least = args.sample or OWN_SAMPLE, args.min_references or OWN_MIN_REFERENCES
    if sample < OWN_FEWEST:
        args.train_parser.error(f"--sample {sample}: sample at least {OWN_FEWEST} papers to fit and cross-validate on")
    summary = _with_progress(
        train_own,
        index,
        out,
        name=args.name,
        sample=sample,
        min_references=least,
        rounds=args.rounds or ROUNDS,
        jobs=default_workers() if args.jobs is None else args.jobs,
    )
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    own = summary["own_citations"]
    print(
        f"fitted on {own['papers_sampled']} papers of {own['index']} citing at least {own['min_references']} of its "
        "papers, each asked as its title and abstract and as its title alone, left out of its own search"
    )
    _print_summary(summary)
    return 0


def _with_progress(work, *args, **kwargs) -> dict:
    """``work(*args, **kwargs)`` with a progress bar on a terminal's stderr (``progress=``), closed after it."""
    bar = ProgressBar.for_stream(sys.stderr)
    try:
        return work(*args, progress=bar, **kwargs)
    finally:
        if bar:
            bar.close()


def _print_summary(summary: dict) -> None:
    """The cross-validated figures, the fit, the weights and where the model went, as ``retrieval train`` prints
    them."""
    cv = summary["cross_validation"]
    print(f"cross-validation ({cv['kind']}), nDCG@10 on the held-out queries:")
    print(f"  {'held out':<28} {'queries':>7} {'start':>8} {'learned':>8} {'train':>8}")
    for fold in cv["folds"]:
        print(f"  {fold['held_out']:<28} {fold['test_queries']:>7} {fold['test_ndcg@10_start']:8.4f} "
              f"{fold['test_ndcg@10']:8.4f} {fold['train_ndcg@10']:8.4f}")  # fmt: skip
        for name, value in fold.get("test_ndcg@10_per_set", {}).items():
            print(f"    {name:<26} {'':>7} {'':>8} {value:8.4f}")
    print(f"  {'every query':<28} {sum(f['test_queries'] for f in cv['folds']):>7} "
          f"{cv['test_ndcg@10_start_mean']:8.4f} {cv['test_ndcg@10_mean']:8.4f}")  # fmt: skip
    fitted = summary["fitted"]
    print(f"fitted on every query: nDCG@10 {fitted['train_ndcg@10_policy_weights']:.4f} (the policy's weights) "
          f"-> {fitted['train_ndcg@10']:.4f}")  # fmt: skip
    shown = sorted(summary["weights"].items(), key=lambda kv: (-abs(kv[1]), kv[0]))
    print("weights (over features / their std): " + ", ".join(f"{k} {v:+.3f}" for k, v in shown if v))
    print(f"wrote {summary['model']} (sha256 {summary['sha256'][:12]})", file=sys.stdout)
