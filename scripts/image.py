"""The Docker image's files without a Docker daemon: the Dockerfile's COPY lines and .dockerignore read the
way Docker reads them, that file set assembled in a folder, and the app's cold start measured there.

    python scripts/image.py files                    # what the image holds under WORKDIR, one path a line
    python scripts/image.py assemble DEST            # copy exactly that set into DEST
    python scripts/image.py coldstart --runs 2       # start the app from an assembled folder, as the image does

The parser knows the instructions our Dockerfile uses and refuses every other one (ADD, COPY --from, a
second FROM, variables or wildcards in COPY paths, ...) with its line, so a Dockerfile it cannot read
fails the image test loudly instead of being half understood. tests/test_image.py uses it.
"""
from __future__ import annotations

import argparse
import json
import os
import posixpath
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
KNOWN = {"FROM", "ARG", "ENV", "RUN", "USER", "WORKDIR", "COPY", "EXPOSE", "CMD", "LABEL"}  # all others refused
COPY_FLAGS = ("--chown=", "--chmod=")  # flags that do not change which files are copied where


class DockerfileError(ValueError):
    """A Dockerfile or .dockerignore this reader does not understand, or a COPY that Docker would refuse."""


@dataclass(frozen=True)
class Instruction:
    line: int  # where it starts in the Dockerfile (1-based)
    name: str  # upper case: COPY, RUN, ...
    args: str  # the rest, continuation lines joined


@dataclass(frozen=True)
class Copy:
    line: int
    sources: tuple[str, ...]  # relative to the build context
    dest: str  # relative to the WORKDIR, "." for the folder itself
    dest_is_dir: bool  # "dir/" or ".": a source file lands inside it under its own name


def instructions(text: str) -> list[Instruction]:
    """The Dockerfile's instructions: comment lines dropped, backslash continuations joined."""
    out, pending, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not pending):
            continue  # comments may sit between continuation lines too
        start = start or number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        name, _, args = (pending + stripped).strip().partition(" ")
        out.append(Instruction(start, name.upper(), args.strip()))
        pending, start = "", 0
    if pending:
        raise DockerfileError(f"Dockerfile line {start}: the file ends inside a continued instruction")
    return out


def _refuse(ins: Instruction, why: str) -> DockerfileError:
    return DockerfileError(f"Dockerfile line {ins.line}: {ins.name} {ins.args!r}: {why}")


def _copy(ins: Instruction, workdir: Optional[str]) -> Copy:
    words = json.loads(ins.args) if ins.args.startswith("[") else shlex.split(ins.args)
    while words and words[0].startswith("--"):
        if not words[0].startswith(COPY_FLAGS):
            raise _refuse(ins, f"the flag {words[0].split('=')[0]} is not understood (only --chown and --chmod)")
        words = words[1:]
    if len(words) < 2 or any("$" in w or re.search(r"[*?\[]", w) for w in words):
        raise _refuse(ins, "needs plain paths: at least one source and a destination, no variables or wildcards")
    if workdir is None:
        raise _refuse(ins, "comes before the WORKDIR")
    *sources, dest = words
    if len(sources) > 1 and not dest.endswith("/"):
        raise _refuse(ins, "copies several sources, so its destination must end with /")
    full = posixpath.normpath(posixpath.join(workdir, dest))
    if not (full + "/").startswith(workdir.rstrip("/") + "/"):
        raise _refuse(ins, f"writes outside the WORKDIR {workdir}")
    dest_is_dir = dest.endswith("/") or posixpath.normpath(dest) == "."
    return Copy(ins.line, tuple(sources), posixpath.relpath(full, workdir), dest_is_dir)


