"""Why a guess was kept or rejected: the record fields behind each verdict (on tiny random models), the Why
panel's data and HTML (on hand-made records), old traces without the fields, and the page's handlers."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import tiny_eagle, tiny_medusa
from specviz import trace, why
from specviz.config import RunConfig, SamplingConfig
from specviz.engine import speculate
from specviz.events import ACCEPTED, REJECTED, UNREACHED, Round
from specviz.methods import make_proposer

PROMPT = [1, 5, 7, 9, 11, 5, 7, 9, 11, 5]
FIELDS = ("target_top", "draft_top", "u", "accept_probs", "residual_top", "bonus_residual_prob")


def run(target, method, sampling, **options):
    proposer = make_proposer(method, target, sampling, **options)
    return list(speculate(target, proposer, PROMPT, RunConfig(max_new_tokens=24, k=4), sampling))


def options(method, draft_target):
    return {"draft": {"draft": draft_target}, "medusa": {"heads": tiny_medusa(0), "nodes": 8},
            "eagle": {"head": tiny_eagle(0), "nodes": 8}, "oracle": {"a": 0.6}}.get(method, {})


def check_top(top, target):
    """A recorded distribution: at most 10 [piece, p, token], likeliest first, p in (0, 1], summing to at most 1."""
    assert 0 < len(top) <= 10
    probs = [p for _, p, _ in top]
    assert probs == sorted(probs, reverse=True) and all(0 < p <= 1 for p in probs) and sum(probs) <= 1 + 1e-3
    assert all(piece == target.piece(token) for piece, _, token in top)


def tops(top):
    return {token: p for _, p, token in top}


@pytest.mark.parametrize("method", ["oracle", "draft", "eagle"])
def test_greedy_records_carry_the_target_top_of_every_checked_node_and_no_coin(target, draft_target, method):
    rounds = run(target, method, SamplingConfig(), **options(method, draft_target))
    seen = {ACCEPTED: 0, REJECTED: 0}
    for r in rounds:
        assert len(r.target_top) == r.n_proposed
        assert r.u is None and r.accept_probs is None and r.residual_top is None and r.draft_top is None
        assert r.bonus_residual_prob is None
        for node, status in enumerate(r.status):
            top = r.target_top[node]
            assert (top is None) == (status == UNREACHED)
            if top is None:
                continue
            check_top(top, target)
            seen[status] += 1
            best_piece, best_p, best_token = top[0]
            guess = tops(top).get(r.tokens[node])
            if guess is not None:  # the guess's p is the record's target probability
                assert guess == pytest.approx(r.target_probs[node], rel=1e-3)
            else:
                assert r.target_probs[node] <= top[-1][1] * (1 + 1e-3)
            if status == ACCEPTED:  # greedy: kept exactly when the guess is the target's top choice
                assert r.tokens[node] == best_token
            elif r.parents[node] == (r.accepted_path[-1] if r.accepted_path else -1) and r.bonus_token is not None:
                assert r.tokens[node] != best_token and r.bonus_token == best_token
    assert seen[ACCEPTED] and seen[REJECTED], seen  # both verdicts were checked


@pytest.mark.parametrize("method", ["draft", "medusa", "eagle"])
def test_sampling_records_the_coin_the_draft_and_the_residual(target, draft_target, method):
    hot = SamplingConfig(temperature=0.9, seed=3)
    rounds = run(target, method, hot, **options(method, draft_target))
    seen = {ACCEPTED: 0, REJECTED: 0, "drawn": 0}
    for r in rounds:
        sampled = method == "draft"  # the draft model's chain samples its guesses; the others choose them
        assert r.draft_sampled == (sampled and r.n_proposed > 0)
        assert (r.draft_top is not None) == (sampled and r.n_proposed > 0)
        for node, status in enumerate(r.status):
            if status == UNREACHED:
                assert r.u[node] is None and r.accept_probs[node] is None and r.residual_top[node] is None
                continue
            u, keep = r.u[node], r.accept_probs[node]
            assert 0 <= u < 1 and 0 <= keep <= 1
            assert (u < keep) == (status == ACCEPTED)  # the coin decided
            seen[status] += 1
            target_p = tops(r.target_top[node])
            first = not any(r.parents[i] == r.parents[node] for i in range(node))
            if sampled:
                check_top(r.draft_top[node], target)
                draft_q = tops(r.draft_top[node])
                assert draft_q.get(r.tokens[node], r.draft_probs[node]) == pytest.approx(r.draft_probs[node], rel=1e-3)
                assert keep == pytest.approx(min(1.0, r.target_probs[node] / r.draft_probs[node]), rel=1e-6)
            elif first:  # a chosen guess is a point mass: kept with probability p
                assert keep == pytest.approx(r.target_probs[node], rel=1e-6)
            if status == REJECTED:
                check_top(r.residual_top[node], target)
                left = tops(r.residual_top[node])
                if sampled:  # the residual lives where the target wants more than the draft gave
                    for token in left:
                        if token in target_p and token in draft_q:
                            assert target_p[token] > draft_q[token] * (1 - 1e-3)
                else:
                    assert r.tokens[node] not in left  # a rejected certain guess leaves nothing of itself
            else:
                assert r.residual_top[node] is None
        if r.bonus_source == "residual" and r.bonus_token is not None:
            seen["drawn"] += 1
            assert 0 < r.bonus_residual_prob <= 1
            end = r.accepted_path[-1] if r.accepted_path else -1
            last = [i for i in range(r.n_proposed) if r.parents[i] == end][-1]
            assert r.status[last] == REJECTED and r.bonus_token != r.tokens[last] or sampled
            if sampled and r.bonus_token in tops(r.draft_top[last]):
                assert r.bonus_prob > tops(r.draft_top[last])[r.bonus_token] * (1 - 1e-3)  # q < p where it was drawn
        else:
            assert r.bonus_residual_prob is None
    assert seen[ACCEPTED] and seen[REJECTED] and seen["drawn"], seen


def test_records_with_the_fields_survive_json_and_a_trace(target, draft_target):
    rounds = run(target, "draft", SamplingConfig(temperature=0.9, seed=3), draft=draft_target)
    again = [Round.from_dict(d) for d in json.loads(json.dumps([r.to_dict() for r in rounds]))]
    assert again == rounds
    t = trace.loads(trace.dumps(trace.Trace(model="tiny", prompt="hi", runs={"draft": rounds})))
    assert t.runs["draft"] == rounds


# --- the panel's data, on hand-made records -----------------------------------------------------------------

def chain(**fields) -> Round:
    """A sampled 2-token draft chain: ' cat' kept (u 0.2 < 0.5), ' sat' rejected (u 0.9 >= 0.3), the bonus ' ran'
    drawn from the residual."""
    base = dict(index=0, method="draft", mode="speculate", k=2, tokens=[11, 12], parents=[-1, 0],
                pieces=[" cat", " sat"], status=[ACCEPTED, REJECTED], draft_probs=[0.8, 0.6], target_probs=[0.4, 0.18],
                accepted_path=[0], bonus_token=13, bonus_piece=" ran", bonus_prob=0.5, bonus_source="residual",
                emitted=[11, 13], text=" cat ran", draft_time_s=0.01, verify_time_s=0.02, elapsed_s=0.1,
                tokens_so_far=2, finished=False, stop_reason=None, temperature=0.8, draft_sampled=True,
                target_top=[[[" cat", 0.4, 11], [" dog", 0.3, 14]], [[" ran", 0.5, 13], [" sat", 0.18, 12]]],
                draft_top=[[[" cat", 0.8, 11], [" dog", 0.1, 14]], [[" sat", 0.6, 12], [" ran", 0.2, 13]]],
                u=[0.2, 0.9], accept_probs=[0.5, 0.3], residual_top=[None, [[" ran", 0.8, 13], [" hid", 0.2, 15]]],
                bonus_residual_prob=0.8)
    return Round(**{**base, **fields})


def test_the_panel_puts_p_and_q_side_by_side_with_the_coin_and_the_residual_draw():
    r = chain()
    assert why.checked_nodes(r) == [0, 1] and why.default_node(r) == 1  # the first rejection
    w = why.explain_node(r, 1)
    assert w.rule == why.SAMPLED and w.status == REJECTED
    assert (w.target_prob, w.draft_prob, w.accept_prob, w.u) == (0.18, 0.6, 0.3, 0.9)
    bars = {b.piece: b for b in w.bars}
    assert set(bars) == {" ran", " sat", " hid"}  # the union of p's, q's and the residual's top tokens
    assert bars[" sat"].guess and (bars[" sat"].target, bars[" sat"].draft, bars[" sat"].residual) == (0.18, 0.6, None)
    assert bars[" ran"].drawn and (bars[" ran"].target, bars[" ran"].draft, bars[" ran"].residual) == (0.5, 0.2, 0.8)
    assert bars[" hid"].target is None and bars[" hid"].residual == 0.2 and not bars[" hid"].drawn
    assert [b.piece for b in w.bars][0] == " ran"  # likeliest under p first
    assert w.drawn_prob == 0.8 and w.next_piece is None
    kept = why.explain_node(r, 0)
    assert kept.status == ACCEPTED and kept.u == 0.2 and kept.accept_prob == 0.5
    assert not any(b.drawn for b in kept.bars) and all(b.residual is None for b in kept.bars)
    page = why.why_html(r, 1)
    assert "min(1, p/q) = min(1, 0.180 / 0.600) = 0.300" in page and "u = 0.900 ≥ 0.300" in page
    assert "sv-why-coin" in page and "drew" in page and "sv-bonus" in page and "sv-rejected" in page
    assert "u = 0.200 &lt; 0.500" in why.why_html(r, 0)
    assert why.why_html(r, 99) == page  # a node that is not checked: the default one
    chinese = why.why_html(r, 1, "zh")
    assert "抽签" in chinese and "残差分布" in chinese and "奖励 token" in chinese


def test_at_temperature_0_the_panel_names_the_top_choice_and_tosses_no_coin():
    r = chain(temperature=0.0, draft_sampled=False, draft_top=None, u=None, accept_probs=None, residual_top=None,
              bonus_residual_prob=None, bonus_source="target",
              target_top=[[[" cat", 0.4, 11], [" dog", 0.3, 14]], [[" ran", 0.5, 13], [" sat", 0.18, 12]]])
    w = why.explain_node(r, 1)
    assert w.rule == why.GREEDY and w.u is None and w.accept_prob is None and w.draft_prob is None
    assert w.top == (" ran", 0.5) and all(b.draft is None and b.residual is None for b in w.bars)
    page = why.why_html(r, 1)
    assert "top choice is" in page and " ran" in page
    assert "min(1, p/q)" not in page and "u =" not in page and "sv-why-coin" not in page and "q (draft)" not in page
    assert "top choice is" in why.why_html(r, 0) and "it is kept" in why.why_html(r, 0)


def test_a_chosen_guess_is_a_point_mass_and_a_later_sibling_sees_what_was_left():
    # a sampled tree of chosen guesses: ' a' and ' b' below the root; ' a' rejected, ' b' then kept from what was left
    r = chain(method="eagle", tokens=[21, 22], parents=[-1, -1], pieces=[" a", " b"], status=[REJECTED, ACCEPTED],
              draft_probs=[0.5, 0.3], target_probs=[0.2, 0.6], accepted_path=[1], bonus_token=23, bonus_piece=" c",
              bonus_source="target", emitted=[22, 23], draft_sampled=False, draft_top=None,
              target_top=[[[" b", 0.6, 22], [" a", 0.2, 21]], [[" b", 0.6, 22], [" a", 0.2, 21]]],
              u=[0.5, 0.1], accept_probs=[0.2, 0.75], residual_top=[[[" b", 0.75, 22]], None], bonus_residual_prob=None)
    first = why.explain_node(r, 0)
    assert first.rule == why.POINT and first.draft_prob == 1.0 and first.own_prob == 0.5 and first.next_piece == " b"
    assert {b.piece: b.draft for b in first.bars} == {" b": None, " a": 1.0}
    second = why.explain_node(r, 1)
    assert second.later_sibling and second.target_prob == 0.75  # p(' b') once ' a' was taken out
    page = why.why_html(r, 0)
    assert "chosen, not sampled" in page and "next guess" in page and "itself gave it 0.500" in page
    assert "what was left" in why.why_html(r, 1)


def test_old_records_without_the_fields_still_load_replay_and_say_so(tmp_path):
    r = chain()
    old = {key: value for key, value in r.to_dict().items() if key not in FIELDS}
    loaded = Round.from_dict(old)
    assert all(getattr(loaded, name) is None for name in FIELDS)
    assert loaded == replace(r, **{name: None for name in FIELDS})
    assert why.explain_node(loaded, 1) is None and not why.has_reasons(loaded)
    assert "older trace" in why.why_html(loaded, 1) and "较早的 trace" in why.why_html(loaded, 1, "zh")
    data = json.loads(trace.dumps(trace.Trace(model="embedded:x", prompt="hi", runs={"draft": [r]})))
    for record in data["runs"]["draft"]:
        for name in FIELDS:
            del record[name]
    t = trace.loads(json.dumps(data))
    assert t.runs["draft"] == [loaded]
    assert why.why_html(replace(r, tokens=[], parents=[], pieces=[], status=[], draft_probs=[], target_probs=[],
                                accepted_path=[], target_top=[], u=[], accept_probs=[], residual_top=[],
                                draft_top=None)).count("guessed nothing") == 1


# --- the page ------------------------------------------------------------------------------------------------

def test_the_live_inspector_shows_the_why_panel_and_another_guess_on_request():
    import app

    rounds = [chain(index=0), chain(index=1, u=[0.2, 0.1], status=[ACCEPTED, ACCEPTED], accepted_path=[0, 1],
                                    residual_top=[None, None], bonus_source="target", bonus_residual_prob=None)]
    tree, table, node, panel = app.inspect_round(rounds, 1)
    assert node["value"] == 1 and [value for _, value in node["choices"]] == [0, 1]
    assert "u = 0.900 ≥ 0.300" in panel and "<svg" in tree
    node, panel = app.inspect_why(rounds, 1, 0)
    assert node["value"] == 0 and "u = 0.200 &lt; 0.500" in panel
    node, panel = app.inspect_round(rounds, 2)[2:]
    assert node["value"] == 1 and "kept" in panel  # no rejection: the last kept guess
    assert app.inspect_round([], 1)[2:] == (app.gr.update(choices=[], value=None), "")
    assert "older trace" in app.inspect_round([replace(rounds[0], target_top=None)], 1)[3]


def test_a_live_run_ends_with_the_why_panel_of_its_last_round():
    import app
    from test_app import FakeBackend

    final = list(app.run_single(FakeBackend(), "hi", "ngram", 4, 0.0, 1.0, 24, 0, "fake-model", False, {}))[-1]
    assert len(final) == len(app.RUN_FIELDS)
    assert "older trace" in final[app.RUN_FIELDS.index("why")]  # the canned records carry no distributions


def test_step_mode_shows_the_why_panel_keeps_the_chosen_guess_and_resets_it_on_a_new_round():
    import app

    state = {"rounds": [chain(index=0), chain(index=1)], "pos": 0, "greedy": False, "label": "draft"}
    *view, node, panel, same = app.step_outputs(state)
    assert node["value"] == 1 and "u = 0.900" in panel and same is state
    node, panel, chosen = app.step_why(state, 0)
    assert node["value"] == 0 and "u = 0.200" in panel and chosen["node"] == 0
    assert "u = 0.200" in app.step_view(chosen, "step.press_prepare", "en")[-1]  # kept for the language switch
    assert "抽签" in app.step_view(chosen, "step.press_prepare", "zh")[-1]
    moved = app.step_move(chosen, delta=1)
    assert moved[-1]["node"] is None and moved[-3]["value"] == 1  # a new round opens on its first rejection
    assert app.step_view(None, "step.press_prepare", "en")[-1] == ""
    with pytest.raises(app.gr.Error, match="Prepare"):
        app.step_why(None, 0)


def test_the_page_wires_the_why_pickers():
    import app
    from test_app import FakeBackend

    demo = app.build_demo(FakeBackend())
    for name in ("live", "step", "replay"):
        [picker] = [f for f in demo.fns.values() if any(getattr(b, "elem_id", None) == f"{name}-why-node" for b in f.inputs)
                    and any(getattr(b, "elem_id", None) == f"{name}-why" for b in f.outputs)
                    and getattr(f.fn, "__name__", "") != "inspect_round"]  # the language switch's redraw: below
        if name == "live":
            assert picker.fn([chain()], 1, 0, "English")[0]["value"] == 0
        else:  # wrapped in in_status: with no view yet the outputs keep what they show
            assert picker.fn(None, 0, "English") == (app.gr.skip(),) * 3


def test_the_language_switch_redraws_the_live_inspector_on_the_same_round_and_guess():
    import app
    from test_app import FakeBackend

    demo = app.build_demo(FakeBackend())
    [redraw] = [f for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "inspect_round"
                and [getattr(b, "elem_id", None) for b in f.inputs][-2:] == ["language", "live-why-node"]]
    assert [getattr(b, "elem_id", None) for b in redraw.outputs][-2:] == ["live-why-node", "live-why"]
    rounds = [chain(index=0), chain(index=1)]
    tree, table, node, panel = redraw.fn(rounds, 1, "中文", 0)  # the reader had picked guess 0 of round 1
    assert node["value"] == 0 and "u = 0.200" in panel and "抽签" in panel
    assert redraw.fn(rounds, 1, "English", 7)[2]["value"] == 1  # a guess the round never checked: the default


def test_the_panel_shows_at_most_twelve_tokens_always_with_the_guess_and_the_drawn_one():
    many = [[f" w{i}", round(0.09 - 0.004 * i, 4), 100 + i] for i in range(10)]
    r = chain(target_top=[None, many], draft_top=[None, [[f" d{i}", 0.05, 200 + i] for i in range(10)]],
              residual_top=[None, [[" ran", 0.3, 13]] + many[:9]], status=[ACCEPTED, REJECTED])
    w = why.explain_node(r, 1)
    assert len(w.bars) == 22  # the union: ten of p (the guess among none of them), ten of q, ' ran', ' sat'
    shown = why.shown_bars(w.bars)
    assert len(shown) == why.ROWS and any(b.guess for b in shown) and any(b.drawn for b in shown)
    assert [b for b in w.bars if b in shown] == shown  # in the panel's order
    assert "… and 10 less likely tokens" in why.why_html(r, 1)
    assert "&lt;0.001" in why._num(0.0001) and why._num(0.0) == "0.000"
