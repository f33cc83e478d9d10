"""specviz: the Gradio teaching app for speculative decoding.

Layout and one generator handler per view. Every view reads the engine's per-round records
(specviz.events.Round); no decoding logic lives here. Run it with `python app.py`; host and port
come from GRADIO_SERVER_NAME / GRADIO_SERVER_PORT.

API (gradio_client):
    Client(url).predict(prompt, method, max_new_tokens, temperature, api_name="/speculate")
    -> {"text": str, "rounds": [Round.to_dict(), ...], "metrics": summarize(rounds)}
Optional trailing arguments: k, top_p, seed, nodes, typical, baseline, a. Invalid values raise gr.Error to the client.

Limits per request (tokens, prompt length, time) and the model allow-list come from Limits;
SPECVIZ_PUBLIC=1 selects the stricter public ones (docs/robustness.md).
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator, Optional

import gradio as gr
import torch

from specviz import charts, explain, i18n, production, render, trace, why, zerogpu
from specviz.ui import MODEL, UI, Localized, Page, error, in_status, shown, tr, user_errors
from specviz.config import MAX_K, RunConfig, SamplingConfig
from specviz.engine import generate
from specviz.events import Round, summarize
from specviz.methods import METHODS, TREE_NODES, available_methods
from specviz.models import EMBEDDED, load_target
from specviz.presets import PRESETS
from specviz.tabs import production_engine
from specviz.tabs import sweep as sweep_tab

MAX_NEW_TOKENS = 512  # the most tokens one request may generate (UI and API alike)
MAX_TEMPERATURE = 2.0
MAX_PROMPT_CHARS = 8000
MAX_COLUMNS = 4  # side-by-side columns
QUEUE_SIZE = 32  # requests waiting beyond this are refused with a "queue full" message
TIME_BUDGET_S = 120.0  # a run still going after this long ends with what it has (stop_reason "time_budget")
CHART_EVERY_S = 0.75  # charts and tables refresh at most this often while a run streams
DEMOS = Path(__file__).resolve().parent / "demos" / "prompts.jsonl"
DEMO_TRACES = Path(__file__).resolve().parent / "demos" / "traces"  # recorded by scripts/record_traces.py
MAX_REPLAY_PAUSE_S = 1.0  # a replay waits at most this long between two rounds, whatever was recorded


@dataclass(frozen=True)
class Limits:
    """What one request may ask of this server. Handlers check raw values against these, not the widgets."""

    max_new_tokens: int = MAX_NEW_TOKENS
    max_prompt_chars: int = MAX_PROMPT_CHARS
    time_budget_s: float = TIME_BUDGET_S  # per run; a side-by-side request runs several
    queue_size: int = QUEUE_SIZE
    public: bool = False  # models only from the embedded default and the presets (never a path)


PUBLIC = Limits(max_new_tokens=128, max_prompt_chars=2000, time_budget_s=60.0, queue_size=16, public=True)


def limits_from_env() -> Limits:
    """SPECVIZ_PUBLIC=1: the public limits; SPECVIZ_QUEUE_SIZE overrides the queue bound."""
    limits = PUBLIC if os.environ.get("SPECVIZ_PUBLIC", "") in ("1", "true") else Limits()
    queue = os.environ.get("SPECVIZ_QUEUE_SIZE", "").strip()
    return replace(limits, queue_size=int(queue)) if queue else limits


@dataclass(frozen=True)
class Request:
    """One validated run: what to generate, with which method, model and settings."""

    prompt: str
    method: str
    model: str
    run: RunConfig
    sampling: SamplingConfig
    options: dict = field(default_factory=dict)  # the method's own options (tree nodes)

    def baseline(self) -> "Request":
        """The plain-decoding run of the same prompt and settings (no method options: the baseline takes none)."""
        return replace(self, method="baseline", options={})

    def baseline_key(self) -> str:
        s = self.sampling
        return json.dumps([self.model, self.prompt, self.run.max_new_tokens, s.temperature, s.top_p, s.seed])


class EngineBackend:
    """The engine as the app sees it: the methods a model offers, and a stream of rounds.

    Tests hand build_demo a fake with the same members that yields canned records.
    """

    def __init__(self, models: tuple[str, ...], limits: Limits = Limits()):
        self.models = models  # the model choices offered; the first is the default
        self.limits = limits

    def names(self) -> tuple[str, ...]:
        """Every registered method, without loading a model."""
        return tuple(METHODS)

    def methods(self, model: str) -> list[str]:
        return list(available_methods(load_model(model)))

    def stream(self, req: Request) -> Iterator[Round]:
        return generate(load_model(req.model), req.method, req.prompt, req.run, req.sampling, **req.options)

    def verify_cost(self, model: str, sizes: list[int], chain: bool = True) -> dict[int, float]:
        """c_v(n) for the Sweep tab: one target forward over n new tokens / over 1, timed here (specviz.sweep)."""
        from specviz.sweep import verify_cost

        return verify_cost(load_model(model), sizes, repeats=3, chain=chain)


@functools.lru_cache(maxsize=2)
def load_model(name: str):
    """Loaded models are read-only and shared by every session; everything per user lives in gr.State."""
    return load_target(name or None)


def model_choices(public: bool = False) -> tuple[str, ...]:
    """The embedded default, then the folders or hub ids listed in SPECVIZ_MODELS (comma-separated).

    Public: only preset names or their target ids, so no one can point the server at a path."""
    extra = [m.strip() for m in os.environ.get("SPECVIZ_MODELS", "").split(",") if m.strip()]
    if public:
        allowed = {p.name: p.target for p in PRESETS} | {p.target: p.target for p in PRESETS}
        refused = [m for m in extra if m not in allowed]
        if refused:
            raise ValueError(f"SPECVIZ_PUBLIC=1 offers only the embedded model and the presets "
                             f"({', '.join(p.name for p in PRESETS)}); SPECVIZ_MODELS also names {refused}")
        extra = [allowed[m] for m in extra]
    return (EMBEDDED, *dict.fromkeys(extra))


def demo_prompts() -> list[dict[str, str]]:
    if not DEMOS.is_file():
        return []
    return [json.loads(line) for line in DEMOS.read_text(encoding="utf-8").splitlines() if line.strip()]


# --- validation: the API receives raw values, so every handler checks them here ---------------------

TREE_METHODS = tuple(TREE_NODES)  # the methods whose tree size the "tree nodes" control sets
MAX_NODES = 64  # the largest tree the control offers (verification reads nodes + 1 tokens per round)
ORACLE_A = 0.8  # the teaching oracle's chance of a right guess, by default
NODES_DEFAULTS = {f"{m}_{'gpu' if d == 'cuda' else d}": n for m, by in TREE_NODES.items() for d, n in by.items()}


def _as_int(value: Any, name: str, low: int, high: int, lang: str = "en") -> int:
    bad = error("err.int", lang, name=name, low=low, high=high, value=shown(value))
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise bad
    try:
        number = float(value)
    except ValueError:
        raise bad from None
    if not number.is_integer() or not low <= number <= high:
        raise bad
    return int(number)


def _as_float(value: Any, name: str, low: float, high: float, low_open: bool = False, lang: str = "en") -> float:
    bounds = i18n.text("err.bounds.above" if low_open else "err.bounds.from", lang, low=low, high=high)
    bad = error("err.float", lang, name=name, bounds=bounds, value=shown(value))
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise bad from None
    if isinstance(value, bool) or math.isnan(number) or not low <= number <= high or (low_open and number == low):
        raise bad
    return number


def validate(backend: EngineBackend, prompt: Any, method: Any, k: Any, temperature: Any, top_p: Any,
             max_new_tokens: Any, seed: Any, model: Any, lang: str = "en", nodes: Any = 0,
             typical: Any = False, oracle_a: Any = ORACLE_A) -> Request:
    """Raw inputs -> a Request, or gr.Error with a message a user can act on (in `lang`).

    The model is checked against the offered choices before anything is loaded."""
    limits = backend.limits
    if not isinstance(prompt, str) or not prompt.strip():
        raise error("err.prompt_empty", lang)
    if len(prompt) > limits.max_prompt_chars:
        raise error("err.prompt_long", lang, n=len(prompt), limit=limits.max_prompt_chars)
    check_model(backend, model, lang)
    with user_errors(lang):
        methods = backend.methods(model)
    if method not in methods:
        raise error("err.method", lang, method=shown(method), choices=", ".join(methods))
    run = RunConfig(max_new_tokens=_as_int(max_new_tokens, "max_new_tokens", 1, limits.max_new_tokens, lang),
                    k=_as_int(k, "k", 1, MAX_K, lang), time_budget_s=limits.time_budget_s)
    if not isinstance(typical, bool) and typical is not None:
        raise error("err.typical", lang, value=shown(typical))
    sampling = SamplingConfig(temperature=_as_float(temperature, "temperature", 0.0, MAX_TEMPERATURE, lang=lang),
                              top_p=_as_float(top_p, "top_p", 0.0, 1.0, low_open=True, lang=lang),
                              seed=_as_int(seed, "seed", 0, 2**31 - 1, lang), typical=bool(typical))
    nodes = _as_int(nodes if nodes is not None else 0, "nodes", 0, MAX_NODES, lang)
    options = {"nodes": nodes} if nodes and method in TREE_METHODS else {}
    if method == "oracle":  # the teaching oracle's chance of a right guess
        options = {"a": _as_float(oracle_a, "a", 0.0, 1.0, lang=lang)}
    return Request(prompt, method, model, replace(run, k_max=max(run.k, run.k_max)), sampling, options)


def check_model(backend: EngineBackend, model: Any, lang: str = "en") -> None:
    if model not in backend.models:
        raise error("err.model", lang, model=shown(model), choices=", ".join(backend.models))


def rounds_of(backend: EngineBackend, req: Request, lang: str = "en") -> Iterator[Round]:
    """The engine's stream, closed when the consumer stops (the stop button, a closed page)."""
    with user_errors(lang), contextlib.closing(backend.stream(req)) as stream:
        yield from stream


