"""The training pieces on a tiny random target: feature cache, losses that go down, resumable loop,
and trained heads that the engine then accepts more often than untrained ones."""
from __future__ import annotations

from copy import deepcopy
from functools import partial

import pytest
import torch

from conftest import tiny_target
from specviz.config import RunConfig, SamplingConfig
from specviz.engine import speculate
from specviz.events import summarize
from specviz.methods.base import Baseline
from specviz.methods.draft import DraftProposer
from specviz.methods.eagle import EagleProposer, bind, new_head
from specviz.methods.medusa import MedusaHeads, MedusaProposer, MedusaWeights, lm_weight_of
from specviz.models import wrap
from specviz.train import features
from specviz.train.data import held_out
from specviz.train.draft import build_draft, draft_loss, trainable_state
from specviz.train.heads import (draft_vocabulary, eagle_loss, lm_rows, medusa_batches, medusa_loss,
                                 medusa_rank_accuracy, sequence_batches, step_mask)
from specviz.train.loop import LoopConfig, plot, train

PROMPTS = [[1] + [3 + (7 * i + 5 * j) % 90 for j in range(6)] for i in range(24)]


def greedy_rows(target) -> list[dict]:
    """The tiny target's own greedy continuations of PROMPTS, as training sequences."""
    rows = []
    with torch.inference_mode():
        for i, prompt in enumerate(PROMPTS):
            ids = torch.tensor([prompt])
            out = target.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=40,
                                        pad_token_id=0, eos_token_id=None)
            rows.append({"id": f"distill:{i}", "source": "tiny", "tokens": out[0].tolist(), "answer_start": len(prompt)})
    return rows


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    """The tiny target's own greedy continuations, featurised once."""
    target = tiny_target(0)
    rows = greedy_rows(target)
    folder = tmp_path_factory.mktemp("features")
    assert features.extract(target, rows, folder, batch_tokens=200, shard_tokens=300) == sum(len(r["tokens"]) for r in rows)
    assert features.extract(target, rows, folder) == 0  # resumable: nothing new to do
    return target, folder


def test_feature_cache_holds_the_targets_greedy_tokens(cached):
    target, folder = cached
    train_feats = features.load(folder)
    assert len(list(folder.glob("shard-*.safetensors"))) > 1
    for a, b, answer in train_feats.spans:
        assert torch.equal(train_feats.top1[answer - 1:b - 1], train_feats.tokens[answer:b])  # greedy answers
    assert not any(held_out(i) for i in train_feats.ids)


def test_step_mask_matches_the_draft_tree():
    """Unrolled step 2 at position 5 sees true keys 0..3, its step-1 ancestor at 4 and itself."""
    mask = step_mask(2, 8)
    assert mask.shape == (8, 24)
    assert mask[5, :8].nonzero().flatten().tolist() == [0, 1, 2, 3]
    assert mask[5, 8:16].nonzero().flatten().tolist() == [4]
    assert mask[5, 16:].nonzero().flatten().tolist() == [5]


def test_the_learning_rate_anneals_along_whichever_budget_ends_first():
    from specviz.train.loop import schedule

    steps_only = LoopConfig(steps=1000, warmup=100)
    assert schedule(0, steps_only) == pytest.approx(0.01) and schedule(99, steps_only) == pytest.approx(1.0)
    assert schedule(100, steps_only, minutes=50) == pytest.approx(1.0)  # no time limit: steps alone
    assert schedule(1000, steps_only) == pytest.approx(0.1)
    timed = LoopConfig(steps=1000, warmup=100, minutes=20)
    assert schedule(100, timed, minutes=10) == pytest.approx(0.55)  # half the time spent: half way down
    assert schedule(100, timed, minutes=20) == pytest.approx(0.1) == schedule(1000, timed, minutes=1)
    assert schedule(550, timed, minutes=1) == pytest.approx(0.55)  # the steps further along
    assert schedule(50, timed, minutes=30) == pytest.approx(0.51)  # warmup first


