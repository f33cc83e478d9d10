"""Measured sweeps: the spec parser, acceptance per checked token, the prediction, verify cost, the sweep itself
on tiny random models, its figure and its command line."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace

import pytest

from conftest import tiny_target
from specviz.config import RunConfig, SamplingConfig
from specviz.events import ACCEPTED, PLAIN, REJECTED, SPECULATE, UNREACHED, Round, summarize
from specviz.explain import CostInputs, evaluate
from specviz.sweep import (Sweep, checked_acceptance, format_sweep_table, interpolate, parse_sweep,
                           predict,
                           run_sweep, sweep_figure, sweep_row, verify_cost)

A, R, U = ACCEPTED, REJECTED, UNREACHED


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Timed forwards on one thread: on a shared 2-core machine two threads wait on each other (a 2-token
    forward of the tiny model took 250 ms instead of 2 ms while other work ran)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
REPEATING = ["abcdefabcdefabcdefabcdefabcdef", "the cat sat on the mat; the cat sat on the mat; the cat"]


@pytest.mark.parametrize("spec, param, values", [
    ("k=1..8", "k", (1, 2, 3, 4, 5, 6, 7, 8)),
    (" nodes=1,2,4,8,16,32,48 ", "nodes", (1, 2, 4, 8, 16, 32, 48)),
    ("k=3", "k", (3,)),
    ("k=6,1..3", "k", (1, 2, 3, 6)),
])
def test_parse_sweep_reads_ranges_and_lists(spec, param, values):
    assert parse_sweep(spec) == Sweep(param, values)


@pytest.mark.parametrize("spec, message", [
    ("k1..8", "expected PARAM=VALUES"),
    ("depth=1..3", "can sweep k or nodes, not 'depth'"),
    ("k=1..x", "'1..x' is not an integer or a range"),
    ("k=", "'' is not an integer"),
    ("k=1,,2", "'' is not an integer"),
    ("k=8..1", "the range '8..1' is empty"),
    ("nodes=0,1", "nodes must be at least 1"),
    ("k=1..4,3", "a value appears twice"),
    ("k=1.5", "'1.5' is not an integer"),
])
def test_parse_sweep_refuses_bad_specs_clearly(spec, message):
    with pytest.raises(ValueError) as err:
        parse_sweep(spec)
    assert message in str(err.value)


def rnd(tokens: int, parents: list[int], status: list[str], path: list[int], index: int = 0) -> Round:
    """A round with only what acceptance reads: the tree, the statuses and the kept path."""
    emitted = [7] * (len(path) + 1)
    return Round(index=index, method="test", mode=SPECULATE if tokens else PLAIN, k=max(tokens, 1),
                 tokens=[5] * tokens, parents=parents, pieces=["x"] * tokens, status=status,
                 draft_probs=[None] * tokens, target_probs=[0.5] * tokens, accepted_path=path, bonus_token=7,
                 bonus_piece="y", bonus_prob=0.5, bonus_source="target", emitted=emitted, text="z" * len(emitted),
                 draft_time_s=0.0, verify_time_s=0.01, elapsed_s=0.01 * (index + 1), tokens_so_far=0,
                 finished=False, stop_reason=None)


def test_checked_acceptance_counts_only_guesses_the_target_looked_at():
    chain = rnd(4, [-1, 0, 1, 2], [A, A, R, U], [0, 1])  # 2 kept of 3 checked; the 4th was never reached
    full = rnd(2, [-1, 0], [A, A], [0, 1])
    nothing = rnd(0, [], [], [])
    assert checked_acceptance([chain]) == pytest.approx(2 / 3)
    assert checked_acceptance([chain, full, nothing]) == pytest.approx(4 / 5)  # pooled, not a mean of ratios
    assert checked_acceptance([nothing]) is None
    assert checked_acceptance([rnd(3, [-1, 0, 1], [R, U, U], [])]) == 0.0
    assert a_of([chain, full, nothing]) == pytest.approx(4 / 5)  # for chains the two agree


def a_of(rounds):
    """The formula's a, as events.summarize defines it (per checked level)."""
    return summarize(rounds)["a"]


def test_on_a_tree_path_acceptance_is_per_level_and_checked_acceptance_per_node():
    # root -> X (rejected), Y (kept); Y -> Z, W (both rejected); X -> V (never reached)
    tree = rnd(5, [-1, -1, 1, 1, 0], [R, A, R, R, U], [1])
    assert checked_acceptance([tree]) == pytest.approx(1 / 4)
    assert a_of([tree]) == pytest.approx(1 / 2)  # the root's level kept one, Y's level none
    assert summarize([tree])["a_by_depth"] == [1.0, 0.0]  # depth 1 kept Y; depth 2 (below Y) kept nothing
    leaf = rnd(3, [-1, -1, 1], [R, A, A], [1, 2])  # the kept path ends in a leaf: no failed level
    assert a_of([leaf]) == 1.0
    assert checked_acceptance([leaf]) == pytest.approx(2 / 3)


