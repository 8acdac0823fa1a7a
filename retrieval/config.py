"""Settings: the index location (the one place that reads the environment) and the search configuration."""

from __future__ import annotations

import os
import re
import warnings
from collections import namedtuple
from collections.abc import Mapping
from pathlib import Path

from .errors import ConfigError
from .validate import LIMITS, check_choice, check_int, check_number, shown_value

DB_ENV_VAR = "RETRIEVAL_DB"
#: Seconds one read may take by default (a search's snapshot on SQLite, each statement on PostgreSQL) before it is
#: stopped with a ``QueryTimeoutError``: a server's requests cannot hold a thread for ever.
QUERY_TIMEOUT = 60.0
DEFAULT_DB = "retrieval.db"

#: The most hops the citation walk takes; larger requests are clamped to it.
MAX_HOPS = 2
#: The largest blend weight a configuration takes: a weight past it would carry scores out of a double's range.
MAX_WEIGHT = 1e6
#: graph_score by hop distance: a seed, a neighbour of a seed, a neighbour of a neighbour.
GRAPH_SCORES = {0: 1.0, 1: 0.6, 2: 0.3}


_PASSWORD_PARAM = re.compile(r"[?&](?:ssl)?password=([^&#]*)")


class DatabaseURL(str):
    """An index on a database server: a SQLAlchemy URL such as ``postgresql://user@host/papers`` (the text, with
    ``dialect``; ``shown`` hides a password, for messages)."""

    __slots__ = ()

    @property
    def dialect(self) -> str:
        return self.split("://", 1)[0].split("+", 1)[0]

    @property
    def shown(self) -> str:
        return self.hide(str(self))

    def hide(self, text: str) -> str:
        """``text`` with this URL's password (after ``user:`` or as ``password=``, as written and
        percent-decoded) replaced by ``***``: a driver's message may quote the URL whole."""
        from urllib.parse import unquote

        scheme, _, rest = self.partition("://")
        who, at, _ = rest.rpartition("@")
        secrets = [who.split(":", 1)[1]] if at and ":" in who else []
        secrets += [m.group(1) for m in _PASSWORD_PARAM.finditer(rest)]
        for secret in sorted({s for raw in secrets if raw for s in (raw, unquote(raw))}, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text


#: URL schemes of the servers an index can live on (besides a SQLite file).
SERVER_SCHEMES = ("postgresql", "postgres")


def resolve_db(db: str | os.PathLike[str] | None = None) -> Path | DatabaseURL:
    """Where the index is: ``db`` if given, else ``$RETRIEVAL_DB``, else ``./retrieval.db``. A plain path or a
    ``sqlite:///PATH`` URL is a SQLite file (a ``Path``); ``postgresql://...`` is a ``DatabaseURL``; any other
    ``scheme://`` is refused with ``ConfigError``."""
    if db is not None and not isinstance(db, (str, os.PathLike)):
        raise ConfigError(
            f"db must be an index's path or URL (a string or a path), got {type(db).__name__}: give a file path, "
            "sqlite:///PATH or postgresql://USER@HOST/DATABASE"
        )
    if db is None or str(db) == "":
        db = os.environ.get(DB_ENV_VAR) or DEFAULT_DB
        if not str(db).strip():  # "no index at  : build one with `retrieval build --db  `"
            raise ConfigError(f"${DB_ENV_VAR} is blank ({str(db)!r}): unset it, or set it to an index's path or URL")
    elif not str(db).strip():
        raise ConfigError(f"--db is blank ({str(db)!r}): give an index's path or URL")
    if isinstance(db, Path) or "://" not in str(db):
        return Path(db)
    text = str(db)
    scheme = text.split("://", 1)[0].split("+", 1)[0].lower()
    if scheme == "sqlite":
        path = text.split("://", 1)[1]
        return Path(path[1:] if path.startswith("/") else path)  # sqlite:///rel.db, sqlite:////abs.db
    if scheme in SERVER_SCHEMES:
        return DatabaseURL("postgresql" + text[len(text.split("://", 1)[0]) :].replace("postgresql+psycopg", ""))
    raise ConfigError(
        f"--db {text.split('://', 1)[0]}://... is not a kind of index retrieval knows: give a file path, "
        "sqlite:///PATH or postgresql://USER@HOST/DATABASE"
    )


def resolve_db_path(db: str | os.PathLike[str] | None = None) -> Path:
    """The index file to use (``resolve_db``), for what works on a SQLite file only: a server URL is refused
    with a ``ConfigError`` that says so."""
    where = resolve_db(db)
    if isinstance(where, DatabaseURL):
        raise ConfigError(
            f"this command works on an index file, not yet on a PostgreSQL server ({where.shown}): "
            "give a file path with --db"
        )
    return where


#: The environment variables ``retrieval fetch`` reads when no option gives the value, first set wins: the
#: sources' API keys and OpenAlex's contact address (``mailto``).
FETCH_ENV = {
    "openalex_api_key": ("OPENALEX_API_KEY",),
    "openalex_mailto": ("OPENALEX_MAILTO",),
    "s2_api_key": ("S2_API_KEY", "SEMANTIC_SCHOLAR_API_KEY"),
}


def fetch_setting(name: str, given: str | None = None) -> str | None:
    """``given`` if set, else the first of ``FETCH_ENV[name]``'s variables that is set and not empty, else None."""
    if given:
        return given
    return next((os.environ[v] for v in FETCH_ENV[name] if os.environ.get(v)), None)


#: How graph_score is computed: the expansion's evidence sum (the default) or the lesson's score by hop distance.
RANKINGS = ("auto", "expansion", "hops", "learned")
EXPAND_MODES = ("never", "always", "auto")
RELATIONS = ("references", "citing", "cocitation", "coupling")
#: Pseudo-relevance feedback of the lexical pass: none, or RM3 (``retrieval.search.prf``).
PRF_METHODS = ("none", "rm3")


#: The fields of ``RetrievalConfig`` and their defaults, in order.
_FIELDS = {
    "top_k_lexical": 20,
    "max_hops": 1,
    "w_bm25": 1.0,
    "w_graph": 0.5,
    "w_recency": 0.05,
    "w_semantic": 1.0,
    "ranking": "auto",
    "lexical_depth": 100,
    "expand": "always",
    "gate_threshold": 0.3,
    "gate_min_survivors": 3,
    "relations": ("references", "citing"),
    "max_neighbours": 30,
    "hub_weighting": True,
    "max_candidates": 100,
    "fanout": 100,
    "model": None,
    "prf": "none",
    "w_cocited": 0.3,
}


#: The fields only the policy (``ranking="expansion"``) reads; the learned model has its own candidate settings.
POLICY_FIELDS = (
    "top_k_lexical", "max_hops", "w_bm25", "w_graph", "w_recency", "w_semantic", "lexical_depth", "expand",
    "gate_threshold", "gate_min_survivors", "relations", "max_neighbours", "hub_weighting", "max_candidates", "fanout",
)  # fmt: skip


class RetrievalConfig(namedtuple("RetrievalConfig", list(_FIELDS), defaults=list(_FIELDS.values()))):
    """How a search is run and its results ranked.

    ``final_score = w_bm25 * bm25_norm + w_graph * graph_score + w_recency * recency_score``, where bm25_norm is
    the paper's BM25 score over the best seed's, recency_score ramps linearly over the corpus's years, and
    graph_score depends on ``ranking``. On an index built with ``--semantic`` the policy adds
    ``w_semantic * semantic_norm`` (``retrieval.search.semantic``; weight 1, 0 turns it off).

    ``ranking``:

    - ``"auto"`` (the default): per query, ``"learned"``, or ``"expansion"`` where the papers of the BM25 list
      are cited less than 1.5 times on average (``retrieval.search.learned.choose``): the learned model was
      fitted on citation evidence, which such a query's neighbourhood mostly lacks (docs/eval/learned.md). A
      configuration that sets any of the policy's fields (``POLICY_FIELDS``, ``sets_policy``) gets the policy.
    - ``"expansion"`` (the policy): the evidence the policy-driven expansion gathered for the paper (see
      ``retrieval.search.expansion``); candidates are the BM25 top ``lexical_depth`` plus what the expansion adds.
    - ``"hops"``: the lesson's 1.0 / 0.6 / 0.3 at 0 / 1 / 2 hops from a seed, over the seeds and a recursive-CTE
      walk of references and citing papers (``RetrievalConfig.lesson()`` gives the lesson's whole setting).
    - ``"learned"``: a linear model over the candidates' features (``retrieval.search.learned``): ``model`` (a
      ranker file's path or a loaded model), else ``<index>.ranker.json`` beside the index, else the shipped
      ``retrieval/models/ranker-v3.json``; the model's own candidate settings replace relations, hops and gate.

    ``w_cocited`` (0.3; 0 turns it off): the default ranking, ``"auto"``, then re-ranks its top 100 by how often
    they are cited beside its top 10 (``retrieval.search.cocited``); the rankings asked for by name do not.

    The policy's defaults were chosen on the development sets (docs/eval): seeds 20, one hop, references and
    citing papers, at most 30 neighbours per paper and relation, at most 100 papers added per query (the strongest by
    evidence: docs/eval/gate.md), hub down-weighting, graph weight 0.5, recency 0.05, always expanding (the gate,
    ``expand="auto"``, which expands unless 3 seeds each match 30% of the query's attainable BM25, gains on no
    development set and loses a third of nDCG@10 on titles: docs/eval/gate.md). ``max_hops`` above 2 is clamped.
    ``prf="rm3"`` expands the query by RM3 pseudo-relevance feedback before the lexical pass
    (``retrieval.search.prf``: 10 feedback papers, 10 terms, original weight 0.5); the default ``"none"``.
    """

    __slots__ = ()

    def __new__(cls, *args, **kwargs) -> RetrievalConfig:
        self = super().__new__(cls, *args, **kwargs)
        changes = self._checked()
        return super().__new__(cls, **{**self._asdict(), **changes}) if changes else self

    @classmethod
    def lesson(cls, **overrides) -> RetrievalConfig:
        """The lesson's setting: 10 seeds, two hops of the CTE walk, weights 0.5 / 0.3 / 0.2, hop-based graph
        score, always expanding, no caps."""
        settings = {
            "top_k_lexical": 10,
            "max_hops": 2,
            "w_bm25": 0.5,
            "w_graph": 0.3,
            "w_recency": 0.2,
            "ranking": "hops",
            "expand": "always",
            "max_neighbours": None,
            "hub_weighting": False,
            "max_candidates": None,
        }
        return cls(**{**settings, **overrides})

    def sets_policy(self) -> bool:
        """Whether a setting of the policy (seeds, hops, weights, depth, gate, relations, caps) differs from its
        default: ``ranking="auto"`` then means the policy so set, since the learned model brings its own."""
        return any(getattr(self, name) != _FIELDS[name] for name in POLICY_FIELDS)

    def replace(self, **changes) -> RetrievalConfig:
        """A copy with ``changes`` applied, checked like a new configuration."""
        return type(self)(**{**self._asdict(), **changes})

    # The tuple's own copy and constructor would skip the checks.
    _replace = replace

    @classmethod
    def _make(cls, iterable) -> RetrievalConfig:
        return cls(*iterable)

    @classmethod
    def of(cls, value: object, name: str = "config") -> RetrievalConfig:
        """``value`` as a configuration: a ``RetrievalConfig``, a mapping of its fields (checked as
        ``RetrievalConfig(**value)``), or None for the defaults; anything else, or an unknown field, is a
        ``ConfigError`` naming ``name``."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            unknown = [str(key) for key in value if key not in cls._fields]
            if unknown:
                raise ConfigError(f"{name}: no setting {unknown[0]!r}; the settings are {', '.join(cls._fields)}")
            return cls(**value)
        raise ConfigError(f"{name} must be a RetrievalConfig (or a dict of its settings), got {type(value).__name__}")

    def to_dict(self) -> dict:
        return dict(self._asdict())

    def _checked(self) -> dict:
        """Check every field; return the normalised values (clamped hops, de-duplicated relations) that differ."""
        changes = {}
        check_int("top_k_lexical", self.top_k_lexical, 1, LIMITS["top_k_lexical"])
        if isinstance(self.max_hops, bool) or not isinstance(self.max_hops, int):
            raise ConfigError(f"max_hops must be an integer, got {self.max_hops!r}")
        if self.max_hops < 0:
            raise ConfigError(f"max_hops must be 0, 1 or 2 (larger values are clamped to 2), got {self.max_hops}")
        if self.max_hops > MAX_HOPS:
            # Said, not silent: the CLI prints it as a warning line (``retrieval.interfaces.cli``).
            warnings.warn(f"max_hops {self.max_hops} is more than {MAX_HOPS}: clamped to {MAX_HOPS}", stacklevel=4)
            changes["max_hops"] = MAX_HOPS
        for name in ("w_bm25", "w_graph", "w_recency", "w_semantic", "w_cocited", "gate_threshold"):
            check_number(name, getattr(self, name), 0.0, MAX_WEIGHT)
        check_choice("ranking", self.ranking, RANKINGS)
        check_choice("expand", self.expand, EXPAND_MODES)
        check_choice("prf", self.prf, PRF_METHODS)
        check_int("lexical_depth", self.lexical_depth, 1, LIMITS["lexical_depth"])
        check_int("gate_min_survivors", self.gate_min_survivors, 1, LIMITS["gate_min_survivors"])
        check_int("max_neighbours", self.max_neighbours, 1, LIMITS["max_neighbours"], allow_none=True)
        check_int("max_candidates", self.max_candidates, 0, LIMITS["max_candidates"], allow_none=True)
        check_int("fanout", self.fanout, 1, LIMITS["fanout"])
        if (
            self.model is not None
            and not isinstance(self.model, (str, os.PathLike))
            and not hasattr(self.model, "contributions")
        ):
            raise ConfigError(f"model must be a path to a ranker file or a loaded model, got {self.model!r}")
        if not isinstance(self.hub_weighting, bool):  # "false" is truthy: it weighed hubs and chose the ranking
            raise ConfigError(f"hub_weighting must be True or False, got {shown_value(self.hub_weighting)}")
        if not isinstance(self.relations, (str, list, tuple)):
            raise ConfigError(
                f"relations must be some of {', '.join(RELATIONS)} (a list, or one as a string), got "
                f"{shown_value(self.relations)}"
            )
        relations = tuple(self.relations) if not isinstance(self.relations, str) else (self.relations,)
        unknown = [r for r in relations if r not in RELATIONS]
        if unknown or not relations:
            raise ConfigError(f"relations must be some of {', '.join(RELATIONS)}, got {list(relations)!r}")
        if tuple(dict.fromkeys(relations)) != self.relations:
            changes["relations"] = tuple(dict.fromkeys(relations))
        return changes
