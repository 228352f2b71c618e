#!/usr/bin/env bash
# The EMR step's command (installed on every node by install_jars.sh --launcher):
# hand over from the running job version, then spark-submit the new one with the
# pinned jars FIRST on the driver and executor classpaths.
#
# Why a launcher instead of plain --conf values in the step:
#  * spark.{driver,executor}.extraClassPath and extraJavaOptions are set by EMR
#    in /etc/spark/conf/spark-defaults.conf (EMRFS, Hadoop AWS, the Kinesis
#    connector, Glue client, --add-opens for Java 17). A --conf replaces them.
#    Reading EMR's value on the node where spark-submit runs and prepending
#    (classpath) or appending (Java options) keeps every EMR default, whatever
#    the release, instead of hard-coding a copy that drifts.
#  * "Is an old version running?" is answered by the job's lease in S3, not by
#    this cluster's YARN: when CloudFormation replaces the cluster, the old job
#    runs on the OLD cluster, invisible to the new one's YARN, and keeps its
#    lease. A lease held and fresh means a live holder, wherever it runs; the
#    graceful stop (stop marker, bounded wait for the lease to be released)
#    happens here, so a CloudFormation deploy, `make redeploy` and the
#    supervisor's restart submit the same step and get the same handover.
#
# Self-contained on purpose (it does not source bootstrap-lib.sh): it runs
# later, at step time, as a command installed alone in /usr/local/bin, and it
# downloads nothing; its two-line log/fail are its only overlap with the library.
#
# usage: streaming-spark-submit [options] -- spark-submit [spark-submit args...]
#   --jars-dir DIR          pinned jars; DIR/* is prepended to both extraClassPaths
#   --java-option OPT       appended to both extraJavaOptions (repeatable)
#   --defaults FILE         EMR spark-defaults.conf
#                           (default ${SPARK_CONF_DIR:-/etc/spark/conf}/spark-defaults.conf)
#   --app-name NAME         the job's YARN name (named in the log)
#   --lease S3URI           the job's single-writer lease (<checkpoint>/_lease, model/lease.py):
#                           held and fresh (expires_at in the future) = an old version runs
#   --exit-record S3URI     where the job records why it stopped (<checkpoint>/_exit,
#                           model/exit_record.py); the launcher records its own exit 8 there
#   --stop-marker S3URI     object the running job polls for; written ("handover ...") to
#                           stop it gracefully, deleted before the new version is submitted
#   --stop-timeout-sec N    bound on the wait for the old version's lease (default 600)
#   --poll-sec N            lease poll interval (default 5)
# Exit codes: 0 submitted (spark-submit's own code otherwise), 2 usage,
#             8 old version still holds the lease after the bound (nothing submitted),
#             9 the lease could not be read (nothing submitted).
set -euo pipefail

JARS_DIR=""
JAVA_OPTS=()
DEFAULTS="${SPARK_CONF_DIR:-/etc/spark/conf}/spark-defaults.conf"
APP_NAME=""
LEASE=""
EXIT_RECORD=""
STOP_MARKER=""
STOP_TIMEOUT_SEC=600
POLL_SEC=5

log() { printf '%s streaming-spark-submit: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }
fail() {
  local code="$1"
  shift
  log "ERROR: $*"
  exit "$code"
}

while (($#)); do
  case "$1" in
    --jars-dir) JARS_DIR="${2:?--jars-dir needs a value}"; shift 2 ;;
    --java-option) JAVA_OPTS+=("${2:?--java-option needs a value}"); shift 2 ;;
    --defaults) DEFAULTS="${2:?--defaults needs a value}"; shift 2 ;;
    --app-name) APP_NAME="${2:?--app-name needs a value}"; shift 2 ;;
    --lease) LEASE="${2:?--lease needs a value}"; shift 2 ;;
    --exit-record) EXIT_RECORD="${2:?--exit-record needs a value}"; shift 2 ;;
    --stop-marker) STOP_MARKER="${2:?--stop-marker needs a value}"; shift 2 ;;
    --stop-timeout-sec) STOP_TIMEOUT_SEC="${2:?--stop-timeout-sec needs a value}"; shift 2 ;;
    --poll-sec) POLL_SEC="${2:?--poll-sec needs a value}"; shift 2 ;;
    --) shift; break ;;
    *) fail 2 "unknown option $1 (the spark-submit command follows --)" ;;
  esac
