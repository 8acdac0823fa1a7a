"""Text vectors for the semantic signal: a paper's title and abstract, and a query, as a unit vector whose dot
product with another is their cosine similarity.

Two kinds of model:

- ``wordllama``: WordLlama's ``l2_supercat`` token embeddings (256 dimensions; the package ``wordllama``, MIT),
  averaged over a text's tokens and scaled to unit length. It runs offline from the weights its wheel ships (no
  download, no GPU, about a millisecond a query), which are checked against the sha256 the published wheel
  records before the first use. Install it with ``pip install 'retrieval[semantic]'``.
- a sentence-transformers model in a local folder (``--semantic /path/to/model``: a folder with the library's
  ``modules.json``, such as a saved all-MiniLM-L6-v2 or SPECTER2), run by sentence-transformers on PyTorch on the
  CPU, read offline (never from a model hub), each text's embedding scaled to unit length. Its name is the folder's
  absolute path and its sha256 that of its weight files, so a later add or query loads the same folder and
  refuses it once its weights changed. Install the runtime with ``pip install 'retrieval[transformer]'``. A
  transformer costs far more than WordLlama (all-MiniLM-L6-v2 on two cores: CACM's 3,204 papers in about 45 s
  against 2.5 s; a query from 15 ms (a title) to 80 ms (an abstract)).

An index built with ``retrieval build --semantic wordllama`` records the model's name, dimensions and the
weights' sha256 (``index_info``) and keeps a vector per paper (``paper_vectors``, float16); every later add
encodes its papers with the same model and refuses another. Vectors are a fact of the text alone: a paper's
vector does not change when other papers come and go.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from .digest import file_sha256
from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import numpy as np

#: The models ``--semantic`` takes: name -> (dimensions, weights file inside the package, its sha256). The
#: checksum is the one the published wheel ``wordllama-0.4.0.post1`` lists for the file in its RECORD.
MODELS = {
    "wordllama": (
        256,
        "weights/l2_supercat_256.safetensors",
        "64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5",
    ),
}
#: ``--semantic auto``, the default of ``retrieval build`` and ``retrieval eval``: ``AUTO_MODEL``'s vectors when
#: the corpus has fewer than ``AUTO_MAX_EDGES`` citation edges a paper and the model's package is installed, else
#: none. Below it the default ranking ranks most queries by the policy, whose blend uses the vectors (CACM, 0.86
#: edges a paper: nDCG@10 0.373 to 0.429); above it the learned model ranks them, which the vectors do not change
#: (hep-th 11.9, ml-arxiv 3.0), so a build there is not made slower for nothing (docs/eval/semantic.md).
AUTO = "auto"
AUTO_MODEL = "wordllama"
AUTO_MAX_EDGES = 1.5
#: Texts encoded per call when a build or an add encodes papers.
BATCH = 256
#: Texts a transformer runs through at once (its memory grows with the batch times the texts' length).
TRANSFORMER_BATCH = 32
#: What marks a folder as a sentence-transformers model, and its weight files (hashed into its sha256).
MODEL_FOLDER_MARK = "modules.json"
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".onnx")
#: How a vector is stored: little-endian float16 (half the bytes of float32; cosines agree to about 1e-3).
STORED_DTYPE = "<f2"

#: Each model asked for by this process: loaded, or the message of why it could not be (asked again per query
#: by a search, a failure is not retried: no import or checksum of 16 MB on every query).
_LOADED: dict[str, Encoder | str] = {}


class Encoder:
    """A loaded model: ``name``, ``dims``, ``sha256`` (of its weights) and ``encode``."""

    __slots__ = ("name", "dims", "sha256", "_embed")

    def __init__(self, name: str, dims: int, sha256: str, embed: Callable[[list[str]], object]) -> None:
        self.name = name
        self.dims = dims
        self.sha256 = sha256
        self._embed = embed  # texts -> one row per text, any length

    def encode(self, texts: list[str]) -> np.ndarray:
        """One float32 row per text, of unit length (a text with no known token: all zeros)."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        rows = np.asarray(self._embed(list(texts)), dtype=np.float32).reshape(len(texts), self.dims)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms > 0, norms, 1.0)

    def info(self) -> dict[str, str]:
        """What ``index_info`` records of the model (``of_index`` compares an index's against it)."""
        return {"semantic_model": self.name, "semantic_dims": str(self.dims), "semantic_sha256": self.sha256}


