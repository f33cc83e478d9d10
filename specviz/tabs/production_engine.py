"""The Production engine tab: send the page's prompt and settings to a real inference server (vLLM, SGLang,
llama.cpp; anything with the OpenAI chat API), stream its text, then run the same method in specviz and show both
sides' tau, tokens/s and acceptance by draft position, counted the same way (specviz/serving.py).

Which servers it may call: SPECVIZ_ENGINES (a dropdown); outside public mode also a URL typed in the box. The
handler streams the server's text first, then specviz's run; a server that is down, too slow or refuses ends the
request with the reason in the tab's status line; a server without speculation is a note, and its text still shows.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Iterator, Optional

import gradio as gr

from specviz import charts, i18n, production, render, serving, zerogpu
from specviz.events import Round, summarize
from specviz.serving import EngineError, ServerRun, SpecStats
from specviz.ui import MODEL, UI, Localized, Page, error, in_status, tr

EXAMPLE_COMMAND = serving.serve_command(production.EMBEDDED_HUB_ID, {
    "method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 8, "prompt_lookup_min": 2})
SETTINGS = ("prompt", "method", "k", "temperature", "top_p", "max_new_tokens", "seed", "model", "nodes", "typical",
            "oracle_a")  # the shared controls the handler reads, in its order


@contextlib.contextmanager
def server_errors(lang: str) -> Iterator[None]:
    """A server's EngineError as the tab's status line, in the page's language."""
    try:
        yield
    except EngineError as err:
        raise error(err.key, lang, **err.values) from err


def serve_command(method: str, model: str, run: Any, sampling: Any) -> str:
    """The `vllm serve` line that runs this method with these settings (production.py's vLLM config)."""
    d = production.deployment(method, model, run, sampling)
    llm = d.vllm_llm or {"model": production.hub_id(model)}
    return serving.serve_command(llm["model"], llm.get("speculative_config"))


# --- what the tab shows -----------------------------------------------------------------------------------

def _number(value: Optional[float], pattern: str = "{:.2f}") -> str:
    return "—" if value is None else pattern.format(value)


def _positions(stats: Optional[SpecStats]) -> str:
    return " / ".join(f"{s:.0%}" for s in stats.acceptance_by_position) if stats and stats.acceptance_by_position \
        else "—"


def summary_rows(result: dict, lang: str) -> list[list]:
    """The comparison table: one row per measure, the server's column then specviz's (headers.engine)."""
    server, rounds = result["server"], result["rounds"]
    ours, m = serving.rounds_stats(rounds), summarize(rounds) if rounds else None
    theirs = server.stats
    source = f"engine.source.{theirs.source}" if theirs else "engine.source.none"
    cells = [
        ("engine", f"{server.engine} · {server.model}", f"specviz {result['method']} · {result['model']}"),
        ("tokens", server.tokens, m["new_tokens"] if m else "—"),
        ("tps", f"{server.tokens_per_s:.1f}", f"{m['tokens_per_s']:.1f}" if m else "—"),
        ("per_forward", _number(theirs and theirs.tokens_per_forward), _number(m and m["mean_accepted_tokens"])),
        ("tau", _number(theirs and theirs.tau), _number(ours and ours.tau)),
        ("a", _number(theirs and theirs.a, "{:.0%}"), _number(ours and ours.a, "{:.0%}")),
        ("drafts", _number(theirs and theirs.drafts, "{}"), _number(ours and ours.drafts, "{}")),
        ("positions", _positions(theirs), _positions(ours)),
        ("source", i18n.text(source, lang), i18n.text("engine.source.specviz", lang)),
    ]
    return [[i18n.text(f"engine.row.{key}", lang), theirs_cell, ours_cell] for key, theirs_cell, ours_cell in cells]


def read_server(server: ServerRun, lang: str) -> str:
    """What was read from the server, with the counters' values, in words."""
    s = server.stats
    if s is None:
        return ""
    values = dict(accepted=s.accepted, drafts=s.drafts, draft_tokens=s.draft_tokens, generated=s.generated,
                  tau=_number(s.tau), per_forward=_number(s.tokens_per_forward),
                  per_pos=", ".join(str(round(share * (s.drafts or 0))) for share in s.acceptance_by_position))
    if s.source == "vllm":
        generated = (i18n.text("engine.read.generated", lang, generated=s.generated, forwards=s.forwards)
                     if s.generated is not None and s.forwards else "")
        return i18n.text("engine.read.vllm", lang, **{**values, "generated": generated}, url=server.url)
    return i18n.text(f"engine.read.{s.source}", lang, **values)


def explanation(result: dict, lang: str) -> str:
    """Below the chart: what was read from the server, the notes on what it did not say, specviz's side."""
    server, rounds = result["server"], result["rounds"]
    lines = [read_server(server, lang)] + [f"- {i18n.text(key, lang, **values)}" for key, values in server.notes]
    if server.stats is None:
        lines.append(i18n.text("engine.serve_hint", lang, command=result["command"]))
    ours = serving.rounds_stats(rounds)
    lines.append(i18n.text("engine.read.specviz", lang, drafts=ours.drafts, accepted=ours.accepted,
                           tau=_number(ours.tau)) if ours
                 else i18n.text("engine.read.specviz_none", lang, method=result["method"]))
    return "\n\n".join(line for line in lines if line)


def figure(server: Optional[ServerRun], rounds: list[Round], lang: str) -> Any:
    series = {}
    if server is not None and server.stats and server.stats.acceptance_by_position:
        series[server.engine] = server.stats.acceptance_by_position
    ours = serving.rounds_stats(rounds)
    if ours:
        series[f"specviz {rounds[0].method}"] = ours.acceptance_by_position
    return charts.engine_acceptance_figure(series, lang)


