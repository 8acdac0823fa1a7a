"""``run_eval``: the protocol, the cached evaluation index, every mode on every query, the report and its files.

Order of work: read the query file, checksum both files, scan the corpus and apply the protocol (``prepare``);
find or build the evaluation index; for each query run the shared BM25 pass once and every selected mode on it
(``evaluate``); compute the measures and tables (``assemble``); write ``report.md``, ``report.json``,
``recall_at_k.png`` and one TREC run file per mode.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path

from .. import __version__, embed
from ..config import RetrievalConfig
from ..digest import file_sha256
from ..errors import ConfigError, InputError, StoreError
from ..outfile import replace_text
from ..search import cutoff
from ..search.client import RetrievalClient
from ..search.memo import QueryMemo
from ..search.query import Query
from ..store.database import check_index
from ..text import DEFAULT_STEM, DEFAULT_STOPWORDS, Analyser
from ..validate import LIMITS
from ..workers import context, default_workers, follow_parent
from .cache import CachedIndex, analysis, cache_key, ensure_index, index_identity, resolve_cache_dir
from .graphrag import by_hop, by_seed_quality
from .lexical import LEXICAL_DEPTH, bm25_list
from .metrics import CUTOFFS, Effectiveness, effectiveness, latency_summary, require_library
from .modes import MODES, LexicalPass, Mode, select_modes
from .plot import plot_recall_at_k, require_matplotlib
from .protocol import (
    AUTO,
    CITATION,
    TIME_HONEST,
    EvalSet,
    apply_protocol,
    decide_protocol,
    index_papers,
    scan_corpus,
)
from .queries import read_queries
from .records import ModeAnswer, QueryRun, hop_counts
from .report import EvalReport
from .timehonest import Chronology, find_dates, read_dates
from .trec import QRELS_FILE, write_qrels, write_run

#: ``progress(stage, done, total)``: stage is "index" (papers written) or "queries" (queries evaluated).
Progress = Callable[[str, int, int], None]

#: Papers sharing at least one token with the query: the set the BM25 aggregation scores.
MATCHING_SQL = """\
SELECT count(DISTINCT tf.doc_id) AS matching
FROM doc_freq AS d
JOIN term_freq AS tf ON tf.term_id = d.term_id
WHERE d.term IN (SELECT value FROM json_each(:terms))"""

REPORT_MD, REPORT_JSON, PLOT_PNG = "report.md", "report.json", "recall_at_k.png"


def display_name(path: Path) -> str:
    """The file's name with its folder's (``hepth/papers.jsonl``): never an absolute path."""
    folder = path.resolve().parent.name
    return f"{folder}/{path.name}" if folder else path.name


def run_file_name(mode: str) -> str:
    return f"run.{mode}.trec"


@dataclass(frozen=True)
class Prepared:
    """The inputs, checked, checksummed and put through the protocol."""

    corpus: Path
    queries: Path
    corpus_sha256: str
    queries_sha256: str
    evalset: EvalSet
    dates: Path | None = None
    dates_sha256: str | None = None
    format: str | None = None  # the corpus file's format when given (else detected from its first record)

    def file_info(self) -> dict:
        return {
            "corpus": {
                "file": display_name(self.corpus),
                "sha256": self.corpus_sha256,
                "bytes": self.corpus.stat().st_size,
                **({"format": self.format} if self.format else {}),
            },
            "queries": {
                "file": display_name(self.queries),
                "sha256": self.queries_sha256,
                "bytes": self.queries.stat().st_size,
            },
            **(
                {"dates": {"file": display_name(self.dates), "sha256": self.dates_sha256}}
                if self.dates is not None
                else {}
            ),
        }


def prepare(
    corpus: Path,
    queries: Path,
    protocol: str,
    limit_queries: int | None,
    dates: Path | None = None,
    format: str | None = None,
) -> Prepared:
    """Read and check both files and apply the protocol; nothing is built yet. ``dates``: the time-honest
    protocol's dates file (default: ``dates.tsv`` beside the corpus, when there is one); ``format``: the corpus
    file's (default: detected)."""
    if limit_queries is not None and limit_queries < 1:
        raise ConfigError(f"--limit-queries must be at least 1, got {limit_queries}")
    if not corpus.is_file():
        raise InputError(f"no corpus file at {corpus}: give a JSONL file of papers with --corpus")
    query_list = read_queries(queries)
    scan = scan_corpus(corpus, {q.qid for q in query_list}, format)
    kind = decide_protocol(protocol, query_list, scan, str(queries))
    if dates is not None and kind != TIME_HONEST:
        raise ConfigError(
            f"--dates applies to the time-honest protocol, and this run's is {kind}: add --protocol time-honest, "
            "or drop --dates"
        )
    chronology, dates_path = None, None
    if kind == TIME_HONEST:
        dates_path = find_dates(corpus, dates)
        chronology = Chronology(scan.years, read_dates(dates_path) if dates_path else None)
    shown_dates = display_name(dates_path) if dates_path else None
    evalset = apply_protocol(query_list, scan, kind, str(queries), limit_queries, chronology, shown_dates)
    prepared = Prepared(corpus, queries, file_sha256(corpus), file_sha256(queries), evalset, format=format)
    return replace(prepared, dates=dates_path, dates_sha256=file_sha256(dates_path)) if dates_path else prepared