done
(($#)) || fail 2 "missing '-- spark-submit ...'"
[[ "$STOP_TIMEOUT_SEC" =~ ^[0-9]+$ ]] || fail 2 "--stop-timeout-sec must be an integer"

# The last value of KEY in spark-defaults.conf ("key<whitespace>value"), or empty.
emr_default() {
  local key="$1"
  [[ -r "$DEFAULTS" ]] || return 0
  awk -v k="$key" '$1 == k { sub(/^[^ \t]+[ \t]+/, ""); v = $0 } END { if (v != "") print v }' \
    "$DEFAULTS"
}

# The lease's expires_at (epoch seconds, integer part), or nothing when there is
# no lease object (the job deletes it on a clean exit). Exit 9 when it cannot be
# read: submitting blind could start a second copy's wait for nothing.
lease_expires_at() {
  local body err
  err="$(mktemp)"
  if ! body="$(aws s3 cp --only-show-errors "$LEASE" - 2>"$err")"; then
    if grep -qiE '404|Not Found|NoSuchKey|does not exist' "$err"; then
      rm -f "$err"
      return 0
    fi
    log "aws s3 cp $LEASE: $(cat "$err")"
    rm -f "$err"
    fail 9 "cannot read the lease $LEASE; new version NOT submitted"
  fi
  rm -f "$err"
  printf '%s' "$body" | sed -n 's/.*"expires_at": *\([0-9][0-9]*\).*/\1/p' | head -n 1
}

# Held: the lease exists and has not expired (a killed holder's lease expires
# after lease_ttl_sec and counts as free, as the job itself takes it over).
lease_held() {
  local expires
  # Called in conditions, where set -e does not apply: pass exit 9 on.
  expires="$(lease_expires_at)" || exit "$?"
  [[ -n "$expires" ]] && ((expires > $(date -u +%s)))
}

# The launcher's own exit, in the shape model/exit_record.py reads (best effort).
record_exit() {
  local code="$1" reason="$2" detail="$3"
  [[ -n "$EXIT_RECORD" ]] || return 0
  printf '{"at": %s, "code": %s, "detail": "%s", "owner": "%s:launcher-%s", "reason": "%s", "stopped_by": null}\n' \
    "$(date -u +%s)" "$code" "$detail" "$(hostname)" "$$" "$reason" |
    aws s3 cp --only-show-errors - "$EXIT_RECORD" || log "could not write $EXIT_RECORD"
}

if [[ -n "$LEASE" ]] && lease_held; then
  [[ -n "$STOP_MARKER" ]] || fail 2 "the lease $LEASE is held and no --stop-marker was given"
  log "an old version of ${APP_NAME:-the job} holds $LEASE: asking it to stop ($STOP_MARKER)"
  printf 'handover requested %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" |
    aws s3 cp --only-show-errors - "$STOP_MARKER"
  deadline=$((SECONDS + STOP_TIMEOUT_SEC))
  while lease_held; do
    if ((SECONDS >= deadline)); then
      record_exit 8 handover_timeout \
        "the old version still held the lease after ${STOP_TIMEOUT_SEC}s; new version not submitted"
      fail 8 "the old version still holds $LEASE after ${STOP_TIMEOUT_SEC}s; marker" \
        "$STOP_MARKER left in place, new version NOT submitted"
    fi
    sleep "$POLL_SEC"
  done
  log "the old version released $LEASE"
fi
if [[ -n "$STOP_MARKER" ]]; then
  # The new version must not see the old version's stop request. An
  # operator's stop marker is cleared here only by a deliberate new start (a
  # deploy, make redeploy): the supervisor never submits this step while one
  # is present, even for a job that died before writing its exit record
  # (infra/supervisor/decision.py).
  aws s3 rm --only-show-errors "$STOP_MARKER" >/dev/null 2>&1 || true
fi

# --conf spark.<role>.SETTING for the driver and the executor: OURS joined by SEP
# to EMR's own value of the key (spark-defaults.conf), which a --conf would
# otherwise replace. ORDER "first" puts ours ahead (our jars win on the class
# path), "last" after (a later Java option overrides an earlier one).
join_emr_default() {
  local setting="$1" ours="$2" sep="$3" order="$4" role key base value
  for role in driver executor; do
    key="spark.$role.$setting"
    base="$(emr_default "$key")"
    if [[ "$order" == first ]]; then
      value="$ours${base:+$sep$base}"
    else
      value="${base:+$base$sep}$ours"
    fi
    conf+=(--conf "$key=$value")
    log "$key = $value (ours: $ours; EMR's: ${base:-none})"
  done
}

conf=()
[[ -z "$JARS_DIR" ]] || join_emr_default extraClassPath "$JARS_DIR/*" : first
((${#JAVA_OPTS[@]} == 0)) || join_emr_default extraJavaOptions "${JAVA_OPTS[*]}" " " last

submit="$1"
shift
log "exec $submit ${conf[*]:-} $*"
exec "$submit" ${conf[@]+"${conf[@]}"} "$@"
