"""Invariants of the engine on tiny random models: lossless greedy, tree verification, records, stops."""
from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

from conftest import TinyTokenizer, tiny_eagle, tiny_llama, tiny_medusa, tiny_target
from specviz.config import MAX_K, RunConfig, SamplingConfig
from specviz.engine import generate, speculate
from specviz.events import ACCEPTED, FALLBACK, REJECTED, UNREACHED, summarize
from specviz.methods import METHODS, make_proposer
from specviz.methods.base import Proposer
from specviz.models import wrap
from specviz.tree import Tree
from specviz.verify import TargetSession

GREEDY = SamplingConfig()
PROMPTS = [[1, 5, 7, 9, 11, 5, 7], [1, 40, 41, 42, 43, 40, 41, 42], [1, 17], list(range(3, 60, 2))]


def run(target, method, prompt, *, max_new_tokens=40, k=4, sampling=GREEDY, **options):
    proposer = method if isinstance(method, Proposer) else make_proposer(method, target, sampling, **options)
    return list(speculate(target, proposer, prompt, RunConfig(max_new_tokens=max_new_tokens, k=k), sampling))


def output(rounds):
    return [t for r in rounds for t in r.emitted]


def hf_greedy(target, prompt, max_new_tokens):
    """Plain greedy decoding by transformers itself, the reference every method must match."""
    ids = torch.tensor([prompt], device=target.device)
    out = target.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                max_new_tokens=max_new_tokens, eos_token_id=sorted(target.eos_ids),
                                pad_token_id=0)
    return out[0, len(prompt):].tolist()


def method_options(name, draft_target):
    """What each method needs on a tiny random target (the shipped weights are for the embedded one)."""
    return {"draft": {"draft": draft_target}, "medusa": {"heads": tiny_medusa(0), "nodes": 24},
            "eagle": {"head": tiny_eagle(0), "nodes": 24}}.get(name, {})  # big trees, whatever the device's default


@pytest.mark.parametrize("prompt", PROMPTS)
def test_baseline_equals_transformers_greedy(target, prompt):
    assert output(run(target, "baseline", prompt)) == hf_greedy(target, prompt, 40)


@pytest.mark.parametrize("name", METHODS)
@pytest.mark.parametrize("k", [1, 3, 8])
def test_every_method_is_lossless_at_temperature_0(target, draft_target, name, k):
    for prompt in PROMPTS:
        rounds = run(target, name, prompt, k=k, **method_options(name, draft_target))
        assert output(rounds) == output(run(target, "baseline", prompt)), (name, prompt)


def test_a_good_draft_is_accepted(target, draft_target):
    rounds = run(target, "draft", PROMPTS[0], k=4, draft=draft_target)
    stats = summarize(rounds)
    assert stats["mean_accepted_tokens"] > 1.5
    assert 0 < stats["acceptance_rate"] < 1  # the noisy copy agrees often, not always
    perfect = summarize(run(target, "draft", PROMPTS[0], k=4, draft=target, confidence=0.0))  # always k guesses
    assert perfect["acceptance_rate"] == 1.0 and perfect["mean_accepted_tokens"] == pytest.approx(5, abs=0.3)


class OracleTreeProposer(Proposer):
    """Random trees in which one branch follows the known greedy continuation, so a tree path of
    several nodes is accepted and its KV has to be gathered out of the middle of the tree."""

    name = "oracle-tree"

    def __init__(self, continuation: list[int], prompt_len: int, seed: int):
        self.continuation, self.prompt_len, self.rng = continuation, prompt_len, random.Random(seed)

    def propose(self, ids: list[int], k: int) -> Tree:
        done = len(ids) - self.prompt_len
        truth = self.continuation[done:done + k]
        tokens, parents, parent = [], [], -1
        for depth, token in enumerate(truth):
            for _ in range(self.rng.randint(0, 2)):  # decoy siblings before the true child
                tokens.append(self.rng.randrange(3, 96))
                parents.append(parent)
                if self.rng.random() < 0.5:  # and a decoy grandchild under a decoy
                    tokens.append(self.rng.randrange(3, 96))
                    parents.append(len(tokens) - 2)
            if self.rng.random() < 0.15 and depth:  # sometimes the truth is missing below here
                break
            tokens.append(token)
            parents.append(parent)
            parent = len(tokens) - 1
        return Tree(tokens, parents)


