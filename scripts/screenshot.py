"""Screenshots of the app for the README (assets/), and the page actions the browser test shares.

    python scripts/screenshot.py                      # assets/side_by_side.png: a finished side-by-side run
    python scripts/screenshot.py --url http://127.0.0.1:7860/ --methods baseline,ngram,draft
    python scripts/screenshot.py --all                # also live_run, step_mode, replay, calculator, replay_zh
    python scripts/screenshot.py --views engine,sweep --engine-url http://127.0.0.1:8000   # only those tabs

Needs Debian's chromium (apt-get install chromium fonts-noto-cjk) and Playwright for Python (pip install
playwright); Playwright's own browser download is not used. tests/test_browser.py drives the page with the
functions below, so what the README shows is what the test checks.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
PROMPT = json.loads((ROOT / "demos" / "prompts.jsonl").read_text(encoding="utf-8").splitlines()[0])["prompt"]  # the page's own
VIEWPORT = {"width": 1400, "height": 1000}


def launch(pw, url: str, width: int = VIEWPORT["width"], locale: str = "en-US"):
    """A headless chromium page on the app, its controls ready. Returns (browser, page)."""
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    page = browser.new_page(viewport={**VIEWPORT, "width": width}, locale=locale)
    page.goto(url)
    page.wait_for_selector("#run-button", timeout=120_000)
    return browser, page


def wait_for_text(page, selector: str, text: str, timeout_s: float) -> None:
    page.wait_for_function("([sel, text]) => (document.querySelector(sel)?.innerText || '').includes(text)",
                           arg=[selector, text], timeout=timeout_s * 1000)


def open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()


def set_number(page, label: str, value: float) -> None:
    """A slider's number box, found by its label."""
    box = page.get_by_label(f"number input for {label}")
    box.fill(str(value))
    box.press("Tab")


def set_prompt(page, prompt: str, max_new_tokens: int) -> None:
    page.locator("#prompt textarea").fill(prompt)
    set_number(page, "max new tokens", max_new_tokens)


def choose_methods(page, methods: list[str]) -> None:
    boxes = page.locator("#compare-methods input[type=checkbox]")
    for i in range(boxes.count()):
        box = boxes.nth(i)
        name = box.evaluate("e => e.closest('label').innerText.trim()")
        if box.is_checked() != (name in methods):
            box.click()


def side_by_side(page, methods: list[str], timeout_s: float) -> None:
    open_tab(page, "Side by side")
    choose_methods(page, methods)
    page.locator("#compare-button").click()
    wait_for_text(page, "#compare-status", "done", timeout_s)


def live_run(page, timeout_s: float) -> None:
    """Run the live tab and wait for this run's speedup (not the one a previous run left in the status)."""
    open_tab(page, "Live run")
    page.locator("#run-button").click()
    page.wait_for_function("() => !(document.querySelector('#run-status')?.innerText || '').includes(\"the baseline's speed\")",
                           timeout=timeout_s * 1000)
    wait_for_text(page, "#run-status", "the baseline's speed", timeout_s)


def step_mode(page, timeout_s: float, steps: int = 2) -> None:
    open_tab(page, "Step by step (classroom)")
    page.locator("#step-prepare").click()
    wait_for_text(page, "#step-narration", "Round 1", timeout_s)
    for n in range(steps):
        page.locator("#step-next").click()
        wait_for_text(page, "#step-narration", f"Round {n + 2}", 30)


def replay(page, demo: str, speed: float, timeout_s: float) -> None:
    """Play a shipped trace in the Replay tab until its step mode shows round 1."""
    open_tab(page, "Replay a trace")
    page.locator("#replay-demo input").click()
    page.get_by_role("option", name=demo, exact=True).click()
    set_number(page, "speed (1 = as recorded, 0 = at once)", speed)
    page.locator("#replay-button").click()
    wait_for_text(page, "#replay-narration", "Round 1", timeout_s)


def choose_method(page, method: str) -> None:
    page.locator("#method input").first.click()
    page.get_by_role("option", name=method, exact=True).click()


def production_engine(page, method: str, timeout_s: float) -> None:
    """Send the page's prompt to the first allowed server in the Production engine tab, wait for both sides."""
    choose_method(page, method)
    open_tab(page, "Production engine")
    page.locator("#engine-button").click()
    wait_for_text(page, "#engine-status", "Done", timeout_s)


