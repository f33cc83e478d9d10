"""Traces: a finished run (one method, or a side-by-side comparison) saved as small JSON, and loaded back.

A trace is the run's Round records plus what is needed to read them: the prompt, the model id, the
settings and the versions of the code and libraries that made them. Replaying one needs no model, so no
torch here.

`versions["specviz"]` is `code_version()`: a hash of the files that decide what rounds contain (the
engine's sources and the shipped weights), computed from the files themselves so that it works without git
(the Docker image has none). `Trace.stale` says whether a loaded trace was recorded by other code.

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
import ast
import functools
import hashlib
import json
import platform
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Optional, Union

from .config import RunConfig, SamplingConfig
from .events import Round

FORMAT = "specviz-trace"
VERSION = 1  # bump when a field changes meaning; additions alone need no bump
REQUIRED = ("model", "prompt", "runs")
PACKAGES = ("torch", "transformers", "gradio")
ROOT = Path(__file__).resolve().parent.parent
# Where rounds are made (engine.generate): this module and every specviz module it imports, at any depth and
# wherever the import statement stands, decide what rounds contain; views, benchmarks and training do not.
ENTRY = "specviz/engine.py"
# The shipped weights and their configs; card.json is left out: `python -m specviz.train card` rewrites its
# measured tau after a benchmark, which changes no guess.
WEIGHTS = ("config.json", "*.safetensors")


class TraceError(ValueError):
    """A file that is not a trace this version of specviz can read; the message says why."""


@dataclass(frozen=True)
class Trace:
    model: str  # the target model id the rounds were recorded on
    prompt: str
    runs: dict[str, list[Round]]  # label (the method) -> its rounds, in the order they ran
    run: RunConfig = RunConfig()
    sampling: SamplingConfig = SamplingConfig()
    versions: dict[str, str] = field(default_factory=lambda: versions())  # code and libraries at recording time
    created: str = ""  # UTC, ISO 8601

    @property
    def recorded_with(self) -> Optional[str]:
        """The code_version() that recorded the rounds; None for a trace from before traces carried it."""
        return self.versions.get("specviz")

    @property
    def stale(self) -> Optional[bool]:
        """True: recorded by other code than the running one, whose rounds may differ; False: by this code;
        None: unknown (the trace does not say)."""
        return None if self.recorded_with is None else self.recorded_with != code_version()

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "created": self.created or _now(), "model": self.model,
                "prompt": self.prompt, "run": dataclasses.asdict(self.run),
                "sampling": dataclasses.asdict(self.sampling), "versions": self.versions,
                "runs": {label: [r.to_dict() for r in rounds] for label, rounds in self.runs.items()}}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _imported(path: Path, root: Path) -> set[Path]:
    """The files under root of the specviz modules and packages that a source file imports."""
    package = path.parent.relative_to(root).parts  # e.g. ("specviz", "methods")
    found = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name.split(".") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):  # from .x import y: y may be a module of package x
            base = list(package[:len(package) + 1 - node.level]) if node.level else []
            module = base + (node.module.split(".") if node.module else [])
            names = [module] + [module + [alias.name] for alias in node.names]
        else:
            continue
        for parts in names:
            if parts and parts[0] == "specviz":
                found |= {f for f in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py"))
                          if f.is_file()}
    return found


def source_files(root: Path = ROOT) -> list[Path]:
    """The files whose bytes code_version() hashes, sorted: ENTRY and the specviz modules it imports (with the
    packages' __init__.py files they run), then the shipped weights."""
    todo, sources = [root / ENTRY], set()
    while todo:
        path = todo.pop()
        if path not in sources:
            sources.add(path)
            todo.extend(_imported(path, root))
    packages = {root / d / "__init__.py" for p in sources for d in p.relative_to(root).parents if d.parts}
    sources |= {f for f in packages if f.is_file()}
    weights = [p for method in ("draft", "eagle", "medusa") for pattern in WEIGHTS
               for p in (root / "assets" / method).glob(pattern)]
    return sorted(sources) + sorted(weights)


@functools.lru_cache(maxsize=None)
def code_version(root: Path = ROOT) -> str:
    """12 hex digits of a sha256 over source_files(root), each as its path (relative to root) and its bytes.

    Equal for equal files wherever they lie, without git; read once per process (about 30 MB, mostly weights).
    """
    digest = hashlib.sha256()
    for path in source_files(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:12]


def versions() -> dict[str, str]:
    """The running code's version and the installed versions of the libraries that shape a run (read from
    metadata: nothing is imported)."""
    found = {"specviz": code_version(), "python": platform.python_version()}
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
