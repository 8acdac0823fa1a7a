"""The learned ranking (``RetrievalConfig(ranking="learned")``, and what ``ranking="auto"``, the default, picks
where the query's papers are cited enough: ``choose``): a linear model over the features a search computes,
read from a small versioned JSON file, applied at query time without any training.

Candidates: the BM25 top ``lexical_depth`` (100) and the papers a one-hop expansion from the ``top_k_lexical``
(20) seeds adds along the model's relations (ranker-v3: references and citing papers; ranker-v1 and v2 also
co-citation and coupling, which cost most of their time; at most 30 neighbours per seed and relation, hub
down-weighting, at most 1,000 added; ``retrieval.search.expansion``), always expanding, and, for a model over
the vote, the vote's papers. The model file says which candidate settings it was fitted with (``candidates``),
and a search under it uses those, whatever the configuration's own relations, hops and gate.

Features of a candidate (``FEATURES``, in this order):

- ``bm25_norm``: its BM25 score over the best seed's; ``bm25_match``: over the query's attainable score (the
  gate's measure); ``lexical_rr``: 1 / its rank in the BM25 list (0 beyond ``lexical_depth``); ``seed``: 1 for
  the ``top_k_lexical`` seeds;
- ``ev_<relation>``: the expansion's hub-weighted evidence along that relation (sum over the seeds reaching it
  of strength x weight x relation weight / ln(e + degree of the seed)), for references, citing, co-citation
  and coupling; ``n_<relation>``: ln(1 + how many seeds reach it along that relation);
- ``in_degree``: ln(1 + how many papers cite it) (``cited_counts``);
- ``recency``: the blend's ramp over the corpus's years; ``recency_sq``: its square; ``undated``: 1 for a paper
  without a year;
- ``year_gap``: (the seeds' median year - its year) over the corpus's span of years, an estimate of how much
  older than the query's work it is, observable at query time (0 without years); ``year_gap_abs``: its size;
- how dense the graph is around this query (``DERIVED_FEATURES``, ranker-v2): with ``linked`` the share of the
  BM25 top ``lexical_depth`` candidates that any seed reaches along any relation (the same for every candidate
  of a query; low on a thin graph such as CACM's), ``ev_<relation>_x_linked`` is the evidence times ``linked``
  and ``bm25_norm_x_unlinked`` is ``bm25_norm`` times (1 - ``linked``), so one set of weights can lean on the
  graph where it is dense and on BM25 where it is thin;
- the seeds' vote and the sentence sub-queries (``retrieval.search.vote``, ranker-v3; computed only for a model
  that uses them): ``vote`` (what ``retrieval explain`` ranks by, over the query's highest), ``voters``,
  ``sub_best`` and ``sub_share``; the vote's papers (its seeds and its 200 best-voted others) join the
  candidates;
- whether the query is short (``short``: fewer than ``SHORT_TOKENS`` = 40 tokens, a title or a question rather
  than an abstract) and its products with ``bm25_norm``, ``ev_references`` and ``vote`` (ranker-v3): the model's
  per-query choice, since on a short query BM25's seeds say least about what the query should find.

Score: ``sum_i weight_i * feature_i / scale_i``; each product is the feature's contribution (``entry.why()``),
so the contributions sum to the score. Order: the score rounded to ``SCORE_DECIMALS`` descending, then paper id.

Which model: ``RetrievalConfig.model`` (a path to a model file, or a loaded ``RankerModel``), else the file
``<index>.ranker.json`` beside the index when it exists (what ``retrieval train`` writes), else the shipped
``retrieval/models/ranker-v3.json`` (fitted on the development sets' abstract and title queries; see
docs/eval/learned.md; the previous ``ranker-v2.json`` and ``ranker-v1.json``, over the 18 ``CANDIDATE_FEATURES``
and ranker-v2's five density products, stay loadable). A model file is checked whole when it is read: a field of
the wrong type or out of range (``features`` not a list of known feature names, a weight that is not a finite
number, ``candidates`` not an object of known settings, each of its type and in its range) is an ``InputError``
naming the file, the field and what it must be; weights are at most ``MAX_WEIGHT`` in size and scales within
``SCALE_RANGE``, so that no score overflows.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from ..bm25 import SCORE_DECIMALS
from ..config import EXPAND_MODES, MAX_HOPS, MAX_WEIGHT, RetrievalConfig
from ..corpus.paper import Paper
from ..errors import ConfigError, InputError
from ..outfile import replace_text
from ..store.sql.dialect import Dialect, register_sharded, statement
from ..text import tokenise
from ..validate import LIMITS, check_choice, check_int, shown_value
from . import vote
from .adjacency import GRAPHS
from .blend import RankedPaper, recency
from .expansion import Reach, excluded, live
from .papers import checked_counts
from .split import MIN_TOKENS

#: The smallest and largest scale a model file may give a feature.
SCALE_RANGE = (1e-6, 1e6)

RELATIONS = ("references", "citing", "cocitation", "coupling")
#: The features of one candidate alone (ranker-v1's 18).
CANDIDATE_FEATURES = (
    "bm25_norm", "bm25_match", "lexical_rr", "seed",
    *(f"ev_{r}" for r in RELATIONS), *(f"n_{r}" for r in RELATIONS),
    "in_degree", "recency", "recency_sq", "undated", "year_gap", "year_gap_abs",
)  # fmt: skip
#: The seeds' vote and the sentence sub-queries (``retrieval.search.vote``; ranker-v3), and whether the query is
#: short (the same for every candidate of a query, so it ranks nothing alone: ``*_x_short`` use it).
VOTE_FEATURES = (*vote.FEATURES, "short")
#: What a candidate's row holds before the query-level features (the training cache's columns).
BASE_FEATURES = CANDIDATE_FEATURES + VOTE_FEATURES
#: The features that also depend on the query's candidates as a whole (``derived_values``; ranker-v2's five,
#: then ranker-v3's interactions with ``short``).
DERIVED_FEATURES = (
    *(f"ev_{r}_x_linked" for r in RELATIONS), "bm25_norm_x_unlinked",
    "bm25_norm_x_short", "ev_references_x_short", "vote_x_short",
)  # fmt: skip
FEATURES = BASE_FEATURES + DERIVED_FEATURES
# The keys of the per-relation features, made once rather than formatted for every candidate.
_EV = tuple(f"ev_{r}" for r in RELATIONS)
_N = tuple(f"n_{r}" for r in RELATIONS)
_EV_LINKED = tuple(f"ev_{r}_x_linked" for r in RELATIONS)
_NO_VOTE = dict.fromkeys(vote.FEATURES, 0.0)
#: A query of fewer tokens than this is short (a title or a question); from this many it is split into
#: sentences (``retrieval.search.split``).
SHORT_TOKENS = MIN_TOKENS

MODEL_FORMAT = "retrieval-ranker"
MODEL_VERSION = 1
#: The model shipped inside the package, and the name of the file ``retrieval train`` writes beside an index.
SHIPPED_MODEL = Path(__file__).resolve().parent.parent / "models" / "ranker-v3.json"
BESIDE_SUFFIX = ".ranker.json"

#: The candidate settings of a model file that does not say (those of ranker-v1).
DEFAULT_CANDIDATES = {
    "top_k_lexical": 20,
    "lexical_depth": 100,
    "max_hops": 1,
    "expand": "always",
    "relations": list(RELATIONS),
    "max_neighbours": 30,
    "hub_weighting": True,
    "max_candidates": 1000,
    "fanout": 100,
}

#: ``ranking="auto"`` ranks a query by the learned model when the papers of its BM25 list (the top
#: ``lexical_depth``) are cited at least this many times on average, else by the policy (``"expansion"``): below
#: it the citation evidence the model was fitted on is mostly absent (CACM's papers: 1.1 on average; hep-th's
#: 18.9, ml-arxiv's 3.4, with 5-7% of its queries below; docs/eval/learned.md).
AUTO_MIN_CITED = 1.5

IN_DEGREE_SQL = statement(
    lambda d: (
        f"""\
