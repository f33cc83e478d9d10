"""specviz: the Gradio teaching app for speculative decoding.

Layout and one generator handler per view. Every view reads the engine's per-round records
(specviz.events.Round); no decoding logic lives here. Run it with `python app.py`; host and port
come from GRADIO_SERVER_NAME / GRADIO_SERVER_PORT.

API (gradio_client):
    Client(url).predict(prompt, method, max_new_tokens, temperature, api_name="/speculate")
    -> {"text": str, "rounds": [Round.to_dict(), ...], "metrics": summarize(rounds)}
Optional trailing arguments: k, top_p, seed. Invalid values raise gr.Error to the client.

Limits per request (tokens, prompt length, time) and the model allow-list come from Limits;
SPECVIZ_PUBLIC=1 selects the stricter public ones (docs/robustness.md).
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterator, Optional

import gradio as gr
import torch

from specviz import charts, explain, i18n, production, render, trace
from specviz.config import MAX_K, RunConfig, SamplingConfig
from specviz.engine import generate
from specviz.events import Round, summarize
from specviz.methods import METHODS, available_methods
from specviz.models import EMBEDDED, ModelLoadError, load_target
from specviz.presets import PRESETS

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
UI = dict(api_visibility="private")  # page-only listeners: the documented API is /speculate alone
MODEL = dict(concurrency_id="model", concurrency_limit=1, **UI)  # every listener that touches a model


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
        return generate(load_model(req.model), req.method, req.prompt, req.run, req.sampling)


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

def shown(value: Any, limit: int = 60) -> str:
    """A raw value as an error message quotes it: repr, cut short (a message never echoes a whole text)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _as_int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise gr.Error(f"{name} must be a whole number from {low} to {high}, got {shown(value)}")
    try:
        number = float(value)
    except ValueError:
        raise gr.Error(f"{name} must be a whole number from {low} to {high}, got {shown(value)}") from None
    if not number.is_integer() or not low <= number <= high:
        raise gr.Error(f"{name} must be a whole number from {low} to {high}, got {shown(value)}")
    return int(number)


def _as_float(value: Any, name: str, low: float, high: float, low_open: bool = False) -> float:
    bounds = f"{'above' if low_open else 'from'} {low} {'and at most' if low_open else 'to'} {high}"
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise gr.Error(f"{name} must be a number {bounds}, got {shown(value)}") from None
    if isinstance(value, bool) or math.isnan(number) or not low <= number <= high or (low_open and number == low):
        raise gr.Error(f"{name} must be a number {bounds}, got {shown(value)}")
    return number


def validate(backend: EngineBackend, prompt: Any, method: Any, k: Any, temperature: Any, top_p: Any,
             max_new_tokens: Any, seed: Any, model: Any) -> Request:
    """Raw inputs -> a Request, or gr.Error with a message a user can act on.

    The model is checked against the offered choices before anything is loaded."""
    limits = backend.limits
    if not isinstance(prompt, str) or not prompt.strip():
        raise gr.Error("The prompt is empty: type a prompt or pick an example.")
    if len(prompt) > limits.max_prompt_chars:
        raise gr.Error(f"The prompt is {len(prompt)} characters long; the limit is {limits.max_prompt_chars}.")
    if model not in backend.models:
        raise gr.Error(f"Unknown model {shown(model)}; choose one of: {', '.join(backend.models)}.")
    with user_errors():
        methods = backend.methods(model)
    if method not in methods:
        raise gr.Error(f"Unknown method {shown(method)}; choose one of: {', '.join(methods)}.")
    run = RunConfig(max_new_tokens=_as_int(max_new_tokens, "max_new_tokens", 1, limits.max_new_tokens),
                    k=_as_int(k, "k", 1, MAX_K), time_budget_s=limits.time_budget_s)
    sampling = SamplingConfig(temperature=_as_float(temperature, "temperature", 0.0, MAX_TEMPERATURE),
                              top_p=_as_float(top_p, "top_p", 0.0, 1.0, low_open=True),
                              seed=_as_int(seed, "seed", 0, 2**31 - 1))
    return Request(prompt, method, model, replace(run, k_max=max(run.k, run.k_max)), sampling)


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Engine and model errors reach the user as a readable message instead of a broken page.

    Nothing of a failed request survives it: models are read-only, per-run state dies with the run."""
    try:
        yield
    except (ValueError, ModelLoadError) as err:
        raise gr.Error(str(err)) from err
    except (torch.OutOfMemoryError, MemoryError) as err:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        raise gr.Error("The server ran out of memory on this request: ask for fewer tokens or a shorter "
                       "prompt. The next request starts afresh.") from err


def rounds_of(backend: EngineBackend, req: Request) -> Iterator[Round]:
    """The engine's stream, closed when the consumer stops (the stop button, a closed page)."""
    with user_errors(), contextlib.closing(backend.stream(req)) as stream:
        yield from stream


