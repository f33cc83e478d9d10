"""The production configuration: vLLM and transformers arguments from a run's settings.

The transformers arguments are checked the only sure way: by calling generate() with them."""
from __future__ import annotations

import sys

import pytest
import torch

from specviz import production
from specviz.config import RunConfig, SamplingConfig
from conftest import noisy_copy, tiny_target

GREEDY = SamplingConfig()


def test_production_imports_no_torch():
    code = "import sys, specviz.production; assert 'torch' not in sys.modules"
    import subprocess
    subprocess.run([sys.executable, "-c", code], check=True)


def test_vllm_config_follows_the_run():
    d = production.deployment("ngram", "embedded:SmolLM2-135M-Instruct", RunConfig(k=6, max_new_tokens=40),
                              SamplingConfig(temperature=0.8, top_p=0.9, seed=7), batch_cutoff=8,
                              max_model_len=2048)
    assert d.vllm_llm == {"model": production.EMBEDDED_HUB_ID, "max_model_len": 2048, "speculative_config": {
        "method": "ngram", "num_speculative_tokens": 6, "prompt_lookup_max": 8, "prompt_lookup_min": 2,
        "disable_by_batch_size": 8}}
    assert d.vllm_sampling == {"max_tokens": 40, "temperature": 0.8, "seed": 7, "top_p": 0.9}
    assert d.transformers_generate == {"prompt_lookup_num_tokens": 6, "max_matching_ngram_size": 8,
                                       "max_new_tokens": 40, "do_sample": True, "temperature": 0.8, "top_p": 0.9}
    text = production.markdown(d)
    assert "speculative_config" in text and "prompt_lookup_num_tokens" in text and "True" in text


def test_the_ngram_sizes_are_the_engines_defaults():
    from specviz.methods.ngram import NgramOptions

    d = production.deployment("ngram", "m", RunConfig(), GREEDY)
    lookup = d.vllm_llm["speculative_config"]
    assert (lookup["prompt_lookup_max"], lookup["prompt_lookup_min"]) == (NgramOptions.max_ngram, NgramOptions.min_ngram)


def test_what_has_no_equivalent_is_said_not_invented():
    medusa = production.deployment("medusa", "some/model", RunConfig(adaptive_k=True, fallback_threshold=0.3), GREEDY)
    assert medusa.transformers_generate is None and medusa.vllm_llm["speculative_config"]["method"] == "medusa"
    notes = " ".join(medusa.note_texts())
    assert "no medusa decoding" in notes and "adaptive k" in notes and "falls back" in notes
    assert "no equivalent in `generate()`" in production.markdown(medusa)
    base = production.deployment("baseline", "some/model", RunConfig(), GREEDY)
    assert base.vllm_llm == {"model": "some/model"} and base.transformers_generate == {"max_new_tokens": 128,
                                                                                       "do_sample": False}
    unknown = production.deployment("mystery", "m", RunConfig(), GREEDY)
    assert unknown.vllm_llm is None and unknown.transformers_generate is None
    assert "vLLM: no equivalent" in production.markdown(unknown)
    draft = production.deployment("draft", "m", RunConfig(k=5, adaptive_k=True), GREEDY, draft="small/model")
    assert draft.transformers_generate["num_assistant_tokens_schedule"] == "heuristic"
    assert draft.vllm_llm["speculative_config"] == {"method": "draft_model", "model": "small/model",
                                                    "num_speculative_tokens": 5}


def generate_with(model, prompt: torch.Tensor, kwargs: dict) -> list[int]:
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt), pad_token_id=0, eos_token_id=None,
                         **kwargs)
    return out[0, prompt.shape[1]:].tolist()


@pytest.mark.parametrize("method", ["baseline", "ngram", "draft"])
def test_the_transformers_arguments_run_in_generate_and_match_greedy(method):
    target = tiny_target(0).model
    prompt = torch.tensor([[5, 9, 14, 5, 9, 14, 5, 9, 20, 31]])
    run = RunConfig(k=3, max_new_tokens=12, adaptive_k=method == "draft")
    kwargs = dict(production.deployment(method, "tiny", run, GREEDY, draft="tiny-draft").transformers_generate)
    if "assistant_model" in kwargs:
        assert kwargs["assistant_model"] == "tiny-draft"
        kwargs["assistant_model"] = noisy_copy(0).model  # the id, loaded
    plain = generate_with(target, prompt, {"max_new_tokens": 12, "do_sample": False})
    assert generate_with(target, prompt, kwargs) == plain


def test_the_sampling_arguments_run_in_generate():
    target = tiny_target(0).model
    kwargs = production.deployment("ngram", "tiny", RunConfig(k=2, max_new_tokens=6),
                                   SamplingConfig(temperature=0.8, top_p=0.9, top_k=20, seed=1)).transformers_generate
    torch.manual_seed(0)
    assert len(generate_with(target, torch.tensor([[5, 9, 14, 5, 9]]), kwargs)) == 6
