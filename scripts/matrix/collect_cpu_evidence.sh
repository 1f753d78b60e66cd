#!/usr/bin/env bash
# Collect and file linux-cpu support-matrix evidence from a CLEAN checkout, then regenerate the matrix.
#   1. the whole CPU test lane as JUnit with cell bindings (any failure -> the lane is rejected);
#   2. a probe per task and a soak per linux-cpu/mujoco cell at the inventory's soak budget (the 2-rank
#      cell's soak runs the trainer as a 2-rank torchrun job: soak run --nproc-per-node 2);
#   3. `matrix ingest` each artifact (validated, filed under matrix/evidence/), `matrix generate`, then
#      `matrix prune` (drops surplus historical evidence, which git history keeps).
# Commit matrix/evidence, docs/support-matrix.md and reports/support-matrix.* afterwards: evidence and
# generated pages are outside the runtime fingerprint, so committing them keeps the evidence fresh.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -n "$(git status --porcelain)" ]; then
  echo "collect_cpu_evidence: the tree is dirty; evidence from a dirty tree never counts" >&2
  exit 2
fi
OUT="${1:-$PWD/runs/cpu-evidence-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
RUN="uv run --frozen"
# Filed samples keep their file name (matrix ingest): the commit makes every collection's names unique.
COMMIT=$(git rev-parse --short=12 HEAD)

# The lane as `make test` runs it, on every core (the cell plugin files the same cells and counts under
# xdist: tests/matrix/test_pytest_cell.py).
$RUN pytest -n auto --dist loadgroup --no-loadscope-reorder \
  -p matrix.pytest_cell --matrix-platform linux-cpu --matrix-lane cpu --junitxml="$OUT/junit-cpu.xml" -q

for task in g1_walk_flat g1_motion_tracking; do
  $RUN probe --backends mujoco --task "$task" --num-envs 256 --warmup 10 --iters 100 --output "$OUT/probe-$task.json"
done

# Budget: matrix/inventory.yaml linux-cpu soak (at least 64 envs, 600 s and 5000 iterations; why 600 s:
# docs/soak.md, "Why the linux-cpu budget is 600 s"). The trainer stops after an iteration count, so each
# count is sized to last 600 s on a host twice as fast as the shared 2-core host it was measured on.
# Each soak runs its owner's recipe: sac/g1_walk_flat makes 8 updates per iteration (docs/learners.md), so
# it runs far fewer iterations per second than sac/g1_motion_tracking's 1. FlashSAC uses CPU-sized
# batches so its learner really updates within the budget; the overrides are recorded in the artifact.
# flashsac/g1_motion_tracking's owner makes 4 updates per iteration at widths 128/64: measured at
# ba4a240, 5500 iterations in 1745 s beside the SAC tracking soak (1286 s), against 1018 s at 1 update.
# Measured at a94411f on that host, two soaks side by side: SAC (1 update per iteration) 30000 iterations
# in 680 s and 729 s, FlashSAC 5000 iterations in 962 s and 982 s; the counts below keep a margin over
# 600 s. At 5 s sampling the 30 trend-window samples each verdict needs take 240 s after start-up
# (docs/soak.md, "No pass without observation"); a 600 s soak leaves ~75.
FLASHSAC_CPU=(--extra-override algo.batch_size=256 --extra-override algo.learning_starts=512)
for algo in sac flashsac; do
  for task in g1_walk_flat g1_motion_tracking; do
    extra=()
    iterations=40000
    if [ "$algo/$task" = sac/g1_walk_flat ]; then iterations=7000; fi
    if [ "$algo" = flashsac ]; then extra=("${FLASHSAC_CPU[@]}"); iterations=5500; fi
    $RUN soak run --algo "$algo" --task "$task" --sim mujoco --num-envs 64 --iterations "$iterations" \
      --min-duration-seconds 600 --sample-interval-seconds 5 --live plain "${extra[@]}" \
      --log-dir "$OUT/soak-$algo-$task" --output "$OUT/soak-$algo-$task-$COMMIT.json"
  done
done

# The 2-rank cell (matrix/inventory.yaml: sac/g1_walk_flat/mujoco, ranks: 2): the same trainer as a 2-rank
# torchrun job, at the same budget per rank (--num-envs is per rank: each rank owns algo.num_envs worlds;
# --iterations is each rank's count). Only a 2-rank soak counts for that cell, and it never counts for the
# single-rank one. Both ranks share the host's cores, so each runs at roughly half the single-rank speed:
# the single-rank count of 7000 lasts ~600 s on a host twice as fast, so the budget's 5000 iterations (the
# count cannot go below it) take ~850 s there and ~1700 s on the shared 2-core host, well over 600 s.
$RUN soak run --nproc-per-node 2 --algo sac --task g1_walk_flat --sim mujoco --num-envs 64 --iterations 5000 \
  --min-duration-seconds 600 --sample-interval-seconds 5 --live plain \
  --log-dir "$OUT/soak-sac-g1_walk_flat-2ranks" --output "$OUT/soak-sac-g1_walk_flat-2ranks-$COMMIT.json"

$RUN matrix ingest "$OUT/junit-cpu.xml" --platform linux-cpu --lane cpu
for artifact in "$OUT"/probe-*.json "$OUT"/soak-*.json; do
  $RUN matrix ingest "$artifact" --platform linux-cpu
done
$RUN matrix generate
# The evidence filed above makes the previous collection historical: prune it (the newest historical
# piece per cell, kind and platform stays; git history keeps the rest; the matrix is regenerated).
$RUN matrix prune
$RUN matrix check
echo "evidence filed from $OUT; commit matrix/evidence docs/support-matrix.md reports/support-matrix.*"