def full_text(rounds: list[Round]) -> str:
    return "".join(r.text for r in rounds)


def acceptance_text(metrics: dict) -> str:
    return f"{metrics['acceptance_rate']:.0%}" if metrics["proposed_tokens"] else "—"


def status_line(label: str, rounds: list[Round], done: bool) -> str:
    if not rounds:
        return f"**{label}**: starting…"
    m, last = summarize(rounds), rounds[-1]
    state = f"done ({last.stop_reason})" if last.finished else ("stopped" if done else "running")
    if last.stop_reason == "time_budget":
        state = "ended early: past the server's time budget (the text so far is correct, only shorter)"
    return (f"**{label}** · {state} · {render.round_summary(last)} · {m['new_tokens']} tokens in "
            f"{m['rounds']} rounds · {m['tokens_per_s']:.1f} tokens/s · acceptance {acceptance_text(m)}")


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


def growing(backend: EngineBackend, req: Request) -> Iterator[list[Round]]:
    """The run's rounds so far, after each new round."""
    rounds: list[Round] = []
    for r in rounds_of(backend, req):
        rounds.append(r)
        yield rounds


def identical_label(rounds: list[Round], base: Optional[list[Round]], greedy: bool) -> str:
    if not base:
        return "—"
    if not greedy:
        return "n/a (sampling)"
    check = render.agreement(rounds, base)
    if check.first_difference is not None:
        return f"no (token {check.first_difference + 1})"
    if check.short and rounds is not base:
        who = "baseline" if check.short == "baseline" else "this run"
        return f"yes ({who} stopped early at {check.compared} tokens: compared the first {check.compared})"
    return "yes"


def speedup_of(rounds: list[Round], base: Optional[list[Round]]) -> Optional[float]:
    base_tps = summarize(base)["tokens_per_s"] if base else None
    return summarize(rounds, base_tps)["speedup"] if rounds else None


def inspect_round(rounds: list[Round], number: Any) -> tuple[str, list[list]]:
    """The tree picture and token table of round `number` (1-based; clamped to the run)."""
    if not rounds:
        return "", []
    r = rounds[min(max(int(number or len(rounds)), 1), len(rounds)) - 1]
    return render.tree_svg(r), render.token_rows(r)


# --- live run ---------------------------------------------------------------------------------------

RUN_FIELDS = ("status", "stream", "text", "acceptance", "histogram", "speed", "timeline", "table", "pick",
              "tree", "tokens", "lossless", "formula", "last_run", "cache")  # the live tab's outputs, in order


def single_outputs(req: Request, rounds: list[Round], base: Optional[list[Round]], refresh: bool,
                   final: bool = False, cache: Optional[dict] = None, note: str = "") -> tuple:
    """Values for RUN_FIELDS; gr.skip() where nothing needs sending this time."""
    skip = gr.skip()
    status = note or status_line(req.method, rounds, final)
    speedup = speedup_of(rounds, base) if final and req.method != "baseline" else None
    status += f" · **{speedup:.2f}× the baseline's speed**" if speedup else ""
    head = (status, render.stream_html(rounds))
    if not refresh:
        return head + (skip,) * (len(RUN_FIELDS) - len(head))
    runs = {req.method: rounds}
    tree, tokens = inspect_round(rounds, len(rounds))
    more = (full_text(rounds), *charts.all_figures(runs, base), render.round_rows(rounds),
            gr.Number(value=len(rounds), maximum=len(rounds)),
            tree, tokens)
    if not final:
        return head + more + (skip, skip, rounds, skip)
    greedy = req.sampling.greedy
    lossless = ("*This is the baseline itself.*" if req.method == "baseline"
                else render.lossless_markdown(rounds, base, greedy) if base
                else "*Tick 'compare with the baseline' to check the text against plain decoding.*")
    formula = explain.formula_markdown(rounds, speedup)
    return head + more + (lossless, formula, rounds, cache)


