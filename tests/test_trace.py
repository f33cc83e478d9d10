"""Traces: save, load, version and field checks, and replay in the app with model loading blocked."""
from __future__ import annotations

import json
import shutil

import gradio as gr
import plotly.graph_objects as go
import pytest

import app
import specviz.models
from specviz import trace
from specviz.config import RunConfig, SamplingConfig
from test_app import FakeBackend, canned_run


def sample_trace() -> trace.Trace:
    runs = {m: list(canned_run(m, 24, 4)) for m in ("baseline", "ngram", "eagle")}
    return trace.Trace(model="fake-model", prompt="Count to ten", runs=runs, run=RunConfig(max_new_tokens=24),
                       sampling=SamplingConfig(temperature=0.0, seed=3))


def test_a_trace_round_trips_through_json(tmp_path):
    original = sample_trace()
    loaded = trace.load(trace.save(original, tmp_path / "t.json"))
    assert loaded.runs == original.runs and loaded.run == original.run and loaded.sampling == original.sampling
    assert (loaded.model, loaded.prompt) == ("fake-model", "Count to ten")
    assert {"python", "gradio"} <= set(loaded.versions) and loaded.created
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["format"] == trace.FORMAT and data["version"] == trace.VERSION


def test_a_saved_trace_carries_the_running_codes_version(tmp_path):
    version = trace.code_version()
    assert len(version) == 12 and int(version, 16) >= 0
    loaded = trace.load(trace.save(sample_trace(), tmp_path / "t.json"))
    assert json.loads((tmp_path / "t.json").read_text())["versions"]["specviz"] == version
    assert loaded.recorded_with == version and loaded.stale is False


def copy_sources(root):
    shutil.copytree(trace.ROOT / "specviz", root / "specviz", ignore=shutil.ignore_patterns("__pycache__", "train"))
    return root


def test_the_code_version_follows_the_sources_that_decide_rounds(tmp_path):
    roots = [copy_sources(tmp_path / name) for name in ("same", "view", "engine", "weights")]
    hashed = {p.relative_to(roots[0]).as_posix() for p in trace.source_files(roots[0])}
    # the engine, what it imports at any depth (thin.py only through models.py), and no view module
    assert {"specviz/engine.py", "specviz/verify.py", "specviz/methods/eagle.py", "specviz/thin.py"} <= hashed
    assert not {"specviz/render.py", "specviz/trace.py", "specviz/i18n.py", "specviz/bench.py"} & hashed
    assert {p.relative_to(trace.ROOT).as_posix() for p in trace.source_files()} >= hashed | {
        "assets/eagle/model.safetensors", "assets/eagle/config.json"}
    with open(roots[1] / "specviz" / "render.py", "a") as f:
        f.write("\n# a view module: no round changes\n")
    (roots[1] / "specviz" / "new_view.py").write_text("from specviz import engine\n")  # imports the engine, not imported
    with open(roots[2] / "specviz" / "engine.py", "a") as f:
        f.write("\n# the engine changed\n")
    (roots[3] / "assets" / "eagle").mkdir(parents=True)
    (roots[3] / "assets" / "eagle" / "model.safetensors").write_bytes(b"other weights")
    same, view, engine, weights = (trace.code_version(root) for root in roots)
    assert same == view == trace.code_version(copy_sources(tmp_path / "elsewhere"))  # where the files lie is moot
    assert len({same, engine, weights}) == 3


def test_a_trace_from_other_code_is_stale_and_an_old_one_of_unknown_version():
    data = sample_trace().to_dict()
    data["versions"]["specviz"] = "0123456789ab"
    other = trace.from_dict(data)
    assert other.recorded_with == "0123456789ab" and other.stale is True
    del data["versions"]["specviz"]  # written before traces carried the code's version
    old = trace.from_dict(data)
    assert old.recorded_with is None and old.stale is None and old.runs == sample_trace().runs
    data.pop("versions")
    assert trace.from_dict(data).stale is None


def test_unknown_fields_from_a_newer_writer_are_ignored():
    data = sample_trace().to_dict()
    data["future_field"] = {"anything": 1}
    data["runs"]["ngram"][0]["future_round_field"] = [1, 2]
    data["run"]["future_setting"] = True
    loaded = trace.from_dict(data)
    assert loaded.runs["ngram"] == sample_trace().runs["ngram"]


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(version=trace.VERSION + 1), "newer specviz"),
    (lambda d: d.update(version="one"), "positive whole number"),
    (lambda d: d.pop("format"), "not a specviz trace"),
    (lambda d: d.pop("prompt"), "lacks required field.*prompt"),
    (lambda d: d.update(runs={}), "hold one at least"),
    (lambda d: d["runs"]["ngram"][1].pop("emitted"), "round 2 of run 'ngram' lacks required field.*emitted"),
    (lambda d: d.update(sampling=[0.8]), "\"sampling\" must be an object"),
])
def test_a_trace_that_cannot_be_read_says_why(change, message):
    data = sample_trace().to_dict()
    change(data)
    with pytest.raises(trace.TraceError, match=message):
        trace.from_dict(data)


def test_not_json_and_missing_files_are_trace_errors(tmp_path):
    with pytest.raises(trace.TraceError, match="not JSON"):
        trace.loads("{oops")
    with pytest.raises(trace.TraceError, match="cannot read"):
        trace.load(tmp_path / "absent.json")


