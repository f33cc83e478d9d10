"""The feature cache: the target runs once over every training sequence; its features are kept on disk.

A shard is one safetensors file holding several sequences back to back:
  tokens (T,) int32, offsets (n+1,) int64, answer_start (n,) int64,
  top1 (T,) int32 = the target's greedy next token at each position,
  f{layer} (T, H) float16 = hidden_states[layer] (-1 = after the final norm).
Its .json lists the sequence ids, so a later run adds only what is new (resumable).
"""
from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from .data import held_out


@dataclass
class Features:
    """Sequences concatenated: tokens (T,), top1 (T,), feats {layer: (T, H)}, spans [(start, end, answer_start)]."""

    tokens: torch.Tensor
    top1: torch.Tensor
    feats: dict[int, torch.Tensor]
    spans: list[tuple[int, int, int]]
    ids: list[str]

    @property
    def n_tokens(self) -> int:
        return int(self.tokens.shape[0])


def _key(layer: int) -> str:
    return f"f{layer}"


def cached_ids(folder: Path) -> set[str]:
    ids: set[str] = set()
    for meta in sorted(folder.glob("shard-*.json")):
        ids.update(json.loads(meta.read_text())["ids"])
    return ids


def extract(target, rows: list[dict], folder: Path, layers: tuple[int, ...] = (-1,), batch_tokens: int = 2048,
            shard_tokens: int = 32768, max_len: int = 768) -> int:
    """Featurise the rows not cached yet; returns how many tokens were added."""
    from safetensors.torch import save_file
    from tqdm import tqdm

    folder.mkdir(parents=True, exist_ok=True)
    done = cached_ids(folder)
    todo = [r for r in rows if r["id"] not in done]
    todo.sort(key=lambda r: len(r["tokens"]))  # similar lengths share a batch: little padding
    shard: list[tuple[dict, torch.Tensor, dict[int, torch.Tensor]]] = []
    added, number = 0, len(list(folder.glob("shard-*.json")))
    with tqdm(total=sum(min(len(r["tokens"]), max_len) for r in todo), desc="features", unit="tok",
              file=sys.stderr) as bar:
        start = 0
        while start < len(todo):
            size = 1
            while start + size < len(todo) and (size + 1) * min(len(todo[start + size]["tokens"]), max_len) <= batch_tokens:
                size += 1
            batch = todo[start:start + size]
            start += len(batch)
            for row, top1, feats in _forward(target, batch, layers, max_len):
                shard.append((row, top1, feats))
                added += len(top1)
                bar.update(len(top1))
            if sum(len(t) for _, t, _ in shard) >= shard_tokens or start >= len(todo):
                _write(folder / f"shard-{number:05d}-{os.getpid()}", shard, layers, save_file)  # unique per writer
                shard, number = [], number + 1
    return added


def _forward(target, batch: list[dict], layers: tuple[int, ...], max_len: int):
    seqs = [r["tokens"][:max_len] for r in batch]
    width = max(len(s) for s in seqs)
    device = target.device
    input_ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs], device=device)  # (B, W), right-padded
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs], device=device)
    with torch.inference_mode():
        out = target.model(input_ids=input_ids, attention_mask=mask, output_hidden_states=True)
    top1 = out.logits.argmax(-1).to(torch.int32).cpu()  # (B, W)
    for b, (row, seq) in enumerate(zip(batch, seqs)):
        n = len(seq)
        yield row, top1[b, :n].clone(), {layer: out.hidden_states[layer][b, :n].to(torch.float16).cpu() for layer in layers}


def _write(stem: Path, shard, layers, save_file) -> None:
    lengths = [len(t) for _, t, _ in shard]
    offsets = torch.tensor([0] + lengths).cumsum(0)
    tensors = {
        "tokens": torch.tensor([t for row, top1, _ in shard for t in row["tokens"][:len(top1)]], dtype=torch.int32),
        "offsets": offsets,
        "answer_start": torch.tensor([row["answer_start"] for row, _, _ in shard]),
        "top1": torch.cat([top1 for _, top1, _ in shard]),
        **{_key(layer): torch.cat([f[layer] for _, _, f in shard]) for layer in layers},
    }
    save_file(tensors, str(stem) + ".safetensors.tmp")
    Path(str(stem) + ".safetensors.tmp").replace(str(stem) + ".safetensors")
    stem.with_suffix(".json").write_text(json.dumps({"ids": [row["id"] for row, _, _ in shard],
                                                     "sources": [row["source"] for row, _, _ in shard]}))


def load(folder: Path, layers: tuple[int, ...] = (-1,), split: str = "train", sources: str = "all") -> Features:
    """Every cached sequence of one split ("train" or "heldout"); sources "all", "distill" or "human"."""
    from safetensors.torch import load_file

    tokens, top1, spans, ids = [], [], [], []
    layers = tuple(dict.fromkeys(layers))  # a layer named twice (a shallow target's EAGLE-3 set) is kept once
    feats: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers}
    total = 0
    for meta_path in sorted(folder.glob("shard-*.json")):
        meta = json.loads(meta_path.read_text())
        data = load_file(str(meta_path.with_suffix(".safetensors")))
        offsets = data["offsets"].tolist()
        for i, seq_id in enumerate(meta["ids"]):
            if held_out(seq_id) != (split == "heldout"):
                continue
            if sources != "all" and not seq_id.startswith(sources + ":"):
                continue
            a, b = offsets[i], offsets[i + 1]
            tokens.append(data["tokens"][a:b])
            top1.append(data["top1"][a:b])
            for layer in layers:
                feats[layer].append(data[_key(layer)][a:b])
            spans.append((total, total + b - a, total + min(int(data["answer_start"][i]), b - a)))
            ids.append(seq_id)
            total += b - a
    if not spans:
        raise ValueError(f"no cached {split} features in {folder}: run the feature step first")
    return Features(torch.cat(tokens).long(), torch.cat(top1).long(),
                    {layer: torch.cat(v) for layer, v in feats.items()}, spans, ids)
