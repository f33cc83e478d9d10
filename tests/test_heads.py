"""Medusa / EAGLE heads on tiny random targets: the draft tree is what the head computes, the public
checkpoint layouts load back to the same proposals, and weights refuse a target they were not made for."""
from __future__ import annotations

import json

import pytest
import torch

from conftest import TINY_VOCAB, tiny_eagle, tiny_medusa, tiny_target
from specviz.assets import WrongTarget, signature
from specviz.config import RunConfig, SamplingConfig
from specviz.engine import speculate
from specviz.methods import make_proposer
from specviz.methods.eagle import EagleProposer, TreeOptions, load_eagle, save_eagle
from specviz.methods.medusa import MedusaHeads, MedusaProposer, MedusaWeights, load_medusa, save_medusa, sparse_tree
from specviz.tree import Tree

PROMPT = [1, 5, 7, 9, 11, 5, 7, 30, 31]
GREEDY = SamplingConfig()


def trees(target, proposer, max_new_tokens=24, k=4, sampling=GREEDY):
    rounds = list(speculate(target, proposer, PROMPT, RunConfig(max_new_tokens=max_new_tokens, k=k), sampling))
    return [(r.tokens, r.parents) for r in rounds]


def test_sparse_tree_is_connected_and_prefers_likely_paths():
    accuracy = [[0.7, 0.2, 0.1], [0.5, 0.2, 0.1], [0.4, 0.1, 0.05]]
    choices = sparse_tree(accuracy, 10)
    assert len(choices) == 10 and len(set(choices)) == 10
    assert all(c[:-1] in choices or len(c) == 1 for c in choices)  # every parent is in the tree
    assert choices.index((0,)) < choices.index((0, 0)) < choices.index((0, 0, 0))
    assert (0, 0, 0) in choices and (2, 2) not in choices  # 0.14 beats 0.01


def test_medusa_tree_follows_each_heads_top_k():
    target, weights = tiny_target(0), tiny_medusa(0)
    proposer = MedusaProposer(weights, nodes=12)
    with torch.inference_mode():
        features = target.model(input_ids=torch.tensor([PROMPT[:-1]], device=target.device), output_hidden_states=True).hidden_states[-1][0]
        proposer.observe((features,))
        tree = proposer.propose(PROMPT, k=3)
        logits = weights.heads.logits(features[-1:], weights.lm_weight)[:, 0]  # (n_heads, V)
    ranks = logits.argsort(-1, descending=True)
    for node, path in enumerate(proposer.choices):
        assert tree.tokens[node] == int(ranks[len(path) - 1, path[-1]])
    assert max(tree.depths()) == 3 and len(tree) == 12


def test_medusa_runs_only_the_heads_its_tree_reaches():
    """Each head costs a full LM-head product: a tree of depth 1 (the CPU default's 2 nodes) runs head 0 alone."""
    target, weights = tiny_target(0), tiny_medusa(0)
    with torch.inference_mode():
        features = target.model(input_ids=torch.tensor([PROMPT[:-1]], device=target.device), output_hidden_states=True).hidden_states[-1][0]
    for nodes, reached in ((2, 1), (12, 3)):
        proposer = MedusaProposer(MedusaWeights(weights.heads, [[0.9, 0.5], [0.1, 0.05], [0.1, 0.05]], weights.lm_weight), nodes)
        calls = []
        hooks = [head[0].register_forward_hook(lambda *_, i=i: calls.append(i)) for i, head in enumerate(weights.heads)]
        proposer.observe((features,))
        with torch.inference_mode():
            tree = proposer.propose(PROMPT, k=3)
        for hook in hooks:
            hook.remove()
        assert max(tree.depths()) == reached and sorted(set(calls)) == list(range(reached))


