"""The settings specviz exports run in a real vLLM (issue 23), on the embedded model, greedy, float32.

vLLM lives in its own virtual environment (scripts/vllm_env.sh; .ci/run builds it). Every test here starts one
real vLLM engine (about a minute on 2 cores), with the exact `LLM(...)` arguments specviz.production writes for a
run, the hub id replaced by the local folder of the same weights. Skipped, with the reason, where no vLLM
environment can be found.
"""
from __future__ import annotations

import functools

import pytest

from specviz import peer, production
from specviz.config import RunConfig, SamplingConfig
from specviz.engine import generate
from specviz.events import summarize
from specviz.models import embedded_folder

PROMPTS = ["Fix the spelling: I have too many freinds and they are my best freinds.",
           "List three uses of a paperclip.",
           "Convert to JSON: name Maria, age 29, city Lisbon."]
RUN = RunConfig(max_new_tokens=40, k=4)


@functools.lru_cache(maxsize=1)
def reason() -> str | None:
    return peer.missing_reason()


pytestmark = pytest.mark.skipif(reason() is not None, reason=f"vLLM is not available here: {reason()}")


@pytest.fixture(scope="module")
def target(embedded):
    return embedded


@pytest.fixture(scope="module")
def baseline(target):
    """specviz's plain greedy tokens for each prompt, end-of-sequence cut off (vLLM reports it in token_ids)."""
    out = []
    for prompt in PROMPTS:
        ids = [t for r in generate(target, "baseline", prompt, RUN, SamplingConfig()) for t in r.emitted]
        out.append([t for t in ids if t not in target.eos_ids])
    return out


@pytest.fixture(scope="module")
def folders(target, tmp_path_factory):
    """Every shipped weight set in vLLM's layout, under the names production.py writes for them."""
    from specviz.train.export import export_vllm

    root = tmp_path_factory.mktemp("vllm-exports")
    written = {}
    for method in ("eagle", "medusa", "draft"):
        export_vllm(method, root / method, target=target)
        written[production.exported_folder(method)] = str(root / method)
    return written


def run_exported(method: str, target, folders: dict, log) -> tuple[production.Deployment, peer.PeerResult]:
    d = production.deployment(method, "embedded:SmolLM2-135M-Instruct", RUN, SamplingConfig())
    assert d.vllm_llm is not None, f"{method}: production.py writes no vLLM settings"
    llm = peer.local_llm(d.vllm_llm, str(embedded_folder()), folders)
    prompts = [target.encode_prompt(p) for p in PROMPTS]
    return d, peer.run_vllm(llm, d.vllm_sampling, prompts, log=log)


@pytest.mark.parametrize("method", ["baseline", "ngram", "draft", "medusa", "eagle"])
def test_every_exported_vllm_snippet_runs_and_returns_the_baseline_text(method, target, baseline, folders, tmp_path):
    log = tmp_path / "vllm.log"
    try:
        d, result = run_exported(method, target, folders, log)
    except peer.PeerError as err:
        tail = log.read_text()[-3000:] if log.is_file() else ""
        pytest.fail(f"vLLM refused the settings specviz exports for {method}: {err}\n{tail}")
    for prompt, want, run in zip(PROMPTS, baseline, result.runs):
        got = [t for t in run.token_ids if t not in target.eos_ids]
        assert got == want, f"{method} on {prompt!r}: vLLM {run.text!r} differs from specviz's baseline"
    drafted = sum(r.counters["drafts"] for r in result.runs)
    accepted = sum(r.counters["accepted"] for r in result.runs)
    if method == "baseline":
        assert drafted == 0 and "speculative_config" not in d.vllm_llm
    else:  # the drafter really ran: vLLM's own counters moved, and some guesses were kept
        assert drafted > 0 and accepted > 0, f"{method}: vLLM drafted {drafted} times, accepted {accepted}"
        spec = d.vllm_llm["speculative_config"]
        assert len(result.runs[0].counters["accepted_per_pos"]) == spec["num_speculative_tokens"]


def test_the_exported_eagle_head_is_the_same_drafter_in_specviz(target, folders):
    """The export (no fc bias, full vocabulary) still drafts well in specviz: tau within 10% of the shipped head's."""
    eagle = folders[production.exported_folder("eagle")]
    taus = []
    for weights in (None, eagle):
        options = {"weights": weights} if weights else {}
        rounds = [r for p in PROMPTS for r in generate(target, "eagle", p, RUN, SamplingConfig(), **options)]
        taus.append(summarize(rounds)["new_tokens"] / len(rounds))
    assert taus[1] >= 0.9 * taus[0], taus
