"""The Docker image, without a Docker daemon: exactly the files the Dockerfile copies (honouring
.dockerignore) are assembled in a folder, and there, with the repository off sys.path, every registered
method runs on the embedded model and the app imports.

SPECVIZ_IMAGE_DOCKERFILE=PATH checks another Dockerfile against this build context (as `docker build -f PATH .`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.image import (ROOT, DockerfileError, copies, ignore_patterns, ignored, image_files, instructions,
                           read_context)

DOCKERFILE = Path(os.environ.get("SPECVIZ_IMAGE_DOCKERFILE") or ROOT / "Dockerfile")

# Run in the assembled folder: which files were imported, which methods are offered, each method's text.
CHILD = r"""
import json, sys
import torch
torch.set_num_threads(1)  # 2 threads on a shared 2-core machine ran 10x slower
from specviz.config import RunConfig, SamplingConfig
from specviz.engine import generate
from specviz.methods import METHODS, available_methods
from specviz.models import load_target
import specviz
target = load_target()
texts = {}
for method in METHODS:
    try:
        rounds = generate(target, method, "Repeat this list twice: apples, pears, plums, cherries.",
                          RunConfig(max_new_tokens=16, k=4), SamplingConfig())
        texts[method] = "".join(r.text for r in rounds)
    except Exception as err:  # reported and failed by the test, one line per method
        texts[method] = f"FAILED: {type(err).__name__}: {err}"
import app
print(json.dumps({"specviz": specviz.__file__, "app": app.__file__, "path": sys.path, "registered": list(METHODS),
                  "offered": available_methods(target), "texts": texts}))
"""


def run_in(folder: Path) -> dict:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=folder, env=environ, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_image_serves_every_method_from_its_own_files(tmp_path):
    dockerfile, dockerignore = read_context(ROOT, DOCKERFILE)
    files = image_files(ROOT, dockerfile, dockerignore)
    for name, source in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(source.read_bytes())
    got = run_in(tmp_path)
    assert Path(got["specviz"]).is_relative_to(tmp_path) and Path(got["app"]).is_relative_to(tmp_path), got
    assert str(ROOT) not in got["path"]
    failed = {m: t for m, t in got["texts"].items() if t.startswith("FAILED")}
    assert not failed, f"in the image's files: {failed}"
    assert got["offered"] == got["registered"], f"the image offers {got['offered']} of {got['registered']}"
    baseline = got["texts"]["baseline"]
    assert baseline.strip() and all(text == baseline for text in got["texts"].values()), got["texts"]


def test_the_image_holds_what_the_app_reads_and_nothing_else():
    files = set(image_files(ROOT, *read_context()))
    for method, weights in (("eagle", "model.safetensors"), ("medusa", "medusa_lm_head.safetensors"),
                            ("draft", "model.safetensors")):
        assert {f"assets/{method}/{name}" for name in ("card.json", "config.json", weights)} <= files
    assert {"app.py", "requirements.txt", "specviz/__init__.py", "demos/prompts.jsonl"} <= files
    assert {str(p.relative_to(ROOT)) for p in (ROOT / "demos" / "traces").glob("*.json")} <= files
    stray = [f for f in files if f.split("/")[0] in ("tests", "docs", "scripts", ".git", ".ci")
             or f.startswith("assets/train_data/") or f.endswith((".png", ".pyc")) or "__pycache__" in f]
    assert not stray


def test_the_model_is_converted_before_the_rest_is_copied():
    """Layer order: requirements, then specviz and the conversion, then what changes more often."""
    steps = [(i.name, i.args) for i in instructions(read_context()[0]) if i.name in ("COPY", "RUN")]
    convert = next(n for n, (name, args) in enumerate(steps) if name == "RUN" and "load_target()" in args)
    before = " ".join(args for name, args in steps[:convert] if name == "COPY")
    after = " ".join(args for name, args in steps[convert:] if name == "COPY")
    assert "requirements.txt" in before and " specviz" in before
    assert all(path in after for path in ("assets", "app.py", "demos")) and "specviz" not in after


# --- the parser, on a hand-written context ---------------------------------------------------------

TINY = """\
# syntax comment
FROM python:3.11-slim
ARG X=1
WORKDIR /home/user/app
COPY --chown=user requirements.txt .
RUN pip install \\
    -r requirements.txt
