"""Measured sweeps: one method over a range of k (chain length) or tree sizes, beside the formula's prediction.

For each swept value the method runs through `engine.generate` on every prompt, the baseline once per prompt,
and the row holds what was measured (tau, acceptance, tokens/s, speedup) and what the formula predicts:

    tau_pred  = (1 - a^(k+1)) / (1 - a)                       explain.expected_tokens(a, k)
    S_pred    = tau_pred / (c_v(n) + k*c)

a    per-level acceptance: of the levels the target checked (the root, or a kept guess, with children below
     it), the share where it kept one child (events.summarize's `a`); for a chain this is the per-checked-token
     acceptance `checked_acceptance` = kept / (kept + rejected), since at most one guess of a chain is rejected.
k    guesses per round as set: the swept k, or for a tree sweep min(RunConfig.k, nodes), the tree's depth.
n    tokens in one verify forward: k + 1 for a chain (root and k guesses), nodes + 1 for a tree.
c_v  c_v(n) = time of one target forward over n new tokens / time over 1 (`verify_cost`), so c_v(1) = 1.
c    draft time per guess level, in plain-decoding forwards: the run's mean draft time per round / k / the
     baseline's mean time per round (n-gram lookup: about 0); so k*c is a round's mean draft time.

Both times are in units of one plain decoding step, which makes 1 new token per step for the baseline, so
S_pred is the speedup over it. explain.evaluate (CostInputs(a, k, c, verify_share=1)) computes
loop_speedup = E / (k*c + 1): the same formula with c_v(n) = 1 for every n, Leviathan et al.'s assumption
that a forward over k + 1 tokens costs what one over 1 token costs. Its c divides by the measured verify time
of a speculative round (explain.measured_inputs), ours by a 1-token forward, so c_ours = c_explain * c_v(n).
A GPU is memory-bound at these sizes, so c_v should stay near 1 there; on a 2-core CPU it does not
(docs/sweep.md has the measured curve).

The prediction uses k and n as set, and assumes every round guesses that much. A method may guess less
(n-gram lookup without a match guesses nothing, a draft stops when unsure), so each row also holds the
formula applied to the rounds as they were guessed: round r guessed d_r levels in n_r - 1 nodes, and
    tau_as_guessed = mean_r (1 - a^(d_r+1)) / (1 - a)
    S_as_guessed   = tau_as_guessed / (mean_r c_v(n_r) + k*c)
(c_v interpolated between the measured n). `speedup_at_measured_tau` = measured tau / the same denominator:
the cost model alone. The gap from the prediction to the as-guessed one is the method guessing less than k;
the gap from there to the measurement is acceptance that is not the same at every depth (the formula's a is
one number) and time outside the model (prefill, Python per round, cache upkeep).

No torch at import: the engine and torch are imported where a model runs, so the figure needs plotly alone.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from specviz.config import RunConfig, SamplingConfig
from specviz.events import ACCEPTED, REJECTED, Round, depth_of, summarize
from specviz.explain import expected_tokens

PARAMS = ("k", "nodes")  # what a sweep can vary: RunConfig.k (chain length / tree depth), or a method's tree size


@dataclass(frozen=True)
class Sweep:
    param: str  # "k" or "nodes"
    values: tuple[int, ...]  # increasing, no repeats

    def verify_tokens(self, value: int) -> int:
        """n: tokens in one verify forward at this value (root + guesses)."""
        return value + 1

    def depth(self, value: int, run: RunConfig) -> int:
        """k of the formula at this value: the chain length, or a tree's depth (at most one level per node)."""
        return value if self.param == "k" else min(run.k, value)


def parse_sweep(spec: str) -> Sweep:
    """'k=1..8' or 'nodes=1,2,4,8' (ranges and lists mix: 'k=1..4,6,8') -> Sweep; ValueError saying what is wrong."""
    param, sep, body = spec.strip().partition("=")
    param = param.strip()
    if not sep:
        raise ValueError(f"--sweep {spec!r}: expected PARAM=VALUES, e.g. k=1..8 or nodes=1,2,4,8")
    if param not in PARAMS:
        raise ValueError(f"--sweep {spec!r}: can sweep {' or '.join(PARAMS)}, not {param!r}")
    values: list[int] = []
    for item in body.split(","):
        low, dots, high = item.strip().partition("..")
        try:
            span = range(int(low), int(high) + 1) if dots else [int(low)]
        except ValueError:
            raise ValueError(f"--sweep {spec!r}: {item.strip()!r} is not an integer or a range A..B") from None
        if dots and not span:
            raise ValueError(f"--sweep {spec!r}: the range {item.strip()!r} is empty (A must not exceed B)")
        values.extend(span)
    if min(values) < 1:
        raise ValueError(f"--sweep {spec!r}: {param} must be at least 1")
    if len(set(values)) != len(values):
        raise ValueError(f"--sweep {spec!r}: a value appears twice")
    return Sweep(param, tuple(sorted(values)))


