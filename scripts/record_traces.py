"""Record the demo traces in demos/traces/ with the real engine on the embedded model.

    python scripts/record_traces.py [--max-new-tokens 48] [--out demos/traces]

Each trace is a side-by-side run of every method the embedded model offers on one example prompt
(greedy), plus one sampling run at temperature 0.8 where rejections and residual resampling happen.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from specviz import trace  # noqa: E402
from specviz.config import RunConfig, SamplingConfig  # noqa: E402
from specviz.engine import generate  # noqa: E402
from specviz.methods import available_methods  # noqa: E402
from specviz.models import load_target  # noqa: E402

CATEGORIES = ("chat", "summarization", "code")


def record(target, methods: list[str], prompt: str, run: RunConfig, sampling: SamplingConfig) -> trace.Trace:
    runs = {}
    for method in methods:
        runs[method] = list(generate(target, method, prompt, run, sampling))
        print(f"  {method}: {runs[method][-1].tokens_so_far} tokens in {len(runs[method])} rounds", flush=True)
    return trace.Trace(model=target.name, prompt=prompt, runs=runs, run=run, sampling=sampling)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--out", type=Path, default=ROOT / "demos" / "traces")
    args = parser.parse_args()
    target = load_target()
    methods = ["baseline"] + [m for m in available_methods(target) if m != "baseline"]
    print(f"methods: {methods}", flush=True)
    prompts = {}
    for line in (ROOT / "demos" / "prompts.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            prompts.setdefault(item["category"], item["prompt"])
    run = RunConfig(max_new_tokens=args.max_new_tokens, k=4)
    args.out.mkdir(parents=True, exist_ok=True)
    for category in CATEGORIES:
        print(f"{category} (greedy)", flush=True)
        trace.save(record(target, methods, prompts[category], run, SamplingConfig()), args.out / f"{category}.json")
    sampled = [m for m in methods if m in ("baseline", "draft", "ngram")]
    print("chat (temperature 0.8)", flush=True)
    trace.save(record(target, sampled, prompts["chat"], run, SamplingConfig(temperature=0.8, seed=1)),
               args.out / "chat_sampling_t0.8.json")


if __name__ == "__main__":
    main()
