"""vLLM as a peer: run the settings specviz exports in a real vLLM, in vLLM's own virtual environment.

vLLM pins its own transformers, so it never shares specviz's interpreter: `scripts/vllm_env.sh` builds a venv
(or SPECVIZ_VLLM_PYTHON names one), and `run_vllm` starts specviz/vllm_runner.py there with a job file, once per
engine configuration. Prompts cross as token ids (the chat template applied by specviz), so both engines read
exactly the same input. No torch at import (the cache folder comes from specviz.models when asked).
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

RUNNER = Path(__file__).with_name("vllm_runner.py")
ENV_SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "vllm_env.sh"
# The settings vLLM's CPU build needs for a run comparable to specviz's: float32 (specviz's CPU dtype), eager
# mode (no compilation on a 2-core machine), a context that fits the KV cache VLLM_CPU_KVCACHE_SPACE gives.
CPU_LLM = {"dtype": "float32", "enforce_eager": True, "max_model_len": 2048, "seed": 0}
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "2"}  # GiB of KV cache
# vLLM's OpenAI-compatible server. `vllm serve` runs it too, but that CLI fails in the CPU build (it asks for the
# version of the package "vllm", which is installed as "vllm-cpu"); the module takes the same options plus --model.
SERVER_MODULE = "vllm.entrypoints.openai.api_server"


class PeerError(RuntimeError):
    """vLLM could not be started or refused the settings; `stage` says where ("env", "load", "generate")."""

    def __init__(self, message: str, stage: str):
        super().__init__(message)
        self.stage = stage


@dataclass(frozen=True)
class PeerRun:
    """One prompt through vLLM: its tokens, wall time and vLLM's own speculative-decoding counters."""

    token_ids: list[int]
    text: str
    seconds: float
    counters: dict[str, Any]  # drafts, draft_tokens, accepted, accepted_per_pos (this request only)

    @property
    def target_forwards(self) -> int:
        """Every forward of the target makes one token plus the drafted tokens it accepts (prefill included)."""
        return max(1, len(self.token_ids) - self.counters["accepted"])


@dataclass(frozen=True)
class PeerResult:
    runs: list[PeerRun]
    load_seconds: float
    version: str


def default_venv_python() -> Path:
    """The python of the venv scripts/vllm_env.sh builds: $SPECVIZ_VLLM_VENV, else vllm-venv in specviz's cache."""
    from .models import cache_dir

    return Path(os.environ.get("SPECVIZ_VLLM_VENV", cache_dir() / "vllm-venv")) / "bin" / "python"


def vllm_python() -> Optional[str]:
    """The interpreter that has vLLM: SPECVIZ_VLLM_PYTHON, else the venv scripts/vllm_env.sh builds; None: neither."""
    named = os.environ.get("SPECVIZ_VLLM_PYTHON")
    if named:
        return named
    python = default_venv_python()
    return str(python) if python.is_file() else None


def missing_reason() -> Optional[str]:
    """Why vLLM cannot run here (for a skip or the page), or None when it can."""
    python = vllm_python()
    if python is None:
        return f"no vLLM environment: run `bash {ENV_SCRIPT.relative_to(ENV_SCRIPT.parents[1])}` or set SPECVIZ_VLLM_PYTHON"
    probe = subprocess.run([python, "-c", "import vllm"], capture_output=True, text=True, timeout=300)
    if probe.returncode:
        return f"{python} cannot import vllm: {probe.stderr.strip().splitlines()[-1:]}"
    return None


def run_vllm(llm: dict[str, Any], sampling: dict[str, Any], prompts: list[list[int]], timeout: float = 1200,
             log: Optional[Path] = None, warmup: bool = True, threads: Optional[int] = None) -> PeerResult:
    """Start one vLLM engine with `llm` (vllm.LLM keyword arguments), run each prompt alone with `sampling`
    (vllm.SamplingParams keyword arguments) and return what it made. Raises PeerError when vLLM refuses.
    threads: the CPU cores vLLM's engine computes on (default: vLLM's choice, which keeps one core for its
    front end: 1 thread on a 2-core machine)."""
    python = vllm_python()
    if python is None:
        raise PeerError(missing_reason() or "no vLLM environment", "env")
    with tempfile.TemporaryDirectory(prefix="specviz-vllm-") as tmp:
        job, result = Path(tmp) / "job.json", Path(tmp) / "result.json"
        job.write_text(json.dumps({"llm": llm, "sampling": sampling, "prompts": prompts, "warmup": warmup}))
        env = os.environ | CPU_ENV | {"TOKENIZERS_PARALLELISM": "false"}
        if threads:
            env |= {"VLLM_CPU_OMP_THREADS_BIND": "0" if threads == 1 else f"0-{threads - 1}",
                    "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
        with open(log or os.devnull, "a") as out:
            try:
                subprocess.run([python, str(RUNNER), str(job), str(result)], stdout=out, stderr=subprocess.STDOUT,
                               env=env, timeout=timeout, cwd=tmp)
            except subprocess.TimeoutExpired as err:
                raise PeerError(f"vLLM did not finish within {timeout:.0f} s", "generate") from err
        if not result.is_file():
            raise PeerError(f"vLLM exited without a result (its log: {log or 'not kept'})", "load")
        data = json.loads(result.read_text())
    if not data["ok"]:
        raise PeerError(f"vLLM refused ({data['stage']}): {data['error']}", data["stage"])
    runs = [PeerRun(r["token_ids"], r["text"], r["seconds"], r["counters"]) for r in data["runs"]]
    return PeerResult(runs, data["load_seconds"], data["vllm"])


def local_llm(exported: dict[str, Any], model_folder: str, folders: dict[str, str]) -> dict[str, Any]:
    """The LLM(...) arguments specviz exports (specviz.production), made runnable on this machine: the hub id
    of the target replaced by its local folder, a draft or heads id by the folder export-vllm wrote
    (`folders`: the exported id -> folder), plus the CPU settings. Nothing else is changed."""
    llm = dict(exported) | {"model": model_folder}
    spec = llm.get("speculative_config")
    if spec and "model" in spec:
        if spec["model"] not in folders:
            raise PeerError(f"no local folder for {spec['model']!r}: write one with python -m specviz.train "
                            "export-vllm", "env")
        llm["speculative_config"] = dict(spec) | {"model": folders[spec["model"]]}
    return {**CPU_LLM, **llm}