@pytest.mark.parametrize("seed", range(4))
def test_tree_paths_are_verified_and_compacted_losslessly(target, seed):
    prompt = PROMPTS[seed % len(PROMPTS)]
    expected = output(run(target, "baseline", prompt, max_new_tokens=48))
    oracle = OracleTreeProposer(expected, len(prompt), seed)
    rounds = run(target, oracle, prompt, max_new_tokens=48, k=5)
    assert output(rounds) == expected
    assert any(not Tree(r.tokens, r.parents).is_chain and r.n_accepted >= 2 for r in rounds)
    assert summarize(rounds)["mean_accepted_tokens"] > 2


def test_tree_logits_equal_sequential_logits(target):
    """One tree forward with a 4D mask and depth positions == each root-to-node path run on its own."""
    prompt = [1, 8, 9, 10, 11, 12]
    tree = Tree(tokens=[20, 21, 22, 23, 24, 25, 26], parents=[-1, -1, 0, 0, 1, 2, 5])
    session = TargetSession(target.model)
    with torch.inference_mode():
        session.prefill(prompt)
        tree_logits = session.forward_tree(prompt[-1], tree).logits[0]  # (n+1, V)
        for node in range(-1, len(tree)):
            path, walk = [], node
            while walk != -1:
                path.insert(0, tree.tokens[walk])
                walk = tree.parents[walk]
            alone = target.model(input_ids=torch.tensor([prompt + path], device=target.device)).logits[0, -1]
            torch.testing.assert_close(tree_logits[node + 1], alone, rtol=1e-9, atol=1e-9)


def test_records_add_up(target, draft_target):
    for name in METHODS:
        rounds = run(target, name, PROMPTS[1], **method_options(name, draft_target))
        tokens = output(rounds)
        assert "".join(r.text for r in rounds) == target.decode(tokens)
        assert [r.index for r in rounds] == list(range(len(rounds)))
        assert rounds[-1].finished and not any(r.finished for r in rounds[:-1])
        so_far = 0
        for r in rounds:
            assert 0 <= r.n_accepted <= r.n_proposed
            assert len(r.tokens) == len(r.parents) == len(r.pieces) == len(r.status) == len(r.target_probs)
            assert r.status.count(ACCEPTED) == r.n_accepted
            assert all(s in (ACCEPTED, REJECTED, UNREACHED) for s in r.status)
            assert r.emitted[: r.n_accepted] == [r.tokens[i] for i in r.accepted_path]
            so_far += len(r.emitted)
            assert r.tokens_so_far == so_far
            Round = type(r)
            assert Round.from_dict(r.to_dict()) == r


def test_one_target_forward_per_round(target, draft_target):
    calls = []
    handle = target.model.register_forward_hook(lambda *_: calls.append(1))
    try:
        rounds = run(target, "draft", PROMPTS[0], draft=draft_target)
    finally:
        handle.remove()
    assert len(calls) == len(rounds) + 1  # + the prefill


def test_sampling_is_seeded_and_reproducible(target, draft_target):
    hot = SamplingConfig(temperature=0.9, top_p=0.95, top_k=50, seed=7)
    for name in METHODS:
        first = output(run(target, name, PROMPTS[0], sampling=hot, **method_options(name, draft_target)))
        again = output(run(target, name, PROMPTS[0], sampling=hot, **method_options(name, draft_target)))
        assert first == again
    other = SamplingConfig(temperature=0.9, top_p=0.95, top_k=50, seed=8)
    assert output(run(target, "baseline", PROMPTS[0], sampling=other)) != first or \
        output(run(target, "baseline", PROMPTS[0], sampling=hot)) != output(run(target, "draft", PROMPTS[0], sampling=hot, draft=draft_target))