SELECT n.paper_id,
       n.cited_by
FROM {d.rows("paper_ids", "j")}
JOIN cited_counts AS n ON n.paper_id = j.value"""
    )
)
# A sharded coordinator: the ids sent to the shards as one key array (joined to the list, the whole of the
# distributed ``cited_counts`` came back for a hash join).
register_sharded(
    IN_DEGREE_SQL,
    """\
SELECT n.paper_id,
       n.cited_by
FROM cited_counts AS n
WHERE n.paper_id = ANY (ARRAY(SELECT jsonb_array_elements_text(CAST(:paper_ids AS jsonb))))""",
)


# Under an exclusion (``retrieval.search.cutoff``, the time-honest protocol): the citation rows naming each paper
# whose citing paper is not excluded (the expansion's live citations), so a newer paper's citation never counts.
def _in_degree_live(d: Dialect) -> str:
    return live(f"""\
SELECT j.value AS paper_id,
       count(*) AS cited_by
FROM {d.rows("paper_ids", "j")}
JOIN citations AS c ON c.cited_id = j.value
GROUP BY j.value""")


IN_DEGREE_SQL_EXCLUDING = statement(lambda d: f"WITH {excluded(d)}\n{_in_degree_live(d)}")


def in_degrees(snap, paper_ids: Sequence[str], excluded: frozenset[str] = frozenset()) -> dict[str, int]:
    """How many citation rows name each of ``paper_ids`` (``cited_counts``), or, under an exclusion, those whose
    citing paper is not excluded; papers never cited are left out."""
    if not paper_ids:
        return {}
    graph = GRAPHS.of(snap, excluded)
    if graph is not None:  # the kept citation graph counts the same rows (``adjacency``)
        return graph.in_degrees(paper_ids)
    params = {"paper_ids": json.dumps(list(paper_ids))}
    if excluded:
        params["excluded"] = json.dumps(sorted(excluded))
        return dict(snap.rows("learned: the candidates' in-degrees", IN_DEGREE_SQL_EXCLUDING, params))
    return checked_counts(snap, dict(snap.rows("learned: the candidates' in-degrees", IN_DEGREE_SQL, params)))


class RankerModel:
    """A linear ranking model: feature names, weights and scales, the candidate settings, and what it was
    fitted on (``meta``: training sets, cross-validated figures). Compare by content (``key``)."""

    __slots__ = ("name", "features", "weights", "scales", "candidates", "meta", "source", "sha256", "_terms")

    def __init__(
        self,
        features: Sequence[str],
        weights: Sequence[float],
        scales: Sequence[float],
        *,
        name: str = "ranker",
        candidates: Mapping | None = None,
        meta: Mapping | None = None,
        source: str = "",
        sha256: str = "",
    ) -> None:
        where = f"the model file {source}" if source else f"the model {name!r}"
        if not isinstance(name, str) or not name:
            raise InputError(f"{where}: name must be a non-empty string, got {shown_value(name)}: {_FIX}")
        features = _listed(where, "features", features, "feature names")
        weights = _listed(where, "weights", weights, "numbers")
        scales = _listed(where, "scales", scales, "numbers")
        for f in features:
            if not isinstance(f, str):
                got = shown_value(f)
                raise InputError(f"{where}: features must be a list of feature names, got {got} in it: {_FIX}")
        unknown = [f for f in features if f not in FEATURES]
        if unknown:
            raise InputError(
                f"{where} uses unknown feature(s) {', '.join(unknown)}: features must be some of {', '.join(FEATURES)}"
            )
        twice = sorted({f for f in features if features.count(f) > 1})
        if twice:
            raise InputError(f"{where}: features must name each feature once, got {', '.join(twice)} twice: {_FIX}")
        if not (len(features) == len(weights) == len(scales)):
            raise InputError(
                f"{where}: features, weights and scales must have the same length, got {len(features)}, "
                f"{len(weights)} and {len(scales)}: {_FIX}"
            )
        for field, values in (("weights", weights), ("scales", scales)):
            for value in values:
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise InputError(f"{where}: {field} must be finite numbers, got {shown_value(value)} in it: {_FIX}")
        if any(s <= 0 for s in scales):
            raise InputError(f"{where}: every one of scales must be positive: {_FIX}")
        # Bounded so that no candidate's score can overflow to infinity (which no JSON can carry and no ranking
        # can order): a fitted model's weights and scales are near 1.
        if any(abs(w) > MAX_WEIGHT for w in weights) or any(not SCALE_RANGE[0] <= s <= SCALE_RANGE[1] for s in scales):
            raise InputError(
                f"{where}: weights must be at most {MAX_WEIGHT:g} in size and scales from {SCALE_RANGE[0]:g} to "
                f"{SCALE_RANGE[1]:g}: {_FIX}"
            )
        self.name = name
        self.features = features
        self.weights = tuple(float(w) for w in weights)
        self.scales = tuple(float(s) for s in scales)
        # What ``score`` reads per candidate.
        self._terms = tuple(zip(self.features, self.weights, self.scales, strict=True))
        self.candidates = _checked_candidates(where, candidates)
        self.meta = dict(meta) if meta else {}
        self.source = source
        self.sha256 = sha256

    @property
    def uses_vote(self) -> bool:
        """Whether a feature of the model needs the seeds' vote (``retrieval.search.vote``), which costs a
        statement per direction and, for a long query, a BM25 list per sentence."""
        return any(f in vote.FEATURES or f == "vote_x_short" for f in self.features)

    @property
    def key(self) -> tuple:
        return (self.features, self.weights, self.scales, json.dumps(self.candidates, sort_keys=True))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RankerModel) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"RankerModel({self.name!r}, {len(self.features)} features)"

    def with_weights(self, weights: Sequence[float], name: str | None = None) -> RankerModel:
        """The same features, scales and candidates with other weights."""
        return RankerModel(self.features, weights, self.scales, name=name or self.name,
                           candidates=self.candidates, meta=self.meta)  # fmt: skip

    def contributions(self, values: Mapping[str, float]) -> dict[str, float]:
        """Each feature's product weight x value / scale (a missing feature is 0)."""
        return {f: w * values.get(f, 0.0) / s for f, w, s in zip(self.features, self.weights, self.scales, strict=True)}

    def score(self, values: Mapping[str, float]) -> float:
        """The sum of the contributions, in feature order (the same products, added in the same order, as
        ``sum(contributions(values).values())``, without building the dict)."""
        get = values.get
        total = 0
        for f, w, s in self._terms:
            total += w * get(f, 0.0) / s
        return total

    def candidate_config(self, cfg: RetrievalConfig) -> RetrievalConfig:
        """``cfg`` with the model's candidate settings (the expansion ranking over them)."""
        c = self.candidates
        return cfg.replace(
            ranking="expansion", top_k_lexical=c["top_k_lexical"], lexical_depth=c["lexical_depth"],
            max_hops=c["max_hops"], expand=c["expand"], relations=tuple(c["relations"]),
            max_neighbours=c["max_neighbours"], hub_weighting=c["hub_weighting"],
            max_candidates=c["max_candidates"], fanout=c["fanout"],
        )  # fmt: skip

    def to_dict(self) -> dict:
        return {
            "format": MODEL_FORMAT,
            "version": MODEL_VERSION,
            "name": self.name,
            "algorithm": "linear; score = sum of weight * feature / scale",
            "features": list(self.features),
            "weights": [round(w, 12) for w in self.weights],
            "scales": [round(s, 12) for s in self.scales],
            "candidates": self.candidates,
            **self.meta,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, sort_keys=False, ensure_ascii=True) + "\n"

    def save(self, path: str | os.PathLike[str]) -> str:
        """Write the model to ``path`` whole or not at all (``retrieval.outfile``: to a device or a pipe, such as
        ``/dev/stdout``, as a stream); returns the sha256 of what was written."""
        path = Path(path)
        text = self.to_json()
        try:
            replace_text(path, text)
        except OSError as exc:
            raise InputError(
                f"cannot write the model file {path} ({exc.strerror or exc}): check that you may write there, or "
                "choose another place"
            ) from None
        return hashlib.sha256(text.encode("utf-8")).hexdigest()  # not read back: a pipe has nothing to read

    @classmethod
    def from_dict(cls, data: Mapping, source: str = "", sha256: str = "") -> RankerModel:
        if not isinstance(data, Mapping) or data.get("format") != MODEL_FORMAT:
            raise InputError(f"{source or 'the model'} is not a retrieval ranker file (format {MODEL_FORMAT!r})")
        version = data.get("version")
        if isinstance(version, bool) or not isinstance(version, int):
            raise InputError(
                f"{source or 'the model'}: version must be the whole number {MODEL_VERSION}, got {shown_value(version)}"
            )
        if version != MODEL_VERSION:
            raise InputError(
                f"{source or 'the model'} is a ranker file of version {data.get('version')!r}; this retrieval "
                f"reads version {MODEL_VERSION}: refit it with `retrieval train`"
            )
        missing = [k for k in ("features", "weights", "scales") if k not in data]
        if missing:
            raise InputError(
                f"{source or 'the model'} lacks the field(s) {', '.join(missing)} of a ranker file: {_FIX}"
            )
        if "candidates" in data and data["candidates"] is None:  # absent is ranker-v1's settings; null is broken
            raise _not_settings(f"the model file {source}" if source else "the model", None)
        meta = {k: v for k, v in data.items() if k not in _OWN_KEYS}
        return cls(data["features"], data["weights"], data["scales"], name=data.get("name", "ranker"),
                   candidates=data.get("candidates"), meta=meta, source=source, sha256=sha256)  # fmt: skip

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RankerModel:
        """Read a model file (``InputError`` naming the file when it is missing or malformed)."""
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read the model file {path} ({exc.strerror or exc})") from None
        try:
            data = json.loads(raw.decode("utf-8-sig"))
        except (UnicodeDecodeError, ValueError) as exc:  # ValueError: bad JSON, or a number of 4,300+ digits
            raise InputError(f"{path} is not a JSON ranker file ({exc})") from None
        except RecursionError:
            raise InputError(f"{path} is not a JSON ranker file (nested too deeply to read)") from None
        return cls.from_dict(data, source=str(path), sha256=hashlib.sha256(raw).hexdigest())


