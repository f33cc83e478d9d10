"""The loop every method runs through: propose, verify, commit, record. Written once, as a generator."""
from __future__ import annotations

import functools
import time
from collections import deque
from typing import Any, Callable, Iterator, Optional

import torch

from .config import MAX_K, RunConfig, SamplingConfig
from .events import FALLBACK, PLAIN, SPECULATE, UNREACHED, Round
from .methods.base import Proposer
from .models import Target
from .tree import Tree
from .verify import TargetSession, Verdict


class Schedule:
    """Per-run adaptive state: dynamic k, and plain decoding while the rolling acceptance is low."""

    def __init__(self, run: RunConfig):
        self.run = run
        self.k = run.k
        self.window: deque[tuple[int, int]] = deque(maxlen=run.fallback_window)
        self.plain_left = 0

    def mode(self) -> str:
        return FALLBACK if self.plain_left > 0 else SPECULATE

    def update(self, mode: str, proposed: int, accepted: int) -> None:
        if mode == FALLBACK:
            self.plain_left -= 1
            if self.plain_left == 0:
                self.window.clear()  # retry speculation with a clean slate
            return
        if proposed == 0:
            return
        if self.run.adaptive_k:
            grow = accepted == proposed
            self.k = min(self.k + 2, self.run.k_max) if grow else max(self.k - 1, self.run.k_min)
        self.window.append((proposed, accepted))
        if self.run.fallback_threshold > 0 and len(self.window) == self.window.maxlen:
            rate = sum(a for _, a in self.window) / sum(p for p, _ in self.window)
            if rate < self.run.fallback_threshold:
                self.plain_left = self.run.fallback_rounds


class TextStream:
    """Turns committed token ids into text deltas that never split a character."""

    def __init__(self, target: Target):
        self.target, self.ids, self.shown = target, [], 0

    def add(self, ids: list[int], final: bool) -> str:
        self.ids.extend(ids)
        text = self.target.decode(self.ids)
        end = len(text) if final else len(text.rstrip("\ufffd"))
        delta, self.shown = text[self.shown:end], max(self.shown, end)
        return delta


def check_context(target: Target, prompt_ids: list[int], run: RunConfig) -> None:
    needed = len(prompt_ids) + run.max_new_tokens + max(run.k, run.k_max) + 1
    if needed > target.max_context:
        raise ValueError(
            f"the prompt ({len(prompt_ids)} tokens) plus max_new_tokens ({run.max_new_tokens}) and the "
            f"speculative budget need {needed} positions, more than the model's context of "
            f"{target.max_context}: shorten the prompt or lower max_new_tokens")


def speculate(target: Target, proposer: Proposer, prompt_ids: list[int], run: RunConfig,
              sampling: SamplingConfig) -> Iterator[Round]:
    """Generate from prompt_ids, yielding one Round per target forward. Closing the generator stops the run."""
    run.validate()
    sampling.validate()
    if not prompt_ids:
        raise ValueError("the prompt is empty")
    check_context(target, prompt_ids, run)
    proposer.prepare(prompt_ids, run)  # untimed: the oracle learns its answer here; real work belongs in propose()
    generator = torch.Generator().manual_seed(sampling.seed)
    start = time.perf_counter()
    with torch.inference_mode():
        # room for the whole run plus one round's tree (a bigger tree grows the buffers once)
        capacity = len(prompt_ids) + run.max_new_tokens + 2 * MAX_K + 64
        session = TargetSession(target.model, proposer.hidden_layers, capacity)
        proposer.observe(session.prefill(prompt_ids))
        ids, stream, schedule = list(prompt_ids), TextStream(target), Schedule(run)
        piece = functools.lru_cache(maxsize=None)(target.piece)  # records show the same top tokens again and again
        broken: str | None = None  # set when the proposer raised: the rest of the run is plain
        for index in range(run.max_new_tokens):
            mode, k, note = schedule.mode(), schedule.k, broken
            t0 = _now(target)
            tree = Tree()
            if mode == SPECULATE and broken is None:
                try:
                    tree = proposer.propose(ids, k)
                except Exception as err:  # a faulty proposer must not cost the user their text
                    broken = note = f"proposer {proposer.name!r} failed ({type(err).__name__}: {err}); plain decoding from here"
            mode = FALLBACK if broken or mode == FALLBACK else (SPECULATE if len(tree) else PLAIN)
            t1 = _now(target)
            verdict, features = session.verify(ids[-1], tree, sampling, generator)
            t2 = _now(target)
            emitted = [tree.tokens[i] for i in verdict.path] + [verdict.bonus]
            emitted, stop_reason = _cut(emitted, target.eos_ids, run.max_new_tokens - (len(ids) - len(prompt_ids)))
            if stop_reason is None and 0 < run.time_budget_s <= t2 - start:
                stop_reason = "time_budget"  # the round's tokens are kept: the text is a prefix, never wrong
            ids.extend(emitted)
            record = _record(index, proposer.name, mode, k, tree, verdict, emitted, piece,
                             stream.add(emitted, final=stop_reason is not None),
                             (t1 - t0, t2 - t1, t2 - start), len(ids) - len(prompt_ids), stop_reason, note,
                             sampling.temperature)
            yield record
            if stop_reason:
                return
            proposer.observe(features)
            schedule.update(mode, len(tree), len(verdict.path))


