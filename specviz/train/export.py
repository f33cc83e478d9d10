"""Our weights in the layouts a production engine loads: `python -m specviz.train export-vllm {eagle,medusa,draft} DIR`.

vLLM (0.32) reads, for `speculative_config={"method": ..., "model": DIR}`:
- eagle: `EagleLlamaForCausalLM` (vllm/model_executor/models/llama_eagle.py): `fc.weight` (H, 2H) with **no bias**,
  `layers.{i}.*` in transformers' Llama names (layer 0 without input_layernorm), no final norm; embedding and LM
  head taken from the target when the file has none; the full vocabulary (no d2t).
- medusa: `MedusaModel` (medusa.py): `blocks.{h}.layers.{l}.weight|bias` (`medusa_fc_bias`), and with
  `original_lm_head` one `lm_heads.0.weight` shared by every head (ours share the target's LM head).
- draft_model: a plain `LlamaForCausalLM` folder (config with `architectures`, weights, tokenizer).

What vLLM's layout cannot hold is dropped and said so in the folder's card.json (`export` section): a head
trained with an fc bias loses it (`fc_bias_dropped`), and a reduced draft vocabulary (d2t) becomes the full one.
Each folder also loads back in specviz (the card names its target), so both engines can run the same weights.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from ..assets import ASSETS, first_file, read_card, read_tensors, write_json

EAGLE_FILES = ("model.safetensors", "pytorch_model.bin")


def _card(source: Path, engine: str, **export) -> dict:
    card = dict(read_card(source) or {})
    card["export"] = {"engine": engine, "from": str(source)} | export
    return card


def eagle_for_vllm(source: Path, folder: Path, target) -> dict:
    """Our EAGLE-1/2 head as vLLM's EagleLlamaForCausalLM. Returns the export record written in the card."""
    from safetensors.torch import save_file

    config = json.loads((source / "config.json").read_text())
    state = read_tensors(first_file(source, EAGLE_FILES))
    if any(k.startswith("midlayer.") for k in state):
        raise SystemExit(f"{source}: an EAGLE-3 head; vLLM's Eagle3LlamaForCausalLM reads other feature layers "
                         "than specviz's, so it is not exported")
    bias = state.pop("fc.bias", None)
    state.pop("d2t", None)
    out = {k: v.to(torch.float16).contiguous() for k, v in state.items()}
    record = {"fc_bias_dropped": None if bias is None else round(float(bias.float().norm()), 4),
              "draft_vocab": None, "note": "full vocabulary; vLLM's EAGLE-1 layout has neither an fc bias nor d2t"}
    config.pop("draft_vocab_size", None)
    config.update(architectures=["EagleLlamaForCausalLM"], model_type="llama", vocab_size=target.vocab_size,
                  torch_dtype="float16", tie_word_embeddings=False)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(out, str(folder / "model.safetensors"))
    write_json(folder / "config.json", config)
    write_json(folder / "card.json", _card(source, "vllm", **record))
    return record


def medusa_for_vllm(source: Path, folder: Path, target) -> dict:
    """Our Medusa heads as vLLM's MedusaModel, the target's LM head stored once (`original_lm_head`)."""
    from safetensors.torch import save_file

    from ..methods.medusa import FILES, medusa_shape

    state = read_tensors(first_file(source, FILES))
    n_heads, n_layers = medusa_shape(state, str(source))
    if f"0.{n_layers}.weight" in state:
        raise SystemExit(f"{source}: heads with LM heads of their own; export supports the shared one")
    out = {f"blocks.{h}.layers.{l}.{part}": state[f"{h}.{l}.linear.{part}"].to(torch.float16).contiguous()
           for h in range(n_heads) for l in range(n_layers) for part in ("weight", "bias")}
    lm = target.model.get_output_embeddings().weight.detach()
    out["lm_heads.0.weight"] = lm.to("cpu", torch.float16).contiguous()
    config = {"architectures": ["MedusaModel"], "model_type": "medusa", "hidden_size": int(lm.shape[1]),
              "vocab_size": int(lm.shape[0]), "num_heads": n_heads, "num_hidden_layers": n_layers,
              "medusa_fc_bias": True, "original_lm_head": True, "truncated_vocab_size": int(lm.shape[0])}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(out, str(folder / "model.safetensors"))
    write_json(folder / "config.json", config)
    write_json(folder / "card.json", _card(source, "vllm", heads=n_heads, layers=n_layers))
    return {"heads": n_heads, "layers": n_layers}


def draft_for_vllm(source: Path, folder: Path, target) -> dict:
    """A self-contained LlamaForCausalLM folder (embedding included, tokenizer beside it)."""
    from ..methods.draft import load_draft

    draft = load_draft(source, target)
    draft.model.config.architectures = ["LlamaForCausalLM"]
    draft.model.save_pretrained(folder)
    target.tokenizer.save_pretrained(folder)
    return {"layers": int(draft.model.config.num_hidden_layers)}


EXPORTS = {"eagle": eagle_for_vllm, "medusa": medusa_for_vllm, "draft": draft_for_vllm}


def export_vllm(method: str, folder: Path, source: Path | None = None, target=None) -> dict:
    """Write `method`'s weights (default: the shipped ones) into `folder` in vLLM's layout."""
    from ..models import load_target

    target = target or load_target()
    record = EXPORTS[method](Path(source or ASSETS / method), Path(folder), target)
    print(f"[export] {method} for vLLM in {folder}: {record}", file=sys.stderr)
    return record
