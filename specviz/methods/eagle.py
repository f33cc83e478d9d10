"""EAGLE-2: a one-layer (or few-layer) autoregressive draft head over [token embedding, target feature], drafting
a dynamic tree that the target verifies in one forward. Also loads EAGLE-1/2 and EAGLE-3 checkpoints.

Pairing (shift by one): draft position t reads (emb(x_{t+1}), f_t) and its output approximates
f_{t+1}, whose logits guess x_{t+2}. Deeper tree levels read the draft's own output in place of f.
  EAGLE-1/2 (ours too): f = the target's last hidden state after the final norm; fc(2H -> H) over
    [emb, f]; Llama layers, the first without input_layernorm (EAGLE's own code allows several; the
    public heads have one); logits = the target's LM head on the output,
    restricted to a draft vocabulary (d2t) when the checkpoint has one (much cheaper per step).
  EAGLE-3: f = the hidden states entering target layers 2, L//2 and L-3, fused by fc(3H -> H);
    the layer attends over [input_layernorm(emb), hidden_norm(h)]; logits = its own
    lm_head(norm(h)) over a draft vocabulary mapped to target ids by the offsets d2t.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..assets import check_target, first_file, read_card, read_tensors, resolve
from ..tree import Candidate, Tree, best, grow, level_visibility
from .base import Proposer
from .ngram import graft, lookup

FILES = ("model.safetensors", "pytorch_model.bin")


class DraftAttention(nn.Module):
    """Llama attention over explicit key/value tensors, so the caller owns the cache and the mask."""

    def __init__(self, config, in_width: int):
        super().__init__()
        self.n_heads, self.n_kv = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.n_heads
        bias = bool(getattr(config, "attention_bias", False))
        self.q_proj = nn.Linear(in_width, self.n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(in_width, self.n_kv * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(in_width, self.n_kv * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, config.hidden_size, bias=bias)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], past: Optional[tuple],
                visible: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x (B, T, in); visible (B|1, 1, T, S+T) bool over [past keys, new keys]; returns out and the new (k, v)."""
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim).transpose(1, 2)  # (B, nh, T, d)
        k = self.k_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)  # (B, nkv, T, d)
        v = self.v_proj(x).view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, *rope)
        keys, values = (k, v) if past is None else (torch.cat([past[0], k], 2), torch.cat([past[1], v], 2))
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=visible, enable_gqa=True)  # (B, nh, T, d)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1)), (k, v)


class DraftLayer(nn.Module):
    """One Llama decoder layer as EAGLE uses it (EAGLE-1/2: no input_layernorm in the first; EAGLE-3: two input norms)."""

    def __init__(self, config, eagle3: bool, index: int = 0):
        from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm

        super().__init__()
        hidden, eps = config.hidden_size, config.rms_norm_eps
        self.eagle3 = eagle3
        self.self_attn = DraftAttention(config, 2 * hidden if eagle3 else hidden)
        self.mlp = LlamaMLP(config)
        self.post_attention_layernorm = LlamaRMSNorm(hidden, eps=eps)
        if eagle3 or index > 0:
            self.input_layernorm = LlamaRMSNorm(hidden, eps=eps)
        if eagle3:
            self.hidden_norm = LlamaRMSNorm(hidden, eps=eps)

    def forward(self, h: torch.Tensor, emb: torch.Tensor, rope, past, visible):
        if self.eagle3:
            attn_in = torch.cat([self.input_layernorm(emb), self.hidden_norm(h)], -1)
        else:
            attn_in = self.input_layernorm(h) if hasattr(self, "input_layernorm") else h
        attn, kv = self.self_attn(attn_in, rope, past, visible)
        h = h + attn
        return h + self.mlp(self.post_attention_layernorm(h)), kv