def run_single(backend: EngineBackend, prompt, method, k, temperature, top_p, max_new_tokens, seed, model,
               with_baseline, cache) -> Iterator[tuple]:
    """Stream one method round by round, then (optionally) the baseline for speedup and losslessness."""
    req = validate(backend, prompt, method, k, temperature, top_p, max_new_tokens, seed, model)
    tick, rounds, cache = Throttle(), [], dict(cache or {})
    for rounds in growing(backend, req):
        yield single_outputs(req, rounds, None, tick(force=rounds[-1].finished))
    base = None
    if req.method == "baseline":
        base, cache = rounds, remember(cache, req.baseline_key(), rounds)
    elif with_baseline:
        base = cache.get(req.baseline_key())
        if base is None:
            for base in growing(backend, replace(req, method="baseline")):
                if tick():
                    note = (f"{status_line(req.method, rounds, True)}  \n"
                            f"now the baseline for comparison: {len(base)} tokens…")
                    yield single_outputs(req, rounds, None, False, note=note)
            cache = remember(cache, req.baseline_key(), base)
    yield single_outputs(req, rounds, base, True, final=True, cache=cache)


# --- side by side -----------------------------------------------------------------------------------

def column_html(label: str, rounds: list[Round], state: str) -> str:
    return (f'<div style="font-weight:600;font-size:16px">{label}</div>'
            f'<div style="font-size:12px;color:#6b7280">{state}</div>{render.stream_html(rounds, "waiting…")}')


SUMMARY_HEADERS = ["method", "tau (tokens/round)", "acceptance rate", "tokens/s", "speedup", "identical to baseline"]


def summary_rows(runs: dict[str, list[Round]], base: Optional[list[Round]], greedy: bool) -> list[list]:
    rows = []
    for label, rounds in ({"baseline": base, **runs} if base else runs).items():
        m, speedup = summarize(rounds), speedup_of(rounds, base)
        rows.append([label, round(m["mean_accepted_tokens"], 2), acceptance_text(m),
                     round(m["tokens_per_s"], 1), f"{speedup:.2f}×" if speedup else "—",
                     identical_label(rounds, base, greedy)])
    return rows


def compare_outputs(columns: list[str], runs: dict, base: Optional[list[Round]], status: str,
                    refresh: bool, greedy: bool, cache=None) -> tuple:
    skip = gr.skip()
    cells = [gr.update(value=column_html(m, runs.get(m, []), _column_state(runs.get(m))), visible=True)
             for m in columns]
    cells += [gr.update(value="", visible=False)] * (MAX_COLUMNS - len(cells))
    if not refresh:
        return (status, *cells) + (skip,) * 7
    table = summary_rows({m: runs[m] for m in columns if runs.get(m)}, base, greedy)
    shown = {m: r for m, r in runs.items() if r}
    return (status, *cells, table, *charts.all_figures(shown, base), dict(shown),
            cache if cache is not None else skip)


def _column_state(rounds: Optional[list[Round]]) -> str:
    if not rounds:
        return "waiting…"
    m = summarize(rounds)
    return (f"{m['new_tokens']} tokens · {m['tokens_per_s']:.1f} tok/s · tau {m['mean_accepted_tokens']:.2f} · "
            f"acceptance {acceptance_text(m)}")


def run_compare(backend: EngineBackend, prompt, methods, k, temperature, top_p, max_new_tokens, seed, model,
                cache) -> Iterator[tuple]:
    """Run two to four methods one after another on the same prompt, a fresh baseline first, so
    every speed in the table is measured under the same conditions."""
    methods = list(methods or [])
    if not 2 <= len(methods) <= MAX_COLUMNS:
        raise gr.Error(f"Pick two to {MAX_COLUMNS} methods to compare (you picked {len(methods)}).")
    reqs = [validate(backend, prompt, m, k, temperature, top_p, max_new_tokens, seed, model) for m in methods]
    greedy, tick, runs = reqs[0].sampling.greedy, Throttle(), {}
    base: list[Round] = []
    for base in growing(backend, replace(reqs[0], method="baseline")):
        runs["baseline"] = base
        if tick():
            yield compare_outputs(methods, runs, None, f"running **baseline** (the reference): {len(base)} tokens…",
                                  False, greedy)
    for req in reqs:
        if req.method == "baseline":
            continue
        for rounds in growing(backend, req):
            runs[req.method] = rounds
            yield compare_outputs(methods, runs, base, status_line(req.method, rounds, False),
                                  tick(force=rounds[-1].finished), greedy)
    cache = remember(dict(cache or {}), reqs[0].baseline_key(), base)
    yield compare_outputs(methods, runs, base, "**done**: summary below", True, greedy, cache)


# --- classroom step mode ----------------------------------------------------------------------------

