#!/usr/bin/env bash
# The GPU check: on a machine with an NVIDIA GPU, install each backend's CUDA
# build, run both benchmarks (routing layer, training step; labml_nn on the
# same GPU) and one epoch of the `paper` preset in float32 and mixed_bfloat16,
# per backend, and write everything to a new folder.
#
#   bash benchmarks/gpu_check.sh                 # -> benchmarks/gpu-<time>/
#   GPU_CHECK_DATA=/path/mnist.npz bash benchmarks/gpu_check.sh
#
# Settings (environment variables):
#   GPU_CHECK_DATA        --data for the trainer: auto (default; full MNIST
#                         through Keras' download/cache), keras, or a path
#   GPU_CHECK_BENCH_DATA  Keras-layout .npz for the training benchmark
#                         (default: ../shared/data/mnist-offline.npz)
#   GPU_CHECK_BACKENDS    default "torch jax tensorflow"
#   GPU_CHECK_PYTHON      an interpreter that already has everything: skips
#                         the installs (one virtualenv per backend otherwise,
#                         .venv-gpu-<backend>, as the CUDA builds of the three
#                         frameworks pin different CUDA libraries)
#   GPU_CHECK_BENCH_ARGS  extra flags for benchmarks/run_all.py (it times 40
#                         training steps here: 10 pass in a blink on a GPU)
#   GPU_CHECK_TRAIN_ARGS  extra flags for python -m capsules_keras.train
#
# Memory in the benchmark tables is host RSS; on a GPU it does not show the
# device memory. A folder that exists is never overwritten.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${1:-benchmarks/gpu-$(date -u +%Y%m%d-%H%M%S)}
if [ -e "$OUT" ]; then
  echo "gpu_check: $OUT exists; give a new folder" >&2
  exit 1
fi
mkdir -p "$OUT"
DATA=${GPU_CHECK_DATA:-auto}
BENCH_DATA=${GPU_CHECK_BENCH_DATA:-../shared/data/mnist-offline.npz}
BACKENDS=${GPU_CHECK_BACKENDS:-torch jax tensorflow}
export TF_CPP_MIN_LOG_LEVEL=3

(nvidia-smi || echo "nvidia-smi not found: no NVIDIA GPU visible") \
  > "$OUT/nvidia-smi.txt" 2>&1

python_for() {
  local backend=$1 venv=".venv-gpu-$1" gpu_build
  if [ -n "${GPU_CHECK_PYTHON:-}" ]; then
    echo "$GPU_CHECK_PYTHON"
    return
  fi
  case $backend in
    torch) gpu_build="torch" ;;  # PyPI's Linux torch wheels are CUDA builds
    jax) gpu_build="jax[cuda12]" ;;
    tensorflow) gpu_build="tensorflow[and-cuda]" ;;
    *) echo "gpu_check: unknown backend $backend" >&2; exit 1 ;;
  esac
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    # torch in every environment: the labml_nn reference runs on it.
    "$venv/bin/pip" install --quiet torch "$gpu_build" -e ".[dev]" >&2
    "$venv/bin/pip" install --quiet --no-deps "labml-nn==0.5.1" >&2
  fi
  echo "$venv/bin/python"
}

for backend in $BACKENDS; do
  py=$(python_for "$backend")
  echo "=== $backend: devices ==="
  KERAS_BACKEND=$backend "$py" -c "import keras; \
from capsules_keras.training import describe_devices; \
print(keras.backend.backend(), describe_devices())" \
    | tee "$OUT/devices-$backend.txt"
  echo "=== $backend: benchmarks ==="
  KERAS_BACKEND=$backend "$py" benchmarks/run_all.py --backends "$backend" \
    --train-data "$BENCH_DATA" --output-dir "$OUT/bench-$backend" \
    --notes-file /dev/null --train-steps 40 ${GPU_CHECK_BENCH_ARGS:-}
  for policy in float32 mixed_bfloat16; do
    echo "=== $backend: paper preset, 1 epoch, $policy ==="
    KERAS_BACKEND=$backend "$py" -m capsules_keras.train --preset paper \
      --epochs 1 --data "$DATA" --dtype-policy "$policy" \
      --output-dir "$OUT/runs-$policy" --verbose 2 ${GPU_CHECK_TRAIN_ARGS:-} \
      2>&1 | tee "$OUT/train-$backend-$policy.log"
  done
done

"${GPU_CHECK_PYTHON:-python3}" - "$OUT" <<'PY'
import glob, json, os, sys

out = sys.argv[1]
rows = []
for path in sorted(glob.glob(os.path.join(out, "runs-*", "*", "metrics.json"))):
    with open(path) as f:
        m = json.load(f)
    rows.append({k: m.get(k) for k in (
        "backend", "dtype_policy", "epochs", "test_accuracy",
        "images_per_second", "train_seconds", "n_train", "data_source")})
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(rows, f, indent=2)
for row in rows:
    print(row)
PY
echo "gpu_check: results in $OUT"
