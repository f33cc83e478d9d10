"""Tiny random models built from a config (no hub), and the embedded model for a few end-to-end checks."""
from __future__ import annotations

import copy
import functools
import os

import pytest
import torch

from specviz.models import Target, wrap

TINY_VOCAB = 96
# Where the tiny models live: "cpu" here and in CI; scripts/gpu_check.sh sets "cuda" on a GPU machine.
DEVICE = torch.device(os.environ.get("SPECVIZ_TEST_DEVICE", "cpu"))


class TinyTokenizer:
    """Just enough tokenizer for the engine: ids <-> text, a vocabulary, an end-of-sequence id."""

    eos_token_id = 2
    chat_template = None

    def __init__(self, vocab_size: int = TINY_VOCAB, shift: int = 0):
        self.vocab = {f"<t{(i + shift) % vocab_size}>": i for i in range(vocab_size)}
        self.inverse = {i: tok for tok, i in self.vocab.items()}

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    def __len__(self) -> int:
        return len(self.vocab)

    def __call__(self, text: str) -> dict[str, list[int]]:
        return {"input_ids": [3 + (ord(c) % (len(self.vocab) - 3)) for c in text]}

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(self.inverse[int(i)] for i in ids)


def tiny_llama(seed: int, layers: int = 2, hidden: int = 64, vocab: int = TINY_VOCAB,
               dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    """A random Llama in float64 (so a 1-token and a k-token forward round alike), with an init
    wide enough that its greedy text varies instead of repeating one token."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=512, eos_token_id=2, bos_token_id=1, pad_token_id=0,
                         tie_word_embeddings=True, initializer_range=0.3)
    return LlamaForCausalLM(config).to(DEVICE, dtype)


@functools.lru_cache(maxsize=None)
def tiny_target(seed: int = 0, layers: int = 2) -> Target:
    return wrap(f"tiny-{seed}", tiny_llama(seed, layers), TinyTokenizer())


@pytest.fixture(scope="session")
def target() -> Target:
    return tiny_target(0)


@functools.lru_cache(maxsize=None)
def noisy_copy(seed: int = 0, noise: float = 0.05) -> Target:
    """A draft that agrees with tiny_target(seed) often but not always: its weights plus noise."""
    model = copy.deepcopy(tiny_target(seed).model)
    generator = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(noise * param.std() * torch.randn(param.shape, generator=generator, dtype=param.dtype).to(param.device))
    return wrap(f"tiny-{seed}-noisy", model, TinyTokenizer())


@pytest.fixture(scope="session")
def draft_target() -> Target:
    return noisy_copy(0)


@pytest.fixture(scope="session")
def embedded() -> Target:
    from specviz.models import load_target

    if os.environ.get("SPECVIZ_NO_EMBEDDED"):  # e.g. a GPU machine that can reach no package registry
        pytest.skip("SPECVIZ_NO_EMBEDDED is set")
    return load_target()


@functools.lru_cache(maxsize=None)
def tiny_medusa(seed: int = 0):
    """Untrained Medusa heads with noise for tiny_target(seed) (never mutated: shared across tests)."""
    from specviz.methods.medusa import random_heads

    return random_heads(tiny_target(seed), n_heads=3, seed=seed)


@functools.lru_cache(maxsize=None)
def tiny_eagle(seed: int = 0, eagle3: bool = False, layers: int = 2, head_layers: int = 1):
    """A random EAGLE head for tiny_target(seed, layers); EAGLE-3 with a draft vocabulary of even ids."""
    from specviz.methods.eagle import bind, new_head

    target = tiny_target(seed, layers)
    draft_ids = torch.arange(0, TINY_VOCAB, 2) if eagle3 else None
    return bind(new_head(target, eagle3=eagle3, draft_ids=draft_ids, seed=seed, n_layers=head_layers), target)