@pytest.fixture
def no_model(monkeypatch):
    """Any attempt to load a model fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a replay must not load a model")

    monkeypatch.setattr(specviz.models, "load_target", refuse)
    monkeypatch.setattr(app, "load_target", refuse)
    app.load_model.cache_clear()
    yield
    app.load_model.cache_clear()


def test_a_saved_comparison_replays_with_model_loading_blocked(tmp_path, no_model):
    backend = FakeBackend()
    final = list(app.run_compare(backend, "Count to ten", ["ngram", "eagle"], 4, 0.0, 1.0, 24, 0, "fake-model", {}))[-1]
    path, deploy, saved = app.trace_file(backend, final[-2], "Count to ten", 4, 0.0, 1.0, 24, 0, "fake-model")
    assert deploy == app.production_markdown(saved) and saved.runs == trace.load(path).runs
    assert "speculative_config" in deploy and "prompt_lookup_num_tokens" in deploy and "eagle" in deploy
    assert list(trace.load(path).runs) == ["baseline", "ngram", "eagle"]
    app.build_demo(app.EngineBackend(("embedded",)))  # the page builds without loading a model too
    outs = list(app.replay(path, None, 0))
    assert len(outs) == 1  # speed 0: at once
    status, first, second, third = outs[-1][:4]
    assert "Trace" in status and "fake-model" in status and "Count to ten" in status
    assert "baseline" in first["value"] and "sv-accepted" in second["value"] and third["visible"]
    table, figures, runs, choice = outs[-1][5]["data"], outs[-1][6:10], outs[-1][10], outs[-1][11]
    assert outs[-1][12] == deploy
    assert [row[-1] for row in table] == ["yes", "yes", "yes"]  # the same lossless check as a live comparison
    assert all(isinstance(f, go.Figure) for f in figures)
    assert runs == trace.load(path).runs and choice["value"] == "ngram"  # step mode starts on the first guesser
    status, stream, narration, tree, tokens, why_node, why_panel, state = app.replay_step(runs, "eagle")
    assert "round **1**" in status and "<svg" in tree and narration
    assert app.step_move(state, delta=1)[-1]["pos"] == 1


def test_a_replay_at_speed_streams_round_by_round(tmp_path, monkeypatch, no_model):
    path = trace.save(sample_trace(), tmp_path / "t.json")
    waits = []
    monkeypatch.setattr(app.time, "sleep", waits.append)
    outs = list(app.replay(str(path), None, 2))
    n_rounds = sum(len(r) for r in sample_trace().runs.values())
    assert len(outs) == n_rounds + 1 and len(waits) == n_rounds
    assert all(0 <= w <= app.MAX_REPLAY_PAUSE_S for w in waits) and max(waits) > 0


def test_a_single_live_run_saves_a_trace(no_model):
    backend = FakeBackend()
    final = list(app.run_single(backend, "hi", "ngram", 4, 0.8, 1.0, 24, 5, "fake-model", False, {}))[-1]
    last_run = final[app.RUN_FIELDS.index("last_run")]
    path, deploy, _ = app.save_single(backend, last_run, "hi", 4, 0.8, 1.0, 24, 5, "fake-model")
    t = trace.load(path)
    assert "'temperature': 0.8" in deploy and "'num_speculative_tokens': 4" in deploy
    assert list(t.runs) == ["ngram"] and t.sampling == SamplingConfig(temperature=0.8, seed=5)
    assert app.save_single(backend, [], "hi", 4, 0.8, 1.0, 24, 5, "fake-model") == (None, "", None)


def test_replay_errors_are_readable(tmp_path, no_model):
    with pytest.raises(gr.Error, match="Upload a trace"):
        list(app.replay(None, None, 1))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"format": trace.FORMAT, "version": 99}))
    with pytest.raises(gr.Error, match="newer specviz"):
        list(app.replay(str(bad), None, 1))
    with pytest.raises(gr.Error, match="Replay a trace first"):
        app.replay_step({}, None)


def test_the_demo_traces_load_and_replay(no_model):
    names = app.demo_traces()
    for name in names:
        t = trace.load(app.DEMO_TRACES / f"{name}.json")
        assert t.model == specviz.models.EMBEDDED and "baseline" in t.runs
        assert list(app.replay(None, name, 0))[-1][0].startswith("**Trace**")
    eagle = trace.load(app.DEMO_TRACES / "eagle.json")  # a tree method, replayed with the same trees
    assert list(eagle.runs) == ["baseline", "eagle", "medusa", "draft"]
    tree_round = next(r for r in eagle.runs["eagle"] if r.n_proposed > r.k)
    assert "<svg" in app.inspect_round([tree_round], 1)[0]
    status, *_ = app.replay_step(eagle.runs, "eagle")
    assert "eagle" in status
    sampled = [trace.load(app.DEMO_TRACES / f"{n}.json") for n in names if "sampling" in n]
    assert sampled
    for name, t in zip([n for n in names if "sampling" in n], sampled):
        temperature = float(name.rsplit("_t", 1)[1])  # the file is named after its temperature
        assert t.sampling.temperature == temperature > 0
        assert all(r.temperature == temperature for rounds in t.runs.values() for r in rounds)
        assert any(r.bonus_source == "residual" for rounds in t.runs.values() for r in rounds)


def test_the_heading_names_each_tree_runs_largest_tree():
    runs = {m: list(canned_run(m, 12, k)) for m, k in (("baseline", 4), ("ngram", 4), ("eagle", 3))}
    t = trace.Trace(model="tiny", prompt="p", runs=runs)
    biggest = max(r.n_proposed for r in runs["eagle"])
    assert biggest == 6  # two candidates at each of 3 depths
    heading = app.trace_heading(t)
    assert "baseline, ngram, eagle (trees of up to 6 nodes)" in heading  # chains are named as they are
    assert "eagle（每轮最多 6 个节点的树）" in app.trace_heading(t, "zh")
