#!/usr/bin/env bash
# The GPU check: per backend, the two benchmarks against labml_nn on the same
# GPU (routing layer, training step: benchmarks/run_all.py) and the `paper`
# preset's CapsNet trained in float32 and in mixed_bfloat16, all written to
# a new folder, with summary.json and summary.md at its top. Made for a GPU
# machine without a network, where nothing can be installed from a registry.
#
#   bash benchmarks/gpu_carry.sh                # here, once: fills .gpu-check/
#   bash benchmarks/gpu_check.sh [OUT]          # there; OUT: benchmarks/gpu-<time>/
#   bash benchmarks/gpu_check.sh --dry-run OUT  # here: every step, tiny, on this CPU
#
# The dry run (or GPU_CHECK_DRY_RUN=1) takes this interpreter's own packages,
# $KERAS_BACKEND alone and 32 training digits of $CAPSULES_KERAS_TEST_MNIST;
# tests/test_benchmarks.py runs it. On a lent H100 or H200 (the `device`
# tool's run, `.gpu-check` in its carry, timeout_s 600), one command; the
# trained models (33 MB each) stay behind:
#
#   bash benchmarks/gpu_check.sh /tmp/gpu; s=$?; cp /tmp/gpu/summary.* $OUT/;
#   tar -czf $OUT/gpu-check.tgz --exclude='*.keras' -C /tmp gpu; exit $s
#
# What it expects there: python3 (3.12) with torch and jax built for CUDA,
# and numpy, matplotlib, psutil, absl-py, h5py, ml-dtypes, packaging and rich,
# but neither keras nor tensorflow (the lent machines, 2026-11). What it
# brings: the wheels of .gpu-check/wheels/ (keras, namex, optree, labml-nn),
# installed with `pip install --no-index --no-deps --target` into a temporary
# folder on PYTHONPATH; this package from the working tree itself (on
# PYTHONPATH: the check runs the code as it is, not a wheel built earlier);
# MNIST from .gpu-check/mnist-full.npz. A backend the interpreter cannot
# import is skipped with one line (tensorflow there); without labml_nn the
# benchmarks, which both compare with it, are skipped with one line.
#
# Bounded to end well inside the ten minutes one call may run on an H100
# (estimated at 5-6 minutes for torch and jax; not yet run as a whole on a
# GPU): per backend one benchmark run at batch 128 only (torch.compile
# compiles every batch size and pass anew; 128 is where the targets are
# set), 40 timed training steps (10 pass in a blink on a GPU) in one round;
# then the trainer, `--preset paper` for 2 epochs of 10,000 of the 60,000
# training digits (the first epoch carries the compilation, the second gives
# the steady images/s; 20,000 images are a third of one full epoch) and all
# 10,000 test digits, per dtype policy. Every step has its own time limit
# (GPU_CHECK_STEP_TIMEOUT) inside the whole check's (GPU_CHECK_BUDGET, 9
# minutes: what is left of it then is skipped with a line), and a step that
# fails or runs out of time is reported and the next one runs: one problem
# costs one step, not the call, and the summary is always written.
#
# Settings (environment variables):
#   GPU_CHECK_PYTHON         the interpreter (default: python3, the machine's own)
#   GPU_CHECK_BACKENDS       default "torch jax tensorflow"; dry run: $KERAS_BACKEND
#   GPU_CHECK_CARRY          the carried folder (default: .gpu-check)
#   GPU_CHECK_DATA           MNIST for the trainer (a Keras-layout .npz; default
#                            .gpu-check/mnist-full.npz; dry run:
#                            $CAPSULES_KERAS_TEST_MNIST)
#   GPU_CHECK_BENCH_DATA     MNIST for the training benchmark (default: the same)
#   GPU_CHECK_POLICIES       default "float32 mixed_bfloat16"
#   GPU_CHECK_EPOCHS         default 2
#   GPU_CHECK_TRAIN_SAMPLES  training digits (default 10000; 0: all)
#   GPU_CHECK_STEP_TIMEOUT   seconds per step (default 300)
#   GPU_CHECK_BUDGET         seconds for all the steps (default 540)
#   GPU_CHECK_BENCH_ARGS     extra flags for benchmarks/run_all.py
#   GPU_CHECK_TRAIN_ARGS     extra flags for python -m capsules_keras.train
#
# Memory in the benchmark tables is host RSS; on a GPU it does not show the
# device memory. A folder that exists is never overwritten. Exits 1 when a
# step failed, 0 otherwise (skipped backends are not failures).
set -uo pipefail
cd "$(dirname "$0")/.."

