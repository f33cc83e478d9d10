"""python -m specviz.train {features,eagle,medusa,draft,card}: self-distilled heads for the embedded target.

  features  the target runs once over its own greedy answers (assets/train_data) and, optionally,
            existing answer text from shared/data; features are cached under --work (resumable)
  eagle     trains the EAGLE-2 head (reduced draft vocabulary) on the cached features
  medusa    trains Medusa-1 heads (residual blocks on the shared LM head)
  draft     distils a few of the target's layers into a standalone draft LM
  export-vllm  writes eagle / medusa / draft weights in the layouts vLLM loads (specviz/train/export.py)
  card      writes the tau measured by `python -m specviz.bench --out FILE` into the shipped cards
Each training run is seeded, resumable (checkpoint in --work), shows a progress bar, saves a loss
curve PNG and writes safetensors + config.json + card.json into assets/{method}/ (or --out).
--init FOLDER continues shipped weights on a machine without the checkpoint (a fresh optimiser and
learning-rate schedule); the card adds the steps and time those weights had already had.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Optional

import torch

from ..assets import ASSETS, read_card, signature, write_json
from .loop import LoopConfig, config_dict, plot, train

LICENCE = ("Trained on answers that SmolLM2-135M-Instruct wrote itself (prompts from GSM8K train, MIT; Alpaca-1000 "
           "and Code Alpaca, CC BY-NC 4.0; GPTeacher, MIT; T0 reading comprehension, CC BY / CC BY-SA / MIT per row; "
           "SciTLDR, Apache-2.0 repo / unclear card; SGD, CC BY-SA 4.0; Rust book, MIT/Apache-2.0), plus, with "
           "--human, those datasets' own answer text. Contains non-commercial data: fine for a teaching demo; "
           "retrain on the permissive sources for commercial use. Never trained on Spec-Bench or MT-bench.")


def default_work() -> Path:
    from ..models import cache_dir

    return cache_dir() / "train"


def features_main(args: argparse.Namespace) -> int:
    from ..models import load_target
    from . import data, features

    target = load_target(device=torch.device(args.device), dtype=torch.float32)
    rows = data.distilled()
    if args.human:
        rows += data.human_text(target, limit=args.human)
    folder, layers = feature_cache(args, target)
    added = features.extract(target, rows, folder, layers=layers, batch_tokens=args.batch_tokens)
    print(f"added {added} tokens of features in {folder}", file=sys.stderr)
    return 0


def feature_cache(args: argparse.Namespace, target) -> tuple[Path, tuple[int, ...]]:
    """Where the features live and which hidden states they keep: the last one (EAGLE-1/2, Medusa, draft), or
    with --eagle3 the low, middle and high ones that an EAGLE-3 head reads, then the last one (its teacher)."""
    from ..methods.eagle import feature_layers

    if not getattr(args, "eagle3", False):
        return args.work / "features", (-1,)
    return args.work / "features-eagle3", feature_layers(target.model.config.num_hidden_layers, True) + (-1,)


def _setup(args: argparse.Namespace):
    from ..models import load_target
    from . import features
    from .heads import draft_vocabulary

    torch.manual_seed(args.seed)
    target = load_target(device=torch.device(args.device), dtype=torch.float32)
    folder, layers = feature_cache(args, target)
    train_feats = features.load(folder, layers, split="train", sources=args.sources)
    try:
        held = features.load(folder, layers, split="heldout", sources="distill")  # the target's own answers
    except ValueError:
        held = features.load(folder, layers, split="heldout")  # none distilled cached yet: any held-out text
    draft_ids = draft_vocabulary(train_feats, args.vocab, target.vocab_size)
    data = {"sequences": len(train_feats.spans), "tokens": train_feats.n_tokens,
            "distilled_sequences": sum(i.startswith("distill:") for i in train_feats.ids),
            "human_sequences": sum(i.startswith("human:") for i in train_feats.ids),
            "heldout_sequences": len(held.spans), "heldout_tokens": held.n_tokens, "sources": args.sources,
            "draft_vocab": len(draft_ids)}
    print(f"[train] {data}", file=sys.stderr)
    return target, train_feats, held, draft_ids, data


INIT_FILES = ("model.safetensors", "medusa_lm_head.safetensors")


@dataclass(frozen=True)
class Start:
    """What a run continues. weights: its checkpoint's (the loop resumes it) or --init's; card: --init's card on a
    fresh start from it (the weights still to be copied in); before: the training those weights already had."""

    weights: Optional[dict] = None
    card: Optional[dict] = None
    before: Optional[dict] = None


def _previous(args: argparse.Namespace, name: str) -> Start:
    """The checkpoint in --work when there is one; else, with --init FOLDER, that folder's weights and card (its
    training record is kept in --work, so that a resumed run still counts it); else a fresh start."""
    ckpt, record = args.work / f"{name}.ckpt", args.work / f"{name}.continues.json"
    if ckpt.is_file():
        before = json.loads(record.read_text()) if record.is_file() else None
        # mmap: the loop reads the checkpoint again to resume; here only the draft vocabulary (d2t) is looked at
        return Start(torch.load(ckpt, map_location="cpu", weights_only=True, mmap=True)["model"], None, before)
    record.unlink(missing_ok=True)
    if args.init is None:
        return Start()
    from ..assets import first_file, read_tensors

    card = read_card(args.init)
    if card is None:
        raise SystemExit(f"--init {args.init}: no card.json there (a folder written by python -m specviz.train)")
    before = card.get("training") or {}
    write_json(record, before)
    return Start(read_tensors(first_file(args.init, INIT_FILES)), card, before)


def _resumed_vocabulary(weights: Optional[dict], draft_ids: torch.Tensor, data: dict) -> torch.Tensor:
    """A continued head keeps the draft vocabulary it was trained with (new data would pick other rows)."""
    d2t = None if weights is None else weights.get("d2t")
    if d2t is None:
        return draft_ids
    kept = torch.arange(len(d2t)) + d2t
    if not torch.equal(kept, draft_ids):
        print(f"[train] continuing: keeping the weights' draft vocabulary ({len(kept)} rows, "
              f"{len(set(kept.tolist()) - set(draft_ids.tolist()))} differ from this data's choice)", file=sys.stderr)
    data["draft_vocab"] = len(kept)
    return kept


def _start_from(model: torch.nn.Module, start: Start, target, where, grown: tuple[str, ...] = ()) -> None:
    """A fresh start from --init: check the card's target, then copy the weights into every trainable tensor
    (but those under the prefixes `grown`: parts added to the architecture, started by the caller)."""
    if start.card is None:
        return
    from ..assets import check_target

    check_target(start.card, target, str(where))
    own = model.state_dict()
    missing = [n for n, p in model.named_parameters()
               if p.requires_grad and n not in start.weights and not n.startswith(grown)]
    wrong = [k for k, v in start.weights.items() if k not in own or own[k].shape != v.shape]
    if missing or wrong:
        raise SystemExit(f"--init {where}: those weights do not fit this model (missing: {missing[:3]}, "
                         f"unexpected or of another shape: {wrong[:3]}); give the architecture they were trained with")
    with torch.no_grad():
        for key, value in start.weights.items():
            own[key].copy_(value)
    print(f"[train] starting from {where} ({start.before.get('steps', '?')} steps)", file=sys.stderr)


def _loop_config(args: argparse.Namespace) -> LoopConfig:
    return LoopConfig(steps=args.steps, lr=args.lr, warmup=min(100, args.steps // 10), seed=args.seed,
                      minutes=args.minutes, eval_every=args.eval_every, save_every=args.eval_every)


def _card(method: str, target, data: dict, state: dict, args: argparse.Namespace, before: Optional[dict] = None,
          **extra) -> dict:
    """The card; `before` is the training record of the weights this run continued (--init): steps and seconds
    are then the totals, and the record is kept under "continues"."""
    training = {"steps": state["step"], "seconds": round(state["seconds"]), "threads": torch.get_num_threads(),
                "loop": config_dict(_loop_config(args)),
                "args": {k: str(v) for k, v in vars(args).items() if k not in ("work", "out")}}
    if before:
        training.update(steps=before.get("steps", 0) + state["step"], seconds=before.get("seconds", 0) + training["seconds"],
                        this_run={"steps": state["step"], "seconds": training["seconds"]}, continues=before)
    return {"method": method, "target": signature(target), "data": data, "training": training,
            "heldout": state["evals"][-1] if state["evals"] else {},
            "heldout_start": state["evals"][0] if len(state["evals"]) > 1 else {}, "licence": LICENCE,
            "made": time.strftime("%Y-%m-%d"), **extra}


def _finish(name: str, state: dict, out: Path, args) -> None:
    plot(state, out / "loss.png", name)
    print(f"[train] {name}: {state['step']} steps in {state['seconds'] / 60:.1f} min; held-out {state['evals'][-1]}; "
          f"weights in {out}", file=sys.stderr)


def _growth(args: argparse.Namespace, start: Start, flag: str, wanted: Optional[int], had: int,
            refusal: str) -> tuple[int, range]:
    """How many layers a run builds when its start has `had`: `wanted` (the flag's value), by default `had`. A resumed
    checkpoint keeps its own architecture and --init's only grows. Returns the count and the indices of the layers
    added to --init's (the caller starts them as the identity)."""
    resuming = start.weights is not None and start.card is None
    if resuming and wanted not in (None, had):
        raise SystemExit(f"{flag} {wanted}: the checkpoint in {args.work} has {had}")
    n_layers = wanted or had
    if n_layers < had:
        raise SystemExit(f"{flag} {n_layers}: --init {args.init} has {had} {refusal}")
    return n_layers, range(had, n_layers) if start.card is not None else range(0)


def _eagle_head(args: argparse.Namespace, target, start: Start, draft_ids: torch.Tensor):
    """The head a run trains, with --init's weights copied in. It has --head-layers decoder layers (default: as
    many as the weights it continues); layers beyond --init's start as the identity (zero output projections),
    so the grown head drafts as the one it grew from, and training then finds a use for them."""
    from ..methods.eagle import layer_count, new_head

    had = 1 if args.eagle3 or start.weights is None else layer_count(start.weights)
    n_layers, added = _growth(args, start, "--head-layers", args.head_layers, had, "layers; a head only grows")
    if args.eagle3 and args.head_layers not in (None, 1):
        raise SystemExit("--head-layers is for EAGLE-1/2 heads: an EAGLE-3 head has one layer")
    head = new_head(target, eagle3=args.eagle3, draft_ids=draft_ids, seed=args.seed, n_layers=n_layers)
    head = head.float().to(target.device)
    with torch.no_grad():  # layers added to --init's start as the identity: the grown head drafts as it did
        for i in added:
            for linear in (head.layers[i].self_attn.o_proj, head.layers[i].mlp.down_proj):
                linear.weight.zero_()
                if linear.bias is not None:
                    linear.bias.zero_()
    if args.init_last_layer:
        if args.eagle3:
            raise SystemExit("--init-last-layer is for EAGLE-1/2 heads: an EAGLE-3 layer attends over 2H inputs")
        last = target.model.model.layers[-1]
        head.layers[0].self_attn.load_state_dict(last.self_attn.state_dict())
        head.layers[0].mlp.load_state_dict(last.mlp.state_dict())
        head.layers[0].post_attention_layernorm.load_state_dict(last.post_attention_layernorm.state_dict())
    _start_from(head, start, target, args.init, tuple(f"layers.{i}." for i in added))
    return head


def eagle_main(args: argparse.Namespace) -> int:
    from ..methods.eagle import save_eagle
    from .heads import eagle_loss, lm_rows, mean_metrics, sequence_batches

    target, feats, held, draft_ids, data = _setup(args)
    name = "eagle3" if args.eagle3 else "eagle"
    start = _previous(args, name)
    draft_ids = _resumed_vocabulary(start.weights, draft_ids, data)
    device = target.device
    layers = feature_cache(args, target)[1]
    head = _eagle_head(args, target, start, draft_ids)
    n_layers = len(head.stack)
    embed, rows, ids = target.model.get_input_embeddings(), lm_rows(target, draft_ids), draft_ids.to(device)
    loss = partial(eagle_loss, head, embed, rows, ids, steps=args.ttt, noise=args.noise, ce_weight=args.ce_weight,
                   prompt_weight=args.prompt_weight)
    held_loss = partial(eagle_loss, head, embed, rows, ids, steps=args.ttt)
    evaluate = lambda: mean_metrics(held_loss, sequence_batches(held, args.batch_tokens, 0, layers,  # noqa: E731
                                                                device=device)(0))
    state = train(head, loss, sequence_batches(feats, args.batch_tokens, args.seed, layers,
                                               distill_repeat=args.distill_repeat, device=device),
                  evaluate, _loop_config(args), args.work, name)
    architecture = ("EAGLE-2 drafting with an EAGLE-3 head (fused low/middle/high features, own norm and LM head over "
                    "a reduced draft vocabulary, d2t/t2d)" if args.eagle3 else
                    f"EAGLE-2 (EAGLE-1 layer layout, {n_layers} decoder layer{'s' * (n_layers > 1)}) with a reduced "
                    "draft vocabulary (d2t)")
    save_eagle(args.out, head.cpu(), _card("eagle", target, data, state, args, start.before, architecture=architecture,
                                           feature_layers=list(layers)))
    _finish(name, state, args.out, args)
    return 0


def _medusa_heads(args: argparse.Namespace, target, start: Start):
    """The heads a run trains, with --init's weights copied in. Each has --layers residual blocks (default: as many as
    the weights it continues); blocks beyond --init's start as the identity (a zero W: x + SiLU(0) = x), so the grown
    heads guess as the ones they grew from."""
    from ..methods.medusa import MedusaHeads, medusa_shape

    had = 1 if start.weights is None else medusa_shape(start.weights)[1]
    n_layers, added = _growth(args, start, "--layers", args.layers, had, "blocks per head; heads only grow")
    heads = MedusaHeads(target.model.config.hidden_size, args.heads, n_layers).to(target.device)
    _start_from(heads, start, target, args.init, tuple(f"{h}.{i}." for h in range(args.heads) for i in added))
    return heads


def medusa_main(args: argparse.Namespace) -> int:
    from ..methods.medusa import save_medusa
    from .heads import lm_rows, mean_metrics, medusa_batches, medusa_loss, medusa_rank_accuracy

    target, feats, held, draft_ids, data = _setup(args)
    device = target.device
    start = _previous(args, "medusa")
    heads = _medusa_heads(args, target, start)
    rows = lm_rows(target, draft_ids)
    loss = partial(medusa_loss, heads, rows, draft_ids.to(device), off_greedy_weight=args.off_greedy_weight)
    held_loss = partial(medusa_loss, heads, rows, draft_ids.to(device))
    evaluate = lambda: mean_metrics(held_loss, medusa_batches(held, args.heads, 2048, 0, device=device)(0), limit=10)  # noqa: E731
    state = train(heads, loss, medusa_batches(feats, args.heads, args.batch_tokens, args.seed, args.distill_repeat,
                                              device=device), evaluate, _loop_config(args), args.work, "medusa")
    accuracy = medusa_rank_accuracy(heads, target.model.get_output_embeddings().weight.detach(), held)
    print(f"[train] rank accuracy (held-out): {[[round(a, 3) for a in row[:4]] for row in accuracy]}", file=sys.stderr)
    save_medusa(args.out, heads.cpu(), _card("medusa", target, data, state, args, start.before, rank_accuracy=accuracy,
                                       architecture=f"Medusa-1, {args.heads} heads x {heads.n_layers} ResBlock"
                                                    f"{'s' * (heads.n_layers > 1)}, shared LM head"))
    _finish("medusa", state, args.out, args)
    return 0


def draft_main(args: argparse.Namespace) -> int:
    from safetensors.torch import save_file

    from .draft import build_draft, draft_loss, trainable_state
    from .heads import lm_rows, mean_metrics, sequence_batches

    target, feats, held, draft_ids, data = _setup(args)
    layers = [int(i) for i in args.draft_layers.split(",")]
    device = target.device
    model = build_draft(target, layers, args.shared)
    start = _previous(args, "draft")
    _start_from(model, start, target, args.init)
    rows = lm_rows(target, draft_ids)
    loss = partial(draft_loss, model, rows, draft_ids.to(device))
    evaluate = lambda: mean_metrics(loss, sequence_batches(held, args.batch_tokens, 0, device=device)(0))  # noqa: E731
    state = train(model, loss, sequence_batches(feats, args.batch_tokens, args.seed, distill_repeat=args.distill_repeat,
                                                device=device), evaluate, _loop_config(args), args.work, "draft")
    args.out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().to("cpu", torch.float16).contiguous() for k, v in trainable_state(model).items()},
              str(args.out / "model.safetensors"))
    write_json(args.out / "config.json", model.config.to_dict())
    write_json(args.out / "card.json", _card(
        "draft", target, data, state, args, start.before, layers_from_target=layers, shared_target_layers=args.shared,
        architecture=f"LlamaForCausalLM of {len(layers)} layers started from the target's {layers}; the first "
                     f"{args.shared} and the embedding/LM head are the target's own tensors (frozen, not stored), "
                     "the others were distilled; `python -m specviz.train export-draft FOLDER` writes a "
                     "self-contained copy for transformers' assistant_model"))
    _finish("draft", state, args.out, args)
    return 0


