"""python -m specviz.train.distill: the target answers training prompts greedily; token ids are saved.

Resumable (prompts already answered are skipped), batched (32 prompts) with left padding, progress bar.
Greedy answers are what the speculative methods must predict at temperature 0.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from .prompts import all_prompts

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "assets" / "train_data" / "smollm2_greedy.jsonl"


def done_ids(path: Path) -> set[str]:
    if not path.is_file():
        return set()
    return {json.loads(line)["id"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()}


def answer_batch(target, batch: list[dict], max_new_tokens: int) -> list[dict]:
    tok, model = target.tokenizer, target.model
    encoded = [target.encode_prompt(row["prompt"]) for row in batch]
    width = max(len(ids) for ids in encoded)
    pad = getattr(tok, "pad_token_id", None) or 0
    input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in encoded], device=target.device)  # left-padded
    attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in encoded], device=target.device)
    with torch.inference_mode():
        out = model.generate(input_ids, attention_mask=attention, do_sample=False, max_new_tokens=max_new_tokens,
                             eos_token_id=sorted(target.eos_ids), pad_token_id=pad)
    rows = []
    for row, ids, generated in zip(batch, encoded, out[:, width:].tolist()):
        answer = []
        for token in generated:
            answer.append(token)
            if token in target.eos_ids:
                break
        rows.append({"id": row["id"], "source": row["source"], "prompt_ids": ids, "answer_ids": answer})
    return rows


def main(argv=None) -> int:
    from tqdm import tqdm

    from ..models import load_target

    parser = argparse.ArgumentParser(prog="python -m specviz.train.distill", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--limit", type=int, default=None, help="answer at most this many prompts in all")
    parser.add_argument("--batch", type=int, default=32,
                        help="prompts answered together (32: about 1.25x the answers an hour of 16 on 2 CPU threads)")
    parser.add_argument("--max-new-tokens", type=int, default=192)
    parser.add_argument("--max-prompt-tokens", type=int, default=448)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (float32 either way: the greedy answers of the target)")
    parser.add_argument("--sources", default="", help="only prompts of these sources (comma-separated, e.g. gsm8k,t0)")
    parser.add_argument("--minutes", type=float, default=0.0, help="stop after this long (0 = no limit); resumable")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_target(device=torch.device(args.device), dtype=torch.float32)
    prompts = all_prompts()[: args.limit]
    done = done_ids(args.out)
    todo = [p for p in prompts if p["id"] not in done]
    if args.sources:
        wanted = {s.strip() for s in args.sources.split(",") if s.strip()}
        unknown = wanted - {p["source"] for p in prompts}
        if unknown:
            parser.error(f"unknown sources {sorted(unknown)}; known: {sorted({p['source'] for p in prompts})}")
        todo = [p for p in todo if p["source"] in wanted]
    todo = [p for p in todo if len(target.encode_prompt(p["prompt"])) <= args.max_prompt_tokens]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    stop_at = time.monotonic() + 60 * args.minutes if args.minutes else float("inf")
    with open(args.out, "a", encoding="utf-8") as sink, tqdm(total=len(todo), desc="distill", unit="prompt",
                                                             file=sys.stderr) as bar:
        for start in range(0, len(todo), args.batch * 8):
            chunk = sorted(todo[start:start + args.batch * 8], key=lambda p: len(p["prompt"]))  # less padding
            for i in range(0, len(chunk), args.batch):
                for row in answer_batch(target, chunk[i:i + args.batch], args.max_new_tokens):
                    sink.write(json.dumps(row) + "\n")
                sink.flush()
                bar.update(len(chunk[i:i + args.batch]))
                if time.monotonic() > stop_at:
                    print(f"stopped after {args.minutes:g} minutes; run again to go on", file=sys.stderr)
                    return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
