"""The "How it works" explainer (specviz/howto.py): every part in both languages, the masks it draws, the
worked example's numbers, the measured verify costs, and the tab in a built page and after the switch."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import gradio as gr
import pytest

import app
from specviz import explain, howto, i18n
from test_app import FakeBackend
from test_i18n import ALLOWED, ENGLISH, docstrings, string_parts, switcher

ROOT = Path(__file__).resolve().parents[1]
CHINESE = re.compile(r"[\u4e00-\u9fff]")
HEADINGS = ["howto.mask.title", "howto.exact.title", "howto.symbols.title", "howto.cpu.title", "howto.methods.title"]


def heading(key: str, lang: str) -> str:
    return i18n.text(key, lang).lstrip("# ")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_part_renders_in_both_languages(lang):
    shown = "\n".join(howto.section(part, lang) for part in howto.PARTS) + howto.mask_figures(lang)
    for key in HEADINGS:
        assert heading(key, lang) in shown
    assert bool(CHINESE.search(shown)) == (lang == "zh")
    assert shown.count("→ ") >= 4 + 4  # a "try it" link per part, and the diagrams' arrows
    for tab in ("tab.step", "tab.live", "tab.calc"):
        assert i18n.text(tab, lang) in shown
    for name in explain.METHODS:
        assert explain.method_text(name, lang) in shown
    assert "{" not in shown and "}" not in shown  # every placeholder filled
    figure = howto.verify_cost_figure(lang)
    assert figure.layout.title.text == i18n.text("howto.chart.title", lang)
    with pytest.raises(ValueError):
        howto.section("no-such-part", lang)


def cells(svg: str) -> dict[tuple[int, int], bool]:
    """(row, column) -> filled, from the rects the mask drawing emits."""
    found = re.findall(r'<rect class="sv-mask-(on|off)" data-row="(\d+)" data-col="(\d+)"', svg)
    return {(int(r), int(c)): state == "on" for state, r, c in found}


def drawing(figures: str, name: str) -> str:
    [svg] = re.findall(rf'<svg [^>]*data-mask="{name}".*?</svg>', figures, flags=re.S)
    return svg


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_chain_mask_is_causal_over_context_and_guesses(lang):
    grid = cells(drawing(howto.mask_figures(lang), "chain"))
    n_context, n_guesses = howto.CHAIN_CONTEXT, howto.CHAIN_GUESSES
    n = n_context + n_guesses
    assert set(grid) == {(r, c) for r in range(n) for c in range(n)}
    for row in range(n):
        assert [c for c in range(n) if grid[row, c]] == list(range(row + 1))  # lower-triangular
    for i in range(n_guesses):  # guess i sees the whole context and guesses 0..i
        assert sum(grid[n_context + i, c] for c in range(n)) == n_context + i + 1
    for word in i18n.text("howto.svg.chain_words", lang).split(" | "):
        assert f">{word}<" in drawing(howto.mask_figures(lang), "chain")


def ancestors_or_self(parents, node):
    line = {node}
    while parents[node] >= 0:
        node = parents[node]
        line.add(node)
    return line


@pytest.mark.parametrize("parents", [howto.TREE_PARENTS, (-1, 0, 1), (-1, -1, -1, 2, 3)])
def test_the_tree_mask_lets_each_node_see_exactly_its_ancestors(parents):
    svg = howto.tree_svg("en", parents)
    grid = cells(svg)
    n = len(parents)
    assert set(grid) == {(r, c) for r in range(n + 1) for c in range(n + 2)}
    assert [c for c in range(n + 2) if grid[0, c]] == [0, 1]  # the root: the context and itself
    for node in range(n):  # row 1 + node; columns: context, root, then node j at 2 + j
        seen = {c - 2 for c in range(2, n + 2) if grid[1 + node, c]}
        assert seen == ancestors_or_self(parents, node), node
        assert grid[1 + node, 0] and grid[1 + node, 1]
    assert svg.count('class="sv-tree-node"') == n + 1  # the tree drawn beside its mask, root included


def test_the_default_tree_is_the_issues_tree_with_labelled_nodes():
    assert howto.TREE_PARENTS == (-1, -1, 0, 0, 1)  # root -> A, B; A -> C, D; B -> E
    for lang in ("en", "zh"):
        svg = drawing(howto.mask_figures(lang), "tree")
        for letter, word in zip("ABCDE", i18n.text("howto.svg.tree_words", lang).split(" | ")):
            assert f">{letter} {word}<" in svg
        assert i18n.text("howto.svg.keys", lang) in svg and i18n.text("howto.svg.queries", lang) in svg


def test_the_worked_example_follows_the_rejection_rule():
    target, draft = howto.EXAMPLE_TARGET, howto.EXAMPLE_DRAFT
    assert sum(target) == pytest.approx(1) and sum(draft) == pytest.approx(1) and len(target) == 3
    r = howto.rejection(target, draft)
    assert r.keep == pytest.approx([min(1, t / d) for t, d in zip(target, draft)])
    assert sum(r.residual) == pytest.approx(1)
    assert all(res == 0 for res, t, d in zip(r.residual, target, draft) if d >= t)
    assert any(res > 0 for res in r.residual) and any(k < 1 for k in r.keep)  # the example shows both cases
    assert r.accept == pytest.approx(sum(min(t, d) for t, d in zip(target, draft)))
    assert r.out == pytest.approx(target)  # kept or replaced, each token comes out with the target's probability
    table = howto.example_table("en")
    rows = [line for line in table.splitlines() if line.startswith("| “")]
    assert len(rows) == 3
    for line, keep, residual in zip(rows, r.keep, r.residual):
        values = line.split(" | ")
        assert values[3] == f"{keep:.2f}" and values[6] == f"{residual:.2f}"


def test_greedy_is_keep_if_top_token():
    top = (0.0, 1.0, 0.0)  # temperature 0: the target's top token is the second
    assert howto.rejection(top, (0.0, 1.0, 0.0)).keep[1] == 1
    wrong = howto.rejection(top, (1.0, 0.0, 0.0))
    assert wrong.keep[0] == 0 and wrong.residual == (0.0, 1.0, 0.0)


def test_verify_costs_come_from_the_stored_times():
    ratios = howto.verify_ratios(howto.CPU_VERIFY_MS)
    assert howto.CPU_VERIFY_MS == {1: 57.0, 4: 107.0, 8: 114.0, 16: 117.0, 32: 157.0}
    assert ratios == {n: t / 57.0 for n, t in howto.CPU_VERIFY_MS.items()} and ratios[1] == 1
    assert 1.6 <= ratios[4] <= 2.1 and ratios[32] == pytest.approx(2.75, abs=0.01)
    shown = howto.section("cpu", "en")
    for n, t in howto.CPU_VERIFY_MS.items():
        assert f"| {n} | {t:.0f} | {ratios[n]:.2f} |" in shown
    assert howto.CPU_MEASURED in shown and howto.GPU_MEASURED in shown
    bars = howto.verify_cost_figure("en").data[0]
    assert list(bars.y) == list(ratios.values())


def test_the_example_speedups_use_the_formula_and_the_measured_cost():
    shown = howto.section("symbols", "en")
    e = explain.expected_tokens(0.7, 3)
    cv = howto.verify_ratios(howto.CPU_VERIFY_MS)[4]
    assert f"E = **{e:.2f}**" in shown and f"**{e / 1.15:.2f}×**" in shown and f"**{e / (cv + 0.15):.2f}×**" in shown


def explain_tab_texts(demo: gr.Blocks) -> str:
    [tab] = [b for b in demo.blocks.values() if isinstance(b, gr.Tab) and b.label == i18n.text("tab.explain")]

    def walk(block) -> list:
        return [block] + [c for child in getattr(block, "children", []) for c in walk(child)]

    return "\n".join(str(b.value) for b in walk(tab) if isinstance(b, (gr.Markdown, gr.HTML)))


def test_the_tab_shows_the_explainer_and_the_switch_translates_it():
    demo = app.build_demo(FakeBackend())
    shown = explain_tab_texts(demo)
    for key in HEADINGS:
        assert heading(key, "en") in shown
    assert 'data-mask="chain"' in shown and 'data-mask="tree"' in shown
    fn = switcher(demo)
    start = explain.CostInputs()
    values = [start.c, start.a, start.k, start.verify_share, start.extra_mb, start.target_mb, start.verify_base,
              start.verify_slope]
    out = fn.fn("中文", "ngram", [], None, {}, [], None, {}, None, None, None, None, {}, None, *values)
    translated = "\n".join(str(update.get("value", "")) for update in out if isinstance(update, dict))
    for key in HEADINGS:
        assert heading(key, "zh") in translated and heading(key, "en") not in translated
    assert i18n.text("howto.svg.chain_title", "zh", k=4, n=5) in translated


def test_no_english_phrase_outside_i18n():
    tree = ast.parse((ROOT / "specviz/howto.py").read_text(encoding="utf-8"))
    skip = docstrings(tree)
    phrases = [(node.lineno, part) for node in ast.walk(tree) if id(node) not in skip
               for part in string_parts(node) if ENGLISH.search(part) and part not in ALLOWED]
    assert phrases == [], "user-visible text belongs in specviz/i18n.py"
