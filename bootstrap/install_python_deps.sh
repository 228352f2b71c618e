#!/usr/bin/env bash
# EMR bootstrap action (every node): install the job's locked Python runtime
# dependencies (app/requirements.lock) for the interpreter the job runs on.
#
# Why: the driver and every executor import boto3, confluent-kafka and the MSK
# IAM signer; an unpinned install could differ node by node. --require-hashes
# makes pip refuse any file whose hash is not in the lock, so every node gets
# the same bytes the lock was reviewed with.
#
# Idempotent: pip leaves already-satisfied pins alone.
# Exit codes: 0 ok, 2 usage, 5 lock download failed, 6 interpreter or pip missing,
#             7 pip install failed.
set -euo pipefail

REQUIREMENTS=""
PYTHON="/usr/bin/python3.11"
INDEX_URL=""

log() { printf '%s install_python_deps: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
fail() {
  local code="$1"
  shift
  log "ERROR: $*"
  exit "$code"
}

usage() {
  cat >&2 <<'EOF'
usage: install_python_deps.sh --requirements URI [--python PATH] [--index-url URL]
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
    -h | --help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
[[ -n "$REQUIREMENTS" ]] || { log "--requirements is required"; usage; }

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

fetch() {
  local src="$1" dst="$2" attempt
  for attempt in 1 2 3; do
    case "$src" in
      s3://*)
        if aws s3 cp --only-show-errors --cli-connect-timeout 10 --cli-read-timeout 60 \
          "$src" "$dst"; then return 0; fi ;;
      http://* | https://*)
        if curl --fail --silent --show-error --location --connect-timeout 10 \
          --max-time 120 --output "$dst" "$src"; then return 0; fi ;;
      file://*)
        if cp -- "${src#file://}" "$dst"; then return 0; fi ;;
      *)
        if cp -- "$src" "$dst"; then return 0; fi ;;
    esac
    log "download attempt $attempt of 3 failed: $src"
    sleep "$attempt"
  done
  return 1
}

[[ -x "$PYTHON" ]] || fail 6 "interpreter $PYTHON not found; set --python to the job's PYSPARK_PYTHON"
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
  # Distribution interpreters may ship without pip; ensurepip uses the wheel
  # bundled with the interpreter (no download).
  log "$PYTHON has no pip; trying ensurepip"
  if [[ "$(id -u)" -eq 0 ]]; then
    "$PYTHON" -m ensurepip >/dev/null 2>&1 || true
  else
    sudo -n "$PYTHON" -m ensurepip >/dev/null 2>&1 || true
  fi
  "$PYTHON" -m pip --version >/dev/null 2>&1 ||
    fail 6 "$PYTHON has no pip and ensurepip failed; install its pip package first"
fi

fetch "$REQUIREMENTS" "$WORK/requirements.lock" || fail 5 "cannot read $REQUIREMENTS"
log "installing $(grep -cE '^[A-Za-z0-9]' "$WORK/requirements.lock") locked packages for $PYTHON"

pip_args=(install --require-hashes --no-cache-dir --disable-pip-version-check
  --timeout 60 --retries 3 --requirement "$WORK/requirements.lock")
if [[ -n "$INDEX_URL" ]]; then pip_args+=(--index-url "$INDEX_URL"); fi

# System-wide so the YARN containers (other users) import the same packages.
if [[ "$(id -u)" -eq 0 ]]; then
  "$PYTHON" -m pip "${pip_args[@]}" || fail 7 "pip install failed for $REQUIREMENTS"
else
  sudo -n "$PYTHON" -m pip "${pip_args[@]}" || fail 7 "pip install failed for $REQUIREMENTS"
fi
log "done"
