"""The per-round record every view reads, and the statistics derived from a run's records.

No torch here: a Round holds ints, floats, strings and lists, so it crosses every boundary
(UI, charts, benchmark, JSON traces, tests) as it is.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Iterable, Optional

ACCEPTED, REJECTED, UNREACHED = "accepted", "rejected", "unreached"
SPECULATE, FALLBACK, PLAIN = "speculate", "fallback", "plain"


@dataclass(frozen=True)
class Round:
    """One verification round: what was proposed, what the target kept, what it added.

    Proposed nodes form a tree: ``parents[i]`` is the index of node i's parent, -1 for the
    root (the last committed token). A chain has parents [-1, 0, 1, ...]. The committed
    tokens of this round are ``emitted`` = the accepted path's tokens then the bonus token,
    cut at a stop token or at max_new_tokens.
    """

    index: int  # 0-based round number within the run
    method: str  # name of the proposer
    mode: str  # "speculate"; "fallback" (plain round while acceptance is low); "plain" (nothing proposed)
    k: int  # speculative budget this round (chain length / tree depth)
    tokens: list[int]  # proposed token ids, one per tree node
    parents: list[int]  # parent node index of each node, -1 = root
    pieces: list[str]  # decoded text of each proposed token
    status: list[str]  # per node: accepted / rejected / unreached
    draft_probs: list[Optional[float]]  # draft probability of each node's token, None when the proposer has none
    target_probs: list[float]  # target probability of each node's token, at its parent
    accepted_path: list[int]  # node indices of the accepted path, root to leaf
    bonus_token: Optional[int]  # the one token the target adds; None when the run stopped before it
    bonus_piece: str
    bonus_prob: Optional[float]  # target probability of the bonus token
    bonus_source: str  # "target" (argmax or a sample of p) or "residual" (sampled from max(0, p - q))
    emitted: list[int]  # tokens committed this round, in order
    text: str  # the text these tokens add to the output
    draft_time_s: float
    verify_time_s: float
    elapsed_s: float  # wall time since the run started (prefill included)
    tokens_so_far: int  # generated tokens after this round
    finished: bool
    stop_reason: Optional[str]  # "eos", "max_new_tokens", "time_budget" (RunConfig.time_budget_s) or None
    note: Optional[str] = None  # e.g. why this round fell back to plain decoding
    temperature: float = 0.0  # the run's sampling temperature (0 = greedy acceptance)
    draft_sampled: bool = False  # True: tokens were drawn from draft_probs' distribution, accepted w.p. min(1, p/q);
    # False: deterministic guesses (argmax, top-k, lookup), accepted w.p. p when sampling
    thresholds: Optional[list[float]] = None  # typical acceptance (lossy): per node, the target probability its
    # token had to beat; None: the exact rules (greedy, rejection sampling, or a round that guessed nothing)
    # Why each verdict fell. Per node lists (None at a node the target did not check: status unreached); a whole
    # field None: a record from before the field, or nothing of the kind this round. A distribution is shown by
    # its 10 likeliest tokens as [piece, probability (4 significant digits), token id], likeliest first.
    target_top: Optional[list[Optional[list[list]]]] = None  # the target's distribution at the node's parent as
    # the verifier used it (after temperature, top-k, top-p; the plain softmax at temperature 0)
    draft_top: Optional[list[Optional[list[list]]]] = None  # the draft distribution the guess was sampled from (the
    # draft model's chain at temperature > 0); None where the guesses are chosen (argmax, top-k, lookup): the rule
    # then takes q as a point mass on the guess (draft_probs still holds the drafter's own probability)
    u: Optional[list[Optional[float]]] = None  # rejection sampling: the uniform draw; the node was kept iff
    # u < accept_probs[node]. None at temperature 0 and under typical acceptance
    accept_probs: Optional[list[Optional[float]]] = None  # min(1, p/q) for the node's token: p the target's
    # probability, or for a later sibling what was left of it after the earlier siblings' rejections (residual_top
    # of the sibling before); q the draft's (1 for a point mass)
    residual_top: Optional[list[Optional[list[list]]]] = None  # at a rejected node: norm(max(0, p - q)), what is
    # left of the target after the rejection: the next sibling is checked against it, or the bonus drawn from it
    bonus_residual_prob: Optional[float] = None  # bonus_source "residual": the bonus token's probability in the
    # residual it was drawn from (its probability under the plain target is bonus_prob)

    @property
    def n_proposed(self) -> int:
        return len(self.tokens)

    @property
    def n_accepted(self) -> int:
        return len(self.accepted_path)

    @property
    def is_chain(self) -> bool:
        """The guesses form one path (parents [-1, 0, 1, ...]); a round that guessed nothing is one too."""
        return self.parents == list(range(-1, self.n_proposed - 1))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Round":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


def rounds_to_json(rounds: Iterable[Round]) -> str:
    return json.dumps([r.to_dict() for r in rounds])


def depth_of(parents: list[int], node: int) -> int:
    """Depth of a node in a proposed tree: children of the root have depth 1."""
    depth = 0
    while node != -1:
        node = parents[node]
        depth += 1
    return depth


def summarize(rounds: list[Round], baseline_tokens_per_s: Optional[float] = None) -> dict[str, Any]:
    """The statistics of a run, derived in this one place.

    mean_accepted_tokens (tau): committed tokens per target forward, bonus included.
    acceptance_rate: kept / guessed, accepted proposed tokens over all proposed tokens (the page's
    "kept / guessed"; small for big trees, whose guesses are mostly alternatives to each other).
    a: the per-checked acceptance the expected-speedup formula uses: of the levels the target checked
    (a level is checked when the path reached it and it holds guesses the target looked at), the share
    where it kept a guess; for a chain, kept / checked guesses. a_by_depth[d-1]: the same at depth d.
    acceptance_by_position[d-1]: among rounds that proposed a token at depth d, the share that
    accepted one at depth d.
    """
    proposed = sum(r.n_proposed for r in rounds)
    accepted = sum(r.n_accepted for r in rounds)
    n_tokens = rounds[-1].tokens_so_far if rounds else 0
    elapsed = rounds[-1].elapsed_s if rounds else 0.0
    tried_at, kept_at, checked_at = {}, {}, {}
    for r in rounds:
        for depth in {depth_of(r.parents, i) for i in range(r.n_proposed)}:
            tried_at[depth] = tried_at.get(depth, 0) + 1
        for depth in range(1, r.n_accepted + 1):
            kept_at[depth] = kept_at.get(depth, 0) + 1
        looked_below = {parent for parent, status in zip(r.parents, r.status) if status in (ACCEPTED, REJECTED)}
        for depth, node in enumerate([-1, *r.accepted_path], start=1):  # the root, then the kept path
            if node in looked_below:  # the target checked the guesses below this node
                checked_at[depth] = checked_at.get(depth, 0) + 1
    checked = sum(checked_at.values())
    kept_checked = sum(kept_at.get(d, 0) for d in checked_at)
    tokens_per_s = n_tokens / elapsed if elapsed > 0 else 0.0
    return {
        "rounds": len(rounds),
        "new_tokens": n_tokens,
        "proposed_tokens": proposed,
        "accepted_tokens": accepted,
        "acceptance_rate": accepted / proposed if proposed else 0.0,
        "a": kept_checked / checked if checked else None,
        "a_by_depth": [kept_at.get(d, 0) / checked_at[d] for d in sorted(checked_at)],
        "mean_accepted_tokens": n_tokens / len(rounds) if rounds else 0.0,
        "acceptance_by_position": [kept_at.get(d, 0) / tried_at[d] for d in sorted(tried_at)],
        "draft_time_s": sum(r.draft_time_s for r in rounds),
        "verify_time_s": sum(r.verify_time_s for r in rounds),
        "elapsed_s": elapsed,
        "tokens_per_s": tokens_per_s,
        "speedup": tokens_per_s / baseline_tokens_per_s if baseline_tokens_per_s else None,
        "fallback_rounds": sum(r.mode == FALLBACK for r in rounds),
        "stop_reason": rounds[-1].stop_reason if rounds else None,
    }