COPY pkg pkg
COPY ["notes/a.txt", "docs/"]
COPY notes/b.txt renamed.txt
COPY assets assets
CMD ["python", "app.py"]
"""

IGNORE = """\
# comments and blank lines are skipped

**/__pycache__
*.png
!keep.png
assets/*
!/assets/eagle
assets/eagle/loss.png
"""


def make_context(root: Path) -> None:
    for name in ("requirements.txt", "pkg/__init__.py", "pkg/__pycache__/x.pyc", "pkg/sub/m.py", "pkg/pic.png",
                 "notes/a.txt", "notes/b.txt", "keep.png", "assets/a.png", "assets/eagle/card.json",
                 "assets/eagle/loss.png", "assets/train_data/x.jsonl", "assets/eagle/keep.png"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)


def test_copy_lines_and_dockerignore_give_dockers_file_set(tmp_path):
    make_context(tmp_path)
    files = image_files(tmp_path, TINY, IGNORE)
    assert {k: v.relative_to(tmp_path).as_posix() for k, v in files.items()} == {
        "requirements.txt": "requirements.txt",
        "pkg/__init__.py": "pkg/__init__.py",
        "pkg/sub/m.py": "pkg/sub/m.py",  # pkg/pic.png: '*.png' has no folder, so it matches only at the top...
        "pkg/pic.png": "pkg/pic.png",  # ... and a nested png stays, as in Docker (unlike .gitignore)
        "docs/a.txt": "notes/a.txt",
        "renamed.txt": "notes/b.txt",
        "assets/eagle/card.json": "assets/eagle/card.json",
        "assets/eagle/keep.png": "assets/eagle/keep.png",
    }
    assert [c.dest for c in copies(TINY)] == [".", "pkg", "docs", "renamed.txt", "assets"]


@pytest.mark.parametrize("patterns, path, excluded", [
    ("docs", "docs/a/b.md", True),  # a folder's pattern covers everything below it
    ("*", "a/b", True),  # '*' matches the top folder "a", so all of it goes
    ("a/*", "a/b/c", True),
    ("*/b", "x/y/b", False),  # one segment only
    ("**/b", "x/y/b", True),
    ("**/b", "b", True),
    ("a/**", "a/x/y", True),
    ("*\n!a", "a/b", False),  # the last matching pattern decides
    ("!a\n*", "a/b", True),
    ("./a/../b", "b", True),  # patterns are path-cleaned
    ("  /b  ", "b", True),
    ("b?", "bc", True),
    ("b?", "b/c", False),
])
def test_dockerignore_matching(patterns, path, excluded):
    assert ignored(path, ignore_patterns(patterns)) is excluded


@pytest.mark.parametrize("line, message", [
    ("ADD app.py .", "ADD is not understood"),
    ("COPY --from=builder /x .", "--from is not understood"),
    ("COPY --link a .", "--link is not understood"),
    ("FROM python:3.12", "multi-stage"),
    ("COPY $SRC .", "no variables or wildcards"),
    ("COPY *.py .", "no variables or wildcards"),
    ("COPY a b c", "must end with /"),
    ("COPY a /etc/", "outside the WORKDIR"),
    ("VOLUME /data", "VOLUME is not understood"),
    ("HEALTHCHECK CMD true", "HEALTHCHECK is not understood"),
])
def test_the_parser_refuses_what_it_does_not_understand(line, message):
    with pytest.raises(DockerfileError, match=message):
        copies(f"FROM python:3.11-slim\nWORKDIR /app\n{line}\n")


def test_a_copy_of_something_ignored_or_missing_fails_as_in_docker(tmp_path):
    make_context(tmp_path)
    with pytest.raises(DockerfileError, match="line 3: 'keep.png' is not in the build context"):
        image_files(tmp_path, "FROM x\nWORKDIR /app\nCOPY keep.png .\n", "*.png")
    with pytest.raises(DockerfileError, match="'nowhere' is not in the build context"):
        image_files(tmp_path, "FROM x\nWORKDIR /app\nCOPY nowhere .\n", None)
    with pytest.raises(DockerfileError, match="character classes"):
        ignore_patterns("[ab].txt")
