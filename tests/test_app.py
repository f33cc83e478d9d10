"""The Gradio app driven with canned records: layout, validation, every handler, render, charts, formula.

No model here: a fake backend yields Round records built below, so these run in seconds.
"""
from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import replace
from typing import Iterator

import gradio as gr
import plotly.graph_objects as go
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import app
from specviz import charts, explain, render
from specviz.config import MAX_K, RunConfig, SamplingConfig
from specviz.events import ACCEPTED, FALLBACK, PLAIN, REJECTED, SPECULATE, UNREACHED, Round, summarize

TARGET_TEXT = [10 + (i * 5) % 17 for i in range(600)]  # the token ids plain greedy decoding would produce


def piece(token: int) -> str:
    return "\n" if token == 12 else f" w{token}"


def make_round(index: int, done: int, tokens: list[int], parents: list[int], status: list[str],
               path: list[int], bonus: int, budget: int, method: str, k: int, source: str = "target",
               seconds: float = 0.0) -> Round:
    emitted = ([tokens[i] for i in path] + [bonus])[: budget - done]
    finished = done + len(emitted) >= budget
    cut_bonus = len(emitted) <= len(path)
    return Round(
        index=index, method=method, mode=SPECULATE if tokens else PLAIN, k=k, tokens=tokens, parents=parents,
        pieces=[piece(t) for t in tokens], status=status,
        draft_probs=[None if method == "ngram" else 0.6] * len(tokens),
        target_probs=[0.9 if s == ACCEPTED else 0.05 for s in status], accepted_path=path[: len(emitted)],
        bonus_token=None if cut_bonus else bonus, bonus_piece="" if cut_bonus else piece(bonus),
        bonus_prob=None if cut_bonus else 0.7, bonus_source=source, emitted=emitted,
        text="".join(piece(t) for t in emitted), draft_time_s=0.002 * len(tokens), verify_time_s=0.05,
        elapsed_s=seconds, tokens_so_far=done + len(emitted), finished=finished,
        stop_reason="max_new_tokens" if finished else None)


def canned_run(method: str, budget: int, k: int, wrong_at: int = -1) -> Iterator[Round]:
    """A lossless run: chains whose kept guesses are the target's own tokens (a tree for 'eagle')."""
    done, index, seconds = 0, 0, 0.0
    while done < budget:
        truth = TARGET_TEXT[done: done + k + 1]
        kept = 0 if method == "baseline" else [k, 1, 0, k - 1][index % 4]
        seconds += 0.06 if method == "baseline" else 0.08
        if method == "baseline":
            tokens, parents, status, path = [], [], [], []
        elif method == "eagle":  # two candidates per depth: the true one, and a wrong sibling
            tokens, parents, status = [], [], []
            for depth in range(k):
                parent = -1 if depth == 0 else 2 * (depth - 1)
                ok = depth < kept
                tokens += [truth[depth], 99]
                parents += [parent, parent]
                reached = depth <= kept
                status += [ACCEPTED if ok else (REJECTED if reached else UNREACHED),
                           REJECTED if reached else UNREACHED]
            path = [2 * d for d in range(kept)]
        else:
            tokens = truth[:kept] + [99] * (k - kept)
            parents = list(range(-1, k - 1))
            status = [ACCEPTED] * kept + ([REJECTED] if kept < k else []) + [UNREACHED] * max(0, k - kept - 1)
            path = list(range(kept))
        r = make_round(index, done, tokens, parents, status, path, truth[kept], budget, method, k,
                       source="residual" if kept < k and method != "ngram" else "target", seconds=seconds)
        if done <= wrong_at < r.tokens_so_far:  # a run that is not lossless: one token differs
            r = replace(r, emitted=[98 if done + i == wrong_at else t for i, t in enumerate(r.emitted)])
        yield r
        done, index = r.tokens_so_far, index + 1


class FakeBackend:
    """The app's view of the engine, yielding canned records; counts runs and closed streams."""

    models = ("fake-model", "other-model")
    limits = app.Limits()

    def __init__(self, wrong_at: int = -1):
        self.calls: list[str] = []
        self.loaded: list[str] = []
        self.closed = 0
        self.wrong_at = wrong_at

    def names(self) -> tuple[str, ...]:
        return ("baseline", "ngram", "draft", "eagle")

    def methods(self, model: str) -> list[str]:
        self.loaded.append(model)
        return ["baseline", "ngram", "eagle"]

    def stream(self, req: app.Request) -> Iterator[Round]:
        self.calls.append(req.method)
        wrong = self.wrong_at if req.method != "baseline" else -1
        try:  # the engine records the run's temperature (and, for typical acceptance, thresholds) in every round
            for r in canned_run(req.method, req.run.max_new_tokens, req.run.k, wrong):
                yield replace(r, temperature=req.sampling.temperature,
                              thresholds=[0.08] * r.n_proposed if req.sampling.lossy else None)
        finally:
            self.closed += 1

    def verify_cost(self, model: str, sizes: list[int], chain: bool = True) -> dict[int, float]:
        """A made-up c_v(n) curve (a chain verifies a little cheaper than a flat tree), as the Sweep tab reads it."""
        self.calls.append(f"verify_cost:{'chain' if chain else 'tree'}")
        return {n: 1.0 + (0.1 if chain else 0.15) * (n - 1) for n in sorted({1, *sizes})}


SETTINGS = dict(k=4, temperature=0.0, top_p=1.0, max_new_tokens=24, seed=0, model="fake-model")


def single(backend, method="ngram", prompt="Count to ten", with_baseline=True, cache=None, **overrides):
    s = {**SETTINGS, **overrides}
    return list(app.run_single(backend, prompt, method, s["k"], s["temperature"], s["top_p"],
                               s["max_new_tokens"], s["seed"], s["model"], with_baseline, cache or {}))


# --- the page --------------------------------------------------------------------------------------

def test_build_demo_has_api_queue_and_shared_model_concurrency():
    demo = app.build_demo(FakeBackend())
    fns = list(demo.fns.values())
    api = [f for f in fns if f.api_name == "speculate"]
    assert len(api) == 1 and api[0].concurrency_id == "model" and api[0].concurrency_limit == 1
    heavy = [f for f in fns if f.concurrency_id == "model"]
    assert len(heavy) >= 6  # run, compare, prepare, load, model change, api
    assert all(f.concurrency_limit == 1 for f in heavy)
    assert demo._queue.max_size == app.QUEUE_SIZE
    cancels = [f for f in fns if f.cancels]
    assert len(cancels) == 3  # the stop buttons of the live run, the side-by-side run and the sweep


def test_demo_prompts_cover_every_category_and_stay_short():
    prompts = app.demo_prompts()
    categories = [p["category"] for p in prompts]
    assert 5 <= len(prompts) <= 8 and len(set(categories)) == len(categories)
    assert any("chat" in c and "hard" in c for c in categories)  # chat is there, labelled as the hard case
    assert all(p["prompt"].strip() and len(p["prompt"].split()) < 250 for p in prompts)


