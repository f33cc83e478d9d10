"""Real GPU combinations with published weights for every method (download them where the network allows).

The Spec-Bench set is Vicuna-7B-v1.3 with its published draft, Medusa and EAGLE weights; the newer set
is Llama-3.1-8B-Instruct with the 1B model of the same family as draft and an EAGLE-3 head.
Use: load_target(p.target), then method options draft=load_target(p.draft), weights=p.medusa / p.eagle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Preset:
    name: str
    target: str  # hub id of the target model
    draft: Optional[str]  # a small model with the same tokenizer (method "draft")
    medusa: Optional[str]  # Medusa heads (medusa_lm_head.pt, v0.1 layout)
    eagle: Optional[str]  # an EAGLE-1/2 or EAGLE-3 head (config.json + weights)
    note: str = ""


PRESETS: tuple[Preset, ...] = (
    Preset("vicuna-7b-spec-bench", "lmsys/vicuna-7b-v1.3", "double7/vicuna-68m",
           "FasterDecoding/medusa-vicuna-7b-v1.3", "yuhuili/EAGLE-Vicuna-7B-v1.3",
           "the Spec-Bench combination; fp16 on one GPU (~14 GB); EAGLE-1/2 layout, post-norm features"),
    Preset("llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct",
           None, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
           "gated Meta licence (accept it on the hub first); EAGLE-3 reads layers 2, 16 and 29; no public Medusa heads"),
)


def preset(name: str) -> Preset:
    for p in PRESETS:
        if p.name == name:
            return p
    raise ValueError(f"unknown preset {name!r}; known: {', '.join(p.name for p in PRESETS)}")


def method_options(p: Preset, load_target) -> dict[str, dict]:
    """Options for make_proposer per method (the draft model is loaded with `load_target`)."""
    options: dict[str, dict] = {}
    if p.draft:
        options["draft"] = {"draft": load_target(p.draft)}
    if p.medusa:
        options["medusa"] = {"weights": p.medusa}
    if p.eagle:
        options["eagle"] = {"weights": p.eagle}
    return options
