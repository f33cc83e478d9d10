"""The training loop every head shares: seeded, resumable from its last checkpoint, a progress bar,
and a loss curve saved as a PNG."""
from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch


@dataclass(frozen=True)
class LoopConfig:
    steps: int = 2000  # optimizer steps in all (a resumed run continues up to this)
    lr: float = 1e-3  # peak learning rate (linear warmup, cosine decay to 10% over whichever budget ends first)
    warmup: int = 100  # warmup steps
    weight_decay: float = 0.0
    grad_clip: float = 0.5  # max gradient norm
    seed: int = 0  # seeds the initialisation and the batch order
    save_every: int = 200  # checkpoint every this many steps
    eval_every: int = 200  # held-out metrics every this many steps
    minutes: float = 0.0  # stop (after a checkpoint) once this run has trained this long; 0 = no limit


Batches = Callable[[int], Iterator[dict]]  # epoch -> batches of that epoch (seeded by the epoch)
LossFn = Callable[[dict], tuple[torch.Tensor, dict[str, float]]]


def schedule(step: int, config: LoopConfig, minutes: float = 0.0) -> float:
    """The learning rate's factor: linear warmup, then a cosine to 10% along whichever budget is further
    spent, the steps or this run's minutes, so that a run stopped by its time limit ends annealed too."""
    if step < config.warmup:
        return (step + 1) / config.warmup
    progress = (step - config.warmup) / max(1, config.steps - config.warmup)
    if config.minutes:
        progress = max(progress, minutes / config.minutes)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def train(model: torch.nn.Module, loss_fn: LossFn, batches: Batches, evaluate: Callable[[], dict[str, float]],
          config: LoopConfig, work: Path, name: str) -> dict:
    """Optimise model's trainable parameters; returns the history. Resumes from work/{name}.ckpt."""
    from tqdm import tqdm

    work.mkdir(parents=True, exist_ok=True)
    ckpt = work / f"{name}.ckpt"
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, betas=(0.9, 0.95), weight_decay=config.weight_decay)
    state = {"step": 0, "epoch": 0, "batch": 0, "history": [], "evals": [], "seconds": 0.0}
    if ckpt.is_file():
        saved = torch.load(ckpt, map_location="cpu", weights_only=True)
        model.load_state_dict(saved["model"], strict=False)  # frozen tensors are not saved
        optimizer.load_state_dict(saved["optimizer"])
        state = json.loads(saved["state"])
        print(f"[train] resuming {name} at step {state['step']}", file=sys.stderr)
    if not state["evals"]:  # where the run starts from (fresh, or --init's weights): the curve's first point
        model.eval()
        state["evals"].append({"step": state["step"], **evaluate()})
        print(f"[{name}] step {state['step']} (start): {state['evals'][-1]}", file=sys.stderr)
    start, began = state["seconds"], time.perf_counter()
    model.train()
    with tqdm(total=config.steps, initial=state["step"], desc=name, unit="step", file=sys.stderr) as bar:
        while state["step"] < config.steps:
            for index, batch in enumerate(batches(state["epoch"])):
                if index < state["batch"]:
                    continue  # resuming inside an epoch: skip what was already seen
                for group in optimizer.param_groups:
                    group["lr"] = config.lr * schedule(state["step"], config, (state["seconds"] - start) / 60)
                loss, metrics = loss_fn(batch)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, config.grad_clip)
                optimizer.step()
                state["step"] += 1
                state["batch"] = index + 1
                state["history"].append([state["step"], float(loss.detach())])
                bar.set_postfix(loss=f"{float(loss.detach()):.3f}", **{k: f"{v:.2f}" for k, v in metrics.items()})
                bar.update(1)
                state["seconds"] = start + time.perf_counter() - began
                done = state["step"] >= config.steps
                late = config.minutes and state["seconds"] - start > 60 * config.minutes
                if state["step"] % config.eval_every == 0 or done or late:
                    state["evals"].append({"step": state["step"], **evaluate()})
                    model.train()
                    bar.write(f"[{name}] step {state['step']}: {state['evals'][-1]}")
                if state["step"] % config.save_every == 0 or done or late:
                    _save(ckpt, model, optimizer, state)
                if done or late:
                    model.eval()
                    return state
            state["epoch"] += 1
            state["batch"] = 0
    model.eval()
    return state


def _save(path: Path, model, optimizer, state: dict) -> None:
    tmp = path.with_suffix(".tmp")
    frozen = {name for name, p in model.named_parameters() if not p.requires_grad}  # e.g. the target's own tensors
    weights = {k: v for k, v in model.state_dict().items() if k not in frozen}
    torch.save({"model": weights, "optimizer": optimizer.state_dict(), "state": json.dumps(state)}, tmp)
    tmp.replace(path)


def plot(state: dict, path: Path, title: str) -> None:
    """The loss curve (smoothed) and the held-out metrics, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [s for s, _ in state["history"]]
    losses = torch.tensor([l for _, l in state["history"]])
    window = max(1, len(losses) // 50)
    smooth = torch.nn.functional.avg_pool1d(losses[None, None], window, 1)[0, 0] if len(losses) >= window else losses
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(steps, losses.tolist(), alpha=0.25, label="loss")
    left.plot(steps[window - 1:], smooth.tolist(), label=f"mean of {window}")
    held = [e for e in state["evals"] if "loss" in e]
    if held:
        left.plot([e["step"] for e in held], [e["loss"] for e in held], "o-", label="held-out")
    left.set_xlabel("step")
    left.set_title(f"{title}: training loss")
    left.legend()
    keys = sorted({k for e in state["evals"] for k in e if k not in ("step", "loss")})
    for key in keys:
        right.plot([e["step"] for e in state["evals"]], [e.get(key) for e in state["evals"]], marker="o", label=key)
    right.set_xlabel("step")
    right.set_title("held-out: agreement with the target's next token")
    if keys:
        right.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def config_dict(config) -> dict:
    return asdict(config)
