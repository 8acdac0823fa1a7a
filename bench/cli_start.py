"""Fresh-process start of the CLI: `retrieval search` and `retrieval --help` against the interpreter's own floor.

    python bench/cli_start.py                      # 30 rounds, the previous version (49fc69e) as a peer
    python bench/cli_start.py --repeats 10 --baseline none

The goal it checks: `retrieval search` on the demo corpus, from a fresh process, within 1.5x of
`python -c "import sqlite3"` plus the search itself. The headline ratio is

    median(retrieval search) / (median(python -c "import sqlite3") + median(open + search in a warm process))

How it measures:

- It builds the built-in demo index once (`retrieval build --db DIR/demo.db`) in a temporary directory.
- Each command runs as a fresh process: wall time from just before the spawn to its exit (`time.perf_counter`
  around `subprocess.run`, output captured), every child with the temporary directory as its working directory
  (so `python -m retrieval` and `python -c` cannot pick up a package from the current directory). The commands
  are interleaved round-robin (the starting command rotates every round) so machine noise hits them alike; one
  unrecorded warm-up round first (page cache, byte-code caches). The commands:
  the floor, `python -c "import sqlite3"`; the console script `retrieval search "attention sparsity" --db demo.db`;
  `retrieval --help`; `python -m retrieval search ...`; and, unless `--baseline none`, the previous version of the
  project (`git archive REV` extracted in the temporary directory, run as `python -m retrieval` with
  `PYTHONPATH` set to it; the same demo.db) for `search` and `--help`.
- "The search itself": in this process, warm, `RetrievalClient(db=demo.db)` opened, `search(query, limit=10)`,
  closed, timed together after one warm-up; and the search alone on an open client.
- Peak RSS: `VmHWM` from `/proc/self/status` of a fresh `python -c` that runs
  `retrieval.interfaces.cli.main(["search", ...])` in-process (output discarded) and then reads it; also of the
  floor and of the previous version (`ru_maxrss` is not used: Linux keeps it across fork and exec). Linux only;
  skipped elsewhere.

Results: the table is printed and written to bench/results/cli_start.md; every raw number, the settings and the
machine go to bench/results/cli_start.json (no absolute paths). Read the ratios more than the milliseconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
QUERY = "attention sparsity"
LIMIT = 10

# Printed by the RSS children after the command: the peak resident set in kB.
RSS_CHILD = """\
import io, sys
{body}
with open("/proc/self/status") as status:
    peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
sys.__stdout__.write("VmHWM " + peak + "\\n")
"""
RSS_SEARCH_BODY = """\
import os, retrieval
if os.path.isdir(os.path.join(os.path.dirname(retrieval.__file__), "interfaces")):
    from retrieval.interfaces.cli import main
else:  # a version from before the front doors moved together
    from retrieval.cli import main
sys.stdout = io.StringIO()
code = main(["search", {query!r}, "--db", "demo.db"])
sys.stdout = sys.__stdout__
if code:
    raise SystemExit(code)"""
RSS_FLOOR_BODY = "import sqlite3"


def retrieval_command() -> tuple[list[str], str]:
    """The `retrieval` console script next to this interpreter, or `python -m retrieval`; and how it is named."""
    script = Path(sys.executable).with_name("retrieval")
    if script.exists():
        return [str(script)], "retrieval"
    return [sys.executable, "-m", "retrieval"], "python -m retrieval"


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True, text=True).stdout.strip()


def extract_baseline(rev: str, into: Path) -> str:
    """`git archive rev` extracted into ``into``; returns the short commit id."""
    short = git("rev-parse", "--short", f"{rev}^{{commit}}")
    archive = subprocess.run(["git", "-C", str(REPO), "archive", short], check=True, capture_output=True).stdout
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(into, filter="data")
        else:  # pragma: no cover - Python without extraction filters
            tar.extractall(into)  # noqa: S202 - our own repository's archive
    return short


def child_env(pythonpath: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # let every child use (and the first one write) byte-code caches
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONSTARTUP", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[1:]} exited with {done.returncode}:\n{done.stderr}")
    return seconds, done


def ranked_ids(stdout: str) -> list[str]:
    """The id column of `retrieval search`'s table."""
    ids = []
    for line in stdout.splitlines():
        words = line.split()
        if len(words) > 1 and words[0].isdigit():
            ids.append(words[1])
    return ids


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[8] if len(values) > 1 else values[0]


def ms(seconds: float) -> float:
    return seconds * 1000.0


