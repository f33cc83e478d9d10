"""Verification, written once: one target forward over the proposed tree, the lossless choice of
the accepted path, exactly one bonus token from the target, and the KV cache rolled back to it."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Optional

import torch

from .config import SamplingConfig
from .events import ACCEPTED, REJECTED, UNREACHED
from .sampling import point_mass, residual, sample, target_distribution, uniform
from .tree import ROOT, Tree

TOP = 10  # tokens kept of each distribution a record shows (target_top, draft_top, residual_top)
Top = list[tuple[int, float]]  # a distribution's likeliest tokens as (token, probability), likeliest first


@dataclass(frozen=True)
class Verdict:
    path: list[int]  # accepted node indices, root to leaf
    status: list[str]  # per node: accepted / rejected / unreached
    target_probs: list[float]  # each node's token under the target distribution at its parent
    bonus: int  # the token the target adds after the accepted path
    bonus_prob: float
    bonus_source: str  # "target" or "residual"
    thresholds: Optional[list[float]] = None  # typical acceptance: per node, the probability its token had to beat
    # Why each verdict fell (per node, None where the node was not checked): see Round for their meaning.
    target_top: list[Optional[Top]] = field(default_factory=list)
    draft_top: Optional[list[Optional[Top]]] = None
    u: Optional[list[Optional[float]]] = None
    accept_probs: Optional[list[Optional[float]]] = None
    residual_top: Optional[list[Optional[Top]]] = None
    bonus_residual_prob: Optional[float] = None


def top_tokens(dists: torch.Tensor, k: int = TOP) -> list[Top]:
    """(n, V) -> per row its k likeliest tokens as (token, probability), likeliest first, zeros left out:
    one topk and one copy to Python for all the rows."""
    if len(dists) == 0:
        return []
    values, tokens = dists.topk(min(k, dists.shape[-1]), dim=-1)  # (n, k) each
    return [[(t, v) for t, v in zip(ts, vs) if v > 0] for ts, vs in zip(tokens.tolist(), values.tolist())]


def tops_by_node(dists: torch.Tensor, rows: list[int], nodes: list[int], n: int) -> list[Optional[Top]]:
    """top_tokens of dists[rows[j]] for each node nodes[j], laid out per node of an n-node tree (None elsewhere);
    a row shared by siblings is ranked once."""
    unique = sorted(set(rows))
    ranked = dict(zip(unique, top_tokens(dists[unique]))) if unique else {}
    out: list[Optional[Top]] = [None] * n
    for node, row in zip(nodes, rows):
        out[node] = ranked[row]
    return out


# What the rejection rule did at one node: (the uniform draw u, the min(1, p/q) it was compared with, the target
# distribution left after a rejection, None when the node was kept).
Tried = tuple[float, float, Optional[torch.Tensor]]


def explained(tree: Tree, probs: torch.Tensor, verdict: Verdict, tried: Optional[dict[int, Tried]] = None,
              left: Optional[torch.Tensor] = None) -> Verdict:
    """The verdict with the distributions behind it: the target's top tokens at each checked node's parent; after
    rejection sampling (`tried`, and `left`: what the bonus was drawn from), each tried node's u and min(1, p/q),
    the draft's top tokens where the guesses were sampled, and each rejection's residual."""
    checked = [i for i, s in enumerate(verdict.status) if s != UNREACHED]
    n = len(tree)
    reasons = dict(target_top=tops_by_node(probs, [tree.parents[i] + 1 for i in checked], checked, n))
    if tried is not None:
        rejected = [i for i in tried if tried[i][2] is not None]
        residual_top = [None] * n
        for node, top in zip(rejected, top_tokens(torch.stack([tried[i][2] for i in rejected])) if rejected else []):
            residual_top[node] = top
        reasons.update(u=[tried[i][0] if i in tried else None for i in range(n)],
                       accept_probs=[tried[i][1] if i in tried else None for i in range(n)], residual_top=residual_top,
                       bonus_residual_prob=float(left[verdict.bonus]) if verdict.bonus_source == "residual" else None)
        if tree.draft_dists is not None:
            reasons["draft_top"] = tops_by_node(tree.draft_dists, checked, checked, n)
    return replace(verdict, **reasons)


def try_children(tree: Tree, kids: list[int], left: torch.Tensor, generator: torch.Generator, status: list[str],
                 tried: dict[int, Tried]) -> tuple[Optional[int], torch.Tensor]:
    """The recursive rejection rule at one node: child c_j is kept with probability min(1, p(c_j) / q_j(c_j)); on
    rejection p <- norm(max(0, p - q_j)) and the next child is tried. Returns the kept child (None: all were
    rejected) and what is left of p; fills in status and tried."""
    for child in kids:
        token = tree.tokens[child]
        draft = (tree.draft_dists[child].to(left.device) if tree.draft_dists is not None
                 else point_mass(token, left))  # a draft on the GPU, p on the CPU
        accept_prob = min(1.0, float(left[token]) / max(float(draft[token]), 1e-30))
        u = uniform(generator)
        if u < accept_prob:
            status[child], tried[child] = ACCEPTED, (u, accept_prob, None)
            return child, left
        status[child], left = REJECTED, residual(left, draft)
        tried[child] = (u, accept_prob, left)
    return None, left


def choose_path(tree: Tree, logits: torch.Tensor, sampling: SamplingConfig,
                generator: torch.Generator) -> Verdict:
    """Walk the tree from the root, accepting children the target agrees with.

    logits: (n+1, V); row 0 is the target's prediction after the root, row 1+i after node i.
    Greedy: a child is accepted when it equals the target's argmax (longest matching path).
    Sampling: the recursive rejection rule (`try_children`). q_j is the distribution c_j was drawn from, or a
    point mass for a deterministic guess. When no child is accepted the bonus token is drawn from what is left
    of p. Typical acceptance (sampling.lossy) replaces the rejection rule: see `typical_path`.
    The verdict carries the reasons (`explained`).
    """
    probs = target_distribution(logits, sampling)  # (n+1, V)
    rows = [p + 1 for p in tree.parents]
    target_probs = [float(probs[r, t]) for r, t in zip(rows, tree.tokens)]
    if sampling.lossy and len(tree):
        return explained(tree, probs, typical_path(tree, probs, target_probs, sampling, generator))
    status, tried = [UNREACHED] * len(tree), {}
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
            chosen, left = try_children(tree, children[node], left, generator, status, tried)
            source = "residual" if chosen is None and children[node] else "target"
        if chosen is None:
            break
        path.append(chosen)
        node, left, source = chosen, probs[chosen + 1], "target"
    bonus = int(torch.argmax(logits[node + 1])) if sampling.greedy else sample(left, generator)
    verdict = Verdict(path, status, target_probs, bonus, float(probs[node + 1, bonus]), source)
    return explained(tree, probs, verdict, None if sampling.greedy else tried, left)


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