def step_outputs(state: dict) -> tuple:
    rounds, pos = state["rounds"], state["pos"]
    r = rounds[pos]
    status = (f"**{state['label']}**: round **{pos + 1}** of {len(rounds)} · {render.round_summary(r)} · "
              f"{r.tokens_so_far} tokens so far")
    return (status, render.stream_html(rounds[: pos + 1], highlight=pos), render.narrate(r, state["greedy"]),
            render.tree_svg(r), render.token_rows(r), state)


def step_prepare(backend: EngineBackend, prompt, method, k, temperature, top_p, max_new_tokens, seed,
                 model) -> Iterator[tuple]:
    """Run the whole generation once; the rounds are then revealed one per click from session state."""
    req = validate(backend, prompt, method, k, temperature, top_p, max_new_tokens, seed, model)
    skip, tick, rounds = gr.skip(), Throttle(), []
    for rounds in growing(backend, req):
        if tick():
            yield (f"preparing **{req.method}**: {len(rounds)} rounds so far…",) + (skip,) * 5
    yield step_outputs({"rounds": rounds, "pos": 0, "greedy": req.sampling.greedy, "label": req.method})


def step_move(state: Optional[dict], delta: int) -> tuple:
    """Show the round `delta` away from the current one (clamped); a huge delta jumps to an end."""
    if not state or not state.get("rounds"):
        raise gr.Error("Press Prepare first: it runs the generation once, then you step through it.")
    pos = min(max(state["pos"] + delta, 0), len(state["rounds"]) - 1)
    return step_outputs({**state, "pos": pos})


# --- traces: save a run, replay it without a model ---------------------------------------------------

def trace_file(backend: EngineBackend, runs: dict[str, list[Round]], prompt, k, temperature, top_p,
               max_new_tokens, seed, model) -> tuple[Optional[str], str]:
    """The finished run(s) as a trace file to download, and their production configuration; (None, "")
    while there is nothing to save.

    The settings are read from the controls when the run ends, and checked as a run would check them."""
    runs = {label: list(rounds) for label, rounds in (runs or {}).items() if rounds}
    if not runs:
        return None, ""
    req = validate(backend, prompt, next(iter(runs)), k, temperature, top_p, max_new_tokens, seed, model)
    record = trace.Trace(model=req.model, prompt=req.prompt, runs=runs, run=req.run, sampling=req.sampling)
    folder = Path(tempfile.mkdtemp(prefix="specviz-trace-"))
    name = "-".join(runs) + time.strftime("-%Y%m%d-%H%M%S.json", time.gmtime())
    return str(trace.save(record, folder / name)), production_markdown(record)


def production_markdown(t: trace.Trace) -> str:
    """Each speculative run of a trace as vLLM and transformers configuration (the baseline when alone)."""
    labels = [label for label in t.runs if label != "baseline"] or list(t.runs)
    return PRODUCTION_INTRO + "\n\n".join(
        production.markdown(production.deployment(label, t.model, t.run, t.sampling)) for label in labels)


PRODUCTION_INTRO = ("The same settings for a production server (vLLM) and for transformers' `generate()`; "
                    "what has no equivalent is said, not invented.\n\n")


def demo_traces() -> list[str]:
    return sorted(p.stem for p in DEMO_TRACES.glob("*.json")) if DEMO_TRACES.is_dir() else []


def open_trace(upload: Any, demo: Optional[str]) -> trace.Trace:
    """The uploaded trace, else the chosen demo trace; gr.Error saying why one cannot be read."""
    path = getattr(upload, "name", upload) or (DEMO_TRACES / f"{demo}.json" if demo else None)
    if not path:
        raise gr.Error("Upload a trace (.json) or pick a demo trace first.")
    try:
        return trace.load(path)
    except trace.TraceError as err:
        raise gr.Error(f"This trace cannot be replayed: {err}") from err


def trace_heading(t: trace.Trace) -> str:
    s, libs = t.sampling, ", ".join(f"{k} {v}" for k, v in t.versions.items())
    prompt = t.prompt if len(t.prompt) <= 200 else t.prompt[:199] + "…"
    return (f"**Trace** of {', '.join(t.runs)} on `{t.model}` · k {t.run.k} · temperature {s.temperature:g} · "
            f"top-p {s.top_p:g} · seed {s.seed} · {t.run.max_new_tokens} tokens max · recorded {t.created or '?'}"
            f"{' with ' + libs if libs else ''}  \n> {prompt}")


