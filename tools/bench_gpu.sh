#!/usr/bin/env bash
# `make bench-gpu`: the headline image figures on one H100/H200 (docs/benchmarks.md, "Headline GPU figures").
# Installs the wheels `make bench-gpu-wheels` put in .bench-gpu/wheels (diffusers and the service's settings, which
# a bare GPU machine lacks) into a folder of their own, then runs `python -m app.bench gpu`, which reads the
# pinned instances' prices from .bench-gpu/prices.json.
#
#   tools/bench_gpu.sh            the section goes into docs/benchmarks.md
#   tools/bench_gpu.sh DIR        into a copy of docs/benchmarks.md in DIR (the device tool's $OUT), with the
#                                 rows as JSON and the log beside it: what comes back from that machine
#
# GPU_PYTHON (python3) is the interpreter with CUDA torch; BENCH_ARGS adds options (python -m app.bench gpu -h);
# BENCH_GPU_WHEELS names another wheel folder.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${GPU_PYTHON:-python3}
site=${BENCH_GPU_SITE:-/tmp/bench-gpu-site}
shopt -s nullglob
wheel_dir=${BENCH_GPU_WHEELS:-.bench-gpu/wheels}
wheels=("$wheel_dir"/*.whl)
if ((${#wheels[@]})); then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${wheels[@]}"
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "no wheels in $wheel_dir (make bench-gpu-wheels): using $python's own packages" >&2
fi
results=docs/benchmarks.md
log=/tmp/bench-gpu.log
extra=()
if (($#)); then
  mkdir -p "$1"
  cp docs/benchmarks.md "$1/benchmarks.md"
  results="$1/benchmarks.md"
  log="$1/bench-gpu.log"
  extra=(--json "$1/bench-gpu.json")
fi
export PYTHONUNBUFFERED=1
# BENCH_ARGS is a list of options: split on purpose.
# shellcheck disable=SC2086
"$python" -m app.bench gpu --results-file "$results" "${extra[@]}" ${BENCH_ARGS:-} 2>&1 | tee "$log"