def sweep(page, values: str, timeout_s: float) -> None:
    open_tab(page, "Sweep")
    page.locator("#sweep-range textarea, #sweep-range input").first.fill(values)
    page.locator("#sweep-button").click()
    wait_for_text(page, "#sweep-status", "Done", timeout_s)


def why_panel(page, timeout_s: float, trace: str = "spelling_sampling_t0.5", run: str = "draft",
              steps: int = 3) -> None:
    """The Why panel on a shipped sampled trace: its draft run in the replay's step mode, a few rounds in."""
    replay(page, trace, 0, timeout_s)
    page.locator("#replay-run input").click()
    page.get_by_role("option", name=run, exact=True).click()
    page.locator("#replay-step").click()
    wait_for_text(page, "#replay-narration", "Round 1", 30)
    for n in range(steps):
        page.locator("#replay-next").click()
        wait_for_text(page, "#replay-narration", f"Round {n + 2}", 30)
    page.locator("#replay-why").scroll_into_view_if_needed()


def switch_language(page, choice: str) -> None:
    page.locator("#language").get_by_text(choice, exact=True).click()


def shoot(page, out: Path) -> None:
    page.wait_for_timeout(1500)  # let the last charts draw
    page.screenshot(path=str(out), full_page=True)


def shoot_views(page, views: list[str], args: argparse.Namespace, beside) -> None:
    """The tabs named in --views, each finished in English, then the page switched to Chinese."""
    for view in views:
        if view == "engine":
            production_engine(page, args.engine_method, args.timeout)
        elif view == "sweep":
            sweep(page, args.sweep_values, args.timeout)
        elif view == "why":
            why_panel(page, args.timeout)
        elif view == "oracle":  # the teaching ceiling: its slider shows, a live run against the formula
            choose_method(page, "oracle")
            live_run(page, args.timeout)
        else:
            raise SystemExit(f"unknown view {view!r}: engine, sweep, why or oracle")
        shoot(page, beside(f"{view}.png"))
        switch_language(page, "中文")
        shoot(page, beside(f"{view}_zh.png"))
        switch_language(page, "English")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running app; by default one is started on a free port")
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "side_by_side.png")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--methods", default="baseline,ngram", help="two to four, comma-separated")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--width", type=int, default=VIEWPORT["width"])
    parser.add_argument("--all", action="store_true", help="also the other views, beside --out")
    parser.add_argument("--trace", default="eagle", help="the demo trace --all replays")
    parser.add_argument("--views", default="", help="only these, beside --out: engine (needs an allowed server: "
                        "SPECVIZ_ENGINES), sweep, why, oracle; each also in Chinese")
    parser.add_argument("--engine-method", default="ngram", help="the method the engine view compares")
    parser.add_argument("--sweep-values", default="1..4", help="the k values the sweep view runs")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for a run")
    parser.add_argument("--time-budget", type=float, default=600,
                        help="the started app's time budget per run (s): a busy machine should not cut the baseline")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    demo = None
    url = args.url
    if url is None:
        sys.path.insert(0, str(ROOT))
        import app

        limits = app.replace(app.limits_from_env(), time_budget_s=args.time_budget)
        demo, url = app.start_in_background(app.EngineBackend(app.model_choices(limits.public), limits))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    beside = args.out.with_name
    try:
        with sync_playwright() as pw:
            browser, page = launch(pw, url, args.width)
            set_prompt(page, args.prompt, args.max_new_tokens)
            views = [v for v in args.views.split(",") if v]
            if views:
                shoot_views(page, views, args, beside)
                browser.close()
                return 0
            side_by_side(page, args.methods.split(","), args.timeout)
            shoot(page, args.out)
            if args.all:
                live_run(page, args.timeout)
                shoot(page, beside("live_run.png"))
                step_mode(page, args.timeout, steps=7)  # round 8: past the opening plain steps, guesses kept
                shoot(page, beside("step_mode.png"))
                replay(page, args.trace, 0, args.timeout)
                shoot(page, beside("replay.png"))
                open_tab(page, "Cost and return")
                shoot(page, beside("calculator.png"))
                switch_language(page, "中文")
                open_tab(page, "回放记录")
                shoot(page, beside("replay_zh.png"))
            browser.close()
    finally:
        if demo is not None:
            demo.close()
    print(f"saved {args.out}" + (" and the other views beside it" if args.all else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
