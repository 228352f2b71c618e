# shellcheck shell=bash
# Helpers shared by the EMR bootstrap actions (install_python_deps.sh,
# install_jars.sh). Sourced, never run: it defines functions and nothing else.
#
# How it gets to a node: EMR downloads each bootstrap action's script on its
# own, into a directory of its own, so nothing arrives beside it. Each action
# is therefore given this file's S3 URI as its first argument
# (`--lib s3://<artifacts>/artifacts/bootstrap/<hash>/bootstrap-lib.sh`, the
# same content-addressed prefix as the script, so they always match) and
# downloads it before anything else. Run from the repository (tests, by hand)
# without --lib, an action sources the copy beside it.
#
# Why shared: every action downloads the same way (bounded time, bounded
# retries, the same URI schemes) and logs the same way (UTC timestamp, script
# name, to stderr, which EMR keeps under /var/log/bootstrap-actions/).

# log MESSAGE...: one timestamped line on stderr, prefixed with the script's name.
log() { printf '%s %s: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$(basename -- "$0" .sh)" "$*" >&2; }

# fail CODE MESSAGE...: log an error and exit with CODE (each script documents its codes).
fail() {
  local code="$1"
  shift
  log "ERROR: $*"
  exit "$code"
}

# fetch SRC DST [ATTEMPTS]: copy SRC (a path, file://, s3:// or http(s)://) to
# DST. Each attempt is time-bounded; up to ATTEMPTS (default 3) attempts with a
# 1 s, 2 s, ... pause between them. Returns 1 after the last failed attempt.
fetch() {
  local src="$1" dst="$2" attempts="${3:-3}" attempt
  for ((attempt = 1; attempt <= attempts; attempt++)); do
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
    log "download attempt $attempt of $attempts failed: $src"
    if ((attempt < attempts)); then sleep "$attempt"; fi
  done
  return 1
}

# as_root COMMAND...: run COMMAND as root. EMR runs bootstrap actions as hadoop
# with passwordless sudo; -n makes a sudo that would prompt fail instead.
as_root() {
  if [[ "$(id -u)" -eq 0 ]]; then "$@"; else sudo -n "$@"; fi
}
