"""Many users at once (issue 6): concurrent gradio_client sessions against the app on loopback.

Bounded in count and time: eight clients, 12 tokens each on the embedded model, and every wait has a
timeout. A second app with a slow fake engine and a queue of two shows the "queue is full" refusal.
"""
from __future__ import annotations

import threading
import time

import pytest
from gradio_client import Client

import app
from specviz.config import RunConfig, SamplingConfig
from specviz.engine import generate
from test_app import FakeBackend
from test_app_e2e import free_port

TOKENS = 12
PROMPTS = [
    "Name three colours.",
    "What is 7 times 8?",
    "Translate 'good morning' into French.",
    "Write a haiku about rain.",
    "Repeat: one two three, one two three,",
    "def add(a, b):",
    "emoji \U0001f600 and \u05e9\u05dc\u05d5\u05dd, then \u4e2d\u6587",
    "List the days of the week.",
]


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


@pytest.fixture(scope="module")
def url():
    demo, url = app.start_in_background(port=free_port())
    try:
        yield url
    finally:
        demo.close()


def test_eight_clients_at_once_each_get_exactly_their_own_text(url, capfd):
    target = app.load_model(app.EMBEDDED)  # the server's own copy: loaded once, shared read-only
    alone = {p: "".join(r.text for r in generate(target, "baseline", p, RunConfig(max_new_tokens=TOKENS),
                                                 SamplingConfig())) for p in PROMPTS}
    before = rss_mb()
    results: dict[int, dict] = {}

    def one_user(n: int) -> None:  # its own client, hence its own session
        method = ("ngram", "baseline")[n % 2]
        results[n] = Client(url, verbose=False).submit(PROMPTS[n], method, TOKENS, 0.0,
                                                       api_name="/speculate").result(timeout=150)

    users = [threading.Thread(target=one_user, args=(n,)) for n in range(len(PROMPTS))]
    start = time.perf_counter()
    for user in users:
        user.start()
    for user in users:
        user.join(timeout=180)
    assert time.perf_counter() - start < 180 and len(results) == len(PROMPTS)
    for n, prompt in enumerate(PROMPTS):
        assert results[n]["method"] == ("ngram", "baseline")[n % 2]
        assert results[n]["text"] == alone[prompt], prompt  # greedy: the baseline's text, no cross-talk
        assert 1 <= results[n]["metrics"]["new_tokens"] <= TOKENS
    assert rss_mb() - before < 400  # memory stays bounded: nothing per request outlives it
    logs = capfd.readouterr()
    assert not any(p in logs.out + logs.err for p in PROMPTS)  # no prompt in the server's output


class Slow(FakeBackend):
    """Canned rounds, a fifth of a second each, so requests pile up in the queue."""

    limits = app.Limits(queue_size=2)

    def stream(self, req):
        for r in super().stream(req):
            time.sleep(0.2)
            yield r


def test_a_full_queue_answers_busy_and_the_server_recovers():
    demo, url = app.start_in_background(Slow(), port=free_port())
    try:
        client = Client(url, verbose=False)
        jobs = [client.submit("hi", "ngram", 40, 0.0, api_name="/speculate") for _ in range(8)]
        outcomes = []
        for job in jobs:
            try:
                outcomes.append(job.result(timeout=60)["metrics"]["new_tokens"])
            except Exception as err:  # the client raises the server's refusal
                outcomes.append(str(err))
        busy = [o for o in outcomes if isinstance(o, str)]
        assert busy and all("Queue is full" in o for o in busy), outcomes
        assert 40 in outcomes  # the requests that got in ran to the end
        assert client.predict("hi", "ngram", 8, 0.0, api_name="/speculate")["metrics"]["new_tokens"] == 8
    finally:
        demo.close()