DRY=${GPU_CHECK_DRY_RUN:-}
if [ "${1:-}" = "--dry-run" ]; then
  DRY=1
  shift
fi
OUT=${1:-benchmarks/gpu-$(date -u +%Y%m%d-%H%M%S)}
if [ -e "$OUT" ]; then
  echo "gpu_check: $OUT exists; give a new folder" >&2
  exit 2
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=${GPU_CHECK_PYTHON:-python3}
CARRY=${GPU_CHECK_CARRY:-.gpu-check}
POLICIES=${GPU_CHECK_POLICIES:-float32 mixed_bfloat16}
STEP_TIMEOUT=${GPU_CHECK_STEP_TIMEOUT:-300}
BUDGET=${GPU_CHECK_BUDGET:-540}
export TF_CPP_MIN_LOG_LEVEL=3 PYTHONUNBUFFERED=1

if [ -n "$DRY" ]; then
  # Every step at a tiny size, on this machine's interpreter and backend:
  # seconds, not minutes. The numbers it prints mean nothing.
  BACKENDS=${GPU_CHECK_BACKENDS:-${KERAS_BACKEND:-jax}}
  DATA=${GPU_CHECK_DATA:-${CAPSULES_KERAS_TEST_MNIST:?the dry run trains on \
\$CAPSULES_KERAS_TEST_MNIST (or GPU_CHECK_DATA)}}
  # Ours trains in float32 only there, the policy its ratio to labml reads.
  BENCH=(--repeats 1 --warmup 1 --batch-sizes 2 --in-capsules 16
    --train-steps 1 --train-warmup 1 --train-batch-size 2 --rounds 1
    --train-dtype-policies float32)
  # torch.compile's modes run eagerly: on a CPU its C++ compilation would
  # take most of the dry run and exercise torch, not this script.
  export TORCHDYNAMO_DISABLE=1
  TRAIN=(--epochs "${GPU_CHECK_EPOCHS:-2}" --max-train-samples 32
    --max-test-samples 16 --batch-size 16 --conv-filters 16
    --primary-capsules 4)
else
  BACKENDS=${GPU_CHECK_BACKENDS:-torch jax tensorflow}
  DATA=${GPU_CHECK_DATA:-$CARRY/mnist-full.npz}
  BENCH=(--batch-sizes 128 --train-steps 40 --rounds 1)
  TRAIN=(--epochs "${GPU_CHECK_EPOCHS:-2}")
  if [ "${GPU_CHECK_TRAIN_SAMPLES:-10000}" != 0 ]; then
    TRAIN+=(--max-train-samples "${GPU_CHECK_TRAIN_SAMPLES:-10000}")
  fi
fi
BENCH_DATA=${GPU_CHECK_BENCH_DATA:-$DATA}

# One line for whatever is left out, here and in skipped.txt.
skip() {
  echo "gpu_check: skipping $*" | tee -a "$OUT/skipped.txt"
}

# step NAME COMMAND...: runs COMMAND under the time limit, its output on the
# screen and in NAME.log; a failure is reported in failed.txt, and the check
# goes on.
step() {
  local name=$1 status start=$SECONDS limit=$((BUDGET - SECONDS))
  shift
  if [ "$limit" -lt 30 ]; then
    skip "$name: the check's $BUDGET s are spent"
    return
  fi
  [ "$limit" -gt "$STEP_TIMEOUT" ] && limit=$STEP_TIMEOUT
  echo "=== $name ==="
  timeout -k 10 "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
  status=${PIPESTATUS[0]}
  echo "gpu_check: $name took $((SECONDS - start)) s" | tee -a "$OUT/steps.txt"
  if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo "gpu_check: FAILED $name: over its $limit s" | tee -a "$OUT/failed.txt"
  elif [ "$status" -ne 0 ]; then
    echo "gpu_check: FAILED $name (exit $status)" | tee -a "$OUT/failed.txt"
  fi
}

