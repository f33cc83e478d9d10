"""python -m specviz.bench: every method on every prompt, in one process, as one table and one JSON.

Methods are interleaved prompt by prompt after a warm-up, so machine drift hits all alike; speedup
is each method's tokens/s over the baseline's in the same run (total tokens / total wall time).
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path
from typing import Any, Optional

import torch

from .config import RunConfig, SamplingConfig
from .engine import generate
from .events import summarize


def read_prompts(path: Path, limit: Optional[int] = None) -> list[dict[str, str]]:
    """`{"prompt", "category"}` lines, or the MT-bench / Spec-Bench layout (first turn of `turns`)."""
    prompts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        text = row.get("prompt") or (row.get("turns") or [None])[0]
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{path}:{number}: no 'prompt' and no 'turns'")
        prompts.append({"prompt": text, "category": str(row.get("category") or "uncategorized")})
    return prompts[:limit] if limit else prompts


def run_bench(target, prompts: list[dict[str, str]], methods: list[str], run: RunConfig,
              sampling: SamplingConfig, options: dict[str, dict[str, Any]], progress=None) -> dict[str, Any]:
    """Run every method on every prompt; returns per-method totals and per-prompt results."""
    methods = ["baseline"] + [m for m in methods if m != "baseline"]
    warm = RunConfig(max_new_tokens=min(8, run.max_new_tokens), k=run.k)
    for method in methods:  # warm-up: first-call costs (allocations, kernels) hit nobody's numbers
        list(generate(target, method, prompts[0]["prompt"], warm, sampling, **options.get(method, {})))
    per_prompt: dict[str, list[dict[str, Any]]] = {m: [] for m in methods}
    for row in prompts:
        for method in methods:
            rounds = list(generate(target, method, row["prompt"], run, sampling, **options.get(method, {})))
            stats = summarize(rounds)
            per_prompt[method].append({"category": row["category"], "text": "".join(r.text for r in rounds),
                                       **{key: stats[key] for key in ("new_tokens", "rounds", "elapsed_s",
                                                                      "proposed_tokens", "accepted_tokens")}})
            if progress:
                progress.update(1)
    return aggregate(per_prompt, sampling.greedy)


def _totals(results: list[dict[str, Any]]) -> dict[str, float]:
    tokens = sum(r["new_tokens"] for r in results)
    seconds = sum(r["elapsed_s"] for r in results)
    return {"tokens_per_s": tokens / seconds if seconds else 0.0,
            "mean_accepted_tokens": tokens / max(sum(r["rounds"] for r in results), 1)}


def aggregate(per_prompt: dict[str, list[dict[str, Any]]], greedy: bool) -> dict[str, Any]:
    base = per_prompt["baseline"]
    out: dict[str, Any] = {}
    for method, results in per_prompt.items():
        totals = _totals(results)
        proposed = sum(r["proposed_tokens"] for r in results)
        by_category = {}
        for category in sorted({r["category"] for r in results}):
            mine = _totals([r for r in results if r["category"] == category])
            theirs = _totals([r for r in base if r["category"] == category])
            by_category[category] = {"speedup": mine["tokens_per_s"] / theirs["tokens_per_s"],
                                     "mean_accepted_tokens": mine["mean_accepted_tokens"]}
        out[method] = {
            **totals,
            "speedup": totals["tokens_per_s"] / _totals(base)["tokens_per_s"],
            "acceptance_rate": sum(r["accepted_tokens"] for r in results) / proposed if proposed else 0.0,
            "identical_to_baseline": all(r["text"] == b["text"] for r, b in zip(results, base)) if greedy else None,
            "by_category": by_category,
            "prompts": results,
        }
    return out


def format_table(methods: dict[str, Any]) -> str:
    header = f"{'method':<18}{'tok/s':>8}{'speedup':>9}{'tau':>7}{'accept':>8}  identical  by category (speedup / tau)"
    lines = [header, "-" * len(header)]
    for name, row in methods.items():
        same = {True: "yes", False: "NO", None: "n/a"}[row["identical_to_baseline"]]
        cats = "  ".join(f"{c} {v['speedup']:.2f}x/{v['mean_accepted_tokens']:.2f}" for c, v in row["by_category"].items())
        lines.append(f"{name:<18}{row['tokens_per_s']:>8.1f}{row['speedup']:>8.2f}x{row['mean_accepted_tokens']:>7.2f}"
                     f"{row['acceptance_rate']:>8.2f}  {same:<9}  {cats}")
    return "\n".join(lines)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m specviz.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=Path, default=Path(__file__).resolve().parent.parent / "demos" / "bench_prompts.jsonl",
                        help="JSONL of {prompt, category} or {question_id, category, turns}")
    parser.add_argument("--methods", default="baseline,ngram", help="comma-separated; baseline always runs")
    parser.add_argument("--max-new-tokens", type=int, default=100)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", type=int, default=4, help="speculative tokens per round")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N prompts")
    parser.add_argument("--model", default=None, help="target: a local folder or hub id (default: the embedded model)")
    parser.add_argument("--draft", default=None, help="draft model for method 'draft': a local folder or hub id")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    from tqdm import tqdm

    from .models import load_target

    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    prompts = read_prompts(args.prompts, args.limit)
    if not prompts:
        print(f"no prompts in {args.prompts}", file=sys.stderr)
        return 2
    run = RunConfig(max_new_tokens=args.max_new_tokens, k=args.k)
    sampling = SamplingConfig(temperature=args.temperature, top_p=args.top_p, seed=args.seed)
    target = load_target(args.model)
    options = {"draft": {"draft": load_target(args.draft)}} if args.draft else {}
    total = len(prompts) * len(set(methods) | {"baseline"})
    with tqdm(total=total, desc="bench", unit="run", file=sys.stderr) as progress:
        results = run_bench(target, prompts, methods, run, sampling, options, progress)
    print(format_table(results))
    if args.out:
        report = {"model": target.name, "device": describe_device(target.device),
                  "max_new_tokens": args.max_new_tokens, "temperature": args.temperature, "k": args.k,
                  "threads": torch.get_num_threads(), "prompts": str(args.prompts), "methods": results}
        args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


if __name__ == "__main__":
    raise SystemExit(main())