#: What a message about a broken model says to do.
_FIX = "correct the file, or write a new one with `retrieval train`"


def _listed(where: str, field: str, value: object, what: str) -> tuple:
    """``value`` (a model's ``field``) as a tuple: it must be a list (not a string, an object or a number)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InputError(f"{where}: {field} must be a list of {what}, got {shown_value(value)}: {_FIX}")
    return tuple(value)


def _not_settings(where: str, value: object) -> InputError:
    """The error for a model's ``candidates`` that is not an object."""
    return InputError(
        f"{where}: candidates must be an object of candidate settings ({', '.join(DEFAULT_CANDIDATES)}), got "
        f"{shown_value(value)}: {_FIX}"
    )


def _checked_candidates(where: str, candidates: object) -> dict:
    """A model's candidate settings (``candidates``) over ``DEFAULT_CANDIDATES``, each of its type and in its
    range (an ``InputError`` naming ``where`` and the setting otherwise); None is the defaults."""
    if candidates is None:
        candidates = {}
    if not isinstance(candidates, Mapping):
        raise _not_settings(where, candidates)
    unknown = [str(k) for k in candidates if k not in DEFAULT_CANDIDATES]
    if unknown:
        raise InputError(
            f"{where}: candidates has unknown setting(s) {', '.join(unknown)}: its settings must be some of "
            f"{', '.join(DEFAULT_CANDIDATES)}"
        )
    c = {**DEFAULT_CANDIDATES, **candidates}
    try:
        check_int("candidates.top_k_lexical", c["top_k_lexical"], 1, LIMITS["top_k_lexical"])
        check_int("candidates.lexical_depth", c["lexical_depth"], 1, LIMITS["lexical_depth"])
        check_int("candidates.max_hops", c["max_hops"], 0, MAX_HOPS)
        check_choice("candidates.expand", c["expand"], EXPAND_MODES)
        check_int("candidates.max_neighbours", c["max_neighbours"], 1, LIMITS["max_neighbours"], allow_none=True)
        check_int("candidates.max_candidates", c["max_candidates"], 0, LIMITS["max_candidates"], allow_none=True)
        check_int("candidates.fanout", c["fanout"], 1, LIMITS["fanout"])
    except ConfigError as exc:
        raise InputError(f"{where}: {exc}: {_FIX}") from None
    if not isinstance(c["hub_weighting"], bool):
        raise InputError(
            f"{where}: candidates.hub_weighting must be true or false, got {shown_value(c['hub_weighting'])}: {_FIX}"
        )
    relations = c["relations"]
    if (
        isinstance(relations, (str, bytes, Mapping))
        or not isinstance(relations, Iterable)
        or not (relations := list(relations))
        or any(not isinstance(r, str) or r not in RELATIONS for r in relations)
    ):
        raise InputError(
            f"{where}: candidates.relations must be a list of some of {', '.join(RELATIONS)}, got "
            f"{shown_value(c['relations'])}: {_FIX}"
        )
    c["relations"] = list(dict.fromkeys(relations))
    return c


