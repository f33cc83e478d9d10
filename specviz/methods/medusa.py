"""Medusa-1: extra heads on the target's last hidden state guess several tokens ahead at once.

Head i (0-based) reads the feature of position t (after the final norm, the input of the LM head)
and predicts the token at t + 2 + i. Each head is residual blocks x + SiLU(Wx + b), started as the
identity, then an LM head: its own (the v0.1 checkpoints) or the target's (shared, ours).
The candidates form a static tree, a pruned product of each head's top-k, chosen once so that the
expected accepted length is largest; the target verifies it in one forward.
"""
from __future__ import annotations

import heapq
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from torch import nn

from ..assets import check_target, first_file, read_card, read_tensors, resolve
from ..tree import ROOT, Tree
from .base import Proposer
from .ngram import graft, lookup

FILES = ("medusa_lm_head.safetensors", "medusa_lm_head.pt", "model.safetensors")


class ResBlock(nn.Module):
    """x + SiLU(W x + b); W starts at zero, so the block starts as the identity."""

    def __init__(self, hidden: int):
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + nn.functional.silu(self.linear(x))


class MedusaHeads(nn.ModuleList):
    """Keys as in the public checkpoints: {h}.{l}.linear.weight|bias, and {h}.{L}.weight when a head has its own LM head."""

    def __init__(self, hidden: int, n_heads: int, n_layers: int = 1, own_vocab: Optional[int] = None):
        super().__init__()
        for _ in range(n_heads):
            blocks: list[nn.Module] = [ResBlock(hidden) for _ in range(n_layers)]
            if own_vocab:
                blocks.append(nn.Linear(hidden, own_vocab, bias=False))
            self.append(nn.Sequential(*blocks))
        self.n_layers, self.own_vocab = n_layers, own_vocab

    def hidden(self, features: torch.Tensor, n: Optional[int] = None) -> torch.Tensor:
        """(N, H) -> (n, N, H): the first n heads' residual blocks (all heads by default; no LM head)."""
        return torch.stack([head[: self.n_layers](features) for head in list(self)[:n]])

    def logits(self, features: torch.Tensor, lm_weight: torch.Tensor, n: Optional[int] = None) -> torch.Tensor:
        """(N, H) -> (n, N, V): the first n heads through the shared LM head (lm_weight (V, H)) unless they have their own."""
        if self.own_vocab:
            return torch.stack([head(features) for head in list(self)[:n]])
        return self.hidden(features, n) @ lm_weight.T


@dataclass(frozen=True)
class MedusaWeights:
    """Loaded heads (read-only) and the static tree they are used with."""

    heads: MedusaHeads
    rank_accuracy: list[list[float]]  # [head][rank]: how often that guess was right (measured, or a prior)
    lm_weight: torch.Tensor  # (V, H) the target's LM head (shared by heads without their own)
    card: Optional[dict] = None

    @property
    def n_heads(self) -> int:
        return len(self.heads)


def sparse_tree(rank_accuracy: list[list[float]], n_nodes: int) -> tuple[tuple[int, ...], ...]:
    """The n_nodes rank paths with the largest expected acceptance, prod_i rank_accuracy[i][c_i].

    A child is never worth more than its parent, so the greedy choice is a connected tree.
    Returned sorted by (depth, path): every parent comes before its children.
    """
    top_k = len(rank_accuracy[0])
    frontier = [(-rank_accuracy[0][r], (r,)) for r in range(top_k)]
    heapq.heapify(frontier)
    chosen: list[tuple[int, ...]] = []
    while frontier and len(chosen) < n_nodes:
        neg_value, path = heapq.heappop(frontier)
        chosen.append(path)
        if len(path) < len(rank_accuracy):
            for r in range(top_k):
                heapq.heappush(frontier, (neg_value * rank_accuracy[len(path)][r], path + (r,)))
    return tuple(sorted(chosen, key=lambda p: (len(p), p)))


def default_rank_accuracy(n_heads: int, top_k: int = 8) -> list[list[float]]:
    """A prior when no measured accuracies are known: deeper heads and lower ranks are right less often."""
    return [[0.6 * 0.8 ** head * 0.55 ** rank for rank in range(top_k)] for head in range(n_heads)]


