"""Records -> plotly figures. Every chart takes ``runs``: a label -> that run's rounds, so one run and
a side-by-side comparison share the same code; titles and axes come from specviz.i18n in `lang`.
No torch here.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Mapping, Optional

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from specviz import explain
from specviz.config import MAX_K
from specviz.events import Round, summarize
from specviz.i18n import text

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


def acceptance_figure(runs: Runs, lang: str = "en") -> go.Figure:
    """Left: acceptance rate so far, round by round. Right: acceptance at each draft position."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=(text("chart.acceptance.run", lang),
                                                                text("chart.acceptance.position", lang)))
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
    fig.update_xaxes(title_text=text("axis.round", lang), row=1, col=1)
    fig.update_xaxes(title_text=text("axis.position", lang), dtick=1, row=1, col=2)
    return _style(fig, text("chart.acceptance", lang))


def accepted_histogram(runs: Runs, lang: str = "en") -> go.Figure:
    """How many guesses each round kept (0 .. k)."""
    fig = go.Figure()
    for n, (label, rounds) in enumerate(runs.items()):
        spec = [r.n_accepted for r in rounds if r.n_proposed]
        if not spec:
            continue
        counts = [spec.count(v) for v in range(max(spec) + 1)]
        fig.add_trace(go.Bar(x=list(range(len(counts))), y=counts, name=label, marker_color=color_of(label, n)))
    fig.update_xaxes(title_text=text("axis.kept", lang), dtick=1)
    fig.update_yaxes(title_text=text("axis.rounds", lang))
    return _style(fig, text("chart.histogram", lang))


def speed_figure(runs: Runs, baseline: Optional[list[Round]] = None, lang: str = "en") -> go.Figure:
    """Left: tokens generated against wall time. Right: tokens/s, with the speedup over the baseline."""
    fig = make_subplots(rows=1, cols=2, column_widths=[0.62, 0.38],
                        subplot_titles=(text("chart.speed.time", lang), text("chart.speed.tps", lang)))
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
        bar_text = f"{tps:.1f}/s<br>{speedup}" if speedup else f"{tps:.1f}/s"
        fig.add_trace(go.Bar(x=[label], y=[tps], marker_color=color, text=[bar_text], textfont=dict(size=11),
                             textposition="outside", textangle=0, cliponaxis=False, showlegend=False,
                             legendgroup=label), row=1, col=2)
    fig.update_yaxes(range=[0, top * 1.45 or 1], row=1, col=2)  # room for the labels above the bars
    fig.update_xaxes(title_text=text("axis.seconds", lang), row=1, col=1)
    fig.update_yaxes(title_text=text("axis.tokens", lang), row=1, col=1)
    return _style(fig, text("chart.speed" if base_tps else "chart.speed.waiting", lang))


def timeline_figure(runs: Runs, lang: str = "en") -> go.Figure:
    """Per round: time spent guessing (draft) stacked under time spent checking (verify); one row per run
    (small multiples sharing the round axis), so five runs stay readable."""
    labels = list(runs) or [""]
    fig = make_subplots(rows=len(labels), cols=1, shared_xaxes=True, vertical_spacing=0.1 / len(labels),
                        subplot_titles=labels if len(labels) > 1 else None)
    for n, (label, rounds) in enumerate(runs.items()):
        color = color_of(label, n)
        xs = [r.index + 1 for r in rounds]
        draft = [r.draft_time_s * 1000 for r in rounds]
        fig.add_trace(go.Bar(x=xs, y=draft, name=text("chart.series.draft", lang, label=label), marker_color=color,
                             opacity=0.45, legendgroup=label), row=n + 1, col=1)
        fig.add_trace(go.Bar(x=xs, y=[r.verify_time_s * 1000 for r in rounds], base=draft,
                             name=text("chart.series.verify", lang, label=label), marker_color=color,
                             legendgroup=label), row=n + 1, col=1)
        fig.update_yaxes(title_text=text("axis.ms", lang), title_font=dict(size=11), row=n + 1, col=1)
    fig.update_layout(barmode="overlay", bargap=0.15, showlegend=len(labels) == 1)
    fig.update_annotations(font=dict(size=12))
    fig.update_xaxes(title_text=text("axis.round", lang), row=len(labels), col=1)
    return _style(fig, text("chart.timeline", lang), height=300 if len(labels) == 1 else 90 + 130 * len(labels))