def encoder(name: str) -> Encoder:
    """The model ``name`` (one of ``MODELS``, or a model folder's absolute path), loaded once per process;
    ``ConfigError`` when the name is unknown, its package is not installed, or its weights are not the published
    ones."""
    found = _LOADED.get(name)
    if found is None:
        try:
            found = _load(name)
        except ConfigError as exc:
            found = str(exc)
        _LOADED[name] = found
    if isinstance(found, str):
        raise ConfigError(found)
    return found


def requested(semantic: str | os.PathLike[str] | None) -> str | None:
    """``semantic`` as a build takes it: a model of ``MODELS``, ``AUTO``, a sentence-transformers model folder
    (returned as its absolute path), or None (None or ``"none"``); ``ConfigError`` for anything else."""
    if semantic is None or semantic == "none":
        return None
    if semantic == AUTO or semantic in MODELS:
        return str(semantic)
    folder = Path(semantic).expanduser()
    if (folder / MODEL_FOLDER_MARK).is_file():
        return str(folder.resolve())
    why = "it is a folder without" if folder.is_dir() else "there is no such folder, nor one with"
    raise ConfigError(
        f"--semantic {str(semantic)!r} is neither a model retrieval knows nor a sentence-transformers model folder "
        f"({why} {MODEL_FOLDER_MARK}): use one of {', '.join(MODELS)}, {AUTO}, none, or the folder a model was "
        "saved to (SentenceTransformer.save)"
    )


def auto_encoder(papers: int, edges: int) -> tuple[Encoder | None, str | None]:
    """What ``AUTO`` encodes a corpus of ``papers`` papers and ``edges`` citation edges with: ``AUTO_MODEL`` where
    its citations are sparse and the model loads, else None; and, where the corpus would gain from vectors that
    could not be made, a note saying how to add them."""
    if not papers or edges / papers >= AUTO_MAX_EDGES:
        return None, None
    try:
        return encoder(AUTO_MODEL), None
    except ConfigError as exc:
        return None, (
            f"no text vectors: the corpus has {edges / papers:.2f} citation edges a paper, too few for the graph "
            f"to rank by, and {exc}, then build again to add the semantic signal"
        )


def _load(name: str) -> Encoder:
    if name not in MODELS:
        if Path(name).is_absolute():
            return _load_folder(Path(name))
        raise ConfigError(f"--semantic {name!r} is not a model retrieval knows: use one of {', '.join(MODELS)}")
    dims, weights, sha256 = MODELS[name]
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import wordllama
        from wordllama import WordLlama
    except ImportError:
        raise ConfigError(
            f"the semantic model {name!r} needs the package wordllama: pip install 'retrieval[semantic]'"
        ) from None
    finally:  # its import calls logging.basicConfig(level=INFO): the application's logging is left as it was
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    folder = Path(wordllama.__file__).parent
    path = folder / weights
    try:
        digest = file_sha256(path)
    except OSError as exc:
        raise ConfigError(f"cannot read the weights of {name!r} ({path}): {exc.strerror or exc}") from None
    if digest != sha256:
        raise ConfigError(
            f"the weights of {name!r} ({path}) are not the published ones (sha256 {digest[:12]}..., expected "
            f"{sha256[:12]}...): reinstall with pip install --force-reinstall 'retrieval[semantic]'"
        )
    # The wheel's own files, never a download: the package folder serves as the loader's cache.
    model = WordLlama.load(config="l2_supercat", cache_dir=folder, dim=dims, disable_download=True)
    return Encoder(name, dims, sha256, functools.partial(model.embed, norm=False, batch_size=BATCH))


