"""Screenshot a finished side-by-side run for the README (assets/side_by_side.png).

    python scripts/screenshot.py                      # starts the app on the embedded model
    python scripts/screenshot.py --url http://127.0.0.1:7860/ --methods baseline,ngram,draft
    python scripts/screenshot.py --all                # also the live run and the step mode

Needs Debian's chromium (apt-get install chromium) and Playwright for Python (pip install playwright);
Playwright's own browser download is not used.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
PROMPT = "Write the word hello twenty times."


def set_prompt(page, prompt: str, max_new_tokens: int) -> None:
    page.wait_for_selector("#run-button", timeout=120_000)
    page.locator("#prompt textarea").fill(prompt)
    slider = page.get_by_label("number input for max new tokens")
    slider.fill(str(max_new_tokens))
    slider.press("Tab")


def wait_for_text(page, selector: str, text: str, timeout_s: float) -> None:
    page.wait_for_function("([sel, text]) => (document.querySelector(sel)?.innerText || '').includes(text)",
                           arg=[selector, text], timeout=timeout_s * 1000)


def side_by_side(page, methods: list[str], out: Path, timeout_s: float) -> None:
    page.get_by_role("tab", name="Side by side").click()
    boxes = page.locator("#compare-methods input[type=checkbox]")
    for i in range(boxes.count()):
        box = boxes.nth(i)
        name = box.evaluate("e => e.closest('label').innerText.trim()")
        if box.is_checked() != (name in methods):
            box.click()
    page.locator("#compare-button").click()
    wait_for_text(page, "#compare-status", "done", timeout_s)
    page.wait_for_timeout(1500)  # let the last charts draw
    page.screenshot(path=str(out), full_page=True)


def live_run(page, method: str, out: Path, timeout_s: float) -> None:
    page.get_by_role("tab", name="Live run").click()
    page.locator("#run-button").click()
    wait_for_text(page, "#run-status", "the baseline's speed", timeout_s)
    page.wait_for_timeout(1500)
    page.screenshot(path=str(out), full_page=True)


def step_mode(page, out: Path, timeout_s: float) -> None:
    page.get_by_role("tab", name="Step by step (classroom)").click()
    page.locator("#step-prepare").click()
    wait_for_text(page, "#step-narration", "Round 1", timeout_s)
    for _ in range(2):
        page.locator("#step-next").click()
    wait_for_text(page, "#step-narration", "Round 3", 30)
    page.screenshot(path=str(out), full_page=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", help="a running app; by default one is started on a free port")
    parser.add_argument("--out", type=Path, default=ROOT / "assets" / "side_by_side.png")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--methods", default="baseline,ngram", help="two to four, comma-separated")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--all", action="store_true", help="also live_run.png and step_mode.png beside --out")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for a run")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    demo = None
    url = args.url
    if url is None:
        sys.path.insert(0, str(ROOT))
        import app

        demo, url = app.start_in_background()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": args.width, "height": 1000})
            page.goto(url)
            set_prompt(page, args.prompt, args.max_new_tokens)
            side_by_side(page, args.methods.split(","), args.out, args.timeout)
            if args.all:
                live_run(page, "ngram", args.out.with_name("live_run.png"), args.timeout)
                step_mode(page, args.out.with_name("step_mode.png"), args.timeout)
            browser.close()
    finally:
        if demo is not None:
            demo.close()
    print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
