#!/usr/bin/env bash
# GPU acceptance: one command on a Linux host with one NVIDIA GPU, CUDA-enabled torch and this repo.
#
#   scripts/gpu/acceptance.sh [--python PY] [OUT_DIR]
#
# Runs, each under `timeout` and inside one overall budget of ACCEPTANCE_BUDGET_S (default 480 s = 8 min):
#   1. preflight   torch sees exactly one CUDA device, no HIP build, no profiler variables, every module
#                  the steps import is importable
#   2. cuda-tests  the `cuda` pytest lane                                   -> cuda-tests.xml, cuda-tests.log
#   3. probe-2048  probe --acceptance of mjwarp against mujoco at 2048 envs -> probe-2048.json
#   4. probe-8192  probe --acceptance of mjwarp alone at 8192 envs          -> probe-8192.json (throughput target)
#   5. train       a short flashsac/g1_motion_tracking/mjwarp run, 1024 envs -> train-run/
#   6. soak        a short `soak run --sim mjwarp` at 1024 envs             -> soak.json, soak-run/
# Every artifact and log goes under OUT_DIR (default reports/gpu-acceptance/<UTC timestamp>, which must not
# exist yet). A summary table is printed and written to OUT_DIR/summary.txt; exit 0 only if every step passed.
#
# Interpreter: by default every step runs through `uv run --frozen --extra mjwarp python -m MODULE`.
# With `--python PY` (or ACCEPTANCE_PYTHON=PY) uv is not used at all: every step runs from this checkout
# as `PY -m MODULE` (soakbench.runtime.cli, soakbench.harness.probe, soakbench.harness.soak.cli,
# pytest), with the checkout put first on PYTHONPATH, so an existing interpreter with the packages
# installed (an air-gapped host: see docs/gpu-acceptance.md and scripts/gpu/device_install.sh, and export
# the PYTHONPATH it prints) runs it.
#
# CPU dry run (checks the script itself on a host without a GPU): ACCEPTANCE_DRY_RUN=cpu swaps the GPU
# variants for small CPU ones (mujoco, and mjwarp on Warp's CPU diagnostic device), adds a step proving
# that `probe --acceptance` fails closed without a GPU, and relaxes the preflight. It is not evidence.
# Knobs: ACCEPTANCE_BUDGET_S (480), ACCEPTANCE_TRAIN_ITERS (100), ACCEPTANCE_SOAK_ITERS (300),
# ACCEPTANCE_ONLY=step,step (rerun only those steps after the preflight, e.g. ACCEPTANCE_ONLY=soak into a
# new OUT_DIR; the others show as "not selected" and do not count).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PYTHON_BIN="${ACCEPTANCE_PYTHON:-}"
if [[ "${1:-}" == "--python" ]]; then
  if [[ -z "${2:-}" ]]; then
    echo "acceptance: --python needs an interpreter" >&2
    exit 2
  fi
  PYTHON_BIN="$2"
  shift 2
