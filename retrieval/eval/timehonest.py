"""The time-honest protocol's clock: which papers are newer than a query paper, by day where a dates file gives
days and by year otherwise.

``--protocol time-honest`` is the citation protocol (every query paper removed from the index) plus, per query,
every paper newer than the query paper: gone from its BM25 list, from the citation walk (no neighbour, no
co-citation or coupling intermediate, no degree: ``retrieval.search.cutoff``) and from its relevant list. One
cached index serves every query (the citation protocol's); the newer papers are a per-query exclusion.

Newer, for a paper ``p`` and the query paper ``q``:

- when both have a date (``--dates FILE``, ``id<TAB>YYYY-MM-DD`` a line; ``dates.tsv`` beside the corpus is found
  without the option): ``date(p) > date(q)``, so a paper of the same day is not newer;
- otherwise: ``year(p) > year(q)`` (strictly newer year; a date stands in for a missing year);
- a paper (or a query) with neither is never newer: nothing says it is.

The BM25 statistics (N, avgdl, df) stay the index's, newer papers included: they are corpus statistics, not
papers a query could be shown, and recomputing them per query would take one index per query. The same holds for
the citation counts the expansion breaks neighbour ties with.
"""

from __future__ import annotations

import datetime
import re
from bisect import bisect_right
from pathlib import Path

from ..errors import InputError

#: The dates file's name the runner looks for beside the corpus.
DATES_FILE = "dates.tsv"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def read_dates(path: Path) -> dict[str, str]:
    """``{id: "YYYY-MM-DD"}`` from a file of ``id<TAB>YYYY-MM-DD`` lines (blank lines skipped, a UTF-8 byte order
    mark allowed); a malformed line, a date no calendar has, or an id dated twice is an ``InputError`` naming
    ``file:line``."""
    out: dict[str, str] = {}
    first: dict[str, int] = {}
    try:
        with open(path, encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, start=1):
                line = line.rstrip("\n").rstrip("\r")
                if not line.strip():
                    continue
                parts = line.split("\t")
                if len(parts) != 2 or not parts[0] or not _DATE.match(parts[1]):
                    raise InputError(
                        f"{path}:{number}: expected `id<TAB>YYYY-MM-DD`, got {line[:80]!r}: fix the dates file"
                    )
                try:
                    datetime.date.fromisoformat(parts[1])
                except ValueError:
                    raise InputError(
                        f"{path}:{number}: {parts[1]!r} is no date (month 01-12, a day the month has): fix the "
                        "dates file"
                    ) from None
                if parts[0] in first:
                    raise InputError(
                        f"{path}:{number}: {parts[0][:80]!r} is dated again (first on line {first[parts[0]]}): "
                        "keep one date per paper"
                    )
                first[parts[0]] = number
                out[parts[0]] = parts[1]
    except OSError as exc:
        raise InputError(f"cannot read the dates file {path} ({exc}): give a readable file with --dates") from None
    except UnicodeDecodeError:
        raise InputError(f"the dates file {path} is not UTF-8 text: give an `id<TAB>YYYY-MM-DD` file") from None
    if not out:
        raise InputError(f"the dates file {path} holds no dates: give `id<TAB>YYYY-MM-DD` lines, or leave it out")
    return out


def find_dates(corpus: Path, dates: Path | None) -> Path | None:
    """``dates`` when given (it must exist), else ``dates.tsv`` beside the corpus when there is one, else None."""
    if dates is not None:
        if not dates.is_file():
            raise InputError(f"no dates file at {dates}: give an `id<TAB>YYYY-MM-DD` file with --dates")
        return dates
    beside = corpus.parent / DATES_FILE
    return beside if beside.is_file() else None


class Chronology:
    """When each paper appeared (``years``: the corpus's years; ``dates``: days where known), and which papers
    are newer than a given one (see the module docstring)."""

    def __init__(self, years: dict[str, int | None], dates: dict[str, str] | None = None) -> None:
        dates = {pid: d for pid, d in (dates or {}).items() if pid in years}
        self.dates = dates
        self.years = {
            pid: (y if y is not None else (int(dates[pid][:4]) if pid in dates else None)) for pid, y in years.items()
        }
        self._dated = sorted((d, pid) for pid, d in dates.items())
        self._dated_keys = [d for d, _ in self._dated]
        undated = [(y, pid) for pid, y in self.years.items() if y is not None and pid not in dates]
        self._undated = sorted(undated)
        self._undated_keys = [y for y, _ in self._undated]
        self._by_year = sorted((y, pid) for pid, y in self.years.items() if y is not None)
        self._by_year_keys = [y for y, _ in self._by_year]

    @property
    def by_day(self) -> int:
        """How many papers have a date."""
        return len(self.dates)

    def newer(self, qid: str) -> frozenset[str]:
        """The papers newer than the paper ``qid`` (empty when it has neither a date nor a year)."""
        date, year = self.dates.get(qid), self.years.get(qid)
        if date is not None:
            out = {pid for _, pid in self._dated[bisect_right(self._dated_keys, date) :]}
            if year is not None:
                out.update(pid for _, pid in self._undated[bisect_right(self._undated_keys, year) :])
            return frozenset(out)
        if year is None:
            return frozenset()
        return frozenset(pid for _, pid in self._by_year[bisect_right(self._by_year_keys, year) :])

    def is_newer(self, pid: str, qid: str) -> bool:
        """Whether paper ``pid`` is newer than paper ``qid`` (the same rule as ``newer``, for one pair)."""
        if pid in self.dates and qid in self.dates:
            return self.dates[pid] > self.dates[qid]
        year, qyear = self.years.get(pid), self.years.get(qid)
        return year is not None and qyear is not None and year > qyear
