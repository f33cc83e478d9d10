"""Frozen settings for one run: how to sample and how to speculate."""
from __future__ import annotations

from dataclasses import dataclass

MAX_K = 16  # the most speculative tokens (chain length / tree depth) one round may propose


@dataclass(frozen=True)
class SamplingConfig:
    temperature: float = 0.0  # 0 = greedy; > 0 samples the target distribution exactly
    top_p: float = 1.0  # nucleus sampling mass in (0, 1]; 1 keeps the whole distribution
    top_k: int = 0  # keep only the k most likely tokens; 0 keeps all
    seed: int = 0  # seeds the one torch.Generator of a run, so sampling runs are reproducible
    # Medusa's typical acceptance (LOSSY, sampling only): keep a guess the target finds plausible, p > the
    # threshold min(epsilon, alpha * exp(-entropy of p)), instead of the rejection rule that keeps p exactly
    typical: bool = False
    typical_epsilon: float = 0.09  # Medusa's posterior_threshold
    typical_alpha: float = 0.3  # Medusa's posterior_alpha

    def validate(self) -> None:
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k!r}")
        if not (0 <= self.typical_epsilon <= 1 and 0 <= self.typical_alpha <= 1):
            raise ValueError(f"typical_epsilon and typical_alpha must be in [0, 1], got "
                             f"{self.typical_epsilon!r} and {self.typical_alpha!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def lossy(self) -> bool:
        """Typical acceptance while sampling: faster, but the output no longer follows the target's distribution.
        At temperature 0 it changes nothing (greedy acceptance either way, as in Medusa)."""
        return self.typical and not self.greedy


@dataclass(frozen=True)
class RunConfig:
    max_new_tokens: int = 128  # stop after this many generated tokens
    k: int = 4  # speculative tokens per round at the start (tree methods: the tree depth)
    adaptive_k: bool = False  # grow k after a fully accepted round, shrink it after a rejection
    k_min: int = 1  # bounds for adaptive k
    k_max: int = 8
    fallback_threshold: float = 0.0  # rolling acceptance under this -> plain decoding for a while (0 = never)
    fallback_window: int = 4  # speculative rounds in the rolling acceptance window
    fallback_rounds: int = 8  # plain rounds before speculation is tried again
    time_budget_s: float = 0.0  # end the run, as stop_reason "time_budget", once it has run this long (0 = never)

    def validate(self) -> None:
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}")
        for name in ("k", "k_min", "k_max"):
            value = getattr(self, name)
            if not isinstance(value, int) or not 1 <= value <= MAX_K:
                raise ValueError(f"{name} must be an integer from 1 to {MAX_K}, got {value!r}")
        if self.k_min > self.k_max:
            raise ValueError(f"k_min ({self.k_min}) must not exceed k_max ({self.k_max})")
        if not 0 <= self.fallback_threshold <= 1:
            raise ValueError(f"fallback_threshold must be in [0, 1], got {self.fallback_threshold!r}")
        if self.fallback_window < 1 or self.fallback_rounds < 1:
            raise ValueError("fallback_window and fallback_rounds must be >= 1")
        if not self.time_budget_s >= 0:
            raise ValueError(f"time_budget_s must be >= 0 (0 = no limit), got {self.time_budget_s!r}")