# --- validation --------------------------------------------------------------------------------------

def check(backend=None, **overrides):
    values = dict(prompt="hi", method="ngram", k=4, temperature=0.0, top_p=1.0, max_new_tokens=24, seed=0,
                  model="fake-model")
    values.update(overrides)
    return app.validate(backend or FakeBackend(), **values)


@pytest.mark.parametrize("overrides, message", [
    (dict(prompt=""), "prompt is empty"),
    (dict(prompt="   \n"), "prompt is empty"),
    (dict(prompt=None), "prompt is empty"),
    (dict(method="medusa2"), "Unknown method"),
    (dict(model="elsewhere"), "Unknown model"),
    (dict(max_new_tokens=app.MAX_NEW_TOKENS + 1), "max_new_tokens"),
    (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(max_new_tokens=2.5), "max_new_tokens"),
    (dict(max_new_tokens="many"), "max_new_tokens"),
    (dict(max_new_tokens=True), "max_new_tokens"),
    (dict(temperature=-0.1), "temperature"),
    (dict(temperature=math.nan), "temperature"),
    (dict(temperature="hot"), "temperature"),
    (dict(top_p=0), "top_p"),
    (dict(top_p=1.5), "top_p"),
    (dict(k=0), "k must"),
    (dict(k=MAX_K + 1), "k must"),
    (dict(seed=-1), "seed"),
    (dict(nodes=-1), "nodes"),
    (dict(nodes=app.MAX_NODES + 1), "nodes"),
    (dict(nodes="lots"), "nodes"),
    (dict(typical="yes"), "typical must be true or false"),
])
def test_validate_rejects_bad_values_with_a_clear_message(overrides, message):
    with pytest.raises(gr.Error, match=message):
        check(**overrides)


def test_an_unknown_model_is_refused_before_anything_loads():
    backend = FakeBackend()
    with pytest.raises(gr.Error, match="Unknown model"):
        check(backend, model="someone/huge-model")
    with pytest.raises(gr.Error, match="Unknown model"):
        app.refresh_methods(backend, "someone/huge-model")
    assert backend.loaded == []
    method, chosen = app.refresh_methods(backend, "other-model")
    assert backend.loaded == ["other-model"]


def test_validate_accepts_raw_api_values():
    req = check(max_new_tokens="24", temperature="0.7", k=6.0, seed=3.0)
    assert req.run == replace(RunConfig(max_new_tokens=24, k=6, time_budget_s=app.TIME_BUDGET_S), k_max=8)
    assert req.sampling == SamplingConfig(temperature=0.7, top_p=1.0, seed=3)
    req.run.validate()
    req.sampling.validate()
    assert check(k=MAX_K).run.k_max == MAX_K  # a large k widens the adaptive bound so the config stays valid
    check(k=MAX_K).run.validate()


def test_tree_nodes_reach_the_tree_methods_only(monkeypatch):
    assert check(method="eagle", nodes=8).options == {"nodes": 8}
    assert check(method="eagle", nodes="12").options == {"nodes": 12}  # raw API values
    assert check(method="eagle", nodes=0).options == {} == check(method="eagle", nodes=None).options  # device default
    assert check(method="ngram", nodes=8).options == {}  # a chain method has no tree to size
    seen = []
    monkeypatch.setattr(app, "load_model", lambda name: "target")
    monkeypatch.setattr(app, "generate", lambda *args, **options: seen.append((args[1], options)) or iter(()))
    list(app.EngineBackend(("m",)).stream(check(method="eagle", nodes=8)))
    assert seen == [("eagle", {"nodes": 8})]


# --- live run ------------------------------------------------------------------------------------------

def test_run_single_streams_every_round_then_checks_against_the_baseline():
    backend = FakeBackend()
    outs = single(backend)
    ngram_rounds = list(canned_run("ngram", 24, 4))
    assert len(outs) == len(ngram_rounds) + 1
    assert all(len(o) == len(app.RUN_FIELDS) for o in outs)
    assert 'sv-accepted' in outs[0][1] and outs[0][1].count('class="sv-round"') == 1
    final = outs[-1]
    status, stream, text, *figures = final[:7]
    assert "done (max_new_tokens)" in status and "the baseline's speed" in status
    assert stream.count('class="sv-round"') == len(ngram_rounds)
    assert 'sv-rejected' in stream and 'sv-bonus' in stream and "line-through" in stream
    assert text == "".join(r.text for r in ngram_rounds)
    assert all(isinstance(f, go.Figure) for f in figures)
    lossless, formula, last_run, base, cache = final[11:16]
    assert "Identical to the baseline" in lossless and base == list(canned_run("baseline", 24, 4))
    assert "expected speedup" in formula and "measured speedup" in formula and "×" in formula
    assert last_run == ngram_rounds
    assert backend.calls == ["ngram", "baseline"]
    assert len(cache) == 1 and list(cache.values())[0] == list(canned_run("baseline", 24, 4))


def test_run_single_reuses_the_sessions_baseline():
    backend = FakeBackend()
    cache = single(backend)[-1][app.RUN_FIELDS.index("cache")]
    single(backend, method="eagle", cache=cache)
    assert backend.calls == ["ngram", "baseline", "eagle"]
    single(backend, prompt="Another prompt", cache=cache)
    assert backend.calls[-2:] == ["ngram", "baseline"]


def test_run_single_baseline_is_its_own_reference():
    backend = FakeBackend()
    final = single(backend, method="baseline")[-1]
    assert backend.calls == ["baseline"]
    assert "baseline itself" in final[11]
    assert len(final[app.RUN_FIELDS.index("cache")]) == 1


def test_run_single_shows_the_first_difference():
    final = single(FakeBackend(wrong_at=5))[-1]
    assert "First difference at token 6" in final[11]


def test_run_single_without_baseline_and_sampling():
    backend = FakeBackend()
    final = single(backend, with_baseline=False, temperature=0.8)[-1]
    assert backend.calls == ["ngram"]
    assert "Tick" in final[11]
    final = single(backend, temperature=0.8)[-1]
    assert "Sampling" in final[11]


def test_typical_acceptance_reaches_the_engine_and_is_called_lossy():
    assert check(temperature=0.8, typical=True).sampling.lossy
    assert not check(typical=None).sampling.typical
    backend = FakeBackend()
    final = list(app.run_single(backend, "Count to ten", "ngram", 4, 0.8, 1.0, 24, 0, "fake-model", True, {},
                                "English", 0, True))[-1]
    assert "Typical acceptance is lossy" in final[11]
    assert all(r.thresholds == [0.08] * r.n_proposed for r in final[app.RUN_FIELDS.index("last_run")])
    final = list(app.run_single(backend, "Count to ten", "ngram", 4, 0.8, 1.0, 24, 0, "fake-model", True, {},
                                "中文", 0, True))[-1]
    assert "典型接受是有损的" in final[11]
    path, _, saved = app.save_single(backend, final[app.RUN_FIELDS.index("last_run")], "Count to ten", 4, 0.8, 1.0, 24, 0, "fake-model",
                                     "English", True)
    assert saved.sampling.typical and "typical acceptance (lossy) has no equivalent" in app.production_markdown(saved)


