"""Speculative sampling draws exactly the target's distribution: a statistical check on a tiny
Markov 'language' whose next-token table is known, for chains, sampled trees and top-k trees."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import specviz.verify
from specviz.config import SamplingConfig
from specviz.sampling import target_distribution
from specviz.tree import Tree
from specviz.verify import choose_path

V = 5
SAMPLES = 12000
SAMPLING = SamplingConfig(temperature=1.0, seed=0)


def tables(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Target next-token table P[s] and a different draft table Q[s], (V, V) each."""
    g = torch.Generator().manual_seed(seed)
    target = torch.softmax(2.0 * torch.randn(V, V, generator=g, dtype=torch.float64), dim=-1)
    draft = torch.softmax(2.0 * torch.randn(V, V, generator=g, dtype=torch.float64), dim=-1)
    return target, draft


def chain_round(state, target, draft, g, k=3):
    tokens, dists, last = [], [], state
    for _ in range(k):
        q = draft[last]
        last = int(torch.multinomial(q, 1, generator=g))
        tokens.append(last)
        dists.append(q)
    return Tree.chain(tokens, draft_dists=torch.stack(dists))


def tree_round(state, target, draft, g, width=2, depth=2, sampled=True):
    """Siblings either drawn i.i.d. from the draft (sampled) or the draft's top-`width` (deterministic)."""
    tokens, parents, dists = [], [], []
    frontier = [(-1, state)]
    for _ in range(depth):
        nxt = []
        for parent, last in frontier:
            q = draft[last]
            picks = (torch.multinomial(q, width, replacement=True, generator=g).tolist() if sampled
                     else torch.topk(q, width).indices.tolist())
            for token in picks:
                tokens.append(int(token))
                parents.append(parent)
                dists.append(q)
                nxt.append((len(tokens) - 1, int(token)))
        frontier = nxt
    return Tree(tokens, parents, draft_dists=torch.stack(dists) if sampled else None)


def first_two_tokens(make_round, seed=0, sampling=SAMPLING):
    """Empirical joint of the first two generated tokens after state 0."""
    target, draft = tables(seed)
    g = torch.Generator().manual_seed(seed + 1)
    counts = np.zeros((V, V))
    for _ in range(SAMPLES):
        out, state = [], 0
        while len(out) < 2:
            tree = make_round(state, target, draft, g)
            rows = [state] + tree.tokens  # the target's context at the root and at each node
            logits = torch.log(target[rows])  # (n+1, V): softmax(log p) = p at temperature 1
            verdict = choose_path(tree, logits, sampling, g)
            out += [tree.tokens[i] for i in verdict.path] + [verdict.bonus]
            state = out[-1]
        counts[out[0], out[1]] += 1
    expected = (target[0][:, None] * target).numpy() * SAMPLES  # P(a | 0) P(b | a)
    return counts, expected


def chi_square_p_value(counts: np.ndarray, expected: np.ndarray) -> float:
    stat = float(((counts - expected) ** 2 / expected).sum())
    dof = counts.size - 1
    z = ((stat / dof) ** (1 / 3) - (1 - 2 / (9 * dof))) / math.sqrt(2 / (9 * dof))  # Wilson-Hilferty
    return 0.5 * math.erfc(z / math.sqrt(2))


@pytest.mark.parametrize("make_round", [
    chain_round,
    lambda *a: tree_round(*a, sampled=True),
    lambda *a: tree_round(*a, sampled=False),
    lambda *a: Tree.chain([int(torch.argmax(a[2][a[0]]))] * 2),  # a deterministic guess with no q (n-gram like)
], ids=["chain", "sampled-tree", "topk-tree", "deterministic-chain"])
def test_speculative_sampling_matches_the_target(make_round):
    counts, expected = first_two_tokens(make_round)
    assert chi_square_p_value(counts, expected) > 1e-3


def test_the_check_catches_a_wrong_residual(monkeypatch):
    """Resample from p instead of norm(max(0, p - q)) after a rejection: the test above must notice."""
    monkeypatch.setattr(specviz.verify, "residual", lambda target_probs, draft_probs: target_probs)
    counts, expected = first_two_tokens(chain_round)
    assert chi_square_p_value(counts, expected) < 1e-6


def test_top_p_and_top_k_shape_the_distribution():
    logits = torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))
    probs = target_distribution(logits, SamplingConfig(temperature=1.0, top_p=0.7))
    torch.testing.assert_close(probs, torch.tensor([0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0]))
    probs = target_distribution(logits, SamplingConfig(temperature=1.0, top_k=1))
    torch.testing.assert_close(probs, torch.tensor([1.0, 0.0, 0.0, 0.0]))
    cold = target_distribution(logits, SamplingConfig(temperature=0.5))
    torch.testing.assert_close(cold, torch.softmax(logits / 0.5, dim=-1))