def test_the_prediction_is_the_formula():
    a, k, c, c_v = 0.6, 4, 0.05, 1.8
    tau = (1 - a ** (k + 1)) / (1 - a)
    assert predict(a, k, c, c_v) == pytest.approx((tau, tau / (c_v + k * c)))
    assert predict(1.0, 3, 0.0, 2.0) == pytest.approx((4.0, 2.0))
    # with c_v = 1 (a forward over k+1 tokens costs what one over 1 does) it is explain's loop speedup
    assert predict(a, k, c, 1.0)[1] == pytest.approx(evaluate(CostInputs(c=c, a=a, k=k)).loop_speedup)


def test_a_row_pools_prompts_and_compares_texts_per_prompt():
    def plain(texts: list[str]) -> list[Round]:  # one plain round per token, 0.01 s each
        return [replace(rnd(0, [], [], [], i), text=t, tokens_so_far=i + 1, elapsed_s=0.1 * (i + 1))
                for i, t in enumerate(texts)]

    def guessed(texts: list[str]) -> list[Round]:  # kept 2 of 2, then 1 of 2: 3 + 2 tokens in 0.25 s
        first = rnd(2, [-1, 0], [A, A], [0, 1], 0)
        second = rnd(2, [-1, 0], [A, R], [0], 1)
        return [replace(first, text=texts[0], tokens_so_far=3, draft_time_s=0.002, elapsed_s=0.1),
                replace(second, text=texts[1], tokens_so_far=5, draft_time_s=0.002, elapsed_s=0.25)]

    base = [plain(list("abcde")), plain(list("vwxyz"))]  # 10 tokens in 0.5 s + 0.5 s: 10 tokens/s
    runs = [guessed(["abc", "de"]), guessed(["vwx", "yq"])]  # 10 tokens in 0.5 s: 20 tokens/s
    row = sweep_row(Sweep("k", (2,)), 2, runs, base, {1: 1.0, 3: 1.5}, RunConfig(), greedy=True)
    assert (row["tau"], row["speedup"], row["tokens_per_s"]) == pytest.approx((2.5, 2.0, 20.0))
    assert (row["a"], row["a_path"], row["acceptance"]) == pytest.approx((0.75, 0.75, 0.75))
    assert (row["c"], row["c_v"], row["n_verify"]) == pytest.approx((0.1, 1.5, 3))  # 2 ms a round / k=2 / 10 ms
    assert (row["predicted_tau"], row["predicted_speedup"]) == pytest.approx(predict(0.75, 2, 0.1, 1.5))
    # as guessed: every round guessed 2 levels in 2 nodes, as set
    assert (row["predicted_tau_as_guessed"], row["predicted_speedup_as_guessed"]) == pytest.approx(predict(0.75, 2, 0.1, 1.5))
    assert row["speedup_at_measured_tau"] == pytest.approx(2.5 / (1.5 + 0.2))
    half = [[r if r.index else replace(r, tokens=[], parents=[], status=[], accepted_path=[]) for r in rs]
            for rs in runs]  # the first round of each prompt guessed nothing
    row = sweep_row(Sweep("k", (2,)), 2, half, base, {1: 1.0, 3: 1.5}, RunConfig(), greedy=True)
    assert row["a_path"] == 0.5 and row["depth"] == 1.0
    tau_2 = predict(0.5, 2, 0.1, 1.5)[0]
    assert row["predicted_tau_as_guessed"] == pytest.approx((1 + tau_2) / 2)
    assert row["predicted_speedup_as_guessed"] == pytest.approx((1 + tau_2) / 2 / ((1.0 + 1.5) / 2 + 0.2))
    assert row["identical_to_baseline"] is False  # the second prompt's text differs
    runs[1] = guessed(["vwx", "yz"])
    assert sweep_row(Sweep("k", (2,)), 2, runs, base, {1: 1.0, 3: 1.5}, RunConfig(), greedy=True)["identical_to_baseline"]
    with pytest.raises(ValueError, match="no verify cost for n = 3"):
        sweep_row(Sweep("k", (2,)), 2, runs, base, {1: 1.0}, RunConfig(), greedy=True)


def test_interpolate_fills_between_measured_sizes():
    costs = {1: 1.0, 3: 2.0, 5: 2.4}
    assert [interpolate(costs, n) for n in (1, 2, 3, 4, 6)] == pytest.approx([1.0, 1.5, 2.0, 2.2, 2.4])


def test_verify_cost_is_one_at_one_token_and_positive_elsewhere():
    costs = verify_cost(tiny_target(0), [4, 2], context=32, repeats=2)
    assert list(costs) == [1, 2, 4] and costs[1] == 1.0
    assert all(c > 0 and math.isfinite(c) for c in costs.values())
    assert set(verify_cost(tiny_target(0), [3], context=16, repeats=1, chain=False)) == {1, 3}
    with pytest.raises(ValueError, match="exceeds the model's"):
        verify_cost(tiny_target(0), [8], context=600)


