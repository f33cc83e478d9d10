"""Weights that ship with specviz (assets/) and checkpoints from elsewhere: reading them safely and
checking that they belong to the target they are used with.

A shipped method folder holds its weights (safetensors), a config.json in the public layout of the
method, and card.json: what target the weights were trained for, on what data, for how long, and
the tau measured with them. Weights are read only through safetensors or torch.load(weights_only=True).
"""
from __future__ import annotations

import json
import weakref
from pathlib import Path
from typing import Any, Callable, Optional

import torch

ASSETS = Path(__file__).resolve().parent.parent / "assets"
CARD = "card.json"


class WrongTarget(ValueError):
    """Weights were trained for another target than the one loaded."""


def signature(target) -> dict[str, Any]:
    """What identifies a target for its heads: shape of the model and a probe of its embedding."""
    config = target.model.config
    emb = target.model.get_input_embeddings().weight
    rows = torch.tensor([0, 1, 2, emb.shape[0] // 2, emb.shape[0] - 1])
    probe = emb.detach()[rows, :8].float().flatten().tolist()  # 40 numbers, dtype-robust within tolerance
    return {"name": target.name, "model_type": getattr(config, "model_type", ""),
            "hidden_size": int(config.hidden_size), "num_hidden_layers": int(config.num_hidden_layers),
            "vocab_size": int(config.vocab_size), "probe": [round(x, 6) for x in probe]}


def mismatch(card: dict, target) -> Optional[str]:
    """Why weights described by `card` do not fit `target`, or None when they do."""
    want, have = card.get("target") or {}, signature(target)
    for key in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size"):
        if key in want and want[key] != have[key]:
            return f"{key} is {have[key]} in the loaded target and {want[key]} in the target they were trained for"
    if "probe" in want:
        expected, found = torch.tensor(want["probe"]), torch.tensor(have["probe"])
        if expected.shape != found.shape or not torch.allclose(found, expected, rtol=2e-2, atol=2e-3):
            return "the loaded target's embedding weights differ from those of the target they were trained for"
    return None


def check_target(card: dict, target, where: str) -> None:
    """Raise WrongTarget with a clear message when `card`'s weights were trained for another target."""
    reason = mismatch(card, target)
    if reason:
        trained_for = (card.get("target") or {}).get("name", "another model")
        raise WrongTarget(f"the weights in {where} were trained for {trained_for!r}, not for the loaded target "
                          f"{target.name!r}: {reason}. Train heads for this target (python -m specviz.train) "
                          "or load weights made for it")


def read_card(folder: Path) -> Optional[dict]:
    path = Path(folder) / CARD
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def read_tensors(path: Path) -> dict[str, torch.Tensor]:
    """A state dict from .safetensors, or from a torch pickle with weights_only=True (never arbitrary code)."""
    path = Path(path)
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        raise ValueError(f"{path} holds a {type(state).__name__}, not a state dict")
    return state


def first_file(folder: Path, names: tuple[str, ...]) -> Path:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"{folder} has none of {', '.join(names)}")


def resolve(source: str | Path) -> Path:
    """A local folder or file as it is; otherwise a Hugging Face repo id (cached, or downloaded when reachable)."""
    local = Path(source).expanduser()
    if local.exists():
        return local
    from huggingface_hub import snapshot_download

    from .models import _hub_offline

    try:
        return Path(snapshot_download(str(source), local_files_only=_hub_offline()))
    except Exception as err:  # the hub library raises many types; all mean "not here"
        raise FileNotFoundError(f"{source!r} is neither a local path nor a Hugging Face repo whose files are cached "
                                f"or reachable ({type(err).__name__}: {err})") from err


def shipped(method: str) -> Path:
    return ASSETS / method


def shipped_fits(method: str, target) -> bool:
    """Do the shipped weights of `method` exist and belong to this target?"""
    card = read_card(shipped(method))
    return card is not None and mismatch(card, target) is None


_loaded: dict[str, "weakref.WeakKeyDictionary"] = {}


def cached_load(method: str, target, load: Callable[[], Any]) -> Any:
    """Load shipped weights once per target model (read-only afterwards, shared by every run)."""
    per_model = _loaded.setdefault(method, weakref.WeakKeyDictionary())
    if target.model not in per_model:
        per_model[target.model] = load()
    return per_model[target.model]
