#!/bin/bash
# Prepare a GPU check on a machine with no network (a lent CUDA box whose python3 already has torch):
# the wheels rlab (and nanochat's base_train) need beyond such an image, a nanochat d314e96 tree (the bench
# section's anchor; skipped without NANOCHAT_GIT), the d20 bench's synthetic base, and for the chain section a
# nanochat-written base dir (../shared/nanochat_reference/head) with its long-document set built here, under
# two git-ignored folders that travel with the checkout.
#   experiments/probes/gpu_offline_prep.sh [/path/to/nanochat.git]     # here, with network
#   then on the GPU machine, from the repo root: bash experiments/probes/gpu_offline.sh   (carry .whl and .gpu)
set -euo pipefail
NANOCHAT_GIT=${1:-}
REFERENCE=${RLAB_NANOCHAT_REFERENCE:-../shared/nanochat_reference}
PY=${PY:-3.12}
cd "$(git rev-parse --show-toplevel)"
grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >> .git/info/exclude
mkdir -p .whl .gpu
plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any"
# pydantic and typer (rlab), rustbpe (tokenizers), wandb and what its import pulls in (nanochat imports it at the top)
for p in pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
    typing_extensions==4.16.0 rustbpe==0.1.0 typer==0.29.2 click==8.5.1 annotated-doc==0.0.7 wandb==0.31.0 platformdirs==4.14.8 protobuf==7.36.2 \
    opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-proto==1.45.2 \
    opentelemetry-semantic-conventions==0.66b2 opentelemetry-exporter-otlp-proto-http==1.45.2 \
    opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-http-transport==0.66b2 \
    opentelemetry-exporter-otlp-common==0.66b2 googleapis-common-protos==1.76.0 cwevals==0.0.1b1 distro sniffio; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp $plat -d .whl "$p"
done
if [ -n "$NANOCHAT_GIT" ]; then
  rm -rf .gpu/nanochat && mkdir -p .gpu/nanochat
  git -C "$NANOCHAT_GIT" archive d314e96 nanochat scripts tasks | tar -x -C .gpu/nanochat
fi
rm -rf .gpu/head && mkdir -p .gpu/head
cp -r "$REFERENCE"/head/{base_checkpoints,base_data,tokenizer} .gpu/head/
.venv/bin/rlab data long-docs --base-dir .gpu/head
rm -rf .gpu/head/downloads  # the sources the set was cut from; the evals read long_docs/ only
rm -rf .gpu/synth
.venv/bin/python -c "import sys; sys.path.insert(0, '.'); from pathlib import Path; from bench.gpu_bench import _synthetic_base; _synthetic_base(Path('.gpu/synth'), 65536)"
rm -rf .gpu/synth/corpus
du -sh .whl .gpu
