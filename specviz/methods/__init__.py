"""Ways of guessing tokens, registered by name. A new method is one file plus one entry here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..assets import cached_load, mismatch, read_card, shipped, shipped_fits
from ..config import SamplingConfig
from ..models import Target
from .base import Baseline, Proposer
from .draft import DraftProposer, load_draft
from .eagle import EagleProposer, EagleWeights, TreeOptions, load_eagle
from .medusa import MedusaProposer, MedusaWeights, load_medusa
from .ngram import NgramOptions, NgramProposer
from .oracle import DEFAULT_A, OracleProposer


@dataclass(frozen=True)
class Method:
    name: str
    make: Callable[..., Proposer]  # (target, sampling, **options) -> a fresh proposer for one run
    available: Callable[[Target], bool] = lambda target: True  # can it run on this target as loaded?


def _shipped(method: str, target: Target, load: Callable[[Any, Target], Any]) -> Any:
    """The weights that ship in assets/ for this method, loaded once per target (checked against it)."""
    if not (shipped(method) / "card.json").is_file():
        raise ValueError(f"method {method!r} has no shipped weights in {shipped(method)}: pass weights=FOLDER "
                         f"or train them (python -m specviz.train {method})")
    return cached_load(method, target, lambda: load(shipped(method), target))


def _draft(target: Target, sampling: SamplingConfig, draft: Optional[Target] = None,
           confidence: float = 0.4, nodes: Optional[int] = None, top_k: int = 8) -> Proposer:
    """draft: a loaded draft model; none: the shipped draft for the embedded target. nodes: 1 = a chain of up
    to k guesses, stopping after one the draft gives less than `confidence` (0 = always k); more = a tree of
    that many guesses, k levels deep (default by device, TREE_NODES)."""
    nodes = nodes or tree_nodes("draft", target)
    if draft is None:
        card = read_card(shipped("draft"))
        why = "none ships" if card is None else mismatch(card, target)
        if why:
            raise ValueError(f"method 'draft' needs a draft model with the tokenizer of {target.name!r}; the "
                             f"shipped one does not fit it ({why}): pass one, e.g. --draft FOLDER")
        draft = _shipped("draft", target, load_draft)
    return DraftProposer(target, draft, sampling, confidence, nodes, top_k)


# Tree nodes per round, by device (docs/perf.md, "Tree size"). On the 2-core CPU a forward over
# 1-3 tokens costs about one token's but 4 or more take MKL's slow thin-matrix path (1.6x at 4, 2x
# at 9): trees of 2 nodes ran at 1.01x (eagle) and 0.93x (medusa) of the baseline, 8 nodes at
# 0.76x / 0.79x, the paper-sized 48 / 40 at 0.54x / 0.57x. A GPU verifies 50 tokens for about the
# price of one, so it gets the large trees. The draft model drafts a chain (1) on a CPU, where each of
# its forwards costs a quarter of the target's, and a tree on a GPU.
TREE_NODES = {"eagle": {"cpu": 2, "cuda": 48}, "medusa": {"cpu": 2, "cuda": 40}, "draft": {"cpu": 1, "cuda": 48}}


def tree_nodes(method: str, target: Target) -> int:
    return TREE_NODES[method].get(target.device.type, TREE_NODES[method]["cuda"])


def _medusa(target: Target, sampling: SamplingConfig, heads: Optional[MedusaWeights] = None,
            weights: Optional[str] = None, nodes: Optional[int] = None, lookup: int = 0) -> Proposer:
    """heads: loaded Medusa weights; weights: a folder, file or hub id; neither: the shipped heads.
    nodes: tree size (default by device, TREE_NODES); lookup > 0 also grafts the prompt-lookup guess
    onto the tree (a hybrid, off by default)."""
    nodes = nodes or tree_nodes("medusa", target)
    if heads is None:
        heads = load_medusa(weights, target) if weights else _shipped("medusa", target, load_medusa)
    return MedusaProposer(heads, nodes, lookup)


def _eagle(target: Target, sampling: SamplingConfig, head: Optional[EagleWeights] = None,
           weights: Optional[str] = None, top_k: int = 8, nodes: Optional[int] = None, lookup: int = 0,
           context_rows: int = 1) -> Proposer:
    """head: a loaded EAGLE head; weights: a checkpoint folder or hub id; neither: the shipped head.
    nodes: tree size (default by device, TREE_NODES); lookup > 0 also grafts the prompt-lookup guess
    onto the tree (a hybrid, off by default); context_rows=0 scores the reduced draft vocabulary alone, without
    the context's tokens that it lacks."""
    nodes = nodes or tree_nodes("eagle", target)
    if head is None:
        head = load_eagle(weights, target) if weights else _shipped("eagle", target, load_eagle)
    return EagleProposer(head, TreeOptions(top_k=top_k, nodes=nodes, lookup=lookup,
                                                context_rows=bool(context_rows)))


def _oracle(target: Target, sampling: SamplingConfig, a: float = DEFAULT_A) -> Proposer:
    """Not a real method: knows the target's greedy answer and guesses each token right with chance a."""
    return OracleProposer(target, sampling, a)


REGISTRY: dict[str, Method] = {m.name: m for m in (
    Method("baseline", lambda target, sampling: Baseline()),
    Method("ngram", lambda target, sampling, max_ngram=NgramOptions.max_ngram, min_ngram=NgramOptions.min_ngram,
           scaled=NgramOptions.scaled:
           NgramProposer(NgramOptions(max_ngram=max_ngram, min_ngram=min_ngram, scaled=bool(scaled)))),
    Method("draft", _draft, available=lambda target: shipped_fits("draft", target)),
    Method("medusa", _medusa, available=lambda target: shipped_fits("medusa", target)),
    Method("eagle", _eagle, available=lambda target: shipped_fits("eagle", target)),
    Method("oracle", _oracle),  # a teaching tool: the ceiling a drafter of acceptance a would reach
)}
METHODS = tuple(REGISTRY)


def available_methods(target: Target) -> list[str]:
    """Methods that run on this target without extra options."""
    return [name for name, method in REGISTRY.items() if method.available(target)]


def make_proposer(name: str, target: Target, sampling: SamplingConfig = SamplingConfig(),
                  **options: Any) -> Proposer:
    """A fresh proposer for one run. Raises ValueError naming the method and the known ones."""
    if name not in REGISTRY:
        raise ValueError(f"unknown method {name!r}; known methods: {', '.join(METHODS)}")
    return REGISTRY[name].make(target, sampling, **options)
