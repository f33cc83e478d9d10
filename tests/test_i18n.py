"""The English and Chinese texts: the same keys and placeholders in both, the whole page switches, and no
user-visible English is written outside specviz/i18n.py."""
from __future__ import annotations

import ast
import re
import string
from pathlib import Path

import gradio as gr
import pytest

import app
from specviz import charts, explain, i18n, render, trace
from test_app import FakeBackend, canned_run

ROOT = Path(__file__).resolve().parents[1]
TERMS = ("推测解码", "草稿模型", "目标模型", "接受率", "加速比", "奖励 token", "验证", "前向计算")
SAME_IN_BOTH = {"tab.api", "ctl.top_p"}  # the same word in both languages
N_VIEWS = 50  # outputs of the switch after the registered components: the views redrawn from their state


def placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def test_both_languages_have_every_key_and_the_same_placeholders():
    assert set(i18n.EN) == set(i18n.ZH)
    for key, english in i18n.EN.items():
        chinese = i18n.ZH[key]
        assert english.strip() and chinese.strip(), key
        assert placeholders(english) == placeholders(chinese), key
        if key not in SAME_IN_BOTH:
            assert re.search(r"[\u4e00-\u9fff]", chinese) or placeholders(chinese), f"{key} is not translated"
    everything = "".join(i18n.ZH.values())
    assert all(term in everything for term in TERMS)


def test_language_codes_and_terms():
    assert i18n.code("中文") == "zh" and i18n.code("English") == "en" and i18n.code("zh") == "zh"
    assert i18n.code(None) == "en" and i18n.code("Klingon") == "en"
    assert i18n.term("status", "accepted", "zh") == "接受" and i18n.term("stop", "something-new", "zh") == "something-new"
    with pytest.raises(KeyError):
        i18n.text("no.such.key")


def switcher(demo: gr.Blocks):
    [fn] = [f for f in demo.fns.values() if getattr(f.fn, "func", None) is app.switch_language]
    return fn


def test_the_switch_translates_every_registered_component_and_redraws_the_views():
    demo = app.build_demo(FakeBackend())
    fn = switcher(demo)
    start = explain.CostInputs()
    values = [start.c, start.a, start.k, start.verify_share, start.extra_mb, start.target_mb, start.verify_base,
              start.verify_slope]
    rounds = list(canned_run("ngram", 24, 4))
    base = list(canned_run("baseline", 24, 4))
    state = {"rounds": rounds, "pos": 1, "greedy": True, "label": "ngram"}
    for choice in ("中文", "English"):
        out = fn.fn(choice, "ngram", rounds, base, {"baseline": base, "ngram": rounds}, ["ngram", "eagle"], state,
                    {}, None, None, None, None, {}, None, *values)
        assert len(out) == len(fn.outputs)
        registered = out[: len(out) - N_VIEWS]
        assert len(registered) > 60  # every label, button, tab, accordion, legend and table header
        for update in registered:
            shown = " ".join(str(v) for k, v in update.items() if k != "__type__")
            has_chinese = bool(re.search(r"[\u4e00-\u9fff]", shown))
            assert has_chinese == (choice == "中文") or shown in ("top-p", "API"), shown
    replayed = trace.Trace(model="embedded:x", prompt="hi", runs={"baseline": base, "ngram": rounds})
    sources, _ = app.note_runs({}, {"ngram": rounds}, "embedded:x", "live")
    deployed = trace.Trace(model="embedded:x", prompt="hi", runs={"ngram": rounds})  # what the live run saved
    zh = fn.fn("中文", "eagle", rounds, base, {"baseline": base, "ngram": rounds}, ["ngram", "medusa"], None, {},
               None, replayed, deployed, None, sources, "#1 live: ngram", *values)
    views = zh[len(zh) - N_VIEWS:]
    assert "EAGLE" in views[0] and "单层解码器" in views[0]  # the method's explanation
    assert 'sv-accepted' in views[1] and "第 2 轮" in views[1]  # the live stream's round titles
    assert views[2].layout.title.text == "接受率"  # charts redrawn in Chinese
    assert views[6]["headers"][0] == "轮次" and "与基线完全相同" in views[7] and "预期加速比" in views[8]
    assert "ngram" in views[9]["value"] and not views[10]["visible"]  # the ticked methods that ran, baseline not ticked
    assert "请点击“准备”" in views[19]  # an empty step view
    assert views[-9].startswith("**记录**") and "提示词查找" in views[-8]  # the replayed trace's heading, production
    assert "已根据 **ngram** 的实测记录填入" in views[-7]
    assert "加速比" in views[-6] and views[-5].layout.xaxis.title.text == "k：每轮猜测数"
    assert views[-4] == app.live_status(rounds, base, True, "zh") and "速度是基线的" in views[-4]  # the live status line
    assert views[-3].startswith(i18n.text("compare.done", "zh")) and "目标模型前向" in views[-3]  # with each headline
    assert views[-2] == app.production_markdown(deployed, "zh") and "提示词查找" in views[-2]  # the live run's snippet
    assert views[-1] == gr.skip()  # no side-by-side run saved yet