class MedusaProposer(Proposer):
    """Per-run state: only the newest feature (the heads need nothing else)."""

    name = "medusa"
    hidden_layers = (-1,)

    def __init__(self, weights: MedusaWeights, nodes: int = 40, lookup: int = 0):
        self.weights, self.lookup = weights, lookup  # lookup > 0: also graft the prompt-lookup guess (not Medusa)
        self.choices = sparse_tree(weights.rank_accuracy[: weights.n_heads], nodes)
        self.latest: Optional[torch.Tensor] = None  # (H,) feature of ids[-2]

    def observe(self, features: tuple[torch.Tensor, ...]) -> None:
        if len(features[0]):
            self.latest = features[0][-1]

    def propose(self, ids: list[int], k: int) -> Tree:
        if self.latest is None:
            return Tree()
        w = self.weights
        choices = [c for c in self.choices if len(c) <= k]  # k = tree depth; the product stays connected
        if not choices:
            return Tree()
        top_k = 1 + max(max(c) for c in choices)
        depth = max(len(c) for c in choices)  # heads deeper than the tree are not computed (a full LM head each)
        # Step 1: every head reads the feature of ids[-2]; head i guesses the token i + 1 after the root.
        logits = w.heads.logits(self.latest[None].to(w.lm_weight.dtype), w.lm_weight, depth)[:, 0].float()  # (depth, V)
        probs = torch.softmax(logits, dim=-1)
        top_probs, top_tokens = probs.topk(top_k, dim=-1)  # (depth, top_k)
        # Step 2: the static tree, node by node; a node's parent is its path minus the last rank.
        index = {(): ROOT}
        tokens, parents, draft_probs = [], [], []
        for path in choices:
            depth, rank = len(path) - 1, path[-1]
            index[path] = len(tokens)
            tokens.append(int(top_tokens[depth, rank]))
            parents.append(index[path[:-1]])
            draft_probs.append(float(top_probs[depth, rank]))
        tree = Tree(tokens, parents, draft_probs)
        return graft(tree, lookup(np.asarray(ids), k, self.lookup, 1)) if self.lookup else tree


def load_medusa(source: str | Path, target) -> MedusaWeights:
    """Medusa heads from a folder or file: medusa_lm_head.pt / .safetensors (public v0.1 or ResBlock-only
    layout) or our own shipped folder. The number of heads comes from the keys, not from config.json."""
    path = resolve(source)
    folder, file = (path, first_file(path, FILES)) if path.is_dir() else (path.parent, path)
    card = read_card(folder)
    if card is not None:
        check_target(card, target, str(folder))
    state = {k.removeprefix("medusa_head."): v for k, v in read_tensors(file).items()}
    heads = heads_from_state(state, target, str(file))
    accuracy = (card or {}).get("rank_accuracy") or default_rank_accuracy(len(heads))
    return MedusaWeights(heads, accuracy, lm_weight_of(target), card)


def medusa_shape(state: dict[str, torch.Tensor], where: str = "the weights") -> tuple[int, int]:
    """(heads, residual blocks per head), counted from the keys {head}.{layer}.linear.weight."""
    blocks = [tuple(map(int, m.groups())) for k in state if (m := re.fullmatch(r"(\d+)\.(\d+)\.linear\.weight", k))]
    if not blocks:
        raise ValueError(f"{where} has no Medusa keys ('{{head}}.{{layer}}.linear.weight')")
    return 1 + max(h for h, _ in blocks), 1 + max(l for _, l in blocks)


def heads_from_state(state: dict[str, torch.Tensor], target, where: str) -> MedusaHeads:
    n_heads, n_layers = medusa_shape(state, where)
    hidden = int(state["0.0.linear.weight"].shape[0])
    own = state.get(f"0.{n_layers}.weight")
    if hidden != target.model.config.hidden_size:
        raise ValueError(f"{where}: Medusa heads of width {hidden} do not fit target {target.name!r} "
                         f"(hidden size {target.model.config.hidden_size})")
    if own is not None and own.shape[0] != target.vocab_size:
        raise ValueError(f"{where}: the heads' LM heads have {own.shape[0]} rows, target {target.name!r} has "
                         f"a vocabulary of {target.vocab_size}")
    heads = MedusaHeads(hidden, n_heads, n_layers, None if own is None else int(own.shape[0]))
    heads.load_state_dict(state, strict=True)
    return heads.to(target.device, target.dtype).eval().requires_grad_(False)


def lm_weight_of(target) -> torch.Tensor:
    return target.model.get_output_embeddings().weight.detach()  # (V, H)


def random_heads(target, n_heads: int = 3, seed: int = 0, scale: float = 0.5) -> MedusaWeights:
    """Untrained heads with noise, for tests: identity blocks would all guess the next token."""
    hidden = target.model.config.hidden_size
    heads = MedusaHeads(hidden, n_heads).to(target.dtype)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for head in heads:
            weight = head[0].linear.weight
            weight.copy_(torch.randn(weight.shape, generator=generator, dtype=weight.dtype) * scale / hidden ** 0.5)
    heads = heads.to(target.device).eval().requires_grad_(False)
    return MedusaWeights(heads, default_rank_accuracy(n_heads), lm_weight_of(target))


def save_medusa(folder: str | Path, heads: MedusaHeads, card: dict, dtype: torch.dtype = torch.float16) -> None:
    """Our layout = the public one (ResBlock-only heads), in safetensors, with config.json and card.json."""
    from safetensors.torch import save_file

    from ..assets import write_json

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().to(dtype).contiguous() for k, v in heads.state_dict().items()},
              str(folder / "medusa_lm_head.safetensors"))
    write_json(folder / "config.json", {"medusa_num_heads": len(heads), "medusa_num_layers": heads.n_layers,
                                        "base_model_name_or_path": (card.get("target") or {}).get("name")})
    write_json(folder / "card.json", card)
