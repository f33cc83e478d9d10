"""The oracle guesser (issue 22): a teaching tool that knows the greedy answer and guesses each token right
with chance a. Through the real engine it must reproduce the baseline's text, Leviathan et al.'s
E[tokens per round] = (1 - a^(k+1)) / (1 - a), and a free draft."""
from __future__ import annotations

import functools
import itertools
import math

import pytest
import torch

from specviz import production
from specviz.config import RunConfig, SamplingConfig
from specviz.engine import generate, speculate
from specviz.events import REJECTED, summarize
from specviz.explain import expected_tokens, method_text
from specviz.methods import available_methods, make_proposer, oracle
from specviz.methods.oracle import OracleProposer

GREEDY = SamplingConfig()
PROMPTS = [[1, 5, 7, 9, 11, 5, 7], [1, 40, 41, 42, 43, 40, 41, 42], [1, 17]]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """The tiny model's forwards are too small to share: one thread runs them fastest (and spares a busy CPU)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run(target, prompt, *, max_new_tokens=40, k=4, sampling=GREEDY, **options):
    proposer = make_proposer("oracle", target, sampling, **options)
    return list(speculate(target, proposer, prompt, RunConfig(max_new_tokens=max_new_tokens, k=k), sampling))


def output(rounds):
    return [t for r in rounds for t in r.emitted]


@functools.cache
def greedy(target, prompt: tuple[int, ...], max_new_tokens: int) -> list[int]:
    return output(speculate(target, make_proposer("baseline", target), list(prompt),
                            RunConfig(max_new_tokens=max_new_tokens), GREEDY))


@functools.cache
def answer(target, prompt: tuple[int, ...], max_new_tokens: int, decode=oracle.greedy_continuation) -> list[int]:
    return decode(target, list(prompt), max_new_tokens)


@pytest.fixture
def remembered(monkeypatch):
    """Each prompt's greedy answer is decoded once and reused: many oracle runs on one prompt cost what one does."""
    monkeypatch.setattr(oracle, "greedy_continuation", lambda target, prompt, n: list(answer(target, tuple(prompt), n)))


@pytest.mark.parametrize("k", [1, 4, 9])
@pytest.mark.parametrize("a", [0.0, 0.3, 0.8, 1.0])
def test_at_temperature_0_the_text_is_the_baselines(target, remembered, k, a):
    for seed, prompt in enumerate(PROMPTS):
        rounds = run(target, prompt, k=k, a=a, sampling=SamplingConfig(seed=seed))
        assert output(rounds) == greedy(target, tuple(prompt), 40), (prompt, k, a)
        assert all(r.n_proposed == k for r in rounds)  # a full chain every round: the answer is known that far


def test_a_1_keeps_every_guess_and_a_0_none(target):
    truth = greedy(target, tuple(PROMPTS[0]), 41 + 4)
    perfect = run(target, PROMPTS[0], k=4, a=1, max_new_tokens=41)
    assert [len(r.emitted) for r in perfect] == [5] * 8 + [1]  # k + 1 a round: every guess and the bonus
    assert all(r.n_accepted == r.n_proposed == 4 for r in perfect[:-1])
    blind = run(target, PROMPTS[0], k=4, a=0, max_new_tokens=41)
    assert len(blind) == 41 and all(r.n_accepted == 0 and r.status[0] == REJECTED for r in blind)
    for rounds, right in ((perfect, True), (blind, False)):  # a = 1: the true token everywhere; a = 0: nowhere
        for r in rounds:
            done = r.tokens_so_far - len(r.emitted)
            assert [t == g for t, g in zip(r.tokens, truth[done:done + 4], strict=True)] == [right] * 4, r.index