# --- acceptance ---------------------------------------------------------------------------------------

def checked_acceptance(rounds: list[Round]) -> Optional[float]:
    """a per checked token: kept / checked guesses over the run. A guess is checked when its parent was kept
    (or it hangs off the root): status accepted or rejected, not unreached. None when nothing was checked.
    Unlike summarize's acceptance_rate (kept / guessed) it does not count the guesses after a rejection."""
    kept = sum(s == ACCEPTED for r in rounds for s in r.status)
    checked = kept + sum(s == REJECTED for r in rounds for s in r.status)
    return kept / checked if checked else None


def _depths(rounds: list[Round]) -> list[int]:
    return [max((depth_of(r.parents, i) for i in range(r.n_proposed)), default=0) for r in rounds]


def mean_depth(rounds: list[Round]) -> float:
    """Mean depth of a round's guesses, 0 for a round that guessed nothing (how far a method really guessed)."""
    depths = _depths(rounds)
    return sum(depths) / len(depths) if depths else 0.0


# --- cost and prediction ------------------------------------------------------------------------------

def verify_cost(target, sizes: list[int], context: int = 256, repeats: int = 7, chain: bool = True) -> dict[int, float]:
    """c_v(n) for each n in sizes (and 1): the median time of one verify forward over n new tokens (the root
    and n-1 guesses) on a KV cache of `context` tokens, over the median time of one over 1 token.

    It times the engine's own path, TargetSession.forward_tree, on a preallocated cache that is cropped back
    after every forward. chain=False verifies n-1 siblings of the root through the 4D attention mask trees
    use (n <= 2 is a chain either way). One warm-up turn, then `repeats` turns of every size in order, so
    slow drift of a shared machine hits all sizes alike.
    """
    import torch

    from specviz.engine import _now  # the engine's clock: synchronised on CUDA
    from specviz.tree import Tree
    from specviz.verify import TargetSession, truncate

    sizes = sorted({1, *sizes})
    if sizes[0] < 1 or repeats < 1 or context < 1:
        raise ValueError(f"verify_cost needs sizes >= 1, repeats >= 1 and context >= 1; got {sizes}, {repeats}, {context}")
    if context + sizes[-1] + 1 > target.max_context:
        raise ValueError(f"a context of {context} plus {sizes[-1]} new tokens exceeds the model's {target.max_context}")
    ids = [3 + (7 * i) % (target.vocab_size - 3) for i in range(context + sizes[-1])]  # the cost depends on counts only
    root, guesses = ids[context], ids[context + 1:]
    times: dict[int, list[float]] = {n: [] for n in sizes}
    with torch.inference_mode():
        session = TargetSession(target.model, capacity=context + sizes[-1] + 1)
        session.prefill(ids[: context + 1])  # context tokens cached; the root comes next
        for turn in range(repeats + 1):
            for n in sizes:
                tree = Tree.chain(guesses[: n - 1]) if chain else Tree(guesses[: n - 1], [-1] * (n - 1))
                start = _now(target)
                session.forward_tree(root, tree)
                elapsed = _now(target) - start
                truncate(session.cache, context)
                if turn:
                    times[n].append(elapsed)
    one = statistics.median(times[1])
    return {n: statistics.median(times[n]) / one for n in sizes}


def interpolate(costs: dict[int, float], n: int) -> float:
    """c_v(n) from the measured sizes: linear between the nearest two, the end's value beyond them."""
    if n in costs:
        return costs[n]
    sizes = sorted(costs)
    below, above = [m for m in sizes if m < n], [m for m in sizes if m > n]
    if not below or not above:
        return costs[(below or above)[-1 if below else 0]]
    low, high = below[-1], above[0]
    return costs[low] + (costs[high] - costs[low]) * (n - low) / (high - low)


def predict(a: float, k: int, c: float, c_v: float) -> tuple[float, float]:
    """(tau, speedup) the formula predicts: tau = (1 - a^(k+1)) / (1 - a), speedup = tau / (c_v + k*c)."""
    tau = expected_tokens(a, k)
    return tau, tau / (c_v + k * c)


