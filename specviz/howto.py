"""The "How it works" tab: a short illustrated explainer for a class, in five parts.

1. the causal mask: why one target forward checks k guesses (a chain's and a tree's mask, drawn as SVG);
2. the rejection rule: why the output is exactly the target's (a worked example, computed here);
3. the symbols tau, a, k, c, c_v(n) and the expected speedup (numbers from specviz.explain);
4. why a CPU shows less speedup than a GPU (measured verify costs, stored below with their source);
5. the methods (specviz.explain's texts).
Pure functions: Markdown, HTML (inline SVG, inline styles) and one plotly figure. Every text comes from
specviz.i18n ("howto.*" keys) in the language `lang`. No torch here.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

import plotly.graph_objects as go

from specviz import explain
from specviz.i18n import text

PARTS = ("mask", "exact", "symbols", "cpu", "methods")  # the tab's order

# --- part 1: attention masks --------------------------------------------------------------------------

CHAIN_CONTEXT = 4  # context tokens drawn in the chain's mask; the last one is fed again with the guesses
CHAIN_GUESSES = 4  # k
TREE_PARENTS = (-1, -1, 0, 0, 1)  # A, B hang from the root (the last context token); C, D from A; E from B
TREE_NAMES = "ABCDE"
CELL = 34  # px, one square of a mask
FILL = {"fed": "#2563eb", "cached": "#9ca3af"}  # a visible square in a row fed in this forward / kept in the cache
EMPTY = "#ffffff"
INK, FAINT = "#111827", "#6b7280"


def lineage(parents: tuple[int, ...], node: int) -> list[int]:
    """The node and its ancestors, root (-1) excluded: what the node may attend to among the guesses."""
    line = []
    while node >= 0:
        line.append(node)
        node = parents[node]
    return line


def chain_mask(n_context: int, n_guesses: int) -> list[list[bool]]:
    """The causal mask over context + guesses: row i (a query) may attend to column j (a key) when j <= i."""
    n = n_context + n_guesses
    return [[j <= i for j in range(n)] for i in range(n)]


def tree_mask(parents: tuple[int, ...]) -> list[list[bool]]:
    """Rows: the root, then each node. Columns: the earlier context (one column), the root, then each node.
    Everyone sees the context and the root; a node sees itself and its ancestors, no other branch."""
    lines = [set()] + [set(lineage(parents, i)) for i in range(len(parents))]
    return [[True, True] + [j in line for j in range(len(parents))] for line in lines]


def _words(key: str, lang: str) -> list[str]:
    return [w.strip() for w in text(key, lang).split("|")]


def _label(x: float, y: float, label: str, anchor: str, color: str = INK, bold: bool = False,
           rotate: bool = False) -> str:
    weight = ' font-weight="bold"' if bold else ""
    turn = f' transform="rotate(-90 {x} {y})"' if rotate else ""
    return (f'<text x="{x}" y="{y}" text-anchor="{anchor}" fill="{color}"{weight}{turn} '
            f'xml:space="preserve">{html.escape(label)}</text>')


def _grid(x0: float, y0: float, columns: list[tuple[str, int]], rows: list[tuple[str, str, str]],
          visible: list[list[bool]]) -> str:
    """A mask's squares with their labels: columns (label, width), rows (label, kind, note on the right).
    Each square is a rect of class sv-mask-on (may attend) or sv-mask-off, with data-row and data-col."""
    lefts = [x0 + sum(w for _, w in columns[:j]) for j in range(len(columns))]
    right = lefts[-1] + columns[-1][1]
    parts = [_label(x + w / 2, y0 - 8, label, "middle") for (label, w), x in zip(columns, lefts)]
    for i, (label, kind, note) in enumerate(rows):
        y = y0 + i * CELL
        parts.append(_label(x0 - 8, y + CELL / 2 + 4, label, "end", INK if kind == "fed" else FAINT, kind == "fed"))
        for j, ((_, w), x) in enumerate(zip(columns, lefts)):
            seen = visible[i][j]
            fill = FILL[kind] if seen else EMPTY
            parts.append(f'<rect class="sv-mask-{"on" if seen else "off"}" data-row="{i}" data-col="{j}" x="{x + 1}" '
                         f'y="{y + 1}" width="{w - 2}" height="{CELL - 2}" rx="3" fill="{fill}" stroke="#d1d5db"/>')
        if note:
            parts.append(_label(right + 8, y + CELL / 2 + 4, note, "start", FAINT))
    return "".join(parts)


def _axes(x0: float, y0: float, width: float, height: float, lang: str) -> str:
    """The axis titles: keys along the top, queries down the left."""
    return (_label(x0 + width / 2, y0 - 30, text("howto.svg.keys", lang), "middle", FAINT)
            + _label(x0 - 70, y0 + height / 2, text("howto.svg.queries", lang), "middle", FAINT, rotate=True))


def _svg(name: str, width: float, height: float, title: str, body: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" data-mask="{name}" viewBox="0 0 {width} {height}" width="100%" '
            f'style="max-width:{width}px;font-family:system-ui,sans-serif;font-size:12px">'
            f'{_label(4, 16, title, "start", INK, bold=True)}{body}</svg>')


def chain_svg(lang: str = "en") -> str:
    """The causal mask over 4 context tokens and a chain of 4 guesses; each row fed in this forward is
    annotated with the guess its prediction checks (the last one's is the bonus token)."""
    context, guesses = _words("howto.svg.context_words", lang), _words("howto.svg.chain_words", lang)
    notes = [text("howto.svg.checks", lang, token=f"“{g}”") for g in guesses] + [text("howto.svg.bonus", lang)]
    rows = [(w, "cached", text("howto.svg.cached", lang) if i == 0 else "") for i, w in enumerate(context[:-1])]
    rows += [(w, "fed", note) for w, note in zip(context[-1:] + guesses, notes)]
    columns = [(w, CELL) for w in context + guesses]
    x0, y0 = 100, 76
    size = len(columns) * CELL
    body = _axes(x0, y0, size, size, lang) + _grid(x0, y0, columns, rows, chain_mask(len(context), len(guesses)))
    return _svg("chain", x0 + size + 150, y0 + size + 10, text("howto.svg.chain_title", lang, k=len(guesses),
                                                                  n=len(guesses) + 1), body)


def _tree_drawing(x0: float, y0: float, root: str, nodes: list[str], parents: tuple[int, ...]) -> str:
    """The tree top-down: the root, then each level; leaves side by side, a parent above its children."""
    children = {p: [i for i, q in enumerate(parents) if q == p] for p in (-1, *range(len(parents)))}
    place: dict[int, tuple[float, float]] = {}

    def visit(node: int, depth: int, slot: list[float]) -> float:
        kids = [visit(c, depth + 1, slot) for c in children[node]]
        if not kids:
            slot[0] += 1
        x = sum(kids) / len(kids) if kids else slot[0] - 1
        place[node] = (x0 + x * 74, y0 + depth * 64)
        return x

    visit(-1, 0, [0.0])
    edges = [f'<line x1="{place[p][0] + 32}" y1="{place[p][1] + 24}" x2="{place[i][0] + 32}" y2="{place[i][1]}" '
             f'stroke="{FAINT}" stroke-width="1.5"/>' for i, p in enumerate(parents)]
    boxes = []
    for node, (x, y) in place.items():
        kind = "cached" if node < 0 else "fed"
        boxes.append(f'<rect class="sv-tree-node" x="{x}" y="{y}" width="64" height="24" rx="4" fill="#eff6ff" '
                     f'stroke="{FILL[kind]}"/>' + _label(x + 32, y + 16, root if node < 0 else nodes[node], "middle"))
    return "".join(edges + boxes)


def tree_svg(lang: str = "en", parents: tuple[int, ...] = TREE_PARENTS) -> str:
    """A tree of guesses beside its attention mask: every node sees the context, the root and its own
    ancestors (and itself), so one forward computes each branch as if it were alone."""
    words = _words("howto.svg.tree_words", lang)
    nodes = [f"{TREE_NAMES[i]} {w}" for i, w in enumerate(words[: len(parents)])]
    root = _words("howto.svg.context_words", lang)[-1]
    children = [[TREE_NAMES[c] for c, p in enumerate(parents) if p == i] for i in range(-1, len(parents))]
    notes = [text("howto.svg.checks", lang, token=", ".join(c)) if c else text("howto.svg.bonus", lang)
             for c in children]
    rows = [(root, "fed", notes[0])] + [(n, "fed", note) for n, note in zip(nodes, notes[1:])]
    columns = [(text("howto.svg.context", lang), 2 * CELL), (root, CELL)] + [(TREE_NAMES[i], CELL)
                                                                            for i in range(len(parents))]
    x0, y0 = 340, 76
    width = (len(columns) + 1) * CELL
    height = len(rows) * CELL
    body = (_tree_drawing(20, y0, root, nodes, parents) + _axes(x0, y0, width, height, lang)
            + _grid(x0, y0, columns, rows, tree_mask(parents)))
    return _svg("tree", x0 + width + 110, y0 + max(height, 3 * 64) + 10, text("howto.svg.tree_title", lang,
                                                                              n=len(parents)), body)


def mask_figures(lang: str = "en") -> str:
    """Part 1's two diagrams and their legend, as HTML."""
    legend = html.escape(text("howto.svg.legend", lang))
    legend = f'<div style="font-size:12px;color:{FAINT};margin-top:4px">{legend}</div>'
    return (f'<div class="sv-howto" style="display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start">'
            f'<div style="flex:1 1 420px">{chain_svg(lang)}</div><div style="flex:1 1 520px">{tree_svg(lang)}</div>'
            f'</div>{legend}')


# --- part 2: the rejection rule, worked through ---------------------------------------------------------

EXAMPLE_TARGET = (0.5, 0.3, 0.2)  # the target's probabilities of the three tokens (howto.exact.tokens)
EXAMPLE_DRAFT = (0.3, 0.2, 0.5)  # the draft's


@dataclass(frozen=True)
class Rejection:
    keep: tuple[float, ...]  # per token: min(1, target / draft), the chance a guess of it is kept
    kept: tuple[float, ...]  # per token: draft x keep = min(target, draft), the chance it is guessed and kept
    excess: tuple[float, ...]  # per token: max(0, target - draft)
    residual: tuple[float, ...]  # excess / sum(excess): where a replacement is drawn from
    accept: float  # a = sum(kept): the chance the guess is kept, whatever it is
    out: tuple[float, ...]  # per token: kept + (1 - a) x residual, the chance it comes out (= target)


def rejection(target_probs: tuple[float, ...], draft_probs: tuple[float, ...]) -> Rejection:
    """The rejection rule over a whole (small) vocabulary: keep chances, the residual, and what comes out."""
    keep = tuple(min(1.0, t / d) if d > 0 else 1.0 for t, d in zip(target_probs, draft_probs))
    kept = tuple(d * k for d, k in zip(draft_probs, keep))
    excess = tuple(max(0.0, t - d) for t, d in zip(target_probs, draft_probs))
    total = sum(excess)
    residual = tuple(e / total if total > 0 else 0.0 for e in excess)
    accept = sum(kept)
    out = tuple(k + (1 - accept) * r for k, r in zip(kept, residual))
    return Rejection(keep, kept, excess, residual, accept, out)


def _table(header_key: str, rows: list[list[str]], lang: str) -> str:
    headers = text(header_key, lang).split(" | ")
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def example_table(lang: str = "en") -> str:
    r = rejection(EXAMPLE_TARGET, EXAMPLE_DRAFT)
    columns = (EXAMPLE_TARGET, EXAMPLE_DRAFT, r.keep, r.kept, r.excess, r.residual, r.out)
    rows = [[f"“{word}”", *(f"{c[i]:.2f}" for c in columns)]
            for i, word in enumerate(_words("howto.exact.tokens", lang))]
    return _table("howto.exact.headers", rows, lang)


# --- part 4: measured verify costs -------------------------------------------------------------------------

# One target forward of the embedded model (SmolLM2-135M-Instruct, float32, sdpa) with a 300-token cache, by new
# tokens in the forward, ms: 2 cores of an AMD EPYC (AVX2), torch 2.13 CPU build (MKL), 2 threads, medians of 15
# runs. Source: the project's shared reference notes (reference/cpu-costs.md, "What things cost on these machines").
CPU_VERIFY_MS = {1: 57.0, 4: 107.0, 8: 114.0, 16: 117.0, 32: 157.0}
CPU_MEASURED = "2026-11-29"
# NVIDIA H200, models of the embedded model's shape: about 20-25 ms per forward whatever its size, so a verify
# over 5 tokens (k = 4) costs about one forward. Source: docs/perf.md, "GPU (NVIDIA H200, 2026-11-30)".
GPU_VERIFY = {"n": 5, "ratio": 1.0}
GPU_MEASURED = "2026-11-30"


def verify_ratios(times_ms: dict[int, float]) -> dict[int, float]:
    """c_v(n): a forward over n new tokens relative to a forward over one."""
    return {n: t / times_ms[1] for n, t in times_ms.items()}


def verify_cost_figure(lang: str = "en") -> go.Figure:
    """c_v(n) on the CPU (measured) against the H200's about 1."""
    ratios = verify_ratios(CPU_VERIFY_MS)
    sizes = [str(n) for n in ratios]
    fig = go.Figure(go.Bar(x=sizes, y=list(ratios.values()), marker_color=FILL["fed"],
                           text=[f"{v:.2f}×" for v in ratios.values()], textposition="outside", cliponaxis=False,
                           name=text("howto.chart.cpu", lang, date=CPU_MEASURED)))
    fig.add_trace(go.Scatter(x=sizes, y=[GPU_VERIFY["ratio"]] * len(sizes), mode="lines",
                             line=dict(color="#16a34a", dash="dash"),
                             name=text("howto.chart.gpu", lang, n=GPU_VERIFY["n"], date=GPU_MEASURED)))
    fig.update_xaxes(title_text=text("howto.chart.x", lang), type="category")
    fig.update_yaxes(title_text=text("howto.chart.y", lang), range=[0, max(ratios.values()) * 1.25])
    fig.update_layout(title=dict(text=text("howto.chart.title", lang), font=dict(size=14)), template="plotly_white",
                      height=320, margin=dict(l=50, r=20, t=50, b=40), legend=dict(orientation="h", y=-0.3))
    return fig


# --- the sections ---------------------------------------------------------------------------------------------

def _tabs(lang: str) -> dict[str, str]:
    """The tabs' names as the page shows them, for the "try it" links."""
    column = text("headers.tokens", lang).split(" | ")[-1]
    return dict(step=text("tab.step", lang), live=text("tab.live", lang), calc=text("tab.calc", lang), column=column,
                sweep=text("tab.sweep", lang), why=text("why.title", lang))


def _symbols_example(lang: str) -> str:
    a, k, c = round(rejection(EXAMPLE_TARGET, EXAMPLE_DRAFT).accept, 2), 3, 0.05  # part 2's a: 0.7
    e = explain.expected_tokens(a, k)
    cv = verify_ratios(CPU_VERIFY_MS)[k + 1]
    return text("howto.symbols.example", lang, a=a, k=k, c=c, k1=k + 1, e=f"{e:.2f}", kc=f"{k * c:.2f}",
                cv=f"{cv:.2f}", gpu=f"{e / (1 + k * c):.2f}", cpu=f"{e / (cv + k * c):.2f}")


def _cpu_table(lang: str) -> str:
    ratios = verify_ratios(CPU_VERIFY_MS)
    rows = [[str(n), f"{CPU_VERIFY_MS[n]:.0f}", f"{ratios[n]:.2f}"] for n in CPU_VERIFY_MS]
    return _table("howto.cpu.headers", rows, lang)


def section(part: str, lang: str = "en") -> str:
    """One part of the explainer (one of PARTS) as Markdown; part 1's diagrams come from mask_figures, part 4's
    chart from verify_cost_figure."""
    tabs = _tabs(lang)
    if part == "mask":
        return "\n\n".join([text("howto.intro", lang), text("howto.mask.title", lang), text("howto.mask.text", lang),
                            text("howto.mask.try", lang, **tabs)])
    if part == "exact":
        r = rejection(EXAMPLE_TARGET, EXAMPLE_DRAFT)
        return "\n\n".join([text("howto.exact.title", lang), text("howto.exact.text", lang),
                            text("howto.exact.example", lang), example_table(lang),
                            text("howto.exact.after", lang, a=f"{r.accept:.2f}", reject=f"{1 - r.accept:.2f}"),
                            text("howto.exact.try", lang, **tabs)])
    if part == "symbols":
        return "\n\n".join([text("howto.symbols.title", lang), text("howto.symbols.text", lang),
                            _symbols_example(lang), text("howto.symbols.try", lang, **tabs)])
    if part == "cpu":
        ratios = verify_ratios(CPU_VERIFY_MS)
        return "\n\n".join([text("howto.cpu.title", lang), text("howto.cpu.text", lang), _cpu_table(lang),
                            text("howto.cpu.source", lang, date=CPU_MEASURED, gpu_date=GPU_MEASURED,
                                 gpu_n=GPU_VERIFY["n"]),
                            text("howto.cpu.after", lang, need=f"{ratios[4]:.2f}"),
                            text("howto.cpu.try", lang, **tabs)])
    if part == "methods":
        methods = [explain.method_text(name, lang) for name in explain.METHODS]
        return "\n\n".join([text("howto.methods.title", lang)] + methods)
    raise ValueError(f"unknown part {part!r}; one of {PARTS}")
