"""specviz.zerogpu with a fake `spaces` module: wrapped only on a ZeroGPU Space that has `spaces`."""
from __future__ import annotations

import functools
import inspect
import sys
import types

import pytest

from specviz import zerogpu


def handler(backend, prompt):
    yield f"{backend}:{prompt}"


@pytest.fixture
def fake_spaces(monkeypatch):
    """A `spaces` whose GPU records what it was given and marks the function it returns."""
    calls = []

    def GPU(task, duration=None):
        calls.append((task, duration))
        wrapped = functools.wraps(task)(lambda *args, **kwargs: task(*args, **kwargs))
        wrapped.zerogpu = None  # the real decorator sets this attribute too
        return wrapped

    monkeypatch.setitem(sys.modules, "spaces", types.SimpleNamespace(GPU=GPU))
    return calls


def test_off_zerogpu_the_function_is_returned_unchanged(monkeypatch, fake_spaces):
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    assert zerogpu.gpu(handler) is handler and zerogpu.gpu(handler, duration=30) is handler
    monkeypatch.setenv("SPACES_ZERO_GPU", "false")
    assert zerogpu.gpu(handler) is handler
    assert zerogpu.prepare() is None and fake_spaces == []


@pytest.mark.parametrize("value", ["true", "True", "1", "t"])
def test_on_zerogpu_spaces_gpu_wraps_it(monkeypatch, fake_spaces, value):
    monkeypatch.setenv("SPACES_ZERO_GPU", value)
    bound = functools.partial(handler, "engine")
    wrapped = zerogpu.gpu(bound, duration=120)
    assert fake_spaces == [(bound, 120)] and hasattr(wrapped, "zerogpu")
    assert list(wrapped("hello")) == ["engine:hello"]
    zerogpu.gpu(handler)
    assert fake_spaces[-1] == (handler, None)  # no duration given: spaces' own default
    assert zerogpu.prepare() is sys.modules["spaces"]


def test_on_zerogpu_without_spaces_the_function_is_returned_unchanged(monkeypatch):
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setitem(sys.modules, "spaces", None)  # makes `import spaces` raise ImportError
    assert zerogpu.gpu(handler, duration=60) is handler and zerogpu.prepare() is None


def test_a_partial_of_a_generator_is_a_generator_function_to_spaces():
    """spaces.GPU picks its streaming wrapper with inspect.isgeneratorfunction, which sees through partial."""
    assert inspect.isgeneratorfunction(functools.partial(handler, "engine"))
    assert not inspect.isgeneratorfunction(functools.partial(lambda backend: backend, "engine"))


def test_the_app_wraps_every_handler_that_runs_a_model(monkeypatch, fake_spaces):
    """On a ZeroGPU Space the live run, side by side, Prepare, the model list, the sweep, the production engine's
    comparison (its specviz half runs the model) and the API get a GPU."""
    import app
    from test_app import FakeBackend

    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    backend = FakeBackend()
    demo = app.build_demo(backend)
    durations = sorted(duration for _, duration in fake_spaces)
    sweep_s = 2 * backend.limits.time_budget_s + 30  # a sweep may take two runs' time, plus the c_v timing
    assert durations == sorted([20, 30, 60, 60, 120, 120, sweep_s])  # ..., the engine tab (120), the sweep
    wrapped = [f for f in demo.fns.values() if hasattr(f.fn, "zerogpu")]
    assert len(wrapped) == 7  # run, compare, prepare, the model list on load and on change, sweep, engine
    # the API's gr.api endpoint reads the undecorated speculate (its signature), which calls the wrapped one
    assert any(getattr(task, "func", None) is app.api_result for task, _ in fake_spaces)