def _now(target: Target) -> float:
    if target.device.type == "cuda":
        torch.cuda.synchronize(target.device)
    return time.perf_counter()


def _cut(emitted: list[int], eos_ids: frozenset[int], budget: int) -> tuple[list[int], str | None]:
    """Never emit past an end-of-sequence token or the token budget."""
    for i, token in enumerate(emitted[:budget]):
        if token in eos_ids:
            return emitted[: i + 1], "eos"
    if len(emitted) >= budget:
        return emitted[:budget], "max_new_tokens"
    return emitted, None


def _record(index: int, method: str, mode: str, k: int, tree: Tree, verdict: Verdict,
            emitted: list[int], piece: Callable[[int], str], text: str, times: tuple[float, float, float],
            tokens_so_far: int, stop_reason: str | None, note: str | None, temperature: float) -> Round:
    draft_time, verify_time, elapsed = times
    path = verdict.path[: len(emitted)]  # a stop inside the accepted run cuts the path
    status = list(verdict.status)
    cut = set(verdict.path[len(path):])  # accepted, but the run ended before them
    for node, parent in enumerate(tree.parents):  # parents come before their children
        if node in cut or parent in cut:
            cut.add(node)  # and whatever hangs below them was never reached either
            status[node] = UNREACHED
    has_bonus = len(emitted) == len(verdict.path) + 1
    return Round(
        index=index, method=method, mode=mode, k=k,
        tokens=list(tree.tokens), parents=list(tree.parents),
        pieces=[piece(t) for t in tree.tokens], status=status,
        draft_probs=list(tree.draft_probs), target_probs=verdict.target_probs,
        accepted_path=path,
        bonus_token=verdict.bonus if has_bonus else None,
        bonus_piece=piece(verdict.bonus) if has_bonus else "",
        bonus_prob=verdict.bonus_prob if has_bonus else None,
        bonus_source=verdict.bonus_source,
        emitted=list(emitted), text=text,
        draft_time_s=draft_time, verify_time_s=verify_time, elapsed_s=elapsed,
        tokens_so_far=tokens_so_far, finished=stop_reason is not None, stop_reason=stop_reason, note=note,
        temperature=temperature, draft_sampled=tree.draft_dists is not None, thresholds=verdict.thresholds,
        **_reasons(verdict, status, piece, has_bonus),
    )


def _reasons(verdict: Verdict, status: list[str], piece: Callable[[int], str], has_bonus: bool) -> dict[str, Any]:
    """The verdict's reasons as the record's plain data, dropped at the nodes the record calls unreached."""

    def per_node(values: Optional[list]) -> Optional[list]:
        return None if values is None else [None if s == UNREACHED else v for v, s in zip(values, status)]

    def shown(tops: Optional[list]) -> Optional[list]:  # (token, p) -> [piece, p to 4 significant digits, token]
        return None if tops is None else [None if top is None or s == UNREACHED else
                                          [[piece(t), float(f"{p:.4g}"), t] for t, p in top] for top, s in zip(tops, status)]

    return dict(target_top=shown(verdict.target_top), draft_top=shown(verdict.draft_top), u=per_node(verdict.u),
                accept_probs=per_node(verdict.accept_probs), residual_top=shown(verdict.residual_top),
                bonus_residual_prob=verdict.bonus_residual_prob if has_bonus else None)


def generate(target: Target, method: str, prompt: str, run: RunConfig, sampling: SamplingConfig,
             **options) -> Iterator[Round]:
    """Validate raw input, encode the prompt through the chat template and run one method.

    Every check happens before the first token, so a bad request costs nothing and changes nothing.
    """
    from .methods import make_proposer

    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("the prompt is empty: type a question or pick an example")
    run.validate()
    sampling.validate()
    prompt_ids = target.encode_prompt(prompt)
    check_context(target, prompt_ids, run)
    proposer = make_proposer(method, target, sampling, **options)
    return speculate(target, proposer, prompt_ids, run, sampling)
