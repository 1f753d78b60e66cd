#!/usr/bin/env bash
# Build the wheel bundle for an air-gapped GPU host (run here, on a host that reaches the package index).
#
#   scripts/gpu/bundle.sh [--out DIR] [--python-version 3.12] [--platform manylinux_2_28_x86_64]
#                         [--transfer-mib 60 | --part-mib N] [--have NAME ...] [--force]
#
# Plans from uv's export of uv.lock (`uv export --format requirements-txt`, with every file's sha256)
# exactly the packages the GPU host lacks: everything the project, its `mjwarp` extra and the pytest
# plugins its configuration loads need, with what the host has pruned (--have; default: the GPU host's
# preinstalled set) and its markers evaluated for the target interpreter. Downloads their wheels with
# one `pip download --no-deps --only-binary=:all: --require-hashes -r` and checks each file against the
# export's sha256s for that package. The set is then cut into transfer folders
# OUT/transfer-NN/, each holding at most the part size of wheel pieces plus a copy of MANIFEST.json
# (sha256 of every part and every whole wheel). Bring the folders over one per transfer and run
# scripts/gpu/device_install.sh there; docs/gpu-acceptance.md has the whole procedure.
#
# Part size: --part-mib N, or (default) --transfer-mib (60) less the size of the checkout's tracked and
# untracked-not-ignored files (they travel with every transfer) less 1 MiB of slack.
# Default OUT: runs/gpu-bundle/cpXY. OUT must not exist (--force replaces it, once the new one is
# complete). Everything is built in OUT.partial-PID and renamed at the end: nothing half-written.
# Exit 0 when the bundle is complete, 2 (with a message naming the thing) on anything wrong.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$REPO/scripts/gpu"
PY="${BUNDLE_PYTHON:-python3}"
PYVER="3.12"
PLATFORM="manylinux_2_28_x86_64"
TRANSFER_MIB="60"
PART_MIB=""
LOCK="$REPO/uv.lock"
UV="${BUNDLE_UV:-}"
OUT=""
FORCE=0
HAVE=()
DEFAULT_HAVE=(torch numpy matplotlib rich typer jinja2 tensorboard psutil pyyaml pytest hypothesis nvidia-ml-py)
EXTRAS=(mjwarp)
DEV=(pytest pytest-timeout pytest-benchmark hypothesis)  # what tests and [tool.pytest] load; not the linters

die() {
  echo "bundle: $*" >&2
  exit 2
}

while (($#)); do
  case "$1" in
    --out) OUT="${2:?--out needs a folder}"; shift 2 ;;
    --python-version) PYVER="${2:?--python-version needs a value}"; shift 2 ;;
    --platform) PLATFORM="${2:?--platform needs a tag}"; shift 2 ;;
    --transfer-mib) TRANSFER_MIB="${2:?--transfer-mib needs a number}"; shift 2 ;;
    --part-mib) PART_MIB="${2:?--part-mib needs a number}"; shift 2 ;;
    --have) HAVE+=("${2:?--have needs a package name}"); shift 2 ;;
    --force) FORCE=1; shift ;;
    -h | --help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

[[ "$PYVER" =~ ^3\.[0-9]{1,2}$ ]] || die "--python-version must look like 3.12, got '$PYVER'"
CP="cp${PYVER/./}"
[[ "$PLATFORM" =~ ^manylinux_([0-9]+)_([0-9]+)_([a-z0-9_]+)$ ]] ||
  die "--platform must look like manylinux_2_28_x86_64, got '$PLATFORM'"