def _speculate(target, proposer):
    rounds = list(speculate(target, proposer, PROMPTS[3], RunConfig(max_new_tokens=40, k=4), SamplingConfig()))
    return summarize(rounds)["mean_accepted_tokens"], [t for r in rounds for t in r.emitted]


def test_eagle_loss_can_weigh_the_answers_that_drafting_sees(cached):
    """Batches mark the answer tokens; a prompt weight of 0 counts only positions whose root is an answer token."""
    target, folder = cached
    feats = features.load(folder)
    draft_ids = draft_vocabulary(feats, 64, target.vocab_size)
    head = new_head(target, draft_ids=draft_ids).double()
    embed, rows = target.model.get_input_embeddings(), lm_rows(target, draft_ids).double()
    loss = partial(eagle_loss, head, embed, rows, draft_ids, steps=2)
    batch = next(sequence_batches(feats, 256, seed=0)(0))
    starts = {tuple(feats.tokens[a:b].tolist()): s - a for a, b, s in feats.spans}  # each sequence's answer start
    for row in range(len(batch["tokens"])):
        length = int(batch["valid"][row].sum())
        start = starts[tuple(batch["tokens"][row, :length].tolist())]
        assert batch["answer"][row].nonzero().flatten().tolist() == list(range(start, length))
    weighted, metrics = loss(batch, prompt_weight=0.0)
    masked, masked_metrics = loss({**batch, "valid": batch["valid"] & batch["answer"]}, prompt_weight=1.0)
    assert float(weighted.detach()) != pytest.approx(float(loss(batch)[0].detach()))  # the prompt counted before
    assert float(weighted.detach()) == pytest.approx(float(masked.detach()))
    assert metrics["ans0"] == pytest.approx(masked_metrics["acc0"])
    # step 0 by hand: the head's top guess against the target's, counted on answer positions only
    n = batch["tokens"].shape[1] - 1
    with torch.no_grad():
        out, _ = head.step(embed(batch["tokens"][:, 1:]).double(), batch["f"][:, :-1].double(), torch.arange(n)[None],
                           None, step_mask(0, n)[None, None])
    hits = draft_ids[(out @ rows.T).argmax(-1)] == batch["top1"][:, 1:]
    on_answer = batch["answer"][:, 1:] & batch["valid"][:, 1:]
    assert metrics["ans0"] == pytest.approx(float(hits[on_answer].float().mean()))


def test_eagle_training_lowers_the_loss_resumes_and_helps(cached, tmp_path):
    target, folder = cached
    feats = features.load(folder)
    draft_ids = draft_vocabulary(feats, 64, target.vocab_size)
    head = new_head(target, draft_ids=draft_ids)
    loss = partial(eagle_loss, head, target.model.get_input_embeddings(), lm_rows(target, draft_ids).double(),
                   draft_ids, steps=2, noise=0.05)
    batches = sequence_batches(feats, 256, seed=0)
    before = float(loss(next(batches(0)))[0].detach())
    config = LoopConfig(steps=30, lr=3e-3, warmup=3, save_every=15, eval_every=15)
    state = train(head, loss, batches, lambda: {}, LoopConfig(**{**config.__dict__, "steps": 15}), tmp_path, "eagle")
    assert state["step"] == 15
    state = train(head, loss, batches, lambda: {}, config, tmp_path, "eagle")  # resumes at 15
    assert state["step"] == 30 and len(state["history"]) == 30
    assert float(loss(next(batches(0)))[0].detach()) < before
    plot(state, tmp_path / "loss.png", "eagle")
    assert (tmp_path / "loss.png").stat().st_size > 1000
    trained, text = _speculate(target, EagleProposer(bind(head, target)))
    untrained, same = _speculate(target, EagleProposer(bind(new_head(target, draft_ids=draft_ids), target)))
    assert text == same and trained > untrained