def test_handlers_answer_in_the_chosen_language():
    backend = FakeBackend()
    final = list(app.run_single(backend, "hi", "ngram", 4, 0.0, 1.0, 24, 0, "fake-model", True, {}, "中文"))[-1]
    assert "完成" in final[0] and "速度是基线的" in final[0] and "与基线完全相同" in final[11]
    assert final[7]["headers"][0] == "轮次" and final[3].layout.title.text == "接受率"
    with pytest.raises(gr.Error, match="提示词为空"):
        list(app.run_single(backend, "", "ngram", 4, 0.0, 1.0, 24, 0, "fake-model", True, {}, "中文"))
    with pytest.raises(gr.Error, match="max_new_tokens 必须是 1 到 512 之间的整数"):
        list(app.run_single(backend, "hi", "ngram", 4, 0.0, 1.0, 0, 0, "fake-model", True, {}, "中文"))
    table = list(app.run_compare(backend, "hi", ["baseline", "ngram"], 4, 0.0, 1.0, 24, 0, "fake-model", {},
                                 "中文"))[-1][5]
    assert table["headers"][-1] == "与基线相同" and table["data"][1][-1] == "是"
    step = app.step_move({"rounds": list(canned_run("draft", 24, 4)), "pos": 1, "greedy": False, "label": "draft"},
                         "中文", delta=1)
    assert "第 3 轮" in step[2] and "残差分布" in step[2] and "草稿" in step[3]
    with pytest.raises(gr.Error, match="请先点击"):
        app.step_move(None, "中文", delta=1)
    assert "小语言模型" in explain.method_text("draft", "zh")
    assert "被接受的猜测" in render.legend_html("zh") and "sv-accepted" in render.legend_html("zh")
    assert charts.speed_figure({}, None, "zh").layout.title.text.startswith("速度")


# --- no English outside i18n.py ------------------------------------------------------------------------

TEXT_ARGUMENTS = ("label", "placeholder", "info", "value")
ALLOWED = {
    "Language / 语言", "English",  # the switch itself speaks both languages
    "specviz: speculative decoding, round by round",  # the browser tab's title
    "SPECVIZ_PUBLIC=1 offers only the embedded model and the presets (",  # a start-up error for the operator
    "); SPECVIZ_MODELS also names ",
    "<a small model with the target's tokenizer>",  # placeholders inside code snippets
    " heads for this target>",
    "```python\n# vLLM\nfrom vllm import LLM, SamplingParams\nllm = LLM(**",
}
ENGLISH = re.compile(r"[A-Za-z']{2,} [A-Za-z']{2,} [A-Za-z']{2,}")  # three words: a phrase, not an identifier


def string_parts(node: ast.AST) -> list[str]:
    """The literal text of a str constant or an f-string."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values if isinstance(v, ast.Constant)]
    return []


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def is_gradio_call(node: ast.Call) -> bool:
    """gr.Anything(...) or ui(gr.Anything, ...)."""
    func = node.func
    direct = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "gr"
    built = isinstance(func, ast.Name) and func.id == "ui"
    return direct or built


def test_app_labels_and_messages_come_from_i18n():
    tree = ast.parse((ROOT / "app.py").read_text(encoding="utf-8"))
    hard_coded = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and is_gradio_call(node):
            texts = [kw.value for kw in node.keywords if kw.arg in TEXT_ARGUMENTS]
            texts += [arg for arg in node.args if isinstance(arg, (ast.Constant, ast.JoinedStr))]
            for value in texts:
                words = "".join(string_parts(value))
                if re.search(r"[A-Za-z]{2,}", words) and words not in ALLOWED:
                    hard_coded.append((node.lineno, words))
    assert hard_coded == [], "use i18n keys (tr / i18n.text) for these"


@pytest.mark.parametrize("path", ["app.py", "specviz/render.py", "specviz/charts.py", "specviz/explain.py",
                                  "specviz/production.py"])
def test_no_english_phrase_outside_i18n(path):
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    skip = docstrings(tree)
    phrases = [(node.lineno, part) for node in ast.walk(tree) if id(node) not in skip
               for part in string_parts(node) if ENGLISH.search(part) and part not in ALLOWED]
    assert phrases == [], "user-visible text belongs in specviz/i18n.py"