def test_narration_of_typical_acceptance_names_the_threshold():
    r = replace(list(canned_run("draft", 24, 4))[2], thresholds=[0.08, 0.08, 0.08, 0.08], bonus_source="target")
    r = replace(r, target_probs=[0.05, 0.3, 0.3, 0.3])
    text = render.narrate(r, greedy=False)
    assert "min(ε, α·e^(−entropy)) = 0.080" in text and "p = 0.050" in text
    assert "sampled from the target's own distribution" in text
    assert "min(1, target / draft)" not in text
    assert render.token_rows(r)[0][-1] == "typical: p > 0.080"


def test_stopping_a_run_closes_the_engine_stream():
    backend = FakeBackend()
    handler = app.run_single(backend, "hi", "ngram", 4, 0.0, 1.0, 24, 0, "fake-model", True, {})
    next(handler)
    handler.close()  # what the stop button does to the handler
    assert backend.closed == 1


def test_bad_input_raises_before_any_run():
    backend = FakeBackend()
    with pytest.raises(gr.Error, match="prompt is empty"):
        single(backend, prompt="")
    with pytest.raises(gr.Error, match="Unknown method"):
        single(backend, method="draft")  # registered, but not available for this model
    assert backend.calls == []


def test_engine_value_errors_reach_the_user_as_gr_error():
    class Broken(FakeBackend):
        def stream(self, req):
            raise ValueError("the prompt is too long for the model's context")
            yield

    with pytest.raises(gr.Error, match="too long"):
        single(Broken())


def test_inspect_round_clamps_and_draws_the_tree():
    rounds = list(canned_run("eagle", 24, 3))
    tree, table, node, panel = app.inspect_round(rounds, 1)
    assert "<svg" in tree and table["data"][-1][0] == "bonus" and table["headers"][0] == "node"
    assert app.inspect_round(rounds, 999)[1]["data"] == render.token_rows(rounds[-1])
    assert app.inspect_round([], 1)[:2] == ("", {"headers": render.headers("headers.tokens"), "data": []})


# --- side by side ----------------------------------------------------------------------------------------

def compare(backend, methods, **overrides):
    s = {**SETTINGS, **overrides}
    return list(app.run_compare(backend, "Count to ten", methods, s["k"], s["temperature"], s["top_p"],
                                s["max_new_tokens"], s["seed"], s["model"], {}))


def test_compare_runs_the_baseline_first_and_ends_with_a_summary():
    backend = FakeBackend()
    outs = compare(backend, ["ngram", "eagle"])
    assert backend.calls == ["baseline", "ngram", "eagle"]
    final = outs[-1]
    assert len(final) == 12
    status, first, second, third, fourth, table = *final[:5], final[5]["data"]
    assert "done" in status and "ngram" in first["value"] and "eagle" in second["value"]
    assert first["visible"] and second["visible"] and not third["visible"] and not fourth["visible"]
    assert [row[0] for row in table] == ["baseline", "ngram", "eagle"]
    assert [row[-1] for row in table] == ["yes", "yes", "yes"]
    assert table[0][4] == "1.00×" and table[1][1] > 1
    assert len(final[-1]) == 1  # the baseline is remembered for the live run


def test_compare_measures_a_fresh_baseline_that_the_live_run_then_reuses():
    backend = FakeBackend()
    cache = single(backend)[-1][app.RUN_FIELDS.index("cache")]
    final = list(app.run_compare(backend, "Count to ten", ["ngram", "eagle"], 4, 0.0, 1.0, 24, 0, "fake-model",
                                 cache))[-1]
    assert backend.calls == ["ngram", "baseline", "baseline", "ngram", "eagle"]
    single(backend, method="eagle", cache=final[-1])
    assert backend.calls[-1] == "eagle"


def test_compare_with_baseline_column_and_its_errors():
    backend = FakeBackend()
    final = compare(backend, ["baseline", "ngram"])[-1]
    assert backend.calls == ["baseline", "ngram"]
    assert "baseline" in final[1]["value"] and "sv-round" in final[1]["value"]
    with pytest.raises(gr.Error, match="two to"):
        compare(backend, ["ngram"])
    with pytest.raises(gr.Error, match="two to"):
        compare(backend, ["baseline", "ngram", "eagle", "ngram", "eagle"])
    with pytest.raises(gr.Error, match="temperature"):
        compare(backend, ["baseline", "ngram"], temperature=-1)


def test_compare_marks_a_different_text():
    final = compare(FakeBackend(wrong_at=3), ["baseline", "ngram"])[-1]
    assert final[5]["data"][1][-1] == "no (token 4)"


class SlowBaseline(FakeBackend):
    """The baseline passes the time budget after three rounds (as on a busy machine); other methods finish."""

    def stream(self, req):
        for r in super().stream(req):
            if req.method == "baseline" and r.index == 2:
                yield replace(r, finished=True, stop_reason="time_budget")
                return
            yield r


def test_a_baseline_cut_by_the_time_budget_is_compared_on_its_prefix_only():
    cut = sum(len(r.emitted) for r in list(canned_run("baseline", 24, 4))[:3])
    final = compare(SlowBaseline(), ["baseline", "ngram"])[-1]
    label = final[5]["data"][1][-1]
    assert not label.startswith("no") and f"baseline stopped early at {cut} tokens: compared the first {cut}" in label
    lossless = single(SlowBaseline())[-1][11]
    assert f"Identical to the baseline on the first {cut} tokens" in lossless and "baseline stopped early" in lossless
    wrong = SlowBaseline(wrong_at=1)  # a real difference inside the common prefix is still reported
    assert compare(wrong, ["baseline", "ngram"])[-1][5]["data"][1][-1] == "no (token 2)"


def test_a_run_cut_by_the_time_budget_is_compared_on_its_prefix_only():
    base = list(canned_run("baseline", 24, 4))
    run = list(OverTime().stream(app.Request("hi", "ngram", "m", RunConfig(max_new_tokens=24), SamplingConfig())))
    n = run[-1].tokens_so_far
    assert app.identical_label(run, base, True) == f"yes (this run stopped early at {n} tokens: compared the first {n})"
    assert "this run stopped early" in render.lossless_markdown(run, base, True)
    ended = replace(run[-1], stop_reason="eos")  # a run that ended on its own, shorter: a real difference
    assert app.identical_label(run[:-1] + [ended], base, True) == f"no (token {n + 1})"


