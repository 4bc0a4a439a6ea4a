#!/bin/bash
# The GPU checks in one call on a machine with no network (prepared by gpu_offline_prep.sh; run from the repo
# root with .whl and .gpu beside it). Sections, in the order given by SECTIONS (default "tests bench window evalb"):
#   tests   the gpu tests that are not slow
#   bench   the d20 bench at 8 x 8192 against nanochat d314e96 (NANOCHAT tree in .gpu/nanochat)
#   window  FlexAttention sliding windows vs the dense mask
#   evalb   CORE batched vs one-at-a-time, BPB tokens/s
#   long    d20 at 32k and 128k tokens, batch 1, activation checkpointing all: plan vs measured peak, tokens/s
#   chain   the seed's chain on a nanochat-written base dir: continue (pi, ntk, yarn, the control, zero-shot
#           arms) -> eval --all -> report --format html, offline (long-document set built by the prep script)
# Figures go to stdout; logs and the chain's report to $OUT when it is set.
set -u
OUT=${OUT:-/tmp/gpu-offline-out}; mkdir -p "$OUT"
PY=${PY:-python3}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
T0=$(date +%s)
el() { echo; echo "=== [+$(( $(date +%s) - T0 ))s] $*"; }
if [ -z "${NO_WHEELS:-}" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
fi
export RLAB_CACHE_DIR=${RLAB_CACHE_DIR:-/tmp/rlab-cache}
export WANDB_MODE=${WANDB_MODE:-disabled}  # wandb is not in the CUDA image; rlab honours wandb's own switch
REPO=$PWD

s_env() {
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  nproc; free -g | head -2
  $PY -c "import torch,pydantic,typer,rlab; print('torch',torch.__version__,'cuda',torch.version.cuda,torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no cuda','pydantic',pydantic.VERSION,'typer',typer.__version__)"
}

s_tests() {
  timeout ${GPU_TESTS_S:-80} $PY -m pytest -m "gpu and not slow" -q -p no:cacheprovider --no-header -rfEs tests/gpu tests/core/test_gpt.py 2>&1 | tail -30
}

s_bench() {
  mkdir -p /tmp/gb && cp -r .gpu/synth/base /tmp/gb/
  NANOCHAT_DIR=$REPO/.gpu/nanochat timeout ${BENCH_S:-330} $PY -m bench.gpu_bench --steps ${STEPS:-12} --work-dir /tmp/gb --no-eval-bench 2>&1 | grep -v -i "warn" | tail -60
  cp /tmp/gb/rlab_train.log /tmp/gb/nanochat_train.log $OUT/ 2>/dev/null
}

s_window() {
  timeout ${WINDOW_S:-110} $PY -m bench.window_bench --steps ${WSTEPS:-6} ${WARGS:-} 2>&1 | grep -v -i "warn" | tail -8
}

s_evalb() {
  timeout ${EVALB_S:-40} $PY -m bench.eval_bench --device cuda --configs realistic-2048 --per-task 32 2>&1 | tail -20
}

s_long() {
  for len in ${LONG_LENS:-32768 131072}; do
    el "long: d20 at $len tokens, batch 1, activation checkpointing ${LONG_CKPT:-all}"
    local work=/tmp/gl$len
    rm -rf $work && mkdir -p $work && cp -r .gpu/synth/base $work/
    timeout ${LONG_S:-170} $PY -m bench.gpu_bench --steps ${LSTEPS:-4} --seq-len $len --device-batch-size 1 \
      --activation-checkpointing ${LONG_CKPT:-all} --no-evals --no-eval-bench --work-dir $work 2>&1 | grep -v -i "warn" | tail -12
    cp $work/rlab_train.log $OUT/long_$len.log 2>/dev/null
  done
}

s_chain() {
  local root=/tmp/chain results=/tmp/chain/results
  rm -rf $root && mkdir -p $root && cp -r .gpu/head $root/base
  export RLAB_EVAL_BUNDLE=$REPO/tests/fixtures/eval_bundle
  cd $root || return
  el "chain: rlab continue"
  timeout ${CONTINUE_S:-200} $PY -m rlab continue --base-dir $root/base --base-tag d2 --from-step 20 \
    --variants pi,ntk,yarn --zero-shot --results-dir $results ${CHAIN_ARGS:-} 2>&1 | tail -${CHAIN_TAIL:-15}
  el "chain: rlab eval --all"
  timeout ${EVAL_S:-160} $PY -m rlab eval --all --results-dir $results 2>&1 | tail -${CHAIN_TAIL:-15}
  el "chain: rlab report --format html"
  timeout ${REPORT_S:-60} $PY -m rlab report --results-dir $results --format html -q 2>&1 | tail -8
  cp $results/d2/comparison.md $results/d2/comparison.html $results/d2/results.csv $OUT/ 2>/dev/null
  sed -n '/<!-- answer -->/,/<!-- \/answer -->/p' $results/d2/comparison.md | head -40
  cd $REPO || return
}

el env; s_env
for s in ${SECTIONS:-tests bench window evalb}; do
  el "$s"
  "s_$s"
done
el done
