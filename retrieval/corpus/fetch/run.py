"""A fetch's phases, in order, over a ``FetchRun``: the search (or the ids given), then, when asked for, the
papers the fetched ones cite and the papers that cite them, each a hop from the search's papers and each bounded;
then the output. Each source (``openalex``, ``s2``, ``arxiv``) says how to ask for a phase's pages; this module
runs them, resumes them, and sums up what the set holds.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable

from ...errors import FetchError
from .session import Policy, Session
from .state import FetchRun

#: Papers a search fetches unless told (``--max``): a bound a typo cannot turn into a download of millions.
DEFAULT_MAX = 10_000
#: ``progress(phase, done, total)``: papers done in a phase, of about ``total`` (None: not known).
Progress = Callable[[str, int, "int | None"], None]


class FetchInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a fetch: ``message`` says what was kept and how to continue."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class FetchSummary:
    """What a fetch did and what its output holds (``to_dict()`` for ``--json``)."""

    FIELDS = (
        "source",
        "path",
        "papers",
        "given",
        "searched",
        "references_added",
        "citing_added",
        "matched",
        "max",
        "reached_max",
        "merged",
        "duplicates",
        "skipped",
        "skip_reasons",
        "years_dropped",
        "not_found",
        "with_abstract",
        "with_references",
        "references",
        "in_corpus_references",
        "requests",
        "retries",
        "waited_seconds",
        "seconds",
        "resumed",
        "notes",
    )
    __slots__ = FIELDS

    def __init__(self, **values: object) -> None:
        for name in self.FIELDS:
            setattr(self, name, values.get(name))

    def to_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.FIELDS}


class Source:
    """What a source tells the fetch: its ``name``, the ``request`` that identifies a fetch (for resuming), a
    ``session()``, and a method per phase (``search``, ``references``, ``citing``), each committing its pages to
    the run and finishing the phase with ``run.commit(..., finished=True)``."""

    name = ""
    label = ""
    #: Ids given to look up instead of a search (None: a search).
    given: int | None = None

    def __init__(self, max: int | None, max_hop: int | None, with_references: bool, with_citing: bool) -> None:
        self.max = max
        self.max_hop = max_hop if max_hop is not None else (max if max is not None else DEFAULT_MAX)
        self.with_references = with_references
        self.with_citing = with_citing
        self.notes: list[str] = []

    def phases(self) -> list[str]:
        return ["search"] + ["references"] * self.with_references + ["citing"] * self.with_citing

    def request(self) -> dict:
        raise NotImplementedError

    def session(self, policy: Policy, notice: Callable[[str], None] | None) -> Session:
        raise NotImplementedError

    @property
    def limit(self) -> int:
        """The search's bound on papers."""
        return self.max if self.max is not None else DEFAULT_MAX


def most_cited(records: Iterable[dict], exclude: set[str], n: int) -> list[str]:
    """The ``n`` ids the ``records`` cite most often, ``exclude`` left out; ties in the order first cited. The
    references a hop fetches when it cannot fetch them all: those that make the most edges in the set."""
    counts: Counter[str] = Counter()
    for record in records:
        counts.update(r for r in dict.fromkeys(record.get("references", [])) if r not in exclude)
    return [pid for pid, _ in counts.most_common(n)]  # most_common keeps first-seen order among equal counts


def chunks(items: list, size: int) -> Iterable[tuple[int, list]]:
    """``(index, items[index:index + size])`` for each chunk."""
    for start in range(0, len(items), size):
        yield start, items[start : start + size]


def run_fetch(
    source: Source,
    out,
    *,
    restart: bool = False,
    policy: Policy | None = None,
    progress: Progress | None = None,
    notice: Callable[[str], None] | None = None,
) -> FetchSummary:
    """Fetch ``source``'s papers into ``out`` (resuming a fetch of the same request that stopped) and sum up."""
    policy = policy or Policy()
    started = time.monotonic()
    with FetchRun(out, source.name, source.request(), source.phases(), restart=restart) as run:
        resumed = run.resumed
        if resumed and notice is not None:
            notice(f"continuing the unfinished fetch into {run.out.name} ({run.papers:,} papers fetched before)")
        with source.session(policy, notice) as session:
            finished = False
            try:
                while run.phase != "finalize":
                    phase = run.phase
                    report = (lambda done, total, phase=phase: progress(phase, done, total)) if progress else None
                    getattr(source, phase)(run, session, report)
                run.add_seconds(time.monotonic() - started)
                seconds = float(run.state.get("seconds", 0.0))
                stats = run.finalize()
                finished = True
            except FetchError as exc:
                raise FetchError(_kept(exc, run)) from None
            except KeyboardInterrupt:
                raise FetchInterrupted(_interrupted(run)) from None
            finally:
                if not finished and run.state_path.exists():  # keep the time spent; no state: leave no file
                    run.add_seconds(time.monotonic() - started)
                    run.save()
            tallies = run.state["tallies"]
            return FetchSummary(
                source=source.name,
                path=str(run.out),
                papers=stats["papers"],
                searched=run.count("search"),
                references_added=run.count("references"),
                citing_added=run.count("citing"),
                matched=run.state.get("matched"),
                max=source.limit,
                given=source.given,
                reached_max=run.count("search") >= source.limit,
                merged=stats["merged"],
                duplicates=int(tallies.get("duplicates", 0)),
                skipped=int(tallies.get("skipped", 0)),
                skip_reasons=list(run.state["reasons"]),
                years_dropped=int(tallies.get("years_dropped", 0)),
                not_found=int(tallies.get("not_found", 0)),
                with_abstract=stats["with_abstract"],
                with_references=stats["with_references"],
                references=stats["references"],
                in_corpus_references=stats["in_corpus"],
                requests=session.stats.requests,
                retries=session.stats.retries,
                waited_seconds=round(session.stats.waited, 2),
                seconds=round(seconds, 2),
                resumed=resumed,
                notes=list(source.notes),
            )


def _kept(exc: FetchError, run: FetchRun) -> str:
    if not run.papers:
        return str(exc)
    return (
        f"{exc}; the {run.papers:,} papers fetched so far are kept in {run.journal_path.name}: run the same command "
        "again to continue where it stopped"
    )


def _interrupted(run: FetchRun) -> str:
    if not run.papers:
        return "interrupted; nothing was written"
    return (
        f"interrupted; the {run.papers:,} papers fetched so far are kept in {run.journal_path.name}: run the same "
        "command again to continue where it stopped"
    )
