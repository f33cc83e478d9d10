"""A real browser on the real app: headless Debian chromium driven by Playwright for Python.

Skipped (with the reason) only when /usr/bin/chromium or playwright is missing:
    apt-get install -y chromium fonts-noto-cjk && pip install playwright   (never `playwright install`)
Screenshots land in pytest's tmp_path, or in $SPECVIZ_SCREENSHOTS when it is set. The page actions are
scripts/screenshot.py's, the ones that make the README's screenshots.
The tests share one page (one session) and run in file order; every run asks for 24 tokens.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import app
from scripts.image import free_port
from scripts.screenshot import (CHROMIUM, choose_methods, launch, live_run, open_tab, replay, set_prompt, shoot,
                                side_by_side, step_mode, switch_language, wait_for_text)

PROMPT = "Write the word hello twenty times."
TIMEOUT_MS = 240_000
TIMEOUT_S = TIMEOUT_MS / 1000

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)", allow_module_level=True)
try:
    from playwright.sync_api import Page, expect, sync_playwright
except ImportError:
    pytest.skip("playwright is not installed (pip install playwright)", allow_module_level=True)


@pytest.fixture(scope="module")
def server():
    demo, url = app.start_in_background(port=free_port())
    try:
        with sync_playwright() as pw:
            yield pw, url
    finally:
        demo.close()


@pytest.fixture(scope="module")
def page(server):
    pw, url = server
    browser, page = launch(pw, url)
    page.set_default_timeout(TIMEOUT_MS)
    yield page
    browser.close()


@pytest.fixture
def shots(tmp_path) -> Path:
    folder = Path(os.environ.get("SPECVIZ_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def expect_charts(page: Page, count: int = 4) -> None:
    """The visible tab's charts are drawn, each with data."""
    plots = page.locator(".js-plotly-plot:visible")
    expect(plots).to_have_count(count)
    for i in range(count):
        assert plots.nth(i).locator("g.trace").count() >= 1


def expect_coloured_tokens(area) -> None:
    """Kept guesses green, bonus tokens blue, rejected ones struck through; hover text on every guess."""
    assert area.locator(".sv-round").count() > 2
    accepted = area.locator(".sv-accepted").first
    assert accepted.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(187, 247, 208)"
    assert "target p =" in accepted.get_attribute("title")
    bonus = area.locator(".sv-bonus").first
    assert bonus.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(191, 219, 254)"
    for rejected in area.locator(".sv-rejected").all()[:3]:
        assert "line-through" in rejected.evaluate("e => getComputedStyle(e).textDecorationLine")


def tau_of(status: str) -> float:
    """tau from a headline "N tokens in M target forwards (tau X)"."""
    found = re.search(r"target forwards \(tau ([0-9.]+)\)", status)
    assert found, status
    return float(found.group(1))


def test_the_page_opens_on_an_example_whose_first_run_shows_the_point(page: Page, shots: Path):
    """A visitor presses Run without typing: the first example, the default method, and tau above 2; a second
    run clears the first one's baseline check and formula while it streams (no stale panel)."""
    first = json.loads(app.DEMOS.read_text(encoding="utf-8").splitlines()[0])["prompt"]
    expect(page.locator("#prompt textarea")).to_have_value(first)
    live_run(page, TIMEOUT_S)
    status = page.locator("#run-status").inner_text()
    assert tau_of(status) > 2, status
    expect(page.locator("#lossless")).to_contain_text("Identical to the baseline")
    shoot(page, shots / "browser_first_run.png")
    page.locator("#run-button").click()
    page.wait_for_function("() => !(document.querySelector('#lossless')?.innerText || '').trim()"
                           " && !(document.querySelector('#formula')?.innerText || '').trim()", timeout=60_000)
    page.wait_for_function("() => !(document.querySelector('#run-status')?.innerText || '').includes(\"the baseline's speed\")",
                           timeout=60_000)
    wait_for_text(page, "#run-status", "the baseline's speed", TIMEOUT_S)
    expect(page.locator("#lossless")).to_contain_text("Identical to the baseline")


def test_a_run_shows_coloured_tokens_charts_and_the_baseline_check(page: Page, shots: Path):
    set_prompt(page, PROMPT, 24)
    live_run(page, TIMEOUT_S)
    expect_coloured_tokens(page.locator("#run-stream"))
    expect(page.locator("#lossless")).to_contain_text("Identical to the baseline")
    expect_charts(page)
    shoot(page, shots / "browser_live_run.png")


def test_side_by_side_streams_columns_and_summarises(page: Page, shots: Path):
    open_tab(page, "Side by side")
    boxes = page.locator("#compare-methods input[type=checkbox]")
    choose_methods(page, ["baseline", "ngram", "draft", "medusa", "eagle"])  # one more than fits
    expect(page.locator("#compare-status")).to_contain_text("At most 4 methods")
    expect(page.locator("#compare-methods input[type=checkbox]:checked")).to_have_count(4)
    assert boxes.count() >= 5
    side_by_side(page, ["baseline", "ngram"], TIMEOUT_S)
    summary = page.locator("#compare-summary")
    expect(summary).to_contain_text("identical to baseline")
    expect(summary).to_contain_text("ngram")
    expect(summary).to_contain_text("yes")
    expect(summary).not_to_contain_text("no (token")
    assert page.locator(".sv-column .sv-round:visible").count() > 2
    shoot(page, shots / "browser_side_by_side.png")