# --- step mode -----------------------------------------------------------------------------------------

def test_step_mode_reveals_one_round_per_click():
    backend = FakeBackend()
    outs = list(app.step_prepare(backend, "hi", "ngram", 4, 0.0, 1.0, 24, 0, "fake-model"))
    status, stream, narration, tree, rows, why_node, why_panel, state = outs[-1]
    assert "round **1** of" in status and stream.count('class="sv-round"') == 1
    assert "guessed **4** tokens" in narration and "kept **4**" in narration
    step2 = app.step_move(state, delta=1)
    assert "round **2**" in step2[0] and step2[1].count('class="sv-round"') == 2
    assert "rejected" in step2[2] and "top choice" in step2[2]  # greedy: why the guess lost
    assert app.step_move(step2[-1], delta=-5)[-1]["pos"] == 0
    last = app.step_move(state, delta=app.MAX_NEW_TOKENS)
    assert last[-1]["pos"] == len(state["rounds"]) - 1 and "stopped here" in last[2]
    with pytest.raises(gr.Error, match="Prepare"):
        app.step_move(None, delta=1)


# --- API -----------------------------------------------------------------------------------------------

def test_api_result_is_plain_json_with_text_rounds_and_metrics():
    out = app.api_result(FakeBackend(), "hi", "ngram", 24, 0.0, 4, 1.0, 0)
    assert set(out) >= {"text", "rounds", "metrics"}
    json.dumps(out)
    rounds = [Round.from_dict(d) for d in out["rounds"]]
    assert out["text"] == "".join(r.text for r in rounds)
    assert out["metrics"]["new_tokens"] == 24
    for key in ("acceptance_rate", "mean_accepted_tokens", "tokens_per_s"):
        assert key in out["metrics"]
    with pytest.raises(gr.Error):
        app.api_result(FakeBackend(), "hi", "nope", 24, 0.0, 4, 1.0, 0)


# --- render --------------------------------------------------------------------------------------------

def test_chain_round_shows_kept_rejected_and_bonus_in_order():
    r = list(canned_run("ngram", 24, 4))[1]  # one kept, one rejected, two never checked
    html_ = render.round_html(r)
    order = [html_.index(f"sv-{role}") for role in ("accepted", "rejected", "unreached", "bonus")]
    assert order == sorted(order)
    assert 'title="round 2: 4 guessed, 1 kept, 1 bonus"' in html_
    assert "target p = 0.050" in html_  # hover text of the rejected guess
    assert render.emitted_pieces(r) == [piece(t) for t in r.emitted]


def test_a_tree_draws_its_path_on_top_collapses_what_was_never_checked_and_stays_out_of_the_text():
    rounds = list(canned_run("eagle", 24, 3))
    r = rounds[1]  # kept 1 of depth 3, two candidates per depth
    assert render.shown_rejections(r) == [] and "sv-rejected" not in render.round_html(r)  # alternatives: tree only
    collapsed = 0
    for each in rounds + list(canned_run("draft", 24, 4)):
        place, hidden = render._layout(each)
        assert all(place[i][1] == 0 for i in each.accepted_path) and place[-1][1] == 0  # the path on the top row
        if each.bonus_token is not None:
            assert place["bonus"] == (len(each.accepted_path) + 1, 0)  # the bonus ends it
        drawn = [i for i in range(each.n_proposed) if i in place]
        assert all(each.status[i] != UNREACHED for i in drawn)
        assert len(drawn) + sum(hidden.values()) == each.n_proposed  # every guess drawn or counted
        svg = render.tree_svg(each)
        assert svg.count("<rect") == len(drawn) + len(hidden) + 1 + (each.bonus_token is not None)
        assert svg.count("unchecked</text>") == len(hidden) and 'width="100%"' in svg and "viewBox" in svg
        corners = re.findall(r'<rect x="([\d.]+)" y="([\d.]+)"', svg)
        assert len(corners) == len(set(corners))  # no box hides another
        collapsed += len(hidden)
    assert collapsed > 0
    assert render.shown_rejections(list(canned_run("ngram", 24, 4))[1])  # a chain's rejected tail stays in the text


def test_a_trees_narration_goes_level_by_level():
    r = list(canned_run("eagle", 24, 3))[1]  # two candidates per depth; the path ends at depth 1
    told = render.narrate(r, greedy=True)
    assert "as a tree 3 levels deep" in told
    assert f"- depth 1: 2 guesses, kept `{r.pieces[r.accepted_path[0]]}`" in told
    assert "- depth 2: 2 guesses, kept none" in told  # both children of the kept guess were checked
    assert "- depth 3: 2 guesses (0 reached" in told  # both below a rejected one
    assert told.count("kept none") == 2
    assert "第 1 层：2 个猜测" in render.narrate(r, True, "zh")


def test_plain_rounds_and_empty_runs_render():
    r = list(canned_run("baseline", 3, 4))[0]
    assert "sv-plain" in render.round_html(r) and "<sup" not in render.round_html(r)
    assert "guessed nothing" in render.tree_svg(r)
    assert "Nothing was guessed" in render.narrate(replace(r, mode=FALLBACK, note="low acceptance"), True)
    assert "round by round" in render.stream_html([])
    assert render.lossless_markdown([], [r], True) == ""


def test_narration_under_sampling_explains_the_coin_and_the_residual():
    r = list(canned_run("draft", 24, 4))[2]  # nothing kept: the first guess rejected, residual bonus
    text = render.narrate(r, greedy=False)
    assert "min(1, target / draft) = 0.083" in text and "residual" in text and "in place of the first guess" in text
    ngram = list(canned_run("ngram", 24, 4))[2]
    assert "no draft probability" in render.narrate(ngram, greedy=False)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=6), min_size=2, max_size=5), st.integers(0, 5))
def test_any_piece_is_escaped(pieces, kept):
    kept = min(kept, len(pieces))
    status = [ACCEPTED] * kept + [REJECTED] * (len(pieces) > kept) + [UNREACHED] * max(0, len(pieces) - kept - 1)
    r = replace(make_round(0, 0, list(range(len(pieces))), list(range(-1, len(pieces) - 1)), status,
                           list(range(kept)), 7, 100, "ngram", len(pieces)),
                pieces=[p + "<script>" for p in pieces], bonus_piece="<b>&")
    for out in (render.stream_html([r]), render.tree_svg(r), re.sub(r"`[^`]*`", "", render.narrate(r, False))):
        assert "<script>" not in out and "<b>&" not in out


# --- charts and formula -----------------------------------------------------------------------------------

