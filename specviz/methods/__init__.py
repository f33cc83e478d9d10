"""Ways of guessing tokens, registered by name. A new method is one file plus one line here."""
from __future__ import annotations

from typing import Any, Callable, Optional

from ..config import SamplingConfig
from ..models import Target
from .base import Baseline, Proposer
from .draft import DraftProposer
from .ngram import NgramOptions, NgramProposer

Factory = Callable[..., Proposer]


def _baseline(target: Target, sampling: SamplingConfig, **options: Any) -> Proposer:
    return Baseline()


def _ngram(target: Target, sampling: SamplingConfig, max_ngram: int = 3, min_ngram: int = 1) -> Proposer:
    return NgramProposer(NgramOptions(max_ngram=max_ngram, min_ngram=min_ngram))


def _draft(target: Target, sampling: SamplingConfig, draft: Optional[Target] = None) -> Proposer:
    if draft is None:
        raise ValueError("method 'draft' needs a draft model with the target's tokenizer (none is loaded)")
    return DraftProposer(target, draft, sampling)


REGISTRY: dict[str, Factory] = {"baseline": _baseline, "ngram": _ngram, "draft": _draft}
METHODS = tuple(REGISTRY)


def make_proposer(name: str, target: Target, sampling: SamplingConfig = SamplingConfig(),
                  **options: Any) -> Proposer:
    """A fresh proposer for one run. Raises ValueError naming the method and the known ones."""
    if name not in REGISTRY:
        raise ValueError(f"unknown method {name!r}; known methods: {', '.join(METHODS)}")
    return REGISTRY[name](target, sampling, **options)
