"""End to end: the app on the embedded model, called through gradio_client like any script would.

Bounded: every request asks for at most 24 tokens. The first run of the session downloads the
embedded model once (~30 s); later runs load it in seconds.
"""
from __future__ import annotations


import pytest
from gradio_client import Client

import app
from scripts.image import free_port
from specviz.events import Round, summarize

PROMPT = "Write the line \"I will not talk in class.\" three times, one per line."


@pytest.fixture(scope="module")
def client():
    demo, url = app.start_in_background(port=free_port())
    try:
        yield Client(url, verbose=False)
    finally:
        demo.close()


def test_speculate_returns_text_rounds_and_metrics(client):
    out = client.predict(PROMPT, "ngram", 24, 0.0, api_name="/speculate")
    assert set(out) >= {"text", "rounds", "metrics"}
    rounds = [Round.from_dict(d) for d in out["rounds"]]
    assert rounds and all(r.method == "ngram" for r in rounds)
    assert out["text"] == "".join(r.text for r in rounds) and out["text"].strip()
    assert sum(len(r.emitted) for r in rounds) == rounds[-1].tokens_so_far <= 24
    assert all(len(r.status) == len(r.tokens) == len(r.target_probs) for r in rounds)
    metrics = out["metrics"]
    expected = summarize(rounds)
    for key in ("acceptance_rate", "mean_accepted_tokens", "tokens_per_s", "new_tokens", "rounds"):
        assert metrics[key] == pytest.approx(expected[key])
    assert metrics["tokens_per_s"] > 0


def test_greedy_speculative_text_equals_the_baseline(client):
    spec = client.predict(PROMPT, "ngram", 24, 0.0, api_name="/speculate")
    base = client.predict(PROMPT, "baseline", 24, 0.0, api_name="/speculate")
    assert spec["text"] == base["text"]
    assert [t for r in spec["rounds"] for t in r["emitted"]] == [t for r in base["rounds"] for t in r["emitted"]]
    assert all(not r["tokens"] for r in base["rounds"])
    assert spec["metrics"]["rounds"] <= base["metrics"]["rounds"]


@pytest.mark.parametrize("args, message", [
    (("", "ngram", 24, 0.0), "prompt is empty"),
    (("Hello", "telepathy", 24, 0.0), "Unknown method"),
    (("Hello", "ngram", app.MAX_NEW_TOKENS + 1, 0.0), "max_new_tokens"),
    (("Hello", "ngram", 24, -0.5), "temperature"),
])
def test_invalid_values_raise_an_error_on_the_client(client, args, message):
    with pytest.raises(Exception, match=message):
        client.predict(*args, api_name="/speculate")


def test_optional_arguments_and_sampling(client):
    out = client.predict("Say hello.", "ngram", 8, 0.8, 3, 0.9, 7, api_name="/speculate")
    again = client.predict("Say hello.", "ngram", 8, 0.8, 3, 0.9, 7, api_name="/speculate")
    assert out["text"] == again["text"]  # the seed makes sampling reproducible
    assert all(r["k"] == 3 for r in out["rounds"] if r["mode"] == "speculate")


def test_requests_from_several_clients_queue_and_all_finish(client):
    jobs = [client.submit(f"Say the number {n}.", "ngram", 6, 0.0, api_name="/speculate") for n in range(3)]
    results = [job.result(timeout=120) for job in jobs]
    assert all(r["metrics"]["new_tokens"] >= 1 for r in results)


def test_tree_nodes_set_the_size_of_eagle_trees(client):
    small = client.predict(PROMPT, "eagle", 16, 0.0, 4, 1.0, 0, 2, api_name="/speculate")
    wide = client.predict(PROMPT, "eagle", 16, 0.0, 4, 1.0, 0, 12, api_name="/speculate")
    sizes = lambda out: {len(r["tokens"]) for r in out["rounds"] if r["mode"] == "speculate"}  # noqa: E731
    assert max(sizes(small)) <= 2 and max(sizes(wide)) > 2 and max(sizes(wide)) <= 12
    assert small["text"] == wide["text"]  # greedy: the tree size changes the speed, never the text
