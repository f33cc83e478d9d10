"""python -m specviz.bench: every method on every prompt, in one process, as one table and one JSON.

Methods are interleaved prompt by prompt after a warm-up, so machine drift hits all alike; speedup
is each method's tokens/s over the baseline's in the same run (total tokens / total wall time).
"""
from __future__ import annotations

import argparse
import inspect
import json
import platform
import sys
import time
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from .config import RunConfig, SamplingConfig
from .engine import generate
from .events import summarize
from .serving import rounds_stats


def read_prompts(path: Path, limit: Optional[int] = None) -> list[dict[str, str]]:
    """`{"prompt", "category"}` lines, or the MT-bench / Spec-Bench layout (first turn of `turns`)."""
    prompts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        row = json.loads(line)
        text = row.get("prompt") or (row.get("turns") or [None])[0]
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{path}:{number}: no 'prompt' and no 'turns'")
        prompts.append({"prompt": text, "category": str(row.get("category") or "uncategorized")})
    return prompts[:limit] if limit else prompts


DTYPES = {"auto": None, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
Runner = Callable[[str], dict[str, Any]]  # prompt text -> {text, new_tokens, rounds, elapsed_s, proposed/accepted}


TYPICAL_KEYS = ("typical", "typical_epsilon", "typical_alpha")  # per method: Medusa's typical acceptance (lossy)


def parse_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """'eagle' or 'eagle:nodes=16:k=3' -> ("eagle", {"nodes": 16, "k": 3}): a method with options, for sweeps."""
    name, *pairs = spec.strip().split(":")
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"method option {pair!r} in {spec!r} is not KEY=VALUE")
        try:
            options[key] = int(value)
        except ValueError:
            try:
                options[key] = float(value)
            except ValueError:
                options[key] = value
    return name, options


def engine_runner(target, method: str, run: RunConfig, sampling: SamplingConfig, options: dict[str, Any]) -> Runner:
    def go(prompt: str) -> dict[str, Any]:
        stats_keys = ("new_tokens", "rounds", "elapsed_s", "proposed_tokens", "accepted_tokens")
        rounds = list(generate(target, method, prompt, run, sampling, **options))
        stats, spec = summarize(rounds), rounds_stats(rounds)  # spec: counted as vLLM counts (a draft = a round that guessed)
        drafts = spec.drafts if spec else 0
        return {"text": "".join(r.text for r in rounds), **{key: stats[key] for key in stats_keys}, "drafts": drafts,
                "accepted_per_pos": [round(share * drafts) for share in spec.acceptance_by_position] if spec else []}
    return go


def hf_runner(target, run: RunConfig, sampling: SamplingConfig, **generate_kwargs: Any) -> Runner:
    """transformers' own generate() on the same model, prompt and token budget (no per-round data)."""
    sample_kwargs = ({"do_sample": True, "temperature": sampling.temperature, "top_p": sampling.top_p}
                     if not sampling.greedy else {"do_sample": False})

    def go(prompt: str) -> dict[str, Any]:
        ids = torch.tensor([target.encode_prompt(prompt)], device=target.device)
        start = time.perf_counter()
        out = target.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=run.max_new_tokens,
                                    eos_token_id=sorted(target.eos_ids), pad_token_id=min(target.eos_ids),
                                    **sample_kwargs, **generate_kwargs)
        if target.device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        new = out[0, ids.shape[1]:].tolist()
        for i, token in enumerate(new):  # up to and with the first end-of-sequence token
            if token in target.eos_ids:
                new = new[: i + 1]
                break
        return {"text": target.decode(new), "new_tokens": len(new), "rounds": None, "elapsed_s": elapsed,
                "proposed_tokens": 0, "accepted_tokens": 0}
    return go


def run_bench(prompts: list[dict[str, str]], runners: dict[str, Runner], progress=None) -> dict[str, list[dict]]:
    """Run every runner on every prompt, interleaved prompt by prompt after a warm-up: per runner, one result
    per prompt (aggregate() turns them into the table; speedups are against the runner "baseline")."""
    for go in runners.values():  # warm-up: first-call costs (allocations, kernels) hit nobody's numbers
        go(prompts[0]["prompt"])
    per_prompt: dict[str, list[dict[str, Any]]] = {name: [] for name in runners}
    for row in prompts:
        for name, go in runners.items():
            per_prompt[name].append({"category": row["category"], **go(row["prompt"])})
            if progress:
                progress.update(1)
    return per_prompt


