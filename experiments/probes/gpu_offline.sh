#!/bin/bash
# The GPU checks in one call on a machine with no network (prepared by gpu_offline_prep.sh; run from the repo
# root with .whl and .gpu beside it): the gpu tests, the d20 bench against nanochat, each eval at 8k-16k, the
# window bench, CORE batched vs one-at-a-time. Figures go to stdout; logs to $OUT when it is set.
set -u
OUT=${OUT:-/tmp/gpu-offline-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
T0=$(date +%s)
el() { echo; echo "=== [+$(( $(date +%s) - T0 ))s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
export RLAB_CACHE_DIR=/tmp/rlab-cache
mkdir -p /tmp/gb && cp -r .gpu/synth/base /tmp/gb/
el env
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
nproc; free -g | head -2
python3 -c "import torch,pydantic,wandb,rustbpe,rlab,psutil; print('torch',torch.__version__,'cuda',torch.version.cuda,torch.cuda.get_device_name(0),'pydantic',pydantic.VERSION,'wandb',wandb.__version__)"
[ "${SKIP_TESTS:-}" ] || {
el gpu-tests
timeout ${GPU_TESTS_S:-80} python3 -m pytest -m "gpu and not slow" -q -p no:cacheprovider --no-header -rfEs tests/gpu tests/core/test_gpt.py 2>&1 | tail -30
}
el bench-gpu d20
NANOCHAT_DIR=$PWD/.gpu/nanochat timeout ${BENCH_S:-330} python3 -m bench.gpu_bench --steps ${STEPS:-12} --work-dir /tmp/gb --no-eval-bench 2>&1 | grep -v -i "warn" | tail -60
cp /tmp/gb/rlab_train.log /tmp/gb/nanochat_train.log $OUT/ 2>/dev/null
cp /tmp/gb/runs/bench/metrics.jsonl $OUT/rlab_metrics.jsonl 2>/dev/null
el window
timeout ${WINDOW_S:-110} python3 -m bench.window_bench --steps ${WSTEPS:-6} ${WARGS:-} 2>&1 | grep -v -i "warn" | tail -8
[ "${SKIP_EVALB:-}" ] || {
el eval-bench
timeout ${EVALB_S:-40} python3 -m bench.eval_bench --device cuda --configs realistic-2048 --per-task 32 2>&1 | tail -20
}
el done
