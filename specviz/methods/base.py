"""The one interface every way of guessing implements. A proposer only proposes."""
from __future__ import annotations

import torch

from ..config import RunConfig
from ..tree import Tree


class Proposer:
    """Per-run state of one method (made fresh for every run; heavy weights are shared read-only).

    The engine calls prepare() once, before its clock starts, then observe() with the target's
    features at each newly committed position (after the prefill: positions 0 .. P-2; after a round:
    the root and the accepted path), then propose(ids, k) with every committed token, ids[-1] being
    the root the tree grows from.
    """

    name = "base"
    hidden_layers: tuple[int, ...] = ()  # HF hidden_states indices the method reads (-1 = after the final norm)

    def prepare(self, prompt_ids: list[int], run: RunConfig) -> None:
        """Work done once per run before it is timed (none for a real method: its cost is the method's)."""

    def observe(self, features: tuple[torch.Tensor, ...]) -> None:
        """Features (n_new, H) per requested layer, for positions whose KV the target just kept."""

    def propose(self, ids: list[int], k: int) -> Tree:
        raise NotImplementedError


class Baseline(Proposer):
    """Plain autoregressive decoding through the same engine: proposes nothing, so each round adds one token."""

    name = "baseline"

    def propose(self, ids: list[int], k: int) -> Tree:
        return Tree()