def replay(upload: Any, demo: Optional[str], speed: Any) -> Iterator[tuple]:
    """Replay a trace's runs one after another, as the side-by-side view shows them; no model is loaded.

    speed: 1 = as recorded, 2 = twice as fast, 0 = at once. Ends by handing the rounds to step mode."""
    t = open_trace(upload, demo)
    speed = _as_float(speed, "speed", 0.0, 100.0)
    labels, greedy, tick = list(t.runs)[:MAX_COLUMNS], t.sampling.greedy, Throttle()
    base, shown, head = t.runs.get("baseline"), {}, trace_heading(t)
    for label in labels:
        before = 0.0
        for i, r in enumerate(t.runs[label]):
            if speed > 0:
                time.sleep(min(max(r.elapsed_s - before, 0.0) / speed, MAX_REPLAY_PAUSE_S))
                before = r.elapsed_s
                shown[label] = t.runs[label][: i + 1]
                yield compare_outputs(labels, shown, base, head, tick(), greedy)[:-1] + (gr.skip(), gr.skip())
        shown[label] = t.runs[label]
    final = compare_outputs(labels, shown, base, head, True, greedy)
    yield final[:-1] + (gr.update(choices=labels, value=labels[-1]), production_markdown(t))


def replay_step(runs: Optional[dict], label: Optional[str]) -> tuple:
    """Step mode over one run of the replayed trace, from its first round."""
    if not runs or label not in runs:
        raise gr.Error("Replay a trace first, then pick one of its runs to step through.")
    rounds = runs[label]
    return step_outputs({"rounds": rounds, "pos": 0, "greedy": rounds[0].temperature == 0, "label": label})


# --- API --------------------------------------------------------------------------------------------

def api_result(backend: EngineBackend, prompt: Any, method: Any, max_new_tokens: Any, temperature: Any,
               k: Any, top_p: Any, seed: Any) -> dict:
    model = backend.models[0]
    req = validate(backend, prompt, method, k, temperature, top_p, max_new_tokens, seed, model)
    rounds = list(rounds_of(backend, req))
    if rounds and rounds[-1].stop_reason == "time_budget":
        raise gr.Error(f"The run passed the server's time budget of {req.run.time_budget_s:g} s after "
                       f"{rounds[-1].tokens_so_far} tokens: ask for fewer tokens, or try again later.")
    return {"text": full_text(rounds), "rounds": [r.to_dict() for r in rounds], "metrics": summarize(rounds),
            "method": req.method, "model": req.model}


# --- layout -----------------------------------------------------------------------------------------

API_TEXT = """### Scripts: the `/speculate` endpoint
```python
from gradio_client import Client
client = Client("http://127.0.0.1:7860/")
out = client.predict("Repeat: one two three, one two three,", "ngram", 48, 0.0, api_name="/speculate")
out["text"]                         # the generated text
out["rounds"][0]                    # one record per round: tokens, status, draft_probs, target_probs, ...
out["metrics"]["acceptance_rate"]   # also mean_accepted_tokens, tokens_per_s, rounds, new_tokens, ...
```
Arguments: `prompt`, `method`, `max_new_tokens` (1 to {max_new}), `temperature` (0 to {max_t}); optional
`k` (1 to {max_k}), `top_p` (0 to 1], `seed`. Invalid values raise an error on the client. Requests share
one model and run one at a time from a bounded queue."""


def refresh_methods(backend: EngineBackend, model: str) -> tuple:
    """The methods this model offers (loads the model once; it is cached)."""
    if model not in backend.models:
        raise gr.Error(f"Unknown model {shown(model)}; choose one of: {', '.join(backend.models)}.")
    with user_errors():
        names = backend.methods(model)
    default = "ngram" if "ngram" in names else names[0]
    return (gr.Dropdown(choices=names, value=default),
            gr.CheckboxGroup(choices=names, value=[m for m in ("baseline", default) if m in names]))


def controls(backend: EngineBackend) -> dict[str, gr.components.Component]:
    """The prompt box, its examples and the shared settings, above every tab."""
    c: dict[str, gr.components.Component] = {}
    with gr.Row():
        with gr.Column(scale=3):
            c["prompt"] = gr.Textbox(label="Prompt", lines=5, max_lines=12, elem_id="prompt",
                                     placeholder="Ask something, or pick an example below.")
            prompts = demo_prompts()
            if prompts:
                gr.Examples([[p["prompt"]] for p in prompts], [c["prompt"]], label="Example prompts",
                            example_labels=[f"{p['category']}: {p['prompt'][:48]}…" for p in prompts])
        with gr.Column(scale=2):
            names = list(backend.names())
            c["method"] = gr.Dropdown(names, value="ngram" if "ngram" in names else names[0], label="Method")
            c["method_info"] = gr.Markdown(explain.method_text(c["method"].value))
            c["k"] = gr.Slider(1, MAX_K, value=4, step=1, label="k: speculative tokens per round")
            with gr.Row():
                c["temperature"] = gr.Slider(0, MAX_TEMPERATURE, value=0, step=0.05, label="temperature (0 = greedy)")
                c["top_p"] = gr.Slider(0.05, 1, value=1, step=0.05, label="top-p")
            with gr.Row():
                top = backend.limits.max_new_tokens
                c["max_new_tokens"] = gr.Slider(1, top, value=min(96, top), step=1, label="max new tokens")
                c["seed"] = gr.Number(0, precision=0, minimum=0, label="seed")
            c["model"] = gr.Dropdown(list(backend.models), value=backend.models[0], label="Target model")
    return c


