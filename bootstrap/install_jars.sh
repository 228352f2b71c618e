#!/usr/bin/env bash
# EMR bootstrap action (every node): install the pinned jars of jars.lock into a
# dedicated directory, verifying each SHA-256 before anything lands there.
#
# Why: the Jackson runtime failure (docs/design.md, "Incidents"). The step puts
# DEST/* first on the driver and executor classpaths (streaming-spark-submit.sh),
# so DEST must hold exactly the locked jars: wrong bytes are refused, jars that
# are no longer locked are removed, and a jar whose checksum nobody verified is
# refused unless the operator opts in with --allow-unverified.
#
# Idempotent: a jar already present with the locked checksum is left alone.
#
# Exit codes: 0 ok, 2 usage or malformed lock, 3 checksum mismatch,
#             4 unverified jar refused, 5 download failed (library, lock, jar, launcher).
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

readonly MAVEN_CENTRAL="https://repo1.maven.org/maven2"
LOCK=""
REPO="$MAVEN_CENTRAL"
DEST="/opt/streaming/jars"
ONLY=""
ALLOW_UNVERIFIED=0
LAUNCHER=""
LAUNCHER_DEST="/usr/local/bin/streaming-spark-submit"
RETRIES=3

usage() {
  cat >&2 <<'EOF'
usage: install_jars.sh [--lib URI] --lock URI [--repo BASE] [--dest DIR] [--only a,b,...]
                       [--allow-unverified] [--launcher URI [--launcher-dest PATH]]
  --lib URI           bootstrap-lib.sh, first if given (s3:// or a path; default: beside this script)
  --lock URI          jars.lock (path, file://, s3:// or https://)
  --repo BASE         Maven-layout repository base (default Maven Central);
                      s3://bucket/prefix or an internal mirror for private subnets
  --dest DIR          dedicated jar directory (default /opt/streaming/jars)
  --only LIST         comma-separated artifactIds to install (default: every lock entry)
  --allow-unverified  install jars whose lock checksum is UNVERIFIED (logs their SHA-256)
  --launcher URI      also install streaming-spark-submit.sh to --launcher-dest
  --retries N         download attempts per file (default 3, backoff 1s, 2s, ...)
EOF
  exit 2
}

while (($#)); do
  case "$1" in
    --lock) LOCK="${2:?--lock needs a value}"; shift 2 ;;
    --repo) REPO="${2:?--repo needs a value}"; shift 2 ;;
    --dest) DEST="${2:?--dest needs a value}"; shift 2 ;;
    --only) ONLY="${2:?--only needs a value}"; shift 2 ;;
    --allow-unverified) ALLOW_UNVERIFIED=1; shift ;;
    --launcher) LAUNCHER="${2:?--launcher needs a value}"; shift 2 ;;
    --launcher-dest) LAUNCHER_DEST="${2:?--launcher-dest needs a value}"; shift 2 ;;
    --retries) RETRIES="${2:?--retries needs a value}"; shift 2 ;;
    --lib) log "--lib must be the first argument"; usage ;;
    -h | --help) usage ;;
    *) log "unknown argument: $1"; usage ;;
  esac
done
[[ -n "$LOCK" ]] || { log "--lock is required"; usage; }
[[ "$RETRIES" =~ ^[1-9][0-9]*$ ]] || { log "--retries must be a positive integer"; usage; }
REPO="${REPO%/}"

sha256_of() { sha256sum -- "$1" | cut -d' ' -f1; }

# Root is needed only where the current user cannot write (EMR runs bootstrap
# actions as hadoop with passwordless sudo; tests run unprivileged in a temp dir).
privileged() {
  local dir="$1"
  shift
  if [[ -w "$dir" ]]; then "$@"; else as_root "$@"; fi
}

ensure_dest() {
  if [[ -d "$DEST" && -w "$DEST" ]]; then return 0; fi
  if ! mkdir -p "$DEST" 2>/dev/null; then
    as_root mkdir -p "$DEST"
  fi
  if [[ ! -w "$DEST" ]]; then
    as_root chown "$(id -u):$(id -g)" "$DEST"
  fi
}

lock_file="$WORK/jars.lock"
fetch "$LOCK" "$lock_file" "$RETRIES" || fail 5 "cannot read the lock $LOCK"
log "lock $LOCK, repository $REPO, destination $DEST"

