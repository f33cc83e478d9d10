"""A teaching tool, not a real speculator: guesses from the answer it already knows, right with chance a.

Before the run's clock starts, prepare() decodes the target's greedy continuation of the prompt. Each
round then proposes the next k tokens of it, each one independently the true token with probability a
and another token otherwise. Under greedy verification a round therefore keeps 1 + min(G, k) tokens,
G the run of leading right guesses, whose mean is Leviathan et al.'s (1 - a^(k+1)) / (1 - a): the
oracle measures, on this machine and through the same engine, what a drafter of acceptance a with a
free draft would buy at each k, i.e. the engine's ceiling.

It knows only the greedy text: once a sampled text (temperature > 0) leaves it, the oracle guesses
nothing. Its guesses are point masses (no draft probabilities), so sampling stays exact, as with n-gram.
"""
from __future__ import annotations

import random
from numbers import Real

from ..config import RunConfig, SamplingConfig
from ..models import Target
from ..tree import Tree
from .base import Baseline, Proposer

DEFAULT_A = 0.8  # the chance that each guess is the target's own token


def check_a(a: object) -> float:
    """a as a float; ValueError unless it is a number from 0 to 1."""
    if isinstance(a, bool) or not isinstance(a, Real) or not 0 <= a <= 1:
        raise ValueError(f"method 'oracle': a, the chance each guess is right, must be a number from 0 to 1, "
                         f"got {a!r}")
    return float(a)


class OracleProposer(Proposer):
    """Per run: the greedy answer (from prepare), and how much of the committed text still follows it."""

    name = "oracle"

    def __init__(self, target: Target, sampling: SamplingConfig, a: float = DEFAULT_A):
        self.target, self.a, self.seed = target, check_a(a), sampling.seed
        self.continuation: list[int] = []  # the target's greedy answer, set by prepare()
        self.prompt_len, self.checked, self.on_track = 0, 0, True
        self.rng = random.Random(f"oracle:{self.seed}")  # reseeded by prepare()

    def prepare(self, prompt_ids: list[int], run: RunConfig) -> None:
        """Learn the answer: as many greedy tokens as the run's last round can guess (fewer at eos)."""
        k_max = max(run.k, run.k_max)
        self.continuation = greedy_continuation(self.target, prompt_ids, run.max_new_tokens + k_max - 1)
        self.prompt_len, self.checked, self.on_track = len(prompt_ids), 0, True
        # its own stream, reproducible, and another for each prompt: the same draws on every prompt of a
        # benchmark would make its prompts one sample repeated
        self.rng = random.Random(f"oracle:{self.seed}:{prompt_ids}")

    def propose(self, ids: list[int], k: int) -> Tree:
        done = len(ids) - self.prompt_len
        self._follow(ids, done)
        if not self.on_track:
            return Tree()
        return Tree.chain([self._guess(token) for token in self.continuation[done:done + k]])

    def _follow(self, ids: list[int], done: int) -> None:
        """Whether the committed text is still the greedy one (checking only what was added since last time)."""
        fresh = ids[self.prompt_len + self.checked:]
        if fresh != self.continuation[self.checked:done]:
            self.on_track = False
        self.checked = done

    def _guess(self, truth: int) -> int:
        """truth with probability a, else a token drawn uniformly from the others."""
        if self.rng.random() < self.a:
            return truth
        wrong = self.rng.randrange(self.target.vocab_size - 1)
        return wrong + (wrong >= truth)


def greedy_continuation(target: Target, prompt_ids: list[int], max_new_tokens: int) -> list[int]:
    """The target's greedy answer, up to and with its eos, decoded by the engine's baseline (plain greedy)."""
    from ..engine import speculate  # the engine imports this package, so import it at call time

    plain = RunConfig(max_new_tokens=max_new_tokens, k=1, k_max=1)
    return [token for r in speculate(target, Baseline(), prompt_ids, plain, SamplingConfig()) for token in r.emitted]
