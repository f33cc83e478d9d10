"""From the demo to production: a run's settings as vLLM and transformers configuration.

Only what the run actually used is translated, using each library's documented names:
vLLM's `LLM(..., speculative_config={...})` and `SamplingParams`, and transformers'
`model.generate(...)` keyword arguments. Where a library has no equivalent (Medusa or EAGLE in
transformers' generate, adaptive k in vLLM), the result says so in `notes` instead of inventing one.
Notes are i18n keys with their values, rendered in the page's language by `markdown`. No torch here.
"""
from __future__ import annotations

import json
from pathlib import Path
from pprint import pformat
from dataclasses import dataclass, field
from typing import Any, Optional

from .config import RunConfig, SamplingConfig
from .i18n import text

EMBEDDED_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the embedded model is a 4-bit GGUF of this checkpoint
DRAFT_PLACEHOLDER = "<a small model with the target's tokenizer>"
MEDUSA_CONFIG = Path(__file__).resolve().parent.parent / "assets" / "medusa" / "config.json"  # the shipped heads'


def shipped_medusa_heads() -> Optional[int]:
    """How many heads the shipped Medusa weights have (vLLM drafts at most one token per head); None: none ship."""
    if not MEDUSA_CONFIG.is_file():
        return None
    return int(json.loads(MEDUSA_CONFIG.read_text(encoding="utf-8"))["medusa_num_heads"])


def exported_folder(method: str) -> str:
    """Where `python -m specviz.train export-vllm METHOD DIR` is told to write the shipped weights for vLLM."""
    return f"./specviz-{method}-vllm"


@dataclass(frozen=True)
class Deployment:
    """How to serve one method with one set of settings. None: the library has no equivalent."""

    method: str
    vllm_llm: Optional[dict[str, Any]]  # keyword arguments of vllm.LLM(...)
    vllm_sampling: dict[str, Any]  # keyword arguments of vllm.SamplingParams(...)
    transformers_generate: Optional[dict[str, Any]]  # keyword arguments of model.generate(...), models named by id
    notes: list[tuple[str, dict]] = field(default_factory=list)  # what does not carry over: (i18n key, values)

    def note_texts(self, lang: str = "en") -> list[str]:
        return [text(key, lang, **values) for key, values in self.notes]


def hub_id(model: str) -> str:
    """The id a production server loads for the run's target model."""
    return EMBEDDED_HUB_ID if model.startswith("embedded:") else model


def _sampling(sampling: SamplingConfig, max_new_tokens: int) -> tuple[dict, dict]:
    """(vLLM SamplingParams kwargs, transformers generate kwargs) for the run's sampling settings."""
    vllm = {"max_tokens": max_new_tokens, "temperature": sampling.temperature, "seed": sampling.seed}
    hf: dict[str, Any] = {"max_new_tokens": max_new_tokens, "do_sample": not sampling.greedy}
    if not sampling.greedy:
        hf |= {"temperature": sampling.temperature, "top_p": sampling.top_p}
        vllm["top_p"] = sampling.top_p
        if sampling.top_k:
            hf["top_k"], vllm["top_k"] = sampling.top_k, sampling.top_k
    return vllm, hf