def full_text(rounds: list[Round]) -> str:
    return "".join(r.text for r in rounds)


def acceptance_text(metrics: dict) -> str:
    return f"{metrics['acceptance_rate']:.0%}" if metrics["proposed_tokens"] else "—"


def on_cpu() -> bool:
    """Whether this server's models run on a CPU (no CUDA device)."""
    return not torch.cuda.is_available()


def cpu_slope() -> float:
    """How much each further verified token adds to the verify cost here: measured on the 2-core CPU, ~0 on a GPU."""
    return explain.VERIFY_SLOPE_CPU if on_cpu() else 0.0


def headline(rounds: list[Round], speedup: Optional[float], lang: str = "en", why: bool = True) -> str:
    """A run's result, hardware-independent first: "96 tokens in 28 target forwards (tau 3.43)", then the
    measured speedup, with one line on why when a CPU made it below 1x (unless `why` is False)."""
    m = summarize(rounds)
    line = i18n.text("headline", lang, tokens=m["new_tokens"], forwards=m["rounds"],
                     tau=f"{m['mean_accepted_tokens']:.2f}")
    if speedup:
        line += i18n.text("headline.speedup", lang, speedup=f"{speedup:.2f}")
        if why and speedup < 1 and on_cpu():
            line += i18n.text("headline.cpu", lang)
    return line


def status_line(label: str, rounds: list[Round], done: bool, lang: str = "en",
                speedup: Optional[float] = None) -> str:
    if not rounds:
        return i18n.text("status.starting", lang, label=label)
    m, last = summarize(rounds), rounds[-1]
    state = (i18n.text("status.done", lang, reason=i18n.term("stop", last.stop_reason, lang)) if last.finished
             else i18n.text("status.stopped" if done else "status.running", lang))
    if last.stop_reason == "time_budget":
        state = i18n.text("status.time_budget", lang)
    return i18n.text("status.line", lang, label=label, state=state, headline=headline(rounds, speedup, lang),
                     summary=render.round_summary(last, lang), tps=f"{m['tokens_per_s']:.1f}",
                     acceptance=acceptance_text(m))


class Throttle:
    """True at most every `every` seconds, and always when forced."""

    def __init__(self, every: float = CHART_EVERY_S):
        self.every, self.last = every, -math.inf

    def __call__(self, force: bool = False) -> bool:
        now = time.perf_counter()
        if force or now - self.last >= self.every:
            self.last = now
            return True
        return False


def remember(cache: dict, key: str, rounds: list[Round], keep: int = 4) -> dict:
    """A session's baseline runs, newest last, at most `keep` of them."""
    cache = {k: v for k, v in (cache or {}).items() if k != key}
    cache[key] = rounds
    return dict(list(cache.items())[-keep:])


def growing(backend: EngineBackend, req: Request, lang: str = "en") -> Iterator[list[Round]]:
    """The run's rounds so far, after each new round."""
    rounds: list[Round] = []
    for r in rounds_of(backend, req, lang):
        rounds.append(r)
        yield rounds


def greedy_run(rounds: list[Round]) -> bool:
    """Whether a recorded run used greedy acceptance (temperature 0), read from its records."""
    return not rounds or rounds[0].temperature == 0


def identical_label(rounds: list[Round], base: Optional[list[Round]], greedy: bool, lang: str = "en",
                    running: bool = False) -> str:
    """The summary table's "identical to baseline" cell. A run cut short is compared on its prefix; a run
    still streaming (`running`) says so instead of "stopped early"."""
    if not base:
        return "—"
    if not greedy:
        return i18n.text("identical.sampling", lang)
    check = render.agreement(rounds, base)
    if check.first_difference is not None:
        return i18n.text("identical.no", lang, n=check.first_difference + 1)
    if running and not rounds[-1].finished:
        return i18n.text("identical.running", lang, n=check.compared)
    if check.short and rounds is not base:
        return i18n.text("identical.prefix", lang, who=i18n.text(f"who.{check.short}", lang), n=check.compared)
    return i18n.text("identical.yes", lang)


def speedup_of(rounds: list[Round], base: Optional[list[Round]]) -> Optional[float]:
    base_tps = summarize(base)["tokens_per_s"] if base else None
    return summarize(rounds, base_tps)["speedup"] if rounds else None


def inspect_round(rounds: list[Round], number: Any, language: str = "English", node: Any = None) -> tuple:
    """The tree picture, token table and Why panel (its node picker, then the panel) of round `number`
    (1-based; clamped to the run). node: the guess the panel explains, if the round checked it (the language
    switch keeps the reader's choice); else the default one."""
    lang = i18n.code(language)
    if not rounds:
        return "", render.table("headers.tokens", [], lang), *why_view(None, None, lang)
    r = picked(rounds, number)
    return (render.tree_svg(r, lang=lang), render.table("headers.tokens", render.token_rows(r, lang), lang),
            *why_view(r, node, lang))


def picked(rounds: list[Round], number: Any) -> Round:
    return rounds[min(max(int(number or len(rounds)), 1), len(rounds)) - 1]


def why_view(r: Optional[Round], node: Any, lang: str) -> tuple[dict, str]:
    """The Why panel's node picker (the round's checked guesses) and the panel for `node` (None: the first
    rejected guess, else the last kept one)."""
    if r is None:
        return gr.update(choices=[], value=None), ""
    node = node if node in why.checked_nodes(r) else why.default_node(r)
    return gr.update(choices=why.node_choices(r, lang), value=node), why.why_html(r, node, lang)


def inspect_why(rounds: list[Round], number: Any, node: Any, language: str = "English") -> tuple[dict, str]:
    """The live inspector's Why panel for another guess of the round shown."""
    return why_view(picked(rounds, number) if rounds else None, node, i18n.code(language))


# --- live run ---------------------------------------------------------------------------------------

RUN_FIELDS = ("status", "stream", "text", "acceptance", "histogram", "speed", "timeline", "table", "pick",
              "tree", "tokens", "lossless", "formula", "last_run", "base", "cache", "why_node", "why")  # the live tab's outputs


def live_status(rounds: list[Round], base: Optional[list[Round]], done: bool, lang: str) -> str:
    """The live run's status line, with the speedup once a finished run has a baseline."""
    if not rounds:
        return ""
    method = rounds[0].method
    speedup = speedup_of(rounds, base) if done and method != "baseline" else None
    return status_line(method, rounds, done, lang, speedup)


def live_checks(rounds: list[Round], base: Optional[list[Round]], lang: str) -> tuple[str, str]:
    """The finished live run's losslessness check and its filled-in formula."""
    if not rounds:
        return "", ""
    method = rounds[0].method
    lossless = (i18n.text("lossless.self", lang) if method == "baseline"
                else render.lossless_markdown(rounds, base, greedy_run(rounds), lang) if base
                else i18n.text("lossless.tick", lang))
    speedup = speedup_of(rounds, base) if method != "baseline" else None
    return lossless, explain.formula_markdown(rounds, speedup, lang, base, cpu_slope())


