"""Verification, written once: one target forward over the proposed tree, the lossless choice of
the accepted path, exactly one bonus token from the target, and the KV cache rolled back to it."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from .config import SamplingConfig
from .events import ACCEPTED, REJECTED, UNREACHED
from .sampling import point_mass, residual, sample, target_distribution, uniform
from .tree import ROOT, Tree


@dataclass(frozen=True)
class Verdict:
    path: list[int]  # accepted node indices, root to leaf
    status: list[str]  # per node: accepted / rejected / unreached
    target_probs: list[float]  # each node's token under the target distribution at its parent
    bonus: int  # the token the target adds after the accepted path
    bonus_prob: float
    bonus_source: str  # "target" or "residual"
    thresholds: Optional[list[float]] = None  # typical acceptance: per node, the probability its token had to beat


def choose_path(tree: Tree, logits: torch.Tensor, sampling: SamplingConfig,
                generator: torch.Generator) -> Verdict:
    """Walk the tree from the root, accepting children the target agrees with.

    logits: (n+1, V); row 0 is the target's prediction after the root, row 1+i after node i.
    Greedy: a child is accepted when it equals the target's argmax (longest matching path).
    Sampling: the recursive rejection rule. Sibling c_j is accepted with probability
    min(1, p(c_j) / q_j(c_j)); on rejection p <- norm(max(0, p - q_j)) and the next sibling is
    tried. q_j is the distribution c_j was drawn from, or a point mass for a deterministic guess.
    When no child is accepted the bonus token is drawn from what is left of p.
    Typical acceptance (sampling.lossy) replaces the rejection rule: see `typical_path`.
    """
    probs = target_distribution(logits, sampling)  # (n+1, V)
    rows = [p + 1 for p in tree.parents]
    target_probs = [float(probs[r, t]) for r, t in zip(rows, tree.tokens)]
    if sampling.lossy and len(tree):
        return typical_path(tree, probs, target_probs, sampling, generator)
    status = [UNREACHED] * len(tree)
    children = tree.children()
    node, path, left, source = ROOT, [], probs[0], "target"
    while True:
        chosen = None
        if sampling.greedy:
            best = int(torch.argmax(logits[node + 1]))
            for child in children[node]:
                hit = chosen is None and tree.tokens[child] == best
                status[child] = ACCEPTED if hit else REJECTED
                chosen = child if hit else chosen
        else:
            for child in children[node]:
                token = tree.tokens[child]
                draft = (tree.draft_dists[child].to(left.device) if tree.draft_dists is not None
                         else point_mass(token, left))  # a draft on the GPU, p on the CPU
                accept_prob = min(1.0, float(left[token]) / max(float(draft[token]), 1e-30))
                if uniform(generator) < accept_prob:
                    status[child], chosen = ACCEPTED, child
                    break
                status[child], left, source = REJECTED, residual(left, draft), "residual"
        if chosen is None:
            break
        path.append(chosen)
        node, left, source = chosen, probs[chosen + 1], "target"
    if sampling.greedy:
        bonus = int(torch.argmax(logits[node + 1]))
    else:
        bonus = sample(left, generator)
    return Verdict(path, status, target_probs, bonus, float(probs[node + 1, bonus]), source)


def typical_thresholds(probs: torch.Tensor, sampling: SamplingConfig) -> torch.Tensor:
    """(n+1, V) -> (n+1,): per row, min(epsilon, alpha * exp(-H(p))), H the entropy of the row (Medusa's form)."""
    entropy = -(probs * torch.log(probs + 1e-5)).sum(-1)
    return torch.clamp(sampling.typical_alpha * torch.exp(-entropy), max=sampling.typical_epsilon)


def typical_path(tree: Tree, probs: torch.Tensor, target_probs: list[float], sampling: SamplingConfig,
                 generator: torch.Generator) -> Verdict:
    """Medusa's typical acceptance, LOSSY: a guess passes when the target gives it more than the threshold at
    its parent (a plausible token, not necessarily the one the target would sample). The accepted path is the
    deepest one whose every guess passes, the likeliest (sum of log p) among equally deep ones. Only the
    acceptance changes: the bonus is drawn from p as in every other round (Medusa also truncates it), so a
    round with no guesses, and the baseline, stay exact. Fewer rejections, but the text no longer follows the
    target's distribution. probs: (n+1, V) target distributions, row 0 after the root."""
    limit = typical_thresholds(probs, sampling)  # (n+1,)
    thresholds = [float(limit[p + 1]) for p in tree.parents]
    score = {ROOT: (0, 0.0)}  # passing nodes (and the root): (depth, log-likelihood of the path)
    best = ROOT
    for i, parent in enumerate(tree.parents):  # each parent comes before its children
        if parent in score and target_probs[i] > thresholds[i]:
            depth, logp = score[parent]
            score[i] = (depth + 1, logp + math.log(target_probs[i]))
            best = i if score[i] > score[best] else best
    path, node = [], best
    while node != ROOT:
        path.append(node)
        node = tree.parents[node]
    path.reverse()
    on_path, tried = set(path), {ROOT, *path}  # the children of the root and of kept nodes were looked at
    status = [ACCEPTED if i in on_path else REJECTED if p in tried else UNREACHED for i, p in enumerate(tree.parents)]
    bonus = sample(probs[best + 1], generator)
    return Verdict(path, status, target_probs, bonus, float(probs[best + 1, bonus]), "target", thresholds)


def truncate(cache, length: int) -> None:
    """Drop every cached position from `length` on (a negative crop works across transformers versions)."""
    remove = cache.get_seq_length() - length
    if remove > 0:
        cache.crop(-remove)


def preallocated_cache(config, capacity: int):
    """A DynamicCache whose full-attention layers write into buffers of `capacity` positions instead of
    growing by torch.cat each forward (an O(length) copy per layer per forward: 5% of a 1-token forward
    at 300 cached tokens, 14% at 1,200 on the 2-core CPU). Other layer kinds stay as transformers makes them."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    class BufferedLayer(DynamicLayer):
        """keys/values are views [: length] of preallocated buffers; crop shortens the view."""

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            n, length = key_states.shape[-2], self.get_seq_length()
            buffer = getattr(self, "buffers", None)
            if buffer is None or self.keys.data_ptr() != buffer[0].data_ptr() or length + n > buffer[0].shape[-2]:
                size = max(capacity, 2 * (length + n))  # fits the run; doubles if a caller asks for more
                shape = (*key_states.shape[:-2], size, key_states.shape[-1])
                buffer = (key_states.new_empty(shape), value_states.new_empty(shape))
                if length:
                    buffer[0][..., :length, :] = self.keys
                    buffer[1][..., :length, :] = self.values
                self.buffers = buffer
            buffer[0][..., length:length + n, :] = key_states
            buffer[1][..., length:length + n, :] = value_states
            self.keys, self.values = buffer[0][..., :length + n, :], buffer[1][..., :length + n, :]
            return self.keys, self.values

    cache = DynamicCache(config=config)
    layers = getattr(cache, "layers", None)
    if isinstance(layers, list):
        cache.layers = [BufferedLayer() if type(layer) is DynamicLayer else layer for layer in layers]
    return cache


class TargetSession:
    """Per-run state of the target: its KV cache. Holds every committed token but the last (the root)."""

    def __init__(self, model: torch.nn.Module, hidden_layers: tuple[int, ...] = (), capacity: int = 0):
        from transformers import DynamicCache

        self.model = model
        self.hidden_layers = hidden_layers  # indices into HF hidden_states that the proposer reads
        # capacity: positions the run can need (prompt + new tokens + one round's tree); 0 = grow as needed
        self.cache = preallocated_cache(model.config, capacity) if capacity else DynamicCache(config=model.config)

    @property
    def past_len(self) -> int:
        return self.cache.get_seq_length()

    def prefill(self, prompt_ids: list[int]) -> tuple[torch.Tensor, ...]:
        """Run the prompt but its last token; returns the proposer's features at those positions."""
        if len(prompt_ids) < 2:
            return tuple(torch.empty(0) for _ in self.hidden_layers)
        device = next(self.model.parameters()).device
        input_ids = torch.tensor([prompt_ids[:-1]], device=device)  # (1, P-1)
        out = self.model(input_ids=input_ids, cache=self.cache, use_cache=True, logits_to_keep=1,
                         output_hidden_states=bool(self.hidden_layers))
        return self._features(out, None)

    def forward_tree(self, root: int, tree: Tree):
        """One forward over [root] + tree on top of the cache; the new slots stay in the cache."""
        device = next(self.model.parameters()).device
        past_len = self.past_len
        input_ids = torch.tensor([[root] + tree.tokens], device=device)  # (1, n+1)
        position_ids = torch.tensor([[0] + tree.depths()], device=device) + past_len  # (1, n+1): by depth
        mask = None if tree.is_chain else tree.attention_mask(past_len, self.model.dtype, device)
        return self.model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids,
                          cache=self.cache, use_cache=True, output_hidden_states=bool(self.hidden_layers))

    def verify(self, root: int, tree: Tree, sampling: SamplingConfig,
               generator: torch.Generator) -> tuple[Verdict, tuple[torch.Tensor, ...]]:
        """One forward over [root] + tree; returns the verdict and the features of root + accepted path."""
        past_len = self.past_len
        # Step 1: one target forward over the whole tree (positions by depth, mask by ancestry).
        out = self.forward_tree(root, tree)
        logits = out.logits[0].float()  # (n+1, V)
        # Step 2: accept a path and draw the bonus token.
        verdict = choose_path(tree, logits if sampling.greedy else logits.cpu(), sampling, generator)
        # Step 3: keep the KV of root + accepted path only.
        keep = [0] + [i + 1 for i in verdict.path]
        self._keep(past_len, keep)
        return verdict, self._features(out, keep)

    def _features(self, out, keep: Optional[list[int]]) -> tuple[torch.Tensor, ...]:
        if not self.hidden_layers:
            return ()
        states = out.hidden_states
        return tuple(states[layer][0] if keep is None else states[layer][0, keep] for layer in self.hidden_layers)

    def _keep(self, past_len: int, keep: list[int]) -> None:
        """Roll the cache back to past_len + the kept slots of the last forward."""
        new_len = self.past_len
        if keep == list(range(len(keep))):  # a prefix (every chain): a crop is enough
            truncate(self.cache, past_len + len(keep))
            return
        index = torch.tensor([past_len + i for i in keep], device=next(self.model.parameters()).device)
        for layer in self.cache.layers:  # tree paths: move the kept slots down, in place (transformers >= 4.56 layout)
            kept_keys, kept_values = layer.keys.index_select(-2, index), layer.values.index_select(-2, index)
            layer.keys[..., past_len:past_len + len(keep), :] = kept_keys
            layer.values[..., past_len:past_len + len(keep), :] = kept_values
        truncate(self.cache, past_len + len(keep))
        assert self.past_len == past_len + len(keep) <= new_len