def test_stops_at_eos_inside_an_accepted_run():
    base = tiny_target(0)
    prompt = PROMPTS[0]
    plain = output(run(base, "baseline", prompt))
    stop_token = plain[9]
    first = plain.index(stop_token)
    eos_target = wrap("tiny-eos", base.model, TinyTokenizer())
    eos_target = type(eos_target)(eos_target.name, eos_target.model, eos_target.tokenizer, frozenset({stop_token}))
    rounds = run(eos_target, "draft", prompt, k=8, draft=base)  # a perfect draft: long accepted runs
    assert output(rounds) == plain[: first + 1]
    assert rounds[-1].stop_reason == "eos"


def test_below_a_node_the_token_budget_cut_nothing_is_rejected(target):
    """The round that hits max_new_tokens marks the accepted nodes it cuts unreached, and everything below
    them too: no rejected guess may hang under a node the run never reached."""
    prompt = PROMPTS[1]
    expected = output(run(target, "baseline", prompt, max_new_tokens=48))
    cut_with_children = 0
    for seed in range(4):
        for budget in range(2, 10):
            last = run(target, OracleTreeProposer(expected, len(prompt), seed), prompt, max_new_tokens=budget, k=5)[-1]
            assert last.stop_reason == "max_new_tokens"
            for node, parent in enumerate(last.parents):
                if parent >= 0 and last.status[parent] == UNREACHED:
                    assert last.status[node] == UNREACHED, (seed, budget, last.status, last.parents)
                    cut_with_children += 1
    assert cut_with_children > 0  # the cut happened below accepted nodes that had children


@pytest.mark.parametrize("budget", [1, 2, 7, 13])
def test_never_emits_past_max_new_tokens(target, budget):
    rounds = run(target, "draft", PROMPTS[0], max_new_tokens=budget, k=5, draft=target)
    assert output(rounds) == output(run(target, "baseline", PROMPTS[0]))[:budget]
    assert rounds[-1].stop_reason == "max_new_tokens" and rounds[-1].tokens_so_far == budget


def test_dynamic_k_grows_and_shrinks(target, draft_target):
    proposer = make_proposer("draft", target, GREEDY, draft=draft_target)
    rounds = list(speculate(target, proposer, PROMPTS[0], RunConfig(max_new_tokens=60, k=2, adaptive_k=True,
                                                                    k_min=1, k_max=8), GREEDY))
    ks = [r.k for r in rounds]
    assert max(ks) > 2 and min(ks) < max(ks)
    for before, after in zip(rounds, rounds[1:]):
        grew = before.n_accepted == before.n_proposed
        assert after.k == (min(before.k + 2, 8) if grew else max(before.k - 1, 1))
    assert output(rounds) == output(run(target, "baseline", PROMPTS[0], max_new_tokens=60))


class WrongProposer(Proposer):
    name = "always-wrong"

    def __init__(self):
        self.calls = 0

    def propose(self, ids: list[int], k: int) -> Tree:
        self.calls += 1
        return Tree.chain([(ids[-1] * 7 + i) % 96 for i in range(k)])


def test_falls_back_to_plain_decoding_while_acceptance_is_low(target):
    proposer = WrongProposer()
    config = RunConfig(max_new_tokens=40, k=3, fallback_threshold=0.3, fallback_window=2, fallback_rounds=5)
    rounds = list(speculate(target, proposer, PROMPTS[0], config, GREEDY))
    modes = [r.mode for r in rounds]
    assert FALLBACK in modes
    first = modes.index(FALLBACK)
    assert modes[first:first + 5] == [FALLBACK] * 5 and modes[first + 5] != FALLBACK  # speculation retried
    assert output(rounds) == output(run(target, "baseline", PROMPTS[0]))


class FailingProposer(Proposer):
    name = "flaky"

    def __init__(self, fail_at: int):
        self.fail_at, self.calls = fail_at, 0

    def propose(self, ids: list[int], k: int) -> Tree:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("simulated fault")
        return Tree.chain([ids[-1]] * k)


def test_a_failing_proposer_finishes_with_plain_decoding(target):
    rounds, plain = run(target, FailingProposer(fail_at=3), PROMPTS[0]), run(target, "baseline", PROMPTS[0])
    assert output(rounds) == output(plain)
    assert "".join(r.text for r in rounds) == "".join(r.text for r in plain)  # nothing streamed lost or repeated
    failed = [r for r in rounds if r.note and "simulated fault" in r.note]
    assert failed and all(r.mode == FALLBACK for r in rounds[failed[0].index:])


