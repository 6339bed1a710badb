#!/usr/bin/env bash
# The CUDA checks in one run on a GPU machine that has torch but not Hydra, MLflow or Optuna, and no network.
#
# Prepare here (pure-Python wheels, about 36 MB), then carry .whl with the device tool and run this script:
#   echo /.whl/ >> .git/info/exclude
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 -d .whl hydra-core==1.3.2 omegaconf==2.3.0
#   pip wheel --no-deps -w .whl antlr4-python3-runtime==4.9.3        # sdist only: built here, pure Python
#   pip download --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
#       --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d /tmp/ml "mlflow==3.17.2" "optuna>=4,<6"
#   # then copy into .whl/ml/ the wheels the GPU image lacks (mlflow, mlflow-skinny, mlflow-tracing, optuna,
#   # alembic, sqlalchemy, flask, graphene, opentelemetry-*, pydantic, ...: see KINDS.md's package list)
#
# Writes each part's log to $OUT (or ./gpu-out): cuda_check.log, cuda_tests.log, sweep.log, matmul.log,
# ranks.log, and the sweeps' folders as multirun.tgz.  Each part has its own time limit; about 7 minutes in all.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
t0=$(date +%s)
since() { echo "$(( $(date +%s) - t0 )) s"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    .whl/*.whl .whl/ml/*.whl 2>&1 | tail -3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 LOADEREXP_DATA_ROOT=/tmp/data
nvidia-smi -L
echo "== 1. benchmarks/cuda_check.py ($(since))"
timeout 120 python3 benchmarks/cuda_check.py > "$OUT/cuda_check.log" 2>&1; echo "rc=$?" >> "$OUT/cuda_check.log"
tail -14 "$OUT/cuda_check.log"
echo "== 2. the CUDA tests ($(since))"
timeout 60 python3 -m pytest -q -p no:cacheprovider tests/test_measurement_model.py -k on_cuda \
    > "$OUT/cuda_tests.log" 2>&1; echo "rc=$?" >> "$OUT/cuda_tests.log"
tail -2 "$OUT/cuda_tests.log"
echo "== 3. the quickstart sweep with a ResNet-18 step ($(since))"
timeout 170 ./multirun.sh workers step=model step.model=resnet18 > "$OUT/sweep.log" 2>&1; echo "rc=$?" >> "$OUT/sweep.log"
grep -i "model is off\|Recommendation\|Confirmed\|The ceiling" "$OUT/sweep.log" | cut -c1-400
echo "== 4. CIFAR-10, matmul step: workers x pin_memory x device.prefetch ($(since))"
timeout 150 ./multirun.sh workers step=matmul 'loader.num_workers=0,4,8' 'device.prefetch=true,false' bench=quick \
    > "$OUT/matmul.log" 2>&1; echo "rc=$?" >> "$OUT/matmul.log"
sed -n '/^num_workers/,/^Confirmed pick/p' "$OUT/matmul.log" | cut -c1-300
echo "== 5. two ranks on one GPU: refused before any worker starts ($(since))"
timeout 60 python3 -m loaderexp dist.nproc_per_node=2 device=cuda tracking=none > "$OUT/ranks.log" 2>&1
echo "rc=$?" >> "$OUT/ranks.log"; tail -3 "$OUT/ranks.log"
tar czf "$OUT/multirun.tgz" outputs/multiruns 2>/dev/null
echo "== done in $(since)"
