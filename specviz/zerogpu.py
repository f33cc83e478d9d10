"""ZeroGPU: Hugging Face's shared GPUs for Gradio-SDK Spaces, lent to a function only while it runs.

There a function that runs a model must be wrapped by the `spaces` package's `spaces.GPU`; importing
`spaces` also patches torch so that a model loaded to "cuda" in the main process is moved onto the GPU
that each wrapped call gets. Anywhere else none of this is needed, and `spaces` is never required (it
is not in requirements.txt; ZeroGPU Spaces have it installed).

What `spaces.GPU` accepts (spaces 0.51.3, spaces/zero/decorator.py and wrappers.py; the Hub docs,
docs/hub/spaces-zerogpu.md, "Duration Management" and "Dynamic duration"):
- plain functions and generator functions (a generator gets its own streaming wrapper; `inspect`
  sees through functools.partial, so a partial of a generator streams too); coroutines raise
  NotImplementedError.
- duration: seconds (int) or a datetime.timedelta, or a callable taking the function's own arguments
  and returning one; 60 s when not given. A call that runs longer is stopped; shorter ones queue first.
- size: "large" (half an H200, the default) or "xlarge" (a whole one, twice the quota); not used here.
- off ZeroGPU it returns the function unchanged (it reads SPACES_ZERO_GPU, as on_zerogpu() does).
Arguments and results cross to a forked worker process by pickling.
"""
from __future__ import annotations

import os
from datetime import timedelta
from types import ModuleType
from typing import Any, Callable, Optional, TypeVar, Union

F = TypeVar("F", bound=Callable[..., Any])
Duration = Union[int, float, timedelta, Callable[..., Union[int, float, timedelta]]]


def on_zerogpu() -> bool:
    """Is this a ZeroGPU Space? Read as `spaces` reads it (spaces/config.py): SPACES_ZERO_GPU is 1, t or true."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def prepare() -> Optional[ModuleType]:
    """Import `spaces` on a ZeroGPU Space (where it patches torch): call this before loading any model.
    Returns the module, or None off ZeroGPU or where `spaces` is not installed."""
    if not on_zerogpu():
        return None
    try:
        import spaces
    except ImportError:
        return None
    return spaces


def gpu(fn: F, duration: Optional[Duration] = None) -> F:
    """`spaces.GPU(fn)` on a ZeroGPU Space that has `spaces`, else `fn` unchanged.

    duration: the most seconds one call may hold the GPU (or a callable of fn's arguments returning that);
    None keeps the default of `spaces` (60 s)."""
    spaces = prepare()
    if spaces is None:
        return fn
    return spaces.GPU(fn) if duration is None else spaces.GPU(fn, duration=duration)
