"""The evaluation index cache: one index file per (corpus, query file, protocol), named by a content hash.

The key is the sha256 of a small JSON document holding the sha256 of the corpus file's bytes, the sha256 of the
query file's bytes, the protocol, and everything that shapes an index file: the schema revision
(``HEAD_REVISION``), the tokeniser's name and version, BM25's k1 and b, and this module's ``EVAL_INDEX_FORMAT``.
Any change to one of them gives a new key, so a stale index is never read. Old entries are not deleted:
remove the cache directory to reclaim the space.

The default directory is ``~/.cache/retrieval/eval`` (outside any checkout, so the repository stays clean);
``--cache-dir`` chooses another.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..bm25 import K1, B
from ..corpus.paper import Paper
from ..errors import RetrievalError, StoreError
from ..store.database import HEAD_REVISION, check_index
from ..store.sqlite.build import build_index
from ..text import DEFAULT_STEM, DEFAULT_STOPWORDS, NONE, TOKENISER_NAME, TOKENISER_VERSION, chosen

#: Bump when the protocol changes what goes into an evaluation index.
EVAL_INDEX_FORMAT = "1"
DEFAULT_CACHE_DIR = Path("~/.cache/retrieval/eval")


def index_identity() -> dict:
    """What, besides the inputs, decides the content of an index file."""
    return {
        "schema_revision": HEAD_REVISION,
        "tokeniser": TOKENISER_NAME,
        "tokeniser_version": TOKENISER_VERSION,
        "bm25_k1": K1,
        "bm25_b": B,
        "eval_index_format": EVAL_INDEX_FORMAT,
    }


def analysis(stem: str | None = DEFAULT_STEM, stopwords: str | None = DEFAULT_STOPWORDS) -> dict:
    """The text analysis an evaluation index is built with, as its cache key and manifest record it."""
    return {"stemmer": chosen(stem) or NONE, "stopwords": chosen(stopwords) or NONE}


def cache_key(
    corpus_sha256: str,
    queries_sha256: str,
    protocol: str,
    semantic: str | None = None,
    format: str | None = None,
    stem: str | None = DEFAULT_STEM,
    stopwords: str | None = DEFAULT_STOPWORDS,
) -> str:
    """The hex sha256 naming the evaluation index of these inputs under this version of the package and this
    analysis (and the semantic model whose vectors it keeps, if any, and the corpus format when one was given
    rather than detected)."""
    document = {
        "corpus_sha256": corpus_sha256,
        "queries_sha256": queries_sha256,
        "protocol": protocol,
        **index_identity(),
        **analysis(stem, stopwords),
        **({"semantic": semantic} if semantic else {}),
        **({"format": format} if format else {}),
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedIndex:
    """Where the evaluation index is, and whether this run found it (``hit``) or built it."""

    path: Path
    status: str  # "hit", "built", or "rebuilt" (a cached file was unusable)
    seconds: float
    detail: str = ""


def resolve_cache_dir(cache_dir: str | os.PathLike[str] | None) -> Path:
    """``cache_dir`` if given (``~`` expanded), else ``DEFAULT_CACHE_DIR``."""
    return Path(cache_dir if cache_dir is not None else DEFAULT_CACHE_DIR).expanduser()


def ensure_index(
    cache_dir: Path,
    key: str,
    papers: Callable[[], Iterable[Paper]],
    manifest: dict,
    *,
    source: str = "",
    progress: Callable[[int], None] | None = None,
    semantic: str | None = None,
    stem: str | None = DEFAULT_STEM,
    stopwords: str | None = DEFAULT_STOPWORDS,
) -> CachedIndex:
    """The cached index for ``key``, built from ``papers()`` when absent or unusable.

    The build is atomic (``build_index`` writes a temporary file and renames it), so an interrupted run leaves
    no half-written entry. ``manifest`` is written beside the index as JSON, to say what the entry holds.
    """
    started = time.perf_counter()
    path = cache_dir / f"{key[:32]}.db"
    status, detail = "built", ""
    if path.exists():
        try:
            check_index(path)
            return CachedIndex(path, "hit", time.perf_counter() - started)
        except RetrievalError as exc:
            status, detail = "rebuilt", f"the cached file was unusable ({type(exc).__name__})"
            _discard(path)  # the cache's own entry (named by its key), which a build refuses to overwrite
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the cache directory {cache_dir} ({exc}): choose another --cache-dir") from None
    build_index(papers(), path, source=source, progress=progress, semantic=semantic, stem=stem, stopwords=stopwords)
    sidecar = path.with_suffix(".json")
    tmp = sidecar.with_name(f".{sidecar.name}.tmp")
    tmp.write_text(json.dumps({"key": key, **manifest}, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, sidecar)
    return CachedIndex(path, status, time.perf_counter() - started, detail)


def _discard(path: Path) -> None:
    """Remove an unusable cache entry and its SQLite sidecar files."""
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        try:
            name.unlink(missing_ok=True)
        except OSError as exc:
            raise StoreError(
                f"the cached evaluation index {name} is unusable and cannot be removed ({exc.strerror}): "
                "remove it, or choose another --cache-dir"
            ) from None