def plots() -> list[gr.Plot]:
    """The four live charts, empty until a run starts."""
    empty = charts.all_figures({})
    with gr.Row():
        a, b = gr.Plot(empty[0], show_label=False), gr.Plot(empty[1], show_label=False)
    with gr.Row():
        c, d = gr.Plot(empty[2], show_label=False), gr.Plot(empty[3], show_label=False)
    return [a, b, c, d]


def live_tab(backend: EngineBackend, c: dict, cache: gr.State) -> gr.HTML:
    last_run = gr.State([])
    with gr.Row():
        run = gr.Button("Run", variant="primary", elem_id="run-button", scale=2)
        stop = gr.Button("Stop", variant="stop", scale=1)
        with_baseline = gr.Checkbox(True, scale=2, label="compare with the baseline (speedup, identical text; "
                                                          "run once per prompt and settings, then reused)")
    status = gr.Markdown("", elem_id="run-status")
    legend = gr.HTML(render.legend_html())
    stream = gr.HTML(render.stream_html([]), elem_id="run-stream")
    lossless, formula = gr.Markdown(elem_id="lossless"), gr.Markdown()
    with gr.Accordion("Plain text", open=False):
        text = gr.Textbox(show_label=False, lines=6, buttons=["copy"])
    figures = plots()
    with gr.Accordion("Round inspector: the candidate tree and every token's probabilities", open=True):
        pick = gr.Number(1, precision=0, minimum=1, label="round to inspect (the newest while a run streams)")
        tree = gr.HTML()
        tokens = gr.Dataframe(headers=render.TOKEN_HEADERS, interactive=False, wrap=True)
    with gr.Accordion("All rounds", open=False):
        table = gr.Dataframe(headers=render.ROUND_HEADERS, interactive=False, wrap=True, max_height=400)
    outputs = [status, stream, text, *figures, table, pick, tree, tokens, lossless, formula, last_run, cache]
    inputs = [c[n] for n in ("prompt", "method", "k", "temperature", "top_p", "max_new_tokens", "seed", "model")]
    saved = gr.File(label="This run as a trace (JSON): download it, replay it in the Replay tab without a model",
                    interactive=False, elem_id="run-trace")
    event = run.click(functools.partial(run_single, backend), inputs + [with_baseline, cache], outputs, **MODEL)
    with gr.Accordion("In production: this run for vLLM and transformers", open=False):
        deploy = gr.Markdown(elem_id="run-production")
    event.then(functools.partial(save_single, backend), [last_run] + trace_settings(c), [saved, deploy], **UI)
    stop.click(lambda: "**stopped**", None, status, cancels=[event], queue=False, **UI)
    pick.input(inspect_round, [last_run, pick], [tree, tokens], queue=False, **UI)
    return legend


def compare_tab(backend: EngineBackend, c: dict, cache: gr.State) -> tuple[gr.CheckboxGroup, gr.HTML]:
    names = list(backend.names())
    chosen = gr.CheckboxGroup(names, value=[m for m in ("baseline", "ngram") if m in names],
                              label=f"Methods (two to {MAX_COLUMNS}; they run one after another)",
                              elem_id="compare-methods")
    with gr.Row():
        run = gr.Button("Run side by side", variant="primary", elem_id="compare-button", scale=2)
        stop = gr.Button("Stop", variant="stop", scale=1)
    status = gr.Markdown(elem_id="compare-status")
    legend = gr.HTML(render.legend_html())
    with gr.Row(equal_height=False):
        columns = [gr.HTML(elem_classes=["sv-column"], visible=n < 2) for n in range(MAX_COLUMNS)]
    summary = gr.Dataframe(headers=SUMMARY_HEADERS, interactive=False, label="Summary", elem_id="compare-summary")
    figures = plots()
    inputs = [c["prompt"], chosen] + [c[n] for n in ("k", "temperature", "top_p", "max_new_tokens", "seed", "model")]
    runs = gr.State({})
    saved = gr.File(label="These runs as a trace (JSON): download it, replay it in the Replay tab without a model",
                    interactive=False, elem_id="compare-trace")
    event = run.click(functools.partial(run_compare, backend), inputs + [cache],
                      [status, *columns, summary, *figures, runs, cache], **MODEL)
    with gr.Accordion("In production: these runs for vLLM and transformers", open=False):
        deploy = gr.Markdown(elem_id="compare-production")
    event.then(functools.partial(trace_file, backend), [runs] + trace_settings(c), [saved, deploy], **UI)
    stop.click(lambda: "**stopped**", None, status, cancels=[event], queue=False, **UI)
    return chosen, legend