def _totals(results: list[dict[str, Any]]) -> dict[str, Optional[float]]:
    tokens = sum(r["new_tokens"] for r in results)
    seconds = sum(r["elapsed_s"] for r in results)
    rounds = [r["rounds"] for r in results]
    return {"tokens_per_s": tokens / seconds if seconds else 0.0,
            "mean_accepted_tokens": None if None in rounds else tokens / max(sum(rounds), 1)}


def _by_position(results: list[dict[str, Any]]) -> list[float]:
    """Accepted at position i / rounds that guessed, over all prompts (vLLM's counters' definition)."""
    drafts = sum(r.get("drafts", 0) for r in results)
    counts = [r.get("accepted_per_pos", []) for r in results]
    width = max(map(len, counts), default=0)
    return [sum(c[i] for c in counts if i < len(c)) / drafts for i in range(width)] if drafts else []


def aggregate(per_prompt: dict[str, list[dict[str, Any]]], greedy: bool) -> dict[str, Any]:
    base = per_prompt["baseline"]
    out: dict[str, Any] = {}
    for method, results in per_prompt.items():
        totals = _totals(results)
        proposed = sum(r["proposed_tokens"] for r in results)
        by_category = {}
        for category in sorted({r["category"] for r in results}):
            mine = _totals([r for r in results if r["category"] == category])
            theirs = _totals([r for r in base if r["category"] == category])
            by_category[category] = {"speedup": mine["tokens_per_s"] / theirs["tokens_per_s"],
                                     "mean_accepted_tokens": mine["mean_accepted_tokens"]}
        out[method] = {
            **totals,
            "speedup": totals["tokens_per_s"] / _totals(base)["tokens_per_s"],
            "acceptance_rate": sum(r["accepted_tokens"] for r in results) / proposed if proposed else None,
            "acceptance_by_position": _by_position(results),
            "identical_to_baseline": all(r["text"] == b["text"] for r, b in zip(results, base)) if greedy else None,
            "by_category": by_category,
            "prompts": results,
        }
    return out


def _num(value: Optional[float], spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(methods: dict[str, Any]) -> str:
    """A plain-text table: one row per method, then speedup / tau per category."""
    header = f"{'method':<18}{'tok/s':>8}{'speedup':>9}{'tau':>7}{'accept':>8}  identical"
    lines = [header, "-" * len(header)]
    for name, row in methods.items():
        same = {True: "yes", False: "NO", None: "n/a"}[row["identical_to_baseline"]]
        lines.append(f"{name:<18}{row['tokens_per_s']:>8.1f}{row['speedup']:>8.2f}x"
                     f"{_num(row['mean_accepted_tokens'], '.2f'):>7}{_num(row['acceptance_rate'], '.2f'):>8}  {same}")
    categories = sorted({c for row in methods.values() for c in row["by_category"]})
    lines += ["", "speedup / tau by category", f"{'method':<18}" + "".join(f"{c[:15]:>17}" for c in categories)]
    for name, row in methods.items():
        cells = [row["by_category"].get(c) for c in categories]
        lines.append(f"{name:<18}" + "".join(
            f"{_num(v['speedup'], '.2f') + 'x / ' + _num(v['mean_accepted_tokens'], '.2f'):>17}" if v else f"{'':>17}"
            for v in cells))
    lines += ["", "acceptance by position (accepted at position i / rounds that guessed)"]
    lines += [f"{name:<18}" + " ".join(f"{a:.2f}" for a in row["acceptance_by_position"])
              for name, row in methods.items() if row.get("acceptance_by_position")]
    return "\n".join(lines)


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m specviz.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=Path, default=Path(__file__).resolve().parent.parent / "demos" / "bench_prompts.jsonl",
                        help="JSONL of {prompt, category} or {question_id, category, turns}")
    parser.add_argument("--methods", default="baseline,ngram",
                        help="comma-separated; baseline always runs; options after colons, e.g. eagle:nodes=16:k=3; "
                             "medusa:typical=1 verifies with Medusa's typical acceptance (lossy, when sampling)")
    parser.add_argument("--max-new-tokens", type=int, default=100)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--k", type=int, default=4, help="speculative tokens per round")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N prompts")
    parser.add_argument("--model", default=None, help="target: a local folder or hub id (default: the embedded model)")
    parser.add_argument("--draft", default=None, help="draft model for method 'draft': a local folder or hub id")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="auto",
                        help="weights' dtype (auto: float32 on CPU, bfloat16 on CUDA)")
    parser.add_argument("--random-init", action="store_true",
                        help="--model is a folder with config.json + tokenizer only: time a randomly initialised model "
                             "of that shape (its text is meaningless, its speed is the shape's)")
    parser.add_argument("--compare-hf", action="store_true",
                        help="add transformers generate() rows: hf_greedy, hf_prompt_lookup, hf_assisted (with the draft)")
    parser.add_argument("--compare-vllm", action="store_true",
                        help="add vLLM's rows (vllm_greedy, vllm_ngram, vllm_draft, vllm_medusa, vllm_eagle) on the same "
                             "prompts: needs the vLLM environment of scripts/vllm_env.sh (or SPECVIZ_VLLM_PYTHON)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--sweep", default=None, metavar="PARAM=VALUES",
                        help="run the one method of --methods over a range instead: k=1..8 (chain length, for chain "
                             "methods such as ngram or draft) or nodes=1,2,4,8 (tree size: eagle, medusa, draft), "
                             "beside the formula's prediction with the verify cost measured here (docs/sweep.md)")
    parser.add_argument("--plot", type=Path, default=None, metavar="FILE",
                        help="with --sweep: write its figure here (.html; .png needs the kaleido package)")
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    """Exit status 0, or 2 with a one-line message for bad settings, an unknown method or a model that won't load."""
    from .models import ModelLoadError

    try:
        return bench_from_args(parse_args(argv))
    except (ValueError, ModelLoadError) as err:
        print(f"specviz.bench: {err}", file=sys.stderr)
        return 2