def test_run_sweep_gives_one_row_per_value_lossless_and_predicted():
    target, run = tiny_target(0), RunConfig(max_new_tokens=24)
    rows = run_sweep(target, "ngram", REPEATING, parse_sweep("k=1..3"), run, SamplingConfig(), {"min_ngram": 1})
    assert [r["value"] for r in rows] == [1, 2, 3] and [r["k"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert r["identical_to_baseline"] is True
        assert r["tau"] >= 1 and r["prompts"] == 2 and r["c_v"] > 0
        assert (r["predicted_tau"], r["predicted_speedup"]) == pytest.approx(predict(r["a_path"], r["k"], r["c"], r["c_v"]))
        assert 0 <= r["a"] <= 1 and r["a"] == pytest.approx(r["a_path"])  # chains
    assert any(r["tau"] > 1 for r in rows), "the repeating prompts should let n-gram lookup keep some guesses"
    assert "pred tau" in format_sweep_table(rows)


def test_a_tree_sweep_verifies_nodes_plus_one_tokens(draft_target):
    costs = {1: 1.0, 2: 1.1, 3: 1.2, 5: 1.5}
    run = RunConfig(max_new_tokens=16, k=3)
    rows = run_sweep(tiny_target(0), "draft", REPEATING[:1], parse_sweep("nodes=1,2,4"), run, SamplingConfig(),
                     {"draft": draft_target, "confidence": 0.0}, costs=costs)
    assert [(r["n_verify"], r["c_v"], r["k"]) for r in rows] == [(2, 1.1, 1), (3, 1.2, 2), (5, 1.5, 3)]
    assert all(r["identical_to_baseline"] for r in rows)
    with pytest.raises(ValueError, match="'nodes' is swept"):
        run_sweep(tiny_target(0), "draft", REPEATING[:1], parse_sweep("nodes=2"), run, SamplingConfig(),
                  {"draft": draft_target, "nodes": 4}, costs=costs)


def test_the_figure_draws_measured_predicted_and_cost_without_torch():
    code = """
import sys
from specviz.sweep import sweep_figure
rows = [dict(param="k", value=v, tau=1 + v / 4, predicted_tau=1 + v / 3, predicted_tau_as_guessed=1 + v / 5,
            speedup=1.1, predicted_speedup=1.3, predicted_speedup_as_guessed=1.2) for v in (1, 2, 3)]
fig = sweep_figure(rows, {1: 1.0, 2: 1.6, 4: 1.9}, method="ngram")
names = [t.name for t in fig.data]
assert [names.count(n) for n in ("measured", "predicted (k as set)", "predicted (as guessed)")] == [2, 2, 2], names
assert list(fig.data[-1].y) == [1.0, 1.6, 1.9] and list(fig.data[1].y) == [1 + v / 3 for v in (1, 2, 3)]
assert list(fig.data[2].y) == [1 + v / 5 for v in (1, 2, 3)] and list(fig.data[5].y) == [1.2] * 3
assert "torch" not in sys.modules
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("args, message", [
    (["--sweep", "k=1..x", "--methods", "ngram"], "is not an integer or a range"),
    (["--sweep", "k=1..3", "--methods", "ngram,draft"], "name exactly one in --methods, got 2"),
    (["--sweep", "k=1..3", "--methods", "baseline"], "got 0"),
    (["--sweep", "k=2..20", "--methods", "ngram"], "k must be an integer from 1 to"),
    (["--sweep", "nodes=1,2", "--methods", "ngram"], "method 'ngram' has no tree size to sweep"),
    (["--sweep", "nodes=1,2", "--methods", "eagle:nodes=4"], "nodes is swept"),
    (["--sweep", "k=1..2", "--methods", "ngram:k=3"], "k is swept"),
    (["--sweep", "k=1..2", "--plot", "out.gif"], "write .html"),
    (["--plot", "out.html"], "it needs --sweep"),
])
def test_the_sweep_command_refuses_bad_settings_before_loading(args, message, capsys, monkeypatch):
    from specviz import bench

    monkeypatch.setattr(bench, "load_models", lambda args: pytest.fail("loaded a model for bad settings"))
    assert bench.main(["--limit", "1", *args]) == 2
    assert message in capsys.readouterr().err


def test_the_sweep_command_writes_table_json_and_html(tmp_path, capsys, monkeypatch):
    from specviz import bench

    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": p, "category": "repeat"}) + "\n" for p in REPEATING))
    monkeypatch.setattr(bench, "load_models", lambda args: (tiny_target(0), {}))
    out, plot = tmp_path / "sweep.json", tmp_path / "sweep.html"
    assert bench.main(["--prompts", str(prompts), "--methods", "ngram:min_ngram=1", "--sweep", "k=1,3",
                       "--max-new-tokens", "12", "--out", str(out), "--plot", str(plot)]) == 0
    table = capsys.readouterr().out
    assert "pred speedup" in table and "c_v(n)" in table
    report = json.loads(out.read_text())
    assert report["param"] == "k" and [r["value"] for r in report["rows"]] == [1, 3]
    assert set(report["verify_cost"]) == {"1", "2", "4"} and report["verify_cost"]["1"] == 1.0
    assert "plotly" in plot.read_text()
