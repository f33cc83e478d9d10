"""Plain-language texts for the app: what each method guesses from, and the expected-speedup formula.

Leviathan et al. (2023), "Fast Inference from Transformers via Speculative Decoding": with a
per-token acceptance a, k guessed tokens and a guesser that costs c target forwards per guess,
    E[tokens per round] = (1 - a^(k+1)) / (1 - a)
    expected speedup     = E / (k*c + 1)
No torch here: the inputs are a run's records.
"""
from __future__ import annotations

from typing import Optional

from specviz.config import MAX_K
from specviz.events import SPECULATE, Round, depth_of

METHOD_TEXT = {
    "baseline": (
        "**Baseline**: plain decoding. One target forward per token; guesses nothing. "
        "It is the reference for both the speed and the text."
    ),
    "ngram": (
        "**N-gram (prompt lookup)**: finds the last few tokens earlier in the prompt or output and "
        "guesses that what followed them then follows them again. *Training:* none. *Running:* a "
        "string search, nearly free. Shines when the answer copies the input (summaries, code edits, "
        "repetition); guesses little in open chat. It has no draft probabilities: its guess counts as "
        "certain (draft probability 1)."
    ),
    "draft": (
        "**Draft model**: a small language model with the same tokenizer writes k tokens one by one; "
        "the target checks them all in one forward. *Training:* none if a small sibling exists, "
        "otherwise distil one. *Running:* a second model in memory and k small forwards per round."
    ),
    "medusa": (
        "**Medusa**: extra heads on the target's last hidden state; head i guesses the token i+1 "
        "places ahead. Their top guesses form a tree that the target checks in one forward with a "
        "tree attention mask. *Training:* the heads only, target frozen. *Running:* a few linear "
        "layers, nearly free."
    ),
    "eagle": (
        "**EAGLE**: a one-layer decoder that runs on the target's own features (hidden states) and "
        "drafts a tree of guesses, feature by feature. Usually the highest acceptance of these "
        "methods. *Training:* one small layer on the target's features. *Running:* one small layer "
        "per draft step."
    ),
}


def method_text(name: str) -> str:
    return METHOD_TEXT.get(name, f"**{name}**: no description yet.")


def expected_tokens(a: float, k: float) -> float:
    """E[tokens per round] = (1 - a^(k+1)) / (1 - a); k + 1 when every guess is kept."""
    if a >= 1:
        return k + 1.0
    return (1 - a ** (k + 1)) / (1 - a)


def expected_speedup(a: float, k: float, c: float) -> float:
    return expected_tokens(a, k) / (k * c + 1)


def best_k(a: float, c: float, k_max: int = MAX_K) -> int:
    """The k from 1 to k_max that maximises the expected speedup."""
    return max(range(1, k_max + 1), key=lambda k: expected_speedup(a, k, c))


def measured_inputs(rounds: list[Round]) -> Optional[dict[str, float]]:
    """a, k and c of a run's speculative rounds; None when it speculated in none.

    a = accepted / checked guesses, where a guess is checked when every guess before it on its
    path was kept (so tokens after the first rejection do not count against a).
    c = draft time per guessed token / verify time per round (one target forward).
    """
    spec = [r for r in rounds if r.mode == SPECULATE and r.n_proposed > 0]
    if not spec:
        return None
    accepted = sum(r.n_accepted for r in spec)
    rejected_checks = sum(1 for r in spec if "rejected" in r.status)
    checked = accepted + rejected_checks
    proposed = sum(r.n_proposed for r in spec)
    verify = sum(r.verify_time_s for r in spec) / len(spec)
    draft_per_token = sum(r.draft_time_s for r in spec) / proposed
    depths = [max(depth_of(r.parents, i) for i in range(r.n_proposed)) for r in spec]
    return {
        "a": accepted / checked if checked else 0.0,
        "k": sum(depths) / len(spec),  # guesses actually made per path: a method may guess fewer than its budget
        "c": draft_per_token / verify if verify > 0 else 0.0,
    }


def formula_markdown(rounds: list[Round], measured_speedup: Optional[float]) -> str:
    """The formula filled in with a run's a, k, c, beside the measured speedup."""
    inputs = measured_inputs(rounds)
    if inputs is None:
        return (
            "**Expected speedup** (Leviathan et al.): E = (1 − a^(k+1)) / (1 − a) tokens per round, "
            "speedup = E / (k·c + 1). This run guessed nothing, so there is nothing to fill in."
        )
    a, k, c = inputs["a"], inputs["k"], inputs["c"]
    e = expected_tokens(a, k)
    predicted = expected_speedup(a, k, c)
    measured = f"**{measured_speedup:.2f}×**" if measured_speedup else "— (run the baseline to measure it)"
    return "\n".join([
        "**Expected speedup** (Leviathan et al., 2023)",
        "",
        f"- per-token acceptance **a = {a:.2f}** (kept guesses / checked guesses), "
        f"**k = {k:.3g}** guesses per round (the mean length of a guessed path), "
        f"guess cost **c = {c:.3f}** target forwards",
        f"- E[tokens per round] = (1 − a^(k+1)) / (1 − a) = (1 − {a:.2f}^{k + 1:.3g}) / (1 − {a:.2f}) "
        f"= **{e:.2f}**",
        f"- expected speedup = E / (k·c + 1) = {e:.2f} / ({k:.3g}·{c:.3f} + 1) = **{predicted:.2f}×**",
        f"- measured speedup against the baseline: {measured}",
        f"- best k for this a and c: **{best_k(a, c)}**. Rule of thumb: one more guess pays only while the "
        "chance of reaching and keeping it, a^(k+1), exceeds its cost c times the speedup already reached; "
        "so keep k small (3 to 5) unless acceptance is high or guessing is nearly free. (With c near 0 the "
        "formula always asks for a larger k, because it counts checking as free; the timeline shows that "
        "it is not.)",
        "",
        "*The formula assumes checking k+1 tokens costs one plain step; on a CPU it costs about two, "
        "which is why the measured speedup falls short of it.*",
    ])


def calculator_markdown(a: float, k: int, c: float) -> str:
    """The formula for any a, k, c (the classroom calculator)."""
    a, k, c = float(a), int(k), float(c)
    e = expected_tokens(a, k)
    return (f"E[tokens per round] = (1 − {a:.2f}^{k + 1}) / (1 − {a:.2f}) = **{e:.2f}**  \n"
            f"expected speedup = {e:.2f} / ({k}·{c:.2f} + 1) = **{expected_speedup(a, k, c):.2f}×**  \n"
            f"best k for a = {a:.2f}, c = {c:.2f}: **{best_k(a, c)}** "
            f"(speedup {expected_speedup(a, best_k(a, c), c):.2f}×)")
