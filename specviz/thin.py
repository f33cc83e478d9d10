"""Faster thin products for verification on a CPU: the LM head through oneDNN with a prepacked weight.

A verify forward scores 2 to ~20 rows at once. On the 2-core EPYC these thin matrix products take
MKL's slow matrix-matrix path: the LM head (49,152 x 576) costs about twice as much for 5 rows as
for 1. oneDNN's linear with a weight reordered once for it is much flatter. Measured on the embedded
model, one forward with a 300-token cache (ms, median of 21, 2 threads; docs/perf.md):

    new tokens   1     3     4     5     9     17    49
    plain       43.6  47.2  71.6  74.8  88.0  88.5  127.0
    packed head 42.9  55.0  68.6  66.4  76.2  80.2  134.6

so the packed weight is used for 4 to 24 rows only; one row (every plain decoding step) keeps the
matrix-vector product. It costs one extra copy of the LM head (113 MB for the embedded model, a fifth
of its weights), reported by the benchmark's peak memory; SPECVIZ_THIN_HEAD=0 turns it off.
Different kernels round differently (about 1e-6 here), like MKL's own 1-row and k-row paths already
do; the benchmark's "identical" column checks the texts.
"""
from __future__ import annotations

import os

import torch
from torch.nn import functional as F

ROWS = (4, 24)  # use the packed weight for this many rows (inclusive); measured above


class ThinHead(torch.nn.Module):
    """Drop-in for a bias-free nn.Linear LM head; `weight` stays the same (tied) Parameter."""

    def __init__(self, linear: torch.nn.Linear):
        super().__init__()
        self.weight = linear.weight
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.register_buffer("packed", torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), ROWS[0]),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        if ROWS[0] <= rows <= ROWS[1] and not torch.is_grad_enabled() and x.dtype == self.packed.dtype:
            flat = torch.ops.mkldnn._linear_pointwise(x.reshape(rows, -1), self.packed, None, "none", [], "")
            return flat.reshape(*x.shape[:-1], self.out_features)
        return F.linear(x, self.weight)


def wanted(model: torch.nn.Module) -> bool:
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return (os.environ.get("SPECVIZ_THIN_HEAD", "1") != "0" and torch.backends.mkldnn.is_available()
            and type(head) is torch.nn.Linear and head.bias is None and head.weight.device.type == "cpu"
            and head.weight.dtype == torch.float32)


def install(model: torch.nn.Module) -> bool:
    """Swap the model's LM head for a ThinHead where it pays (float32 on a CPU); True if swapped."""
    if not wanted(model):
        return False
    model.set_output_embeddings(ThinHead(model.get_output_embeddings()))
    return True