def _medusa(cached, n_heads: int):
    """Fresh Medusa heads on the cached features, with their loss and batches (full vocabulary, float64)."""
    target, folder = cached
    feats = features.load(folder)
    draft_ids = torch.arange(target.vocab_size)
    heads = MedusaHeads(target.model.config.hidden_size, n_heads).double()
    loss = partial(medusa_loss, heads, lm_rows(target, draft_ids).double(), draft_ids)
    return target, feats, heads, loss, medusa_batches(feats, n_heads, 128, seed=0)


def test_medusa_training_lowers_the_loss_and_measures_rank_accuracy(cached, tmp_path):
    target, feats, heads, loss, batches = _medusa(cached, 3)
    before = float(loss(next(batches(0)))[0].detach())
    train(heads, loss, batches, lambda: {}, LoopConfig(steps=40, lr=1e-2, warmup=4), tmp_path, "medusa")
    assert float(loss(next(batches(0)))[0].detach()) < before
    accuracy = medusa_rank_accuracy(heads, lm_weight_of(target), feats, top_k=4)
    assert len(accuracy) == 3 and all(len(row) == 4 and 0 <= min(row) <= max(row) <= 1 for row in accuracy)
    weights = MedusaWeights(heads.eval().requires_grad_(False), accuracy, lm_weight_of(target))
    tau, text = _speculate(target, MedusaProposer(weights, nodes=16))
    assert tau > 1.0 and text == _speculate(target, MedusaProposer(weights, nodes=1))[1]


def test_medusa_counts_where_drafting_would_use_a_guess(cached):
    """greedy[i] at t: x_{t+1} .. x_{t+1+i} are the target's own top-1 choices (by hand); in the target's own answers
    that is every answer position; an off-greedy weight of 0 is the loss over those positions alone."""
    target, feats, heads, loss, _ = _medusa(cached, 3)
    answer_pos = torch.cat([torch.arange(s - 1, b - 1) for a, b, s in feats.spans])  # x_{t+1} in the answer
    human_like = features.Features(feats.tokens.clone(), feats.top1, feats.feats, feats.spans, feats.ids)
    human_like.tokens[answer_pos[::3] + 1] += 1  # every third answer token is not the target's choice any more
    for data, all_on_answers in ((feats, True), (human_like, False)):
        batch = next(medusa_batches(data, 3, 256, seed=0)(0))
        t = batch["t"]
        assert torch.equal(batch["f"], data.feats[-1][t].float())
        for i in range(3):
            for n, p in enumerate(t.tolist()):
                end = next(b for a, b, _ in data.spans if a <= p < b)
                expected = p + 1 + i < end and all(int(data.top1[p + j]) == int(data.tokens[p + 1 + j]) for j in range(i + 1))
                assert bool(batch["greedy"][i, n]) == expected
        on_answers = torch.isin(t, answer_pos)
        assert bool(batch["greedy"][0][on_answers & batch["valid"][0]].all()) == all_on_answers
    weighted, metrics = loss(batch, off_greedy_weight=0.0)
    masked, masked_metrics = loss({**batch, "valid": batch["greedy"]})
    assert float(weighted.detach()) == pytest.approx(float(masked.detach()))
    assert float(weighted.detach()) != pytest.approx(float(loss(batch)[0].detach()))
    assert metrics["greedy1"] == pytest.approx(masked_metrics["acc1"])


