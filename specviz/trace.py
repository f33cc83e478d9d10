"""Traces: a finished run (one method, or a side-by-side comparison) saved as small JSON, and loaded back.

A trace is the run's Round records plus what is needed to read them: the prompt, the model id, the
settings and the library versions. Replaying one needs no model, so no torch here.

Format (version 1):
    {"format": "specviz-trace", "version": 1, "created": ISO time, "model": str, "prompt": str,
     "run": RunConfig fields, "sampling": SamplingConfig fields, "versions": {package: version},
     "runs": {label: [Round.to_dict(), ...]}}
Unknown fields anywhere are ignored, so a newer file with additions still loads; a file whose
`version` is newer than this module's, or that lacks a required field, is refused with a message
saying which.
"""
from __future__ import annotations

import dataclasses
import json
import platform
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Union

from .config import RunConfig, SamplingConfig
from .events import Round

FORMAT = "specviz-trace"
VERSION = 1  # bump when a field changes meaning; additions alone need no bump
REQUIRED = ("model", "prompt", "runs")
PACKAGES = ("specviz", "torch", "transformers", "gradio")


class TraceError(ValueError):
    """A file that is not a trace this version of specviz can read; the message says why."""


@dataclass(frozen=True)
class Trace:
    model: str  # the target model id the rounds were recorded on
    prompt: str
    runs: dict[str, list[Round]]  # label (the method) -> its rounds, in the order they ran
    run: RunConfig = RunConfig()
    sampling: SamplingConfig = SamplingConfig()
    versions: dict[str, str] = field(default_factory=dict)  # library versions at recording time
    created: str = ""  # UTC, ISO 8601

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "created": self.created or _now(), "model": self.model,
                "prompt": self.prompt, "run": dataclasses.asdict(self.run),
                "sampling": dataclasses.asdict(self.sampling), "versions": self.versions or versions(),
                "runs": {label: [r.to_dict() for r in rounds] for label, rounds in self.runs.items()}}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def versions() -> dict[str, str]:
    """Installed versions of the libraries that shape a run (read from metadata: nothing is imported)."""
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def dumps(trace: Trace) -> str:
    return json.dumps(trace.to_dict(), ensure_ascii=False, separators=(",", ":"))


def save(trace: Trace, path: Union[str, Path]) -> Path:
    path = Path(path)
    path.write_text(dumps(trace), encoding="utf-8")
    return path


def _known(cls: type, data: Any, where: str) -> Any:
    """A frozen dataclass from a dict, ignoring unknown keys; a missing required key -> TraceError."""
    if not isinstance(data, dict):
        raise TraceError(f"{where} must be an object, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(cls)}
    try:
        return cls(**{k: v for k, v in data.items() if k in names})
    except TypeError as err:
        needed = [f.name for f in dataclasses.fields(cls) if f.name not in data
                  and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        raise TraceError(f"{where} lacks required field(s) {', '.join(needed) or '?'} ({err})") from None


def from_dict(data: Any) -> Trace:
    """Validate a parsed trace and build it. Raises TraceError with a reason a user can act on."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TraceError(f"not a specviz trace: the file has no \"format\": \"{FORMAT}\" field")
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise TraceError(f"the trace's version {version!r} is not a positive whole number")
    if version > VERSION:
        raise TraceError(f"the trace is format version {version}, written by a newer specviz; this one reads "
                         f"versions up to {VERSION}: upgrade specviz to replay it")
    missing = [name for name in REQUIRED if name not in data]
    if missing:
        raise TraceError(f"the trace lacks required field(s): {', '.join(missing)}")
    runs = data["runs"]
    if not isinstance(runs, dict) or not runs:
        raise TraceError("the trace's \"runs\" must map a method name to its list of rounds, and hold one at least")
    rounds = {}
    for label, items in runs.items():
        if not isinstance(items, list) or not items:
            raise TraceError(f"run {label!r} must be a non-empty list of rounds")
        rounds[str(label)] = [_known(Round, item, f"round {i + 1} of run {label!r}") for i, item in enumerate(items)]
    return Trace(model=str(data["model"]), prompt=str(data["prompt"]), runs=rounds,
                 run=_known(RunConfig, data.get("run", {}), "\"run\""),
                 sampling=_known(SamplingConfig, data.get("sampling", {}), "\"sampling\""),
                 versions={str(k): str(v) for k, v in dict(data.get("versions") or {}).items()},
                 created=str(data.get("created", "")))


def loads(text: str) -> Trace:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise TraceError(f"the file is not JSON ({err})") from None
    return from_dict(data)


def load(path: Union[str, Path]) -> Trace:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise TraceError(f"cannot read the trace {Path(path).name}: {err}") from None
    return loads(text)