def single_outputs(req: Request, rounds: list[Round], base: Optional[list[Round]], refresh: bool,
                   final: bool = False, cache: Optional[dict] = None, note: str = "", lang: str = "en") -> tuple:
    """Values for RUN_FIELDS; gr.skip() where nothing needs sending this time."""
    skip = gr.skip()
    status = note or (live_status(rounds, base, final, lang) if rounds
                      else i18n.text("status.starting", lang, label=req.method))
    head = (status, render.stream_html(rounds, lang=lang))
    if not refresh:
        return head + (skip,) * (len(RUN_FIELDS) - len(head))
    tree, tokens, why_node, why_panel = inspect_round(rounds, len(rounds), lang)
    more = (full_text(rounds), *charts.all_figures({req.method: rounds}, base, lang),
            render.table("headers.rounds", render.round_rows(rounds, lang), lang),
            gr.Number(value=len(rounds), maximum=len(rounds)), tree, tokens)
    if not final:  # the previous run's checks and baseline must not stand beside this run
        return head + more + ("", "", rounds, None, skip, why_node, why_panel)
    return head + more + (*live_checks(rounds, base, lang), rounds, base, cache, why_node, why_panel)


def run_single(backend: EngineBackend, prompt, method, k, temperature, top_p, max_new_tokens, seed, model,
               with_baseline, cache, language: str = "English", nodes=0, typical=False,
               oracle_a=ORACLE_A) -> Iterator[tuple]:
    """Stream one method round by round, then (optionally) the baseline for speedup and losslessness."""
    lang = i18n.code(language)
    req = validate(backend, prompt, method, k, temperature, top_p, max_new_tokens, seed, model, lang, nodes, typical,
                   oracle_a)
    tick, rounds, cache = Throttle(), [], dict(cache or {})
    for rounds in growing(backend, req, lang):
        yield single_outputs(req, rounds, None, tick(force=rounds[-1].finished), lang=lang)
    base = None
    if req.method == "baseline":
        base, cache = rounds, remember(cache, req.baseline_key(), rounds)
    elif with_baseline:
        base = cache.get(req.baseline_key())
        if base is None:
            for base in growing(backend, req.baseline(), lang):
                if tick():
                    note = (f"{status_line(req.method, rounds, True, lang)}  \n"
                            + i18n.text("status.baseline_now", lang, n=len(base)))
                    yield single_outputs(req, rounds, None, False, note=note, lang=lang)
            cache = remember(cache, req.baseline_key(), base)
    yield single_outputs(req, rounds, base, True, final=True, cache=cache, lang=lang)


# --- side by side -----------------------------------------------------------------------------------

def column_html(label: str, rounds: list[Round], state: str, lang: str = "en") -> str:
    return (f'<div style="font-weight:600;font-size:16px">{label}</div>'
            f'<div style="font-size:12px;color:#6b7280">{state}</div>'
            f'{render.stream_html(rounds, i18n.text("column.waiting", lang), lang=lang)}')


def summary_rows(runs: dict[str, list[Round]], base: Optional[list[Round]], greedy: bool,
                 lang: str = "en", running: Optional[str] = None) -> list[list]:
    """One row per run; `running` names the run still streaming."""
    rows = []
    for label, rounds in ({"baseline": base, **runs} if base else runs).items():
        m, speedup = summarize(rounds), speedup_of(rounds, base)
        rows.append([label, round(m["mean_accepted_tokens"], 2), acceptance_text(m),
                     round(m["tokens_per_s"], 1), f"{speedup:.2f}×" if speedup else "—",
                     identical_label(rounds, base, greedy, lang, running=label == running)])
    return rows


def compare_cells(columns: list[str], runs: dict, lang: str) -> list[dict]:
    """The side-by-side columns: one per method, the rest hidden."""
    cells = [gr.update(value=column_html(m, runs.get(m, []), _column_state(runs.get(m), lang), lang), visible=True)
             for m in columns]
    return cells + [gr.update(value="", visible=False)] * (MAX_COLUMNS - len(cells))


def compare_view(columns: list[str], runs: dict, base: Optional[list[Round]], greedy: bool, lang: str,
                 running: Optional[str] = None) -> tuple:
    """Columns, summary table and charts of finished or growing runs (side by side and replay alike);
    `running` names the run still streaming."""
    table = summary_rows({m: runs[m] for m in columns if runs.get(m)}, base, greedy, lang, running)
    shown = {m: r for m, r in runs.items() if r}
    return (*compare_cells(columns, runs, lang), render.table("headers.summary", table, lang),
            *charts.all_figures(shown, base, lang))


def compare_outputs(columns: list[str], runs: dict, base: Optional[list[Round]], status: str,
                    refresh: bool, greedy: bool, cache=None, lang: str = "en", running: Optional[str] = None) -> tuple:
    skip = gr.skip()
    if not refresh:
        return (status, *compare_cells(columns, runs, lang)) + (skip,) * 7
    shown = {m: r for m, r in runs.items() if r}
    return (status, *compare_view(columns, runs, base, greedy, lang, running), dict(shown),
            cache if cache is not None else skip)


def _column_state(rounds: Optional[list[Round]], lang: str = "en") -> str:
    if not rounds:
        return i18n.text("column.waiting", lang)
    m = summarize(rounds)
    return i18n.text("column.state", lang, tokens=m["new_tokens"], forwards=m["rounds"], tps=f"{m['tokens_per_s']:.1f}",
                     tau=f"{m['mean_accepted_tokens']:.2f}", acceptance=acceptance_text(m))


def compare_done(runs: dict[str, list[Round]], lang: str = "en") -> str:
    """The finished comparison's status: each method's headline against the run's baseline."""
    base = runs.get("baseline")
    speedups = {label: speedup_of(rounds, base) for label, rounds in runs.items() if rounds and label != "baseline"}
    lines = [f"**{label}**: {headline(runs[label], speedup, lang, why=False)}" for label, speedup in speedups.items()]
    slow = on_cpu() and any(speedup and speedup < 1 for speedup in speedups.values())
    return "  \n".join([i18n.text("compare.done", lang), *lines]) + (i18n.text("headline.cpu", lang) if slow else "")


def limit_methods(chosen: Optional[list], ticked: Optional[list], language: str = "English") -> tuple:
    """The side-by-side box holds at most MAX_COLUMNS methods: a tick past that is undone and the status
    line says why. Returns (the box, the status line, the choice to remember)."""
    chosen = list(chosen or [])
    if len(chosen) <= MAX_COLUMNS:
        return gr.skip(), gr.skip(), chosen
    kept = [m for m in chosen if m in (ticked or [])][:MAX_COLUMNS]
    message = i18n.text("err.compare_most", i18n.code(language), most=MAX_COLUMNS)
    return gr.update(value=kept), i18n.text("status.error", "en", message=message), kept


def run_compare(backend: EngineBackend, prompt, methods, k, temperature, top_p, max_new_tokens, seed, model,
                cache, language: str = "English", nodes=0, typical=False, oracle_a=ORACLE_A) -> Iterator[tuple]:
    """Run two to four methods one after another on the same prompt, a fresh baseline first, so
    every speed in the table is measured under the same conditions."""
    lang = i18n.code(language)
    methods = list(methods or [])
    if not 2 <= len(methods) <= MAX_COLUMNS:
        raise error("err.compare_count", lang, most=MAX_COLUMNS, n=len(methods))
    reqs = [validate(backend, prompt, m, k, temperature, top_p, max_new_tokens, seed, model, lang, nodes, typical,
                     oracle_a)
            for m in methods]
    greedy, tick, runs = reqs[0].sampling.greedy, Throttle(), {}
    base: list[Round] = []
    for base in growing(backend, reqs[0].baseline(), lang):
        runs["baseline"] = base
        if tick():
            yield compare_outputs(methods, runs, None, i18n.text("compare.running_baseline", lang, n=len(base)),
                                  False, greedy, lang=lang)
    for req in reqs:
        if req.method == "baseline":
            continue
        for rounds in growing(backend, req, lang):
            runs[req.method] = rounds
            yield compare_outputs(methods, runs, base, status_line(req.method, rounds, False, lang),
                                  tick(force=rounds[-1].finished), greedy, lang=lang, running=req.method)
    cache = remember(dict(cache or {}), reqs[0].baseline_key(), base)
    yield compare_outputs(methods, runs, base, compare_done(runs, lang), True, greedy, cache, lang)


# --- classroom step mode ----------------------------------------------------------------------------