def test_init_grows_medusa_heads_by_blocks_that_start_as_the_identity(cached, tmp_path):
    """--layers 2 from one-block --init heads: the grown heads guess as before; training moves the new blocks;
    they save and load in the public layout; heads never shrink."""
    from argparse import Namespace

    from specviz.assets import signature
    from specviz.methods.medusa import load_medusa, save_medusa
    from specviz.train.__main__ import _medusa_heads, _previous

    target, feats, one, loss, batches = _medusa(cached, 3)
    train(one, loss, batches, lambda: {}, LoopConfig(steps=10, lr=1e-2, warmup=1), tmp_path / "w1", "medusa")
    save_medusa(tmp_path / "one", one, {"target": signature(target), "training": {"steps": 10}}, dtype=torch.float32)
    args = Namespace(work=tmp_path / "work", init=tmp_path / "one", layers=2, heads=3)
    grown = _medusa_heads(args, target, _previous(args, "medusa")).double()
    assert grown.n_layers == 2 and torch.equal(grown[1][0].linear.weight, one[1][0].linear.weight.float().double())
    f = feats.feats[-1][:50].double()
    assert torch.allclose(grown.hidden(f), one.hidden(f), atol=1e-5)  # only float32 rounding of the saved weights
    assert not torch.allclose(grown.hidden(f), f, atol=1e-3)  # and the trained first blocks do act

    ids = torch.arange(target.vocab_size)
    grown_loss = partial(medusa_loss, grown, lm_rows(target, ids).double(), ids)
    train(grown, grown_loss, batches, lambda: {}, LoopConfig(steps=5, lr=1e-2, warmup=1), tmp_path / "work", "medusa")
    assert float(grown[0][1].linear.weight.detach().abs().sum()) > 0
    save_medusa(tmp_path / "two", grown, {"target": signature(target)}, dtype=torch.float32)
    loaded = load_medusa(tmp_path / "two", target)
    assert loaded.heads.n_layers == 2
    assert torch.allclose(loaded.heads.hidden(f.to(target.dtype)), grown.hidden(f).to(target.dtype))

    with pytest.raises(SystemExit, match="the checkpoint in .* has 2"):
        _medusa_heads(Namespace(**{**vars(args), "layers": 3}), target, _previous(args, "medusa"))
    fresh = Namespace(**{**vars(args), "work": tmp_path / "w2", "init": tmp_path / "two", "layers": 1})
    with pytest.raises(SystemExit, match="heads only grow"):
        _medusa_heads(fresh, target, _previous(fresh, "medusa"))


def test_draft_is_an_ordinary_causal_lm_on_the_targets_embedding(cached, tmp_path):
    target, folder = cached
    feats = features.load(folder)
    draft_ids = torch.arange(target.vocab_size)
    with pytest.raises(ValueError, match="shared layers must be the target's first"):
        build_draft(target, [1, 0], shared=1)
    model = build_draft(target, [0, 1], shared=1).double()
    assert model.model.layers[0].self_attn.q_proj.weight.data_ptr() == target.model.model.layers[0].self_attn.q_proj.weight.data_ptr()
    with torch.no_grad():  # perturb the copied layer so that the draft starts imperfect
        for p in model.model.layers[1].parameters():
            p.add_(0.3 * torch.randn_like(p) * p.std())
    assert model.model.embed_tokens.weight is target.model.model.embed_tokens.weight  # shared, not copied
    loss = partial(draft_loss, model, lm_rows(target, draft_ids).double(), draft_ids)
    batches = sequence_batches(feats, 512, seed=0)
    before = float(loss(next(batches(0)))[0].detach())
    train(model, loss, batches, lambda: {}, LoopConfig(steps=20, lr=3e-3, warmup=2), tmp_path, "draft")
    assert float(loss(next(batches(0)))[0].detach()) < before
    assert not model.model.embed_tokens.weight.requires_grad and not model.model.layers[0].mlp.up_proj.weight.requires_grad
    assert sorted({k.split(".")[2] for k in trainable_state(model) if k.startswith("model.layers.")}) == ["1"]
    draft = wrap("tiny-draft", model, target.tokenizer)
    _, text = _speculate(target, DraftProposer(target, draft, SamplingConfig()))
    assert text == _speculate(target, Baseline())[1]


def test_a_resumed_eagle_keeps_its_checkpoints_draft_vocabulary(cached, tmp_path):
    """New data picks other draft rows; a resumed head must keep the rows its weights were trained for."""
    from argparse import Namespace

    from specviz.train.__main__ import _previous, _resumed_vocabulary
    from specviz.train.loop import _save

    target, folder = cached
    feats = features.load(folder)
    old = draft_vocabulary(feats, 64, target.vocab_size)
    new = torch.sort(torch.cat([old[:-8], torch.arange(target.vocab_size - 8, target.vocab_size)])).values
    assert not torch.equal(old, new)
    data, args = {}, Namespace(work=tmp_path, init=None)
    assert torch.equal(_resumed_vocabulary(_previous(args, "eagle").weights, new, data), new)  # nothing to resume
    head = new_head(target, draft_ids=old)
    _save(tmp_path / "eagle.ckpt", head, torch.optim.AdamW(head.parameters()), {"step": 1})
    assert torch.equal(_resumed_vocabulary(_previous(args, "eagle").weights, new, data), old)
    assert data["draft_vocab"] == 64