GLIBC="${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
GLIBC_MINOR="${BASH_REMATCH[2]}"
MACHINE="${BASH_REMATCH[3]}"
[[ "${BASH_REMATCH[1]}" == 2 ]] || die "--platform: only glibc 2.x manylinux tags are known, got '$PLATFORM'"
# pip does not widen a manylinux_2_X tag to older ones by itself: name every tag a glibc 2.X host runs
PLATFORM_ARGS=()
for ((m = GLIBC_MINOR; m >= 5; m--)); do
  PLATFORM_ARGS+=(--platform "manylinux_2_${m}_${MACHINE}")
  case "$m" in
    17) PLATFORM_ARGS+=(--platform "manylinux2014_${MACHINE}") ;;
    12) PLATFORM_ARGS+=(--platform "manylinux2010_${MACHINE}") ;;
    5) PLATFORM_ARGS+=(--platform "manylinux1_${MACHINE}") ;;
  esac
done
[[ "$TRANSFER_MIB" =~ ^[1-9][0-9]*$ ]] || die "--transfer-mib must be a positive integer, got '$TRANSFER_MIB'"
[[ -z "$PART_MIB" || "$PART_MIB" =~ ^[1-9][0-9]*$ ]] || die "--part-mib must be a positive integer, got '$PART_MIB'"
[[ -f "$LOCK" ]] || die "$LOCK: no such file (the bundle is planned from the checkout's lock)"
((${#HAVE[@]})) || HAVE=("${DEFAULT_HAVE[@]}")
OUT="${OUT:-$REPO/runs/gpu-bundle/$CP}"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
if [[ -e "$OUT" && "$FORCE" != 1 ]]; then
  die "$OUT exists; pass --force to replace it or choose another --out"
fi
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null ||
  die "$PY must be Python >= 3.11 (pyproject.toml is read with tomllib); set BUNDLE_PYTHON"
if [[ -z "$UV" ]]; then
  UV=$(command -v uv || "$PY" -c 'import uv; print(uv.find_uv_bin())' 2>/dev/null || true)
fi
[[ -n "$UV" && -x "$UV" ]] || die "uv not found: install it (python3 -m pip install uv) or set BUNDLE_UV"

# ---- part size ----------------------------------------------------------------------------------
MIB=$((1024 * 1024))
if [[ -n "$PART_MIB" ]]; then
  PART_BYTES=$((PART_MIB * MIB))
  TREE_BYTES="n/a (--part-mib given)"
else
  git -C "$REPO" rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    die "$REPO is not a git checkout: cannot measure the tree that travels with each transfer; pass --part-mib"
  TREE_BYTES=$(cd "$REPO" && { git ls-files -z; git ls-files -z --others --exclude-standard; } |
    xargs -0 -r stat -c %s -- 2>/dev/null | awk '{s += $1} END {print s + 0}')
  PART_BYTES=$((TRANSFER_MIB * MIB - TREE_BYTES - MIB))
  ((PART_BYTES >= MIB)) ||
    die "--transfer-mib $TRANSFER_MIB leaves no room: the checkout's files take $TREE_BYTES bytes"
fi

# Checked after every argument, so a bad argument is named even on a host whose python lacks pip.
"$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip"

WORK="$OUT.partial-$$"
cleanup() { rm -rf "$WORK"; }
trap cleanup EXIT
mkdir -p "$WORK/wheels"
T0=$(date +%s)

# ---- plan ---------------------------------------------------------------------------------------
export PYTHONPATH="$HERE:$REPO${PYTHONPATH:+:$PYTHONPATH}"  # the bundle package and the checkout's soakbench package
TARGET_ARGS=(--python-version "$PYVER" --machine "$MACHINE" --max-glibc "$GLIBC")
PLAN_ARGS=("${TARGET_ARGS[@]}" --uv "$UV" --project "$REPO" --requirements "$WORK/requirements.txt")
for x in "${EXTRAS[@]}"; do PLAN_ARGS+=(--extra "$x"); done
for x in "${DEV[@]}"; do PLAN_ARGS+=(--dev "$x"); done
for x in "${HAVE[@]}"; do PLAN_ARGS+=(--have "$x"); done
"$PY" -m bundle.plan plan "${PLAN_ARGS[@]}" >"$WORK/plan.tsv" || die "could not plan the bundle (above)"
COUNT=$(wc -l <"$WORK/plan.tsv")
((COUNT > 0)) || die "the plan is empty: the host would lack nothing"
echo "bundle: $COUNT packages for $CP $PLATFORM (host has: ${HAVE[*]})"
cut -f1,2 "$WORK/plan.tsv" | sed 's/\t/ /; s/^/  /'

# ---- download -----------------------------------------------------------------------------------
if ! "$PY" -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --require-hashes --python-version "$PYVER" --implementation cp --abi "$CP" "${PLATFORM_ARGS[@]}" \
  --dest "$WORK/wheels" -r "$WORK/requirements.txt" </dev/null; then
  die "pip download of the planned wheels ($CP $PLATFORM) failed (above)"
fi
T_DOWNLOAD=$(($(date +%s) - T0))
T1=$(date +%s)

"$PY" -m bundle.plan check "${TARGET_ARGS[@]}" --plan "$WORK/plan.tsv" --wheels "$WORK/wheels" \
  --output "$WORK/wheels.json" || die "the downloaded wheels do not match the lock (above)"

# ---- split --------------------------------------------------------------------------------------
LOCK_SHA=$(sha256sum "$LOCK" | cut -d' ' -f1)
COMMIT=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)
META=$("$PY" -c 'import json, sys
keys = ("python_version", "cp_tag", "platform", "machine", "max_glibc")
print(json.dumps({"target": dict(zip(keys, sys.argv[1:6])), "lock_sha256": sys.argv[6], "commit": sys.argv[7],
                  "created_utc": sys.argv[8], "host_has": sys.argv[9:]}))' \
  "$PYVER" "$CP" "$PLATFORM" "$MACHINE" "$GLIBC" "$LOCK_SHA" "$COMMIT" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "${HAVE[@]}")
"$PY" -m bundle.parts split --wheels "$WORK/wheels" --wheels-json "$WORK/wheels.json" \
  --out "$WORK/bundle" --part-bytes "$PART_BYTES" --meta-json "$META" >"$WORK/split.txt" ||
  die "could not split the bundle (above)"
T_SPLIT=$(($(date +%s) - T1))
mv "$WORK/bundle"/* "$WORK/"
rmdir "$WORK/bundle"
mkdir -p "$WORK/meta"
mv "$WORK/plan.tsv" "$WORK/requirements.txt" "$WORK/wheels.json" "$WORK/split.txt" "$WORK/meta/"
MANIFEST_SHA=$(sha256sum "$WORK/MANIFEST.json" | cut -d' ' -f1)
TRANSFERS=$(find "$WORK" -maxdepth 1 -name 'transfer-*' -type d | wc -l)
{
  echo "bundle for $CP $PLATFORM from $(basename "$LOCK") sha256 $LOCK_SHA (commit $COMMIT)"
  echo "manifest sha256: $MANIFEST_SHA"
  echo "wheels: $(du -b --apparent-size -c "$WORK"/wheels/*.whl | tail -1 | cut -f1) bytes in $COUNT files"
  echo "part size: $PART_BYTES bytes (transfer ${TRANSFER_MIB} MiB, checkout files $TREE_BYTES bytes, 1 MiB slack)"
  echo "transfers: $TRANSFERS"
  sed 's/^/  /' "$WORK/meta/split.txt"
  echo "download: ${T_DOWNLOAD}s for $COUNT wheels"
  echo "check + split: ${T_SPLIT}s"
} >"$WORK/SUMMARY.txt"
rm -rf "$WORK/wheels"  # the transfer folders hold every byte; device_install.sh joins them back

if [[ -e "$OUT" ]]; then
  rm -rf "$OUT"
fi
mkdir -p "$(dirname "$OUT")"
mv "$WORK" "$OUT"
trap - EXIT
cat "$OUT/SUMMARY.txt"
echo "bundle: done: $OUT (bring each $OUT/transfer-NN folder over in its own transfer)"