def step_outputs(state: dict, lang: str = "en") -> tuple:
    rounds, pos = state["rounds"], state["pos"]
    r = rounds[pos]
    status = i18n.text("step.status", lang, label=state["label"], n=pos + 1, total=len(rounds),
                       summary=render.round_summary(r, lang), tokens=r.tokens_so_far)
    return (status, render.stream_html(rounds[: pos + 1], highlight=pos, lang=lang),
            render.narrate(r, state["greedy"], lang), render.tree_svg(r, lang=lang),
            render.table("headers.tokens", render.token_rows(r, lang), lang), *why_view(r, state.get("node"), lang),
            state)


def step_why(state: Optional[dict], node: Any, language: str = "English") -> tuple:
    """The step view's Why panel for another guess of the round shown (kept in the state for the language
    switch): the picker, the panel, the state."""
    lang = i18n.code(language)
    if not state or not state.get("rounds"):
        raise error("err.step_first", lang)
    return (*why_view(state["rounds"][state["pos"]], node, lang), {**state, "node": node})


def step_prepare(backend: EngineBackend, prompt, method, k, temperature, top_p, max_new_tokens, seed,
                 model, language: str = "English", nodes=0, typical=False, oracle_a=ORACLE_A) -> Iterator[tuple]:
    """Run the whole generation once; the rounds are then revealed one per click from session state."""
    lang = i18n.code(language)
    req = validate(backend, prompt, method, k, temperature, top_p, max_new_tokens, seed, model, lang, nodes, typical,
                   oracle_a)
    skip, tick, rounds = gr.skip(), Throttle(), []
    for rounds in growing(backend, req, lang):
        if tick():
            yield (i18n.text("step.preparing", lang, method=req.method, n=len(rounds)),) + (skip,) * 7
    yield step_outputs({"rounds": rounds, "pos": 0, "greedy": req.sampling.greedy, "label": req.method}, lang)


def step_move(state: Optional[dict], language: str = "English", *, delta: int) -> tuple:
    """Show the round `delta` away from the current one (clamped); a huge delta jumps to an end."""
    lang = i18n.code(language)
    if not state or not state.get("rounds"):
        raise error("err.step_first", lang)
    pos = min(max(state["pos"] + delta, 0), len(state["rounds"]) - 1)
    return step_outputs({**state, "pos": pos, "node": None}, lang)


def step_view(state: Optional[dict], empty: str, lang: str) -> tuple:
    """A step view (without its state) in `lang`: the current round, or the empty page."""
    if state and state.get("rounds"):
        return step_outputs(state, lang)[:-1]
    return ("", render.stream_html([], i18n.text(empty, lang), lang=lang), "", "",
            render.table("headers.tokens", [], lang), *why_view(None, None, lang))


# --- traces: save a run, replay it without a model ---------------------------------------------------

def trace_file(backend: EngineBackend, runs: dict[str, list[Round]], prompt, k, temperature, top_p,
               max_new_tokens, seed, model, language: str = "English",
               typical=False) -> tuple[Optional[str], str, Optional[trace.Trace]]:
    """The finished run(s) as a trace file to download, their production configuration, and the trace (the
    language switch rewrites the configuration from it); (None, "", None) while there is nothing to save.

    The settings are read from the controls when the run ends, and checked as a run would check them."""
    lang = i18n.code(language)
    runs = {label: list(rounds) for label, rounds in (runs or {}).items() if rounds}
    if not runs:
        return None, "", None
    req = validate(backend, prompt, next(iter(runs)), k, temperature, top_p, max_new_tokens, seed, model, lang,
                   typical=typical)
    record = trace.Trace(model=req.model, prompt=req.prompt, runs=runs, run=req.run, sampling=req.sampling)
    folder = Path(tempfile.mkdtemp(prefix="specviz-trace-"))
    name = "-".join(runs) + time.strftime("-%Y%m%d-%H%M%S.json", time.gmtime())
    return str(trace.save(record, folder / name)), production_markdown(record, lang), record


def save_single(backend: EngineBackend, rounds: list[Round], *settings) -> tuple[Optional[str], str, Optional[trace.Trace]]:
    return trace_file(backend, {rounds[0].method: rounds} if rounds else {}, *settings)


def production_markdown(t: trace.Trace, lang: str = "en") -> str:
    """Each speculative run of a trace as vLLM and transformers configuration (the baseline when alone)."""
    labels = [label for label in t.runs if label != "baseline"] or list(t.runs)
    return i18n.text("production.intro", lang) + "\n\n" + "\n\n".join(
        production.markdown(production.deployment(label, t.model, t.run, t.sampling), lang) for label in labels)


def demo_traces() -> list[str]:
    return sorted(p.stem for p in DEMO_TRACES.glob("*.json")) if DEMO_TRACES.is_dir() else []


def open_trace(upload: Any, demo: Optional[str], lang: str = "en") -> trace.Trace:
    """The uploaded trace, else the chosen demo trace; gr.Error saying why one cannot be read."""
    path = getattr(upload, "name", upload) or (DEMO_TRACES / f"{demo}.json" if demo else None)
    if not path:
        raise error("err.trace_missing", lang)
    try:
        return trace.load(path)
    except trace.TraceError as err:
        raise error("err.trace_bad", lang, reason=str(err)) from err


def run_label(label: str, rounds: list[Round], lang: str = "en") -> str:
    """A run's name, with its largest tree when it proposed trees (read from its rounds: older traces too)."""
    trees = [r for r in rounds if not r.is_chain]
    return i18n.text("trace.tree", lang, label=label, nodes=max(r.n_proposed for r in trees)) if trees else label


def trace_heading(t: trace.Trace, lang: str = "en") -> str:
    s, libs = t.sampling, ", ".join(f"{k} {v}" for k, v in t.versions.items())
    prompt = t.prompt if len(t.prompt) <= 200 else t.prompt[:199] + "…"
    runs = ", ".join(run_label(label, rounds, lang) for label, rounds in t.runs.items())
    version = ("" if t.stale is False else i18n.text("trace.unversioned", lang) if t.stale is None
               else i18n.text("trace.stale", lang, recorded=t.recorded_with, running=trace.code_version()))
    return i18n.text("trace.heading", lang, runs=runs, model=t.model, k=t.run.k,
                     temperature=f"{s.temperature:g}", top_p=f"{s.top_p:g}", seed=s.seed,
                     max_new_tokens=t.run.max_new_tokens, created=t.created or "?",
                     libs=i18n.text("trace.libs", lang, libs=libs) if libs else "", version=version, prompt=prompt)


def replay(upload: Any, demo: Optional[str], speed: Any, language: str = "English") -> Iterator[tuple]:
    """Replay a trace's runs one after another, as the side-by-side view shows them; no model is loaded.

    speed: 1 = as recorded, 2 = twice as fast, 0 = at once. Ends by handing the rounds to step mode, on the
    first run that guesses.
    Outputs: status, columns, summary, charts, runs, the step mode's run choice, production text, the trace."""
    lang = i18n.code(language)
    t = open_trace(upload, demo, lang)
    speed = _as_float(speed, "speed", 0.0, 100.0, lang=lang)
    labels, greedy, tick = list(t.runs)[:MAX_COLUMNS], t.sampling.greedy, Throttle()
    base, shown, head, skip = t.runs.get("baseline"), {}, trace_heading(t, lang), gr.skip()
    for label in labels:
        before = 0.0
        for i, r in enumerate(t.runs[label]):
            if speed > 0:
                time.sleep(min(max(r.elapsed_s - before, 0.0) / speed, MAX_REPLAY_PAUSE_S))
                before = r.elapsed_s
                shown[label] = t.runs[label][: i + 1]
                yield compare_outputs(labels, shown, base, head, tick(), greedy, lang=lang, running=label)[:-1] + (skip,) * 3
        shown[label] = t.runs[label]
    final = compare_outputs(labels, shown, base, head, True, greedy, lang=lang)
    first = next((label for label in labels if label != "baseline"), labels[-1])  # step through the first guesser
    yield final[:-1] + (gr.update(choices=labels, value=first), production_markdown(t, lang), t)


def replay_step(runs: Optional[dict], label: Optional[str], language: str = "English") -> tuple:
    """Step mode over one run of the replayed trace, from its first round."""
    lang = i18n.code(language)
    if not runs or label not in runs:
        raise error("err.replay_first", lang)
    rounds = runs[label]
    return step_outputs({"rounds": rounds, "pos": 0, "greedy": greedy_run(rounds), "label": label}, lang)


# --- the cost and return calculator -----------------------------------------------------------------

CALC_FIELDS = ("c", "a", "k", "verify_share", "extra_mb", "target_mb", "verify_base", "verify_slope")  # CostInputs' order


