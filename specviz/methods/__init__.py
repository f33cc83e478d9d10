"""Ways of guessing tokens, registered by name. A new method is one file plus one entry here."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..config import SamplingConfig
from ..models import Target
from .base import Baseline, Proposer
from .draft import DraftProposer
from .ngram import NgramOptions, NgramProposer


@dataclass(frozen=True)
class Method:
    name: str
    make: Callable[..., Proposer]  # (target, sampling, **options) -> a fresh proposer for one run
    available: Callable[[Target], bool] = lambda target: True  # can it run on this target as loaded?


def _draft(target: Target, sampling: SamplingConfig, draft: Optional[Target] = None) -> Proposer:
    if draft is None:
        raise ValueError(f"method 'draft' needs a draft model with the tokenizer of {target.name!r}; "
                         "none is loaded (pass one, e.g. --draft FOLDER)")
    return DraftProposer(target, draft, sampling)


REGISTRY: dict[str, Method] = {m.name: m for m in (
    Method("baseline", lambda target, sampling: Baseline()),
    Method("ngram", lambda target, sampling, max_ngram=3, min_ngram=1:
           NgramProposer(NgramOptions(max_ngram=max_ngram, min_ngram=min_ngram))),
    Method("draft", _draft, available=lambda target: False),
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
