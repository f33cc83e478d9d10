"""Property-based: random prompts and parameters never crash the engine; every refusal is a clear
ValueError before anything runs; every greedy output equals the baseline's."""
from __future__ import annotations

import functools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import noisy_copy, tiny_target
from specviz.config import MAX_K, RunConfig, SamplingConfig
from specviz.engine import generate

METHODS_HERE = ("baseline", "ngram", "draft", "nope")
CLEAR = ("prompt is empty", "max_new_tokens", "k must be", "temperature", "top_p", "context", "unknown method")


@functools.lru_cache(maxsize=None)
def baseline_text(prompt: str, max_new_tokens: int) -> str:
    rounds = generate(tiny_target(0), "baseline", prompt, RunConfig(max_new_tokens=max_new_tokens), SamplingConfig())
    return "".join(r.text for r in rounds)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prompt=st.text(max_size=60),
       method=st.sampled_from(METHODS_HERE),
       k=st.integers(-1, MAX_K + 2),
       max_new_tokens=st.integers(-2, 520),
       temperature=st.sampled_from([-0.5, 0.0, 0.0, 0.7, 1.3]),
       top_p=st.sampled_from([-0.1, 0.0, 0.5, 0.9, 1.0, 1.5]),
       seed=st.integers(0, 3))
def test_random_requests_get_text_or_a_clear_error(prompt, method, k, max_new_tokens, temperature, top_p, seed):
    target = tiny_target(0)
    options = {"draft": noisy_copy(0)} if method == "draft" else {}
    max_new_tokens = max_new_tokens if max_new_tokens < 40 or max_new_tokens > 500 else 40  # keep runs short
    try:
        run = RunConfig(max_new_tokens=max_new_tokens, k=k, k_max=max(k, 1))
        sampling = SamplingConfig(temperature=temperature, top_p=top_p, seed=seed)
        rounds = list(generate(target, method, prompt, run, sampling, **options))
    except ValueError as err:
        assert any(reason in str(err) for reason in CLEAR), str(err)
        return
    text = "".join(r.text for r in rounds)
    assert rounds and rounds[-1].finished and rounds[-1].tokens_so_far <= max_new_tokens
    if temperature == 0:
        assert text == baseline_text(prompt, max_new_tokens)


@pytest.mark.parametrize("prompt", [
    "tab\tand\x00null\x07bell\x1b[31m escape",
    "\u200f\u202eright-to-left override \u05e9\u05dc\u05d5\u05dd \u200b\u2060 zero width",
    "emoji \U0001f600\U0001f680 and combining e\u0301 \U0001f468\u200d\U0001f469\u200d\U0001f467",
    "mixed scripts: \u4e2d\u6587 \u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0939\u093f\u0928\u094d\u0926\u0940",
])
def test_unusual_text_on_the_embedded_model(embedded, prompt):
    run = RunConfig(max_new_tokens=8, k=3)
    plain = list(generate(embedded, "baseline", prompt, run, SamplingConfig()))
    fast = list(generate(embedded, "ngram", prompt, run, SamplingConfig()))
    assert [r.emitted for r in plain] and sum(len(r.emitted) for r in plain) >= 1
    assert "".join(r.text for r in fast) == "".join(r.text for r in plain)


def test_a_prompt_longer_than_the_context_is_refused(embedded):
    with pytest.raises(ValueError, match="more than the model's context of 8192"):
        list(generate(embedded, "baseline", "word " * 9000, RunConfig(max_new_tokens=8), SamplingConfig()))
