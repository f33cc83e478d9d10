"""Measure the example prompts: tau (new tokens per target forward) of every method on the embedded model.

    python scripts/measure_examples.py                          # demos/prompts.jsonl, as a markdown table
    python scripts/measure_examples.py --prompts candidates.jsonl --texts   # and each prompt's full greedy answer
    python scripts/measure_examples.py --methods baseline --texts           # only the answers, to judge them

The page's defaults: k=4, temperature 0, 96 new tokens, each method at its CPU default (tree methods: 2 / 2 / 1
nodes). At temperature 0 tau is deterministic, so a busy machine changes the timings but not this table.
Every method's text is compared with the baseline's (it must be equal: the column says so).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz.config import RunConfig, SamplingConfig  # noqa: E402
from specviz.engine import generate  # noqa: E402
from specviz.events import summarize  # noqa: E402
from specviz.models import load_target  # noqa: E402

METHODS = ("baseline", "ngram", "draft", "medusa", "eagle")


def read_prompts(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def measure(target, prompt: str, methods: list[str], run: RunConfig) -> tuple[dict[str, float], dict[str, str]]:
    """Each method's tau and full text on one prompt, greedy."""
    taus, texts = {}, {}
    for method in methods:
        rounds = list(generate(target, method, prompt, run, SamplingConfig()))
        taus[method] = summarize(rounds)["mean_accepted_tokens"]
        texts[method] = "".join(r.text for r in rounds)
    return taus, texts


def excerpt(text: str, width: int = 60) -> str:
    """One table-safe line: code fences dropped, whitespace folded, pipes escaped, cut to width."""
    flat = " ".join(re.sub(r"```\w*", " ", text).split()).replace("|", "\\|")
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=Path, default=ROOT / "demos" / "prompts.jsonl")
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated; the first is the reference")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (tau does not depend on it)")
    parser.add_argument("--texts", action="store_true", help="also print each prompt's full answer")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    target = load_target()
    run = RunConfig(max_new_tokens=args.max_new_tokens, k=args.k)
    rows, answers = [], []
    for item in read_prompts(args.prompts):
        taus, texts = measure(target, item["prompt"], methods, run)
        reference = texts[methods[0]]
        differ = [m for m in methods if texts[m] != reference]
        rows.append(f"| {item['category']} | {excerpt(item['prompt'], 48)} | "
                    + " | ".join(f"{taus[m]:.2f}" for m in methods)
                    + f" | {'yes' if not differ else 'NO: ' + ', '.join(differ)} | {excerpt(reference)} |")
        answers.append(f"### {item['category']}\n\n{item['prompt']}\n\n```\n{reference}\n```\n")
        print(rows[-1], file=sys.stderr, flush=True)  # progress
    print("| example | prompt | " + " | ".join(methods) + " | same text | answer |")
    print("| --- | --- | " + " | ".join("---:" for _ in methods) + " | --- | --- |")
    print("\n".join(rows))
    if args.texts:
        print("\n" + "\n".join(answers))


if __name__ == "__main__":
    main()