def test_the_loop_measures_where_a_run_starts_once(cached, tmp_path):
    """The held-out curve starts at the weights the run starts from (what --init gains is then read off one run);
    a resumed run does not measure its start again."""
    from argparse import Namespace

    from specviz.train.__main__ import _card

    target, _, heads, loss, batches = _medusa(cached, 2)
    fixed = next(batches(0))
    evaluate = lambda: {"loss": float(loss(fixed)[0].detach())}  # noqa: E731
    before = evaluate()["loss"]
    config = LoopConfig(steps=6, lr=1e-2, warmup=1, eval_every=3, save_every=3)
    state = train(heads, loss, batches, evaluate, config, tmp_path, "medusa")
    assert [e["step"] for e in state["evals"]] == [0, 3, 6]
    assert state["evals"][0]["loss"] == pytest.approx(before) and state["evals"][-1]["loss"] < before
    state = train(heads, loss, batches, evaluate, LoopConfig(**{**config.__dict__, "steps": 9}), tmp_path, "medusa")
    assert [e["step"] for e in state["evals"]] == [0, 3, 6, 9]
    args = Namespace(steps=9, lr=1e-2, seed=0, minutes=0, eval_every=3)
    card = _card("medusa", target, {}, state, args)
    assert card["heldout_start"] == state["evals"][0] and card["heldout"] == state["evals"][-1]


def test_init_continues_shipped_weights_and_counts_their_training(cached, tmp_path):
    """--init on a machine without the checkpoint: the shipped weights are copied in (the right target and
    architecture only), the draft vocabulary is theirs, and the card adds the steps they already had,
    also when the continued run is itself resumed."""
    from argparse import Namespace

    from specviz.assets import WrongTarget, signature
    from specviz.methods.eagle import save_eagle
    from specviz.methods.medusa import save_medusa
    from specviz.train.__main__ import _card, _previous, _resumed_vocabulary, _start_from
    from specviz.train.loop import _save

    target, folder = cached
    hidden = target.model.config.hidden_size
    shipped = MedusaHeads(hidden, 2)
    torch.nn.init.normal_(shipped[1][0].linear.weight)
    record = {"steps": 700, "seconds": 1767}
    save_medusa(tmp_path / "medusa", shipped, {"target": signature(target), "training": record}, dtype=torch.float32)
    args = Namespace(work=tmp_path / "work", init=tmp_path / "medusa", command="medusa", steps=10, lr=1e-3, seed=0,
                     minutes=0, eval_every=5)
    start = _previous(args, "medusa")
    assert start.before == record
    heads = MedusaHeads(hidden, 2)
    _start_from(heads, start, target, args.init)
    assert all(torch.equal(a, b) for a, b in zip(heads.state_dict().values(), shipped.state_dict().values()))
    with pytest.raises(SystemExit, match="do not fit"):
        _start_from(MedusaHeads(hidden, 3), start, target, args.init)  # another architecture
    with pytest.raises(WrongTarget):
        _start_from(MedusaHeads(hidden, 2), start, tiny_target(1), args.init)  # another target

    card = _card("medusa", target, {}, {"step": 30, "seconds": 40.4, "evals": []}, args, start.before)
    assert (card["training"]["steps"], card["training"]["seconds"]) == (730, 1807)
    assert card["training"]["this_run"] == {"steps": 30, "seconds": 40} and card["training"]["continues"] == record
    _save(args.work / "medusa.ckpt", heads, torch.optim.AdamW(heads.parameters()), {"step": 30})
    resumed = _previous(args, "medusa")  # the loop resumes the checkpoint; the shipped record is still counted
    assert resumed.card is None and resumed.before == record

    feats = features.load(folder)
    ids = draft_vocabulary(feats, 64, target.vocab_size)
    save_eagle(tmp_path / "eagle", new_head(target, draft_ids=ids), {"target": signature(target), "training": {}})
    start = _previous(Namespace(work=tmp_path / "work", init=tmp_path / "eagle"), "eagle")
    other = torch.sort(torch.cat([ids[:-8], torch.arange(target.vocab_size - 8, target.vocab_size)])).values
    assert torch.equal(_resumed_vocabulary(start.weights, other, {}), ids)
    with pytest.raises(SystemExit, match="no card.json"):
        _previous(Namespace(work=tmp_path / "w2", init=tmp_path / "work"), "eagle")