def step_tab(backend: EngineBackend, c: dict) -> None:
    state = gr.State(None)
    gr.Markdown("Runs the generation once, then shows it **one round per click** with an account of what "
                "happened and why.")
    with gr.Row():
        prepare = gr.Button("Prepare", variant="primary", elem_id="step-prepare")
        back, forward = gr.Button("◀ previous round"), gr.Button("next round ▶", elem_id="step-next")
        first, last = gr.Button("first round"), gr.Button("last round")
    status = gr.Markdown()
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            stream = gr.HTML(render.stream_html([], "Press Prepare."))
        with gr.Column(scale=2):
            narration = gr.Markdown(elem_id="step-narration")
    tree = gr.HTML()
    tokens = gr.Dataframe(headers=render.TOKEN_HEADERS, interactive=False, wrap=True)
    outputs = [status, stream, narration, tree, tokens, state]
    inputs = [c[n] for n in ("prompt", "method", "k", "temperature", "top_p", "max_new_tokens", "seed", "model")]
    prepare.click(functools.partial(step_prepare, backend), inputs, outputs, **MODEL)
    for button, delta in ((back, -1), (forward, 1), (first, -MAX_NEW_TOKENS), (last, MAX_NEW_TOKENS)):
        button.click(functools.partial(step_move, delta=delta), state, outputs, **UI)


def trace_settings(c: dict) -> list:
    """The controls a trace records, in trace_file's order."""
    return [c[n] for n in ("prompt", "k", "temperature", "top_p", "max_new_tokens", "seed", "model")]


def save_single(backend: EngineBackend, rounds: list[Round], *settings) -> tuple[Optional[str], str]:
    return trace_file(backend, {rounds[0].method: rounds} if rounds else {}, *settings)


def replay_tab() -> gr.HTML:
    gr.Markdown("Replays a saved run (a **trace**: the rounds of a run plus its settings) with the same colours, "
                "trees and charts, **without loading a model**. Save one under a Live or Side-by-side run, "
                "or pick a demo recorded on the embedded model.")
    with gr.Row():
        upload = gr.File(label="trace (.json)", file_types=[".json"], type="filepath", scale=2)
        with gr.Column(scale=2):
            names = demo_traces()
            demo = gr.Dropdown(names, value=names[0] if names else None, label="or a demo trace")
            speed = gr.Slider(0, 10, value=1, step=0.25, label="speed (1 = as recorded, 0 = at once)")
            play = gr.Button("Replay", variant="primary", elem_id="replay-button")
    status = gr.Markdown(elem_id="replay-status")
    legend = gr.HTML(render.legend_html())
    with gr.Row(equal_height=False):
        columns = [gr.HTML(elem_classes=["sv-column"], visible=n < 2) for n in range(MAX_COLUMNS)]
    summary = gr.Dataframe(headers=SUMMARY_HEADERS, interactive=False, label="Summary")
    figures = plots()
    runs = gr.State({})
    with gr.Accordion("In production: the trace's settings for vLLM and transformers", open=False):
        deploy = gr.Markdown(elem_id="replay-production")
    gr.Markdown("### Step through a replayed run, one round per click")
    with gr.Row():
        label = gr.Dropdown([], label="run", scale=2)
        start = gr.Button("Step mode", elem_id="replay-step")
        back, forward = gr.Button("◀ previous round"), gr.Button("next round ▶", elem_id="replay-next")
    step_status = gr.Markdown()
    with gr.Row(equal_height=False):
        with gr.Column(scale=3):
            stream = gr.HTML()
        with gr.Column(scale=2):
            narration = gr.Markdown(elem_id="replay-narration")
    tree = gr.HTML()
    tokens = gr.Dataframe(headers=render.TOKEN_HEADERS, interactive=False, wrap=True)
    state = gr.State(None)
    event = play.click(replay, [upload, demo, speed], [status, *columns, summary, *figures, runs, label, deploy], **UI)
    replay_outputs = [step_status, stream, narration, tree, tokens, state]
    event.success(replay_step, [runs, label], replay_outputs, **UI)
    start.click(replay_step, [runs, label], replay_outputs, **UI)
    for button, delta in ((back, -1), (forward, 1)):
        button.click(functools.partial(step_move, delta=delta), state, replay_outputs, **UI)
    return legend