def server_line(server: ServerRun, lang: str) -> str:
    if not server.done:
        return i18n.text("engine.status.streaming", lang, model=server.model, url=server.url, tokens=server.tokens,
                         seconds=f"{server.elapsed_s:.1f}")
    return i18n.text("engine.status.server_done", lang, engine=server.engine, model=server.model,
                     tokens=server.tokens, seconds=f"{server.elapsed_s:.1f}", tps=f"{server.tokens_per_s:.1f}")


def view(result: dict, lang: str) -> tuple:
    """(status, table, chart, explanation) of a finished comparison, in `lang` (the language switch redraws it)."""
    server, rounds = result["server"], result["rounds"]
    status = "  \n".join([i18n.text("engine.status.done", lang, engine=server.engine, model=server.model,
                                    method=result["method"]), server_line(server, lang)])
    return (status, render.table("headers.engine", summary_rows(result, lang), lang),
            figure(server, rounds, lang), explanation(result, lang))


# --- the handler -------------------------------------------------------------------------------------------

def compare(page: Any, backend: Any, choice: Any, url: Any, prompt, method, k, temperature, top_p, max_new_tokens, seed, model,
            nodes, typical, oracle_a, language: str = "English") -> Iterator[tuple]:
    """Stream the server's reply, then specviz's run of the same request; end with both sides' figures.
    page: the app module that builds the page (its validate, growing, Throttle, status_line, full_text), passed in
    because it imports this one (importing `app` here would load a second copy of its models under python app.py).

    Outputs: status, the server's text, specviz's text, the table, the chart, the explanation, the result."""
    lang, skip = i18n.code(language), gr.skip()
    req = page.validate(backend, prompt, method, k, temperature, top_p, max_new_tokens, seed, model, lang, nodes,
                        typical, oracle_a)
    with server_errors(lang):
        target = serving.resolve_engine(str(url or "").strip() or str(choice or ""), backend.limits.public)
    settings = serving.ChatSettings(req.sampling.temperature, req.sampling.top_p, req.sampling.seed,
                                    req.run.max_new_tokens)
    yield (i18n.text("engine.status.asking", lang, url=target), "", "") + (skip,) * 4
    tick, server = page.Throttle(), None
    with server_errors(lang):
        for server in serving.watch(target, req.prompt, settings):
            if server.done or tick():
                yield (server_line(server, lang), server.text) + (skip,) * 5
    rounds: list[Round] = []
    for rounds in page.growing(backend, req, lang):
        if tick(force=rounds[-1].finished):
            line = f"{server_line(server, lang)}  \n{page.status_line(req.method, rounds, False, lang)}"
            yield (line, skip, page.full_text(rounds)) + (skip,) * 4
    result = {"server": server, "rounds": rounds, "method": req.method, "model": req.model,
              "command": serve_command(req.method, req.model, req.run, req.sampling)}
    status, table, chart, words = view(result, lang)
    yield status, server.text, page.full_text(rounds), table, chart, words, result


def redraw(result: Optional[dict], language: str) -> tuple:
    """The finished comparison in the chosen language (status, table, chart, explanation)."""
    if not result:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    return view(result, i18n.code(language))


# --- the layout ----------------------------------------------------------------------------------------------

def build(ui: Page, backend: Any, c: dict, language: gr.Radio, page: Any) -> dict:
    """The tab's layout and listeners; returns its components (for tests and the page)."""
    public, engines = backend.limits.public, serving.allowed_engines()
    ui(gr.Markdown, value=tr("engine.intro"), elem_id="engine-intro")
    if not engines:
        ui(gr.Markdown, value=tr("engine.none"), elem_id="engine-none")
    with gr.Row():
        choice = ui(gr.Dropdown, list(engines), value=next(iter(engines), None), label=tr("engine.choice"), scale=2,
                    elem_id="engine-choice")
        url = ui(gr.Textbox, label=tr("engine.url"), placeholder="http://127.0.0.1:8000", visible=not public,
                 scale=2, elem_id="engine-url")
        run = ui(gr.Button, value=tr("engine.run"), variant="primary", scale=1, elem_id="engine-button")
    status = gr.Markdown(elem_id="engine-status")
    with gr.Row(equal_height=False):
        server_text = ui(gr.Textbox, label=tr("engine.server_text"), lines=8, interactive=False,
                         elem_id="engine-server-text")
        own_text = ui(gr.Textbox, label=tr("engine.specviz_text"), lines=8, interactive=False,
                      elem_id="engine-specviz-text")
    table = ui(gr.Dataframe, headers=Localized(functools.partial(render.headers, "headers.engine")),
               interactive=False, wrap=True, elem_id="engine-table")
    plot = gr.Plot(charts.engine_acceptance_figure({}), show_label=False, elem_id="engine-plot")
    words = gr.Markdown(elem_id="engine-read")
    with ui(gr.Accordion, label=tr("engine.setup"), open=not engines):
        ui(gr.Markdown, value=tr("engine.setup_text", command=EXAMPLE_COMMAND), elem_id="engine-setup")
    result = gr.State(None)
    outputs = [status, server_text, own_text, table, plot, words, result]
    handler = in_status(functools.partial(compare, page, backend), len(outputs))
    event = run.click(zerogpu.gpu(handler, duration=120), [choice, url] + [c[n] for n in SETTINGS] + [language],
                      outputs, **MODEL)
    language.change(redraw, [result, language], [status, table, plot, words], queue=False, **UI)
    return dict(event=event, choice=choice, url=url, status=status, server_text=server_text, specviz_text=own_text,
                table=table, plot=plot, words=words, result=result)
