"""Losses, batches and held-out metrics for our Medusa and EAGLE heads, on cached target features.

Every loss is a distillation: the label at a position is the target's own next-token distribution
there, softmax(lm_head(f)), restricted to the draft vocabulary (the rows that drafting scores).
"""
from __future__ import annotations

from collections import Counter
from typing import Iterator

import torch
from torch.nn import functional as F

from ..methods.eagle import join
from .features import Features


def draft_vocabulary(feats: Features, size: int, vocab: int) -> torch.Tensor:
    """The `size` tokens the target predicts most often (then the lowest ids), sorted: the draft's rows."""
    counts = Counter(feats.top1.tolist()) + Counter(feats.tokens.tolist())
    chosen = [t for t, _ in counts.most_common(size)]
    chosen_set = set(chosen)
    chosen += [t for t in range(vocab) if t not in chosen_set][: size - len(chosen)]
    return torch.tensor(sorted(chosen[:size]))


def lm_rows(target, draft_ids: torch.Tensor) -> torch.Tensor:
    return target.model.get_output_embeddings().weight.detach()[draft_ids].float()  # (Vd, H)


def teacher_logp(f: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """log softmax of the target's logits restricted to the draft rows: (..., H) -> (..., Vd)."""
    return torch.log_softmax(f.to(rows.dtype) @ rows.T, -1)


def soft_ce(logp: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    return -(teacher.exp() * logp).sum(-1)


# ----- Medusa: positions are independent, so batches are random positions -----------------------

def weighted_spans(feats: Features, distill_repeat: int = 1) -> list[tuple[int, int, int]]:
    """The spans, with the target's own answers (ids "distill:...") repeated: they are what it will write."""
    return [span for span, seq_id in zip(feats.spans, feats.ids)
            for _ in range(distill_repeat if seq_id.startswith("distill:") else 1)]


def on(batch: dict, device) -> dict:
    """A batch's tensors on the training device (batches are built on the CPU from the cached features)."""
    return batch if device is None else {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def medusa_batches(feats: Features, n_heads: int, batch: int, seed: int, distill_repeat: int = 1, device=None):
    """Batches of positions t with the features f_t and f_{t+1+i} (head i's teacher), their validity, and whether
    the tokens x_{t+1} .. x_{t+1+i} between t and head i's guess are the target's own greedy choices ("greedy").
    Only then does the guess matter when drafting: head i is verified after the target's own next token and
    head 0..i-1's accepted guesses. Elsewhere (prompts, human-written text) the teacher at t+1+i follows a path
    that the head, which sees only f_t, cannot know."""
    end = torch.empty(feats.n_tokens, dtype=torch.long)
    for a, b, _ in feats.spans:
        end[a:b] = b
    f = feats.feats[-1]
    agree = torch.zeros(feats.n_tokens, dtype=torch.bool)  # agree[j]: x_{j+1} is the target's top-1 at j
    agree[:-1] = feats.top1[:-1] == feats.tokens[1:]
    positions = torch.cat([torch.arange(a, b) for a, b, _ in weighted_spans(feats, distill_repeat)])

    def epoch(number: int) -> Iterator[dict]:
        order = positions[torch.randperm(len(positions), generator=torch.Generator().manual_seed(seed + number))]
        for i in range(0, len(order) - batch + 1, batch):
            t = order[i:i + batch]
            ahead = t[None] + 1 + torch.arange(n_heads)[:, None]  # (n_heads, N): the position whose prediction head i makes
            valid = ahead < end[t][None]
            ahead = torch.where(valid, ahead, t[None])
            greedy = valid & agree[ahead - 1].cumprod(0).bool()  # x_{t+1}, ..., x_{t+1+i} all the target's top-1
            yield on({"t": t, "f": f[t].float(), "f_ahead": f[ahead].float(), "valid": valid, "greedy": greedy,
                      "top1_ahead": feats.top1[ahead]}, device)
    return epoch


def medusa_loss(heads, rows: torch.Tensor, draft_ids: torch.Tensor, batch: dict, decay: float = 0.8,
                off_greedy_weight: float = 1.0):
    """Soft CE of each head against the target's distribution where its guess lands; positions off the greedy path
    count off_greedy_weight times. Metrics: acc<i> over every position, greedy<i> over those on it (what drafting sees)."""
    h = heads.hidden(batch["f"].to(rows.dtype))  # (n_heads, N, H)
    logp = torch.log_softmax(h @ rows.T, -1)  # (n_heads, N, Vd)
    with torch.no_grad():
        teacher = teacher_logp(batch["f_ahead"], rows)
    ce = soft_ce(logp, teacher)  # (n_heads, N)
    valid, greedy = batch["valid"].float(), batch["greedy"].float()
    weight = valid * torch.where(batch["greedy"], 1.0, off_greedy_weight)
    per_head = (ce * weight).sum(-1) / weight.sum(-1).clamp(min=1e-6)
    weights = decay ** torch.arange(len(per_head), dtype=torch.float, device=per_head.device)
    hits = (draft_ids[logp.argmax(-1)] == batch["top1_ahead"]).float()
    metrics = {}
    for i in range(len(per_head)):
        metrics[f"acc{i}"] = float((hits[i] * valid[i]).sum() / valid[i].sum().clamp(min=1))
        metrics[f"greedy{i}"] = float((hits[i] * greedy[i]).sum() / greedy[i].sum().clamp(min=1))
    return (per_head * weights).sum(), metrics


@torch.no_grad()
def medusa_rank_accuracy(heads, lm_weight: torch.Tensor, feats: Features, top_k: int = 8,
                         limit: int = 20000) -> list[list[float]]:
    """[head][rank]: how often head i's rank-r guess over the full vocabulary is the target's token, counted where
    the path to it is the target's greedy one (as when drafting: the tree's expected acceptance is built on these)."""
    batch = next(medusa_batches(feats, len(heads), min(limit, feats.n_tokens - 1), seed=0, device=lm_weight.device)(0))
    logits = heads.hidden(batch["f"].to(lm_weight.dtype)) @ lm_weight.T  # (n_heads, N, V)
    top = logits.topk(top_k, -1).indices  # (n_heads, N, k)
    hits = (top == batch["top1_ahead"][..., None]).float() * batch["greedy"][..., None]
    return (hits.sum(1) / batch["greedy"].float().sum(1, keepdim=True).clamp(min=1)).tolist()


# ----- EAGLE: sequences, unrolled for a few draft steps ("training-time test") ----------------------

def sequence_batches(feats: Features, batch_tokens: int, seed: int, layers=(-1,), distill_repeat: int = 1,
                     device=None):
    """Batches of whole sequences of similar length, right-padded; shuffled per epoch (seeded)."""
    spans = sorted(weighted_spans(feats, distill_repeat), key=lambda s: s[1] - s[0])
    groups, current = [], []
    for span in spans:
        if current and (len(current) + 1) * (span[1] - span[0]) > batch_tokens:
            groups.append(current)
            current = []
        current.append(span)
    if current:
        groups.append(current)

    def make(group) -> dict:
        width = max(b - a for a, b, _ in group)
        tokens = torch.zeros(len(group), width, dtype=torch.long)
        top1 = torch.zeros(len(group), width, dtype=torch.long)
        valid = torch.zeros(len(group), width, dtype=torch.bool)
        answer = torch.zeros(len(group), width, dtype=torch.bool)  # the answer's tokens (the prompt's are not)
        f = torch.zeros(len(group), width, sum(feats.feats[layer].shape[1] for layer in layers))
        for row, (a, b, s) in enumerate(group):
            tokens[row, : b - a], top1[row, : b - a], valid[row, : b - a] = feats.tokens[a:b], feats.top1[a:b], True
            answer[row, s - a: b - a] = True
            f[row, : b - a] = torch.cat([feats.feats[layer][a:b] for layer in layers], -1).float()
        return {"tokens": tokens, "top1": top1, "valid": valid, "answer": answer, "f": f}

    def epoch(number: int) -> Iterator[dict]:
        for i in torch.randperm(len(groups), generator=torch.Generator().manual_seed(seed + number)).tolist():
            yield on(make(groups[i]), device)
    epoch.n_batches = len(groups)
    return epoch


def step_mask(steps_before: int, n: int) -> torch.Tensor:
    """Which keys a query at position t sees in unrolled step s (= steps_before): the true-feature
    keys of positions <= t - s, and the key of position t - s + i from each step i = 1..s
    (its draft ancestors at inference). (n, (s+1) n) bool."""
    s = steps_before
    t, j = torch.arange(n)[:, None], torch.arange(n)[None]
    return torch.cat([j <= t - s] + [j == t - s + i for i in range(1, s + 1)], 1)


def eagle_loss(head, embed, rows, draft_ids, batch: dict, steps: int = 3, noise: float = 0.0,
               ce_weight: float = 0.5, decay: float = 0.8, prompt_weight: float = 1.0):
    """Step 0 reads (emb(x_{t+1}), f_t); step s reads the output of step s-1 at t-1, like tree depth s+1.
    EAGLE-1/2: each output regresses f_{t+1} (smooth L1) and matches the target's distribution there (soft CE).
    EAGLE-3: f_t is the fused low/middle/high features (batch "f" holds them, then the last layer, which
    only teaches); the loss is the soft CE alone, through the head's own norm and LM head.
    Drafting happens in answers, from the first answer token on: a position whose root x_{t+1} is a prompt token
    counts prompt_weight times. Metrics: acc<s> over every position, ans<s> over the answers' (what drafting sees)."""
    x, f, valid, top1 = batch["tokens"], batch["f"].to(rows.dtype), batch["valid"], batch["top1"]
    n = x.shape[1] - 1
    answer = batch["answer"][:, 1:] & valid[:, 1:]  # loss position t: its root x_{t+1} is an answer token
    emb = embed(x[:, 1:]).to(rows.dtype)  # (B, n, H): x_{t+1}
    inputs, f = (f[..., :-rows.shape[1]], f[..., -rows.shape[1]:]) if head.eagle3 else (f, f)
    feature = inputs[:, :-1]
    if noise:
        feature = feature + noise * (torch.rand_like(feature) * 2 - 1) * feature.pow(2).mean(-1, keepdim=True).sqrt()
    target_f = f[:, 1:]
    with torch.no_grad():
        teacher = teacher_logp(target_f, rows)  # (B, n, Vd)
    positions = torch.arange(n, device=x.device)[None]
    caches, total, metrics = [], 0.0, {}  # per step so far: per layer (keys, values)
    for s in range(steps):
        out, kv = head.step(emb, feature, positions, join(caches) if caches else None,
                            step_mask(s, n).to(x.device)[None, None])
        caches.append(kv)
        logp = torch.log_softmax(head.logits(out, rows), -1)
        reached = (torch.arange(n, device=x.device) >= s)[None]
        ok = (valid[:, 1:] & reached).float()
        weight = ok * torch.where(answer, 1.0, prompt_weight)
        if head.eagle3:
            per_pos = soft_ce(logp, teacher)
        else:
            per_pos = F.smooth_l1_loss(out, target_f, reduction="none").mean(-1) + ce_weight * soft_ce(logp, teacher)
        total = total + decay ** s * (per_pos * weight).sum() / weight.sum().clamp(min=1e-6)
        hits = (draft_ids[logp.argmax(-1)] == top1[:, 1:]).float()
        metrics[f"acc{s}"] = float((hits * ok).sum() / ok.sum().clamp(min=1))
        in_answer = (answer & reached).float()
        metrics[f"ans{s}"] = float((hits * in_answer).sum() / in_answer.sum().clamp(min=1))
        feature = torch.cat([torch.zeros_like(out[:, :1]), out[:, :-1]], 1)  # position t reads out[t-1]
    return total, metrics


@torch.no_grad()
def mean_metrics(loss_fn, batches: Iterator[dict], limit: int = 40) -> dict[str, float]:
    sums: dict[str, float] = {}
    count = 0
    for i, batch in enumerate(batches):
        if i >= limit:
            break
        loss, metrics = loss_fn(batch)
        for key, value in {"loss": float(loss), **metrics}.items():
            sums[key] = sums.get(key, 0.0) + value
        count += 1
    return {k: round(v / max(count, 1), 4) for k, v in sums.items()}