def _load_folder(folder: Path) -> Encoder:
    """A sentence-transformers model saved in ``folder``, read offline, on the CPU."""
    name = str(folder)
    if not (folder / MODEL_FOLDER_MARK).is_file():
        raise ConfigError(
            f"the semantic model folder {name} is not there (or holds no {MODEL_FOLDER_MARK}): the index's vectors "
            "were made with it, so put it back there, or rebuild the index with another --semantic"
        )
    sha256 = folder_sha256(folder)
    # Never a model hub: a folder is all there is to read, and a test or an offline machine must not reach out.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        raise ConfigError(
            f"the semantic model folder {name} needs sentence-transformers (with PyTorch): "
            "pip install 'retrieval[transformer]'"
        ) from None
    _one_thread_in_forked_children()
    try:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()  # the loader's bar would land on the command's screen
    except ImportError:
        pass
    try:
        model = SentenceTransformer(name, device="cpu", local_files_only=True)
    except Exception as exc:  # the library's many ways of saying a folder is not a model it can read
        raise ConfigError(f"cannot load the sentence-transformers model in {name}: {exc}") from None
    # (renamed in sentence-transformers 5; the old name warns there)
    dims = getattr(model, "get_embedding_dimension", model.get_sentence_embedding_dimension)()
    if not dims:
        raise ConfigError(f"the sentence-transformers model in {name} does not say its embedding's dimensions")
    encode = functools.partial(
        model.encode, batch_size=TRANSFORMER_BATCH, convert_to_numpy=True, show_progress_bar=False
    )
    return Encoder(name, int(dims), sha256, encode)


@functools.cache  # once per process
def _one_thread_in_forked_children() -> None:
    """A child forked after PyTorch ran (the evaluation's and the own fit's worker processes) inherits its thread
    pool without the pool's threads, and its first parallel step waits on them forever; with one thread it runs
    without the pool (as PyTorch's own data-loader workers do)."""
    if not hasattr(os, "register_at_fork"):
        return
    import torch

    os.register_at_fork(after_in_child=lambda: torch.set_num_threads(1))


def folder_sha256(folder: Path) -> str:
    """The sha256 of a model folder's weights: over each weight file (``WEIGHT_SUFFIXES``), in the order of their
    paths, its path in the folder and its bytes' sha256 (a single file's own sha256 where the folder holds one)."""
    try:
        files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
        digests = [(p.relative_to(folder).as_posix(), file_sha256(p)) for p in files]
    except OSError as exc:
        raise ConfigError(f"cannot read the model folder {folder}: {exc.strerror or exc}") from None
    if not digests:
        raise ConfigError(f"the model folder {folder} holds no weights (no {', '.join(WEIGHT_SUFFIXES)} file)")
    if len(digests) == 1:
        return digests[0][1]
    return hashlib.sha256("".join(f"{path}\t{digest}\n" for path, digest in digests).encode()).hexdigest()


def of_index(info: dict[str, str]) -> Encoder | None:
    """The model an index's ``index_info`` names (None: the index keeps no vectors), checked to be the one
    that made its vectors: ``ConfigError`` when the installed model is another."""
    name = info.get("semantic_model") or None
    if name is None:
        return None
    found = encoder(name)
    if info.get("semantic_sha256") != found.sha256 or info.get("semantic_dims") != str(found.dims):
        raise ConfigError(
            f"the index's vectors were made by {name} with weights {str(info.get('semantic_sha256'))[:12]}..., "
            f"the installed model's are {found.sha256[:12]}...: rebuild the index with --semantic {name}"
        )
    return found


def paper_text(title: str, abstract: str) -> str:
    """The text a paper's vector is made from: its title and abstract, as the lexical index reads them."""
    return f"{title} {abstract}"


def pack(rows: np.ndarray) -> list[bytes]:
    """Each row as the bytes ``paper_vectors.vector`` stores (``STORED_DTYPE``)."""
    import numpy as np

    stored = np.ascontiguousarray(rows, dtype=STORED_DTYPE)
    return [row.tobytes() for row in stored]


def unpack(blobs: list[bytes], dims: int) -> np.ndarray:
    """Stored vectors back as float32 rows; ``ValueError`` when a BLOB is not ``dims`` values."""
    import numpy as np

    if not blobs:
        return np.zeros((0, dims), dtype=np.float32)
    size = dims * np.dtype(STORED_DTYPE).itemsize
    if any(not isinstance(b, (bytes, bytearray, memoryview)) or len(b) != size for b in blobs):
        raise ValueError(f"a stored vector is not {dims} float16 values")
    return np.frombuffer(b"".join(bytes(b) for b in blobs), dtype=STORED_DTYPE).reshape(-1, dims).astype(np.float32)