def all_figures(runs: Runs, baseline: Optional[list[Round]] = None, lang: str = "en") -> tuple[go.Figure, ...]:
    """The four live charts, in the order the app shows them."""
    return (acceptance_figure(runs, lang), accepted_histogram(runs, lang), speed_figure(runs, baseline, lang),
            timeline_figure(runs, lang))


A_GRID = [round(0.05 * i, 2) for i in range(20)]  # acceptance 0 .. 0.95 on the calculator's map


def speedup_map(cost: "explain.CostInputs", lang: str = "en") -> go.Figure:
    """Expected end-to-end speedup over k = 1..MAX_K and acceptance 0..0.95 for the calculator's c and
    verify share, with the calculator's (k, a) marked. The line marks speedup 1: below it, slower."""
    ks = list(range(1, MAX_K + 1))
    z = [[explain.evaluate(replace(cost, a=a, k=k)).speedup for k in ks] for a in A_GRID]
    top = max(2.0, max(max(row) for row in z))
    colors = [[0, "#b91c1c"], [1 / top, "#fef3c7"], [1, "#15803d"]]  # red below speedup 1, green above
    fig = go.Figure(go.Contour(
        x=ks, y=A_GRID, z=z, colorscale=colors, zmin=0, zmax=top, line_smoothing=0.6,
        contours=dict(showlabels=True, labelfont=dict(size=10, color="#111827")),
        colorbar=dict(title=dict(text=text("calc.chart.colorbar", lang), side="right")),
        hovertemplate="k = %{x}<br>a = %{y:.2f}<br>" + text("calc.chart.colorbar", lang) + " = %{z:.2f}×<extra></extra>"))
    fig.add_trace(go.Contour(x=ks, y=A_GRID, z=z, showscale=False, hoverinfo="skip", showlegend=False,
                             contours=dict(type="constraint", operation="=", value=1.0),
                             line=dict(color="#111827", width=2, dash="dash")))
    mark = explain.evaluate(cost).speedup
    fig.add_trace(go.Scatter(x=[cost.k], y=[cost.a], mode="markers", name=text("calc.chart.current", lang),
                             marker=dict(size=13, color="#111827", symbol="x", line=dict(color="white", width=1.5)),
                             showlegend=False, hovertemplate=f"k = {cost.k}<br>a = {cost.a:.2f}<br>{mark:.2f}×<extra></extra>"))
    fig.add_annotation(x=cost.k, y=cost.a, text=f"{text('calc.chart.current', lang)}: {mark:.2f}×", showarrow=True,
                       arrowhead=0, ax=0, ay=-28, bgcolor="white", bordercolor="#111827", font=dict(size=12))
    fig.update_xaxes(title_text=text("calc.chart.k", lang), dtick=1)
    fig.update_yaxes(title_text=text("calc.chart.a", lang), range=[0, 1])
    title = text("calc.chart.title", lang, c=f"{cost.c:.2f}", f=f"{cost.verify_share:.0%}")
    return _style(fig, title, height=380)


def engine_acceptance_figure(series: Mapping[str, list[float]], lang: str = "en") -> go.Figure:
    """Acceptance by draft position of a production server and of specviz's run of the same request, grouped
    bars (series: label -> shares, [i] for position i + 1: the share of drafts that kept guess i + 1)."""
    fig = go.Figure()
    for n, (label, shares) in enumerate(series.items()):
        fig.add_trace(go.Bar(x=list(range(1, len(shares) + 1)), y=shares, name=label,
                             marker_color=PALETTE[n % len(PALETTE)], text=[f"{s:.0%}" for s in shares],
                             textposition="outside", cliponaxis=False))
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, 1.12], tickformat=".0%", title_text=text("axis.share_of_drafts", lang))
    fig.update_xaxes(title_text=text("axis.position", lang), dtick=1)
    return _style(fig, text("chart.engine", lang))