def reference_draft(weights, target, ids, path):
    """The draft's probability of each token of `path` after ids, computed naively: the head over
    every position from scratch with a causal mask, then one draft step per path token."""
    head, embed = weights.head, weights.embed
    with torch.inference_mode():
        states = target.model(input_ids=torch.tensor([ids[:-1]], device=target.device), output_hidden_states=True).hidden_states
        feats = torch.cat([states[layer][0] for layer in weights.hidden_layers], -1)  # (P-1, W)
        if head.eagle3:
            feats = head.fc(feats)  # fused once; the draft's own outputs skip fc
        tokens, inputs = list(ids[1:]), list(feats)
        probs = []
        for token in path:
            n = len(tokens)
            out, _ = head.step(embed(torch.tensor(tokens, device=target.device))[None], torch.stack(inputs)[None],
                               torch.arange(n, device=target.device)[None], None,
                               torch.ones(n, n, dtype=torch.bool, device=target.device).tril()[None, None])
            logp = torch.log_softmax(head.logits(out[0, -1], weights.lm_rows), -1)
            draft_row = token if weights.draft_ids is None else int((weights.draft_ids == token).nonzero())
            probs.append(float(logp[draft_row].exp()))
            tokens.append(token)
            inputs.append(out[0, -1])
    return probs


@pytest.mark.parametrize("eagle3, head_layers", [(False, 1), (True, 1), (False, 2)])
def test_eagle_tree_equals_the_head_run_step_by_step(eagle3, head_layers):
    """Batched tree drafting (shared cache, tree masks, depth positions) == the naive computation,
    in the first round and after several rounds of incremental caching; also for a head of two layers
    (a cache per layer)."""
    layers = 4 if eagle3 else 2
    target, weights = tiny_target(0, layers), tiny_eagle(0, eagle3, layers, head_layers)
    seen = []

    class Spy(EagleProposer):
        def propose(self, ids, k):
            tree = super().propose(ids, k)
            seen.append((list(ids), tree))
            return tree

    trees(target, Spy(weights, TreeOptions(top_k=3, nodes=10)), max_new_tokens=16, k=4)
    for ids, tree in (seen[0], seen[-1]):
        assert len(tree) == 10 and max(tree.depths()) <= 4
        for node in range(len(tree)):
            path, walk = [], node
            while walk != -1:
                path.insert(0, walk)
                walk = tree.parents[walk]
            expected = reference_draft(weights, target, ids, [tree.tokens[i] for i in path])
            assert tree.draft_probs[node] == pytest.approx(expected[-1], rel=1e-6, abs=1e-9)


def test_eagle_and_medusa_are_lossless_when_sampling():
    """With top-k trees (point masses) the recursive rejection rule keeps sampling exact; here: seeded
    runs are reproducible and never break the engine (exactness itself is tested in test_sampling)."""
    hot = SamplingConfig(temperature=0.8, top_p=0.9, seed=3)
    target = tiny_target(0)
    for name, options in (("medusa", {"heads": tiny_medusa(0)}), ("eagle", {"head": tiny_eagle(0)})):
        first = trees(target, make_proposer(name, target, hot, **options), sampling=hot)
        assert first == trees(target, make_proposer(name, target, hot, **options), sampling=hot)


def medusa_v01_checkpoint(folder, target, n_heads=4, seed=1):
    """The layout of FasterDecoding's medusa_lm_head.pt: every head with its own LM head (v0.1)."""
    torch.manual_seed(seed)
    hidden = target.model.config.hidden_size
    heads = MedusaHeads(hidden, n_heads, n_layers=1, own_vocab=TINY_VOCAB).to(target.device, target.dtype)
    for head in heads:
        torch.nn.init.normal_(head[0].linear.weight, std=0.2)
        head[1].weight.data.copy_(target.model.lm_head.weight + 0.1 * torch.randn_like(head[1].weight))
    folder.mkdir()
    torch.save({k: v.clone() for k, v in heads.state_dict().items()}, folder / "medusa_lm_head.pt")
    (folder / "config.json").write_text(json.dumps({"medusa_num_heads": 2, "medusa_num_layers": 1}))  # wrong on purpose
    return heads


def test_medusa_public_layout_loads_with_its_head_count_from_the_keys(tmp_path):
    target = tiny_target(0)
    heads = medusa_v01_checkpoint(tmp_path / "medusa", target)
    assert sorted(heads.state_dict())[:3] == ["0.0.linear.bias", "0.0.linear.weight", "0.1.weight"]
    loaded = load_medusa(tmp_path / "medusa", target)
    assert loaded.n_heads == 4 and loaded.heads.own_vocab == TINY_VOCAB
    in_memory = MedusaWeights(heads.eval().requires_grad_(False), loaded.rank_accuracy, loaded.lm_weight)
    assert trees(target, MedusaProposer(loaded)) == trees(target, MedusaProposer(in_memory))


