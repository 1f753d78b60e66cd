#!/usr/bin/env bash
# Install the wheel bundle on the air-gapped GPU host (run there, from the checkout; no network used).
#
#   scripts/gpu/device_install.sh [--python PY] [--stage DIR] [--target DIR] [--partial]
#                                 [--manifest-sha256 HEX] [FOLDER ...]
#
# FOLDERs are transfer folders made by scripts/gpu/bundle.sh, as they arrived (default, while nothing
# is staged yet: every runs/gpu-bundle/cpXY/transfer-NN folder of the checkout, XY being PY's version;
# once something is staged: none, so a rerun just re-verifies the stage). Every part found in
# them is checked against MANIFEST.json (size and sha256; every folder's MANIFEST.json copy must be the
# same, and its lock hash must be this checkout's uv.lock) and copied into the stage folder (default
# runs/gpu-stage), so parts brought by separate transfers, into separate folders, add up there.
#   --partial  after an early transfer: stage what came and exit 0, naming the transfers still missing.
# Without --partial, once every part is staged the wheels are joined and each one's sha256 checked,
# then installed with `PY -m pip install --no-index --no-deps --target DIR` (default runs/gpu-site),
# every bundled module is imported from DIR and `pip check` must find no unmet requirement of a bundled
# package. Finally it prints the PYTHONPATH to export and the acceptance command.
#
# Idempotent: verified parts, joined wheels and a finished install are re-verified and kept. Exit 0 when
# done (or, with --partial, staged), 2 with the missing or corrupt parts named on anything wrong.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$REPO/scripts/gpu"
PY="python3"
STAGE="$REPO/runs/gpu-stage"
TARGET="$REPO/runs/gpu-site"
PARTIAL=0
MANIFEST_SHA=()
FOLDERS=()

die() {
  echo "device_install: $*" >&2
  exit 2
}

while (($#)); do
  case "$1" in
    --python) PY="${2:?--python needs an interpreter}"; shift 2 ;;
    --stage) STAGE="${2:?--stage needs a folder}"; shift 2 ;;
    --target) TARGET="${2:?--target needs a folder}"; shift 2 ;;
    --partial) PARTIAL=1; shift ;;
    --manifest-sha256) MANIFEST_SHA=(--manifest-sha256 "${2:?--manifest-sha256 needs a hex digest}"); shift 2 ;;
    -h | --help) sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --*) die "unknown option '$1' (see --help)" ;;
    *) FOLDERS+=("$1"); shift ;;
  esac
done

command -v "$PY" >/dev/null 2>&1 || die "--python $PY: not found"
PY="$(command -v "$PY")"
PYVER=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")') ||
  die "$PY does not run"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || die "$PY must be Python >= 3.11"
case "$STAGE" in /*) ;; *) STAGE="$PWD/$STAGE" ;; esac
case "$TARGET" in /*) ;; *) TARGET="$PWD/$TARGET" ;; esac
if ((${#FOLDERS[@]} == 0)) && [[ ! -f "$STAGE/MANIFEST.json" ]]; then
  shopt -s nullglob
  FOLDERS=("$REPO/runs/gpu-bundle/cp$PYVER"/transfer-*)
  shopt -u nullglob
  if ((${#FOLDERS[@]} == 0)) && [[ ! -f "$STAGE/MANIFEST.json" ]]; then
    die "no transfer folders given, none under runs/gpu-bundle/cp$PYVER/, and nothing staged in $STAGE"
  fi
fi
for folder in "${FOLDERS[@]}"; do
  [[ -d "$folder" ]] || die "$folder: no such folder"
done

T0=$(date +%s)
rc=0
BUNDLE_PATH="$HERE:$REPO"  # the bundle package and the checkout's foundation (standard library only)
PYTHONPATH="$BUNDLE_PATH" "$PY" -m bundle.parts assemble --stage "$STAGE" --lock "$REPO/uv.lock" "${MANIFEST_SHA[@]}" \
  "${FOLDERS[@]}" || rc=$?
if ((rc == 3)); then
  if ((PARTIAL)); then
    echo "device_install: staged in $STAGE; bring the missing transfers (above) and run this again"
    exit 0
  fi
  die "parts are missing (named above); bring those transfers, or pass --partial while they are on their way"
fi
((rc == 0)) || die "the bundle's parts do not verify (above); nothing was installed"
T1=$(date +%s)
if ((PARTIAL)); then
  echo "device_install: every part is staged and every wheel verified in $STAGE/wheels ($((T1 - T0))s)"
fi
PYTHONPATH="$BUNDLE_PATH" "$PY" -m bundle.parts install --stage "$STAGE" --target "$TARGET" --lock "$REPO/uv.lock" ||
  die "install into $TARGET failed (above)"
T2=$(date +%s)
echo "device_install: done (verify and join $((T1 - T0))s, install and checks $((T2 - T1))s). In this shell:"
echo "  export PYTHONPATH=$TARGET\${PYTHONPATH:+:\$PYTHONPATH}"
echo "  ACCEPTANCE_PYTHON=$PY bash scripts/gpu/acceptance.sh"
