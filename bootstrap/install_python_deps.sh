#!/usr/bin/env bash
# EMR bootstrap action (every node): install the job's locked Python runtime
# dependencies (job/requirements.lock) for the interpreter the job runs on.
#
# Why: the driver and every executor import boto3, confluent-kafka and the MSK
# IAM signer; an unpinned install could differ node by node. --require-hashes
# makes pip refuse any file whose hash is not in the lock, so every node gets
# the same bytes the lock was reviewed with.
#
# A missing interpreter or pip is installed with the OS package manager first
# (dnf, or yum): EMR on AL2023 keeps /usr/bin/python3 at 3.9 and ships newer
# Pythons as separate packages, e.g. python3.11 as /usr/bin/python3.11
# (https://docs.aws.amazon.com/linux/al2023/ug/python.html); its pip is the
# python3.11-pip package.
#
# Idempotent: pip leaves already-satisfied pins alone; dnf skips installed packages.
# Exit codes: 0 ok, 2 usage, 5 library or lock download failed,
#             6 interpreter or pip missing, 7 pip install failed.
set -euo pipefail

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# The shared helpers (log, fail, fetch, as_root). EMR downloads each bootstrap
# action alone, so the action gets the library's URI first (--lib s3://...);
# run from the repository, the library beside this script is used.
if [[ "${1:-}" == --lib ]]; then
  lib="$WORK/bootstrap-lib.sh"
  case "${2:?--lib needs a value}" in
    s3://*) aws s3 cp --only-show-errors --cli-connect-timeout 10 "$2" "$lib" ;;
    *) cp -- "${2#file://}" "$lib" ;;
  esac || { printf '%s: cannot read the bootstrap library %s\n' "$0" "$2" >&2; exit 5; }
  shift 2
else
  lib="$(dirname -- "${BASH_SOURCE[0]}")/bootstrap-lib.sh"
  [[ -r "$lib" ]] || { printf '%s: no %s; pass --lib URI first\n' "$0" "$lib" >&2; exit 2; }
fi
# shellcheck source-path=SCRIPTDIR source=bootstrap-lib.sh
. "$lib"

REQUIREMENTS=""
PYTHON="/usr/bin/python3.11"
INDEX_URL=""

usage() {
  cat >&2 <<'EOF'
usage: install_python_deps.sh [--lib URI] --requirements URI [--python PATH] [--index-url URL]
  --lib URI           bootstrap-lib.sh, first if given (s3:// or a path; default: beside this script)
  --requirements URI  requirements.lock with hashes (path, file://, s3:// or https://)
  --python PATH       interpreter of the job (PYSPARK_PYTHON), default /usr/bin/python3.11
  --index-url URL     a PyPI mirror for clusters without internet access
EOF
  exit 2
}

while (($#)); do
  case "$1" in
    --requirements) REQUIREMENTS="${2:?--requirements needs a value}"; shift 2 ;;
    --python) PYTHON="${2:?--python needs a value}"; shift 2 ;;
    --index-url) INDEX_URL="${2:?--index-url needs a value}"; shift 2 ;;
    --lib) log "--lib must be the first argument"; usage ;;
    -h | --help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
[[ -n "$REQUIREMENTS" ]] || { log "--requirements is required"; usage; }

# The OS package named after the interpreter (python3.11, python3.11-pip).
os_install() {
  local manager
  manager="$(command -v dnf || command -v yum || true)"
  [[ -n "$manager" ]] || { log "no dnf or yum on this node to install $*"; return 1; }
  log "installing $* with $manager"
  as_root "$manager" install -y -q "$@" >&2
}

PACKAGE="$(basename -- "$PYTHON")"
if [[ ! -x "$PYTHON" ]]; then
  os_install "$PACKAGE" "$PACKAGE-pip" || true
  [[ -x "$PYTHON" ]] ||
    fail 6 "interpreter $PYTHON not found and package $PACKAGE did not provide it; set --python to the job's PYSPARK_PYTHON"
fi
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
  # Distribution interpreters may ship without pip; ensurepip uses the wheel
  # bundled with the interpreter (no download), the package manager comes next.
  log "$PYTHON has no pip; trying ensurepip"
  as_root "$PYTHON" -m ensurepip >/dev/null 2>&1 || os_install "$PACKAGE-pip" || true
  "$PYTHON" -m pip --version >/dev/null 2>&1 ||
    fail 6 "$PYTHON has no pip: ensurepip and package $PACKAGE-pip failed; install its pip first"
fi

fetch "$REQUIREMENTS" "$WORK/requirements.lock" || fail 5 "cannot read $REQUIREMENTS"
log "installing $(grep -cE '^[A-Za-z0-9]' "$WORK/requirements.lock") locked packages for $PYTHON"

pip_args=(install --require-hashes --no-cache-dir --disable-pip-version-check
  --timeout 60 --retries 3 --requirement "$WORK/requirements.lock")
if [[ -n "$INDEX_URL" ]]; then pip_args+=(--index-url "$INDEX_URL"); fi

# System-wide so the YARN containers (other users) import the same packages.
as_root "$PYTHON" -m pip "${pip_args[@]}" || fail 7 "pip install failed for $REQUIREMENTS"
log "done"