def test_medusa_own_layout_round_trips_and_refuses_another_target(tmp_path):
    target, weights = tiny_target(0), tiny_medusa(0)
    save_medusa(tmp_path / "ours", weights.heads, {"target": signature(target), "rank_accuracy": weights.rank_accuracy},
                dtype=torch.float64)
    loaded = load_medusa(tmp_path / "ours", target)
    assert trees(target, MedusaProposer(loaded)) == trees(target, MedusaProposer(weights))
    with pytest.raises(WrongTarget, match="trained for 'tiny-0'.*embedding weights differ"):
        load_medusa(tmp_path / "ours", tiny_target(1))


def eagle_checkpoint(folder, weights, *, rename_midlayer=False, with_embedding=False):
    """A checkpoint in the public layout, written from an in-memory head (card-less, like the hub's)."""
    head = weights.head
    state = {k: v.clone() for k, v in head.state_dict().items()}
    if rename_midlayer:
        state = {k.replace("midlayer.", "layers.0."): v for k, v in state.items()}
    if with_embedding:
        state["embed_tokens.weight"] = weights.embed.weight.clone()
    folder.mkdir()
    torch.save(state, folder / "pytorch_model.bin")
    config = head.config.to_dict()
    if head.eagle3:
        config["draft_vocab_size"] = len(head.d2t)
    (folder / "config.json").write_text(json.dumps(config))


@pytest.mark.parametrize("eagle3, rename, head_layers", [(False, False, 1), (True, False, 1), (True, True, 1),
                                                      (False, False, 2)])
def test_eagle_public_layouts_load_to_the_same_proposals(tmp_path, eagle3, rename, head_layers):
    layers = 4 if eagle3 else 2
    target, weights = tiny_target(0, layers), tiny_eagle(0, eagle3, layers, head_layers)
    eagle_checkpoint(tmp_path / "eagle", weights, rename_midlayer=rename, with_embedding=not eagle3)
    if head_layers == 2:  # EAGLE's own code: layers after the first have an input_layernorm; the config says 1
        keys = torch.load(tmp_path / "eagle" / "pytorch_model.bin").keys()
        assert "layers.1.input_layernorm.weight" in keys and "layers.0.input_layernorm.weight" not in keys
        config = json.loads((tmp_path / "eagle" / "config.json").read_text())
        (tmp_path / "eagle" / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 1}))
    loaded = load_eagle(tmp_path / "eagle", target)
    assert loaded.head.eagle3 == eagle3 and loaded.hidden_layers == weights.hidden_layers
    assert len(loaded.head.stack) == head_layers
    if eagle3:
        assert loaded.hidden_layers == (2, 2, 1)  # entering layers 2, L//2 and L-3 of a 4-layer target
        assert torch.equal(loaded.draft_ids.cpu(), torch.arange(0, TINY_VOCAB, 2))
    assert trees(target, EagleProposer(loaded)) == trees(target, EagleProposer(weights))


def test_eagle_own_layout_round_trips_and_refuses_another_target(tmp_path):
    from specviz.methods.eagle import bind, new_head

    target = tiny_target(0)
    weights = bind(new_head(target, draft_ids=torch.arange(3, 60), seed=4), target)
    save_eagle(tmp_path / "ours", weights.head, {"target": signature(target)}, dtype=torch.float64)
    loaded = load_eagle(tmp_path / "ours", target)
    tree_rounds = trees(target, EagleProposer(loaded, TreeOptions(context_rows=False)))
    assert tree_rounds == trees(target, EagleProposer(weights, TreeOptions(context_rows=False)))
    assert all(3 <= t < 60 for tokens, _ in tree_rounds for t in tokens)  # only draft-vocabulary ids
    assert trees(target, EagleProposer(loaded)) == trees(target, EagleProposer(weights))
    with pytest.raises(WrongTarget, match="trained for 'tiny-0'"):
        load_eagle(tmp_path / "ours", tiny_target(1))
    eagle_checkpoint(tmp_path / "public", weights)  # no card: the shapes are checked instead
    with pytest.raises(ValueError, match="features of width 64 does not fit target 'other'"):
        load_eagle(tmp_path / "public", target.__class__("other", _wide_model(), target.tokenizer))


