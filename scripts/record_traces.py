"""Record the demo traces in demos/traces/ with the real engine on the embedded model.

    python scripts/record_traces.py                  # every trace below
    python scripts/record_traces.py --only eagle     # one (or a comma-separated few)
    python scripts/record_traces.py --threads 1      # steadier timings on a shared machine

Each trace is a side-by-side run of up to four methods (what the Replay tab shows) on one example prompt
of demos/prompts.jsonl, at the page's 96 new tokens: greedy chat, the spelling fix (copying) and the code fix
with n-gram and Medusa; the tree methods (EAGLE, Medusa, the draft model) on the JSON prompt; and n-gram on the
spelling fix sampled at temperature 0.5, top-p 0.9 with n-gram and the draft model's chain, where most copied
guesses are still kept and the rejected ones show residual resampling (the draft's q beside the target's p) (seed 2; at 0.7 the 135M model's sampled answers ramble, and sampled chat at 0.5
keeps no n-gram guess at all).
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
from specviz.methods import TREE_NODES, available_methods  # noqa: E402
from specviz.models import load_target  # noqa: E402

GREEDY, SAMPLED = SamplingConfig(), SamplingConfig(temperature=0.5, top_p=0.9, seed=2)
TRACES = {  # file name -> (prompt category, methods after the baseline, sampling, max new tokens)
    "chat": ("chat (the hard case)", ("ngram", "medusa"), GREEDY, 96),
    "spelling": ("spelling fix", ("ngram", "medusa"), GREEDY, 96),
    "code": ("code fix", ("ngram", "medusa"), GREEDY, 96),
    "eagle": ("to JSON", ("eagle", "medusa", "draft"), GREEDY, 96),
    "spelling_sampling_t0.5": ("spelling fix", ("ngram", "draft"), SAMPLED, 96),  # the name ends with the temperature
}


def options(method: str, sampling: SamplingConfig) -> dict:
    """Tree methods record the GPU-sized trees: a CPU's 2-node default shows little. A sampled draft runs its
    chain: its guesses are sampled from q, so the Why panel shows the whole rejection rule (p, q, u, residual)."""
    if method == "draft" and not sampling.greedy:
        return {"nodes": 1}
    return {"nodes": TREE_NODES[method]["cuda"]} if method in TREE_NODES else {}


def record(target, methods: list[str], prompt: str, run: RunConfig, sampling: SamplingConfig) -> trace.Trace:
    runs = {}
    for method in methods:
        runs[method] = list(generate(target, method, prompt, run, sampling, **options(method, sampling)))
        print(f"  {method}: {runs[method][-1].tokens_so_far} tokens in {len(runs[method])} rounds", flush=True)
    return trace.Trace(model=target.name, prompt=prompt, runs=runs, run=run, sampling=sampling)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(TRACES), help=f"comma-separated, from: {', '.join(TRACES)}")
    parser.add_argument("--out", type=Path, default=ROOT / "demos" / "traces")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    args = parser.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in TRACES]
    if unknown:
        parser.error(f"unknown trace(s) {unknown}; choose from {', '.join(TRACES)}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    target = load_target()
    offered = set(available_methods(target))
    prompts = {}
    for line in (ROOT / "demos" / "prompts.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            prompts.setdefault(item["category"], item["prompt"])
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        category, methods, sampling, max_new_tokens = TRACES[name]
        missing = [m for m in methods if m not in offered]
        if missing:
            raise SystemExit(f"{name}: the embedded model does not offer {missing} here")
        print(f"{name}: {category}, temperature {sampling.temperature:g}, top-p {sampling.top_p:g}", flush=True)
        run = RunConfig(max_new_tokens=max_new_tokens, k=4)
        recorded = record(target, ["baseline", *methods], prompts[category], run, sampling)
        trace.save(recorded, args.out / f"{name}.json")


if __name__ == "__main__":
    main()