def bench_from_args(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from .methods import METHODS

    if args.threads:
        torch.set_num_threads(args.threads)
    specs = [m.strip() for m in args.methods.split(",") if m.strip()]
    prompts = read_prompts(args.prompts, args.limit)
    if not prompts:
        print(f"no prompts in {args.prompts}", file=sys.stderr)
        return 2
    run = RunConfig(max_new_tokens=args.max_new_tokens, k=args.k)
    sampling = SamplingConfig(temperature=args.temperature, top_p=args.top_p, seed=args.seed)
    run.validate()  # bad settings and unknown methods are refused before any model loads
    sampling.validate()
    parsed = {spec: parse_spec(spec) for spec in ["baseline"] + [m for m in specs if m != "baseline"]}
    unknown = [name for name, _ in parsed.values() if name not in METHODS]
    if unknown:
        raise ValueError(f"unknown method {unknown[0]!r}; known methods: {', '.join(METHODS)}")
    runs, samplings = {}, {}
    for spec, (name, options) in parsed.items():
        runs[spec], samplings[spec] = resolve_spec(spec, name, options, run, sampling)
    if args.random_init and not args.model:
        raise ValueError("--random-init needs --model FOLDER (a config.json and a tokenizer)")
    if args.sweep:
        return sweep_from_args(args, parsed, runs, samplings, prompts)
    if args.plot:
        raise ValueError("--plot draws a sweep's figure: it needs --sweep")
    target, draft = load_models(args)
    runners = {spec: engine_runner(target, name, runs[spec], samplings[spec],
                                   {**(draft if name == "draft" else {}), **options})
               for spec, (name, options) in parsed.items()}
    if args.compare_hf:
        runners.update(hf_runners(target, run, sampling, draft))
    with tqdm(total=len(prompts) * len(runners), desc="bench", unit="run", file=sys.stderr) as progress:
        per_prompt = run_bench(prompts, runners, progress)
    if args.compare_vllm:
        per_prompt.update(vllm_rows(target, prompts, run, sampling, args.threads))
    results = aggregate(per_prompt, sampling.greedy)
    print(format_table(results))
    memory = peak_memory_mb(target.device)
    print(f"\npeak memory: {memory:.0f} MB ({describe_device(target.device)}, {target.dtype}); "
          f"model weights {model_mb(target.model):.0f} MB")
    if args.out:
        report = {"model": target.name, "device": describe_device(target.device), "dtype": str(target.dtype),
                  "peak_memory_mb": round(memory), "weights_mb": round(model_mb(target.model)),
                  "max_new_tokens": args.max_new_tokens, "temperature": args.temperature, "k": args.k,
                  "threads": torch.get_num_threads(), "prompts": str(args.prompts), "methods": results}
        args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


def resolve_spec(spec: str, name: str, options: dict[str, Any], run: RunConfig,
                 sampling: SamplingConfig) -> tuple[RunConfig, SamplingConfig]:
    """Check a method's options and move RunConfig's and typical acceptance's out of `options` (in place)
    into the spec's own run and sampling settings."""
    from .methods import REGISTRY

    run_keys = {f.name for f in fields(RunConfig)}  # k, adaptive_k, fallback_threshold, ...
    known = set(inspect.signature(REGISTRY[name].make).parameters) - {"target", "sampling"}
    unknown_options = sorted(set(options) - known - run_keys - set(TYPICAL_KEYS))
    if unknown_options:
        raise ValueError(f"method {name!r} has no option {unknown_options[0]!r}; "
                         f"its options: {', '.join(sorted(known))}, RunConfig's: {', '.join(sorted(run_keys))}, "
                         f"and {', '.join(TYPICAL_KEYS)}")
    run = replace(run, **{key: options.pop(key) for key in list(options) if key in run_keys})
    run.validate()
    sampling = replace(sampling, **{key: options.pop(key) for key in TYPICAL_KEYS if key in options})
    if sampling.typical not in (0, 1):
        raise ValueError(f"{spec!r}: typical must be 0 or 1, got {sampling.typical!r}")
    sampling = replace(sampling, typical=bool(sampling.typical))
    sampling.validate()
    return run, sampling


def load_models(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The target as --model, --dtype and --random-init say, and {"draft": the --draft model} when given."""
    from .models import load_target, random_target

    dtype = DTYPES[args.dtype]
    target = random_target(args.model, dtype=dtype) if args.random_init else load_target(args.model, dtype=dtype)
    return target, ({"draft": load_target(args.draft)} if args.draft else {})


def sweep_from_args(args: argparse.Namespace, parsed: dict[str, tuple[str, dict[str, Any]]],
                    runs: dict[str, RunConfig], samplings: dict[str, SamplingConfig], prompts: list[dict[str, str]]) -> int:
    """--sweep: the one method of --methods over the swept values; a table, and JSON / a figure when asked."""
    from tqdm import tqdm

    from .methods import REGISTRY
    from .sweep import format_sweep_table, parse_sweep, run_sweep, sweep_figure, verify_cost

    sweep = parse_sweep(args.sweep)
    specs = [spec for spec in parsed if spec != "baseline"]
    if len(specs) != 1:
        raise ValueError(f"--sweep runs one method against the baseline: name exactly one in --methods, got {len(specs)}")
    if args.compare_hf:
        raise ValueError("--compare-hf adds whole methods to a benchmark; a sweep has none to compare")
    spec = specs[0]
    name, options = parsed[spec]
    if sweep.param in parse_spec(spec)[1]:
        raise ValueError(f"{sweep.param} is swept: do not also set it in {spec!r}")
    if sweep.param == "k":
        for value in sweep.values:
            replace(runs[spec], k=value).validate()
    elif "nodes" not in inspect.signature(REGISTRY[name].make).parameters:
        raise ValueError(f"method {name!r} has no tree size to sweep; nodes can be swept for "
                         + ", ".join(n for n, m in REGISTRY.items() if "nodes" in inspect.signature(m.make).parameters))
    if args.plot:
        check_plot_path(args.plot)
    target, draft = load_models(args)
    options = {**(draft if name == "draft" else {}), **options}
    costs = verify_cost(target, [sweep.verify_tokens(v) for v in sweep.values], chain=sweep.param == "k")
    total = 2 + len(prompts) * (1 + len(sweep.values))
    with tqdm(total=total, desc=f"sweep {sweep.param}", unit="run", file=sys.stderr) as progress:
        rows = run_sweep(target, name, [p["prompt"] for p in prompts], sweep, runs[spec], samplings[spec], options,
                         costs, progress=progress.update)
    print(format_sweep_table(rows))
    print("\nc_v(n), a verify forward over n new tokens / over 1, on a 256-token cache: "
          + ", ".join(f"{n}: {c:.2f}" for n, c in costs.items()))
    if args.out:
        report = {"model": target.name, "device": describe_device(target.device), "dtype": str(target.dtype),
                  "method": spec, "param": sweep.param, "values": list(sweep.values),
                  "max_new_tokens": args.max_new_tokens, "temperature": args.temperature, "k": runs[spec].k,
                  "threads": torch.get_num_threads(), "prompts": str(args.prompts), "n_prompts": len(prompts),
                  "verify_context": 256, "verify_cost": {str(n): c for n, c in costs.items()}, "rows": rows}
        args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
    if args.plot:
        fig = sweep_figure(rows, costs, method=spec)
        if args.plot.suffix.lower() == ".html":
            fig.write_html(args.plot, include_plotlyjs="cdn")  # a small file; plotly.js comes from its CDN
        else:
            fig.write_image(args.plot)
    return 0


def check_plot_path(path: Path) -> None:
    """--plot FILE: .html always works; an image format needs plotly's kaleido package."""
    suffix = path.suffix.lower()
    if suffix == ".html":
        return
    if suffix not in (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".webp"):
        raise ValueError(f"--plot {path}: write .html (or .png, .svg, .pdf with kaleido installed)")
    try:
        import kaleido  # noqa: F401
    except ImportError:
        raise ValueError(f"--plot {path}: images need the kaleido package, which is not installed; "
                         f"write .html instead") from None


def hf_runners(target, run: RunConfig, sampling: SamplingConfig, draft_options: dict[str, Any]) -> dict[str, Runner]:
    """transformers' greedy, prompt lookup (same k, same longest n-gram) and, where a draft exists, assisted."""
    from .methods import make_proposer

    runners = {"hf_greedy": hf_runner(target, run, sampling),
               "hf_prompt_lookup": hf_runner(target, run, sampling, prompt_lookup_num_tokens=run.k,
                                             max_matching_ngram_size=3)}
    try:
        draft_model = make_proposer("draft", target, sampling, **draft_options).model
    except ValueError as err:
        print(f"hf_assisted skipped: {err}", file=sys.stderr)
    else:
        runners["hf_assisted"] = hf_runner(target, run, sampling, assistant_model=draft_model)
    return runners


VLLM_ROWS = ("baseline", "ngram", "draft", "medusa", "eagle")  # vllm_greedy, vllm_ngram, ...


def vllm_rows(target, prompts: list[dict[str, str]], run: RunConfig, sampling: SamplingConfig,
              threads: Optional[int]) -> dict[str, list[dict[str, Any]]]:
    """vLLM, the production peer, on the same prompts (the same token ids), token budget and sampling, batch 1:
    one engine started per row with the settings specviz.production exports for that method, the shipped
    weights written by export-vllm. Results in run_bench's per-prompt form, plus vLLM's acceptance per position.
    A row vLLM refuses is left out with its reason (the others still run)."""
    import tempfile

    from . import peer, production
    from .models import embedded_folder
    from .train.export import export_vllm

    if not target.name.startswith("embedded:"):
        raise ValueError("--compare-vllm runs the embedded model (vLLM serves its float32 folder)")
    if (why := peer.missing_reason()) is not None:
        raise ValueError(f"--compare-vllm: {why}")
    prompt_ids = [target.encode_prompt(row["prompt"]) for row in prompts]
    rows: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="specviz-exports-") as tmp:
        folders = {}
        for method in ("draft", "medusa", "eagle"):
            export_vllm(method, Path(tmp) / method, target=target)
            folders[production.exported_folder(method)] = str(Path(tmp) / method)
        for method in VLLM_ROWS:
            d = production.deployment(method, target.name, run, sampling)
            name = "vllm_greedy" if method == "baseline" else f"vllm_{method}"
            print(f"[bench] starting vLLM for {name} ...", file=sys.stderr)
            try:
                result = peer.run_vllm(peer.local_llm(d.vllm_llm, str(embedded_folder()), folders), d.vllm_sampling,
                                       prompt_ids, threads=threads)
            except peer.PeerError as err:
                print(f"[bench] {name} skipped: {err}", file=sys.stderr)
                continue
            rows[name] = [{"category": row["category"], "text": r.text, "new_tokens": len(r.token_ids),
                           "rounds": r.target_forwards, "elapsed_s": r.seconds,
                           "proposed_tokens": r.counters["draft_tokens"], "accepted_tokens": r.counters["accepted"],
                           "drafts": r.counters["drafts"], "accepted_per_pos": r.counters["accepted_per_pos"]}
                          for row, r in zip(prompts, result.runs)]
    return rows


def peak_memory_mb(device: torch.device) -> float:
    """Peak memory of this process: GPU memory allocated on CUDA, resident set size on CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2 ** 20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def model_mb(model: torch.nn.Module) -> float:
    return sum(t.numel() * t.element_size() for t in {id(p): p for p in model.parameters()}.values()) / 2 ** 20


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


if __name__ == "__main__":
    raise SystemExit(main())
