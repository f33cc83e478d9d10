"""Draft-model speculation: a small causal LM with the target's tokenizer guesses k tokens, one at a time."""
from __future__ import annotations

import torch

from ..config import SamplingConfig
from ..models import Target, check_same_tokenizer
from ..sampling import sample, target_distribution
from ..tree import Tree
from ..verify import truncate
from .base import Proposer


class DraftProposer(Proposer):
    """Owns the draft model's KV cache for one run; rejected guesses are cropped away next round."""

    name = "draft"

    def __init__(self, target: Target, draft: Target, sampling: SamplingConfig, confidence: float = 0.4):
        from transformers import DynamicCache

        check_same_tokenizer(target, draft)
        if not 0 <= confidence < 1:
            raise ValueError(f"confidence must be in [0, 1), got {confidence!r}")
        # Stop guessing after a token the draft gives less than this probability (transformers'
        # assistant_confidence_threshold, same default): each draft step costs a forward of the draft.
        # The rule reads only the draft's own distribution, so verification stays lossless.
        self.confidence = confidence
        self.model, self.sampling, self.vocab = draft.model, sampling, target.vocab_size
        self.generator = torch.Generator().manual_seed(sampling.seed + 1)
        self.cache = DynamicCache(config=draft.model.config)
        self.seen: list[int] = []  # tokens whose KV the draft cache holds

    def propose(self, ids: list[int], k: int) -> Tree:
        # Step 1: keep the cache's agreement with the committed tokens, feed the rest.
        common = 0
        limit = min(len(self.seen), len(ids) - 1)
        while common < limit and self.seen[common] == ids[common]:
            common += 1
        truncate(self.cache, common)
        self.seen = ids[:common]
        feed = ids[common:]
        tokens, probs, dists = [], [], []
        # Step 2: k draft steps, each one forward of the draft.
        for _ in range(k):
            logits = self._forward(feed)  # (V,)
            q = target_distribution(logits, self.sampling)  # same processing as the target's
            token = int(torch.argmax(q)) if self.sampling.greedy else sample(q, self.generator)
            tokens.append(token)
            probs.append(float(q[token]))
            dists.append(q)
            feed = [token]
            if probs[-1] < self.confidence:
                break
        dists_t = None if self.sampling.greedy else torch.stack(dists)  # (k, V)
        return Tree.chain(tokens, probs, dists_t)

    def _forward(self, feed: list[int]) -> torch.Tensor:
        device = next(self.model.parameters()).device
        out = self.model(input_ids=torch.tensor([feed], device=device), cache=self.cache,
                         use_cache=True, logits_to_keep=1)
        self.seen.extend(feed)
        logits = out.logits[0, -1].float()  # (V_draft,)
        if logits.shape[0] < self.vocab:
            logits = torch.cat([logits, logits.new_full((self.vocab - logits.shape[0],), float("-inf"))])
        return logits[: self.vocab]


def load_draft(folder, target: Target) -> Target:
    """A draft shipped without its embedding: an ordinary LlamaForCausalLM whose (tied) embedding is
    the target's own tensor, shared, not copied. `python -m specviz.train draft --export` writes a
    self-contained copy for transformers' assistant_model."""
    import json
    from pathlib import Path

    from transformers import AutoConfig, AutoModelForCausalLM

    from ..assets import check_target, read_card, read_tensors
    from ..models import wrap

    folder = Path(folder)
    card = read_card(folder)
    if card is not None:
        check_target(card, target, str(folder))
    config = AutoConfig.for_model(**json.loads((folder / "config.json").read_text()))
    state = read_tensors(folder / "model.safetensors")
    embedding = target.model.get_input_embeddings().weight
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    state.setdefault("model.embed_tokens.weight", embedding.detach())
    for i in range(getattr(config, "specviz_shared_target_layers", 0)):  # the target's own first layers
        for key, value in target.model.model.layers[i].state_dict().items():
            state.setdefault(f"model.layers.{i}.{key}", value.detach())
    model.load_state_dict({k: v.to(target.dtype) for k, v in state.items()}, strict=False, assign=True)  # shares the target's tensors
    model.model.embed_tokens.weight = embedding  # the target's tensor itself
    model.tie_weights()
    missing = [name for name, p in model.named_parameters() if p.is_meta]
    if missing:
        raise ValueError(f"{folder}: the draft's weights lack {', '.join(missing[:4])}")
    model.model.rotary_emb = type(model.model.rotary_emb)(config)  # buffers are not in the file
    return wrap(f"{target.name}:draft", model.to(target.device), target.tokenizer)