def _speculative(method: str, run: RunConfig, draft: Optional[str], ngram: tuple[int, int],
                 notes: list[tuple[str, dict]], run_model: str = "") -> tuple[Optional[dict], Optional[dict]]:
    """(vLLM speculative_config, transformers generate kwargs) for one method; None where none exists.
    On the embedded target the shipped weights are named by the folder export-vllm writes (a note says how)."""
    k = run.k
    if method == "baseline":
        return {}, {}
    if method == "ngram":
        max_ngram, min_ngram = ngram
        notes.append(("note.ngram_min", {}))
        return ({"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": max_ngram,
                 "prompt_lookup_min": min_ngram},
                {"prompt_lookup_num_tokens": k, "max_matching_ngram_size": max_ngram})
    embedded = run_model.startswith("embedded:")
    if embedded and method in ("draft", "medusa", "eagle") and draft is None:
        draft = exported_folder(method)
        notes.append(("note.export_vllm", {"method": method, "folder": draft}))
    if method == "draft":
        model = draft or DRAFT_PLACEHOLDER
        schedule = "heuristic" if run.adaptive_k else "constant"
        return ({"method": "draft_model", "model": model, "num_speculative_tokens": k},
                {"assistant_model": model, "num_assistant_tokens": k, "num_assistant_tokens_schedule": schedule})
    if method in ("medusa", "eagle"):
        notes.append(("note.no_generate", {"method": method}))
        if not embedded:
            notes.append(("note.vllm_heads", {"method": method}))
        notes.append(("note.chain", {"method": method}))
        heads = shipped_medusa_heads() if method == "medusa" and embedded else None
        if heads and k > heads:
            notes.append(("note.medusa_heads", {"k": k, "heads": heads}))
            k = heads
        return {"method": method, "model": draft or f"<{method} heads for this target>",
                "num_speculative_tokens": k}, None
    if method == "oracle":  # a teaching tool: no server knows the target's answer before computing it
        notes.append(("note.oracle", {}))
        return None, None
    notes.append(("note.unknown", {"method": repr(method)}))
    return None, None


def deployment(method: str, model: str, run: RunConfig, sampling: SamplingConfig, draft: Optional[str] = None,
               ngram: tuple[int, int] = (8, 2), batch_cutoff: Optional[int] = None,
               max_model_len: Optional[int] = None) -> Deployment:
    """The run's settings for vLLM and transformers.

    draft: the draft model (or heads) id; batch_cutoff: vLLM turns speculation off above this many
    concurrent requests (disable_by_batch_size); max_model_len: vLLM's context limit. Neither is
    a run setting, so each appears only when given."""
    notes: list[tuple[str, dict]] = []
    vllm_sampling, hf_sampling = _sampling(sampling, run.max_new_tokens)
    spec, hf_spec = _speculative(method, run, draft, ngram, notes, model)
    if run.adaptive_k and method != "draft":
        notes.append(("note.adaptive_k", {}))
    if sampling.lossy and method != "baseline":
        notes.append(("note.typical", {}))
    if run.fallback_threshold > 0:
        notes.append(("note.fallback", {}))
    llm = None
    if spec is not None:
        llm = {"model": hub_id(model)}
        if max_model_len:
            llm["max_model_len"] = max_model_len
        if spec:
            llm["speculative_config"] = spec | ({"disable_by_batch_size": batch_cutoff} if batch_cutoff else {})
    generate = None if hf_spec is None else hf_spec | hf_sampling
    return Deployment(method, llm, vllm_sampling, generate, notes)


def markdown(d: Deployment, lang: str = "en") -> str:
    """A Deployment as copyable Python snippets for the page, its notes in `lang`."""
    parts = [f"**{d.method}**"]
    if d.vllm_llm is None:
        parts.append(text("production.no_vllm", lang))
    else:
        parts.append("```python\n# vLLM\nfrom vllm import LLM, SamplingParams\n"
                     f"llm = LLM(**{pformat(d.vllm_llm, sort_dicts=False)})\n"
                     f"params = SamplingParams(**{pformat(d.vllm_sampling, sort_dicts=False)})\n```")
    if d.transformers_generate is None:
        parts.append(text("production.no_generate", lang))
    else:
        args = dict(d.transformers_generate)
        assistant = args.pop("assistant_model", None)
        load = (f"assistant_model = AutoModelForCausalLM.from_pretrained({assistant!r})\n"
                if assistant else "")
        extra = ", assistant_model=assistant_model" if assistant else ""
        parts.append(f"```python\n# transformers\n{load}"
                     f"out = model.generate(**inputs{extra}, **{pformat(args, sort_dicts=False)})\n```")
    parts += [f"- {note}" for note in d.note_texts(lang)]
    return "\n\n".join(parts)
