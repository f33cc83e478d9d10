"""The Sweep tab on the fake backend: points stream one after another, bad ranges and oversized sweeps are
refused in the status line before anything runs, the time cap stops a sweep with its points, and the figure
holds the measured and predicted curves and the verify cost."""
from __future__ import annotations

import functools
from dataclasses import replace

import gradio as gr
import pytest

import app
from specviz.tabs import sweep as sweep_tab
from test_app import FakeBackend

SKIP = gr.skip()


class Recording(FakeBackend):
    """The fake backend, also keeping every request it was asked to run."""

    def __init__(self, limits: app.Limits = app.Limits(), methods: tuple[str, ...] = ("baseline", "ngram", "eagle")):
        super().__init__()
        self.limits, self.offered, self.requests = limits, list(methods), []

    def methods(self, model: str) -> list[str]:
        return self.offered

    def stream(self, req: app.Request):
        self.requests.append(req)
        return super().stream(req)


def sweep(backend, param="k", spec="1..4", method="ngram", k=4, max_new_tokens=24, language="English") -> list:
    """Every output tuple of the tab's handler, wrapped as the page wraps it (errors go to the status line)."""
    handler = app.in_status(functools.partial(sweep_tab.run, backend, app.validate), 4)
    return list(handler(param, spec, "Count to ten", method, k, 0.0, 1.0, max_new_tokens, 0, "fake-model", language,
                        False, 0.8))


def test_points_stream_one_after_another_and_the_plot_grows():
    backend = Recording()
    outs = sweep(backend, spec="1..4")
    assert "Timing the verify cost c_v(n) for n = 2, 3, 4, 5" in outs[0][0] and outs[0][1] == SKIP
    counts = [len(table["data"]) for _, _, table, _ in outs]
    assert counts == sorted(counts) and counts[-1] == 4
    assert [c for i, c in enumerate(counts) if c != (counts[i - 1] if i else 0)] == [1, 2, 3, 4]  # one at a time
    assert any("Point 3 of 4: k = 3" in status for status, *_ in outs)
    status, fig, table, state = outs[-1]
    assert status.startswith("Done: 4 points") and "differed" not in status
    assert [row[0] for row in table["data"]] == [1, 2, 3, 4] and table["headers"][:2] == ["k (guesses per round)", "tau"]
    assert all(row[-1] == "✓" for row in table["data"])  # greedy fake runs: the same text as the baseline
    # c_v is timed once, as a chain, for n = k + 1; then a warm-up, the baseline, and one run per value in order
    assert backend.calls == ["verify_cost:chain", "ngram", "baseline", "ngram", "ngram", "ngram", "ngram"]
    assert [r.run.k for r in backend.requests[1:]] == [4, 1, 2, 3, 4]  # the baseline at the slider's k
    assert backend.requests[0].run.max_new_tokens == sweep_tab.WARMUP_TOKENS
    assert all(r.run.max_new_tokens == 24 for r in backend.requests[1:])
    assert state["rows"][2]["value"] == 3 and state["rows"][2]["k"] == 3


def test_the_figure_has_measured_and_predicted_curves_and_the_verify_cost():
    backend = Recording()
    *_, (_, fig, _, state) = sweep(backend, spec="1,2,4,8")
    names = [t.name for t in fig.data]
    for name in ("measured", "predicted (k as set)", "predicted (as guessed)"):
        assert names.count(name) == 2, name  # one trace in the tau panel, one in the speedup panel
    measured_tau = next(t for t in fig.data if t.name == "measured")
    assert list(measured_tau.x) == [1, 2, 4, 8]
    assert list(measured_tau.y) == pytest.approx([r["tau"] for r in state["rows"]])
    predicted = next(t for t in fig.data if t.name == "predicted (k as set)")
    assert list(predicted.y) == pytest.approx([r["predicted_tau"] for r in state["rows"]])
    cost = next(t for t in fig.data if t.name == "c_v(n)")
    assert list(cost.x) == [1, 2, 3, 5, 9] and list(cost.y) == pytest.approx([1.0, 1.1, 1.2, 1.4, 1.8])
    assert "ngram" in fig.layout.title.text


def test_tree_methods_sweep_nodes_at_the_depth_of_the_k_slider():
    backend = Recording()
    *_, (status, fig, table, state) = sweep(backend, param="nodes", spec="nodes=1,2,4", method="eagle", k=3)
    assert status.startswith("Done: 3 points")
    assert backend.calls[0] == "verify_cost:tree"
    runs = [r for r in backend.requests if r.method == "eagle"][1:]
    assert [(r.run.k, r.options) for r in runs] == [(3, {"nodes": 1}), (3, {"nodes": 2}), (3, {"nodes": 4})]
    assert [row["k"] for row in state["rows"]] == [1, 2, 3]  # the formula's depth: min(k, nodes)
    assert table["headers"][0] == "tree nodes" and "eagle, k = 3" in fig.layout.title.text


def test_the_draft_model_sweeps_k_as_a_chain():
    backend = Recording(methods=("baseline", "ngram", "draft"))
    sweep(backend, spec="2..3", method="draft")
    assert [r.options for r in backend.requests if r.method == "draft"] == [{"nodes": 1}] * 3