# --- the sweep ----------------------------------------------------------------------------------------

Progress = Optional[Callable[[], None]]  # called after every generation (a tqdm's update, say)


def run_sweep(target, method: str, prompts: list[str], sweep: Sweep, run: RunConfig, sampling: SamplingConfig,
              options: Optional[dict[str, Any]] = None, costs: Optional[dict[int, float]] = None,
              progress: Progress = None) -> list[dict[str, Any]]:
    """One row per swept value (see the module doc), measured over all prompts: each prompt runs the baseline,
    then the method at every value (in reverse order on every other prompt, so drift evens out), after one
    warm-up of both. costs: c_v by n, measured here (chain or flat tree, as the param says) when None."""
    from specviz.engine import generate

    if not prompts:
        raise ValueError("a sweep needs at least one prompt")
    options = dict(options or {})
    if sweep.param in options:
        raise ValueError(f"{sweep.param!r} is swept: do not also set it as a method option")
    settings = {v: (replace(run, k=v), options) if sweep.param == "k" else (run, {**options, "nodes": v})
                for v in sweep.values}
    for value_run, _ in settings.values():
        value_run.validate()

    def go(name: str, setting: tuple[RunConfig, dict[str, Any]], prompt: str) -> list[Round]:
        rounds = list(generate(target, name, prompt, setting[0], sampling, **setting[1]))
        if progress:
            progress()
        return rounds

    go("baseline", (run, {}), prompts[0])  # warm-up: first-call costs hit no measurement
    go(method, settings[sweep.values[0]], prompts[0])
    base: list[list[Round]] = []
    runs: dict[int, list[list[Round]]] = {v: [] for v in sweep.values}
    for i, prompt in enumerate(prompts):
        base.append(go("baseline", (run, {}), prompt))
        for value in sweep.values if i % 2 == 0 else reversed(sweep.values):
            runs[value].append(go(method, settings[value], prompt))
    if costs is None:
        costs = verify_cost(target, [sweep.verify_tokens(v) for v in sweep.values], chain=sweep.param == "k")
    return [sweep_row(sweep, value, runs[value], base, costs, run, sampling.greedy) for value in sweep.values]


def sweep_row(sweep: Sweep, value: int, runs: list[list[Round]], base: list[list[Round]], costs: dict[int, float],
              run: RunConfig, greedy: bool) -> dict[str, Any]:
    """The measured and predicted numbers of one value: runs and base hold one run's rounds per prompt."""
    rounds = [r for rs in runs for r in rs]
    tokens, seconds = sum(rs[-1].tokens_so_far for rs in runs), sum(rs[-1].elapsed_s for rs in runs)
    base_tps = sum(rs[-1].tokens_so_far for rs in base) / sum(rs[-1].elapsed_s for rs in base)
    base_round_s = sum(r.draft_time_s + r.verify_time_s for rs in base for r in rs) / sum(len(rs) for rs in base)
    k, n = sweep.depth(value, run), sweep.verify_tokens(value)
    if n not in costs:
        raise ValueError(f"no verify cost for n = {n} (measured: {sorted(costs)})")
    c = sum(r.draft_time_s for r in rounds) / len(rounds) / k / base_round_s
    a_path = summarize(rounds)["a"]
    a = a_path or 0.0
    tau = tokens / len(rounds)
    predicted_tau, predicted_speedup = predict(a, k, c, costs[n])
    tau_as_guessed = sum(expected_tokens(a, d) for d in _depths(rounds)) / len(rounds)
    cost_as_guessed = sum(interpolate(costs, r.n_proposed + 1) for r in rounds) / len(rounds) + k * c
    return {
        "param": sweep.param, "value": value, "k": k, "n_verify": n, "prompts": len(runs),
        "new_tokens": tokens, "rounds": len(rounds),
        "tau": tau,  # summarize's mean_accepted_tokens, over all prompts
        "acceptance": summarize(rounds)["acceptance_rate"],  # kept / guessed
        "a": checked_acceptance(rounds),  # kept / checked guesses
        "a_path": a_path,  # per level (summarize's a): the a of the formula (equals a for chains)
        "depth": mean_depth(rounds),  # guesses per round as made (0 when none), against k as set
        "c": c, "c_v": costs[n],
        "tokens_per_s": tokens / seconds, "baseline_tokens_per_s": base_tps, "speedup": tokens / seconds / base_tps,
        "predicted_tau": predicted_tau, "predicted_speedup": predicted_speedup,
        "predicted_tau_as_guessed": tau_as_guessed, "predicted_speedup_as_guessed": tau_as_guessed / cost_as_guessed,
        "speedup_at_measured_tau": tau / cost_as_guessed,
        "identical_to_baseline": all(_text(rs) == _text(b) for rs, b in zip(runs, base)) if greedy else None,
    }