def test_eagle_also_scores_the_context_tokens_its_draft_vocabulary_lacks():
    """With context_rows, a head with a reduced vocabulary drafts as a head whose vocabulary also holds every
    token of the context: the same rows, the same log-probabilities, the same tree."""
    from specviz.methods.eagle import bind, new_head

    target = tiny_target(0)
    vocab = torch.arange(50, 58)  # none of the prompt's tokens
    union = torch.tensor(sorted(set(vocab.tolist()) | set(PROMPT)))
    head = new_head(target, draft_ids=vocab, seed=4)
    wide = new_head(target, draft_ids=union, seed=4)
    wide.load_state_dict({**head.state_dict(), "d2t": wide.d2t})
    with torch.inference_mode():
        features = target.model(input_ids=torch.tensor([PROMPT[:-1]], device=target.device),
                                output_hidden_states=True).hidden_states[-1][0]

    def tree(weights, options):
        proposer = EagleProposer(weights, options)
        proposer.observe((features,))
        with torch.inference_mode():
            return proposer.propose(PROMPT, k=3)

    options = TreeOptions(top_k=3, nodes=10)
    widened, plain = tree(bind(head, target), options), tree(bind(head, target), TreeOptions(top_k=3, nodes=10, context_rows=False))
    reference = tree(bind(wide, target), TreeOptions(top_k=3, nodes=10, context_rows=False))
    assert (widened.tokens, widened.parents) == (reference.tokens, reference.parents)
    assert widened.draft_probs == pytest.approx(reference.draft_probs)
    assert set(widened.tokens) & set(PROMPT) and not set(plain.tokens) & set(PROMPT)

    from specviz.methods.base import Baseline

    def text(proposer):  # a whole run: the rows grow with the generated tokens, and the text stays the target's
        rounds = list(speculate(target, proposer, PROMPT, RunConfig(max_new_tokens=24, k=4), GREEDY))
        return [t for r in rounds for t in r.emitted]

    proposer = EagleProposer(bind(head, target), options)
    assert text(proposer) == text(Baseline())
    assert len(proposer.context_rows) > len(set(PROMPT))  # tokens generated outside the vocabulary were added


def _wide_model():
    from conftest import tiny_llama

    return tiny_llama(5, layers=1, hidden=32)


def test_medusa_refuses_heads_of_another_width(tmp_path):
    medusa_v01_checkpoint(tmp_path / "medusa", tiny_target(0))
    target = tiny_target(0).__class__("narrow", _wide_model(), tiny_target(0).tokenizer)
    with pytest.raises(ValueError, match="width 64 do not fit"):
        load_medusa(tmp_path / "medusa", target)


def test_shipped_weights_refuse_a_tiny_target():
    target = tiny_target(0)
    for name in ("medusa", "eagle", "draft"):
        with pytest.raises(ValueError):
            make_proposer(name, target, GREEDY)


def test_trees_are_valid_tree_objects():
    target = tiny_target(0)
    for proposer in (MedusaProposer(tiny_medusa(0)), EagleProposer(tiny_eagle(0))):
        for tokens, parents in trees(target, proposer, k=5):
            tree = Tree(tokens, parents)
            assert max(tree.depths()) <= 5
            siblings = tree.children()
            assert all(len({tokens[c] for c in kids}) == len(kids) for kids in siblings.values())


def test_graft_shares_existing_nodes_and_eagle_with_lookup_stays_lossless():
    from specviz.methods.ngram import graft

    tree = graft(Tree([5, 6, 7], [-1, -1, 0], [0.5, 0.2, 0.4]), [5, 7, 9])
    assert tree.tokens == [5, 6, 7, 9] and tree.parents == [-1, -1, 0, 2] and tree.draft_probs[3] is None
    target = tiny_target(0)
    prompt = [1, 40, 41, 42, 43, 40, 41, 42, 43, 40]
    plain = list(speculate(target, make_proposer("baseline", target), prompt, RunConfig(max_new_tokens=30), GREEDY))
    hybrid = list(speculate(target, make_proposer("eagle", target, head=tiny_eagle(0), lookup=3), prompt,
                            RunConfig(max_new_tokens=30), GREEDY))
    assert [t for r in hybrid for t in r.emitted] == [t for r in plain for t in r.emitted]
