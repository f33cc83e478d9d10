"""The Sweep tab: one method over a range of k (chain length) or tree sizes on the page's prompt, measured against
the formula's prediction, beside the verify cost c_v(n) timed on this machine (specviz/sweep.py, docs/sweep.md).

The handler streams: the status line first says what it is timing or running, then each point's row is added to
the table and the figure is redrawn as the points arrive. A sweep on a public Space must not hold the model for
long (every model listener shares one queue slot), so it is capped from the server's Limits: at most MAX_POINTS
values, (values + 1) * max_new_tokens <= TOKENS_PER_RUN * limits.max_new_tokens generated tokens, and
TIME_PER_RUN * limits.time_budget_s seconds in all (then it stops with the points it has).
"""
from __future__ import annotations

import contextlib
import functools
import math
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

import gradio as gr

from specviz import i18n, render, zerogpu
from specviz.events import Round
from specviz.methods import TREE_NODES
from specviz.sweep import Sweep, parse_sweep, sweep_figure, sweep_row
from specviz.ui import MODEL, UI, Localized, Page, error, in_status, shown, tr, user_errors

MAX_POINTS = 12  # values in one sweep
TOKENS_PER_RUN = 8  # a sweep generates at most this many runs' worth of limits.max_new_tokens (baseline included)
TIME_PER_RUN = 2  # and runs at most this many runs' worth of limits.time_budget_s, verify timing included
WARMUP_TOKENS = 8  # one short run of the method before the measured ones: loading its weights is not timed
STATUS_EVERY_S = 1.0  # the status line's token count refreshes at most this often within one run
TREE_ONLY = ("eagle", "medusa")  # methods whose size is a tree's node count: they sweep nodes, never k
DEFAULT_RANGES = {"k": "1..8", "nodes": "1,2,4,8,16,32,48"}

Validate = Callable[..., Any]  # app.validate: raw page values -> app.Request, or gr.Error


@dataclass(frozen=True)
class Plan:
    """A checked sweep: the values, one request per value, the baseline's request, the figure's title."""

    sweep: Sweep
    requests: dict[int, Any]  # value -> app.Request
    baseline: Any
    title: str
    seconds: float  # the whole sweep may take this long (math.inf: no limit)


def parse_range(param: str, spec: Any, lang: str) -> Sweep:
    """The range box ("1..8", "1,2,4,8", or with the CLI's "k=" prefix) -> Sweep, or gr.Error saying why."""
    if not isinstance(spec, str) or not spec.strip():
        raise error("sweep.err.empty", lang)
    body = spec.strip()
    if body.startswith(f"{param}="):
        body = body[len(param) + 1:]
    try:
        sweep = parse_sweep(f"{param}={body}")
    except ValueError as err:  # its message starts with the CLI's "--sweep 'k=...': "
        raise error("sweep.err.range", lang, value=shown(spec), detail=str(err).split(": ", 1)[-1]) from None
    if len(sweep.values) > MAX_POINTS:
        raise error("sweep.err.points", lang, n=len(sweep.values), most=MAX_POINTS)
    return sweep


def check_method(param: str, method: str, lang: str) -> None:
    """k is swept for chain methods, nodes for tree methods (the draft model does both)."""
    if method == "baseline":
        raise error("sweep.err.baseline", lang)
    if param == "nodes" and method not in TREE_NODES:
        raise error("sweep.err.nodes", lang, method=method, methods=", ".join(TREE_NODES))
    if param == "k" and method in TREE_ONLY:
        raise error("sweep.err.k", lang, method=method)