def test_distill_answers_only_the_chosen_sources_and_resumes(tmp_path, monkeypatch):
    import json

    from specviz.train import distill

    prompts = [{"id": f"{s}-{i}", "source": s, "prompt": f"say {s} {i}"} for i, s in enumerate(["gsm8k", "code", "t0"] * 3)]
    monkeypatch.setattr(distill, "all_prompts", lambda: prompts)
    monkeypatch.setattr("specviz.models.load_target", lambda **kw: tiny_target(0))
    out = tmp_path / "answers.jsonl"
    args = ["--out", str(out), "--batch", "2", "--max-new-tokens", "4", "--sources", "gsm8k,t0"]
    assert distill.main(args) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["id"] for r in rows) == sorted(p["id"] for p in prompts if p["source"] != "code")
    assert distill.main(args) == 0  # resumable: nothing left to answer
    assert len(out.read_text().splitlines()) == len(rows)
    with pytest.raises(SystemExit):
        distill.main(["--out", str(out), "--sources", "gsm8k,cooking"])


def test_card_records_every_bench_row_of_a_method(tmp_path, monkeypatch):
    import json

    from specviz.train import __main__ as cli

    monkeypatch.setattr(cli, "ASSETS", tmp_path)
    (tmp_path / "eagle").mkdir()
    (tmp_path / "eagle" / "card.json").write_text(json.dumps({"method": "eagle", "bench_note": "old"}))
    row = lambda tau, speedup: {"mean_accepted_tokens": tau, "identical_to_baseline": True, "speedup": speedup,  # noqa: E731
                                "by_category": {"math": {"mean_accepted_tokens": tau + 0.5}}}
    report = {"prompts": "demos/bench_prompts.jsonl", "max_new_tokens": 100, "temperature": 0.0, "k": 4,
              "device": "cpu", "methods": {"baseline": row(1.0, 1.0), "eagle": row(1.41, 1.02),
                                           "eagle:nodes=48": row(1.85, 0.54),
                                           "eagle:weights=/elsewhere:nodes=48": row(2.0, 0.5)}}  # not the shipped head
    (tmp_path / "bench.json").write_text(json.dumps(report))
    assert cli.main(["card", str(tmp_path / "bench.json")]) == 0
    card = json.loads((tmp_path / "eagle" / "card.json").read_text())
    assert [(r["method"], r["tau"], r["tau_by_category"]["math"]) for r in card["bench"]["runs"]] == [
        ("eagle", 1.41, 1.91), ("eagle:nodes=48", 1.85, 2.35)]
    assert "bench_note" not in card and card["bench"]["max_new_tokens"] == 100
    assert not (tmp_path / "baseline").exists()


