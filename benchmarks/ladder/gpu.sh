#!/usr/bin/env bash
# The ladder's GPU rungs on a lent accelerator, in one command (benchmarks/ladder/gpu.py):
#
#   OUT=/some/folder bash benchmarks/ladder/gpu.sh [--gpu SIZE ...]
#
# It reads the corpus from benchmarks/ladder/cache/corpus.xz (git-ignored: build it where pip
# reaches PyPI with `python -m benchmarks.ladder --build-corpus`, and carry it), times one program
# of every GPU rung, then trains the rungs in the protocol's order of priority, each rate's seeds
# vmapped in one program, skipping the runs the ledger holds, and stops before DEADLINE seconds
# (default 540). Its new ledger lines and timings land in $OUT (runs.jsonl, timings_gpu.json);
# merge them here with `python -m benchmarks.ladder --merge <that runs.jsonl>`.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the folder whose files come back}"
PYTHON="${PYTHON:-python3}"
"$PYTHON" -m benchmarks.ladder --corpus "${CORPUS:-benchmarks/ladder/cache/corpus.xz}" \
  --deadline-seconds "${DEADLINE:-540}" --out "$OUT" "${@:---gpu}"