@pytest.mark.parametrize("a", [0.5, 0.8, 0.95])
def test_tokens_per_round_follow_leviathans_formula(target, remembered, a):
    """Every round keeps 1 + (its leading right guesses, at most k) tokens, so its mean is
    E = (1 - a^(k+1)) / (1 - a). The first `rounds` rounds of each run are counted, a number fixed in advance
    and small enough that neither the token budget nor eos cuts them (counting up to a token budget would
    favour short rounds); seeds give independent runs. The tolerance is 4 standard errors of that mean."""
    k, budget, runs = 4, 480, 5
    rounds = (budget - 1) // (k + 1)  # k + 1 tokens a round at most: these rounds all end before the budget
    assert 2 not in oracle.greedy_continuation(target, PROMPTS[0], budget + k - 1)  # no eos to cut them either
    kept = []
    for seed in range(runs):
        proposer = make_proposer("oracle", target, SamplingConfig(seed=seed), a=a)
        stream = speculate(target, proposer, PROMPTS[0], RunConfig(max_new_tokens=budget, k=k, k_max=k), GREEDY)
        for r in itertools.islice(stream, rounds):
            assert not r.finished and r.n_proposed == k
            kept.append(len(r.emitted))
        stream.close()
    mean = sum(kept) / len(kept)
    expected = expected_tokens(a, k)
    law = [a ** j * (1 - a) for j in range(k)] + [a ** k]  # P(1 + j tokens): j right guesses, then a wrong one
    sd = math.sqrt(sum(p * (j + 1 - expected) ** 2 for j, p in enumerate(law)))
    assert abs(mean - expected) < 4 * sd / math.sqrt(len(kept)), (a, mean, expected, len(kept))


def test_each_prompt_and_seed_draws_its_own_guesses(target, remembered):
    """Reproducible per (seed, prompt), independent across them: a benchmark's prompts are separate samples."""
    def lengths(prompt, seed):
        return [len(r.emitted) for r in run(target, prompt, a=0.8, sampling=SamplingConfig(seed=seed))]

    assert lengths(PROMPTS[0], 0) == lengths(PROMPTS[0], 0)
    assert lengths(PROMPTS[0], 0) != lengths(PROMPTS[0], 1)
    assert lengths(PROMPTS[0], 0) != lengths(PROMPTS[1], 0)


class LazyOracle(OracleProposer):
    """What the oracle must not do: learn the answer inside the timed loop, at its first guess."""

    def prepare(self, prompt_ids, run):
        self.pending = (prompt_ids, run)

    def propose(self, ids, k):
        if self.pending:
            super().prepare(*self.pending)
            self.pending = None
        return super().propose(ids, k)


def draft_share(proposer, target, prompt):
    stats = summarize(list(speculate(target, proposer, prompt, RunConfig(max_new_tokens=120), GREEDY)))
    return stats["draft_time_s"] / stats["verify_time_s"]


def test_the_draft_is_free(target):
    """The answer is decoded before the clock starts, so drafting costs a few list operations per round."""
    assert draft_share(make_proposer("oracle", target, GREEDY, a=0.8), target, PROMPTS[1]) < 0.2
    assert draft_share(LazyOracle(target, GREEDY, a=0.8), target, PROMPTS[1]) > 0.5  # the check can fail


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.8", "high", None, True])
def test_a_bad_a_is_refused(target, bad):
    with pytest.raises(ValueError, match="a, the chance each guess is right, must be a number from 0 to 1"):
        make_proposer("oracle", target, GREEDY, a=bad)
    with pytest.raises(ValueError, match="must be a number from 0 to 1"):
        generate(target, "oracle", "hello", RunConfig(), GREEDY, a=bad)  # refused before the first token


def test_sampling_guesses_are_point_masses_and_reproducible(target):
    """At temperature > 0 the guesses are point masses (no draft probabilities): the rejection rule keeps the
    target's distribution. The oracle knows only the greedy text, so it stops guessing once the text leaves it."""
    hot = SamplingConfig(temperature=0.9, seed=5)
    first, again = run(target, PROMPTS[0], sampling=hot), run(target, PROMPTS[0], sampling=hot)
    assert output(first) == output(again) and first[0].n_proposed == 4
    assert all(p is None for r in first for p in r.draft_probs)
    greedy_text = greedy(target, tuple(PROMPTS[0]), 40)
    left = next(i for i, (t, g) in enumerate(zip(output(first), greedy_text)) if t != g)
    assert all(r.n_proposed == 0 for r in first if r.tokens_so_far - len(r.emitted) > left)


def test_it_is_offered_everywhere_and_has_no_production_equivalent(target):
    assert "oracle" in available_methods(target)  # no weights needed
    method_text("oracle")  # a text, or the generic one until specviz/i18n.py has "method.oracle"
    d = production.deployment("oracle", "embedded:SmolLM2-135M-Instruct", RunConfig(), GREEDY)
    assert d.vllm_llm is None and d.transformers_generate is None and d.note_texts()
    text = production.markdown(d)
    assert "vLLM: no equivalent" in text and "no equivalent in `generate()`" in text