def language_outputs(choice: str) -> tuple:
    """The switchable texts in the chosen language: the introduction, the tab names, the legends."""
    lang = i18n.LANGUAGES.get(choice, "en")
    legend = render.legend_html(i18n.legend_labels(lang), i18n.text("legend.note", lang))
    return (i18n.text("intro", lang), *(gr.Tab(label=i18n.text(key, lang)) for key in i18n.TABS), legend, legend,
            legend)


def explain_tab() -> None:
    gr.Markdown("### The methods\n\n" + "\n\n".join(explain.method_text(n) for n in explain.METHOD_TEXT))
    gr.Markdown("### How much faster? (Leviathan et al., 2023)\nWith per-token acceptance **a**, **k** guesses "
                "per round and a guess costing **c** target forwards: E[tokens per round] = (1 − a^(k+1)) / "
                "(1 − a), speedup = E / (k·c + 1). Each run fills this in with its measured a, k and c.")
    with gr.Row():
        a = gr.Slider(0, 0.99, value=0.7, step=0.01, label="a: acceptance")
        k = gr.Slider(1, MAX_K, value=4, step=1, label="k: guesses per round")
        cost = gr.Slider(0, 1, value=0.05, step=0.01, label="c: cost of a guess / a target forward")
    result = gr.Markdown(explain.calculator_markdown(0.7, 4, 0.05))
    for slider in (a, k, cost):
        slider.change(explain.calculator_markdown, [a, k, cost], result, queue=False, **UI)


def build_demo(backend: Optional[EngineBackend] = None) -> gr.Blocks:
    """The whole page. `backend` defaults to the real engine on the embedded model (loaded lazily), with
    the limits and models of the environment (SPECVIZ_PUBLIC, SPECVIZ_MODELS, SPECVIZ_QUEUE_SIZE)."""
    if backend is None:
        limits = limits_from_env()
        backend = EngineBackend(model_choices(limits.public), limits)
    with gr.Blocks(title="specviz: speculative decoding, round by round") as demo:
        cache = gr.State({})  # this session's baseline runs, reused for speedup and losslessness
        with gr.Row():
            intro = gr.Markdown(i18n.text("intro"), elem_id="intro")
            language = gr.Radio(list(i18n.LANGUAGES), value="English", label="Language / 语言", scale=0,
                                min_width=160, elem_id="language")
        c = controls(backend)
        with gr.Tabs():
            with gr.Tab(i18n.text("tab.live")) as live:
                live_legend = live_tab(backend, c, cache)
            with gr.Tab(i18n.text("tab.compare")) as side:
                chosen, compare_legend = compare_tab(backend, c, cache)
            with gr.Tab(i18n.text("tab.step")) as step:
                step_tab(backend, c)
            with gr.Tab(i18n.text("tab.replay")) as replayed:
                replay_legend = replay_tab()
            with gr.Tab(i18n.text("tab.explain")) as how:
                explain_tab()
            with gr.Tab(i18n.text("tab.api")) as api:
                gr.Markdown(API_TEXT.format(max_new=backend.limits.max_new_tokens, max_t=MAX_TEMPERATURE, max_k=MAX_K))
        language.change(language_outputs, language, [intro, live, side, step, replayed, how, api, live_legend,
                                                     compare_legend, replay_legend], queue=False, **UI)
        c["method"].change(explain.method_text, c["method"], c["method_info"], queue=False, **UI)
        refresh = functools.partial(refresh_methods, backend)
        demo.load(refresh, c["model"], [c["method"], chosen], **MODEL)
        c["model"].change(refresh, c["model"], [c["method"], chosen], **MODEL)

        def speculate(prompt: str, method: str = "ngram", max_new_tokens: int = 64, temperature: float = 0.0,
                      k: int = 4, top_p: float = 1.0, seed: int = 0) -> dict:
            """Generate with one method; returns {"text", "rounds", "metrics"}."""
            return api_result(backend, prompt, method, max_new_tokens, temperature, k, top_p, seed)

        gr.api(speculate, api_name="speculate", concurrency_id="model", concurrency_limit=1)
    demo.queue(max_size=backend.limits.queue_size, default_concurrency_limit=4)
    return demo


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
    load_model(engine.models[0])
    build_demo(engine).launch(**LAUNCH)
