#!/usr/bin/env bash
# One short, prepared check on a CUDA machine (the device tool's H200; see docs/perf.md "GPU").
#   1. the engine's tests on CUDA: tiny random float64 models (SPECVIZ_TEST_DEVICE=cuda);
#   2. the benchmark on randomly initialised models of the embedded model's shape (SmolLM2-135M)
#      and of SmolLM2-1.7B's shape: the weights cannot travel there, so texts are meaningless and
#      only the timings count (a random model repeats itself, which flatters n-gram's tau).
# Needs .gpu/smollm2-shape and .gpu/smollm2-1.7b-shape (config.json + tokenizer, no weights) and,
# where the machine's transformers is older than ours, its wheel in .whl/.
# Usage: OUT=/some/dir bash scripts/gpu_check.sh   (logs and JSON land in $OUT)
set -uo pipefail
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 SPECVIZ_NO_EMBEDDED=1 TOKENIZERS_PARALLELISM=false
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
date -u | tee "$OUT/gpu.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee -a "$OUT/gpu.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'transformers', transformers.__version__, torch.cuda.get_device_name())" 2>&1 | tee -a "$OUT/gpu.txt"

echo "== tests on CUDA" | tee "$OUT/tests.txt"
SPECVIZ_TEST_DEVICE=cuda timeout 300 python3 -m pytest -q -p no:cacheprovider \
  tests/test_engine.py tests/test_sampling.py tests/test_heads.py tests/test_robust.py 2>&1 | tail -40 | tee -a "$OUT/tests.txt"

bench() {  # name, then bench arguments
  local name=$1; shift
  echo "== bench $name" | tee "$OUT/bench_$name.txt"
  timeout 150 python3 -m specviz.bench --random-init --methods baseline,ngram --compare-hf --max-new-tokens 100 \
    --out "$OUT/bench_$name.json" "$@" 2>&1 | grep -v "bench:" | tee -a "$OUT/bench_$name.txt"
}
bench 135m_bf16 --model .gpu/smollm2-shape --dtype bfloat16
bench 135m_fp32 --model .gpu/smollm2-shape --dtype float32
bench 1.7b_bf16 --model .gpu/smollm2-1.7b-shape --dtype bfloat16 --limit 6
