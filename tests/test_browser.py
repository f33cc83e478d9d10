"""A real browser on the real app: headless Debian chromium driven by Playwright for Python.

Skipped (with the reason) only when /usr/bin/chromium or playwright is missing:
    apt-get install -y chromium && pip install playwright   (never `playwright install`)
Screenshots land in pytest's tmp_path, or in $SPECVIZ_SCREENSHOTS when it is set.
The tests share one page (one session) and run in file order; every run asks for 24 tokens.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

import app

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
PROMPT = "Write the word hello twenty times."
TIMEOUT_MS = 240_000

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)", allow_module_level=True)
try:
    from playwright.sync_api import Page, expect, sync_playwright
except ImportError:
    pytest.skip("playwright is not installed (pip install playwright)", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def page():
    demo, url = app.start_in_background(port=free_port())
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(TIMEOUT_MS)
            page.goto(url)
            page.wait_for_selector("#run-button")
            yield page
            browser.close()
    finally:
        demo.close()


@pytest.fixture
def shots(tmp_path) -> Path:
    folder = Path(os.environ.get("SPECVIZ_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def set_prompt(page: Page, prompt: str, max_new_tokens: int = 24) -> None:
    page.locator("#prompt textarea").fill(prompt)
    number = page.get_by_label("number input for max new tokens")
    number.fill(str(max_new_tokens))
    number.press("Tab")


def test_a_run_shows_coloured_tokens_charts_and_the_baseline_check(page: Page, shots: Path):
    set_prompt(page, PROMPT)
    page.locator("#run-button").click()
    expect(page.locator("#run-status")).to_contain_text("the baseline's speed", timeout=TIMEOUT_MS)
    stream = page.locator("#run-stream")
    assert stream.locator(".sv-round").count() > 1
    accepted = stream.locator(".sv-accepted").first
    assert accepted.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(187, 247, 208)"
    assert "target p =" in accepted.get_attribute("title")
    bonus = stream.locator(".sv-bonus").first
    assert bonus.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(191, 219, 254)"
    for rejected in stream.locator(".sv-rejected").all()[:3]:
        assert "line-through" in rejected.evaluate("e => getComputedStyle(e).textDecorationLine")
    expect(page.locator("#lossless")).to_contain_text("Identical to the baseline")
    plots = page.locator(".js-plotly-plot:visible")
    expect(plots).to_have_count(4)
    for i in range(4):
        assert plots.nth(i).locator("g.trace").count() >= 1  # every chart drew data
    page.screenshot(path=str(shots / "browser_live_run.png"), full_page=True)


def test_side_by_side_streams_columns_and_summarises(page: Page, shots: Path):
    page.get_by_role("tab", name="Side by side").click()
    page.locator("#compare-button").click()
    expect(page.locator("#compare-status")).to_contain_text("done", timeout=TIMEOUT_MS)
    summary = page.locator("#compare-summary")
    expect(summary).to_contain_text("identical to baseline")
    expect(summary).to_contain_text("ngram")
    expect(summary).to_contain_text("yes")
    expect(summary).not_to_contain_text("no (token")
    assert page.locator(".sv-column .sv-round").count() > 2
    page.screenshot(path=str(shots / "browser_side_by_side.png"), full_page=True)


def test_step_mode_narrates_one_round_per_click(page: Page, shots: Path):
    page.get_by_role("tab", name="Step by step (classroom)").click()
    page.locator("#step-prepare").click()
    narration = page.locator("#step-narration")
    expect(narration).to_contain_text("Round 1", timeout=TIMEOUT_MS)
    page.locator("#step-next").click()
    expect(narration).to_contain_text("Round 2")
    expect(narration).to_contain_text("one")  # "checked them all in one forward pass" or a plain step
    page.screenshot(path=str(shots / "browser_step_mode.png"), full_page=True)


def test_a_demo_trace_replays_and_steps_without_a_run(page: Page, shots: Path):
    page.get_by_role("tab", name="Replay a trace").click()
    page.locator("#replay-button").click()
    expect(page.locator("#replay-status")).to_contain_text("Trace", timeout=TIMEOUT_MS)
    narration = page.locator("#replay-narration")
    expect(narration).to_contain_text("Round 1", timeout=TIMEOUT_MS)
    assert page.locator(".sv-column .sv-round").count() > 2
    page.locator("#replay-next").click()
    expect(narration).to_contain_text("Round 2")
    page.screenshot(path=str(shots / "browser_replay.png"), full_page=True)
    page.locator("#language").get_by_text("中文").click()
    expect(page.get_by_role("tab", name="回放记录")).to_be_visible()
    expect(page.locator("#intro")).to_contain_text("推测解码")
    page.screenshot(path=str(shots / "browser_replay_zh.png"), full_page=True)
    page.locator("#language").get_by_text("English").click()
    expect(page.get_by_role("tab", name="Replay a trace")).to_be_visible()


def test_stop_cancels_a_long_run_and_the_page_runs_again(page: Page):
    page.get_by_role("tab", name="Live run").click()
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
    page.get_by_role("tab", name="Live run").click()
    page.locator("#prompt textarea").fill("")
    page.locator("#run-button").click()
    expect(page.get_by_text("The prompt is empty").first).to_be_visible(timeout=30_000)
    expect(page.locator("#run-button")).to_be_enabled()
    expect(page.locator("#run-stream .sv-round").first).to_be_visible()  # the last run is still shown