def index_kind(kind: str) -> str:
    """The protocol whose index a run searches: time-honest searches the citation protocol's (its newer papers
    are a per-query exclusion, not a removal)."""
    return CITATION if kind == TIME_HONEST else kind


def open_index(
    prepared: Prepared,
    cache_dir: Path,
    progress: Progress | None,
    semantic: str | None = None,
    stem: str | None = DEFAULT_STEM,
    stopwords: str | None = DEFAULT_STOPWORDS,
) -> CachedIndex:
    """The evaluation index of ``prepared`` from the cache, built there first if absent, analysed with ``stem``
    and ``stopwords`` as ``retrieval build`` would (with the papers' vectors of the model ``semantic`` when given:
    each a cache entry of its own)."""
    evalset = prepared.evalset
    info = prepared.file_info()
    manifest = {
        "corpus": {k: info["corpus"][k] for k in ("file", "sha256")},
        "queries": {k: info["queries"][k] for k in ("file", "sha256")},
        "protocol": index_kind(evalset.kind),
        **index_identity(),
        **analysis(stem, stopwords),
        **({"semantic": semantic} if semantic else {}),
        **({"format": prepared.format} if prepared.format else {}),
    }
    key = cache_key(
        prepared.corpus_sha256,
        prepared.queries_sha256,
        index_kind(evalset.kind),
        semantic,
        prepared.format,
        stem,
        stopwords,
    )
    return ensure_index(
        cache_dir,
        key,
        lambda: index_papers(prepared.corpus, evalset.removed, prepared.format),
        manifest,
        source=f"evaluation index of {display_name(prepared.corpus)}",
        progress=(lambda done: progress("index", done, evalset.index_papers)) if progress else None,
        semantic=semantic,
        stem=stem,
        stopwords=stopwords,
    )


def refuse_unless_honest(modes: list[Mode]) -> None:
    """A ``ConfigError`` naming the modes that cannot leave a per-query exclusion out of their walk (the lesson's
    hop walk, the evidence graph), so that a time-honest report never holds a leaking row."""
    leaking = [m.name for m in modes if not getattr(m, "honours_exclusion", False)]
    if leaking:
        honest = [name for name, m in MODES.items() if getattr(m, "honours_exclusion", False)]
        raise ConfigError(
            f"--protocol time-honest: the mode(s) {', '.join(leaking)} cannot leave newer papers out of their walk; "
            f"choose among {', '.join(honest)}"
        )


def exclusions(client: RetrievalClient, evalset: EvalSet) -> Callable[[str], cutoff.Exclusion | None]:
    """``qid -> `` the papers the query may not see: under the time-honest protocol those newer than the query
    paper (``retrieval.search.cutoff``), else none (``None``)."""
    clock = evalset.chronology
    if clock is None:
        return lambda qid: None
    with client.snapshot() as snap:
        doc_ids, n_papers = cutoff.doc_ids(snap), snap.stats.n_papers
    return lambda qid: cutoff.Exclusion.make(clock.newer(qid), doc_ids, n_papers)


