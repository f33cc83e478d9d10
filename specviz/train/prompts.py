"""Training prompts from ../shared/data (never Spec-Bench or MT-bench), mixed deterministically.

Each prompt is {"id", "source", "prompt"}; ids are stable so generation can resume.
"""
from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Iterator

LANGUAGES = ("French", "German", "Spanish", "Italian", "Portuguese")


def shared_data() -> Path:
    return Path(os.environ.get("SPECVIZ_SHARED_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))


def _jsonl(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _join(instruction: str, extra: str) -> str:
    return f"{instruction.strip()}\n\n{extra.strip()}" if extra and extra.strip() else instruction.strip()


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if 40 <= len(s.strip()) <= 200]


def all_prompts(root: Path | None = None) -> list[dict[str, str]]:
    """Every training prompt, in a fixed shuffled order (seed 0)."""
    root = root or shared_data()
    more = root / "more"
    rows: list[tuple[str, str]] = []
    rows += [("gsm8k", r["question"]) for r in list(_jsonl(root / "gsm8k_train.jsonl"))[:3000]]  # keep math from dominating
    rows += [("alpaca", _join(r["instruction"], r["input"]))
             for r in json.loads((root / "alpaca_data_cleaned_1000.json").read_text())]
    for r in _jsonl(root / "alpaca_seed_tasks.jsonl"):
        rows += [("seed", _join(r["instruction"], inst["input"])) for inst in r["instances"][:2]]
    for name in ("gpteacher_codegen_instruct_filtered.json", "gpteacher_roleplay_instruct.json",
                 "code_alpaca_2k_filtered.json"):
        rows += [(name.split("_")[0] + "-" + name.split("_")[1], _join(r["instruction"], r.get("input", "")))
                 for r in json.loads((more / name).read_text())]
    rows += [("t0", r["prompt"]) for r in _jsonl(more / "t0_reading_comprehension_permissive.jsonl")]
    rng = random.Random(0)
    for r in _jsonl(more / "scitldr_a_train.jsonl"):
        abstract = " ".join(r["source"])
        rows.append(("scitldr", rng.choice(["Summarize this abstract in one sentence:\n\n",
                                            "Write a short summary of the following text.\n\n",
                                            "Summarize the main idea of this passage:\n\n"]) + abstract))
        for sentence in _sentences(abstract)[:1]:
            rows.append(("translate", f"Translate into {rng.choice(LANGUAGES)}: \"{sentence}\""))
    for r in _jsonl(more / "sgd_train_dialogues_subset.jsonl"):
        rows.append(("sgd", r["turns"][0]["utterance"]))
    for r in _jsonl(more / "rust_book_sections.jsonl"):
        rows.append(("rust", f"Explain \"{r['heading']}\" in Rust in simple terms."))
        for sentence in _sentences(r["text"])[:1]:
            rows.append(("translate", f"Translate into {rng.choice(LANGUAGES)}: \"{sentence}\""))
    rows = [(source, text) for source, text in rows if 8 <= len(text) <= 4000]
    random.Random(0).shuffle(rows)
    return [{"id": f"{source}-{i}", "source": source, "prompt": text} for i, (source, text) in enumerate(rows)]