(nvidia-smi || echo "nvidia-smi not found: no NVIDIA GPU visible") \
  >"$OUT/nvidia-smi.txt" 2>&1

wheels=("$CARRY"/wheels/*.whl)
if [ -n "$DRY" ]; then
  echo "gpu_check: dry run: $PY's own packages, no wheels installed"
elif [ -e "${wheels[0]}" ]; then
  SITE=$(mktemp -d /tmp/gpu-check-site.XXXXXX)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target "$SITE" "${wheels[@]}" || {
    echo "gpu_check: the wheels of $CARRY/wheels did not install" >&2
    exit 2
  }
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  echo "gpu_check: installed into $SITE: ${wheels[*]##*/}"
else
  echo "gpu_check: no wheels in $CARRY/wheels (benchmarks/gpu_carry.sh);" \
    "$PY's own packages"
fi
# This package from the working tree, ahead of any installed copy.
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

available=()
for backend in $BACKENDS; do
  case $backend in
    torch | jax | tensorflow) ;;
    *) echo "gpu_check: unknown backend $backend" >&2; exit 2 ;;
  esac
  if "$PY" -c "import $backend" 2>/dev/null; then
    available+=("$backend")
  else
    skip "$backend: $PY cannot import $backend"
  fi
done
if [ ${#available[@]} -eq 0 ]; then
  echo "gpu_check: none of the backends ($BACKENDS) can be imported" >&2
  exit 2
fi
# Found, not imported: importing keras imports a backend (seconds), and each
# step below imports both and reports its own failure.
"$PY" -c "import sys
from importlib.metadata import version
from importlib.util import find_spec
missing = [name for name in ('keras', 'capsules_keras') if find_spec(name) is None]
if missing:
    sys.exit('gpu_check: $PY cannot find ' + ' and '.join(missing))
print('gpu_check: python', sys.version.split()[0], '| keras', version('keras'))" \
  | tee "$OUT/python.txt"
if [ "${PIPESTATUS[0]}" -ne 0 ]; then
  exit 2
fi
if [ ! -f "$DATA" ]; then
  echo "gpu_check: no MNIST at $DATA (benchmarks/gpu_carry.sh, or GPU_CHECK_DATA)" >&2
  exit 2
fi
LABML=1
if ! why=$("$PY" -c "import labml_nn.capsule_networks" 2>&1); then
  LABML=
  skip "the benchmarks against labml_nn: $PY cannot import labml_nn" \
    "(${why##*$'\n'}; its wheel: benchmarks/gpu_carry.sh)"
fi

for backend in "${available[@]}"; do
  # The devices each backend sees: in every trainer run's log and metrics.
  export KERAS_BACKEND=$backend
  if [ -n "$LABML" ]; then
    # shellcheck disable=SC2086  # the extra flags split into words
    step "bench-$backend" "$PY" benchmarks/run_all.py --backends "$backend" \
      --train-data "$BENCH_DATA" --output-dir "$OUT/bench-$backend" \
      --notes-file /dev/null "${BENCH[@]}" ${GPU_CHECK_BENCH_ARGS:-}
  fi
  for policy in $POLICIES; do
    # shellcheck disable=SC2086
    step "train-$backend-$policy" "$PY" -m capsules_keras.train --preset paper \
      --data "$DATA" --dtype-policy "$policy" --output-dir "$OUT/runs-$policy" \
      --verbose 2 "${TRAIN[@]}" ${GPU_CHECK_TRAIN_ARGS:-}
  done
done

"$PY" benchmarks/gpu_summary.py "$OUT"
echo "gpu_check: results in $OUT"
[ ! -s "$OUT/failed.txt" ]
