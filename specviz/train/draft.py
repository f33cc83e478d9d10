"""A small standalone draft: a few of the target's own decoder layers, distilled from the target.

It is an ordinary LlamaForCausalLM (so transformers' assistant_model takes it) that shares the
target's embedding and tied LM head; only its layers and final norm are trained and shipped.
"""
from __future__ import annotations

import copy

import torch

from .heads import soft_ce, teacher_logp


def build_draft(target, layers: list[int], shared: int = 0):
    """A LlamaForCausalLM of len(layers) layers copied from the target's, on the target's embedding.

    The first `shared` layers must be the target's first layers: they stay the target's own tensors
    (frozen, never stored); the rest are copies that training changes."""
    if layers[:shared] != list(range(shared)):
        raise ValueError(f"the {shared} shared layers must be the target's first ones, got {layers[:shared]}")
    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(target.model.config)
    config.num_hidden_layers = len(layers)
    if getattr(config, "layer_types", None):
        config.layer_types = [config.layer_types[i] for i in layers]
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    source = target.model.model
    state = {"model.norm.weight": source.norm.weight.detach().clone(),
             "model.embed_tokens.weight": source.embed_tokens.weight.detach()}
    for mine, theirs in enumerate(layers):
        for key, value in source.layers[theirs].state_dict().items():
            state[f"model.layers.{mine}.{key}"] = value.detach() if mine < shared else value.detach().clone().float()
    model.load_state_dict(state, strict=False, assign=True)
    model.model.embed_tokens.weight = source.embed_tokens.weight  # shared with the target, frozen
    model.tie_weights()
    model.model.rotary_emb = type(model.model.rotary_emb)(config).to(source.embed_tokens.weight.device)
    config.specviz_shared_target_layers = shared  # load_draft takes these layers from the target
    model.requires_grad_(True)
    model.model.embed_tokens.weight.requires_grad_(False)
    model.model.layers[:shared].requires_grad_(False)
    return model


def trainable_state(model) -> dict[str, torch.Tensor]:
    """What ships: everything but the embedding / LM head and the shared layers, which come from the target."""
    shared = getattr(model.config, "specviz_shared_target_layers", 0)
    skip = ("model.embed_tokens", "lm_head") + tuple(f"model.layers.{i}." for i in range(shared))
    return {k: v for k, v in model.state_dict().items() if not k.startswith(skip)}


def draft_loss(model, rows: torch.Tensor, draft_ids: torch.Tensor, batch: dict):
    """The draft's distribution at every position matches the target's (soft CE over the draft rows)."""
    x, f, valid, top1 = batch["tokens"], batch["f"], batch["valid"], batch["top1"]
    hidden = model.model(input_ids=x, attention_mask=valid.long()).last_hidden_state  # (B, T, H)
    logp = torch.log_softmax(hidden @ rows.T, -1)
    with torch.no_grad():
        teacher = teacher_logp(f, rows)
    ok = valid.float()
    loss = (soft_ce(logp, teacher) * ok).sum() / ok.sum()
    hits = (draft_ids[logp.argmax(-1)] == top1).float()
    return loss, {"acc": float((hits * ok).sum() / ok.sum())}