@pytest.mark.parametrize("bad, message", [
    (dict(prompt="  "), "prompt is empty"),
    (dict(run=RunConfig(max_new_tokens=0)), "max_new_tokens"),
    (dict(run=RunConfig(max_new_tokens=600)), "context"),
    (dict(run=RunConfig(k=0)), "k must be"),
    (dict(run=RunConfig(k=MAX_K + 1)), "k must be"),
    (dict(sampling=SamplingConfig(temperature=-1)), "temperature"),
    (dict(sampling=SamplingConfig(temperature=1, top_p=0)), "top_p"),
    (dict(method="nope"), "unknown method 'nope'"),
    (dict(method="draft"), "needs a draft model"),
])
def test_bad_input_is_refused_before_anything_runs(target, bad, message):
    args = dict(method="baseline", prompt="hello", run=RunConfig(max_new_tokens=8), sampling=GREEDY) | bad
    with pytest.raises(ValueError, match=message):
        generate(target, args["method"], args["prompt"], args["run"], args["sampling"])


def test_a_draft_with_another_tokenizer_is_refused(target):
    other = wrap("tiny-other-tokenizer", tiny_llama(3, layers=1), TinyTokenizer(shift=1))
    with pytest.raises(ValueError, match="maps .* tokens to other ids"):
        make_proposer("draft", target, GREEDY, draft=other)
    smaller = wrap("tiny-small-vocab", tiny_llama(3, layers=1, vocab=64), TinyTokenizer(vocab_size=64))
    with pytest.raises(ValueError, match="vocabulary of 64"):
        make_proposer("draft", target, GREEDY, draft=smaller)


def test_ngram_lookup_prefers_the_longest_most_recent_match_and_continues_repeats():
    import numpy as np

    from specviz.methods.ngram import lookup

    assert lookup(np.array([4, 1, 2, 7, 1, 2, 8, 5, 1, 2]), 2, 3, 1) == [8, 5]  # most recent "1 2"
    assert lookup(np.array([9, 1, 2, 3, 6, 2, 3, 7, 1, 2, 3]), 3, 3, 1) == [6, 2, 3]  # "1 2 3" beats "2 3"
    assert lookup(np.array([7, 8, 7, 8, 7, 8]), 5, 3, 1) == [7, 8, 7, 8, 7]  # a repeat, continued
    assert lookup(np.array([1, 2, 3, 4]), 4, 3, 1) == []
    assert lookup(np.array([5, 6, 1, 5]), 2, 3, 2) == []  # only a 1-token match, below min_ngram


def test_ngram_guess_length_grows_with_the_match():
    import numpy as np

    from specviz.methods.ngram import NgramOptions, NgramProposer, lookup

    text = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 20, 21, 1, 2, 3, 4, 5, 6])
    assert lookup(text, 8, 8, 2, scaled=True) == [7, 8, 9, 10, 11, 12, 20, 21]  # a 6-gram: copying, guess 8
    assert lookup(text, 4, 8, 2, scaled=True) == [7, 8, 9, 10]  # ... but never more than k
    assert lookup(np.array([9, 1, 2, 3, 6, 2, 3]), 8, 8, 2, scaled=True) == [6, 2]  # a 2-gram: guess 2
    assert lookup(np.array([9, 1, 2, 3, 6, 2, 3]), 8, 8, 2) == [6, 2, 3, 6, 2, 3, 6, 2]  # unscaled: k
    proposer = NgramProposer(NgramOptions())
    assert proposer.propose([5, 1, 7, 1], 4).tokens == []  # a 1-gram match is not enough by default
    assert NgramProposer(NgramOptions(min_ngram=1, scaled=False)).propose([5, 1, 7, 1], 4).tokens == [7, 1, 7, 1]