def plan(backend: Any, validate: Validate, param: str, spec: Any, prompt: Any, method: Any, k: Any,
         settings: dict[str, Any], lang: str) -> Plan:
    """Every check before anything runs: the range, the method, the caps, then each value through the app's own
    validation (so k and nodes keep the page's bounds and messages)."""
    if param not in DEFAULT_RANGES:
        raise error("sweep.err.range", lang, value=shown(param), detail=", ".join(DEFAULT_RANGES))
    sweep = parse_range(param, spec, lang)
    request = functools.partial(validate, backend, prompt, method, lang=lang, **settings)
    base = request(k=k)
    check_method(param, base.method, lang)
    limits, tokens = backend.limits, base.run.max_new_tokens
    cap, total = TOKENS_PER_RUN * limits.max_new_tokens, (len(sweep.values) + 1) * tokens
    if total > cap:
        raise error("sweep.err.tokens", lang, n=len(sweep.values), tokens=tokens, total=total, cap=cap,
                    fit=cap // (len(sweep.values) + 1))
    chain = 1 if base.method == "draft" else 0  # nodes = 1: the draft model's chain of up to k guesses
    requests = {v: request(k=v, nodes=chain) if param == "k" else request(k=k, nodes=v) for v in sweep.values}
    title = base.method if param == "k" else f"{base.method}, k = {base.run.k}"
    seconds = TIME_PER_RUN * limits.time_budget_s or math.inf
    return Plan(sweep, requests, base.baseline(), title, seconds)


def measure(backend: Any, req: Any, deadline: float, lang: str) -> Iterator[list[Round]]:
    """One run as a growing list of rounds (about once a second, and at its end), cut at the sweep's deadline."""
    if deadline < math.inf:
        left = max(deadline - time.monotonic(), 1e-3)
        req = replace(req, run=replace(req.run, time_budget_s=min(req.run.time_budget_s or left, left)))
    rounds: list[Round] = []
    shown_at = time.monotonic()
    with user_errors(lang), contextlib.closing(backend.stream(req)) as stream:
        for r in stream:
            rounds.append(r)
            if time.monotonic() - shown_at >= STATUS_EVERY_S:
                shown_at = time.monotonic()
                yield rounds
    yield rounds


def table(state: dict, lang: str) -> dict:
    """One row per measured value, rounded for reading."""
    headers = [i18n.text(f"sweep.axis.{state['param']}", lang)] + render.headers("headers.sweep", lang)
    same = {True: "✓", False: "✗", None: "–"}

    def num(x: Any) -> Any:
        return "–" if x is None else round(x, 3 if abs(x) < 0.1 else 2)

    keys = ("tau", "a_path", "depth", "tokens_per_s", "speedup", "predicted_tau", "predicted_tau_as_guessed",
            "predicted_speedup", "predicted_speedup_as_guessed", "c_v", "c")
    rows = [[r["value"], *(num(r[key]) for key in keys), same[r["identical_to_baseline"]]] for r in state["rows"]]
    return {"headers": headers, "data": rows}


def figure(state: dict, lang: str):
    """The three panels of sweep_figure; before the first point, its x axes still name what is swept."""
    fig = sweep_figure(state["rows"], state["costs"], lang, state["title"])
    if not state["rows"]:
        for col in (1, 2):
            fig.update_xaxes(title_text=i18n.text(f"sweep.axis.{state['param']}", lang), row=1, col=col)
    return fig


def status(state: dict, lang: str) -> str:
    key, values = state["status"]
    line = i18n.text(key, lang, **values)
    differs = [str(r["value"]) for r in state["rows"] if r["identical_to_baseline"] is False]
    if key != "sweep.status.cost" and differs:
        line += i18n.text("sweep.status.differs", lang, param=state["param"], values=", ".join(differs))
    return line


def view(state: dict, lang: str) -> tuple:
    """The tab's outputs: status line, figure (once c_v is timed), table, and the state the switch redraws from."""
    drawn = figure(state, lang) if state["costs"] else gr.skip()
    return status(state, lang), drawn, table(state, lang), state


def run(backend: Any, validate: Validate, param: Any, spec: Any, prompt: Any, method: Any, k: Any, temperature: Any,
        top_p: Any, max_new_tokens: Any, seed: Any, model: Any, language: str = "English", typical: Any = False,
        oracle_a: Any = 0.8) -> Iterator[tuple]:
    """Stream a sweep: time c_v(n), run the baseline, then each value in order, a row and a redrawn figure after
    each (status messages and rows as in specviz.sweep)."""
    lang = i18n.code(language)
    settings = dict(temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed, model=model,
                    typical=typical, oracle_a=oracle_a)
    p = plan(backend, validate, param, spec, prompt, method, k, settings, lang)
    values, start = p.sweep.values, time.monotonic()
    deadline = start + p.seconds
    sizes = [p.sweep.verify_tokens(v) for v in values]
    state = dict(param=p.sweep.param, title=p.title, rows=[], costs={},
                 status=("sweep.status.cost", dict(sizes=", ".join(map(str, sizes)))))
    yield view(state, lang)
    with user_errors(lang):
        state["costs"] = backend.verify_cost(p.baseline.model, sizes, chain=p.sweep.param == "k")
    first = p.requests[values[0]]
    for _ in measure(backend, replace(first, run=replace(first.run, max_new_tokens=WARMUP_TOKENS)), deadline, lang):
        pass
    total = p.baseline.run.max_new_tokens
    for base in measure(backend, p.baseline, deadline, lang):
        state["status"] = ("sweep.status.baseline", dict(tokens=base[-1].tokens_so_far if base else 0, total=total))
        yield view(state, lang)
    for i, value in enumerate(values):
        if time.monotonic() >= deadline:
            state["status"] = ("sweep.status.budget", dict(seconds=f"{p.seconds:g}", n=i, total=len(values)))
            yield view(state, lang)
            return
        req = p.requests[value]
        for rounds in measure(backend, req, deadline, lang):
            state["status"] = ("sweep.status.point", dict(i=i + 1, n=len(values), param=p.sweep.param, value=value,
                                                          tokens=rounds[-1].tokens_so_far if rounds else 0,
                                                          total=total))
            yield view(state, lang)
        state["rows"] = state["rows"] + [sweep_row(p.sweep, value, [rounds], [base], state["costs"], req.run,
                                                   req.sampling.greedy and not req.sampling.lossy)]
    state["status"] = ("sweep.status.done", dict(n=len(values), seconds=f"{time.monotonic() - start:.0f}",
                                                 tps=f"{state['rows'][0]['baseline_tokens_per_s']:.1f}"))
    yield view(state, lang)


def redraw(state: Any, param: str, language: str) -> tuple:
    """The language switch: the last sweep's status line, figure and table in the new language (before any
    sweep, the empty table's headers)."""
    lang = i18n.code(language)
    if not state:
        return gr.skip(), gr.skip(), table(dict(param=param if param in DEFAULT_RANGES else "k", rows=[]), lang)
    return view(state, lang)[:3]


def param_choices(lang: str) -> list[tuple[str, str]]:
    return [(i18n.text(f"sweep.param.{name}", lang), name) for name in DEFAULT_RANGES]


def follow_method(method: str, param: str) -> tuple:
    """A tree-only method sweeps nodes, a chain-only one k (the draft model keeps the choice): switch the radio
    and its range when the method asks for the other."""
    wanted = "nodes" if method in TREE_ONLY else "k" if method not in TREE_NODES else param
    if wanted == param:
        return gr.skip(), gr.skip()
    return wanted, DEFAULT_RANGES[wanted]


def build(ui: Page, backend: Any, c: dict, language: gr.Radio, validate: Validate) -> dict:
    """The tab's layout and listeners. validate: app.validate (passed in: app.py imports this module)."""
    ui(gr.Markdown, value=tr("sweep.intro"), elem_id="sweep-intro")
    limits = backend.limits
    ui(gr.Markdown, value=tr("sweep.limits", points=MAX_POINTS, tokens=TOKENS_PER_RUN * limits.max_new_tokens,
                             seconds=f"{TIME_PER_RUN * limits.time_budget_s:g}"), elem_id="sweep-limits")
    first = "nodes" if c["method"].value in TREE_ONLY else "k"
    with gr.Row():
        param = ui(gr.Radio, choices=Localized(param_choices), value=first, label=tr("sweep.param"), scale=1,
                   elem_id="sweep-param")
        spec = ui(gr.Textbox, DEFAULT_RANGES[first], label=tr("sweep.range"), info=tr("sweep.range_info"), scale=2,
                  elem_id="sweep-range")
    with gr.Row():
        start = ui(gr.Button, value=tr("sweep.run"), variant="primary", scale=2, elem_id="sweep-button")
        stop = ui(gr.Button, value=tr("live.stop"), variant="stop", scale=1)
    state = gr.State(None)
    line = gr.Markdown(elem_id="sweep-status")
    plot = gr.Plot(show_label=False, elem_id="sweep-plot")
    rows = gr.Dataframe(table(dict(param=first, rows=[]), "en"), interactive=False, wrap=True, elem_id="sweep-table")
    outputs = [line, plot, rows, state]
    inputs = [param, spec] + [c[n] for n in ("prompt", "method", "k", "temperature", "top_p", "max_new_tokens", "seed",
                                             "model")] + [language, c["typical"], c["oracle_a"]]
    handler = in_status(functools.partial(run, backend, validate), len(outputs))
    duration = int(TIME_PER_RUN * limits.time_budget_s) + 30 if limits.time_budget_s else None
    event = start.click(zerogpu.gpu(handler, duration=duration), inputs, outputs, **MODEL)
    stop.click(None, None, None, cancels=[event], queue=False, **UI)
    c["method"].change(follow_method, [c["method"], param], [param, spec], queue=False, **UI)
    param.input(lambda chosen: DEFAULT_RANGES.get(chosen, gr.skip()), param, spec, queue=False, **UI)
    language.change(redraw, [state, param, language], [line, plot, rows], queue=False, **UI)
    return dict(event=event, state=state, status=line, plot=plot, table=rows, param=param, range=spec)
