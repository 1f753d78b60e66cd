#!/usr/bin/env bash
# The release gate both CI pipelines run (docs/ci.md): the probe filed at the base commit, a soak of the
# owner-routed trainer, a probe, and that probe gated against the filed one. Every step runs even when an earlier one
# failed, so that every verdict reaches CI; the exit status is the first failure's.
#
# Writes under $OUT: soak.json (+ .html, samples, console log), soak.xml, probe.json, probe.bmf.json,
# base-probe.json, probe-compare.json, probe-compare.xml, and soak.md / probe-compare.md when
# GITHUB_STEP_SUMMARY is not set (when it is, the summaries are appended there).
#
# Settings come from the environment; the defaults are the canonical GPU soak and probe.
set -uo pipefail
cd "$(dirname "$0")/../.."

: "${BASE_SHA:?set BASE_SHA to the commit whose filed probe gates this one}"
OUT="${OUT:-$PWD/runs/ci}"
ALGO="${ALGO:-flashsac}" TASK="${TASK:-g1_motion_tracking}" SIM="${SIM:-mjwarp}"
PLATFORM="${PLATFORM:-linux-cuda}"
NUM_ENVS="${NUM_ENVS:-1024}" ITERATIONS="${ITERATIONS:-65000}" MIN_DURATION="${MIN_DURATION:-1800}"
SAMPLE_INTERVAL="${SAMPLE_INTERVAL:-5}" MIN_TREND_SAMPLES="${MIN_TREND_SAMPLES:-30}"
PROGRESS_EVERY="${PROGRESS_EVERY:-60}"
PROBE_ENVS="${PROBE_ENVS:-2048}" PROBE_WARMUP="${PROBE_WARMUP:-20}" PROBE_ITERS="${PROBE_ITERS:-100}"
PROBE_ROUNDS="${PROBE_ROUNDS:-5}" PROBE_PROCESSES="${PROBE_PROCESSES:-3}"
EVIDENCE_REPO="${EVIDENCE_REPO:-$PWD}"
RUN=(uv run --frozen)

if [ -e "$OUT" ] && [ -n "$(ls -A "$OUT")" ]; then
  echo "release_gate: OUT=$OUT is not empty; every run writes a new folder" >&2
  exit 2
fi
mkdir -p "$OUT"

# an explicit summary file per command, unless GitHub's step summary collects them
soak_summary=() compare_summary=()
if [ -z "${GITHUB_STEP_SUMMARY:-}" ]; then
  soak_summary=(--summary-md "$OUT/soak.md") compare_summary=(--summary-md "$OUT/probe-compare.md")
fi

status=0
keep() { local rc=$?; if [ "$status" -eq 0 ] && [ "$rc" -ne 0 ]; then status=$rc; fi; }

# first, since it needs only git: a base commit with nothing filed is said in seconds, not after the soak
"${RUN[@]}" python scripts/ci/base_probe.py --at "$BASE_SHA" --platform "$PLATFORM" --task "$TASK" \
  --backend "$SIM" --num-envs "$PROBE_ENVS" --repo "$EVIDENCE_REPO" --output "$OUT/base-probe.json"
keep

"${RUN[@]}" soak run --algo "$ALGO" --task "$TASK" --sim "$SIM" \
  --num-envs "$NUM_ENVS" --iterations "$ITERATIONS" --min-duration-seconds "$MIN_DURATION" \
  --sample-interval-seconds "$SAMPLE_INTERVAL" --min-trend-samples "$MIN_TREND_SAMPLES" \
  --live plain --quiet-progress --progress-every "$PROGRESS_EVERY" \
  --log-dir "$OUT/soak-run" --output "$OUT/soak.json" --junit-xml "$OUT/soak.xml" "${soak_summary[@]}"
keep

"${RUN[@]}" probe --backends "$SIM" --task "$TASK" --num-envs "$PROBE_ENVS" --warmup "$PROBE_WARMUP" \
  --iters "$PROBE_ITERS" --rounds "$PROBE_ROUNDS" --processes "$PROBE_PROCESSES" \
  --output "$OUT/probe.json" --bmf "$OUT/probe.bmf.json"
keep

if [ -f "$OUT/base-probe.json" ] && [ -f "$OUT/probe.json" ]; then
  "${RUN[@]}" probe compare "$OUT/base-probe.json" "$OUT/probe.json" --fail-on-regression \
    --json-file "$OUT/probe-compare.json" --junit-xml "$OUT/probe-compare.xml" "${compare_summary[@]}"
  keep
fi
exit "$status"
