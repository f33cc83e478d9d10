"""Robustness of the engine and the loaders (issue 6).

Property-based: random prompts and parameters never crash the engine; every refusal is a clear
ValueError before anything runs; every greedy output equals the baseline's. Then the faults: a time
budget, a stopped run, missing or corrupt weights, an unreachable hub; and a scan of the sources for
remote code and unsafe unpickling."""
from __future__ import annotations

import functools
import re
import shutil
import socket
import time
from pathlib import Path
from typing import Optional

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import TINY_VOCAB, noisy_copy, tiny_llama, tiny_target
from specviz.config import MAX_K, RunConfig, SamplingConfig
from specviz.engine import generate
from specviz.models import ModelLoadError, load_target

ROOT = Path(__file__).resolve().parent.parent

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


# --- faults: a run past its time budget, a run stopped mid-stream --------------------------------------

def test_a_run_past_its_time_budget_ends_with_a_prefix_of_the_baseline(target):
    plain = list(generate(target, "baseline", "hello there", RunConfig(max_new_tokens=30), SamplingConfig()))
    for method in ("baseline", "ngram"):
        run = RunConfig(max_new_tokens=30, time_budget_s=1e-9)  # every round overruns it: one round, then stop
        rounds = list(generate(target, method, "hello there", run, SamplingConfig()))
        assert len(rounds) == 1 and rounds[0].finished and rounds[0].stop_reason == "time_budget"
        assert rounds[0].emitted == [t for r in plain for t in r.emitted][: len(rounds[0].emitted)]
    again = list(generate(target, "ngram", "hello there", RunConfig(max_new_tokens=30), SamplingConfig()))
    assert "".join(r.text for r in again) == "".join(r.text for r in plain)  # the next run is unaffected
    with pytest.raises(ValueError, match="time_budget_s must be >= 0"):
        generate(target, "baseline", "hello", RunConfig(time_budget_s=-1.0), SamplingConfig())


def test_a_run_stopped_mid_stream_leaves_the_next_run_unaffected(target):
    plain = list(generate(target, "ngram", "count with me", RunConfig(max_new_tokens=30), SamplingConfig()))
    stream = generate(target, "ngram", "count with me", RunConfig(max_new_tokens=30), SamplingConfig())
    next(stream)
    stream.close()  # what the stop button does
    with pytest.raises(StopIteration):
        next(stream)
    again = list(generate(target, "ngram", "count with me", RunConfig(max_new_tokens=30), SamplingConfig()))
    assert [r.emitted for r in again] == [r.emitted for r in plain]


# --- faults: weights that are missing or corrupt, a hub that cannot be reached ------------------------

@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    """A tiny Llama saved like any hub model: config, model.safetensors, a word-level tokenizer."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("models") / "good"
    tiny_llama(0, layers=1, dtype=torch.float32).save_pretrained(folder)
    words = Tokenizer(WordLevel({f"w{i}": i for i in range(TINY_VOCAB)}, unk_token="w0"))
    words.pre_tokenizer = Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=words, unk_token="w0", eos_token="w2").save_pretrained(folder)
    return folder


def broken_copy(folder, name, weights: Optional[bytes], weights_file="model.safetensors"):
    copy = folder.parent / name
    shutil.copytree(folder, copy)
    (copy / "model.safetensors").unlink()
    if weights is not None:
        (copy / weights_file).write_bytes(weights)
    return copy


def test_missing_or_corrupt_weights_give_a_clear_error_naming_the_file(model_folder):
    good = model_folder / "model.safetensors"
    cases = [
        (broken_copy(model_folder, "missing", None), "no loadable model"),
        (broken_copy(model_folder, "garbage", b"not a tensor file" * 64), "model.safetensors is corrupt"),
        (broken_copy(model_folder, "truncated", good.read_bytes()[: good.stat().st_size // 2]),
         "model.safetensors is corrupt or truncated"),
        (broken_copy(model_folder, "pickle", b"garbage" * 100, "pytorch_model.bin"),
         r"pytorch_model.bin: corrupt.*weights_only=True"),
    ]
    for folder, message in cases:
        with pytest.raises(ModelLoadError, match=message):
            load_target(str(folder))
        loaded = load_target(str(model_folder))  # the next load works normally
        assert loaded.vocab_size == TINY_VOCAB


def test_an_unreachable_hub_fails_within_seconds(monkeypatch):
    def unreachable(*args, **kwargs):
        raise TimeoutError("timed out")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(socket, "create_connection", unreachable)
    for offline in (None, "1"):
        if offline:
            monkeypatch.setenv("HF_HUB_OFFLINE", offline)
        start = time.perf_counter()
        with pytest.raises(ModelLoadError, match="neither a local folder nor a Hugging Face id"):
            load_target("specviz-tests/no-such-model-anywhere")
        assert time.perf_counter() - start < 10


# --- a public server: no remote code, no unsafe unpickling -------------------------------------------

SOURCES = sorted([ROOT / "app.py", *(ROOT / "specviz").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")])


def test_no_remote_code_and_weights_only_through_safe_loaders():
    assert len(SOURCES) > 10
    for path in SOURCES:
        code = path.read_text(encoding="utf-8")
        assert not re.search(r"trust_remote_code\s*=\s*True", code), path
        for call in re.finditer(r"torch\.load\(", code):
            args = code[call.end(): call.end() + 300].split("\n)")[0]
            assert re.search(r"weights_only\s*=\s*True", args), f"{path}: torch.load without weights_only=True"
        assert not re.search(r"\bpickle\.loads?\(|(?<![.\w])(eval|exec)\(", code), path


@pytest.mark.parametrize("args, message", [
    (["--max-new-tokens", "0"], "max_new_tokens must be an integer >= 1"),
    (["--k", "99"], "k must be an integer from 1 to"),
    (["--temperature", "-1"], "temperature must be >= 0"),
    (["--top-p", "0"], "top_p must be in"),
    (["--methods", "ngram,telepathy"], "unknown method 'telepathy'"),
    (["--model", "specviz-tests/no-such-model-anywhere"], "could not load model"),
    (["--methods", "eagle:nodez=8"], "method 'eagle' has no option 'nodez'"),
    (["--methods", "ngram:k=40"], "k must be an integer from 1 to"),
    (["--methods", "ngram:max_ngram"], "is not KEY=VALUE"),
    (["--methods", "medusa:typical=2"], "typical must be 0 or 1"),
    (["--methods", "medusa:typical_alpha=3"], "typical_epsilon and typical_alpha must be in [0, 1]"),
    (["--random-init"], "--random-init needs --model FOLDER"),
])
def test_the_benchmark_refuses_bad_settings_in_one_line(args, message, capsys, monkeypatch):
    from specviz.bench import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["--limit", "1", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bench_method_specs_parse_options():
    from specviz.bench import parse_spec

    assert parse_spec("eagle") == ("eagle", {})
    assert parse_spec(" eagle:nodes=16:k=3:lookup=0 ") == ("eagle", {"nodes": 16, "k": 3, "lookup": 0})
    assert parse_spec("ngram:fallback_threshold=0.25:weights=a/b") == ("ngram", {"fallback_threshold": 0.25,
                                                                                 "weights": "a/b"})