def _text(rounds: list[Round]) -> str:
    return "".join(r.text for r in rounds)


# --- table and figure ---------------------------------------------------------------------------------

def _num(value: Optional[float], spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_sweep_table(rows: list[dict[str, Any]]) -> str:
    """One line per value: measured tau, a, depth guessed, tokens/s and speedup; the predicted tau and speedup
    (k as set / as guessed); c_v(n) and c."""
    if not rows:
        return ""
    header = (f"{rows[0]['param']:>6}{'tau':>6}{'a':>6}{'depth':>6}{'tok/s':>7}{'speedup':>8}"
              f"{'pred tau':>13}{'pred speedup':>15}{'c_v(n)':>7}{'c':>7}  identical")
    lines = [header, f"{'':>39}{'(k as set / as guessed)':>28}", "-" * len(header)]
    for r in rows:
        same = {True: "yes", False: "NO", None: "n/a"}[r["identical_to_baseline"]]
        lines.append(f"{r['value']:>6}{r['tau']:>6.2f}{_num(r['a_path'], '.2f'):>6}{r['depth']:>6.2f}"
                     f"{r['tokens_per_s']:>7.1f}{r['speedup']:>7.2f}x"
                     f"{r['predicted_tau']:>7.2f} /{r['predicted_tau_as_guessed']:>4.2f}"
                     f"{r['predicted_speedup']:>8.2f}x /{r['predicted_speedup_as_guessed']:>4.2f}x"
                     f"{r['c_v']:>7.2f}{r['c']:>7.3f}  {same}")
    return "\n".join(lines)


def _t(key: str, lang: str, **values: Any) -> str:
    from specviz.i18n import text

    return text(key, lang, **values)


def sweep_figure(rows: list[dict[str, Any]], costs: dict[int, float], lang: str = "en", method: str = ""):
    """Three panels: measured tau against the swept value beside the formula's, for k as set and for the rounds
    as guessed; the same for the speedup (the dotted line marks 1x: below it, slower than plain decoding);
    c_v(n) against n."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    param = rows[0]["param"] if rows else "k"
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08,
                        subplot_titles=(_t("sweep.tau", lang), _t("sweep.speedup", lang), _t("sweep.cost", lang)))
    xs = [r["value"] for r in rows]
    styles = {"measured": dict(color="#2563eb"), "predicted": dict(color="#d97706", dash="dash"),
              "as_guessed": dict(color="#9333ea", dash="dot")}
    for col, quantity in enumerate(("tau", "speedup"), 1):
        series = {"measured": quantity, "predicted": f"predicted_{quantity}",
                  "as_guessed": f"predicted_{quantity}_as_guessed"}
        for key, column in series.items():
            fig.add_trace(go.Scatter(x=xs, y=[r[column] for r in rows], mode="lines+markers", name=_t(f"sweep.{key}", lang),
                                     line=styles[key], legendgroup=key, showlegend=col == 1), row=1, col=col)
    fig.add_hline(y=1.0, line=dict(color="#6b7280", width=1, dash="dot"), row=1, col=2)
    sizes = sorted(costs)
    fig.add_trace(go.Scatter(x=sizes, y=[costs[n] for n in sizes], mode="lines+markers", name="c_v(n)",
                             line=dict(color="#16a34a"), showlegend=False), row=1, col=3)
    fig.add_hline(y=1.0, line=dict(color="#6b7280", width=1, dash="dot"), row=1, col=3)
    for col in (1, 2):
        fig.update_xaxes(title_text=_t(f"sweep.axis.{param}", lang), row=1, col=col)
    fig.update_xaxes(title_text=_t("sweep.axis.n", lang), row=1, col=3)
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(title_text=_t("sweep.axis.cost", lang), row=1, col=3)
    fig.update_layout(title=dict(text=_t("sweep.title", lang, method=method), font=dict(size=14)),
                      template="plotly_white", height=360, margin=dict(l=50, r=20, t=60, b=40),
                      legend=dict(orientation="h", y=-0.2))
    return fig