def test_charts_for_one_run_many_runs_and_none():
    base, ngram = list(canned_run("baseline", 24, 4)), list(canned_run("ngram", 24, 4))
    for figs in (charts.all_figures({"ngram": ngram}), charts.all_figures({"ngram": ngram, "eagle": []}, base),
                 charts.all_figures({})):
        assert len(figs) == 4 and all(isinstance(f, go.Figure) for f in figs)
    acc = charts.acceptance_figure({"ngram": ngram})
    assert list(acc.data[1].y) == summarize(ngram)["acceptance_by_position"]
    hist = charts.accepted_histogram({"ngram": ngram})
    assert sum(hist.data[0].y) == len(ngram)
    speed = charts.speed_figure({"ngram": ngram}, base)
    speedup = summarize(ngram)["tokens_per_s"] / summarize(base)["tokens_per_s"]
    assert f"{speedup:.2f}×" in speed.data[1].text[0]
    json.dumps(speed.to_plotly_json(), default=str)


def test_the_timeline_gives_each_run_its_own_row():
    """Five runs in one grouped bar chart were unreadable: one row per run, sharing the round axis."""
    labels = ["baseline", "ngram", "draft", "medusa", "eagle"]
    runs = {m: list(canned_run(m, 24, 4)) for m in labels}
    fig = charts.timeline_figure(runs)
    axes = {(t.name, t.yaxis) for t in fig.data}
    for n, label in enumerate(labels):  # the run's draft and verify bars on row n + 1, and no other run's
        row_axis = "y" if n == 0 else f"y{n + 1}"
        assert {name for name, axis in axes if axis == row_axis} == {f"{label}: draft", f"{label}: verify"}
    assert [a.text for a in fig.layout.annotations] == labels  # each row titled with its run
    assert fig.layout.height >= 5 * 120
    one = charts.timeline_figure({"ngram": runs["ngram"]})
    assert {t.yaxis for t in one.data} == {"y"} and one.layout.showlegend


def test_the_verify_cost_enters_the_formula_and_the_best_k():
    assert explain.verify_cost(1, 1.9, 0.06) == 1.0 and explain.verify_cost(5, 1.9, 0.06) == pytest.approx(2.08)
    assert explain.best_k(0.19, 0.0) == MAX_K  # the paper's free verify: more guesses never hurt
    assert explain.best_k(0.19, 0.0, verify_base=1.9, verify_slope=explain.VERIFY_SLOPE_CPU) == 1  # a CPU's verify
    x = explain.CostInputs(c=0.0, a=0.5, k=4, verify_base=2.0, verify_slope=0.1)
    r = explain.evaluate(x)
    assert r.verify == pytest.approx(2.3) and r.loop_speedup == pytest.approx(explain.expected_tokens(0.5, 4) / 2.3)
    assert "c_v = **2.30**" in explain.calculator_markdown(x)
    base = list(canned_run("baseline", 24, 4))
    slow = [replace(r, verify_time_s=r.verify_time_s * 2) for r in canned_run("ngram", 24, 4)]  # verify = 2 plain steps
    m = explain.measured_inputs(slow, base)
    assert m["verify"] == pytest.approx(2.0) and m["c"] == pytest.approx(explain.measured_inputs(slow)["c"] * 2)
    told = explain.formula_markdown(slow, 1.0, "en", base)
    assert "c_v = 2.00" in told and "measured on this run" in told
    assert "assumed" in explain.formula_markdown(slow, None, "en")  # no baseline: c_v = 1 assumed


def test_formula_matches_leviathan():
    assert explain.expected_tokens(0.0, 4) == 1.0
    assert explain.expected_tokens(1.0, 4) == 5.0
    assert explain.expected_tokens(0.5, 2) == pytest.approx(1.75)
    assert explain.expected_speedup(0.8, 4, 0.1) == pytest.approx((1 - 0.8 ** 5) / 0.2 / 1.4)
    assert explain.best_k(0.9, 0.0) == MAX_K and explain.best_k(0.1, 0.5) == 1
    assert 3 <= explain.best_k(0.8, 0.05) <= 8


@given(st.floats(0.05, 0.95), st.floats(0.005, 0.5), st.integers(1, MAX_K - 1))
def test_the_rule_of_thumb_is_the_formulas_own_condition(a, c, k):
    """One more guess raises the expected speedup exactly when a^(k+1) > c * speedup(k)."""
    gain = explain.expected_speedup(a, k + 1, c) - explain.expected_speedup(a, k, c)
    margin = a ** (k + 1) - c * explain.expected_speedup(a, k, c)
    assert abs(margin) < 1e-12 or (gain > 0) == (margin > 0)


def test_measured_inputs_count_checked_guesses_only():
    rounds = list(canned_run("ngram", 40, 4))
    m = explain.measured_inputs(rounds)
    accepted = sum(r.n_accepted for r in rounds)
    rejections = sum(REJECTED in r.status for r in rounds)
    assert m["a"] == pytest.approx(accepted / (accepted + rejections)) and m["k"] == 4
    assert explain.measured_inputs(list(canned_run("baseline", 4, 4))) is None
    assert "guessed nothing" in explain.formula_markdown(list(canned_run("baseline", 4, 4)), None)


# --- the cost and return calculator ------------------------------------------------------------------------

def test_calculator_numbers_match_a_hand_computation():
    # a = 0.8, k = 4: E = (1 - 0.8^5) / 0.2 = (1 - 0.32768) / 0.2 = 3.3616; loop = 3.3616 / (4 * 0.1 + 1) = 2.40114
    # f = 0.5: S = 1 / (0.5 + 0.5 / 2.40114) = 1.41196; m = 50 / 500 = 0.1: ROI = (S - 1 - m) / m = 3.1196
    x = explain.CostInputs(c=0.1, a=0.8, k=4, verify_share=0.5, extra_mb=50, target_mb=500)
    r = explain.evaluate(x)
    assert r.tokens_per_round == pytest.approx(3.3616)
    assert r.loop_speedup == pytest.approx(2.401142857)
    assert r.speedup == pytest.approx(1.411962366)
    assert r.saved == pytest.approx(1 - 1 / 1.411962366) and r.extra == pytest.approx(0.1 / 1.411962366)
    assert r.roi == pytest.approx(3.119623656)
    whole = explain.evaluate(replace(x, verify_share=1.0))  # all the time in target forwards: S = loop speedup
    assert whole.speedup == pytest.approx(2.401142857) and whole.roi == pytest.approx(13.01142857)
    assert explain.evaluate(replace(x, extra_mb=0)).roi is None  # nothing extra to pay back
    assert explain.evaluate(replace(x, a=0.0, c=0.0)).speedup == pytest.approx(1.0)  # every guess wrong, free
    text = explain.calculator_markdown(x)
    assert "**3.36**" in text and "**2.40×**" in text and "**1.41×**" in text and "**3.12**" in text
    assert "no extra memory" in explain.calculator_markdown(replace(x, extra_mb=0))
    assert "costs more than" in explain.calculator_markdown(replace(x, a=0.1, extra_mb=400))