def in_process_search(db: Path, repeats: int) -> dict[str, list[float]]:
    """Open + search + close, and search alone on an open client, in this (warm) process."""
    from retrieval import RetrievalClient

    def open_and_search() -> None:
        with RetrievalClient(db=db) as client:
            client.search(QUERY, limit=LIMIT)

    open_and_search()  # warm-up
    both = []
    for _ in range(repeats):
        start = time.perf_counter()
        open_and_search()
        both.append(time.perf_counter() - start)
    alone = []
    with RetrievalClient(db=db) as client:
        client.search(QUERY, limit=LIMIT)  # warm-up
        for _ in range(repeats):
            start = time.perf_counter()
            client.search(QUERY, limit=LIMIT)
            alone.append(time.perf_counter() - start)
    return {"open_search": both, "search_only": alone}


def peak_rss_kib(body: str, cwd: Path, env: dict[str, str], repeats: int) -> list[int]:
    code = RSS_CHILD.format(body=body)
    peaks = []
    for _ in range(repeats):
        _, done = run([sys.executable, "-c", code], cwd, env)
        line = next(line for line in done.stdout.splitlines() if line.startswith("VmHWM "))
        peaks.append(int(line.split()[1]))
    return peaks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30, help="rounds of the fresh-process commands (default 30)")
    parser.add_argument("--rss-repeats", type=int, default=5, help="fresh processes per peak-RSS figure (default 5)")
    parser.add_argument("--baseline", default="5f5085c", help="previous version to measure beside ours, or 'none'")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where cli_start.json/.md go")
    parser.add_argument("--no-save", action="store_true", help="print only")
    args = parser.parse_args(argv)
    if args.repeats < 2:
        parser.error("--repeats must be at least 2")

    cli, cli_name = retrieval_command()
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="cli_start-") as tmp:
        work = Path(tmp)
        db = work / "demo.db"
        ours = child_env(None)
        start = time.perf_counter()
        run([*cli, "build", "--db", str(db)], work, ours)
        build_seconds = time.perf_counter() - start

        # name -> (argv, env, shown as)
        commands: dict[str, tuple[list[str], dict[str, str], str]] = {
            "floor": ([python, "-c", "import sqlite3"], ours, 'python -c "import sqlite3"'),
            "search": ([*cli, "search", QUERY, "--db", "demo.db"], ours, f'{cli_name} search "{QUERY}"'),
            "help": ([*cli, "--help"], ours, f"{cli_name} --help"),
            "search_m": (
                [python, "-m", "retrieval", "search", QUERY, "--db", "demo.db"],
                ours,
                f'python -m retrieval search "{QUERY}"',
            ),
        }
        baseline = None
        if args.baseline.lower() != "none":
            base_dir = work / "baseline"
            short = extract_baseline(args.baseline, base_dir)
            base_env = child_env(base_dir)
            _, where = run([python, "-c", "import retrieval; print(retrieval.__file__)"], work, base_env)
            resolved = Path(where.stdout.strip()).resolve()
            if not resolved.is_relative_to(base_dir.resolve()):
                raise SystemExit(f"with PYTHONPATH=baseline, `import retrieval` resolves elsewhere: {resolved}")
            baseline = {"rev": short, "import_resolves_to": str(resolved.relative_to(work.resolve()))}
            commands["base_search"] = (
                [python, "-m", "retrieval", "search", QUERY, "--db", "demo.db"],
                base_env,
                f'{short}: python -m retrieval search "{QUERY}"',
            )
            commands["base_help"] = (
                [python, "-m", "retrieval", "--help"],
                base_env,
                f"{short}: python -m retrieval --help",
            )

        names = list(commands)
        outputs = {}
        for name in names:  # warm-up round, not recorded
            _, done = run(commands[name][0], work, commands[name][1])
            outputs[name] = done.stdout
        for name in ("search", "search_m", "base_search"):
            if name in outputs and not ranked_ids(outputs[name]):
                raise SystemExit(f"{name} printed no results:\n{outputs[name]}")
        same_ranking = ranked_ids(outputs["search"]) == ranked_ids(outputs["search_m"])
        if baseline is not None:
            baseline["same_ranking"] = ranked_ids(outputs["search"]) == ranked_ids(outputs["base_search"])

        times: dict[str, list[float]] = {name: [] for name in names}
        for round_ in range(args.repeats):
            offset = round_ % len(names)
            for name in names[offset:] + names[:offset]:
                seconds, _ = run(commands[name][0], work, commands[name][1])
                times[name].append(seconds)

        warm = in_process_search(db, args.repeats)

        rss: dict[str, list[int]] = {}
        if Path("/proc/self/status").exists():
            rss["floor"] = peak_rss_kib(RSS_FLOOR_BODY, work, ours, args.rss_repeats)
            rss["search"] = peak_rss_kib(RSS_SEARCH_BODY.format(query=QUERY), work, ours, args.rss_repeats)
            if baseline is not None:
                rss["base_search"] = peak_rss_kib(RSS_SEARCH_BODY.format(query=QUERY), work, base_env, args.rss_repeats)

    med = {name: statistics.median(values) for name, values in times.items()}
    warm_med = {name: statistics.median(values) for name, values in warm.items()}
    headline = med["search"] / (med["floor"] + warm_med["open_search"])
    ratios = {
        "search / (floor + open+search)": headline,
        "search_m / (floor + open+search)": med["search_m"] / (med["floor"] + warm_med["open_search"]),
        "search / floor": med["search"] / med["floor"],
        "help / floor": med["help"] / med["floor"],
    }
    if baseline is not None:
        ratios["search / baseline search"] = med["search"] / med["base_search"]
        ratios["search_m / baseline search"] = med["search_m"] / med["base_search"]
        ratios["help / baseline help"] = med["help"] / med["base_help"]

    lines = [
        f"Fresh processes, {args.repeats} interleaved rounds after one warm-up round; demo corpus, query "
        f'"{QUERY}". Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs.',
        "",
        "| command | median (ms) | p90 (ms) | / floor |",
        "|---|---:|---:|---:|",
    ]
    for name in names:
        lines.append(
            f"| `{commands[name][2]}` | {ms(med[name]):.1f} | {ms(p90(times[name])):.1f} | "
            f"{med[name] / med['floor']:.2f} |"
        )
    lines += [
        "",
        "| in this process, warm | median (ms) | p90 (ms) |",
        "|---|---:|---:|",
        f"| open + `search(limit={LIMIT})` + close | {ms(warm_med['open_search']):.2f} | "
        f"{ms(p90(warm['open_search'])):.2f} |",
        f"| `search(limit={LIMIT})` on an open client | {ms(warm_med['search_only']):.2f} | "
        f"{ms(p90(warm['search_only'])):.2f} |",
        "",
        "| ratio | value |",
        "|---|---:|",
    ]
    lines += [f"| {name} | {value:.2f} |" for name, value in ratios.items()]
    if rss:
        lines += ["", f"| peak RSS of a fresh process (VmHWM, median of {args.rss_repeats}) | MiB |", "|---|---:|"]
        shown = {
            "floor": 'python -c "import sqlite3"',
            "search": "retrieval.interfaces.cli.main(['search', ...])",
            "base_search": f"{baseline['rev'] if baseline else ''}: retrieval.interfaces.cli.main(['search', ...])",
        }
        lines += [f"| {shown[name]} | {statistics.median(values) / 1024:.1f} |" for name, values in rss.items()]
    verdict = "met" if headline <= 1.5 else "not met"
    lines += [
        "",
        f"**Headline: {headline:.2f}** = median `{commands['search'][2]}` {ms(med['search']):.1f} ms / "
        f"(floor {ms(med['floor']):.1f} ms + open+search {ms(warm_med['open_search']):.1f} ms); "
        f"target <= 1.5: {verdict}.",
    ]
    table = "\n".join(lines) + "\n"
    print(table)

    if not args.no_save:
        dirty = bool(git("status", "--porcelain", "--", "retrieval"))
        record = {
            "what": "fresh-process CLI start (bench/cli_start.py)",
            "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "settings": {
                "repeats": args.repeats,
                "rss_repeats": args.rss_repeats,
                "query": QUERY,
                "limit": LIMIT,
                "warmup_rounds": 1,
                "order": "round-robin, starting command rotated every round",
                "cwd_of_children": "a temporary directory holding demo.db",
                "baseline": args.baseline,
            },
            "code": {"head": git("rev-parse", "--short", "HEAD"), "retrieval_dirty": dirty},
            "machine": {
                "python": platform.python_version(),
                "implementation": platform.python_implementation(),
                "sqlite": sqlite3.sqlite_version,
                "cpu_count": os.cpu_count(),
                "platform": platform.platform(),
                "machine": platform.machine(),
            },
            "build_demo_seconds": build_seconds,
            "commands": {
                name: {
                    "shown": commands[name][2],
                    "argv": [Path(word).name if os.path.isabs(word) else word for word in commands[name][0]],
                    "pythonpath": "baseline" if name.startswith("base_") else None,
                    "seconds": times[name],
                    "median_ms": ms(med[name]),
                    "p90_ms": ms(p90(times[name])),
                }
                for name in names
            },
            "search_matches_search_m": same_ranking,
            "in_process": {
                name: {"seconds": values, "median_ms": ms(warm_med[name]), "p90_ms": ms(p90(values))}
                for name, values in warm.items()
            },
            "peak_rss_kib": {
                name: {"values": values, "median_mib": statistics.median(values) / 1024} for name, values in rss.items()
            },
            "baseline": baseline,
            "ratios": ratios,
            "headline": {"ratio": headline, "target": 1.5, "met": headline <= 1.5},
        }
        args.results.mkdir(parents=True, exist_ok=True)
        (args.results / "cli_start.json").write_text(json.dumps(record, indent=2) + "\n")
        (args.results / "cli_start.md").write_text("# Fresh-process CLI start (`bench/cli_start.py`)\n\n" + table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