def export_main(args: argparse.Namespace) -> int:
    """A self-contained copy of the shipped draft (embedding included) for transformers' assistant_model: the
    same folder export-vllm writes for vLLM's draft_model."""
    from .export import export_vllm

    export_vllm("draft", args.folder, args.source)
    return 0


def export_vllm_main(args: argparse.Namespace) -> int:
    from .export import export_vllm

    export_vllm(args.which, args.folder, args.source)
    return 0


def card_main(args: argparse.Namespace) -> int:
    """Copy each method's tau (overall and per category) from a bench JSON into its shipped card: one entry per
    bench row of that method ("eagle", "eagle:nodes=48", ...), replacing what an earlier bench wrote."""
    from ..bench import parse_spec

    report = json.loads(args.results.read_text())
    rows: dict[str, list] = {}
    for spec, row in report["methods"].items():
        if "weights" in parse_spec(spec)[1]:
            continue  # other weights than the shipped ones
        rows.setdefault(spec.split(":")[0], []).append(
            {"method": spec, "tau": round(row["mean_accepted_tokens"], 3),
             "identical_to_baseline": row["identical_to_baseline"], "speedup": round(row["speedup"], 3),
             "tau_by_category": {c: round(v["mean_accepted_tokens"], 3) for c, v in row["by_category"].items()}})
    for method, runs in rows.items():
        card = read_card(ASSETS / method)
        if card is None:
            continue
        card.pop("bench_note", None)
        card["bench"] = {"prompts": Path(report["prompts"]).name, "max_new_tokens": report["max_new_tokens"],
                         "temperature": report["temperature"], "k": report["k"], "device": report.get("device"),
                         "made": time.strftime("%Y-%m-%d"), "runs": runs}
        write_json(ASSETS / method / "card.json", card)
        taus = ", ".join(f"{r['method']} {r['tau']}" for r in runs)
        print(f"[train] {method}: tau {taus}", file=sys.stderr)
    return 0


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m specviz.train", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--work", type=Path, default=default_work(), help="feature cache and checkpoints")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 keeps the machine usable)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda: where the target and the trained weights live")
    sub = parser.add_subparsers(dest="command", required=True)
    feat = sub.add_parser("features", help="cache the target's features over the training data")
    feat.add_argument("--human", type=int, default=0, help="also featurise this many human-written answers")
    feat.add_argument("--batch-tokens", type=int, default=2048)
    feat.add_argument("--eagle3", action="store_true", help="keep the hidden states an EAGLE-3 head reads (own folder)")
    for name, steps, lr, batch in (("eagle", 3000, 1e-3, 4096), ("medusa", 1500, 1e-3, 2048), ("draft", 1500, 5e-4, 4096)):
        p = sub.add_parser(name, help=f"train the {name} weights")
        p.add_argument("--out", type=Path, default=ASSETS / name, help="where the weights and card go")
        p.add_argument("--steps", type=int, default=steps)
        p.add_argument("--minutes", type=float, default=25.0,
                       help="stop after this long (0 = no limit); the learning rate anneals by then")
        p.add_argument("--lr", type=float, default=lr)
        p.add_argument("--batch-tokens", type=int, default=batch, help="tokens (positions for medusa) per batch")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--vocab", type=int, default=8192, help="draft vocabulary: rows scored in the loss")
        p.add_argument("--sources", choices=("all", "distill", "human"), default="all")
        p.add_argument("--eval-every", type=int, default=200)
        p.add_argument("--distill-repeat", type=int, default=2, help="show the target's own answers this often per epoch")
        p.add_argument("--init", type=Path, help="without a checkpoint in --work: start from these weights (a folder "
                                                 "this command wrote, e.g. assets/NAME) and count their training")
    sub.choices["eagle"].add_argument("--ttt", type=int, default=3, help="draft steps unrolled in training")
    sub.choices["eagle"].add_argument("--noise", type=float, default=0.05, help="relative uniform feature noise")
    sub.choices["eagle"].add_argument("--ce-weight", type=float, default=0.5)
    sub.choices["eagle"].add_argument("--prompt-weight", type=float, default=1.0,
                                      help="loss weight of positions whose root token is in the prompt (drafting sees answers: 1)")
    sub.choices["eagle"].add_argument("--head-layers", type=int,
                                      help="decoder layers (default: those of the weights continued, else 1); more "
                                           "than --init's grows it, the new layers starting as the identity")
    sub.choices["eagle"].add_argument("--eagle3", action="store_true",
                                      help="an EAGLE-3 head on fused low/middle/high features (features --eagle3 first)")
    sub.choices["eagle"].add_argument("--init-last-layer", action="store_true",
                                      help="start the head's layer as a copy of the target's last layer")
    sub.choices["medusa"].add_argument("--heads", type=int, default=4)
    sub.choices["medusa"].add_argument("--layers", type=int,
                                       help="residual blocks per head (default: those of the weights continued, else 1); "
                                            "more than --init's grows them, the new blocks starting as the identity")
    sub.choices["medusa"].add_argument("--off-greedy-weight", type=float, default=0.0,
                                       help="loss weight of positions where the tokens before a head's guess are not the "
                                            "target's own greedy ones (prompts, human text): drafting never sees them")
    sub.choices["draft"].add_argument("--draft-layers", default="0,1,2,3,4,5,28,29",
                                      help="target layers the draft starts from")
    sub.choices["draft"].add_argument("--shared", type=int, default=6,
                                      help="the first SHARED of those stay the target's own (frozen, not stored)")
    export = sub.add_parser("export-draft", help="write a self-contained draft folder for transformers")
    export.add_argument("folder", type=Path)
    export.add_argument("--source", type=Path, default=ASSETS / "draft")
    vllm = sub.add_parser("export-vllm", help="write weights in the layout vLLM loads (speculative_config model=FOLDER)")
    vllm.add_argument("which", choices=("eagle", "medusa", "draft"))
    vllm.add_argument("folder", type=Path)
    vllm.add_argument("--source", type=Path, help="weights to export (default: the shipped ones in assets/)")
    card = sub.add_parser("card", help="record bench results in the shipped cards")
    card.add_argument("results", type=Path, help="JSON written by python -m specviz.bench --out")
    return parser.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    commands = {"features": features_main, "eagle": eagle_main, "medusa": medusa_main, "draft": draft_main,
                "export-draft": export_main, "export-vllm": export_vllm_main, "card": card_main}
    return commands[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