@settings(max_examples=60, deadline=None)
@given(st.floats(0.0, 0.9), st.floats(0.0, 0.5), st.integers(1, MAX_K), st.floats(0.05, 1.0), st.floats(1, 500))
def test_calculator_is_monotonic(a, c, k, f, extra):
    x = explain.CostInputs(c=c, a=a, k=k, verify_share=f, extra_mb=extra, target_mb=600)
    r = explain.evaluate(x)
    assert explain.evaluate(replace(x, a=a + 0.05)).speedup >= r.speedup  # better guesses, never slower
    assert explain.evaluate(replace(x, c=c + 0.05)).speedup <= r.speedup  # dearer guesses, never faster
    if r.saved > 0:  # more memory, less return (with a loss, (saved - extra) / extra grows as extra does)
        assert explain.evaluate(replace(x, extra_mb=extra * 2)).roi <= r.roi
    assert explain.evaluate(replace(x, c=0.0, k=min(k + 1, MAX_K))).speedup >= explain.evaluate(replace(x, c=0.0)).speedup
    if r.speedup > 1:  # a longer share of time in target forwards lets a real speedup count for more
        assert explain.evaluate(replace(x, verify_share=min(1.0, f + 0.1))).speedup >= r.speedup - 1e-12
    assert (r.roi > 0) == (r.speedup > 1 + extra / 600)


def test_calculator_prefills_from_a_run():
    ngram, base = list(canned_run("ngram", 40, 4)), list(canned_run("baseline", 40, 4))
    costs = explain.run_costs(ngram, base, "embedded:SmolLM2-135M-Instruct")
    measured = explain.measured_inputs(ngram)
    assert costs["a"] == round(measured["a"], 2) and costs["k"] == 4 and costs["c"] == round(measured["c"], 3)
    assert costs["verify_share"] == round(explain.time_share(base), 2) and 0 < costs["verify_share"] <= 1
    assert costs["extra_mb"] == 0.0 and costs["target_mb"] > 500
    eagle = explain.run_costs(list(canned_run("eagle", 40, 3)), None, "embedded:SmolLM2-135M-Instruct")
    assert 10 < eagle["extra_mb"] < 40 and {"a", "k", "c"} <= set(eagle)
    only_base = explain.run_costs(base, base, "some/other-model")
    assert set(only_base) == {"verify_share", "extra_mb"}  # the baseline guesses nothing; its memory adds nothing
    assert explain.run_costs(list(canned_run("draft", 40, 4)), None, "some/other-model").keys() == {"a", "k", "c",
                                                                                                   "verify_share"}


def test_the_shipped_weights_match_the_memory_table():
    from safetensors import safe_open

    files = {"draft": "assets/draft/model.safetensors", "eagle": "assets/eagle/model.safetensors",
             "medusa": "assets/medusa/medusa_lm_head.safetensors"}
    root = app.Path(app.__file__).parent
    for name, path in files.items():
        with safe_open(str(root / path), "pt") as f:
            params = sum(math.prod(f.get_slice(key).get_shape()) for key in f.keys())
        assert explain.EMBEDDED_FOOTPRINT[name][0] == pytest.approx(params * 4 / 1e6, rel=0.05), name


def test_calculator_handlers_remember_runs_and_prefill_them():
    ngram, base = list(canned_run("ngram", 24, 4)), list(canned_run("baseline", 24, 4))
    sources, dropdown = app.note_runs({}, {"baseline": base, "ngram": ngram}, "embedded:x", "compare")
    assert dropdown["value"] == "#1 side by side: ngram" and len(dropdown["choices"]) == 2
    sources, dropdown = app.note_runs(sources, app.live_runs(base, base), "embedded:x", "live", "中文")
    assert dropdown["value"] == "#3 实时：baseline" and list(sources)[0] == "#3 实时：baseline"
    start = explain.CostInputs()
    values = [start.c, start.a, start.k, start.verify_share, 123.0, start.target_mb, 1.0, 0.0]
    out = app.prefill(sources, "#1 side by side: ngram", *values, "English")
    c, a, k, share, extra, target, v_base, v_slope, note, result, plot = out
    costs = explain.run_costs(ngram, base, "embedded:x", app.cpu_slope())
    assert (c, a, k, share, extra) == (costs["c"], costs["a"], costs["k"], costs["verify_share"], 0.0)
    assert (v_base, v_slope) == (costs["verify_base"], costs["verify_slope"])  # measured against the baseline
    assert "ngram" in note and "kept" not in note and "no extra memory" in result and isinstance(plot, go.Figure)
    assert list(plot.data[-1].x) == [k] and list(plot.data[-1].y) == [a]  # the run is marked on the map
    drafted, choice = app.note_runs({}, {"draft": list(canned_run("draft", 24, 4))}, "some/model", "live")
    other = app.prefill(drafted, choice["value"], *values, "English")
    assert "kept as they were: extra memory" in other[8] and other[4] == 123.0  # memory unknown here: kept
    assert "verify cost c_v(2)" in other[8]  # no baseline: the verify cost is not measured
    baseline = app.prefill(sources, "#3 实时：baseline", *values, "中文")
    assert baseline[:3] == tuple(values[:3]) and "不做推测" in baseline[8]  # nothing to measure: kept
    assert app.prefill(sources, "gone", *values, "English")[0] is not None
    with pytest.raises(gr.Error, match="numbers in every field"):
        app.calculator(None, 0.5, 4, 1, 0, 600)
    figure = charts.speedup_map(start)
    assert len(figure.data[0].x) == MAX_K and figure.data[0].y[-1] == 0.95


# --- faults and a public server (issue 6) -----------------------------------------------------------------

class Faulty(FakeBackend):
    """Fails in the middle of its first run with `error`, then runs normally."""

    def __init__(self, error: BaseException):
        super().__init__()
        self.error = error

    def stream(self, req):
        for r in super().stream(req):
            if self.error is not None and r.index == 2:
                error, self.error = self.error, None
                raise error
            yield r


@pytest.mark.parametrize("error", [MemoryError(), __import__("torch").OutOfMemoryError("CUDA out of memory")])
def test_out_of_memory_is_a_clear_error_and_the_next_request_works(error):
    backend = Faulty(error)
    with pytest.raises(gr.Error, match="ran out of memory"):
        single(backend)
    assert backend.closed == 1  # the failed run's stream was closed
    final = single(backend)[-1]
    assert "done (max_new_tokens)" in final[0] and final[2] == "".join(r.text for r in canned_run("ngram", 24, 4))


class OverTime(FakeBackend):
    """Every run passes its time budget after three rounds, as the engine reports it."""

    def stream(self, req):
        for r in super().stream(req):
            if r.index == 2:
                yield replace(r, finished=True, stop_reason="time_budget")
                return
            yield r