def test_thin_head_matches_the_plain_lm_head_and_installs_only_where_it_pays():
    from specviz import thin

    model = tiny_llama(0, layers=1, dtype=torch.float32)
    head = model.get_output_embeddings()
    assert thin.install(model) and isinstance(model.get_output_embeddings(), thin.ThinHead)
    fast = model.get_output_embeddings()
    assert fast.weight is head.weight  # the tied weight is shared, not copied
    with torch.inference_mode():
        for rows in (1, 3, 4, 9, 24, 30):
            x = torch.randn(1, rows, head.in_features, device=head.weight.device)
            torch.testing.assert_close(fast(x), torch.nn.functional.linear(x, head.weight), rtol=1e-5, atol=1e-5)
    assert not thin.install(tiny_llama(0, layers=1))  # float64: left alone


def test_the_preallocated_cache_gives_the_same_logits_and_grows_past_its_capacity(target):
    """Buffered layers (no torch.cat per forward) == transformers' DynamicCache, through crops, tree
    gathers and a forward that overflows the buffer."""
    from specviz.verify import TargetSession

    prompt = [1, 8, 9, 10, 11, 12]
    tree = Tree(tokens=[20, 21, 22, 23], parents=[-1, -1, 0, 1])
    plain, buffered = TargetSession(target.model), TargetSession(target.model, capacity=8)
    with torch.inference_mode():
        for session in (plain, buffered):
            session.prefill(prompt)
        for step in range(6):  # trees, then chains: the buffered run outgrows its 8 slots
            current = tree if step % 2 == 0 else Tree.chain([30 + step, 31 + step])
            root = prompt[-1] if step == 0 else 40 + step
            logits = [s.forward_tree(root, current).logits for s in (plain, buffered)]
            torch.testing.assert_close(logits[0], logits[1], rtol=1e-12, atol=1e-12)
            keep = [0, 2, 4] if step % 2 == 0 else [0, 1]  # a tree path (gather), a chain prefix (crop)
            for s in (plain, buffered):
                s._keep(s.past_len - len(current) - 1, keep)
            assert plain.past_len == buffered.past_len
            for a, b in zip(plain.cache.layers, buffered.cache.layers):
                assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    assert type(buffered.cache.layers[0]).__name__ == "BufferedLayer"
    assert buffered.cache.layers[0].buffers[0].shape[-2] > 8  # it grew


def test_tree_sizes_default_by_device(target):
    from specviz.methods import TREE_NODES

    eagle = make_proposer("eagle", target, GREEDY, head=tiny_eagle(0))
    medusa = make_proposer("medusa", target, GREEDY, heads=tiny_medusa(0))
    device = target.device.type
    assert eagle.options.nodes == TREE_NODES["eagle"][device] and len(medusa.choices) == TREE_NODES["medusa"][device]
    draft = make_proposer("draft", target, GREEDY, draft=target)
    assert draft.nodes == TREE_NODES["draft"][device] and TREE_NODES["draft"]["cpu"] == 1  # a chain on a CPU
    assert TREE_NODES["eagle"]["cpu"] < TREE_NODES["eagle"]["cuda"]  # a CPU pays for every verified token
    rounds = run(target, "eagle", PROMPTS[0], k=8, head=tiny_eagle(0), nodes=3)
    assert max(len(r.tokens) for r in rounds) <= 3 and any(len(r.tokens) for r in rounds)


def test_the_draft_stops_guessing_when_unsure(target, draft_target):
    sure = make_proposer("draft", target, GREEDY, draft=draft_target, confidence=0.0)
    unsure = make_proposer("draft", target, GREEDY, draft=draft_target, confidence=0.999)
    ids = [1, 5, 9, 14, 3]
    full, short = sure.propose(ids, 6), unsure.propose(ids, 6)
    assert len(full) == 6 and 1 <= len(short) < 6
    assert short.tokens == full.tokens[: len(short)]  # the same guesses, cut after the first unsure one
    assert all(p >= 0.999 for p in short.draft_probs[:-1]) and short.draft_probs[-1] < 0.999
    with pytest.raises(ValueError, match="confidence must be in"):
        make_proposer("draft", target, GREEDY, draft=draft_target, confidence=1.5)