def note_runs(sources: Optional[dict], runs: Optional[dict], model: Optional[str], where: str,
              language: str = "English") -> tuple[dict, dict]:
    """Remember a finished run's measured costs as a calculator source, newest first, and select the first
    speculative one (the baseline alone when nothing else ran). Returns (sources, the dropdown's update)."""
    lang = i18n.code(language)
    runs = {label: rounds for label, rounds in (runs or {}).items() if rounds}
    if not runs:
        return sources or {}, gr.skip()
    base = runs.get("baseline")
    number = len(sources or {}) + 1
    new = {i18n.text("calc.source.label", lang, n=number, where=i18n.text(f"calc.where.{where}", lang),
                     method=label): {"method": label, "costs": explain.run_costs(rounds, base, model or "", cpu_slope())}
           for label, rounds in runs.items()}
    merged = dict(list({**new, **(sources or {})}.items())[:12])
    pick = next((name for name, v in new.items() if v["method"] != "baseline"), next(iter(new)))
    return merged, gr.update(choices=list(merged), value=pick)


def live_runs(rounds: Optional[list[Round]], base: Optional[list[Round]]) -> dict[str, list[Round]]:
    """The live tab's finished run (and its baseline) as calculator sources."""
    if not rounds:
        return {}
    return {rounds[0].method: rounds} | ({"baseline": base} if base and rounds[0].method != "baseline" else {})


def calculator(c: Any, a: Any, k: Any, verify_share: Any, extra_mb: Any, target_mb: Any, verify_base: Any = 1.0,
               verify_slope: Any = 0.0, language: str = "English") -> tuple[str, Any]:
    """The result and the speedup map of the calculator's values (CALC_FIELDS order)."""
    lang = i18n.code(language)
    try:
        cost = explain.CostInputs(float(c), float(a), int(k), float(verify_share), float(extra_mb), float(target_mb),
                                  float(verify_base), float(verify_slope))
    except (TypeError, ValueError):
        raise error("err.calc", lang) from None
    return explain.calculator_markdown(cost, lang), charts.speedup_map(cost, lang)


def prefill(sources: Optional[dict], name: Optional[str], *values_and_language) -> tuple:
    """Set the calculator from a remembered run: measured values replace the sliders, the rest stays."""
    *values, language = values_and_language
    lang = i18n.code(language)
    source = (sources or {}).get(name)
    if source is None:
        return (gr.skip(),) * len(CALC_FIELDS) + (gr.skip(),) * 3
    merged = [source["costs"].get(field, value) for field, value in zip(CALC_FIELDS, values)]
    return (*merged, source_note(sources, name, lang), *calculator(*merged, language))


def source_note(sources: Optional[dict], name: Optional[str], lang: str) -> str:
    """What the calculator took from a remembered run, and what it kept as it was."""
    source = (sources or {}).get(name)
    if source is None:
        return i18n.text("calc.no_run", lang)
    if source["method"] == "baseline":
        return i18n.text("calc.baseline", lang, method=source["method"])
    kept = [i18n.text(f"calc.field.{f}", lang) for f in CALC_FIELDS if f not in source["costs"]]
    return (i18n.text("calc.prefilled", lang, method=source["method"])
            + (i18n.text("calc.kept", lang, kept="; ".join(kept)) if kept else ""))


# --- API --------------------------------------------------------------------------------------------

def api_result(backend: EngineBackend, prompt: Any, method: Any, max_new_tokens: Any, temperature: Any,
               k: Any, top_p: Any, seed: Any, nodes: Any = 0, typical: Any = False, baseline: Any = False,
               oracle_a: Any = ORACLE_A) -> dict:
    """The /speculate endpoint (messages in English). With `baseline`, plain decoding of the same request
    runs right after, so metrics.speedup is measured (else it is None: the API runs no baseline by itself)."""
    model = backend.models[0]
    req = validate(backend, prompt, method, k, temperature, top_p, max_new_tokens, seed, model, nodes=nodes,
                   typical=typical, oracle_a=oracle_a)
    if not isinstance(baseline, bool) and baseline is not None:
        raise error("err.api_baseline", "en", value=shown(baseline))
    rounds = api_rounds(backend, req)
    result = {"text": full_text(rounds), "rounds": [r.to_dict() for r in rounds], "metrics": summarize(rounds),
              "method": req.method, "model": req.model}
    if baseline:
        base = rounds if req.method == "baseline" else api_rounds(backend, req.baseline())
        result["metrics"] = summarize(rounds, summarize(base)["tokens_per_s"])
        result["baseline"] = {"text": full_text(base), "metrics": summarize(base)}
        result["identical_to_baseline"] = render.agreement(rounds, base).first_difference is None if (
            req.sampling.greedy and not req.sampling.typical) else None
    return result


def api_rounds(backend: EngineBackend, req: Request) -> list[Round]:
    """One API run; past the time budget it is an error (an API caller gets all of the text or none)."""
    rounds = list(rounds_of(backend, req))
    if rounds and rounds[-1].stop_reason == "time_budget":
        raise error("err.api_time_budget", "en", budget=f"{req.run.time_budget_s:g}",
                    tokens=rounds[-1].tokens_so_far)
    return rounds


def api_client_target() -> str:
    """What the API tab tells a script to connect to: this Space's id on Hugging Face (SPACE_ID is set
    there), else the local URL from GRADIO_SERVER_NAME / GRADIO_SERVER_PORT."""
    space = os.environ.get("SPACE_ID", "").strip()
    if space:
        return space
    host = os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1").strip() or "127.0.0.1"
    host = "127.0.0.1" if host == "0.0.0.0" else host
    return f"http://{host}:{os.environ.get('GRADIO_SERVER_PORT', '7860').strip() or '7860'}/"


def refresh_methods(backend: EngineBackend, model: str, language: str = "English") -> tuple:
    """The methods this model offers (loads the model once; it is cached)."""
    lang = i18n.code(language)
    check_model(backend, model, lang)
    with user_errors(lang):
        names = backend.methods(model)
    default = "ngram" if "ngram" in names else names[0]
    return (gr.Dropdown(choices=names, value=default),
            gr.CheckboxGroup(choices=names, value=[m for m in ("baseline", default) if m in names]))


# --- layout -----------------------------------------------------------------------------------------

def controls(ui: Page, backend: EngineBackend) -> dict[str, gr.components.Component]:
    """The prompt box, its examples and the shared settings, above every tab."""
    c: dict[str, gr.components.Component] = {}
    with gr.Row():
        with gr.Column(scale=3):
            prompts = demo_prompts()  # the first one fills the box: a visitor can press Run at once
            c["prompt"] = ui(gr.Textbox, prompts[0]["prompt"] if prompts else "", label=tr("ctl.prompt"), lines=5,
                             max_lines=12, elem_id="prompt", placeholder=tr("ctl.placeholder"))
            if prompts:
                examples = gr.Examples([[p["prompt"]] for p in prompts], [c["prompt"]], label=i18n.text("ctl.examples"),
                                       example_labels=[f"{p['category']}: {p['prompt'][:48]}…" for p in prompts])
                ui.register(examples.dataset, label=tr("ctl.examples"))
        with gr.Column(scale=2):
            names = list(backend.names())
            c["method"] = ui(gr.Dropdown, names, value="ngram" if "ngram" in names else names[0],
                             label=tr("ctl.method"), elem_id="method")
            c["method_info"] = gr.Markdown(explain.method_text(c["method"].value))
            c["k"] = ui(gr.Slider, 1, MAX_K, value=4, step=1, label=tr("ctl.k"))
            c["nodes"] = ui(gr.Slider, 0, MAX_NODES, value=0, step=1, label=tr("ctl.nodes"),
                            info=tr("ctl.nodes_info", **NODES_DEFAULTS))
            with gr.Row():
                c["temperature"] = ui(gr.Slider, 0, MAX_TEMPERATURE, value=0, step=0.05, label=tr("ctl.temperature"))
                c["top_p"] = ui(gr.Slider, 0.05, 1, value=1, step=0.05, label=tr("ctl.top_p"))
            c["typical"] = ui(gr.Checkbox, value=False, label=tr("ctl.typical"), info=tr("ctl.typical_info"),
                              elem_id="typical")
            c["oracle_a"] = ui(gr.Slider, 0, 1, value=ORACLE_A, step=0.05, label=tr("ctl.oracle_a"),
                               info=tr("ctl.oracle_a_info"), visible=c["method"].value == "oracle", elem_id="oracle-a")
            with gr.Row():
                top = backend.limits.max_new_tokens
                c["max_new_tokens"] = ui(gr.Slider, 1, top, value=min(96, top), step=1, label=tr("ctl.max_new_tokens"))
                c["seed"] = ui(gr.Number, 0, precision=0, minimum=0, label=tr("ctl.seed"))
            c["model"] = ui(gr.Dropdown, list(backend.models), value=backend.models[0], label=tr("ctl.model"))
    return c