declare -A wanted=()
if [[ -n "$ONLY" ]]; then
  IFS=',' read -r -a only_list <<<"$ONLY"
  for name in "${only_list[@]}"; do wanted["$name"]=1; done
fi

declare -A seen=()
declare -A keep=()
entries=()
line_no=0
while IFS= read -r line || [[ -n "$line" ]]; do
  line_no=$((line_no + 1))
  [[ "$line" =~ ^[[:space:]]*(#|$) ]] && continue
  read -r coords sha _provenance <<<"$line"
  IFS=':' read -r group artifact version extra <<<"$coords"
  if [[ -z "${group:-}" || -z "${artifact:-}" || -z "${version:-}" || -n "${extra:-}" ]]; then
    fail 2 "jars.lock line $line_no: coordinates '$coords' are not groupId:artifactId:version"
  fi
  if [[ "$sha" != "UNVERIFIED" && ! "$sha" =~ ^[0-9a-f]{64}$ ]]; then
    fail 2 "jars.lock line $line_no: sha256 '$sha' is neither 64 hex digits nor UNVERIFIED"
  fi
  seen["$artifact"]=1
  if [[ -n "$ONLY" && -z "${wanted[$artifact]:-}" ]]; then continue; fi
  entries+=("$group $artifact $version $sha")
  keep["$artifact-$version.jar"]=1
done <"$lock_file"

for name in "${!wanted[@]}"; do
  [[ -n "${seen[$name]:-}" ]] || fail 2 "--only names '$name', which is not in the lock"
done
((${#entries[@]})) || fail 2 "no jar selected from the lock"

# Refuse before touching the node: an unverified jar fails the whole action.
for entry in "${entries[@]}"; do
  read -r group artifact version sha <<<"$entry"
  if [[ "$sha" == "UNVERIFIED" && "$ALLOW_UNVERIFIED" -ne 1 ]]; then
    fail 4 "refusing $group:$artifact:$version: its SHA-256 in the lock is UNVERIFIED;" \
      "pin the checksum (docs/deploy.md) or pass --allow-unverified to install it anyway"
  fi
done

ensure_dest

for entry in "${entries[@]}"; do
  read -r group artifact version sha <<<"$entry"
  coords="$group:$artifact:$version"
  file="$artifact-$version.jar"
  target="$DEST/$file"
  if [[ -f "$target" ]]; then
    have="$(sha256_of "$target")"
    if [[ "$have" == "$sha" ]]; then
      log "already installed: $coords ($have)"
      continue
    fi
  fi
  url="$REPO/${group//.//}/$artifact/$version/$file"
  log "downloading $coords from $url"
  fetch "$url" "$WORK/$file" "$RETRIES" || fail 5 "download failed for $coords from $url"
  actual="$(sha256_of "$WORK/$file")"
  if [[ "$sha" == "UNVERIFIED" ]]; then
    log "WARNING: installing $coords with UNVERIFIED checksum (--allow-unverified);" \
      "downloaded sha256=$actual: check it against the repository and pin it in jars.lock"
  elif [[ "$actual" != "$sha" ]]; then
    fail 3 "checksum mismatch for $coords from $url: lock sha256=$sha," \
      "downloaded sha256=$actual; not installed"
  fi
  # Same-directory rename: a reader never sees a half-written jar on the classpath.
  cp -- "$WORK/$file" "$DEST/.$file.partial"
  chmod 0644 "$DEST/.$file.partial"
  mv -f -- "$DEST/.$file.partial" "$target"
  log "installed $coords -> $target (sha256 $actual)"
done

# The directory is on the classpath as DIR/*: a jar the lock no longer selects
# would put a second Jackson version there, so it goes.
shopt -s nullglob
for present in "$DEST"/*.jar; do
  name="$(basename -- "$present")"
  if [[ -z "${keep[$name]:-}" ]]; then
    rm -f -- "$present"
    log "removed $name (not selected by the lock)"
  fi
done
shopt -u nullglob

if [[ -n "$LAUNCHER" ]]; then
  fetch "$LAUNCHER" "$WORK/launcher" "$RETRIES" || fail 5 "cannot read the launcher $LAUNCHER"
  privileged "$(dirname -- "$LAUNCHER_DEST")" install -m 0755 "$WORK/launcher" "$LAUNCHER_DEST"
  log "installed launcher $LAUNCHER_DEST"
fi

log "done: ${#entries[@]} jar(s) in $DEST"
