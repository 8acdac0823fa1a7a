"""A deterministic synthetic corpus with scholarly statistics, for benchmarks (never for tests of quality).

- vocabulary: Zipfian (exponent ~1.07) over a vocabulary that grows with the corpus (about 200K distinct terms
  at 500K papers), plus per-topic words so that topics share vocabulary;
- a title of about 10 tokens and an abstract of 150-200;
- years 1990-2024, skewed recent (more papers each year);
- citations by preferential attachment with topical locality: each paper cites 15-25 earlier papers, mostly of
  its own topic, chosen in proportion to (citations so far + 1), so in-degree is heavy-tailed with hubs.

    python bench/synthetic.py --papers 100000 --out corpus.jsonl
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import random
from collections.abc import Iterator
from pathlib import Path

N_TOPICS = 200


def _word(i: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = []
    i += 1
    while i:
        i, r = divmod(i - 1, 26)
        out.append(letters[r])
    return "".join(reversed(out))


def generate(n_papers: int, seed: int = 42) -> Iterator[dict]:
    """Yield ``n_papers`` records of the project's JSONL format, ids ``s0000001``..., oldest first."""
    rng = random.Random(seed)
    vocab_size = max(5_000, int(200_000 * (n_papers / 500_000) ** 0.6))
    weights = [1.0 / (rank + 1) ** 1.07 for rank in range(vocab_size)]
    cumulative = list(itertools.accumulate(weights))
    topic_words = [[_word(vocab_size + t * 20 + j) for j in range(20)] for t in range(N_TOPICS)]
    years = list(range(1990, 2025))
    year_weights = list(itertools.accumulate(1.08**k for k in range(len(years))))
    by_topic: list[list[int]] = [[] for _ in range(N_TOPICS)]
    # Preferential attachment: a paper appears once in its topic's urn per citation it has, plus once.
    urns: list[list[int]] = [[] for _ in range(N_TOPICS)]
    all_urn: list[int] = []
    drawn_years = sorted(rng.choices(years, cum_weights=year_weights, k=n_papers))
    for i in range(n_papers):
        topic = min(int(rng.paretovariate(1.2)) - 1, N_TOPICS - 1) if rng.random() < 0.5 else rng.randrange(N_TOPICS)

        def words(k: int, topic: int = topic) -> list[str]:
            picks = [_word(bisect.bisect_left(cumulative, rng.random() * cumulative[-1])) for _ in range(k)]
            for _ in range(k // 8):  # one word in eight comes from the topic's own vocabulary
                picks[rng.randrange(k)] = rng.choice(topic_words[topic])
            return picks

        refs: set[int] = set()
        if i:
            wanted = min(i, rng.randint(15, 25))
            while len(refs) < wanted:
                urn = urns[topic] if urns[topic] and rng.random() < 0.8 else all_urn
                refs.add(rng.choice(urn) if urn else rng.randrange(i))
        for r in refs:
            urns[topic].append(r)
            all_urn.append(r)
        by_topic[topic].append(i)
        urns[topic].append(i)
        all_urn.append(i)
        yield {
            "id": f"s{i + 1:07d}",
            "title": " ".join(words(rng.randint(8, 12))),
            "abstract": " ".join(words(rng.randint(150, 200))),
            "year": drawn_years[i],
            "authors": [f"Author {rng.randrange(n_papers // 3 + 1)}" for _ in range(rng.randint(1, 5))],
            "references": [f"s{r + 1:07d}" for r in sorted(refs)],
        }


def write(path: Path, n_papers: int, seed: int = 42) -> Path:
    with open(path, "w", encoding="utf-8") as handle:
        for record in generate(n_papers, seed):
            handle.write(json.dumps(record) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--papers", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    write(args.out, args.papers, args.seed)


if __name__ == "__main__":
    main()