class EagleHead(nn.Module):
    """The draft network. Key names follow the public checkpoints (EAGLE-1/2: fc, layers.0.* (and layers.1.*, ...);
    EAGLE-3: fc, midlayer.*, norm, lm_head, d2t, t2d). d2t[i] is an offset: target id = i + d2t[i]."""

    def __init__(self, config, eagle3: bool = False, feature_width: Optional[int] = None, fc_bias: bool = True,
                 draft_vocab: Optional[int] = None, vocab: Optional[int] = None, n_layers: int = 1):
        from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding

        super().__init__()
        hidden = config.hidden_size
        self.config, self.eagle3 = config, eagle3
        if eagle3:
            self.fc = nn.Linear(feature_width or 3 * hidden, hidden, bias=False)
            self.midlayer = DraftLayer(config, eagle3=True)
            self.norm = LlamaRMSNorm(hidden, eps=config.rms_norm_eps)
            self.lm_head = nn.Linear(hidden, draft_vocab or vocab, bias=False)
        else:
            self.fc = nn.Linear(2 * hidden, hidden, bias=fc_bias)
            self.layers = nn.ModuleList([DraftLayer(config, eagle3=False, index=i) for i in range(n_layers)])
        if draft_vocab is not None:
            self.register_buffer("d2t", torch.zeros(draft_vocab, dtype=torch.long))
            if eagle3:
                self.register_buffer("t2d", torch.zeros(vocab, dtype=torch.bool))
        self.rotary = LlamaRotaryEmbedding(config)  # no weights: rebuilt from the config

    @property
    def stack(self) -> list[DraftLayer]:
        return [self.midlayer] if self.eagle3 else list(self.layers)

    def draft_ids(self) -> Optional[torch.Tensor]:
        """(Vd,) target token id of each draft-vocabulary row, or None for the full vocabulary."""
        if not hasattr(self, "d2t"):
            return None
        return torch.arange(len(self.d2t), device=self.d2t.device) + self.d2t

    def step(self, emb: torch.Tensor, feature: torch.Tensor, positions: torch.Tensor, past: Optional[list], visible):
        """emb (B, T, H), feature (B, T, W): a target feature, or the draft's own output (width H); past: one
        (keys, values) per layer, or None. Returns the output (B, T, H) (the next feature's estimate) and the
        new positions' (keys, values), one per layer."""
        if self.eagle3:
            h = self.fc(feature) if feature.shape[-1] != self.config.hidden_size else feature
        else:
            h = self.fc(torch.cat([emb, feature], -1))
        rope = self.rotary(h, positions)
        new = []
        for i, layer in enumerate(self.stack):
            h, kv = layer(h, emb, rope, None if past is None else past[i], visible)
            new.append(kv)
        return h, new

    def logits(self, out: torch.Tensor, lm_rows: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary logits (..., Vd): own norm + lm_head (EAGLE-3) or the target's LM rows."""
        if self.eagle3:
            return self.lm_head(self.norm(out))
        return out @ lm_rows.T


@dataclass(frozen=True)
class EagleWeights:
    """A loaded head (read-only) with what it reads from the target."""

    head: EagleHead
    embed: nn.Module  # the target's input embedding
    lm_rows: torch.Tensor  # (Vd, H) the target's LM head rows of the draft vocabulary (EAGLE-1/2)
    lm: torch.Tensor  # (V, H) the target's whole LM head
    draft_ids: Optional[torch.Tensor]  # (Vd,) target id per draft row; None = identity
    hidden_layers: tuple[int, ...]
    card: Optional[dict] = None


@dataclass(frozen=True)
class TreeOptions:
    top_k: int = 8  # children tried per expanded node, and nodes expanded per level
    nodes: int = 48  # tree nodes kept for verification (the root not counted)
    lookup: int = 0  # > 0: also graft the prompt-lookup guess (n-grams up to this size) onto the tree
    context_rows: bool = True  # also score the tokens of the context that a reduced draft vocabulary lacks


def join(caches: list[list[tuple[torch.Tensor, torch.Tensor]]]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per-layer (keys, values) caches, concatenated along the positions, layer by layer (one alone: as it is)."""
    if len(caches) == 1:
        return caches[0]
    return [(torch.cat([c[i][0] for c in caches], 2), torch.cat([c[i][1] for c in caches], 2)) for i in range(len(caches[0]))]


def layer_count(state: dict) -> int:
    """Decoder layers of an EAGLE-1/2 state dict, counted from its keys (layers.0.*, layers.1.*, ...)."""
    return 1 + max((int(k.split(".")[1]) for k in state if k.startswith("layers.")), default=0)


def feature_layers(n_layers: int, eagle3: bool) -> tuple[int, ...]:
    """The HF hidden_states a head reads: the last one (after the final norm) for EAGLE-1/2; those entering
    layers 2, L//2 and L-3 (low, middle, high) for EAGLE-3."""
    return (2, n_layers // 2, n_layers - 3) if eagle3 else (-1,)


def bind(head: EagleHead, target, card: Optional[dict] = None) -> EagleWeights:
    """Attach a head to the target it drafts for: embedding, LM rows, feature layers."""
    head = head.to(target.device, target.dtype).eval().requires_grad_(False)
    ids = head.draft_ids()
    lm = target.model.get_output_embeddings().weight.detach()  # (V, H)
    layers = feature_layers(target.model.config.num_hidden_layers, head.eagle3)
    return EagleWeights(head, target.model.get_input_embeddings(), lm if ids is None else lm[ids], lm, ids, layers, card)


class EagleProposer(Proposer):
    """Per-run state: the target features seen so far and the draft's KV cache of committed positions."""

    name = "eagle"

    def __init__(self, weights: EagleWeights, options: TreeOptions = TreeOptions()):
        self.w, self.options = weights, options
        self.hidden_layers = weights.hidden_layers
        self.pending: list[torch.Tensor] = []  # chunks of (n, W): target features not yet in the draft cache
        self.n_features = 0  # features seen: positions 0 .. len(ids)-2 once the engine has observed a round
        self.cache: Optional[list] = None  # per draft layer (keys, values) of positions 0 .. n_cached-1
        self.n_cached = 0
        # A reduced draft vocabulary (d2t) misses the rare words that answers copy from their context (names,
        # numbers, the other language of a translation): those tokens' LM rows are scored too, found as they come.
        widen = options.context_rows and weights.draft_ids is not None and not weights.head.eagle3
        self.in_vocab = set(weights.draft_ids.tolist()) if widen else None
        self.context_rows = weights.lm_rows[:0]  # (E, H) LM rows of context tokens outside the draft vocabulary
        self.row_ids = weights.draft_ids  # (Vd + E,) target id of every scored row
        self.n_scanned = 0  # ids[:n_scanned] looked at

    def observe(self, features: tuple[torch.Tensor, ...]) -> None:
        if len(features[0]):
            self.pending.append(torch.cat(features, -1))  # EAGLE-3: low | mid | high
            self.n_features += len(features[0])

    def propose(self, ids: list[int], k: int) -> Tree:
        if self.n_features == 0:
            return Tree()
        assert self.n_features == len(ids) - 1, "features must cover every committed position but the root"
        self._scan(ids)
        # Step 1: extend the draft cache over the newly committed positions; the last output guesses depth 1.
        out = self._extend(ids)  # (H,)
        # Step 2: expand the tree level by level (EAGLE-2), then keep the best nodes overall.
        nodes = self._expand(out, len(ids) - 1, min(k, self.options.nodes))  # deeper than `nodes` is never kept
        tree = best(nodes, self.options.nodes)
        if self.options.lookup:  # Step 3 (optional, not in EAGLE): what followed the last n-gram before
            tree = graft(tree, lookup(np.asarray(ids), k, self.options.lookup, 1))
        return tree

    def _extend(self, ids: list[int]) -> torch.Tensor:
        w, device = self.w, self.w.lm_rows.device
        feats = torch.cat(self.pending).to(device, w.lm_rows.dtype)  # (m, W): positions n_cached .. len(ids)-2
        self.pending = []
        m = len(feats)
        tokens = torch.tensor(ids[self.n_cached + 1:], device=device)  # (m,): x_{t+1} pairs with f_t
        positions = torch.arange(self.n_cached, self.n_cached + m, device=device)[None]  # (1, m)
        visible = torch.ones(m, self.n_cached + m, dtype=torch.bool, device=device)
        visible[:, self.n_cached:] = torch.ones(m, m, dtype=torch.bool, device=device).tril()
        out, new = w.head.step(w.embed(tokens)[None], feats[None], positions, self.cache, visible[None, None])
        self.cache = new if self.cache is None else join([self.cache, new])
        self.n_cached += m
        return out[0, -1]

    def _scan(self, ids: list[int]) -> None:
        """Add the LM rows of committed tokens that the draft vocabulary lacks (with context_rows)."""
        if self.in_vocab is None:
            return
        new = [t for t in dict.fromkeys(ids[self.n_scanned:]) if t not in self.in_vocab]
        self.n_scanned = len(ids)
        if new:
            self.in_vocab.update(new)
            new_ids = torch.tensor(new, device=self.w.lm.device)
            self.context_rows = torch.cat([self.context_rows, self.w.lm[new_ids]])
            self.row_ids = torch.cat([self.row_ids, new_ids])

    def _candidates(self, out: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(n, H) draft outputs -> (n, top_k) log-probabilities and target token ids of the best children."""
        logits = self.w.head.logits(out, self.w.lm_rows)  # (n, Vd)
        if len(self.context_rows):  # the context's own rows after the draft vocabulary's
            logits = torch.cat([logits, out @ self.context_rows.T], -1)
        logp = torch.log_softmax(logits.float(), -1)
        top_logp, top = logp.topk(min(top_k, logp.shape[-1]), -1)
        return top_logp, (top if self.row_ids is None else self.row_ids[top])

    def _expand(self, out: torch.Tensor, root_pos: int, depth: int) -> list[Candidate]:
        """Every candidate of the dynamic tree; each level feeds the chosen nodes with their parent's output."""
        w, device = self.w, out.device
        outputs = out[None]  # (n, H): the last level's draft outputs (the root's at first)
        fed: list[list] = []  # per level fed so far: per layer (keys, values) of its nodes, in feeding order
        n_fed = 0

        def step(tokens: list[int], rows: list[int], ancestors: list[list[int]], level: int):
            nonlocal outputs, n_fed
            n = len(tokens)
            visible = level_visibility(self.n_cached, n_fed, ancestors, device)
            inputs = outputs[[max(r, 0) for r in rows]]  # each node reads its parent's output (n, H)
            positions = torch.full((1, n), root_pos + level - 1, device=device)  # all at the same depth
            new, kv = w.head.step(w.embed(torch.tensor(tokens, device=device))[None], inputs[None], positions,
                                  join([self.cache] + fed), visible[None, None])
            fed.append(kv)
            n_fed += n
            outputs = new[0]
            return self._candidates(outputs, self.options.top_k)

        logp, tokens = self._candidates(out[None], self.options.top_k)
        return grow(logp[0], tokens[0], step, depth, self.options.top_k)


def load_eagle(source: str | Path, target) -> EagleWeights:
    """An EAGLE-1/2 or EAGLE-3 checkpoint folder (config.json + model.safetensors or pytorch_model.bin),
    or our own shipped folder (the EAGLE-1/2 layout plus d2t, and a card naming its target)."""
    from transformers import LlamaConfig

    folder = resolve(source)
    card = read_card(folder)
    if card is not None:
        check_target(card, target, str(folder))
    config = LlamaConfig(**json.loads((folder / "config.json").read_text()))
    state = read_tensors(first_file(folder, FILES))
    return bind(head_from_state(state, config, target, str(folder)), target, card)


def head_from_state(state: dict[str, torch.Tensor], config, target, where: str) -> EagleHead:
    state = {k.removeprefix("model."): v for k, v in state.items() if not k.endswith("rotary_emb.inv_freq")}
    state.pop("embed_tokens.weight", None)  # a frozen copy of the target's: the target's own is used
    eagle3 = any(k.startswith("midlayer.") or k.endswith("hidden_norm.weight") for k in state)
    if eagle3:
        state = {k.replace("layers.0.", "midlayer.", 1) if k.startswith("layers.0.") else k: v for k, v in state.items()}
    hidden, target_hidden = config.hidden_size, target.model.config.hidden_size
    width = int(state["fc.weight"].shape[1])
    if (eagle3 and width != 3 * target_hidden) or (not eagle3 and (width != 2 * target_hidden or hidden != target_hidden)):
        raise ValueError(f"{where}: an EAGLE{'-3' if eagle3 else '-1/2'} head reading features of width "
                         f"{width // (3 if eagle3 else 2)} does not fit target {target.name!r} (hidden size {target_hidden})")
    draft_vocab = int(state["d2t"].shape[0]) if "d2t" in state else None
    if eagle3 and draft_vocab is None and int(state["lm_head.weight"].shape[0]) != target.vocab_size:
        raise ValueError(f"{where}: its lm_head has {state['lm_head.weight'].shape[0]} rows but no d2t map, and "
                         f"target {target.name!r} has a vocabulary of {target.vocab_size}")
    head = EagleHead(config, eagle3, width, "fc.bias" in state, draft_vocab, target.vocab_size,
                     1 if eagle3 else layer_count(state))
    if eagle3 and "t2d" not in state and draft_vocab is not None:
        state["t2d"] = torch.zeros(target.vocab_size, dtype=torch.bool)
        state["t2d"][torch.arange(draft_vocab) + state["d2t"]] = True
    head.load_state_dict(state, strict=True)
    if draft_vocab is not None and int((torch.arange(draft_vocab) + head.d2t).max()) >= target.vocab_size:
        raise ValueError(f"{where}: its draft vocabulary maps to ids beyond target {target.name!r}'s vocabulary")
    return head


def head_config(target, **overrides):
    """A LlamaConfig for a new head on `target`: the target's own layer shape."""
    from transformers import LlamaConfig

    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "rms_norm_eps", "hidden_act", "max_position_embeddings", "attention_bias", "mlp_bias", "rope_parameters")
    config = target.model.config.to_dict()
    values = {k: config[k] for k in keys if k in config}
    values.update(num_hidden_layers=1, vocab_size=target.vocab_size, tie_word_embeddings=False)
    values.update(overrides)
    return LlamaConfig(**values)


def new_head(target, eagle3: bool = False, draft_ids: Optional[torch.Tensor] = None, seed: int = 0,
             n_layers: int = 1) -> EagleHead:
    """A fresh head for `target` (random init; d2t from draft_ids, a sorted (Vd,) tensor of target ids)."""
    torch.manual_seed(seed)
    hidden = target.model.config.hidden_size
    vd = None if draft_ids is None else len(draft_ids)
    head = EagleHead(head_config(target, num_hidden_layers=n_layers), eagle3, 3 * hidden if eagle3 else None,
                     not eagle3, vd, target.vocab_size, n_layers)
    if draft_ids is not None:
        head.d2t.copy_(draft_ids - torch.arange(vd))
        if eagle3:
            head.t2d[draft_ids] = True
    if eagle3:  # start the own output layer as the target's: its final norm and LM-head rows
        with torch.no_grad():
            lm = target.model.get_output_embeddings().weight.detach()
            head.lm_head.weight.copy_(lm if draft_ids is None else lm[draft_ids.to(lm.device)])
            norm = getattr(getattr(target.model, "model", None), "norm", None)
            if norm is not None:
                head.norm.weight.copy_(norm.weight.detach())
    return head.to(target.dtype)


def save_eagle(folder: str | Path, head: EagleHead, card: dict, dtype: torch.dtype = torch.float16) -> None:
    """The public EAGLE layout (config.json + model.safetensors) plus card.json."""
    from safetensors.torch import save_file

    from ..assets import write_json

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: (v.detach().to(dtype) if v.is_floating_point() else v).contiguous() for k, v in head.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))
    config = head.config.to_dict()
    config["num_hidden_layers"] = len(head.stack)
    if hasattr(head, "d2t"):
        config["draft_vocab_size"] = len(head.d2t)
    write_json(folder / "config.json", config)
    write_json(folder / "card.json", card)