def test_a_run_past_its_time_budget_says_so():
    outs = single(OverTime(), with_baseline=False)
    assert "past the server's time budget" in outs[-1][0] and "correct" in outs[-1][0]
    with pytest.raises(gr.Error, match="time budget of 120 s after"):
        app.api_result(OverTime(), "hi", "ngram", 24, 0.0, 4, 1.0, 0)
    assert check().run.time_budget_s == app.TIME_BUDGET_S  # every validated run carries the budget


def test_public_limits_and_the_model_allow_list(monkeypatch):
    monkeypatch.setenv("SPECVIZ_PUBLIC", "1")
    monkeypatch.setenv("SPECVIZ_QUEUE_SIZE", "3")
    limits = app.limits_from_env()
    assert limits == replace(app.PUBLIC, queue_size=3) and limits.max_new_tokens < app.MAX_NEW_TOKENS
    public = FakeBackend()
    public.limits = limits
    with pytest.raises(gr.Error, match=f"max_new_tokens must be a whole number from 1 to {limits.max_new_tokens}"):
        check(public, max_new_tokens=limits.max_new_tokens + 1)
    with pytest.raises(gr.Error, match=f"the limit is {limits.max_prompt_chars}"):
        check(public, prompt="x" * (limits.max_prompt_chars + 1))
    preset = app.PRESETS[0]
    monkeypatch.setenv("SPECVIZ_MODELS", f"{preset.name}, {preset.target}")
    assert app.model_choices(public=True) == (app.EMBEDDED, preset.target)
    for elsewhere in ("/etc", "./my-model", "someone/any-model"):
        monkeypatch.setenv("SPECVIZ_MODELS", elsewhere)
        assert app.model_choices(public=False) == (app.EMBEDDED, elsewhere)
        with pytest.raises(ValueError, match="only the embedded model and the presets"):
            app.model_choices(public=True)
    demo = app.build_demo(public)
    assert demo._queue.max_size == 3
    monkeypatch.delenv("SPECVIZ_PUBLIC")
    assert app.limits_from_env().public is False


def test_errors_quote_raw_values_briefly_and_nothing_logs_the_prompt(capsys):
    secret = "my private question about " + "x" * 500
    with pytest.raises(gr.Error) as err:
        check(model=secret)
    assert len(str(err.value)) < 200 and "x" * 100 not in str(err.value)
    single(FakeBackend(), prompt=secret)
    with pytest.raises(gr.Error):
        single(Faulty(MemoryError()), prompt=secret)
    out = capsys.readouterr()
    assert "private question" not in out.out + out.err


# --- first contact (issue 21): headlines, errors in the status line, fresh panels, the API ------------------

def test_the_headline_is_forwards_and_tau_first_then_the_speedup_and_why_a_cpu_is_slower(monkeypatch):
    outs = single(FakeBackend())
    m = summarize(outs[-1][RUN_FIELDS.index("last_run")])
    status = outs[-1][0]
    head = f"{m['new_tokens']} tokens in {m['rounds']} target forwards (tau {m['mean_accepted_tokens']:.2f})"
    assert head in status and status.index(head) < status.index("× the baseline's speed")
    rounds, base = list(canned_run("ngram", 24, 4)), list(canned_run("baseline", 24, 4))
    slow = [replace(r, elapsed_s=r.elapsed_s * 10) for r in rounds]  # ten times slower: below 1x
    monkeypatch.setattr(app, "on_cpu", lambda: True)
    assert "below 1× because on a CPU" in app.live_status(slow, base, True, "en")
    assert "below 1×" not in app.live_status(rounds, base, True, "en")  # faster than the baseline: no excuse
    assert "在 CPU 上" in app.compare_done({"baseline": base, "ngram": slow}, "zh")
    twice = app.compare_done({"baseline": base, "ngram": slow, "eagle": slow}, "en")
    assert twice.count("below 1× because") == 1  # said once for the whole comparison
    monkeypatch.setattr(app, "on_cpu", lambda: False)
    assert "below 1×" not in app.live_status(slow, base, True, "en")


RUN_FIELDS = app.RUN_FIELDS


def test_a_new_live_run_clears_the_previous_runs_checks_and_baseline_at_once():
    backend = FakeBackend()
    first = single(backend)
    assert first[-1][RUN_FIELDS.index("lossless")]  # the finished run's checks were shown
    second = app.run_single(backend, "Another prompt", "ngram", 4, 0.0, 1.0, 24, 0, "fake-model", True,
                            first[-1][RUN_FIELDS.index("cache")])
    opening = next(second)  # the first update of the new run, long before its baseline
    for name in ("lossless", "formula"):
        assert opening[RUN_FIELDS.index(name)] == ""
    assert opening[RUN_FIELDS.index("base")] is None
    second.close()  # Stop pressed during the run: nothing of the previous run is left standing


def test_a_method_still_running_side_by_side_is_labelled_running_not_stopped(monkeypatch):
    monkeypatch.setattr(app.Throttle, "__call__", lambda self, force=False: True)  # every update redraws the table
    outs = compare(FakeBackend(), ["ngram", "eagle"])
    labels = [row[-1] for out in outs if "data" in out[5] for row in out[5]["data"][1:]]
    assert any("still running" in label for label in labels)
    assert not any("stopped early" in label for label in labels)
    assert [row[-1] for row in outs[-1][5]["data"]] == ["yes", "yes", "yes"]
    assert "**ngram**" in outs[-1][0] and "target forwards" in outs[-1][0]  # the done line has each headline


def test_page_errors_show_in_the_status_line_and_keep_the_outputs():
    backend = FakeBackend()
    run = app.in_status(functools.partial(app.run_single, backend), len(RUN_FIELDS))
    outs = list(run("", "ngram", 4, 0.0, 1.0, 24, 0, "fake-model", True, {}))
    assert len(outs) == 1 and outs[0][0].startswith("⚠️") and "prompt is empty" in outs[0][0]
    assert all(value == gr.skip() for value in outs[0][1:])  # every other output keeps what it showed
    assert backend.calls == []
    long = list(run("x" * 9000, "ngram", 4, 0.0, 1.0, 24, 0, "fake-model", True, {}))[0][0]
    assert "9000 characters long" in long
    moved = app.in_status(functools.partial(app.step_move, delta=1), 6)(None, "中文")
    assert "请先点击" in moved[0] and moved[1:] == (gr.skip(),) * 5
    saved = app.in_status(functools.partial(app.trace_file, backend), 3, None)({"ngram": single(backend)[-1][12]},
                                                                             "", 4, 0.0, 1.0, 24, 0, "fake-model")
    assert saved == (gr.skip(),) * 3  # a chained step fails silently: its outputs keep their content


def test_the_built_page_wires_its_handlers_through_the_status_line():
    demo = app.build_demo(FakeBackend())
    wrapped = [f for f in demo.fns.values() if getattr(f.fn, "__qualname__", "").startswith("in_status")]
    assert len(wrapped) >= 10  # run, its trace, compare, its trace, prepare, 4 step buttons, replay, its steps


