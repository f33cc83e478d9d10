"""A proposal: a token tree as plain data. A chain is a tree with one path."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

ROOT = -1  # parent index of the first proposed tokens: the last committed token


@dataclass(frozen=True)
class Tree:
    """Proposed tokens with their parents (each parent before its child).

    draft_probs: each token's draft probability, for display (None where the method has none).
    draft_dists: (n, V) the distribution each token was *sampled* from, or None when the tokens
    were chosen deterministically (argmax, top-k, n-gram lookup); the verifier then treats each
    guess as a point mass, which keeps sampling lossless.
    """

    tokens: list[int] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    draft_probs: list[Optional[float]] = field(default_factory=list)
    draft_dists: Optional[torch.Tensor] = None

    def __post_init__(self) -> None:
        n = len(self.tokens)
        if len(self.parents) != n:
            raise ValueError(f"a tree needs one parent per token ({n} tokens, {len(self.parents)} parents)")
        if any(not ROOT <= p < i for i, p in enumerate(self.parents)):
            raise ValueError(f"each parent must come before its child: {self.parents}")
        if not self.draft_probs:
            object.__setattr__(self, "draft_probs", [None] * n)

    @classmethod
    def chain(cls, tokens: list[int], draft_probs: Optional[list[Optional[float]]] = None,
              draft_dists: Optional[torch.Tensor] = None) -> "Tree":
        return cls(list(tokens), list(range(-1, len(tokens) - 1)), list(draft_probs or []), draft_dists)

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def is_chain(self) -> bool:
        return self.parents == list(range(-1, len(self.tokens) - 1))

    def depths(self) -> list[int]:
        """Depth of every node; children of the root have depth 1."""
        depths: list[int] = []
        for p in self.parents:
            depths.append(1 if p == ROOT else depths[p] + 1)
        return depths

    def children(self) -> dict[int, list[int]]:
        kids: dict[int, list[int]] = {ROOT: []}
        for i, p in enumerate(self.parents):
            kids.setdefault(p, []).append(i)
            kids.setdefault(i, [])
        return kids

    def ancestry(self) -> torch.Tensor:
        """(n+1, n+1) bool: row r may see column c. Index 0 is the root, node i is at 1 + i."""
        n = len(self.tokens)
        seen = torch.eye(n + 1, dtype=torch.bool)
        seen[:, 0] = True
        for i, p in enumerate(self.parents):
            seen[i + 1] |= seen[p + 1]
        return seen

    def attention_mask(self, past_len: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """Additive 4D mask (1, 1, n+1, past_len+n+1): the past is visible to all, each node sees its ancestors."""
        n = len(self.tokens)
        visible = torch.ones(n + 1, past_len + n + 1, dtype=torch.bool)
        visible[:, past_len:] = self.ancestry()
        return additive_mask(visible, dtype)[None, None].to(device)


# A candidate while a tree grows: (cumulative log-prob, token, parent candidate or ROOT, own prob).
Candidate = tuple[float, int, int, float]
# step(tokens, rows, ancestors, level) -> (log-probs, token ids), each (n, top_k): the drafter's best children of
# each of n frontier nodes. rows[i]: the frontier node's parent's row in the previous step's output (ROOT at
# level 1); ancestors[i]: the feeding order (0, 1, ...) of its fed ancestors, whose keys the node attends to.
Step = Callable[[list[int], list[int], list[list[int]], int], tuple[torch.Tensor, torch.Tensor]]


def grow(first_logp: torch.Tensor, first_tokens: torch.Tensor, step: Step, depth: int, top_k: int) -> list[Candidate]:
    """EAGLE-2's dynamic tree, for any drafter: start from the root's top_k children; at each level feed the
    top_k candidates by cumulative log-prob (one drafter call) and record top_k children of each. Returns every
    candidate; best(candidates, n) keeps the tree."""
    nodes: list[Candidate] = [(float(lp), int(t), ROOT, float(lp.exp())) for lp, t in zip(first_logp, first_tokens)]
    frontier = list(range(len(nodes)))
    rows = [ROOT] * len(frontier)
    fed: dict[int, int] = {}  # candidate -> its place in the feeding order
    for level in range(1, depth):
        ancestors = []
        for node in frontier:
            slots, parent = [], nodes[node][2]
            while parent != ROOT:
                slots.append(fed[parent])
                parent = nodes[parent][2]
            ancestors.append(slots)
        logp, tokens = step([nodes[i][1] for i in frontier], rows, ancestors, level)  # (n, top_k) each
        for node in frontier:
            fed[node] = len(fed)
        scores = logp + torch.tensor([nodes[i][0] for i in frontier], device=logp.device, dtype=logp.dtype)[:, None]
        first, width = len(nodes), logp.shape[1]
        for row, node in enumerate(frontier):
            for j in range(width):
                nodes.append((float(scores[row, j]), int(tokens[row, j]), node, float(logp[row, j].exp())))
        chosen = scores.flatten().topk(min(top_k, scores.numel())).indices
        frontier = [first + int(i) for i in chosen]
        rows = (chosen // width).tolist()
    return nodes


def additive_mask(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """bool "may attend" -> the additive mask transformers takes (0 where visible, the dtype's minimum elsewhere)."""
    return torch.zeros(visible.shape, dtype=dtype, device=visible.device).masked_fill_(~visible, torch.finfo(dtype).min)


def level_visibility(past: int, fed: int, ancestors: list[list[int]], device=None) -> torch.Tensor:
    """(n, past + fed + n) bool for one call of a growing tree's step: every node sees the committed past,
    its fed ancestors (cached after the past, in feeding order) and itself (the n new slots after those)."""
    n = len(ancestors)
    visible = torch.zeros(n, past + fed + n, dtype=torch.bool, device=device)
    visible[:, :past] = True
    for row, slots in enumerate(ancestors):
        visible[row, [past + s for s in slots]] = True
        visible[row, past + fed + row] = True
    return visible


def best(nodes: list[Candidate], n: int) -> Tree:
    """The n best candidates by cumulative log-prob (a parent scores at least as high as its child and comes
    first on ties, so the kept set is a tree)."""
    keep = sorted(sorted(range(len(nodes)), key=lambda i: (-nodes[i][0], i))[:n])
    where = {ROOT: ROOT, **{node: index for index, node in enumerate(keep)}}
    return Tree([nodes[i][1] for i in keep], [where[nodes[i][2]] for i in keep], [nodes[i][3] for i in keep])