fi
if [[ "${1:-}" == -* ]] || (($# > 1)); then
  echo "acceptance: usage: scripts/gpu/acceptance.sh [--python PY] [OUT_DIR]" >&2
  exit 2
fi
if [[ -n "$PYTHON_BIN" ]]; then  # resolve it where it was given, before moving to the checkout
  if ! PYTHON_BIN="$(command -v "$PYTHON_BIN")"; then
    echo "acceptance: the interpreter given by --python or ACCEPTANCE_PYTHON is not an executable" >&2
    exit 2
  fi
  case "$PYTHON_BIN" in /*) ;; *) PYTHON_BIN="$PWD/$PYTHON_BIN" ;; esac
fi
cd "$REPO" || exit 2
DRY="${ACCEPTANCE_DRY_RUN:-}"
if [[ -n "$DRY" && "$DRY" != "cpu" ]]; then
  echo "acceptance: ACCEPTANCE_DRY_RUN must be unset or 'cpu', got '$DRY'" >&2
  exit 2
fi
BUDGET_S="${ACCEPTANCE_BUDGET_S:-480}"
TRAIN_ITERS="${ACCEPTANCE_TRAIN_ITERS:-100}"   # GPU train step iterations (1024 envs)
SOAK_ITERS="${ACCEPTANCE_SOAK_ITERS:-300}"     # GPU soak step iterations (1024 envs)
for knob in TRAIN_ITERS SOAK_ITERS; do
  if ! [[ "${!knob}" =~ ^[1-9][0-9]*$ ]]; then
    echo "acceptance: ACCEPTANCE_$knob must be a positive integer, got '${!knob}'" >&2
    exit 2
  fi
done
if ! [[ "$BUDGET_S" =~ ^[0-9]+$ ]] || (( BUDGET_S < 60 )); then
  echo "acceptance: ACCEPTANCE_BUDGET_S must be an integer >= 60, got '$BUDGET_S'" >&2
  exit 2
fi
# Two GPUs for the NCCL rank benchmark (one rank per GPU): "a,b" device indexes; unset on a one-GPU host
NCCL_GPUS="${ACCEPTANCE_NCCL_GPUS:-}"
if [[ -n "$NCCL_GPUS" ]] && ! [[ "$NCCL_GPUS" =~ ^[0-9]+,[0-9]+$ ]]; then
  echo "acceptance: ACCEPTANCE_NCCL_GPUS must be two device indexes like 0,1, got '$NCCL_GPUS'" >&2
  exit 2
fi
ONLY="${ACCEPTANCE_ONLY:-}"
KNOWN_STEPS=" cuda-tests probe-acceptance-refused probe-2048 probe-8192 train soak rank-scaling "
if [[ -n "$ONLY" ]]; then
  IFS=, read -r -a only_list <<<"$ONLY"
  for name in "${only_list[@]}"; do
    if [[ "$KNOWN_STEPS" != *" $name "* ]]; then
      echo "acceptance: ACCEPTANCE_ONLY names an unknown step '$name' (known:$KNOWN_STEPS)" >&2
      exit 2
    fi
  done
fi
if [[ -n "$PYTHON_BIN" ]]; then
  # an existing interpreter: no uv; every step is `PY -m MODULE` from this checkout
  if ! "$PYTHON_BIN" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    echo "acceptance: $PYTHON_BIN is not Python >= 3.11" >&2
    exit 2
  fi
  PY=("$PYTHON_BIN")
  export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
  RUNNER="python $PYTHON_BIN (no uv)"
else
  PY=(uv run --frozen --extra mjwarp python)  # mjwarp is an optional extra: make sure it is installed
  RUNNER="uv run --frozen --extra mjwarp"
fi
OUT="${1:-$REPO/reports/gpu-acceptance/$(date -u +%Y%m%dT%H%M%SZ)}"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
if [[ -e "$OUT" ]] && [[ -n "$(ls -A "$OUT" 2>/dev/null)" ]]; then
  echo "acceptance: output folder $OUT exists and is not empty; choose a new one" >&2
  exit 2
fi
mkdir -p "$OUT" || exit 2

START=$(date +%s)
DEADLINE=$((START + BUDGET_S))
STEPS=()
declare -A STATUS SECONDS_TAKEN

# step NAME TIMEOUT_S EXPECTED_RC -- CMD...   (output -> OUT/NAME.log; timeout clipped to the budget)
step() {
  local name="$1" limit="$2" expect="$3"
  shift 4
  local now left rc t0
  now=$(date +%s)
  left=$((DEADLINE - now))
  STEPS+=("$name")
  if [[ -n "$ONLY" && "$name" != preflight && ",$ONLY," != *",$name,"* ]]; then
    STATUS[$name]="not selected"
    SECONDS_TAKEN[$name]=0
    return
  fi
  if (( left < 10 )); then
    STATUS[$name]="skipped (budget spent)"
    SECONDS_TAKEN[$name]=0
    echo "== $name: skipped, overall budget spent"
    return
  fi
  (( limit > left )) && limit=$left
  local shown=() arg
  for arg in "$@"; do [[ "$arg" == *$'\n'* ]] && shown+=("<inline script>") || shown+=("$arg"); done
  echo "== $name (timeout ${limit}s): ${shown[*]}"
  t0=$(date +%s)
  timeout --kill-after=15 "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  SECONDS_TAKEN[$name]=$(( $(date +%s) - t0 ))
  if (( rc == 124 || rc == 137 )); then
    STATUS[$name]="TIMEOUT after ${limit}s"
  elif (( rc == expect )); then
    STATUS[$name]="pass"
  else
    STATUS[$name]="FAIL (exit $rc, expected $expect)"
  fi
  echo "   -> ${STATUS[$name]} in ${SECONDS_TAKEN[$name]}s (log: $OUT/$name.log)"
}

# every module a step imports: a missing install fails the preflight by name instead of a later step
MODULES=(torch numpy mujoco mujoco_warp warp omegaconf jsonschema referencing typer rich jinja2 matplotlib
  psutil yaml pynvml tensorboard pytest pytest_timeout hypothesis runtime.cli harness.probe.cli harness.soak.cli)
IMPORTS_CHECK='
import importlib, sys
bad = []
for m in sys.argv[1:]:
    try:
        importlib.import_module(m)
    except Exception as exc:
        bad.append(f"{m}: {type(exc).__name__}: {exc}")
import torch
print(sys.executable, sys.version.split()[0], "torch", torch.__version__, torch.version.cuda, torch.cuda.is_available())
for b in bad:
    print("preflight: cannot import", b, file=sys.stderr)
sys.exit(1 if bad else 0)
'

if [[ "$DRY" == "cpu" ]]; then
  echo "acceptance: CPU DRY RUN into $OUT via $RUNNER (not GPU evidence)"
  step preflight 60 0 -- "${PY[@]}" -c "$IMPORTS_CHECK" "${MODULES[@]}"
  step cuda-tests 180 0 -- "${PY[@]}" -m pytest -m cuda -q -p no:cacheprovider --junitxml="$OUT/cuda-tests.xml" tests
  step probe-acceptance-refused 120 2 -- "${PY[@]}" -m soakbench.harness.probe --backends mujoco --num-envs 8 --warmup 1 --iters 2 \
    --acceptance --output "$OUT/probe-refused.json"
  step probe-2048 300 0 -- "${PY[@]}" -m soakbench.harness.probe --backends mjwarp,mujoco --mjwarp-device cpu --num-envs 16 \
    --warmup 2 --iters 5 --output "$OUT/probe-2048.json"
  step probe-8192 120 0 -- "${PY[@]}" -m soakbench.harness.probe --backends mujoco --num-envs 256 --warmup 5 --iters 20 \
    --output "$OUT/probe-8192.json"
  step train 180 0 -- "${PY[@]}" -m soakbench.runtime.cli --algo flashsac --task g1_motion_tracking --sim mujoco \
    algo.num_envs=16 algo.max_iterations=30 training.no_play=true log_dir="$OUT/train-run"
  step soak 240 0 -- "${PY[@]}" -m soakbench.harness.soak.cli run --sim mujoco --num-envs 16 --iterations 200 --min-duration-seconds 1 \
    --sample-interval-seconds 0.5 --min-trend-samples 8 --startup-timeout-seconds 120 --stale-progress-seconds 60 \
    --post-shutdown-grace-seconds 2 --live plain --log-dir "$OUT/soak-run" --output "$OUT/soak.json"
  # the rank benchmark's collective half on gloo: the same script the GPU run gives NCCL
  step rank-scaling 120 0 -- "${PY[@]}" benchmarks/rank_scaling.py --skip-trainer --timed-updates 5
else
  echo "acceptance: GPU run into $OUT via $RUNNER (budget ${BUDGET_S}s)"
  step preflight 60 0 -- "${PY[@]}" - "${MODULES[@]}" <<'EOF'
import os, sys
import torch
from soakbench.harness.probe.stats import profiler_env_violations
problems = []
if torch.version.hip is not None:
    problems.append(f"HIP build {torch.version.hip}: NVIDIA CUDA required")
if not torch.cuda.is_available():
    problems.append("torch.cuda.is_available() is False")
elif torch.cuda.device_count() != 1:
    problems.append(f"{torch.cuda.device_count()} CUDA devices visible; set CUDA_VISIBLE_DEVICES to one")
for name in sys.argv[1:]:
    try:
        __import__(name)
    except Exception as exc:
        problems.append(f"cannot import {name}: {type(exc).__name__}: {exc}")
hits = profiler_env_violations(os.environ)
if hits:
    problems.append(f"profiler variables set: {hits}")
print(sys.executable, sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available(),
      torch.cuda.device_count())
if torch.cuda.is_available():
    print(torch.cuda.get_device_name(0))
for p in problems:
    print("preflight:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
  if [[ "${STATUS[preflight]}" != "pass" ]]; then
    cat "$OUT/preflight.log" >&2
    echo "acceptance: preflight failed; nothing else run" >&2
    exit 1
  fi
  # the cuda lane first: it also compiles and caches the Warp CUDA kernels (~/.cache/warp) for the rest
  step cuda-tests 120 0 -- "${PY[@]}" -m pytest -m cuda -q -p no:cacheprovider --junitxml="$OUT/cuda-tests.xml" tests
  # one worker process per backend: these step timeouts were sized for one, inside the 8-minute budget
  step probe-2048 120 0 -- "${PY[@]}" -m soakbench.harness.probe --backends mjwarp,mujoco --num-envs 2048 --warmup 20 --iters 100 \
    --processes 1 --acceptance --output "$OUT/probe-2048.json"
  step probe-8192 45 0 -- "${PY[@]}" -m soakbench.harness.probe --backends mjwarp --num-envs 8192 --warmup 20 --iters 100 \
    --processes 1 --acceptance --output "$OUT/probe-8192.json"
  step train 70 0 -- "${PY[@]}" -m soakbench.runtime.cli --algo flashsac --task g1_motion_tracking --sim mjwarp \
    algo.num_envs=1024 algo.max_iterations="$TRAIN_ITERS" algo.save_interval=100 training.no_play=true \
    log_dir="$OUT/train-run"
  step soak 130 0 -- "${PY[@]}" -m soakbench.harness.soak.cli run --sim mjwarp --num-envs 1024 --iterations "$SOAK_ITERS" \
    --min-duration-seconds 10 --sample-interval-seconds 0.5 --min-trend-samples 8 --startup-timeout-seconds 90 \
    --stale-progress-seconds 45 --post-shutdown-grace-seconds 5 --live plain \
    --extra-override algo.save_interval=200 --log-dir "$OUT/soak-run" --output "$OUT/soak.json"
  # NCCL: one rank per GPU, so only where two are given; the update step against its all-reduce
  if [[ -n "$NCCL_GPUS" ]]; then
    step rank-scaling 90 0 -- env CUDA_VISIBLE_DEVICES="$NCCL_GPUS" "${PY[@]}" benchmarks/rank_scaling.py \
      --skip-trainer --device cuda --timed-updates 20
  else
    STEPS+=(rank-scaling)
    STATUS[rank-scaling]="not selected (one GPU: NCCL needs ACCEPTANCE_NCCL_GPUS=a,b)"
    SECONDS_TAKEN[rank-scaling]=0
  fi
fi

# ---- summary ---------------------------------------------------------------------------------------
FAILED=0
for name in "${STEPS[@]}"; do
  [[ "${STATUS[$name]}" == "pass" || "${STATUS[$name]}" == "not selected"* ]] || FAILED=1
done
{
  echo "GPU acceptance summary ($([[ "$DRY" == "cpu" ]] && echo 'CPU DRY RUN, not evidence' || echo 'GPU'))"
  echo "folder: $OUT"
  echo "runner: $RUNNER"
  [[ -z "$ONLY" ]] || echo "selected steps: $ONLY"
  echo "total: $(( $(date +%s) - START ))s of ${BUDGET_S}s budget"
  printf '%-26s %-34s %6s\n' step status seconds
  for name in "${STEPS[@]}"; do
    printf '%-26s %-34s %6s\n' "$name" "${STATUS[$name]}" "${SECONDS_TAKEN[$name]}"
  done
  "${PY[@]}" - "$OUT" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for name in ("probe-2048.json", "probe-8192.json"):
    path = out / name
    if not path.exists():
        continue
    art = json.loads(path.read_text())
    acc = art["acceptance"]
    print(f"{name}: acceptance requested={acc['requested']} passed={acc['passed']}")
    for backend, entry in art["backends"].items():
        r, med = entry["processes"][0], {k: v["median"] for k, v in entry["summary"].items() if k != "phases"}
        print(
            f"  {backend:7s} {r['device']:7s} envs={r['num_envs']:5d} processes={len(entry['processes'])} "
            f"throughput={med['env_control_steps_per_s']:,.0f} env steps/s  "
            f"limit={med['physics_control_steps_per_s']:,.0f} ({r['physics_limit']['method']})  "
            f"efficiency={med['efficiency']:.3f}  "
            f"iteration p50={entry['summary']['phases']['iteration_ms']['median']:.3f} ms"
            + ("  UNSTABLE: " + "; ".join(entry["stability"]["reasons"]) if entry["stability"]["unstable"] else "")
        )
soak = out / "soak.json"
if soak.exists():
    art = json.loads(soak.read_text())
    print(f"soak.json: status={art.get('status')} failure_reason={art.get('failure_reason')}")
summary = out / "train-run" / "run_summary.json"
if summary.exists():
    s = json.loads(summary.read_text())
    print(f"train-run: status={s.get('status')} env_steps={s.get('total_env_steps')} duration_s={s.get('duration_s')}")
EOF
} | tee "$OUT/summary.txt"
exit $FAILED
