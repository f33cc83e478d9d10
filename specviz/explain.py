"""What each method guesses from, the expected-speedup formula, and the cost-and-return calculator.

Leviathan et al. (2023), "Fast Inference from Transformers via Speculative Decoding": with a
per-token acceptance a, k guessed tokens and a guesser that costs c target forwards per guess,
    E[tokens per round] = (1 - a^(k+1)) / (1 - a)
    expected speedup     = E / (k*c + c_v(k+1))
where c_v(n), the verify cost, is a target forward over n new tokens against one over 1 token. The paper takes
c_v = 1 (true on a GPU, where a forward over a few tokens costs what one does); a CPU pays more, modelled as
    c_v(1) = 1,  c_v(n) = verify_base + verify_slope * (n - 2) for n >= 2
(on the 2-core CPU about 1.9 + 0.06 per token: docs/sweep.md).
The calculator adds two serving terms (every formula lives in `evaluate`):
    end-to-end speedup S = 1 / ((1 - f) + f * (k*c + 1) / E), f = share of time in target forwards
    return on investment = (saved - extra) / extra = (S - 1 - m) / m, m = extra memory / target memory,
where a server pays for memory x time: per token, plain decoding costs 1, speculation saves 1 - 1/S
of the target's cost and pays m / S for the extra memory (draft or heads, and their KV cache).
No torch here: the inputs are a run's records; the texts come from specviz.i18n.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from specviz.config import MAX_K
from specviz.events import SPECULATE, Round, depth_of, summarize
from specviz.i18n import has, text

METHODS = ("baseline", "ngram", "draft", "medusa", "eagle", "oracle")  # those with a description (i18n "method.NAME")


def method_text(name: str, lang: str = "en") -> str:
    key = f"method.{name}"
    return text(key, lang) if has(key) else text("method.unknown", lang, name=name)


def expected_tokens(a: float, k: float) -> float:
    """E[tokens per round] = (1 - a^(k+1)) / (1 - a); k + 1 when every guess is kept."""
    if a >= 1:
        return k + 1.0
    return (1 - a ** (k + 1)) / (1 - a)


VERIFY_SLOPE_CPU = 0.06  # c_v's growth per token past 2 on the 2-core CPU (sweep of 2026-12-03, docs/sweep.md)


def verify_cost(n: float, base: float = 1.0, slope: float = 0.0) -> float:
    """c_v(n): a target forward over n new tokens against one over 1 token (the module doc's model)."""
    return 1.0 if n <= 1 else max(base + slope * (n - 2), 0.0)


def expected_speedup(a: float, k: float, c: float, verify_base: float = 1.0, verify_slope: float = 0.0) -> float:
    return expected_tokens(a, k) / (k * c + verify_cost(k + 1, verify_base, verify_slope))


def best_k(a: float, c: float, k_max: int = MAX_K, verify_base: float = 1.0, verify_slope: float = 0.0) -> int:
    """The k from 1 to k_max that maximises the expected speedup, verify cost included."""
    return max(range(1, k_max + 1), key=lambda k: expected_speedup(a, k, c, verify_base, verify_slope))


def measured_inputs(rounds: list[Round], base: Optional[list[Round]] = None) -> Optional[dict[str, float]]:
    """a, k, c and the verify cost of a run's speculative rounds; None when it speculated in none.

    a = summarize's a: of the levels the target checked, the share where it kept a guess (for a chain,
    kept / checked guesses: tokens after the first rejection do not count against a).
    k = the mean depth of a round's guesses (a tree of many nodes still guesses k tokens deep).
    With the baseline's rounds (each one plain 1-token forward), times are in plain forwards:
    c = draft time per guessing step / a plain forward, verify = c_v = verify time per round / a plain
    forward (at n = the mean tokens a round verified), so k*c + c_v is a round's time in plain forwards.
    Without them, c is relative to the verify forward itself and verify = 1 (the paper's assumption).
    """
    spec = [r for r in rounds if r.mode == SPECULATE and r.n_proposed > 0]
    if not spec:
        return None
    verify = sum(r.verify_time_s for r in spec)
    depths = [max(depth_of(r.parents, i) for i in range(r.n_proposed)) for r in spec]
    draft_per_step = sum(r.draft_time_s for r in spec) / sum(depths)
    plain = [r.verify_time_s for r in base or [] if r.n_proposed == 0]
    unit = sum(plain) / len(plain) if plain and sum(plain) > 0 else verify / len(spec)  # one plain forward
    return {
        "a": summarize(spec)["a"] or 0.0,  # per checked level, as events.summarize defines it
        "k": sum(depths) / len(spec),  # guesses actually made per path: a method may guess fewer than its budget
        "c": draft_per_step / unit if unit > 0 else 0.0,
        "verify": verify / len(spec) / unit if unit > 0 else 1.0,
        "n": sum(r.n_proposed + 1 for r in spec) / len(spec),  # tokens one verify forward read
    }


def formula_markdown(rounds: list[Round], measured_speedup: Optional[float], lang: str = "en",
                     base: Optional[list[Round]] = None, verify_slope: float = 0.0) -> str:
    """The formula filled in with a run's a, k, c and verify cost, beside the measured speedup; the best k
    extrapolates the verify cost with `verify_slope` (per token past the run's)."""
    inputs = measured_inputs(rounds, base)
    if inputs is None:
        return text("formula.none", lang)
    a, k, c, cv = inputs["a"], inputs["k"], inputs["c"], inputs["verify"]
    e = expected_tokens(a, k)
    measured = f"**{measured_speedup:.2f}×**" if measured_speedup else text("formula.no_baseline", lang)
    v_base = verify_base_of(inputs, verify_slope)
    return text("formula.filled", lang, a=f"{a:.2f}", k=f"{k:.3g}", k1=f"{k + 1:.3g}", c=f"{c:.3f}", e=f"{e:.2f}",
                cv=f"{cv:.2f}", n=f"{inputs['n']:.3g}", predicted=f"{e / (k * c + cv):.2f}", measured=measured,
                cv_note=text("formula.cv_measured" if base else "formula.cv_assumed", lang),
                best=best_k(a, c, verify_base=v_base, verify_slope=verify_slope))


def verify_base_of(inputs: dict[str, float], verify_slope: float) -> float:
    """The model's verify_base that gives the measured c_v at the run's width n (c_v(2) for a chain of one)."""
    return max(inputs["verify"] - verify_slope * max(inputs["n"] - 2, 0.0), 1.0) if inputs["n"] > 1 else 1.0


# --- the cost and return calculator -------------------------------------------------------------------

@dataclass(frozen=True)
class CostInputs:
    """The calculator's inputs, in the terms of Leviathan et al. plus two serving terms."""

    c: float = 0.05  # cost of one guessed token, in target forwards (about 0 for prompt lookup)
    a: float = 0.7  # per-token acceptance rate
    k: int = 4  # guesses per round
    verify_share: float = 1.0  # share of a request's time spent in target forwards (the part speculation shortens)
    extra_mb: float = 40.0  # memory the method adds: draft model or heads, and their KV cache
    target_mb: float = 632.0  # the target's weights and KV cache (the embedded model's, at a 2,048-token context)
    verify_base: float = 1.0  # c_v(2): a forward over 2 new tokens against 1 (1 = the paper's free verify)
    verify_slope: float = 0.0  # what each further token adds to c_v (0 = the paper's assumption)


@dataclass(frozen=True)
class CostResult:
    tokens_per_round: float  # E = (1 - a^(k+1)) / (1 - a)
    verify: float  # c_v(k+1): the verify forward against a plain one
    loop_speedup: float  # E / (k*c + c_v(k+1)): the decoding loop alone
    speedup: float  # end to end: 1 / ((1 - f) + f / loop_speedup)
    saved: float  # per generated token, the share of plain decoding's cost saved: 1 - 1/speedup
    extra: float  # per generated token, the cost of the extra memory: (extra_mb / target_mb) / speedup
    roi: Optional[float]  # (saved - extra) / extra; None when nothing extra is paid (no extra memory)


def evaluate(x: CostInputs) -> CostResult:
    """Speedup and return on investment of one set of calculator inputs (the formulas of the module doc)."""
    e = expected_tokens(x.a, x.k)
    cv = verify_cost(x.k + 1, x.verify_base, x.verify_slope)
    loop = e / (x.k * x.c + cv)
    f = min(max(x.verify_share, 0.0), 1.0)
    speedup = 1 / ((1 - f) + f / loop)
    m = x.extra_mb / x.target_mb if x.target_mb > 0 else 0.0
    saved, extra = 1 - 1 / speedup, m / speedup
    return CostResult(e, cv, loop, speedup, saved, extra, (saved - extra) / extra if extra > 0 else None)


# The embedded target and the shipped weights in memory (float32, 4 bytes a parameter), and KV cache bytes
# per token = layers x 2 (K and V) x 3 KV heads x 64 dims x 4 bytes. Parameters: the target 134.5M; the
# tensors stored in assets/draft (7.08M: its other layers are the target's own), assets/eagle (4.21M) and
# assets/medusa (1.99M: two blocks a head); tests/test_app.py checks these against the files.
EMBEDDED_FOOTPRINT = {  # name -> (weights MB, KV cache bytes per token)
    "target": (538.0, 30 * 2 * 3 * 64 * 4),
    "draft": (28.3, 8 * 2 * 3 * 64 * 4),
    "eagle": (16.8, 1 * 2 * 3 * 64 * 4),
    "medusa": (8.0, 0),
}
CONTEXT_TOKENS = 2048  # the context the KV caches are sized for
NO_EXTRA_MEMORY = ("baseline", "ngram", "oracle")  # methods that add nothing to the target's memory


def memory_mb(model: str, method: str) -> dict[str, float]:
    """target_mb and extra_mb of a method, where known: every model for baseline and n-gram (extra 0),
    the embedded model for the shipped draft and heads; {} or only extra_mb otherwise."""
    known: dict[str, float] = {"extra_mb": 0.0} if method in NO_EXTRA_MEMORY else {}
    if model.startswith("embedded:"):
        def total(name: str) -> float:
            weights, kv_per_token = EMBEDDED_FOOTPRINT[name]
            return round(weights + kv_per_token * CONTEXT_TOKENS / 1e6, 1)

        known["target_mb"] = total("target")
        if method in EMBEDDED_FOOTPRINT:
            known["extra_mb"] = total(method)
    return known


def time_share(rounds: list[Round]) -> Optional[float]:
    """The share of a run's time spent in its rounds (drafting and target forwards), prefill excluded."""
    if not rounds or rounds[-1].elapsed_s <= 0:
        return None
    return min(1.0, sum(r.draft_time_s + r.verify_time_s for r in rounds) / rounds[-1].elapsed_s)


def run_costs(rounds: list[Round], base: Optional[list[Round]], model: str,
              verify_slope: float = 0.0) -> dict[str, float]:
    """The calculator's inputs measured on a run: a, k and c from its speculative rounds, with a baseline
    the verify cost too (its base fitted at the run's width, `verify_slope` per token beyond), the verify
    share from the baseline (else the run itself), memory where known. Only what is known is returned."""
    known: dict[str, float] = {}
    measured = measured_inputs(rounds, base)
    if measured:
        known |= {"a": round(min(measured["a"], 0.99), 2), "k": min(max(round(measured["k"]), 1), MAX_K),
                  "c": round(min(measured["c"], 1.0), 3)}
        if base:
            known |= {"verify_base": round(min(verify_base_of(measured, verify_slope), 6.0), 2),
                      "verify_slope": verify_slope}
    share = time_share(base or rounds)
    if share is not None:
        known["verify_share"] = round(share, 2)
    if rounds:
        known |= memory_mb(model, rounds[0].method)
    return known


def calculator_markdown(x: CostInputs, lang: str = "en") -> str:
    """The calculator's result: the speedup, step by step, and the return on investment."""
    r = evaluate(x)
    m = x.extra_mb / x.target_mb if x.target_mb > 0 else 0.0
    if r.roi is None:
        roi = text("calc.roi.free", lang)
    else:
        verdict = "calc.roi.pays" if r.roi > 0 else "calc.roi.loses"
        roi = text(verdict, lang, roi=f"{r.roi:.2f}")
    best = best_k(x.a, x.c, verify_base=x.verify_base, verify_slope=x.verify_slope)
    return text("calc.result", lang, a=f"{x.a:.2f}", k=x.k, k1=x.k + 1, c=f"{x.c:.3f}", e=f"{r.tokens_per_round:.2f}",
                cv=f"{r.verify:.2f}",
                loop=f"{r.loop_speedup:.2f}", f=f"{x.verify_share:.2f}", s=f"{r.speedup:.2f}",
                saved=f"{r.saved:.3f}", extra_mb=f"{x.extra_mb:g}", target_mb=f"{x.target_mb:g}", m=f"{m:.3f}",
                extra=f"{r.extra:.3f}", roi=roi, best=best,
                best_s=f"{expected_speedup(x.a, best, x.c, x.verify_base, x.verify_slope):.2f}")