def copies(text: str) -> list[Copy]:
    """The COPY steps of a single-stage Dockerfile, destinations relative to its one WORKDIR."""
    out: list[Copy] = []
    workdir: Optional[str] = None
    seen_from = False
    for ins in instructions(text):
        if ins.name not in KNOWN:
            raise _refuse(ins, f"{ins.name} is not understood here (known: {', '.join(sorted(KNOWN))})")
        if ins.name == "FROM":
            if seen_from:
                raise _refuse(ins, "a multi-stage build is not understood here")
            seen_from = True
        elif ins.name == "WORKDIR":
            if workdir is not None or not ins.args.startswith("/") or "$" in ins.args:
                raise _refuse(ins, "only one WORKDIR, an absolute path without variables, is understood")
            workdir = posixpath.normpath(ins.args)
        elif ins.name == "COPY":
            out.append(_copy(ins, workdir))
    return out


def env(text: str) -> dict[str, str]:
    """The ENV settings (KEY=VALUE form; values that use $VARIABLES are left out)."""
    out = {}
    for ins in instructions(text):
        if ins.name == "ENV":
            for word in shlex.split(ins.args):
                key, eq, value = word.partition("=")
                if not eq:
                    raise _refuse(ins, "only the ENV KEY=VALUE form is understood")
                if "$" not in value:
                    out[key] = value
    return out


# --- .dockerignore ---------------------------------------------------------------------------------

def ignore_patterns(text: str) -> list[tuple[bool, re.Pattern]]:
    """(excludes?, regex) per line, as Docker reads the file: '#' lines are comments, whitespace is trimmed,
    '!' re-includes, a pattern is path-cleaned and a leading '/' dropped. Character classes and escapes
    are refused."""
    out = []
    for raw in text.splitlines():
        if raw.startswith("#") or not raw.strip():
            continue
        pattern = raw.strip()
        keep = pattern.startswith("!")
        pattern = posixpath.normpath(pattern[1:].strip() if keep else pattern).lstrip("/")
        if re.search(r"[\[\]\\]", pattern):
            raise DockerfileError(f".dockerignore: {raw!r}: character classes and escapes are not understood here")
        out.append((not keep, re.compile(f"^{_regex(pattern)}$")))
    return out


def _regex(pattern: str) -> str:
    """Docker's translation: '*' and '?' stay within one path segment, '**/' is any number of folders
    (none included), a final '**' is everything below."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            i += 3 if pattern.startswith("**/", i) else 2
            out += ".*" if i >= len(pattern) else "(.*/)?"
        else:
            out += {"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i]))
            i += 1
    return out


def ignored(path: str, patterns: list[tuple[bool, re.Pattern]]) -> bool:
    """Docker's rule: the last pattern that matches the path, or a folder above it, decides."""
    parts = PurePosixPath(path).parts
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for excludes, regex in patterns:
        if excludes != excluded and any(regex.match(c) for c in candidates):
            excluded = excludes
    return excluded


# --- the file set ----------------------------------------------------------------------------------

def image_files(context: Path, dockerfile: str, dockerignore: Optional[str]) -> dict[str, Path]:
    """{path under WORKDIR: file in the context} for everything the Dockerfile copies, as Docker copies it:
    a folder's files (less the ignored ones) into the destination, a file to the destination or into it."""
    patterns = ignore_patterns(dockerignore or "")
    files: dict[str, Path] = {}
    for step in copies(dockerfile):
        for source in step.sources:
            clean = posixpath.normpath(source).lstrip("/")
            path = context / clean
            missing = DockerfileError(f"Dockerfile line {step.line}: {source!r} is not in the build context "
                                      "(outside it, missing, or excluded by .dockerignore)")
            if clean.startswith(".."):
                raise missing
            if path.is_dir():
                inside = [p for p in sorted(path.rglob("*"))
                          if p.is_file() and not ignored(p.relative_to(context).as_posix(), patterns)]
                if not inside and ignored(clean, patterns):
                    raise missing
                for p in inside:
                    files[posixpath.normpath(posixpath.join(step.dest, p.relative_to(path).as_posix()))] = p
            elif path.is_file() and not ignored(clean, patterns):
                dest = posixpath.join(step.dest, path.name) if step.dest_is_dir else step.dest
                files[posixpath.normpath(dest)] = path
            else:
                raise missing
    return files


