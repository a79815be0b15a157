#!/usr/bin/env bash
# What benchmarks/gpu_check.sh needs on a GPU machine without a network,
# fetched here into one git-ignored folder that travels with the working tree
# (name it in the device call's `carry`):
#
#   bash benchmarks/gpu_carry.sh            # or `make gpu-carry`
#   bash benchmarks/gpu_carry.sh --print    # what it would fetch; fetches nothing
#
# .gpu-check/wheels/  wheels of what such a machine lacks: keras and the two
#                     of its requirements that are not there (namex, optree;
#                     absl-py, h5py, ml-dtypes, numpy, packaging and rich
#                     are), and labml-nn, the benchmarks' PyTorch reference
#                     (pure Python; its capsule modules need only torch).
#                     The versions are those of this interpreter, the one the
#                     test suite runs, built for CPython 3.12 on x86-64 Linux
#                     (the lent machines' python3).
# .gpu-check/mnist-full.npz
#                     MNIST for the trainer and the training benchmark (the
#                     machine cannot download it).
#
# Settings (environment variables):
#   GPU_CARRY_PYTHON  the interpreter whose versions are carried
#                     (default: python3, the activated .venv's)
#   GPU_CARRY_MNIST   the MNIST file to carry
#                     (default: ../shared/data/mnist-full.npz)
#   GPU_CARRY_DIR     the folder (default: .gpu-check, in .gitignore)
#
# Old wheels are removed first: two versions of one package stop the install
# there. The folder holds about 15 MB (wheels about 3.3 MB, MNIST 11.5 MB),
# well under the 64 MiB that the working tree and what it carries may take.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${GPU_CARRY_PYTHON:-python3}
MNIST=${GPU_CARRY_MNIST:-../shared/data/mnist-full.npz}
DIR=${GPU_CARRY_DIR:-.gpu-check}
PACKAGES="keras namex optree labml-nn"

pins=()
for package in $PACKAGES; do
  version=$("$PY" -c "from importlib.metadata import version; \
print(version('$package'))") || {
    echo "gpu_carry: $PY has no $package; install it first (make install)" >&2
    exit 1
  }
  pins+=("$package==$version")
done
download=("$PY" -m pip download --quiet --no-deps --only-binary=:all:
  --python-version 3.12 --implementation cp
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
  --platform manylinux1_x86_64 -d "$DIR/wheels" "${pins[@]}")

if [ "${1:-}" = "--print" ]; then
  echo "carry: ${pins[*]}"
  echo "fetch: ${download[*]}"
  echo "data: $MNIST -> $DIR/mnist-full.npz"
  exit 0
fi

mkdir -p "$DIR/wheels"
rm -f "$DIR"/wheels/*.whl
"${download[@]}"
cp "$MNIST" "$DIR/mnist-full.npz"
du -b "$DIR"/wheels/*.whl "$DIR/mnist-full.npz"
echo "gpu_carry: $(du -sb "$DIR" | cut -f1) bytes in $DIR"
