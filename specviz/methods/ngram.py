"""Prompt lookup decoding: guess that the text repeats what followed the last n tokens before."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..tree import Tree
from .base import Proposer


# How many tokens to guess after a match of n tokens (capped by k). Short matches are often chance
# (a 1-gram continues correctly too rarely to pay for the wider forward), long ones are copying.
# Chosen with scripts/sim_ngram.py on the target's own answers to training prompts: the modelled
# CPU speedup went from 1.05x (k=4 after any 1..3-gram) to 1.20x; see docs/perf.md.
GUESS_BY_MATCH = {2: 2, 3: 3, 4: 5, 5: 5}
LONG_MATCH_GUESS = 8


def guess_length(match: int, k: int) -> int:
    return min(k, GUESS_BY_MATCH.get(match, LONG_MATCH_GUESS if match > 5 else 1))


@dataclass(frozen=True)
class NgramOptions:
    max_ngram: int = 8  # try matching the last max_ngram tokens first ...
    min_ngram: int = 2  # ... down to this many
    scaled: bool = True  # guess length grows with the match (GUESS_BY_MATCH), else always k

    def validate(self) -> None:
        if not 1 <= self.min_ngram <= self.max_ngram <= 16:
            raise ValueError(f"n-gram sizes must satisfy 1 <= min_ngram <= max_ngram <= 16, "
                             f"got {self.min_ngram} and {self.max_ngram}")


class NgramProposer(Proposer):
    """No model and no draft distribution: the guess is deterministic (a point mass)."""

    name = "ngram"

    def __init__(self, options: NgramOptions = NgramOptions()):
        options.validate()
        self.options = options

    def propose(self, ids: list[int], k: int) -> Tree:
        o = self.options
        return Tree.chain(lookup(np.asarray(ids), k, o.max_ngram, o.min_ngram, scaled=o.scaled))


def lookup(ids: np.ndarray, k: int, max_ngram: int, min_ngram: int, scaled: bool = False) -> list[int]:
    """The k tokens after the most recent earlier occurrence of the longest matching suffix
    (scaled: only guess_length(match, k) of them).

    When that occurrence is so recent that fewer than k tokens follow it, the text is repeating
    with period len(ids) - start, and the guess continues the repetition.
    """
    for n in range(min(max_ngram, len(ids) - 1), min_ngram - 1, -1):
        suffix = ids[-n:]
        windows = np.lib.stride_tricks.sliding_window_view(ids[:-1], n)  # (len-n, n): every earlier n-gram
        hits = np.flatnonzero((windows == suffix).all(axis=1))
        if len(hits):
            start = int(hits[-1]) + n
            period = len(ids) - start
            return [int(ids[start + j % period]) for j in range(guess_length(n, k) if scaled else k)]
    return []


def graft(tree: Tree, chain: list[int]) -> Tree:
    """Add a guessed chain under the root of a tree, sharing the nodes it already has (no duplicate
    siblings); new nodes have no draft probability. Lets a model's tree also try a prompt-lookup guess."""
    tokens, parents, probs = list(tree.tokens), list(tree.parents), list(tree.draft_probs)
    children = tree.children()
    node = -1
    for token in chain:
        match = next((c for c in children.get(node, []) if tokens[c] == token), None)
        if match is None:
            tokens.append(token)
            parents.append(node)
            probs.append(None)
            match = len(tokens) - 1
            children[node] = children.get(node, []) + [match]
        node = match
    return Tree(tokens, parents, probs)