def evaluate(
    client: RetrievalClient,
    evalset: EvalSet,
    modes: list[Mode],
    config: RetrievalConfig,
    progress: Progress | None = None,
) -> list[QueryRun]:
    """Every mode on every query. BM25 runs once per query (timed, shared by all modes); the count of matching
    papers is taken afterwards and not timed. A mode's latency is the BM25 pass plus its own work; the
    candidates' BM25 scores and the evidence graph's edge support are computed once per query and shared by the
    modes that need the same ones (``retrieval.search.memo``), each reuse charged back to the reusing mode."""
    runs: list[QueryRun] = []
    depth = max(LEXICAL_DEPTH, config.top_k_lexical)
    total = len(evalset.queries)
    if evalset.chronology is not None:
        refuse_unless_honest(modes)
    exclusion_of = exclusions(client, evalset)
    analyser = client.stats.analyser  # the matching papers are counted on the terms the index searches
    for done, query in enumerate(evalset.queries, start=1):
        started = time.perf_counter()
        parsed = Query.parse(query.text, analyser)
        exclusion = exclusion_of(query.qid)
        bm25 = bm25_list(client, parsed, depth, exclusion)
        lexical_seconds = time.perf_counter() - started
        with client.snapshot() as snap:
            matching = snap.one("eval: papers matching the query", MATCHING_SQL, {"terms": parsed.distinct_json})[0]
        shared = LexicalPass(parsed, bm25, matching, query.year, QueryMemo(), exclusion)
        ids = [pid for pid, _ in bm25]
        seeds = ids[: config.top_k_lexical]
        run = QueryRun(query.qid, query.relevant, ids[:LEXICAL_DEPTH], seeds, matching, lexical_seconds)
        client.cache_statements(shared.memo.statements)  # the evaluation's index does not change
        try:
            for mode in modes:
                started = time.perf_counter()
                out = mode.run(client, shared, config, LEXICAL_DEPTH)
                # Work reused from an earlier mode of this query is charged back: the latency stays the mode's.
                seconds = lexical_seconds + time.perf_counter() - started + shared.memo.take_charge()
                hops = None if out.distances is None else hop_counts(out.distances, query.relevant)
                run.answers[mode.name] = ModeAnswer(
                    out.ranking, out.candidates, hops, seconds, out.graph_added, out.gate_fired, out.costs
                )
        finally:
            client.cache_statements(None)
        runs.append(run)
        if progress:
            progress("queries", done, total)
    return runs


#: Queries a worker process takes at a time (a few seconds of work: the pool stays busy to the end, and progress
#: moves), and the fewest queries worth starting workers for.
CHUNK_QUERIES = 5
PARALLEL_MIN_QUERIES = 40

#: In a worker process of ``evaluate_in_workers``: the client on the evaluation index, the modes, the config and
#: the evaluation set whose queries its tasks name by position.
_WORKER: tuple | None = None


def _start_worker(path: Path, names: list[str], config: RetrievalConfig, evalset: EvalSet, parent: int) -> None:
    global _WORKER
    follow_parent(parent)
    _WORKER = (RetrievalClient(config=config, db=path), select_modes(names), config, evalset)


def _evaluate_slice(bounds: tuple[int, int]) -> tuple[int, list[QueryRun]]:
    client, modes, config, evalset = _WORKER
    start, end = bounds
    return start, evaluate(client, replace(evalset, queries=evalset.queries[start:end]), modes, config)


def evaluate_in_workers(
    path: Path,
    evalset: EvalSet,
    modes: list[Mode],
    config: RetrievalConfig,
    jobs: int,
    progress: Progress | None = None,
) -> list[QueryRun]:
    """``evaluate`` over the index at ``path`` in ``jobs`` worker processes, each taking ``CHUNK_QUERIES`` queries
    at a time; the runs come back in the queries' order. Every query is evaluated as in one process (its memo is
    its own), so the rankings are the same; each latency is measured in the worker that ran it."""
    total = len(evalset.queries)
    slices = [(start, min(start + CHUNK_QUERIES, total)) for start in range(0, total, CHUNK_QUERIES)]
    parts: dict[int, list[QueryRun]] = {}
    done = 0
    initargs = (path, [m.name for m in modes], config, evalset, os.getpid())
    with context().Pool(jobs, initializer=_start_worker, initargs=initargs) as pool:
        for start, runs in pool.imap_unordered(_evaluate_slice, slices):
            parts[start] = runs
            done += len(runs)
            if progress:
                progress("queries", done, total)
    return [run for start in sorted(parts) for run in parts[start]]