def test_step_mode_narrates_one_round_per_click(page: Page, shots: Path):
    step_mode(page, TIMEOUT_S, steps=1)
    expect(page.locator("#step-narration")).to_contain_text("one")  # "in one forward pass" or a plain step
    shoot(page, shots / "browser_step_mode.png")


def test_a_shipped_trace_plays_with_colours_charts_and_steps(page: Page, shots: Path):
    replay(page, "eagle", 10, TIMEOUT_S)
    status = page.locator("#replay-status")  # each tree run is named with its largest tree
    expect(status).to_contain_text("Trace of baseline, eagle (trees of up to 48 nodes), medusa (trees of up to 40")
    expect(status).to_contain_text("draft (trees of up to 48 nodes)")
    columns = page.locator("div.block.sv-column:visible")  # gradio puts the class on the block and its content
    expect(columns).to_have_count(4)
    expect_coloured_tokens(columns.nth(1))
    expect(page.locator("#replay-summary")).to_contain_text("eagle")
    expect_charts(page)
    narration = page.locator("#replay-narration")
    page.locator("#replay-next").click()
    expect(narration).to_contain_text("Round 2")
    expect(narration).to_contain_text("eagle")  # step mode starts on the first method that guesses
    expect(page.locator("#replay-tree svg")).to_be_visible()  # its candidate tree
    shoot(page, shots / "browser_replay.png")


def test_the_calculator_is_prefilled_from_the_replayed_run(page: Page, shots: Path):
    open_tab(page, "Cost and return")
    expect(page.locator("#calc-source input")).to_have_value(re.compile(r"#\d+ replay: eagle"))
    expect(page.locator("#calc-note")).to_contain_text("Filled in from eagle")
    expect(page.locator("#calc-result")).to_contain_text("Return on investment")
    expect_charts(page, 1)
    k = page.get_by_label("number input for k: guesses per round")
    k.fill("8")
    k.press("Tab")
    expect(page.locator("#calc-result")).to_contain_text("/ (8·")
    shoot(page, shots / "browser_calculator.png")


def test_the_language_switch_changes_labels_charts_and_narration(page: Page, shots: Path):
    switch_language(page, "中文")
    open_tab(page, "回放记录")
    expect(page.locator("#intro")).to_contain_text("推测解码")
    expect(page.get_by_role("button", name="回放", exact=True)).to_be_visible()
    expect(page.get_by_label("number input for k：每轮推测的 token 数")).to_be_visible()
    expect(page.locator("#replay-summary")).to_contain_text("与基线相同")
    expect(page.locator("#replay-narration")).to_contain_text("第 2 轮")
    expect(page.locator("#replay-status")).to_contain_text("记录")
    expect(page.locator(".js-plotly-plot:visible .gtitle").first).to_have_text("接受率")
    shoot(page, shots / "browser_replay_zh.png")
    open_tab(page, "成本与收益")
    expect(page.locator("#calc-result")).to_contain_text("投资回报率")
    shoot(page, shots / "browser_calculator_zh.png")
    switch_language(page, "English")
    expect(page.get_by_role("tab", name="Replay a trace")).to_be_visible()
    expect(page.locator("#replay-narration")).to_contain_text("Round 2")


def test_a_chinese_browser_gets_the_chinese_page(server):
    pw, url = server
    browser, page = launch(pw, url, locale="zh-CN")
    try:
        expect(page.locator("#language input[value='中文']")).to_be_checked(timeout=30_000)
        expect(page.locator("#intro")).to_contain_text("推测解码")
        expect(page.get_by_role("tab", name="实时运行")).to_be_visible()
    finally:
        browser.close()


def test_stop_cancels_a_long_run_and_the_page_runs_again(page: Page):
    open_tab(page, "Live run")
    set_prompt(page, "Count from 1 to 40, separated by commas.", max_new_tokens=400)
    page.locator("#run-button").click()
    rounds = page.locator("#run-stream .sv-round")
    page.wait_for_function("() => document.querySelectorAll('#run-stream .sv-round').length >= 3")
    page.get_by_role("button", name="Stop").first.click()
    expect(page.locator("#run-status")).to_contain_text("stopped")
    page.wait_for_timeout(2000)
    shown = rounds.count()
    page.wait_for_timeout(2000)
    assert rounds.count() == shown  # nothing streams after the stop
    set_prompt(page, PROMPT, max_new_tokens=8)
    page.locator("#run-button").click()
    expect(page.locator("#run-status")).to_contain_text("the baseline's speed", timeout=TIMEOUT_MS)


def test_an_empty_prompt_shows_an_error_and_the_page_survives(page: Page):
    open_tab(page, "Live run")
    page.locator("#prompt textarea").fill("")
    page.locator("#run-button").click()
    expect(page.locator("#run-status")).to_contain_text("The prompt is empty", timeout=30_000)
    expect(page.locator("#run-button")).to_be_enabled()
    expect(page.locator("#run-stream .sv-round").first).to_be_visible()  # the last run is still shown
    expect(page.locator("[data-testid='status-tracker'] span.error")).to_have_count(0)  # no red "Error" pills