def test_the_side_by_side_box_holds_at_most_four_methods():
    ticked = ["baseline", "ngram", "draft", "medusa"]
    box, status, kept = app.limit_methods(ticked + ["eagle"], ticked)
    assert box["value"] == ticked and kept == ticked and "At most 4" in status
    assert app.limit_methods(ticked, ticked[:3]) == (gr.skip(), gr.skip(), ticked)


def test_the_api_measures_the_speedup_only_when_asked_for_a_baseline():
    backend = FakeBackend()
    plain = app.api_result(backend, "hi", "ngram", 24, 0.0, 4, 1.0, 0)
    assert plain["metrics"]["speedup"] is None and "baseline" not in plain
    assert backend.calls == ["ngram"]
    out = app.api_result(backend, "hi", "ngram", 24, 0.0, 4, 1.0, 0, 0, False, True)
    assert backend.calls == ["ngram", "ngram", "baseline"]
    base_tps = out["baseline"]["metrics"]["tokens_per_s"]
    assert out["metrics"]["speedup"] == pytest.approx(out["metrics"]["tokens_per_s"] / base_tps)
    assert out["identical_to_baseline"] is True and out["method"] == "ngram" and out["model"] == "fake-model"
    wrong = app.api_result(FakeBackend(wrong_at=2), "hi", "ngram", 24, 0.0, 4, 1.0, 0, 0, False, True)
    assert wrong["identical_to_baseline"] is False
    sampled = app.api_result(backend, "hi", "ngram", 24, 0.7, 4, 1.0, 0, 0, False, True)
    assert sampled["identical_to_baseline"] is None and sampled["metrics"]["speedup"] > 0
    with pytest.raises(gr.Error, match="baseline must be true or false"):
        app.api_result(backend, "hi", "ngram", 24, 0.0, 4, 1.0, 0, 0, False, "yes")


def test_the_api_tab_names_the_space_or_the_local_url(monkeypatch):
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7999")
    assert app.api_client_target() == "http://127.0.0.1:7999/"
    monkeypatch.setenv("SPACE_ID", "someone/specviz")
    assert app.api_client_target() == "someone/specviz"
    demo = app.build_demo(FakeBackend())
    texts = [b.value for b in demo.blocks.values() if getattr(b, "elem_id", None) == "api-text"]
    assert len(texts) == 1 and 'Client("someone/specviz")' in texts[0]
    for name in ("nodes", "typical", "baseline", "mean_accepted_tokens", "`method`", "`model`", "**null**"):
        assert name in texts[0]


def test_the_replay_heading_says_whether_a_trace_was_recorded_by_this_code():
    from specviz import trace

    runs = {"baseline": list(canned_run("baseline", 12, 4)), "ngram": list(canned_run("ngram", 12, 4))}
    current = trace.Trace(model="tiny", prompt="p", runs=runs, versions={"specviz": trace.code_version()})
    assert "Recorded with specviz" not in app.trace_heading(current) and "Recorded before" not in app.trace_heading(current)
    old = replace(current, versions={"specviz": "0123456789ab"})
    assert f"Recorded with specviz `0123456789ab`; this page runs `{trace.code_version()}`" in app.trace_heading(old)
    assert "录制时的 specviz 版本为 `0123456789ab`" in app.trace_heading(old, "zh")
    assert "Recorded before traces carried their code's version" in app.trace_heading(replace(current, versions={}))
    for path in sorted(app.DEMO_TRACES.glob("*.json")):  # the shipped traces are this code's own
        assert trace.load(path).stale is False, path.name


def test_on_a_cpu_step_mode_says_why_trees_are_small_and_offers_the_papers_size(monkeypatch):
    assert app.paper_tree("medusa") == (gr.update(value="medusa"), gr.update(value=40))
    assert app.paper_tree("ngram") == (gr.update(value="eagle"), gr.update(value=48))  # a method without trees
    for cpu in (True, False):
        monkeypatch.setattr(app, "on_cpu", lambda: cpu)
        ids = {getattr(b, "elem_id", None) for b in app.build_demo(FakeBackend()).blocks.values()}
        assert ("step-paper-tree" in ids) == cpu and ("step-cpu-trees" in ids) == cpu


def test_the_oracles_a_reaches_the_engine_from_the_page_and_the_api():
    class Oracle(FakeBackend):
        def methods(self, model):
            return ["baseline", "ngram", "oracle"]

        def stream(self, req):
            self.options = req.options
            return super().stream(replace(req, method="ngram"))

    backend = Oracle()
    list(app.run_single(backend, "hi", "oracle", 4, 0.0, 1.0, 24, 0, "fake-model", False, {}, "English", 0, False,
                        0.35))
    assert backend.options == {"a": 0.35}
    app.api_result(backend, "hi", "oracle", 24, 0.0, 4, 1.0, 0, 0, False, False, 0.9)
    assert backend.options == {"a": 0.9}
    app.api_result(backend, "hi", "ngram", 24, 0.0, 4, 1.0, 0, 0, False, False, 0.9)
    assert backend.options == {}  # other methods take no a
    with pytest.raises(gr.Error, match="a must be a number from 0.0 to 1.0"):
        app.validate(backend, "hi", "oracle", 4, 0.0, 1.0, 24, 0, "fake-model", oracle_a=1.5)


class OracleBackend(FakeBackend):
    """FakeBackend offering the oracle, recording each request's method and options."""

    def __init__(self):
        super().__init__()
        self.requests: list[tuple[str, dict]] = []

    def names(self) -> tuple[str, ...]:
        return (*super().names(), "oracle")

    def methods(self, model: str) -> list[str]:
        return [*super().methods(model), "oracle"]

    def stream(self, req: app.Request) -> Iterator[Round]:
        self.requests.append((req.method, req.options))
        return super().stream(req)


def test_the_baseline_beside_a_method_with_options_runs_without_them():
    """The oracle's a (or a tree's nodes) is the method's option: the baseline run beside it takes none (it once
    got a=0.8 and failed after the oracle's run). Live run, side by side and the API alike."""
    backend = OracleBackend()
    list(app.run_single(backend, "hi", "oracle", 4, 0.0, 1.0, 16, 0, "fake-model", True, {}, "English", 0, False, 0.5))
    list(app.run_compare(backend, "hi", ["oracle", "ngram"], 4, 0.0, 1.0, 16, 0, "fake-model", {}, "English", 0, False,
                         0.5))
    app.api_result(backend, "hi", "oracle", 16, 0.0, 4, 1.0, 0, 0, False, True, 0.5)
    assert ("oracle", {"a": 0.5}) in backend.requests
    assert [options for method, options in backend.requests if method == "baseline"] == [{}, {}, {}]
