#!/usr/bin/env bash
# The standard sweeps, then the summary report of each.
#   ./multirun.sh                 the quick sweep (CIFAR-10, num_workers 0..4, pin_memory true/false)
#   ./multirun.sh classic         the classic one (num_workers 0..19): slow on small machines
#   ./multirun.sh workers EXTRA…  extra Hydra overrides go to every sweep, e.g. bench=quick
set -euo pipefail
cd "$(dirname "$0")"
python=python3
[ -x .venv/bin/python ] && python=.venv/bin/python

sweeps=("${1:-workers}")
shift || true
for sweep in "${sweeps[@]}"; do
  echo "== sweep: +experiment=$sweep"
  # Each sweep prints its own summary table and the MLflow address of its runs at the end.
  "$python" -m loaderexp -m "+experiment=$sweep" "$@"
  latest=$(ls -d outputs/multiruns/*/* | sort | tail -n 1)
  echo "== report: $latest"
  "$python" -m loaderexp.report "$latest"
done