def test_an_eagle3_head_trains_on_fused_features_and_drafts_losslessly(tmp_path):
    """EAGLE-3: fused low/middle/high features in, the last layer only as the teacher; own norm and LM head."""
    from specviz.methods.eagle import feature_layers

    target = tiny_target(0, layers=4)
    layers = feature_layers(4, True) + (-1,)
    features.extract(target, greedy_rows(target), tmp_path / "f3", layers=layers, batch_tokens=400)
    feats = features.load(tmp_path / "f3", layers)
    draft_ids = draft_vocabulary(feats, 64, target.vocab_size)
    head = new_head(target, eagle3=True, draft_ids=draft_ids)
    assert torch.equal(head.lm_head.weight, target.model.lm_head.weight[draft_ids])  # starts as the target's rows
    loss = partial(eagle_loss, head, target.model.get_input_embeddings(), lm_rows(target, draft_ids).double(),
                   draft_ids, steps=2)
    batches = sequence_batches(feats, 256, seed=0, layers=layers)
    assert next(batches(0))["f"].shape[-1] == 4 * target.model.config.hidden_size
    before = float(loss(next(batches(0)))[0].detach())
    train(head, loss, batches, lambda: {}, LoopConfig(steps=40, lr=3e-3, warmup=4), tmp_path, "eagle3")
    assert float(loss(next(batches(0)))[0].detach()) < before
    trained, text = _speculate(target, EagleProposer(bind(head, target)))
    untrained, same = _speculate(target, EagleProposer(bind(new_head(target, eagle3=True, draft_ids=draft_ids), target)))
    baseline = _speculate(target, Baseline())[1]
    assert text == same == baseline and trained > untrained


def test_init_grows_an_eagle_head_by_layers_that_start_as_the_identity(cached, tmp_path):
    """--head-layers 2 from a one-layer --init: the grown head drafts exactly as the one it grew from, then
    training uses the new layer; it is saved and loaded in EAGLE's layout; a head never shrinks."""
    from argparse import Namespace

    from specviz.assets import signature
    from specviz.methods.eagle import load_eagle, save_eagle
    from specviz.train.__main__ import _eagle_head, _previous

    target, folder = cached
    feats = features.load(folder)
    ids = draft_vocabulary(feats, 64, target.vocab_size)
    one = new_head(target, draft_ids=ids, seed=3)
    save_eagle(tmp_path / "one", one, {"target": signature(target), "training": {"steps": 5}}, dtype=torch.float32)
    args = Namespace(work=tmp_path / "work", init=tmp_path / "one", head_layers=2, eagle3=False, seed=0,
                     init_last_layer=False)
    grown = _eagle_head(args, target, _previous(args, "eagle"), ids)
    assert len(grown.layers) == 2 and torch.equal(grown.layers[0].mlp.up_proj.weight, one.layers[0].mlp.up_proj.weight)
    assert float(grown.layers[1].mlp.up_proj.weight.detach().abs().sum()) > 0  # only the output projections are 0
    as_one, as_grown = (_speculate(target, EagleProposer(bind(deepcopy(h), target))) for h in (one, grown))
    assert as_grown == as_one

    loss = partial(eagle_loss, grown, target.model.get_input_embeddings(), lm_rows(target, ids), ids, steps=2)
    train(grown, loss, sequence_batches(feats, 256, seed=0), lambda: {}, LoopConfig(steps=10, lr=3e-3, warmup=1),
          tmp_path / "work", "eagle")
    assert float(grown.layers[1].self_attn.o_proj.weight.detach().abs().sum()) > 0
    save_eagle(tmp_path / "two", grown, {"target": signature(target)}, dtype=torch.float32)
    loaded = load_eagle(tmp_path / "two", target)
    assert len(loaded.head.layers) == 2
    assert _speculate(target, EagleProposer(loaded)) == _speculate(target, EagleProposer(bind(deepcopy(grown), target)))

    with pytest.raises(SystemExit, match="the checkpoint in .* has 2"):  # resuming keeps the checkpoint's layers
        _eagle_head(Namespace(**{**vars(args), "head_layers": 3}), target, _previous(args, "eagle"), ids)
    fresh = Namespace(**{**vars(args), "work": tmp_path / "w2", "init": tmp_path / "two", "head_layers": 1})
    with pytest.raises(SystemExit, match="a head only grows"):
        _eagle_head(fresh, target, _previous(fresh, "eagle"), ids)
