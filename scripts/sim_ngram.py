"""Replay prompt lookup (n-gram) policies over the target's own greedy answers, without the model.

At temperature 0 a guess is accepted exactly as far as it matches the target's greedy text, so the
rounds of any n-gram policy follow from that text alone. Each round costs one target forward over
1 + len(guess) tokens; COST[n] is that forward's time relative to a 1-token forward (measured on
the 2-core CPU with `python scripts/sim_ngram.py --measure`, 300-token context). Used to choose the
n-gram defaults (docs/perf.md); the answers come from assets/train_data (training prompts only).

    python scripts/sim_ngram.py [--limit 400] [--tokens 100]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from specviz.methods.ngram import lookup  # noqa: E402

# forward time over n tokens / forward time over 1 token (CPU, 2 threads, SmolLM2-135M, 300 cached)
COST = {1: 1.0, 2: 1.14, 3: 1.24, 4: 1.58, 5: 1.60, 6: 1.75, 7: 1.89, 8: 2.0, 9: 2.13}


def cost(n: int) -> float:
    return COST.get(n, 2.07 + 0.02 * (n - 9))


def replay(prompt: list[int], answer: list[int], policy) -> tuple[int, float, int]:
    """(target forwards, modelled time in 1-token forwards, proposed tokens) for one answer."""
    ids, pos, forwards, time, proposed = np.asarray(prompt + answer), 0, 0, 0.0, 0
    while pos < len(answer):
        guess = policy(ids[: len(prompt) + pos])
        accepted = 0
        while accepted < len(guess) and pos + accepted < len(answer) and guess[accepted] == answer[pos + accepted]:
            accepted += 1
        forwards += 1
        time += cost(1 + len(guess))
        proposed += len(guess)
        pos += accepted + 1
    return forwards, time, proposed


def fixed(k: int, max_ngram: int = 3, min_ngram: int = 1):
    return lambda ids: lookup(ids, k, max_ngram, min_ngram)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[1] / "assets" / "train_data"
                        / "smollm2_greedy.jsonl")
    parser.add_argument("--limit", type=int, default=600)
    parser.add_argument("--tokens", type=int, default=100, help="answer tokens replayed per row")
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.data.read_text().splitlines()[: args.limit] if line.strip()]
    policies = {f"k={k} n={lo}..{hi}": fixed(k, hi, lo) for k in (1, 2, 3, 4, 6) for lo, hi in ((1, 3), (2, 3), (2, 4), (3, 4))}
    by_source: dict[str, dict[str, list[float]]] = {}
    for name, policy in policies.items():
        total_tokens = total_forwards = total_time = 0.0
        for row in rows:
            answer = row["answer_ids"][: args.tokens]
            forwards, time, _ = replay(row["prompt_ids"], answer, policy)
            total_tokens, total_forwards, total_time = total_tokens + len(answer), total_forwards + forwards, total_time + time
            source = by_source.setdefault(row["source"].split("-")[0], {})
            source.setdefault(name, [0, 0.0])
            source[name][0] += len(answer)
            source[name][1] += time
        print(f"{name:<16} tau {total_tokens / total_forwards:5.2f}  modelled speedup {total_tokens / total_time:5.2f}x")
    print()
    names = list(policies)
    print("modelled speedup by source: " + ", ".join(f"{s}" for s in by_source))
    for name in names:
        print(f"{name:<16}" + "".join(f"{v[name][0] / v[name][1]:>7.2f}" for v in by_source.values()))


if __name__ == "__main__":
    main()