def plots() -> list[gr.Plot]:
    """The four live charts, empty until a run starts."""
    empty = charts.all_figures({})
    with gr.Row():
        a, b = gr.Plot(empty[0], show_label=False), gr.Plot(empty[1], show_label=False)
    with gr.Row():
        c, d = gr.Plot(empty[2], show_label=False), gr.Plot(empty[3], show_label=False)
    return [a, b, c, d]


def legend(ui: Page) -> gr.HTML:
    return ui(gr.HTML, value=Localized(render.legend_html))


def dataframe(ui: Page, key: str, **kwargs: Any) -> gr.Dataframe:
    """An empty table whose column names follow the language."""
    return ui(gr.Dataframe, headers=Localized(lambda lang: render.headers(key, lang)), interactive=False, wrap=True,
              **kwargs)


def why_box(ui: Page, name: str) -> tuple[gr.Dropdown, gr.HTML]:
    """The Why panel: a picker of the round's checked guesses, and the panel (elem ids NAME-why-node, NAME-why)."""
    with ui(gr.Accordion, label=tr("why.title"), open=True):
        node = ui(gr.Dropdown, [], label=tr("why.pick"), elem_id=f"{name}-why-node")
        return node, gr.HTML(elem_id=f"{name}-why")


def production_box(ui: Page, key: str, elem_id: str) -> gr.Markdown:
    with ui(gr.Accordion, label=tr(key), open=False):
        return gr.Markdown(elem_id=elem_id)


SETTINGS = ("prompt", "method", "k", "temperature", "top_p", "max_new_tokens", "seed", "model")


def stopped(language: str) -> str:
    return i18n.text("status.stop_pressed", i18n.code(language))


def live_tab(ui: Page, backend: EngineBackend, c: dict, cache: gr.State, language: gr.Radio) -> dict:
    """The live run; returns the components the language switch and the calculator read or redraw."""
    last_run, live_base, deployed = gr.State([]), gr.State(None), gr.State(None)  # deployed: the saved trace
    with gr.Row():
        run = ui(gr.Button, value=tr("live.run"), variant="primary", elem_id="run-button", scale=2)
        stop = ui(gr.Button, value=tr("live.stop"), variant="stop", scale=1)
        with_baseline = ui(gr.Checkbox, True, scale=2, label=tr("live.with_baseline"))
    status = gr.Markdown("", elem_id="run-status")
    legend(ui)
    stream = gr.HTML(render.stream_html([]), elem_id="run-stream")
    lossless, formula = gr.Markdown(elem_id="lossless"), gr.Markdown(elem_id="formula")
    with ui(gr.Accordion, label=tr("live.plain_text"), open=False):
        text = gr.Textbox(show_label=False, lines=6, buttons=["copy"])
    figures = plots()
    with ui(gr.Accordion, label=tr("live.inspector"), open=True):
        pick = ui(gr.Number, 1, precision=0, minimum=1, label=tr("live.pick"))
        tree = gr.HTML()
        tokens = dataframe(ui, "headers.tokens")
        why_node, why_panel = why_box(ui, "live")
    with ui(gr.Accordion, label=tr("live.all_rounds"), open=False):
        table = dataframe(ui, "headers.rounds", max_height=400)
    outputs = [status, stream, text, *figures, table, pick, tree, tokens, lossless, formula, last_run, live_base, cache,
               why_node, why_panel]
    saved = ui(gr.File, label=tr("live.trace_file"), interactive=False, elem_id="run-trace")
    event = run.click(zerogpu.gpu(in_status(functools.partial(run_single, backend), len(outputs)), duration=60),
                      [c[n] for n in SETTINGS] + [with_baseline, cache, language, c["nodes"], c["typical"],
                                                  c["oracle_a"]], outputs,
                      **MODEL)
    deploy = production_box(ui, "live.production", "run-production")
    event.then(in_status(functools.partial(save_single, backend), 3, None),
               [last_run] + trace_settings(c) + [language, c["typical"]], [saved, deploy, deployed], **UI)
    stop.click(None, None, None, cancels=[event], queue=False, **UI).then(stopped, language, status, queue=False, **UI)
    pick.input(inspect_round, [last_run, pick, language], [tree, tokens, why_node, why_panel], queue=False, **UI)
    why_node.input(in_status(inspect_why, 2, None), [last_run, pick, why_node, language], [why_node, why_panel],
                   queue=False, **UI)
    language.change(inspect_round, [last_run, pick, language, why_node], [tree, tokens, why_node, why_panel],
                    queue=False, **UI)  # the inspector in the new language, on the same round and guess
    return dict(event=event, rounds=last_run, base=live_base, stream=stream, figures=figures, table=table,
                status=status, lossless=lossless, formula=formula, deploy=deploy, deployed=deployed)


def columns_view(ui: Page, name: str) -> tuple:
    """What side by side and replay both show: a status line, the legend, one column per run, the
    summary table and the charts (elem ids NAME-status, NAME-summary)."""
    status = gr.Markdown(elem_id=f"{name}-status")
    legend(ui)
    with gr.Row(equal_height=False):
        columns = [gr.HTML(elem_classes=["sv-column"], visible=n < 2) for n in range(MAX_COLUMNS)]
    summary = dataframe(ui, "headers.summary", label=tr("compare.summary"), elem_id=f"{name}-summary")
    return status, columns, summary, plots()


def compare_tab(ui: Page, backend: EngineBackend, c: dict, cache: gr.State, language: gr.Radio) -> dict:
    names = list(backend.names())
    first = [m for m in ("baseline", "ngram") if m in names]
    chosen = ui(gr.CheckboxGroup, names, value=first, label=tr("compare.methods", most=MAX_COLUMNS),
                elem_id="compare-methods")
    ticked = gr.State(first)  # the last choice within MAX_COLUMNS
    with gr.Row():
        run = ui(gr.Button, value=tr("compare.run"), variant="primary", elem_id="compare-button", scale=2)
        stop = ui(gr.Button, value=tr("live.stop"), variant="stop", scale=1)
    status, columns, summary, figures = columns_view(ui, "compare")
    inputs = [c["prompt"], chosen] + trace_settings(c)[1:]  # the settings after the prompt
    runs, deployed = gr.State({}), gr.State(None)  # deployed: the saved trace
    saved = ui(gr.File, label=tr("compare.trace_file"), interactive=False, elem_id="compare-trace")
    outputs = [status, *columns, summary, *figures, runs, cache]
    event = run.click(zerogpu.gpu(in_status(functools.partial(run_compare, backend), len(outputs)), duration=120),
                      inputs + [cache, language, c["nodes"], c["typical"], c["oracle_a"]], outputs, **MODEL)
    chosen.input(limit_methods, [chosen, ticked, language], [chosen, status, ticked], queue=False, **UI)
    deploy = production_box(ui, "compare.production", "compare-production")
    event.then(in_status(functools.partial(trace_file, backend), 3, None),
               [runs] + trace_settings(c) + [language, c["typical"]], [saved, deploy, deployed], **UI)
    stop.click(None, None, None, cancels=[event], queue=False, **UI).then(stopped, language, status, queue=False, **UI)
    return dict(event=event, chosen=chosen, runs=runs, columns=columns, summary=summary, figures=figures,
                status=status, deploy=deploy, deployed=deployed)


def paper_tree(method: str) -> tuple:
    """One click to the tree size of the papers (this module's GPU default): the method's own, or EAGLE's."""
    method = method if method in TREE_METHODS else "eagle"
    return gr.update(value=method), gr.update(value=TREE_NODES[method]["cuda"])


