#!/bin/bash
# Prepare a GPU check on a machine with no network (a lent CUDA box whose python3 already has torch):
# the wheels rlab (and nanochat's base_train) need beyond such an image, a nanochat d314e96 tree, and the
# d20 bench's synthetic base, under two git-ignored folders that travel with the checkout.
#   experiments/probes/gpu_offline_prep.sh /path/to/nanochat.git     # here, with network
#   then on the GPU machine, from the repo root: bash experiments/probes/gpu_offline.sh   (carry .whl and .gpu)
set -euo pipefail
NANOCHAT_GIT=${1:?usage: gpu_offline_prep.sh NANOCHAT_GIT_DIR}
PY=${PY:-3.12}
cd "$(git rev-parse --show-toplevel)"
grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >> .git/info/exclude
mkdir -p .whl .gpu
plat="--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any"
# pydantic (rlab), rustbpe (tokenizers), wandb and what its import pulls in (nanochat imports it at the top)
for p in pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
    typing_extensions==4.16.0 rustbpe==0.1.0 wandb==0.31.0 platformdirs==4.14.8 protobuf==7.36.2 \
    opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-proto==1.45.2 \
    opentelemetry-semantic-conventions==0.66b2 opentelemetry-exporter-otlp-proto-http==1.45.2 \
    opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-http-transport==0.66b2 \
    opentelemetry-exporter-otlp-common==0.66b2 googleapis-common-protos==1.76.0 cwevals==0.0.1b1 distro sniffio; do
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp $plat -d .whl "$p"
done
rm -rf .gpu/nanochat && mkdir -p .gpu/nanochat
git -C "$NANOCHAT_GIT" archive d314e96 nanochat scripts tasks | tar -x -C .gpu/nanochat
rm -rf .gpu/synth
.venv/bin/python -c "import sys; sys.path.insert(0, '.'); from pathlib import Path; from bench.gpu_bench import _synthetic_base; _synthetic_base(Path('.gpu/synth'), 65536)"
rm -rf .gpu/synth/corpus
du -sh .whl .gpu