def _library_versions() -> str:
    versions = []
    for dist in ("ir-measures", "pytrec-eval-terrier"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:  # pragma: no cover - depends on the environment
            versions.append(f"{dist} (not installed)")
    return ", ".join(versions)


def assemble(
    prepared: Prepared,
    runs: list[QueryRun],
    modes: list[Mode],
    config: RetrievalConfig,
    protocol: str,
) -> tuple[EvalReport, dict[str, Effectiveness]]:
    """The report's deterministic part (everything but ``timing``), and each mode's measures."""
    evalset = prepared.evalset
    qrels = {r.qid: r.relevant for r in runs}
    effect = {m.name: effectiveness({r.qid: r.answers[m.name].ranking for r in runs}, qrels) for m in modes}
    lexical = effectiveness({r.qid: r.lexical for r in runs}, qrels)  # the shared BM25 list, whatever the modes
    n = len(runs)
    mode_rows = {}
    for m in modes:
        answers = [r.answers[m.name] for r in runs]
        mode_rows[m.name] = {
            "description": m.description,
            "hops": m.hops,
            **effect[m.name].to_dict(),
            "candidates_mean": sum(a.candidates for a in answers) / n,
            "graph_added_mean": _mean_of(a.graph_added for a in answers),
            "gate_fired_share": _mean_of(None if a.gate_fired is None else float(a.gate_fired) for a in answers),
            "costs": _cost_means([a.costs for a in answers]),
            "ranking_length_mean": sum(len(a.ranking) for a in answers) / n,
            "queries_with_empty_ranking": sum(1 for a in answers if not a.ranking),
            "run_file": run_file_name(m.name),
        }
    report = EvalReport(
        settings={
            "modes": [m.name for m in modes],
            "cutoffs": list(CUTOFFS),
            "ranking_depth": LEXICAL_DEPTH,
            **{k: v for k, v in config.to_dict().items() if k != "max_hops"},
            "protocol_requested": protocol,
            "limit_queries": evalset.limit,
            "retrieval_version": __version__,
            "metrics_library": _library_versions(),
            "index_identity": index_identity(),
        },
        inputs=prepared.file_info(),
        protocol=evalset.to_dict(),
        modes=mode_rows,
        by_hop=by_hop(runs, modes, effect, lexical, evalset.base_rate, config.top_k_lexical),
        by_seed_quality=by_seed_quality(runs, modes, effect, lexical),
        files={
            "report_md": REPORT_MD,
            "report_json": REPORT_JSON,
            "plot": PLOT_PNG,
            "runs": {m.name: run_file_name(m.name) for m in modes},
            "qrels": QRELS_FILE,
        },
    )
    return report, effect


def _cost_means(costs: list[dict | None]) -> dict | None:
    """Per-query costs averaged over the queries (numbers), or counted (labels); None for modes without any."""
    present = [c for c in costs if c]
    if not present:
        return None
    out: dict = {}
    for key, value in present[0].items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[f"{key}_mean"] = sum(c[key] for c in present) / len(present)
        else:
            out[key] = dict(sorted(Counter(str(c[key]) for c in present).items()))
    return out


def _mean_of(values) -> float | None:
    """The mean of the values that are not None, or None when every one is."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _make_dirs(*directories: Path) -> None:
    for directory in directories:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {directory} ({exc}): choose another --out / --runs-dir") from None


def run_eval(
    corpus: str | os.PathLike[str],
    queries: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    modes: list[str] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    runs_dir: str | os.PathLike[str] | None = None,
    limit_queries: int | None = None,
    protocol: str = AUTO,
    dates: str | os.PathLike[str] | None = None,
    config: RetrievalConfig | None = None,
    progress: Progress | None = None,
    jobs: int | None = None,
    semantic: str | None = "auto",
    format: str | None = None,
    stem: str | None = DEFAULT_STEM,
    stopwords: str | None = DEFAULT_STOPWORDS,
) -> EvalReport:
    """Evaluate every mode in ``modes`` (default: all of ``MODES``, under the time-honest protocol all that can
    leave newer papers out) on ``queries`` over ``corpus``.

    Writes ``report.md``, ``report.json`` and ``recall_at_k.png`` into ``out`` and one TREC run file per mode
    into ``runs_dir`` (default: ``out``); returns the report. ``limit_queries`` keeps the first N evaluable
    queries; ``protocol`` is ``auto``, ``citation``, ``judged`` or ``time-honest`` (see ``retrieval.eval.protocol``;
    ``dates``: its dates file, default ``dates.tsv`` beside the corpus; ``format``: the corpus file's, as
    ``retrieval build --format`` takes it, default detected); the
    evaluation index is cached under ``cache_dir`` (see ``retrieval.eval.cache``). ``jobs`` worker processes
    share the queries (default: one per core, at most two; fewer than ``PARALLEL_MIN_QUERIES`` queries run in
    this process); the figures do not depend on it. ``semantic`` (``"wordllama"``) builds the evaluation index with
    the papers' vectors, so that the modes that blend the semantic signal (the policy's) use it; ``"auto"`` (the
    default) as ``retrieval build`` decides it, None or ``"none"`` without them. ``stem`` and
    ``stopwords`` analyse the evaluation index as ``retrieval build`` takes them (its defaults too). Raises
    ``RetrievalError`` subclasses with what to do next.
    """
    started = time.perf_counter()
    config = config or RetrievalConfig.lesson()  # the seed set of the hop and seed tables: the lesson's
    selected = select_modes(modes)
    if modes is None and protocol == "time-honest":  # every mode, of those that can leave newer papers out
        selected = [m for m in selected if getattr(m, "honours_exclusion", False)]
    require_library()  # fail before the long part, not after it
    require_matplotlib()
    prepared = prepare(Path(corpus), Path(queries), protocol, limit_queries, Path(dates) if dates else None, format)
    out_dir = Path(out)
    runs_path = Path(runs_dir) if runs_dir is not None else out_dir
    _make_dirs(out_dir, runs_path)
    inputs_seconds = time.perf_counter() - started

    semantic = embed.requested(semantic)
    if semantic == embed.AUTO:
        try:
            embed.encoder(embed.AUTO_MODEL)
        except ConfigError:
            semantic = None  # what auto builds without the model: the same index as none, the same cache entry
    elif semantic:
        embed.encoder(semantic)  # a missing package fails before the long part
    Analyser(stem, stopwords)  # an unknown name fails before the long part
    cached = open_index(prepared, resolve_cache_dir(cache_dir), progress, semantic, stem, stopwords)
    jobs = default_workers() if jobs is None else jobs
    if not 1 <= jobs <= LIMITS["jobs"]:
        raise ConfigError(f"jobs must be from 1 to {LIMITS['jobs']}, got {jobs}")
    if len(prepared.evalset.queries) < PARALLEL_MIN_QUERIES:
        jobs = 1
    prepare_started = time.perf_counter()
    for mode in selected:  # work a mode does once per index (a model to fit), before any query is timed
        prepare_mode = getattr(mode, "prepare", None)
        if prepare_mode is not None:
            prepare_mode(cached.path, progress, jobs)
    prepare_seconds = time.perf_counter() - prepare_started
    queries_started = time.perf_counter()
    if jobs > 1:
        runs = evaluate_in_workers(cached.path, prepared.evalset, selected, config, jobs, progress)
    else:
        with RetrievalClient(config=config, db=cached.path) as client:
            runs = evaluate(client, prepared.evalset, selected, config, progress)
    queries_seconds = time.perf_counter() - queries_started

    report, effect = assemble(prepared, runs, selected, config, protocol)
    report.inputs["analysis"] = analysis(stem, stopwords)
    used = check_index(cached.path).info.get("semantic_model") if semantic else None
    if used:
        report.inputs["semantic"] = used
    for m in selected:
        write_run(runs_path / run_file_name(m.name), ((r.qid, r.answers[m.name].ranking) for r in runs), m.name)
    # An earlier report's run of another mode (of other queries) is not left beside these qrels; a file named as no
    # mode is, the user's own, stays.
    written = {runs_path / run_file_name(m.name) for m in selected}
    for stale in {runs_path / run_file_name(name) for name in MODES} - written:
        stale.unlink(missing_ok=True)
    write_qrels(runs_path / QRELS_FILE, {r.qid: r.relevant for r in runs})
    plot_recall_at_k(
        out_dir / PLOT_PNG,
        CUTOFFS,
        {m.name: [effect[m.name].pooled_recall[k] for k in CUTOFFS] for m in selected},
        {m.name: [effect[m.name].means[f"recall@{k}"] for k in CUTOFFS] for m in selected},
        f"recall@K per mode: {report.inputs['corpus']['file']}, {len(runs):,} queries",
    )
    report.timing = {
        "index": {"status": cached.status, "seconds": cached.seconds, "detail": cached.detail},
        "inputs_seconds": inputs_seconds,
        "prepare_seconds": prepare_seconds,
        "queries_seconds": queries_seconds,
        "jobs": jobs,
        "lexical_pass": latency_summary([r.lexical_seconds for r in runs]),
        "modes": {m.name: latency_summary([r.answers[m.name].seconds for r in runs]) for m in selected},
        "total_seconds": time.perf_counter() - started,
    }
    replace_text(out_dir / REPORT_JSON, report.to_json())
    replace_text(out_dir / REPORT_MD, report.markdown())
    return report
