"""Records -> plotly figures. Every chart takes ``runs``: a label -> that run's rounds, so one run and
a side-by-side comparison share the same code. No torch here.
"""
from __future__ import annotations

from typing import Mapping, Optional

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz.events import Round, summarize

Runs = Mapping[str, list[Round]]
PALETTE = ["#2563eb", "#16a34a", "#d97706", "#9333ea", "#dc2626", "#0891b2"]
METHOD_COLORS = {"baseline": "#6b7280", "ngram": "#2563eb", "draft": "#16a34a", "medusa": "#d97706",
                 "eagle": "#9333ea"}


def color_of(label: str, position: int) -> str:
    return METHOD_COLORS.get(label.split(" ")[0], PALETTE[position % len(PALETTE)])


def _style(fig: go.Figure, title: str, height: int = 300) -> go.Figure:
    fig.update_layout(title=dict(text=title, font=dict(size=14)), template="plotly_white", height=height,
                      margin=dict(l=50, r=20, t=50, b=40), legend=dict(orientation="h", y=-0.22),
                      uirevision="keep")
    return fig


def acceptance_figure(runs: Runs) -> go.Figure:
    """Left: acceptance rate so far, round by round. Right: acceptance at each draft position."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("over the run (so far)", "by draft position"))
    for n, (label, rounds) in enumerate(runs.items()):
        proposed = accepted = 0
        xs, ys = [], []
        for r in rounds:
            proposed, accepted = proposed + r.n_proposed, accepted + r.n_accepted
            if proposed:
                xs.append(r.index + 1)
                ys.append(accepted / proposed)
        color = color_of(label, n)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=label, line=dict(color=color),
                                 marker=dict(size=4), legendgroup=label), row=1, col=1)
        by_position = summarize(rounds)["acceptance_by_position"] if rounds else []
        fig.add_trace(go.Bar(x=list(range(1, len(by_position) + 1)), y=by_position, name=label,
                             marker_color=color, legendgroup=label, showlegend=False), row=1, col=2)
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%")
    fig.update_xaxes(title_text="round", row=1, col=1)
    fig.update_xaxes(title_text="position in the guess", dtick=1, row=1, col=2)
    return _style(fig, "Acceptance rate")


def accepted_histogram(runs: Runs) -> go.Figure:
    """How many guesses each round kept (0 .. k)."""
    fig = go.Figure()
    for n, (label, rounds) in enumerate(runs.items()):
        spec = [r.n_accepted for r in rounds if r.n_proposed]
        if not spec:
            continue
        counts = [spec.count(v) for v in range(max(spec) + 1)]
        fig.add_trace(go.Bar(x=list(range(len(counts))), y=counts, name=label, marker_color=color_of(label, n)))
    fig.update_xaxes(title_text="guesses kept in a round", dtick=1)
    fig.update_yaxes(title_text="rounds")
    return _style(fig, "Accepted tokens per round")


def speed_figure(runs: Runs, baseline: Optional[list[Round]] = None) -> go.Figure:
    """Left: tokens generated against wall time. Right: tokens/s, with the speedup over the baseline."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38],
                        subplot_titles=("tokens over time", "tokens per second"))
    series = dict(runs)
    if baseline and "baseline" not in series:
        series["baseline"] = baseline
    base_tps = summarize(series["baseline"])["tokens_per_s"] if series.get("baseline") else None
    top = 0.0
    for n, (label, rounds) in enumerate(series.items()):
        color = color_of(label, n)
        fig.add_trace(go.Scatter(x=[0.0] + [r.elapsed_s for r in rounds], y=[0] + [r.tokens_so_far for r in rounds],
                                 mode="lines", name=label, line=dict(color=color), legendgroup=label),
                      row=1, col=1)
        tps = summarize(rounds)["tokens_per_s"] if rounds else 0.0
        top = max(top, tps)
        speedup = f"{tps / base_tps:.2f}×" if base_tps and label != "baseline" else ""
        fig.add_trace(go.Bar(x=[label], y=[tps], marker_color=color, text=[f"{tps:.1f}/s {speedup}".strip()],
                             textposition="outside", textangle=0, cliponaxis=False, showlegend=False,
                             legendgroup=label), row=1, col=2)
    fig.update_yaxes(range=[0, top * 1.3 or 1], row=1, col=2)  # room for the labels above the bars
    fig.update_xaxes(title_text="seconds", row=1, col=1)
    fig.update_yaxes(title_text="tokens", row=1, col=1)
    return _style(fig, "Speed" + ("" if base_tps else " (speedup appears once the baseline has run)"))


def timeline_figure(runs: Runs) -> go.Figure:
    """Per round: time spent guessing (draft) stacked under time spent checking (verify)."""
    fig = go.Figure()
    for n, (label, rounds) in enumerate(runs.items()):
        color = color_of(label, n)
        xs = [r.index + 1 for r in rounds]
        draft = [r.draft_time_s * 1000 for r in rounds]
        fig.add_trace(go.Bar(x=xs, y=draft, name=f"{label}: draft", marker_color=color, opacity=0.45,
                             offsetgroup=label, legendgroup=label))
        fig.add_trace(go.Bar(x=xs, y=[r.verify_time_s * 1000 for r in rounds], base=draft,
                             name=f"{label}: verify", marker_color=color, offsetgroup=label, legendgroup=label))
    fig.update_layout(barmode="group", bargap=0.15)
    fig.update_xaxes(title_text="round")
    fig.update_yaxes(title_text="ms")
    return _style(fig, "Timeline: draft time (light) and verify time (dark) per round")


def all_figures(runs: Runs, baseline: Optional[list[Round]] = None) -> tuple[go.Figure, ...]:
    """The four live charts, in the order the app shows them."""
    return acceptance_figure(runs), accepted_histogram(runs), speed_figure(runs, baseline), timeline_figure(runs)