_OWN_KEYS = {"format", "version", "name", "algorithm", "features", "weights", "scales", "candidates"}
_LOADED: dict[tuple[str, int, int], RankerModel] = {}


def load_cached(path: Path) -> RankerModel:
    """``RankerModel.load``, kept per (path, mtime, size) so a process reads a model file once."""
    try:
        st = path.stat()
    except OSError:
        return RankerModel.load(path)  # the error that names the file
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _LOADED:
        _LOADED[key] = RankerModel.load(path)
    return _LOADED[key]


def beside(index: str | os.PathLike[str]) -> Path:
    """The model file ``retrieval train`` writes for the index file ``index``: ``<index>.ranker.json``."""
    index = Path(index)
    return index.with_name(index.name + BESIDE_SUFFIX)


def resolve_model(cfg: RetrievalConfig, index: object = None) -> RankerModel:
    """The model a learned search uses: ``cfg.model`` (a ``RankerModel`` or a path), else the file beside the
    index file ``index`` when there is one, else the shipped model."""
    chosen = getattr(cfg, "model", None)
    if isinstance(chosen, RankerModel):
        return chosen
    if chosen is not None:
        return load_cached(Path(chosen))
    if isinstance(index, Path):
        local = beside(index)
        if local.is_file():
            return load_cached(local)
    if not SHIPPED_MODEL.is_file():  # pragma: no cover - a broken installation
        raise ConfigError(f"the shipped model {SHIPPED_MODEL} is missing: reinstall retrieval")
    return load_cached(SHIPPED_MODEL)


