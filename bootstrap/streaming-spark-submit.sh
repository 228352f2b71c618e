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
#  * "Has the old job stopped?" is only observable on the cluster (YARN), so the
#    graceful stop (stop marker, bounded wait) happens here; a CloudFormation
#    deploy and `make redeploy` submit the same step and get the same handover.
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
#   --app-name NAME         YARN name of the job; a running app of this name is stopped first
#   --stop-marker S3URI     object the running job polls for; written to stop it gracefully,
#                           deleted before the new version is submitted
#   --stop-timeout-sec N    bound on the wait for the old app to finish (default 600)
#   --poll-sec N            YARN poll interval (default 5)
# Exit codes: 0 submitted (spark-submit's own code otherwise), 2 usage,
#             8 old job still running after the bound (nothing submitted).
set -euo pipefail

JARS_DIR=""
JAVA_OPTS=()
DEFAULTS="${SPARK_CONF_DIR:-/etc/spark/conf}/spark-defaults.conf"
APP_NAME=""
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

running_apps() {
  yarn application -list -appStates SUBMITTED,ACCEPTED,RUNNING 2>/dev/null |
    awk -F'\t' -v n="$APP_NAME" '{ gsub(/^[ \t]+|[ \t]+$/, "", $2) } $2 == n { print $1 }'
}

if [[ -n "$APP_NAME" ]]; then
  old="$(running_apps | tr '\n' ' ')"
  if [[ -n "${old// /}" ]]; then
    [[ -n "$STOP_MARKER" ]] || fail 2 "$APP_NAME is running ($old) and no --stop-marker was given"
    log "asking $APP_NAME ($old) to stop: writing $STOP_MARKER"
    printf 'stop requested %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" |
      aws s3 cp --only-show-errors - "$STOP_MARKER"
    deadline=$((SECONDS + STOP_TIMEOUT_SEC))
    while [[ -n "$(running_apps)" ]]; do
      if ((SECONDS >= deadline)); then
        fail 8 "$APP_NAME still running after ${STOP_TIMEOUT_SEC}s; marker $STOP_MARKER left" \
          "in place, new version NOT submitted"
      fi
      sleep "$POLL_SEC"
    done
    log "$APP_NAME stopped"
  fi
  if [[ -n "$STOP_MARKER" ]]; then
    # The new version must not see the old version's stop request.
    aws s3 rm --only-show-errors "$STOP_MARKER" >/dev/null 2>&1 || true
  fi
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
