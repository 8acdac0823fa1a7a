"""Fetch a corpus from a bibliographic API into a JSONL file that ``build`` and ``add`` read (``retrieval fetch``).

One module per source (``openalex``, ``s2``, ``arxiv``: what each asks for and how it pages), the HTTP session
that makes every request polite and robust (``session``: intervals, ``Retry-After``, backoff with jitter, bounded
tries), the journal and state that let a killed fetch continue where it stopped and write the output whole at the
end (``state``), the records in the project's own format with duplicates merged by id and DOI (``records``), and
the phases a fetch runs, the search then a hop of references or citing papers (``run``).

Names are imported on first use (``retrieval._lazy``): importing the package does not import httpx.
"""

from __future__ import annotations

from ..._lazy import lazy_exports

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .arxiv import Arxiv, fetch_arxiv
    from .openalex import OpenAlex, fetch_openalex
    from .run import DEFAULT_MAX, FetchInterrupted, FetchSummary
    from .s2 import SemanticScholar, fetch_s2
    from .session import Policy
    from .state import side_files

_EXPORTS = {
    "Arxiv": ".arxiv",
    "DEFAULT_MAX": ".run",
    "FetchInterrupted": ".run",
    "FetchSummary": ".run",
    "OpenAlex": ".openalex",
    "Policy": ".session",
    "SemanticScholar": ".s2",
    "fetch_arxiv": ".arxiv",
    "fetch_openalex": ".openalex",
    "fetch_s2": ".s2",
    "side_files": ".state",
}

__getattr__ = lazy_exports(__name__, _EXPORTS, globals())

__all__ = [
    "Arxiv",
    "DEFAULT_MAX",
    "FetchInterrupted",
    "FetchSummary",
    "OpenAlex",
    "Policy",
    "SemanticScholar",
    "fetch_arxiv",
    "fetch_openalex",
    "fetch_s2",
    "side_files",
]