class LearnedPaper(RankedPaper):
    """A result ranked by a ``RankerModel``: ``features`` (every feature's value) and ``contributions`` (weight x
    value / scale per feature of the model, summing to ``final_score``)."""

    __slots__ = ("features", "model", "_contributions")

    @property
    def model_name(self) -> str:
        return self.model.name

    @property
    def contributions(self) -> dict[str, float]:
        # Computed when read: a search reads them for the entries it returns, not for every candidate it ranks.
        if self._contributions is None:
            self._contributions = self.model.contributions(self.features)
            if self.cocited is not None:  # the co-citation feedback's addition (``retrieval.search.cocited``)
                self._contributions["cocited"] = self.cocited
        return self._contributions

    def why(self, config: RetrievalConfig | None = None) -> str:
        """The score as the sum of its largest contributions (the rest summed as ``other``)."""
        shown = sorted(self.contributions.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
        parts = [f"{name} {value:+.3f}" for name, value in shown[:5] if value != 0.0]
        rest = sum(value for _, value in shown[5:])
        if rest:
            parts.append(f"other {rest:+.3f}")
        return f"{self.model_name}: " + " ".join(parts or ["0"]) + f" = {self.final_score:.4f} ({self.how()})"

    def to_dict(self) -> dict:
        out = super().to_dict()
        out["features"] = dict(self.features)
        out["contributions"] = dict(self.contributions)
        out["model"] = self.model_name
        return out


def feature_values(
    pid: str,
    paper: Paper,
    *,
    bm25: float,
    best_bm25: float,
    attainable: float,
    lexical_rank: int | None,
    seed: bool,
    reaches: Sequence[Reach],
    in_degree: int,
    years: tuple[int | None, int | None],
    era: float | None = None,
    voted: vote.Vote | None = None,
    short: bool = False,
) -> dict[str, float]:
    """Every feature of ``BASE_FEATURES`` for one candidate (see the module docstring); the vote's are 0 without
    ``voted``."""
    ev = dict.fromkeys(RELATIONS, 0.0)
    sources: dict[str, set] = {r: set() for r in RELATIONS}
    for reach in reaches:
        ev[reach.relation] += reach.contribution
        sources[reach.relation].add(reach.source)
    rec = recency(paper.year, *years)
    span = (years[1] - years[0]) if years[0] is not None and years[1] is not None else 0
    gap = (era - paper.year) / max(1, span) if era is not None and paper.year is not None else 0.0
    values = {
        "bm25_norm": bm25 / best_bm25 if best_bm25 > 0 else 0.0,
        "bm25_match": bm25 / attainable if attainable > 0 else 0.0,
        "lexical_rr": 1.0 / lexical_rank if lexical_rank else 0.0,
        "seed": 1.0 if seed else 0.0,
    }
    for key, r in zip(_EV, RELATIONS, strict=True):
        values[key] = ev[r]
    for key, r in zip(_N, RELATIONS, strict=True):
        values[key] = math.log1p(len(sources[r]))
    values["in_degree"] = math.log1p(in_degree)
    values["recency"] = rec
    values["recency_sq"] = rec * rec
    values["undated"] = 1.0 if paper.year is None else 0.0
    values["year_gap"] = gap
    values["year_gap_abs"] = abs(gap)
    values.update(voted.features(pid) if voted is not None else _NO_VOTE)
    values["short"] = 1.0 if short else 0.0
    return values


def linked_share(rows: Sequence[Mapping[str, float]]) -> float:
    """The share of ``rows`` (a query's candidates' base features) in the BM25 top ``lexical_depth``
    (``lexical_rr`` > 0) that some seed reaches along some relation (``n_<relation>`` > 0); 0 without any."""
    lexical = [v for v in rows if v["lexical_rr"] > 0]
    if not lexical:
        return 0.0
    return sum(1 for v in lexical if any(v[f"n_{r}"] > 0 for r in RELATIONS)) / len(lexical)


def derived_values(values: Mapping[str, float], linked: float) -> dict[str, float]:
    """The ``DERIVED_FEATURES`` of one candidate, from its base features and the query's ``linked_share``."""
    short = values.get("short", 0.0)
    return {
        **{key: values[ev] * linked for key, ev in zip(_EV_LINKED, _EV, strict=True)},
        "bm25_norm_x_unlinked": values["bm25_norm"] * (1.0 - linked),
        "bm25_norm_x_short": values["bm25_norm"] * short,
        "ev_references_x_short": values["ev_references"] * short,
        "vote_x_short": values.get("vote", 0.0) * short,
    }


def rank(
    model: RankerModel,
    cfg: RetrievalConfig,
    papers: Mapping[str, Paper],
    distances: Mapping[str, int | None],
    bm25: Mapping[str, float],
    hits: Sequence[tuple[str, float]],
    attainable: float,
    reaches: Mapping[str, list[Reach]],
    in_degrees: Mapping[str, int],
    years: tuple[int | None, int | None],
    voted: vote.Vote | None = None,
    short: bool = False,
) -> list[LearnedPaper]:
    """Every candidate of ``distances`` scored by ``model`` and sorted by score (rounded), then id. ``cfg`` is
    the candidate configuration (``model.candidate_config``); ``hits`` the BM25 list, best first; ``voted`` the
    query's vote when the model uses it; ``short`` whether the query is short (``is_short``)."""
    seeds = hits[: cfg.top_k_lexical]
    best = seeds[0][1] if seeds else 0.0
    lexical_rank = {pid: i for i, (pid, _) in enumerate(hits[: cfg.lexical_depth], start=1)}
    seed_ids = {pid for pid, _ in seeds}
    era = median([papers[pid].year for pid in seed_ids if pid in papers and papers[pid].year is not None])
    every: dict[str, dict[str, float]] = {}
    for pid in distances:
        every[pid] = feature_values(
            pid, papers[pid], bm25=bm25[pid], best_bm25=best, attainable=attainable,
            lexical_rank=lexical_rank.get(pid), seed=pid in seed_ids, reaches=reaches.get(pid, ()),
            in_degree=in_degrees.get(pid, 0), years=years, era=era, voted=voted, short=short,
        )  # fmt: skip
    linked = linked_share(list(every.values()))
    ranked: list[LearnedPaper] = []
    for pid, distance in distances.items():
        paper = papers[pid]
        found = reaches.get(pid, ())
        values = every[pid]
        values.update(derived_values(values, linked))
        final = model.score(values)
        graph = sum(values[key] for key in _EV)
        entry = LearnedPaper(paper, bm25[pid], distance, values["recency"], final, values["bm25_norm"], graph,
                             list(found)[:3], cfg)  # fmt: skip
        entry.features = values
        entry.model = model
        entry._contributions = None
        ranked.append(entry)
    ranked.sort(key=lambda r: (-round(r.final_score, SCORE_DECIMALS), r.paper.id))
    return ranked


def choose(snap, hits: Sequence[tuple[str, float]], excluded: frozenset[str] = frozenset()) -> dict:
    """``ranking="auto"``'s choice for a query whose BM25 list is ``hits``: ``"learned"`` when its papers are
    cited, on average, at least ``AUTO_MIN_CITED`` times (``in_degrees``: not by ``excluded`` papers), else
    ``"expansion"`` (the policy); with how often they are cited and the threshold, for the report."""
    ids = [pid for pid, _ in hits]
    counts = in_degrees(snap, ids, excluded)
    mean = sum(counts.values()) / len(ids) if ids else 0.0
    ranking = "learned" if mean >= AUTO_MIN_CITED else "expansion"
    return {"ranking": ranking, "cited_by_mean": round(mean, 4), "threshold": AUTO_MIN_CITED, "papers": len(ids)}


def is_short(text: str) -> bool:
    """Whether a query of this text is short: fewer than ``SHORT_TOKENS`` tokens (it is not split)."""
    return len(tokenise(text)) < SHORT_TOKENS


def median(values: Sequence[int]) -> float | None:
    """The median of ``values`` (the mean of the middle two for an even count), None when empty."""
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def describe(model: RankerModel) -> dict:
    """What a result's report says about its model."""
    return {"name": model.name, "features": len(model.features), "sha256": model.sha256 or None}


__all__ = [
    "BASE_FEATURES",
    "DERIVED_FEATURES",
    "FEATURES",
    "LearnedPaper",
    "RankerModel",
    "beside",
    "rank",
    "resolve_model",
]