def read_context(context: Path = ROOT, dockerfile: Optional[Path] = None) -> tuple[str, Optional[str]]:
    """The Dockerfile's text and the context's .dockerignore (None when there is none)."""
    ignore = context / ".dockerignore"
    return ((dockerfile or context / "Dockerfile").read_text(encoding="utf-8"),
            ignore.read_text(encoding="utf-8") if ignore.is_file() else None)


def assemble(dest: Path, dockerfile: str, dockerignore: Optional[str], context: Path = ROOT) -> dict[str, Path]:
    """Copy the image's WORKDIR file set into `dest`; returns it."""
    files = image_files(context, dockerfile, dockerignore)
    for name, source in files.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, dest / name)
    return files


# --- cold start ------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_serving(proc: subprocess.Popen, url: str, timeout_s: float) -> float:
    """Seconds until `url` answers HTTP 200; RuntimeError if `proc` exits first, TimeoutError after timeout_s."""
    start = time.perf_counter()
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before serving {url}")
        if time.perf_counter() - start > timeout_s:
            raise TimeoutError(f"no HTTP 200 from {url} in {timeout_s:g} s")
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                if answer.status == 200:
                    return time.perf_counter() - start
        except OSError:
            time.sleep(0.2)


def memory_mb(pid: int) -> dict[str, float]:
    """Resident memory now (VmRSS) and at its peak (VmHWM), in MB."""
    status = Path(f"/proc/{pid}/status").read_text()
    return {key: round(int(re.search(rf"^{key}:\s+(\d+) kB", status, re.M).group(1)) / 1024)
            for key in ("VmRSS", "VmHWM")}


def coldstart(folder: Path, methods: list[str], prompt: str, max_new_tokens: int, timeout_s: float = 600) -> dict:
    """Start `python app.py` in `folder` with the image's ENV (public mode), time it until the page answers
    HTTP 200, run each method once through the API, then read the process's memory."""
    from gradio_client import Client

    port = free_port()
    image_env = {k: v for k, v in env(read_context()[0]).items() if k not in ("HOME", "PATH", "SPECVIZ_CACHE")}
    environ = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **image_env,  # this machine's cache
               "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port)}
    url = f"http://127.0.0.1:{port}/"
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=folder, env=environ, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        ready_s = wait_until_serving(proc, url, timeout_s)
        at_ready = memory_mb(proc.pid)
        client = Client(url, verbose=False)
        runs = {}
        for method in methods:
            t0 = time.perf_counter()
            result = client.predict(prompt, method, max_new_tokens, 0.0, api_name="/speculate")
            runs[method] = {"seconds": round(time.perf_counter() - t0, 2), "tokens": result["metrics"]["new_tokens"]}
        return {"ready_s": round(ready_s, 2), "at_ready_mb": at_ready, "after_runs_mb": memory_mb(proc.pid),
                "runs": runs}
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("files")
    sub.add_parser("assemble").add_argument("dest", type=Path)
    cold = sub.add_parser("coldstart")
    cold.add_argument("--runs", type=int, default=2)
    cold.add_argument("--methods", default="baseline,ngram,draft,medusa,eagle")
    cold.add_argument("--prompt", default="Repeat this list twice: apples, pears, plums, cherries.")
    cold.add_argument("--max-new-tokens", type=int, default=32)
    args = parser.parse_args(argv)
    dockerfile, dockerignore = read_context()
    if args.command == "files":
        print("\n".join(sorted(image_files(ROOT, dockerfile, dockerignore))))
    elif args.command == "assemble":
        print(f"{len(assemble(args.dest, dockerfile, dockerignore))} files in {args.dest}")
    else:
        for run in range(1, args.runs + 1):
            with tempfile.TemporaryDirectory(prefix="specviz-image-") as folder:  # a fresh one, as a new container
                assemble(Path(folder), dockerfile, dockerignore)
                result = coldstart(Path(folder), args.methods.split(","), args.prompt, args.max_new_tokens)
                print(json.dumps({"run": run, **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
