#!/usr/bin/env bash
# Collect and file linux-cpu support-matrix evidence from a CLEAN checkout, then regenerate the matrix.
#   collect_cpu_evidence.sh [--only all|stale] [OUT_DIR]
#   1. the whole CPU test lane as JUnit with cell bindings (any failure -> the lane is rejected);
#   2. a probe per task and a soak per linux-cpu/mujoco cell at the inventory's soak budget (the 2-rank
#      cell's soak runs the trainer as a 2-rank torchrun job: soak run --nproc-per-node 2);
#   3. each piece is filed (`matrix ingest`, then `matrix generate`) as soon as it completes, so a
#      collection cut off part-way keeps what it finished; at the end `matrix prune` drops surplus
#      historical evidence (git history keeps it).
# --only stale collects only what `matrix stale` lists at the start: the cells whose evidence of a kind
# does not count at HEAD (after a change to one learner, that learner's bound tests and soaks; rerun after
# a cut-off, the rest). Filing leaves the tree clean for the next piece: the evidence store and the
# generated pages are not counted as dirty (harness/context.py, COLLECTION_OUTPUTS).
# Commit matrix/evidence, docs/support-matrix.md and reports/support-matrix.* afterwards: evidence and
# generated pages are outside every input manifest, so committing them keeps the evidence fresh.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -n "$(git status --porcelain)" ]; then
  echo "collect_cpu_evidence: the tree is dirty; evidence from a dirty tree never counts" >&2
  exit 2
fi
ONLY=all
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --only) ONLY="${2:-}"; shift 2 ;;
    --only=*) ONLY="${1#--only=}"; shift ;;
    -*) echo "collect_cpu_evidence: unknown option $1; usage: [--only all|stale] [OUT_DIR]" >&2; exit 2 ;;
    *) OUT="$1"; shift ;;
  esac
done
if [ "$ONLY" != all ] && [ "$ONLY" != stale ]; then
  echo "collect_cpu_evidence: --only must be all or stale, got '$ONLY'" >&2
  exit 2
fi
OUT="${OUT:-$PWD/runs/cpu-evidence-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
RUN="uv run --frozen --extra mjwarp"  # the training stack is an extra (make setup installs the same)
# What --only stale collects, fixed before anything is filed: "algo task backend ranks" per line.
STALE_JUNIT=$($RUN matrix stale --kind junit --words)
STALE_PROBE=$($RUN matrix stale --kind probe --words)
STALE_SOAK=$($RUN matrix stale --kind soak --words)
wanted() {  # wanted LIST PATTERN: collect unless --only stale and no stale line matches PATTERN
  [ "$ONLY" = all ] || grep -Eq "$2" <<<"$1"
}
file_evidence() {  # file one piece as soon as it exists, and keep the matrix current
  local start=$SECONDS
  $RUN matrix ingest "$@"
  $RUN matrix generate >/dev/null
  echo "collect_cpu_evidence: filed $1 ($((SECONDS - start)) s to file)"
}
timed() {  # timed LABEL CMD...: run CMD, say how long it took, and return its exit status
  local label=$1 start=$SECONDS rc=0
  shift
  "$@" || rc=$?
  echo "collect_cpu_evidence: $label took $((SECONDS - start)) s"
  return "$rc"
}
INCONCLUSIVE=()
soak_and_file() {  # soak_and_file LABEL ARTIFACT SOAK-RUN-ARGS...: run one soak and file what it decided
  # A soak that could not decide (exit 3) is named and not filed (matrix ingest refuses it), and the
  # collection goes on: the other cells' soaks are still worth their hour. A failed soak (exit 1) is
  # evidence like a passed one and is filed; any other exit stops the collection.
  local label=$1 artifact=$2 rc=0
  shift 2
  timed "$label" $RUN soak run "$@" --output "$artifact" || rc=$?
  case $rc in
    0 | 1) file_evidence "$artifact" --platform linux-cpu ;;
    3) echo "collect_cpu_evidence: $label was inconclusive (exit 3); not filed" >&2; INCONCLUSIVE+=("$label") ;;
    *) echo "collect_cpu_evidence: $label exited $rc; stopping" >&2; exit "$rc" ;;
  esac
}
# Filed samples keep their file name (matrix ingest): the commit makes every collection's names unique.
COMMIT=$(git rev-parse --short=12 HEAD)

# The lane as `make test` runs it: the project's bytecode compiled first, one worker more than the cores
# (the cell plugin files the same cells and counts under xdist: tests/matrix/test_pytest_cell.py).
# --only stale runs only the tests bound to the cells whose JUnit evidence is historical
# (--matrix-only-cell): their evidence is their bound tests, and the other cells' filed lane still counts.
if wanted "$STALE_JUNIT" .; then
  only_cells=()
  if [ "$ONLY" = stale ]; then
    while read -r algo task backend ranks; do
      cell="$algo/$task/$backend"
      if [ "$ranks" != 1 ]; then cell="$cell/ranks=$ranks"; fi
      only_cells+=(--matrix-only-cell "$cell")
    done <<<"$STALE_JUNIT"
  fi
  $RUN python -m compileall -q foundation runtime harness matrix scripts benchmarks tests
  timed "the test lane${only_cells:+ (bound tests of the stale cells only)}" $RUN pytest -n "$(($(nproc) + 1))" \
    --dist loadgroup --no-loadscope-reorder -p soakbench.matrix.pytest_cell --matrix-platform linux-cpu \
    --matrix-lane cpu "${only_cells[@]}" --junitxml="$OUT/junit-cpu.xml" -q
  file_evidence "$OUT/junit-cpu.xml" --platform linux-cpu --lane cpu
