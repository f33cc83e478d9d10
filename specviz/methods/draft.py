"""Draft-model speculation: a small causal LM with the target's tokenizer guesses k tokens, one at a time
(a chain), or grows a tree of its best guesses k levels deep (EAGLE-2's dynamic tree, one draft forward per
level, as SpecInfer drafts trees with a small model) that the target verifies in one forward."""
from __future__ import annotations

import torch

from ..config import SamplingConfig
from ..models import Target, check_same_tokenizer
from ..sampling import sample, target_distribution
from ..tree import Tree, additive_mask, best, grow, level_visibility
from ..verify import truncate
from .base import Proposer


class DraftProposer(Proposer):
    """Owns the draft model's KV cache for one run; rejected guesses are cropped away next round."""

    name = "draft"

    def __init__(self, target: Target, draft: Target, sampling: SamplingConfig, confidence: float = 0.4,
                 nodes: int = 1, top_k: int = 8):
        from transformers import DynamicCache

        check_same_tokenizer(target, draft)
        if not 0 <= confidence < 1:
            raise ValueError(f"confidence must be in [0, 1), got {confidence!r}")
        # Stop guessing after a token the draft gives less than this probability (transformers'
        # assistant_confidence_threshold, same default): each draft step costs a forward of the draft.
        # The rule reads only the draft's own distribution, so verification stays lossless.
        self.confidence = confidence
        if nodes < 1 or top_k < 1:
            raise ValueError(f"nodes and top_k must be at least 1, got {nodes!r} and {top_k!r}")
        self.nodes, self.top_k = nodes, top_k  # nodes == 1: the chain; more: a tree of that many guesses
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
        logits = self._forward(feed)  # (V,) the draft's guess after the root
        if self.nodes > 1:
            return self._tree(logits, min(k, self.nodes))
        return self._chain(logits, k)

    def _chain(self, logits: torch.Tensor, k: int) -> Tree:
        """Step 2: up to k draft steps, each one forward of the draft, stopping after an unsure guess."""
        tokens, probs, dists = [], [], []
        for step in range(k):
            if step:
                logits = self._forward([tokens[-1]])
            q = target_distribution(logits, self.sampling)  # same processing as the target's
            token = int(torch.argmax(q)) if self.sampling.greedy else sample(q, self.generator)
            tokens.append(token)
            probs.append(float(q[token]))
            dists.append(q)
            if probs[-1] < self.confidence:
                break
        dists_t = None if self.sampling.greedy else torch.stack(dists)  # (k, V)
        return Tree.chain(tokens, probs, dists_t)

    def _tree(self, logits: torch.Tensor, depth: int) -> Tree:
        """Step 2: the best guesses as a tree, one draft forward per level over that level's chosen nodes.
        The guesses are top-k picks, not samples, so the verifier treats them as point masses (lossless).
        The tree's slots leave the draft's cache afterwards: next round feeds what the target accepted."""
        committed, device = len(self.seen), next(self.model.parameters()).device
        dtype, fed = self.model.dtype, 0

        def step(tokens: list[int], rows: list[int], ancestors: list[list[int]], level: int):
            nonlocal fed
            n = len(tokens)
            visible = level_visibility(committed, fed, ancestors)  # the tree's fed nodes sit in the cache for now
            mask = additive_mask(visible, dtype)
            out = self.model(input_ids=torch.tensor([tokens], device=device), attention_mask=mask[None, None].to(device),
                             position_ids=torch.full((1, n), committed + level - 1, device=device),
                             cache=self.cache, use_cache=True)
            fed += n
            return torch.log_softmax(self._fit(out.logits[0].float()), -1).topk(self.top_k, -1)

        first = torch.log_softmax(logits, -1).topk(self.top_k)
        candidates = grow(first.values, first.indices, step, depth, self.top_k)
        truncate(self.cache, committed)
        return best(candidates, self.nodes)

    def _forward(self, feed: list[int]) -> torch.Tensor:
        device = next(self.model.parameters()).device
        out = self.model(input_ids=torch.tensor([feed], device=device), cache=self.cache,
                         use_cache=True, logits_to_keep=1)
        self.seen.extend(feed)
        return self._fit(out.logits[0, -1].float())

    def _fit(self, logits: torch.Tensor) -> torch.Tensor:
        """(..., V_draft) -> (..., V): the target's vocabulary (a draft's padded rows cut, missing ones -inf)."""
        if logits.shape[-1] < self.vocab:
            pad = logits.new_full((*logits.shape[:-1], self.vocab - logits.shape[-1]), float("-inf"))
            logits = torch.cat([logits, pad], -1)
        return logits[..., : self.vocab]


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