@pytest.mark.parametrize("param, spec, method, message", [
    ("k", "", "ngram", "Write the values to sweep"),
    ("k", "1..x", "ngram", "Cannot read the values '1..x': '1..x' is not an integer or a range A..B"),
    ("k", "8..1", "ngram", "the range '8..1' is empty"),
    ("k", "0,1", "ngram", "k must be at least 1"),
    ("k", "1,2,2", "ngram", "a value appears twice"),
    ("k", "nodes=1..4", "ngram", "'nodes=1..4' is not an integer"),
    ("k", "12..17", "ngram", "k must be a whole number from 1 to 16, got 17"),  # the page's own bound on k
    ("nodes", "1,64,65", "eagle", "nodes must be a whole number from 0 to 64, got 65"),
    ("k", "1..4", "eagle", "eagle guesses a tree"),
    ("nodes", "1..4", "ngram", "ngram guesses a chain, not a tree: sweep k"),
    ("k", "1..4", "baseline", "The baseline guesses nothing"),
    ("depth", "1..4", "ngram", "Cannot read the values 'depth'"),
])
def test_bad_input_is_said_in_the_status_line_and_nothing_runs_or_is_lost(param, spec, method, message):
    backend = Recording()
    [out] = sweep(backend, param=param, spec=spec, method=method)
    assert out[0].startswith("⚠️") and message in out[0], out[0]
    assert out[1:] == (SKIP, SKIP, SKIP)  # the last sweep's plot, table and state stay on the page
    assert backend.calls == []


def test_bad_input_is_said_in_chinese():
    [out] = sweep(Recording(), spec="1..x", language="中文")
    assert "无法读取取值" in out[0]


def test_the_caps_on_points_and_tokens_hold():
    [out] = sweep(Recording(), spec="1..13")
    assert "13 values are more than this server runs in one sweep (12)" in out[0]
    public = Recording(limits=app.PUBLIC)  # 128 tokens a run: 8 * 128 = 1024 tokens a sweep
    [out] = sweep(public, spec="1..8", max_new_tokens=128)
    assert "8 values and the baseline at 128 new tokens each make 1152 tokens" in out[0]
    assert "(1024): lower max new tokens to 113" in out[0] and public.calls == []
    *_, last = sweep(public, spec="1..8", max_new_tokens=113)
    assert last[0].startswith("Done: 8 points")


class Clock:
    """A fake time.monotonic that only moves when a run is asked for: each costs `step` seconds."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def monotonic(self) -> float:
        return self.now


class Slow(Recording):
    def __init__(self, clock: Clock, **kwargs):
        super().__init__(**kwargs)
        self.clock = clock

    def stream(self, req):
        self.clock.now += self.clock.step
        return super().stream(req)


def test_the_time_cap_stops_a_sweep_with_the_points_it_has(monkeypatch):
    clock = Clock(step=30.0)
    monkeypatch.setattr(sweep_tab, "time", clock)
    backend = Slow(clock, limits=replace(app.Limits(), time_budget_s=60.0))  # the sweep: 2 * 60 = 120 s
    *_, (status, fig, table, state) = sweep(backend, spec="1..4")
    # the warm-up ends at 30 s, the baseline at 60 s, k = 1 at 90 s, k = 2 at 120 s: the time is up
    assert status == "Stopped at this server's time limit for a sweep (120 s), after 2 of 4 points."
    assert [row[0] for row in table["data"]] == [1, 2] and len(fig.data) == 7
    budgets = [r.run.time_budget_s for r in backend.requests]
    assert budgets == [60.0, 60.0, 60.0, 30.0]  # no run may outlast what is left of the sweep


def test_the_language_switch_redraws_the_last_sweep():
    *_, (_, _, _, state) = sweep(Recording(), spec="1..3")
    status, fig, table = sweep_tab.redraw(state, "k", "中文")
    assert status.startswith("完成：3 个点") and table["headers"][0] == "k（每轮猜测数）"
    assert fig.layout.title.text.startswith("实测扫描") and "实测" in [t.name for t in fig.data]
    empty = sweep_tab.redraw(None, "nodes", "中文")
    assert empty[:2] == (SKIP, SKIP) and empty[2] == {"headers": ["树节点数", *empty[2]["headers"][1:]], "data": []}


def test_the_method_picks_what_to_sweep():
    assert sweep_tab.follow_method("eagle", "k") == ("nodes", "1,2,4,8,16,32,48")
    assert sweep_tab.follow_method("ngram", "nodes") == ("k", "1..8")
    assert sweep_tab.follow_method("draft", "nodes") == (SKIP, SKIP) == sweep_tab.follow_method("ngram", "k")


def test_the_page_has_the_tab_on_the_shared_model_queue():
    demo = app.build_demo(Recording())
    ids = {getattr(block, "elem_id", None) for block in demo.blocks.values()}
    assert {"sweep-button", "sweep-range", "sweep-plot", "sweep-table", "sweep-status"} <= ids
    [fn] = [f for f in demo.fns.values() if any(getattr(o, "elem_id", None) == "sweep-plot" for o in f.outputs)
            and f.concurrency_id == "model"]
    assert fn.concurrency_limit == 1 and fn.api_visibility == "private"
