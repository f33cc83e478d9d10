"""Run one vLLM engine over a list of prompts and report what happened, as JSON.

This file runs inside vLLM's own virtual environment (scripts/vllm_env.sh), not specviz's: it imports
only the standard library and vllm. specviz.peer writes a job file and starts it as

    VLLM_CPU_KVCACHE_SPACE=2 $VLLM_PYTHON specviz/vllm_runner.py JOB.json RESULT.json

JOB: {"llm": {keyword arguments of vllm.LLM, e.g. model, dtype, enforce_eager, speculative_config},
      "sampling": {keyword arguments of vllm.SamplingParams},
      "prompts": [[token ids], ...]   # already templated by specviz: both engines read the same ids
      "warmup": true}                 # one short untimed request first (compilation, allocation)
RESULT: {"ok": true, "vllm": version, "load_seconds": s, "runs": [{"token_ids", "text", "seconds",
         "counters": {"drafts", "draft_tokens", "accepted", "accepted_per_pos"}}, ...]}
or {"ok": false, "error": "...", "stage": "load" | "generate"}. Prompts run one at a time (batch 1);
counters are vLLM's own Prometheus counters, read before and after each prompt.
"""
import json
import sys
import time
import traceback

COUNTERS = {"vllm:spec_decode_num_drafts": "drafts", "vllm:spec_decode_num_draft_tokens": "draft_tokens",
            "vllm:spec_decode_num_accepted_tokens": "accepted"}
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


def counters(llm) -> dict:
    """vLLM's speculative-decoding counters, summed over engines: zeros when it speculates not at all."""
    seen = {"drafts": 0, "draft_tokens": 0, "accepted": 0, "accepted_per_pos": []}
    for metric in llm.get_metrics():
        if metric.name in COUNTERS:
            seen[COUNTERS[metric.name]] += int(metric.value)
        elif metric.name == PER_POS:
            values = [int(v) for v in metric.values]
            old = seen["accepted_per_pos"] + [0] * (len(values) - len(seen["accepted_per_pos"]))
            seen["accepted_per_pos"] = [a + b for a, b in zip(old, values + [0] * (len(old) - len(values)))]
    return seen


def difference(after: dict, before: dict) -> dict:
    per_pos = [a - (before["accepted_per_pos"][i] if i < len(before["accepted_per_pos"]) else 0)
               for i, a in enumerate(after["accepted_per_pos"])]
    return {key: after[key] - before[key] for key in ("drafts", "draft_tokens", "accepted")} | {
        "accepted_per_pos": per_pos}


def run(job: dict) -> dict:
    from vllm import LLM, SamplingParams, __version__
    from vllm.inputs import TokensPrompt

    started = time.perf_counter()
    try:
        llm = LLM(**job["llm"], disable_log_stats=False)
    except Exception as err:  # noqa: BLE001 - the reason vLLM refused the settings is the result
        return {"ok": False, "stage": "load", "error": f"{type(err).__name__}: {err}",
                "trace": traceback.format_exc()[-4000:]}
    load_seconds = time.perf_counter() - started
    params = SamplingParams(**job["sampling"])
    if job.get("warmup", True) and job["prompts"]:
        llm.generate([TokensPrompt(prompt_token_ids=job["prompts"][0])],
                     SamplingParams(**(job["sampling"] | {"max_tokens": 8})), use_tqdm=False)
    runs = []
    for ids in job["prompts"]:
        before = counters(llm)
        start = time.perf_counter()
        out = llm.generate([TokensPrompt(prompt_token_ids=ids)], params, use_tqdm=False)[0].outputs[0]
        seconds = time.perf_counter() - start
        runs.append({"token_ids": list(out.token_ids), "text": out.text, "seconds": seconds,
                     "finish_reason": out.finish_reason, "counters": difference(counters(llm), before)})
    return {"ok": True, "vllm": __version__, "load_seconds": load_seconds, "runs": runs}


def main() -> int:
    job_path, result_path = sys.argv[1], sys.argv[2]
    with open(job_path) as f:
        job = json.load(f)
    try:
        result = run(job)
    except Exception as err:  # noqa: BLE001 - reported to the caller, who shows it
        result = {"ok": False, "stage": "generate", "error": f"{type(err).__name__}: {err}",
                  "trace": traceback.format_exc()[-4000:]}
    with open(result_path, "w") as f:
        json.dump(result, f)
    return 0 if result["ok"] else 1


if __name__ == "__main__":  # vLLM spawns its engine process: it must not re-run this
    sys.exit(main())
