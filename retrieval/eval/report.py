"""The report of an evaluation: one object, rendered as JSON (every figure) and as Markdown tables.

Everything in the report is a function of the inputs and the package's version, except the ``timing`` object
(latencies, build and run times, whether the index came from the cache). Two runs on the same inputs therefore
write byte-identical ``report.json`` files once ``timing`` is removed, and byte-identical run files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .graphrag import SEED_TABLE_CUTOFFS
from .metrics import CUTOFFS, NDCG_CUTOFF

REPORT_FORMAT = "retrieval-eval/1"
DIGITS = 6


def _rounded(value):
    if isinstance(value, float):
        return round(value, DIGITS)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def _f(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _cells(values: list[str]) -> str:
    return "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"


def _table(header: list[str], rows: list[list[str]], align: str | None = None) -> list[str]:
    """A Markdown table (``|`` inside a cell escaped); ``align`` holds one ``l`` or ``r`` per column."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    return [_cells(header), "| " + " | ".join(rule) + " |", *(_cells(row) for row in rows)]


@dataclass
class EvalReport:
    """Every figure of a run. ``to_dict()`` is report.json; ``markdown()`` is report.md."""

    settings: dict
    inputs: dict
    protocol: dict
    modes: dict[str, dict]
    by_hop: list[dict]
    by_seed_quality: list[dict]
    files: dict
    timing: dict = field(default_factory=dict)

    def to_dict(self, timing: bool = True) -> dict:
        """The report as JSON-ready data, floats rounded to 6 decimals; ``timing=False`` leaves out ``timing``."""
        data = {
            "format": REPORT_FORMAT,
            "settings": self.settings,
            "inputs": self.inputs,
            "protocol": self.protocol,
            "modes": self.modes,
            "by_hop": self.by_hop,
            "by_seed_quality": self.by_seed_quality,
            "files": self.files,
        }
        if timing:
            data["timing"] = self.timing
        return _rounded(data)

    def to_json(self, timing: bool = True) -> str:
        return json.dumps(self.to_dict(timing), indent=2, ensure_ascii=False) + "\n"

    # -- Markdown -------------------------------------------------------------------------------------------
    def markdown(self) -> str:
        return "\n".join(self._summary() + self._effectiveness() + self._graph() + self._notes() + self._timing())

    def _summary(self) -> list[str]:
        c, q, p, s = self.inputs["corpus"], self.inputs["queries"], self.protocol, self.settings
        lines = [
            f"# Retrieval evaluation: `{c['file']}` with `{q['file']}`",
            "",
            f"- Corpus: `{c['file']}`, {p['corpus_papers']:,} papers, sha256 `{c['sha256']}`.",
            f"- Queries: `{q['file']}`, {p['queries_in_file']:,} queries, sha256 `{q['sha256']}`.",
        ]
        if self.inputs.get("analysis"):
            a = self.inputs["analysis"]
            lines.append(
                f"- Analysis: stemmer `{a['stemmer']}`, stop words `{a['stopwords']}` (`retrieval build`'s "
                "`--stem`, `--stopwords`)."
            )
        if self.inputs.get("semantic"):
            lines.append(
                f"- Semantic signal: the index searched keeps each paper's vector of `{self.inputs['semantic']}` "
                "(`--semantic`), so the policy's blend, and `auto` where it ranks by the policy, add "
                "`w_semantic * semantic_norm` (weight 1)."
            )
        if p["kind"] in ("citation", "time-honest"):
            lines.append(
                f"- Protocol: **citation recommendation** (qids are corpus papers). The {p['query_papers_removed']:,} "
                f"query papers of the file were removed from the index searched, with their "
                f"{p['citation_edges_removed']:,} citation edges (in and out); "
                f"{p['relevant_removed_query_papers_dropped']:,} relevant entries that were query papers were dropped "
                "from the relevant lists."
            )
        for warning in p.get("warnings", ()):
            lines.append(f"- **Warning:** {warning}.")
        if p["kind"] == "time-honest":
            dated = f"by day where `{p['dates_file']}` dates both" if p.get("dates_file") else "by year"
            lines.append(
                f"- **Time-honest**: each query also could not see any paper newer than the query paper ({dated}, "
                "else by year): not in its BM25 list, not reached or walked through by the expansion, and "
                f"{p['relevant_newer_than_query_dropped']:,} relevant entries newer than their query paper were "
                "dropped. BM25 statistics (N, df) are the whole index's."
            )
        elif p["kind"] != "citation":
            lines.append(
                "- Protocol: **human judgments** (qids are not corpus papers): nothing removed from the index."
            )
        lines.append(
            f"- Relevant ids in the file: {p['relevant_ids_in_file']:,}; dropped as not in the corpus: "
            f"{p['relevant_not_in_corpus_dropped']:,}; duplicates dropped: {p['relevant_duplicates_dropped']:,}."
        )
        limited = f" (the first {p['limit_queries']:,}, `--limit-queries`)" if p["limit_queries"] is not None else ""
        lines.append(
            f"- Queries evaluated: {p['queries_evaluated']:,}{limited} of {p['queries_evaluable']:,} evaluable; "
            f"skipped: {p['queries_skipped']:,}" + (" (listed below)." if p["queries_skipped"] else ".")
        )
        lines.append(
            f"- Index searched: {p['index_papers']:,} papers. Mean |Rel| {p['mean_relevant']:.2f}; base rate "
            f"mean |Rel| / N = {p['base_rate']:.6f}."
        )
        lines.append(
            f"- Settings: BM25 top {s['ranking_depth']} computed once per query and shared; blend seeds = its first "
            f"{s['top_k_lexical']}; final = {s['w_bm25']:g}·bm25/max + {s['w_graph']:g}·graph (1/0.6/0.3 by hop) + "
            f"{s['w_recency']:g}·recency. Metrics: {s['metrics_library']}."
        )
        return lines + [""]

    def _effectiveness(self) -> list[str]:
        names = list(self.modes)
        ks = [f"@{k}" for k in CUTOFFS]
        lines = ["## Recall@K, pooled (Crase: relevant found over relevant, summed over queries)", ""]
        lines += _table(["mode", *ks], [[n, *(_f(self.modes[n]["pooled_recall"][k]) for k in ks)] for n in names])
        lines += ["", "## Recall@K, macro (mean over queries of the per-query recall)", ""]
        lines += _table(["mode", *ks], [[n, *(_f(self.modes[n]["recall"][k]) for k in ks)] for n in names])
        lines += ["", "## MAP@K (Crase: AP@K = (1/|Rel|) Σ_{i≤K} Prec@i·rel_i, mean over queries)", ""]
        lines += _table(["mode", *ks], [[n, *(_f(self.modes[n]["map"][k]) for k in ks)] for n in names])
        lines += ["", "## Top of the ranking, and the work per query", ""]
        rows = [
            [
                n,
                _f(self.modes[n][f"ndcg@{NDCG_CUTOFF}"]),
                _f(self.modes[n]["mrr"]),
                f"{self.modes[n]['candidates_mean']:,.1f}",
                f"{self.modes[n]['ranking_length_mean']:.1f}",
                self.modes[n]["description"],
            ]
            for n in names
        ]
        header = [
            "mode",
            f"nDCG@{NDCG_CUTOFF}",
            "MRR",
            "candidates scored (mean)",
            "ranking length (mean)",
            "what it is",
        ]
        lines += _table(header, rows, "lrrrrl")
        lines += self._policies(names)
        lines += self._costs(names)
        return lines + [""]

    def _costs(self, names: list[str]) -> list[str]:
        """The evidence modes' cost per query: the graph's size, the edges kept, the scorer calls."""
        with_costs = [n for n in names if self.modes[n].get("costs")]
        if not with_costs:
            return []
        rows = []
        for n in with_costs:
            c = self.modes[n]["costs"]
            statuses = ", ".join(f"{k} {v}" for k, v in c.get("status", {}).items())
            rows.append([n, f"{c['nodes_mean']:,.1f}", f"{c['edges_mean']:,.1f}", f"{c['kept_edges_mean']:,.1f}",
                         f"{c['scorer_calls_mean']:,.1f}", statuses])  # fmt: skip
        header = ["mode", "|V|", "|E|", "edges kept", "scorer calls", "graph health (queries)"]
        note = "Means per query; the latency of each mode is in the Timing section."
        return ["", "## Evidence graph: cost per query", "", note, "", *_table(header, rows, "lrrrrl")]

    def _policies(self, names: list[str]) -> list[str]:
        """The policy table: modes with an expansion gate, with what the graph added and how often it fired."""
        gated = [n for n in names if self.modes[n].get("gate_fired_share") is not None]
        if not gated:
            return []
        rows = [
            [
                n,
                _f(self.modes[n]["pooled_recall"]["@10"]),
                _f(self.modes[n]["pooled_recall"]["@50"]),
                _f(self.modes[n][f"ndcg@{NDCG_CUTOFF}"]),
                f"{self.modes[n]['candidates_mean']:,.1f}",
                f"{self.modes[n]['graph_added_mean']:,.1f}",
                f"{self.modes[n]['gate_fired_share']:.3f}",
            ]
            for n in gated
        ]
        header = ["mode", "recall@10", "recall@50", f"nDCG@{NDCG_CUTOFF}", "candidates scored", "added by the graph",
                  "gate fired"]  # fmt: skip
        note = (
            "Recall pooled. Candidates scored: the BM25 list ranked plus what the graph added (means per query); "
            "gate fired: share of queries on which the graph was expanded."
        )
        return ["", "## Expansion policies", "", note, "", *_table(header, rows, "lrrrrrr")]

    def _graph(self) -> list[str]:
        if len(self.by_hop) < 2:
            return [
                "## Graph-RAG tables",
                "",
                "Not computed: they need at least one graph mode (e.g. `--modes bm25,blend-1hop,blend-2hop`).",
                "",
            ]
        base = self.protocol["base_rate"]
        lines = ["## Graph-RAG: by hop", ""]
        rows = [
            [
                str(r["hop"]),
                r["source"],
                _f(r["recall@10_pooled"]),
                _f(r["recall@10_macro"]),
                f"{r['seeds_in_top10_mean']:.2f}",
                f"{r['candidates_mean']:,.1f}",
                f"{r['new_papers_mean']:,.1f}",
                _f(r["newest_hop_precision"]),
                "–" if r["precision_over_base_rate"] is None else f"{r['precision_over_base_rate']:,.1f}×",
                _f(r["reach_pooled"]),
            ]
            for r in self.by_hop
        ]
        header = [
            "hop",
            "ranking",
            "recall@10 pooled",
            "recall@10 macro",
            "seeds in top 10",
            "candidate set (mean)",
            "new at this hop (mean)",
            "precision of this hop",
            "vs base rate",
            "reach (pooled)",
        ]
        lines += _table(header, rows, "rlrrrrrrrr")
        lines += [
            "",
            f"Base rate (mean |Rel| / N): {base:.6f}. Precision of a hop: relevant papers among those first reached "
            "at that hop over all papers first reached there, pooled over queries; 'vs base rate' is their ratio. "
            "Reach: share of all relevant papers within that many hops of the seeds (ranked or not). Seeds in top 10: "
            "mean number of seeds among the ranking's first 10 papers.",
            "",
        ]
        graph_names = [g["mode"] for g in self.by_seed_quality[0]["with_graph"]]
        for k in SEED_TABLE_CUTOFFS:
            lines += [f"## Graph-RAG: by seed quality, recall@{k} (buckets: relevant papers among the BM25 seeds)", ""]
            header = ["relevant in seeds", "queries", "mean |Rel|", f"recall@{k} BM25"]
            for name in graph_names:
                header += [f"recall@{k} {name}", "lift"]
            rows = []
            for r in self.by_seed_quality:
                row = [r["bucket"], str(r["queries"]), _f(r["mean_relevant"], 1), _f(r["bm25"][f"recall@{k}"])]
                for g in r["with_graph"]:
                    lift = g[f"lift@{k}"]
                    row += [_f(g[f"recall@{k}"]), "–" if lift is None else f"{lift:+.4f}"]
                rows.append(row)
            lines += _table(header, rows)
            lines.append("")
        lines += [
            "Recall in these tables is macro (mean over the bucket's queries); lift = with the graph minus BM25 alone.",
            "",
        ]
        return lines

    def _notes(self) -> list[str]:
        lines = []
        skipped = self.protocol["skipped"]
        if skipped:
            lines += [f"## Skipped queries ({len(skipped):,})", ""]
            lines += _table(["qid", "line", "reason"], [[s["qid"], str(s["line"]), s["reason"]] for s in skipped[:50]])
            if len(skipped) > 50:
                lines.append(f"\n… and {len(skipped) - 50:,} more (all are listed in report.json).")
            lines.append("")
        lines += [
            "## Definitions",
            "",
            "- Pooled recall@K (Crase): Σ_q |Rel(q) ∩ top K(q)| / Σ_q |Rel(q)|. Macro recall@K: the per-query ratio, "
            "averaged over queries.",
            "- MAP@K (Crase): AP@K(q) = (1/|Rel(q)|) Σ_{i≤K} Prec@i·rel_i (trec_eval `map_cut`), averaged over "
            "queries.",
            "- nDCG@10 with binary gains; MRR = 1/rank of the first relevant paper in the ranking (0 if none in it).",
            "- Macro recall, MAP, nDCG and MRR are computed per query by ir-measures (pytrec_eval provider) and "
            "averaged over every evaluated query (an empty ranking scores 0); pooled recall is computed directly.",
            "- Rankings are at most 100 long. A blend ranks only its seeds and the papers its walk reached, so its "
            "ranking can be shorter (see ranking length).",
            "- Candidates scored: for `bm25`, the papers sharing at least one token with the query (all of which the "
            "BM25 aggregation scores); for a blend, `hit_count` (seeds plus walked papers, each given a blended "
            "score).",
            "- Run files (TREC format) hold the rank-derived score len − rank + 1, so trec_eval keeps each mode's "
            "order (its tie-break by document id would otherwise reorder equal scores). `trec_eval -c -m all_trec "
            "qrels.trec run.MODE.trec` gives these figures (`-c` counts a query with an empty ranking, which has no "
            "line in a run, as 0); ids with whitespace or `%` are percent-encoded there.",
            "",
        ]
        return lines

    def _timing(self) -> list[str]:
        t = self.timing
        if not t:
            return []
        lines = [
            "## Timing (varies from run to run)",
            "",
            "Everything above this section is deterministic: the same inputs give the same figures, byte for byte "
            "(report.json keeps every timing under `timing`).",
            "",
        ]
        rows = [
            [n, f"{v['median_ms']:.1f}", f"{v['p95_ms']:.1f}", f"{v['mean_ms']:.1f}"] for n, v in t["modes"].items()
        ]
        lines += _table(["mode", "latency median (ms)", "p95 (ms)", "mean (ms)"], rows)
        lex = t["lexical_pass"]
        idx = t["index"]
        how = {"hit": "found in the cache", "built": "built", "rebuilt": "rebuilt"}[idx["status"]]
        lines += [
            "",
            f"A query's latency is the shared BM25 top-{self.settings['ranking_depth']} pass (median "
            f"{lex['median_ms']:.1f} ms) plus the mode's own work; counting candidates is not timed.",
            f"Index {how} in {idx['seconds']:.1f} s; corpus and query files read in {t['inputs_seconds']:.1f} s; "
            f"{_prepared(t.get('prepare_seconds'))}queries run in {t['queries_seconds']:.1f} s"
            f"{_jobs(t.get('jobs', 1))}; total {t['total_seconds']:.1f} s.",
            "",
        ]
        return lines


def _prepared(seconds: float | None) -> str:
    """The modes' work once per index (a model fitted on it), where there was any worth a line."""
    return f"models fitted on the index in {seconds:.1f} s; " if seconds and seconds >= 0.05 else ""


def _jobs(jobs: int) -> str:
    """How the queries were shared, for the timing line (each latency is measured in the process that ran it)."""
    return "" if jobs <= 1 else f" by {jobs} worker processes (each latency measured in the worker that ran it)"