def step_tab(ui: Page, backend: EngineBackend, c: dict, language: gr.Radio) -> dict:
    state = gr.State(None)
    ui(gr.Markdown, value=tr("step.intro"))
    if on_cpu():  # where the tree sizes default small, say so, and offer the papers' size
        with gr.Row():
            ui(gr.Markdown, value=tr("step.cpu_trees", **NODES_DEFAULTS), elem_id="step-cpu-trees")
            bigger = ui(gr.Button, value=tr("step.paper_tree"), scale=0, min_width=220, elem_id="step-paper-tree")
        bigger.click(paper_tree, c["method"], [c["method"], c["nodes"]], queue=False, **UI)
    with gr.Row():
        prepare = ui(gr.Button, value=tr("step.prepare"), variant="primary", elem_id="step-prepare")
        back, forward = ui(gr.Button, value=tr("step.back")), ui(gr.Button, value=tr("step.next"), elem_id="step-next")
        first, last = ui(gr.Button, value=tr("step.first")), ui(gr.Button, value=tr("step.last"))
    status = gr.Markdown()
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            stream = gr.HTML(render.stream_html([], i18n.text("step.press_prepare")))
        with gr.Column(scale=2):
            narration = gr.Markdown(elem_id="step-narration")
    tree = gr.HTML()
    tokens = dataframe(ui, "headers.tokens")
    why_node, why_panel = why_box(ui, "step")
    outputs = [status, stream, narration, tree, tokens, why_node, why_panel, state]
    why_node.input(in_status(step_why, 3, None), [state, why_node, language], [why_node, why_panel, state],
                   queue=False, **UI)
    prepare.click(zerogpu.gpu(in_status(functools.partial(step_prepare, backend), len(outputs)), duration=30),
                  [c[n] for n in SETTINGS] + [language, c["nodes"], c["typical"], c["oracle_a"]], outputs, **MODEL)
    for button, delta in ((back, -1), (forward, 1), (first, -MAX_NEW_TOKENS), (last, MAX_NEW_TOKENS)):
        button.click(in_status(functools.partial(step_move, delta=delta), len(outputs)), [state, language], outputs,
                     **UI)
    return dict(state=state, view=outputs[:-1])


def trace_settings(c: dict) -> list:
    """The controls a trace records, in trace_file's order."""
    return [c[n] for n in ("prompt", "k", "temperature", "top_p", "max_new_tokens", "seed", "model")]


def replay_tab(ui: Page, language: gr.Radio) -> dict:
    ui(gr.Markdown, value=tr("replay.intro"))
    with gr.Row():
        upload = ui(gr.File, label=tr("replay.upload"), file_types=[".json"], type="filepath", scale=2)
        with gr.Column(scale=2):
            names = demo_traces()
            demo = ui(gr.Dropdown, names, value=names[0] if names else None, label=tr("replay.demo"),
                      elem_id="replay-demo")
            speed = ui(gr.Slider, 0, 10, value=1, step=0.25, label=tr("replay.speed"))
            play = ui(gr.Button, value=tr("replay.play"), variant="primary", elem_id="replay-button")
    status, columns, summary, figures = columns_view(ui, "replay")
    runs, replayed = gr.State({}), gr.State(None)  # the replayed trace's rounds, and the trace
    deploy = production_box(ui, "replay.production", "replay-production")
    ui(gr.Markdown, value=tr("replay.step_heading"))
    with gr.Row():
        label = ui(gr.Dropdown, [], label=tr("replay.run"), scale=2, elem_id="replay-run")
        start = ui(gr.Button, value=tr("replay.step"), elem_id="replay-step")
        back, forward = ui(gr.Button, value=tr("step.back")), ui(gr.Button, value=tr("step.next"), elem_id="replay-next")
    step_status = gr.Markdown()
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            stream = gr.HTML()
        with gr.Column(scale=2):
            narration = gr.Markdown(elem_id="replay-narration")
    tree = gr.HTML(elem_id="replay-tree")
    tokens = dataframe(ui, "headers.tokens")
    why_node, why_panel = why_box(ui, "replay")
    state = gr.State(None)
    why_node.input(in_status(step_why, 3, None), [state, why_node, language], [why_node, why_panel, state],
                   queue=False, **UI)
    outputs = [status, *columns, summary, *figures, runs, label, deploy, replayed]
    event = play.click(in_status(replay, len(outputs)), [upload, demo, speed, language], outputs, **UI)
    replay_outputs = [step_status, stream, narration, tree, tokens, why_node, why_panel, state]
    step = in_status(replay_step, len(replay_outputs))
    event.success(step, [runs, label, language], replay_outputs, **UI)
    start.click(step, [runs, label, language], replay_outputs, **UI)
    for button, delta in ((back, -1), (forward, 1)):
        button.click(in_status(functools.partial(step_move, delta=delta), len(replay_outputs)), [state, language],
                     replay_outputs, **UI)
    return dict(event=event, runs=runs, trace=replayed, columns=columns, summary=summary, figures=figures,
                state=state, view=replay_outputs[:-1], status=status, deploy=deploy)


def explain_tab(ui: Page) -> None:
    """The explainer for a class (specviz/howto.py): the causal mask and its diagrams, the rejection rule, the
    symbols and the speedup, the measured verify costs and their chart, the methods; the switch redraws each."""
    from specviz import howto

    ui(gr.Markdown, value=Localized(functools.partial(howto.section, "mask")), elem_id="howto-mask")
    ui(gr.HTML, value=Localized(howto.mask_figures), elem_id="howto-figures")
    for part in ("exact", "symbols", "cpu"):
        ui(gr.Markdown, value=Localized(functools.partial(howto.section, part)), elem_id=f"howto-{part}")
    ui(gr.Plot, value=Localized(howto.verify_cost_figure), show_label=False, elem_id="howto-chart")
    ui(gr.Markdown, value=Localized(functools.partial(howto.section, "methods")), elem_id="howto-methods")


def calculator_tab(ui: Page, language: gr.Radio) -> dict:
    """Speedup and return on investment from c, a, k, the verify share and the extra memory; every run
    that finishes adds itself as a source and prefills the inputs (still editable)."""
    ui(gr.Markdown, value=tr("calc.intro"))
    sources = gr.State({})
    with gr.Row():
        source = ui(gr.Dropdown, [], label=tr("calc.source"), scale=3, elem_id="calc-source")
        note = gr.Markdown(i18n.text("calc.no_run"), elem_id="calc-note")
    start = explain.CostInputs()
    with gr.Row():
        cost = ui(gr.Slider, 0, 1, value=start.c, step=0.005, label=tr("calc.field.c"), elem_id="calc-c")
        acceptance = ui(gr.Slider, 0, 0.99, value=start.a, step=0.01, label=tr("calc.field.a"), elem_id="calc-a")
        k = ui(gr.Slider, 1, MAX_K, value=start.k, step=1, label=tr("calc.field.k"), elem_id="calc-k")
    with gr.Row():
        share = ui(gr.Slider, 0.05, 1, value=start.verify_share, step=0.01, label=tr("calc.field.verify_share"))
        extra = ui(gr.Number, start.extra_mb, minimum=0, label=tr("calc.field.extra_mb"), elem_id="calc-extra")
        target = ui(gr.Number, start.target_mb, minimum=1, label=tr("calc.field.target_mb"))
    with gr.Row():
        v_base = ui(gr.Slider, 1, 6, value=start.verify_base, step=0.05, label=tr("calc.field.verify_base"),
                    elem_id="calc-verify-base")
        v_slope = ui(gr.Slider, 0, 0.3, value=start.verify_slope, step=0.005, label=tr("calc.field.verify_slope"),
                     elem_id="calc-verify-slope")
    values = [cost, acceptance, k, share, extra, target, v_base, v_slope]
    result = gr.Markdown(explain.calculator_markdown(start), elem_id="calc-result")
    plot = gr.Plot(charts.speedup_map(start), show_label=False, elem_id="calc-plot")
    for field in values:
        field.input(calculator, values + [language], [result, plot], queue=False, **UI)
    source.change(prefill, [sources, source, *values, language], [*values, note, result, plot], queue=False, **UI)
    return dict(sources=sources, source=source, values=values, result=result, plot=plot, note=note)


def switch_language(ui: Page, choice: str, method: str, live_rounds, live_base, compare_runs, compare_chosen,
                    step_state, replay_runs, replay_state, replayed: Optional[trace.Trace],
                    live_trace: Optional[trace.Trace], compare_trace: Optional[trace.Trace], sources, source,
                    *calc_values) -> tuple:
    """Everything on the page in the chosen language: the registered texts, then the views that hold a
    run (redrawn from their state), then the calculator, then the status lines of the live and side-by-side
    runs, then their production snippets (from the traces they were written from). Side by side redraws the
    ticked methods that ran."""
    lang = i18n.code(choice)
    live_rounds = live_rounds or []

    def runs_view(runs: Optional[dict], chosen: Optional[list] = None) -> tuple:
        runs = runs or {}
        columns = [m for m in chosen or [] if m in runs] or list(runs)
        columns = columns[:MAX_COLUMNS] or ["", ""]
        base = runs.get("baseline")
        if not runs:
            return (*[gr.skip()] * MAX_COLUMNS, render.table("headers.summary", [], lang), *charts.all_figures({}, None, lang))
        return compare_view(columns, runs, base, greedy_run(next(iter(runs.values()))), lang)

    live = (render.stream_html(live_rounds, lang=lang),
            *charts.all_figures({live_rounds[0].method: live_rounds} if live_rounds else {}, live_base, lang),
            render.table("headers.rounds", render.round_rows(live_rounds, lang), lang),
            *live_checks(live_rounds, live_base, lang))
    return (*ui.updates(lang), explain.method_text(method, lang), *live, *runs_view(compare_runs, compare_chosen),
            *step_view(step_state, "step.press_prepare", lang), *runs_view(replay_runs),
            *step_view(replay_state, "stream.empty", lang),
            trace_heading(replayed, lang) if replayed else gr.skip(),
            production_markdown(replayed, lang) if replayed else gr.skip(),
            source_note(sources, source, lang), *calculator(*calc_values, choice),
            live_status(live_rounds, live_base, True, lang) if live_rounds else gr.skip(),
            compare_done(compare_runs, lang) if compare_runs else gr.skip(),
            *(production_markdown(t, lang) if t else gr.skip() for t in (live_trace, compare_trace)))