# --- Medusa's typical acceptance: lossy by design --------------------------------------------------------

TYPICAL = SamplingConfig(temperature=1.0, seed=0, typical=True)


def typical_limit(p: torch.Tensor) -> float:
    """The threshold written out from the paper: min(epsilon, alpha * exp(-H(p)))."""
    entropy = -float((p * torch.log(p + 1e-5)).sum())
    return min(0.09, 0.3 * math.exp(-entropy))


def rows(*dists):
    return torch.log(torch.tensor(dists, dtype=torch.float64))  # (n+1, V) logits whose softmax is each row


def test_typical_acceptance_keeps_a_plausible_guess_the_target_would_rarely_pick():
    p0 = [0.5, 0.3, 0.15, 0.04, 0.01]
    after_1 = [0.05, 0.05, 0.1, 0.2, 0.6]
    tree = Tree([1, 3, 4], [-1, -1, 0])  # token 1 (p 0.3, passes), token 3 (p 0.04, fails), then 4 after 1
    logits = rows(p0, after_1, p0, p0)
    verdict = choose_path(tree, logits, TYPICAL, torch.Generator().manual_seed(0))
    assert verdict.path == [0, 2]
    assert verdict.status == ["accepted", "rejected", "accepted"]
    assert verdict.bonus_source == "target"
    limit = typical_limit(torch.tensor(p0))
    assert 0.04 < limit < 0.3
    assert verdict.thresholds == pytest.approx([limit, limit, typical_limit(torch.tensor(after_1))], rel=1e-5)
    # the exact rule keeps token 1 only 30% of the time; the typical rule always
    kept = sum(choose_path(tree, logits, SAMPLING, torch.Generator().manual_seed(s)).path[:1] == [0] for s in range(200))
    assert 30 < kept < 90


def test_typical_acceptance_prefers_the_longest_path_then_the_likeliest():
    p0 = [0.45, 0.35, 0.1, 0.05, 0.05]
    after = [0.1, 0.1, 0.1, 0.1, 0.6]
    # two passing siblings: the likelier (token 0) wins at equal depth
    assert choose_path(Tree([1, 0], [-1, -1]), rows(p0, after, after), TYPICAL, torch.Generator()).path == [1]
    # the less likely sibling wins when only it leads deeper
    tree = Tree([1, 0, 4], [-1, -1, 0])
    verdict = choose_path(tree, rows(p0, after, after, after), TYPICAL, torch.Generator())
    assert verdict.path == [0, 2] and verdict.status == ["accepted", "rejected", "accepted"]


def test_typical_acceptance_changes_only_the_acceptance_so_plain_rounds_stay_exact():
    p = [0.6, 0.3, 0.07, 0.02, 0.01]  # a round with no guesses (every baseline round) draws the same token
    for seed in range(50):
        typical = choose_path(Tree(), rows(p), TYPICAL, torch.Generator().manual_seed(seed))
        assert typical == choose_path(Tree(), rows(p), SAMPLING, torch.Generator().manual_seed(seed))
        assert typical.thresholds is None
    # after guesses, the bonus is still a sample of the target's own distribution at the end of the kept path
    tree, after = Tree([0], [-1]), [0.01, 0.02, 0.07, 0.3, 0.6]
    drawn = [choose_path(tree, rows(p, after), TYPICAL, torch.Generator().manual_seed(s)).bonus for s in range(400)]
    assert 0.5 < drawn.count(4) / 400 < 0.7 and set(drawn) >= {2, 3, 4}
    under = typical_limit(torch.tensor(after))
    assert after[2] <= under  # token 2 is under the typical threshold, yet the bonus still draws it (no truncation)


def test_typical_acceptance_changes_nothing_at_temperature_0():
    target, _ = tables(3)
    g = torch.Generator().manual_seed(0)
    for state in range(V):
        tree = tree_round(state, target, target, g, width=2, depth=2, sampled=False)
        logits = torch.log(target[[state] + tree.tokens])
        exact = choose_path(tree, logits, SamplingConfig(), torch.Generator())
        typical = choose_path(tree, logits, SamplingConfig(typical=True), torch.Generator())
        assert typical == exact and typical.thresholds is None


def test_the_distribution_check_sees_that_typical_acceptance_is_lossy():
    """The chi-square check that passes the exact rule above fails the typical one."""
    counts, expected = first_two_tokens(chain_round, sampling=TYPICAL)
    assert chi_square_p_value(counts, expected) < 1e-6


def test_typical_settings_are_checked():
    with pytest.raises(ValueError, match="typical_epsilon"):
        SamplingConfig(temperature=1.0, typical=True, typical_epsilon=2.0).validate()
    assert SamplingConfig(temperature=0.5, typical=True).lossy and not SamplingConfig(typical=True).lossy
