"""Training sequences: the target's own greedy answers, and existing answer text for volume.

A sequence is {"id", "source", "tokens", "answer_start"}: the chat-templated prompt then the answer.
Held-out ids (a fixed hash slice) are never trained on; they measure the heads offline.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Iterator

from .distill import DEFAULT_OUT as DISTILLED
from .prompts import _join, _jsonl, shared_data

HOLDOUT_EVERY = 20  # one id in 20 is held out


def held_out(seq_id: str) -> bool:
    """A stable 5% slice by id hash, the same in every session."""
    return int(hashlib.sha1(seq_id.encode()).hexdigest()[:8], 16) % HOLDOUT_EVERY == 0


def distilled(path: Path = DISTILLED) -> list[dict]:
    """The self-distilled greedy answers written so far (the file may still be growing)."""
    rows = []
    if not path.is_file():
        return rows
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a line being written right now
            continue
        rows.append({"id": "distill:" + row["id"], "source": row["source"],
                     "tokens": row["prompt_ids"] + row["answer_ids"], "answer_start": len(row["prompt_ids"])})
    return rows


def _pairs(root: Path) -> Iterator[tuple[str, str, str]]:
    """(source, prompt, human-written answer) from the shared data; prompts as in prompts.py."""
    more = root / "more"
    for i, r in enumerate(_jsonl(root / "gsm8k_train.jsonl")):
        yield "gsm8k", r["question"], re.sub(r"<<[^>]*>>", "", r["answer"]).replace("#### ", "The answer is ")
    for r in json.loads((root / "alpaca_data_cleaned_1000.json").read_text()):
        yield "alpaca", _join(r["instruction"], r["input"]), r["output"]
    for name, key in (("gpteacher_codegen_instruct_filtered.json", "response"),
                      ("gpteacher_roleplay_instruct.json", "response"), ("code_alpaca_2k_filtered.json", "output")):
        for r in json.loads((more / name).read_text()):
            yield name.split("_")[1], _join(r["instruction"], r.get("input", "")), r[key]
    for r in _jsonl(more / "t0_reading_comprehension_permissive.jsonl"):
        yield "t0", r["prompt"], r["completion"]
    for r in _jsonl(more / "scitldr_a_train.jsonl"):
        yield "scitldr", "Summarize this abstract in one sentence:\n\n" + " ".join(r["source"]), r["target"][0]
    for r in _jsonl(more / "rust_book_sections.jsonl"):
        yield "rust", f"Explain \"{r['heading']}\" in Rust.", r["text"]


def human_text(target, limit: int | None = None, max_answer_tokens: int = 320) -> list[dict]:
    """Existing answers, templated like the target's own: not self-distilled, but volume (the
    loss is against the target's distribution at every position, so any fluent text teaches)."""
    import random

    rows = []
    end = target.tokenizer.get_vocab().get("<|im_end|>", getattr(target.tokenizer, "eos_token_id", None))
    pairs = list(enumerate(_pairs(shared_data())))
    random.Random(0).shuffle(pairs)  # a fixed mix of every source
    for i, (source, prompt, answer) in pairs:
        if limit is not None and len(rows) >= limit:
            break
        if not answer or not answer.strip() or len(prompt) > 3000:
            continue
        prompt_ids = target.encode_prompt(prompt)
        answer_ids = target.tokenizer(answer.strip(), add_special_tokens=False)["input_ids"][:max_answer_tokens]
        rows.append({"id": f"human:{source}-{i}", "source": source, "tokens": prompt_ids + answer_ids + ([end] if end is not None else []),
                     "answer_start": len(prompt_ids)})
    return rows