# Charts drawn while their tab was hidden (a language switch, a run in another tab) have the wrong width
# until the window resizes: a resize event after each tab change lets plotly lay them out again.
RESIZE_CHARTS = "() => { setTimeout(() => window.dispatchEvent(new Event('resize')), 50); }"


def browser_language() -> str:
    """JavaScript run on page load: 中文 when the browser prefers Chinese, else English."""
    return "() => (navigator.language || '').toLowerCase().startsWith('zh') ? '中文' : 'English'"


def build_demo(backend: Optional[EngineBackend] = None) -> gr.Blocks:
    """The whole page. `backend` defaults to the real engine on the embedded model (loaded lazily), with
    the limits and models of the environment (SPECVIZ_PUBLIC, SPECVIZ_MODELS, SPECVIZ_QUEUE_SIZE)."""
    if backend is None:
        limits = limits_from_env()
        backend = EngineBackend(model_choices(limits.public), limits)
    ui = Page()
    with gr.Blocks(title="specviz: speculative decoding, round by round") as demo:
        cache = gr.State({})  # this session's baseline runs, reused for speedup and losslessness
        with gr.Row():
            ui(gr.Markdown, value=tr("intro"), elem_id="intro")
            language = gr.Radio(list(i18n.LANGUAGES), value="English", label="Language / 语言", scale=0,
                                min_width=160, elem_id="language")
        c = controls(ui, backend)
        with gr.Tabs() as tabs:
            with ui(gr.Tab, label=tr("tab.live")):
                live = live_tab(ui, backend, c, cache, language)
            with ui(gr.Tab, label=tr("tab.compare")):
                side = compare_tab(ui, backend, c, cache, language)
            with ui(gr.Tab, label=tr("tab.step")):
                step = step_tab(ui, backend, c, language)
            with ui(gr.Tab, label=tr("tab.replay")):
                replayed = replay_tab(ui, language)
            with ui(gr.Tab, label=tr("tab.calc")):
                calc = calculator_tab(ui, language)
            with ui(gr.Tab, label=tr("tab.sweep")):
                sweep_tab.build(ui, backend, c, language, validate)
            with ui(gr.Tab, label=tr("tab.engine")):
                production_engine.build(ui, backend, c, language, sys.modules[__name__])
            with ui(gr.Tab, label=tr("tab.explain")):
                explain_tab(ui)
            with ui(gr.Tab, label=tr("tab.api")):
                ui(gr.Markdown, value=tr("api.text", client=api_client_target(), max_new=backend.limits.max_new_tokens,
                                         max_t=MAX_TEMPERATURE, max_k=MAX_K, max_nodes=MAX_NODES,
                                         budget=f"{backend.limits.time_budget_s:g}"), elem_id="api-text")
        wire_calculator(calc, live, side, replayed, c, language)
        wire_language(ui, language, c, live, side, step, replayed, calc)
        tabs.change(None, None, None, js=RESIZE_CHARTS, **UI)
        demo.load(None, None, language, js=browser_language(), **UI)
        c["method"].change(lambda name, choice: (explain.method_text(name, i18n.code(choice)),
                                                 gr.update(visible=name == "oracle")),
                           [c["method"], language], [c["method_info"], c["oracle_a"]], queue=False, **UI)
        refresh = zerogpu.gpu(functools.partial(refresh_methods, backend), duration=20)
        demo.load(refresh, [c["model"], language], [c["method"], side["chosen"]], **MODEL)
        c["model"].change(refresh, [c["model"], language], [c["method"], side["chosen"]], **MODEL)

        api = zerogpu.gpu(functools.partial(api_result, backend), duration=60)  # gr.api reads speculate's signature

        def speculate(prompt: str, method: str = "ngram", max_new_tokens: int = 64, temperature: float = 0.0,
                      k: int = 4, top_p: float = 1.0, seed: int = 0, nodes: int = 0, typical: bool = False,
                      baseline: bool = False, a: float = ORACLE_A) -> dict:
            """Generate with one method; returns {"text", "rounds", "metrics", "method", "model"}. nodes: tree
            size for eagle, medusa and draft (0 = this device's default; 1 = the draft's chain). typical: Medusa's
            typical acceptance when sampling (lossy). baseline: also run plain decoding, so metrics.speedup is
            measured (null otherwise) and "baseline" and "identical_to_baseline" are added. a: the oracle's chance
            of a right guess (method "oracle", a teaching tool)."""
            return api(prompt, method, max_new_tokens, temperature, k, top_p, seed, nodes, typical, baseline, a)

        gr.api(speculate, api_name="speculate", concurrency_id="model", concurrency_limit=1)
    demo.queue(max_size=backend.limits.queue_size, default_concurrency_limit=4)
    return demo


def wire_language(ui: Page, language: gr.Radio, c: dict, live: dict, side: dict, step: dict, replayed: dict,
                  calc: dict) -> None:
    """The switch: every registered text, and the views redrawn from the states that hold their runs."""
    states = [c["method"], live["rounds"], live["base"], side["runs"], side["chosen"], step["state"],
              replayed["runs"], replayed["state"], replayed["trace"], live["deployed"], side["deployed"],
              calc["sources"], calc["source"], *calc["values"]]
    views = [c["method_info"], live["stream"], *live["figures"], live["table"], live["lossless"], live["formula"],
             *side["columns"], side["summary"], *side["figures"], *step["view"], *replayed["columns"],
             replayed["summary"], *replayed["figures"], *replayed["view"], replayed["status"], replayed["deploy"],
             calc["note"], calc["result"], calc["plot"], live["status"], side["status"], live["deploy"], side["deploy"]]
    language.change(functools.partial(switch_language, ui), [language, *states], ui.components() + views,
                    queue=False, **UI)


def wire_calculator(calc: dict, live: dict, side: dict, replayed: dict, c: dict, language: gr.Radio) -> None:
    """Every finished run (live, side by side, replayed) becomes a calculator source and prefills it."""
    outputs = [calc["sources"], calc["source"]]
    live["event"].then(lambda sources, rounds, base, model, choice: note_runs(
        sources, live_runs(rounds, base), model, "live", choice),
        [calc["sources"], live["rounds"], live["base"], c["model"], language], outputs, **UI)
    side["event"].then(lambda sources, runs, model, choice: note_runs(sources, runs, model, "compare", choice),
                       [calc["sources"], side["runs"], c["model"], language], outputs, **UI)
    replayed["event"].then(lambda sources, runs, t, choice: note_runs(sources, runs, t.model if t else None,
                                                                      "replay", choice),
                           [calc["sources"], replayed["runs"], replayed["trace"], language], outputs, **UI)


LAUNCH = dict(show_error=True)  # host and port: GRADIO_SERVER_NAME / GRADIO_SERVER_PORT


def start_in_background(backend: Optional[EngineBackend] = None, port: Optional[int] = None) -> tuple[gr.Blocks, str]:
    """Launch without blocking (tests, the screenshot script); returns the demo and its local URL.
    Call demo.close() when done."""
    demo = build_demo(backend)
    _, url, _ = demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=port, quiet=True,
                            **LAUNCH)
    return demo, url


if __name__ == "__main__":
    limits = limits_from_env()
    engine = EngineBackend(model_choices(limits.public), limits)
    print(f"[specviz] loading {engine.models[0]} ({'public mode, ' if limits.public else ''}at most "
          f"{limits.max_new_tokens} tokens and {limits.time_budget_s:g} s per run) ...", flush=True)
    zerogpu.prepare()  # on a ZeroGPU Space: import spaces before a model loads (it patches torch)
    load_model(engine.models[0])
    build_demo(engine).launch(**LAUNCH)