@pytest.mark.parametrize("k", [1, 3, 8])
def test_a_draft_tree_is_lossless_and_keeps_more_than_its_chain(target, draft_target, k):
    chain, tree = [], []
    for prompt in PROMPTS:
        tree_rounds = run(target, "draft", prompt, k=k, draft=draft_target, nodes=24)
        assert output(tree_rounds) == output(run(target, "baseline", prompt)), prompt
        assert max(len(r.tokens) for r in tree_rounds) <= 24
        tree += tree_rounds
        chain += run(target, "draft", prompt, k=k, draft=draft_target, confidence=0.0)
    if k > 1:
        assert any(not Tree(r.tokens, r.parents).is_chain for r in tree)
        assert summarize(tree)["mean_accepted_tokens"] > summarize(chain)["mean_accepted_tokens"]


def test_draft_tree_nodes_carry_the_drafts_own_probabilities(target, draft_target):
    """Each node's probability is the draft's, run plainly on the committed tokens plus the node's path (so the
    tree's mask and positions are right), and the tree's slots leave the draft's cache afterwards."""
    proposer = make_proposer("draft", target, GREEDY, draft=draft_target, nodes=12, top_k=3)
    ids = [1, 5, 9, 14, 3, 22]
    tree = proposer.propose(ids, 4)
    assert len(tree) == 12 and not tree.is_chain and max(tree.depths()) > 1
    assert proposer.cache.get_seq_length() == len(ids) == len(proposer.seen)
    for node, token in enumerate(tree.tokens):
        path, parent = [], tree.parents[node]
        while parent != -1:
            path.insert(0, tree.tokens[parent])
            parent = tree.parents[parent]
        with torch.no_grad():
            logits = draft_target.model(torch.tensor([ids + path])).logits[0, -1].float()
        assert tree.draft_probs[node] == pytest.approx(float(torch.softmax(logits, -1)[token]), abs=1e-4)
    later = ids + [tree.tokens[0], 40]  # a round later, as if the first guess was accepted and 40 the bonus
    fresh = make_proposer("draft", target, GREEDY, draft=draft_target, nodes=12, top_k=3)
    assert proposer.propose(later, 4).tokens == fresh.propose(later, 4).tokens


def test_a_draft_tree_samples_with_point_masses(target, draft_target):
    sampling = SamplingConfig(temperature=0.8, seed=3)
    rounds = run(target, "draft", PROMPTS[1], k=3, sampling=sampling, draft=draft_target, nodes=10)
    assert rounds and not any(r.draft_sampled for r in rounds if r.tokens)  # top-k picks, verified as point masses
    assert output(rounds) == output(run(target, "draft", PROMPTS[1], k=3, sampling=sampling, draft=draft_target,
                                        nodes=10))  # seeded
    with pytest.raises(ValueError, match="nodes and top_k"):
        make_proposer("draft", target, GREEDY, draft=draft_target, nodes=-2)


def test_typical_acceptance_runs_through_the_engine_and_keeps_what_passes(target, draft_target):
    """Every method verifies with Medusa's typical rule when asked (sampling only): each kept guess beat its
    recorded threshold, every rejected child of a kept node fell under it or lost to a longer path, and the
    records say so; at temperature 0 the option changes nothing."""
    hot = SamplingConfig(temperature=0.9, seed=3, typical=True)
    for name in METHODS:
        options = method_options(name, draft_target)
        rounds = run(target, name, PROMPTS[1], sampling=hot, **options)
        assert any(r.n_proposed for r in rounds) or name == "baseline", name
        for r in rounds:  # a round that guessed nothing is plain sampling, as in the baseline
            assert (r.thresholds is None) == (r.n_proposed == 0), (name, r.index)
            assert r.n_proposed == 0 or len(r.thresholds) == r.n_proposed
            assert all(r.target_probs[i] > r.thresholds[i] for i in r.accepted_path), (name, r.index)
            assert r.bonus_source == "target"
        assert output(run(target, name, PROMPTS[1], sampling=SamplingConfig(typical=True), **options)) == \
            output(run(target, "baseline", PROMPTS[1])), name
    exact = run(target, "draft", PROMPTS[1], sampling=replace(hot, typical=False), draft=draft_target)
    assert all(r.thresholds is None for r in exact)
    assert output(run(target, "baseline", PROMPTS[1], sampling=hot)) == \
        output(run(target, "baseline", PROMPTS[1], sampling=replace(hot, typical=False)))  # the baseline stays exact
