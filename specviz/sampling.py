"""Pure functions from logits to the distributions that speculative sampling compares."""
from __future__ import annotations

import torch

from .config import SamplingConfig


def target_distribution(logits: torch.Tensor, sampling: SamplingConfig) -> torch.Tensor:
    """Probabilities after temperature, top-k and top-p, row by row.  (..., V) -> (..., V) float32.

    At temperature 0 this is the plain softmax: the greedy verifier only uses it to show how sure
    the target was, never to choose.
    """
    logits = logits.float()
    if sampling.greedy:
        return torch.softmax(logits, dim=-1)
    logits = logits / sampling.temperature
    if 0 < sampling.top_k < logits.shape[-1]:
        kth = torch.topk(logits, sampling.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if sampling.top_p < 1:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
        sorted_probs = sorted_probs.masked_fill(mass_before >= sampling.top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def sample(probs: torch.Tensor, generator: torch.Generator) -> int:
    """One token drawn from a (V,) distribution with the run's generator."""
    return int(torch.multinomial(probs.float().cpu(), 1, generator=generator))


def uniform(generator: torch.Generator) -> float:
    return float(torch.rand((), generator=generator))


def residual(target_probs: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """norm(max(0, target - draft)): what is left of the target once a draft guess was rejected."""
    left = torch.clamp(target_probs - draft_probs, min=0.0)
    total = left.sum()
    return left / total if total > 0 else target_probs


def point_mass(token: int, like: torch.Tensor) -> torch.Tensor:
    """The draft distribution of a deterministic guess (n-gram, top-k tree siblings)."""
    mass = torch.zeros_like(like)
    mass[token] = 1.0
    return mass