fi

for task in g1_walk_flat g1_motion_tracking; do
  wanted "$STALE_PROBE" "^[a-z]+ $task mujoco " || continue
  timed "probe $task" $RUN probe --backends mujoco --task "$task" --num-envs 256 --warmup 10 --iters 100 \
    --output "$OUT/probe-$task.json"
  file_evidence "$OUT/probe-$task.json" --platform linux-cpu
done

# Budget: matrix/inventory.yaml linux-cpu soak (at least 64 envs, 600 s and 5000 iterations; why 600 s:
# docs/soak-design.md, "Why the linux-cpu budget is 600 s"). The trainer stops after an iteration count, so
# each count is sized to last 600 s on a host twice as fast as the shared 2-core host it was measured on.
# Each soak runs its owner's recipe: sac/g1_walk_flat makes 8 updates per iteration (docs/learners.md), so
# it runs far fewer iterations per second than sac/g1_motion_tracking's 1. FlashSAC uses CPU-sized
# batches so its learner really updates within the budget; the overrides are recorded in the artifact.
# flashsac/g1_motion_tracking's owner makes 4 updates per iteration at widths 128/64: measured at
# ba4a240, 5500 iterations in 1745 s beside the SAC tracking soak (1286 s), against 1018 s at 1 update.
# Measured at a94411f on that host, two soaks side by side: SAC (1 update per iteration) 30000 iterations
# in 680 s and 729 s, FlashSAC 5000 iterations in 962 s and 982 s; the counts below keep a margin over
# 600 s. At 5 s sampling the 30 trend-window samples each verdict needs take 240 s after start-up
# (docs/soak-design.md, "No pass without observation: why 30 samples"); a 600 s soak leaves ~75.
FLASHSAC_CPU=(--extra-override algo.batch_size=256 --extra-override algo.learning_starts=512)
# The run length each linux-cpu soak must vouch for (matrix/inventory.yaml: must_survive; the arithmetic
# of why a 600 s soak decides it on this host: docs/soak-design.md, "What a 600 s soak vouches for").
SOAK_TARGET=8h
for algo in sac flashsac; do
  for task in g1_walk_flat g1_motion_tracking; do
    extra=()
    iterations=40000
    if [ "$algo/$task" = sac/g1_walk_flat ]; then iterations=7000; fi
    if [ "$algo" = flashsac ]; then extra=("${FLASHSAC_CPU[@]}"); iterations=5500; fi
    wanted "$STALE_SOAK" "^$algo $task mujoco 1$" || continue
    soak_and_file "soak $algo/$task" "$OUT/soak-$algo-$task-$COMMIT.json" --algo "$algo" --task "$task" \
      --sim mujoco --num-envs 64 --iterations "$iterations" --min-duration-seconds 600 \
      --sample-interval-seconds 5 --live plain --must-survive "$SOAK_TARGET" "${extra[@]}" \
      --log-dir "$OUT/soak-$algo-$task"
  done
done

# The 2-rank cell (matrix/inventory.yaml: sac/g1_walk_flat/mujoco, ranks: 2): the same trainer as a 2-rank
# torchrun job, at the same budget per rank (--num-envs is per rank: each rank owns algo.num_envs worlds;
# --iterations is each rank's count). Only a 2-rank soak counts for that cell, and it never counts for the
# single-rank one. Both ranks share the host's cores, so each runs at roughly half the single-rank speed:
# the single-rank count of 7000 lasts ~600 s on a host twice as fast, so the budget's 5000 iterations (the
# count cannot go below it) take ~850 s there and ~1700 s on the shared 2-core host, well over 600 s.
if wanted "$STALE_SOAK" "^sac g1_walk_flat mujoco 2$"; then
  soak_and_file "soak sac/g1_walk_flat (2 ranks)" "$OUT/soak-sac-g1_walk_flat-2ranks-$COMMIT.json" \
    --nproc-per-node 2 --algo sac --task g1_walk_flat --sim mujoco --num-envs 64 --iterations 5000 \
    --min-duration-seconds 600 --sample-interval-seconds 5 --must-survive "$SOAK_TARGET" --live plain \
    --log-dir "$OUT/soak-sac-g1_walk_flat-2ranks"
fi

# The evidence filed above makes the previous collection historical: prune it (the newest historical
# piece per cell, kind and platform stays; git history keeps the rest; the matrix is regenerated).
$RUN matrix prune
$RUN matrix check
echo "collect_cpu_evidence: done in $SECONDS s (--only $ONLY)"
echo "evidence filed from $OUT; commit matrix/evidence docs/support-matrix.md reports/support-matrix.*"
if [ ${#INCONCLUSIVE[@]} -gt 0 ]; then
  printf 'collect_cpu_evidence: not filed (inconclusive): %s\n' "${INCONCLUSIVE[@]}" >&2
  exit 3
fi
