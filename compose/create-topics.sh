#!/usr/bin/env bash
# Create hpcguard's topics with their partition counts (run by the compose service
# `create-topics` inside the apache/kafka image; idempotent: --if-not-exists).
# Environment: BOOTSTRAP, PREFIX, PARTITIONS, REPLICATION, LDMS_TOPICS (space-separated),
# STREAM_RETENTION_HOURS (the telemetry topics' retention; 0: the broker's default, 7 days).
# Keys are node/job/system ids, so a topic's partitions bound how many workers share it.
# The telemetry topics (LDMS, raw IPMI, samples) carry the volume: the raw records alone are about
# 260 bytes per node and second (docs/operations.md, "Sizing"), 22 GB a day per 1,000 nodes; the
# workers' state lives in compacted changelogs, so those topics need only hold what a replay or a
# restart re-reads.
set -euo pipefail
BOOTSTRAP=${BOOTSTRAP:-kafka:9092}
PREFIX=${PREFIX:-hpcguard}
PARTITIONS=${PARTITIONS:-4}
REPLICATION=${REPLICATION:-1}
LDMS_TOPICS=${LDMS_TOPICS:-ldms.lustre_client ldms.meminfo ldms.procstat ldms.loadavg ldms.procnetdev ldms.diskusage}
KAFKA_TOPICS=${KAFKA_TOPICS:-/opt/kafka/bin/kafka-topics.sh}
STREAM_RETENTION_HOURS=${STREAM_RETENTION_HOURS:-48}

# Canonical suffixes (streams/topics.py CANONICAL); <prefix>.<suffix>.
SUFFIXES="samples.ipmi samples.io samples.os jobs probes predictions.node io.degradation actions actions.ack dlq raw.ipmi raw.slurm raw.probes internal.node-jobs internal.cluster internal.probes checkpoint.plans labels"
# the telemetry: high volume, re-read only by a replay or a restart (STREAM_RETENTION_HOURS)
TELEMETRY="samples.ipmi samples.io samples.os raw.ipmi"

case "$STREAM_RETENTION_HOURS" in
    ''|*[!0-9]*) echo "create-topics: STREAM_RETENTION_HOURS must be whole hours, got '$STREAM_RETENTION_HOURS'" >&2
                 exit 2 ;;
esac

create() {  # create TOPIC [telemetry]
    local extra=()
    if [ "${2:-}" = telemetry ] && [ "$STREAM_RETENTION_HOURS" -gt 0 ]; then
        extra=(--config "retention.ms=$((STREAM_RETENTION_HOURS * 3600000))")
    fi
    "$KAFKA_TOPICS" --bootstrap-server "$BOOTSTRAP" --create --if-not-exists \
        --topic "$1" --partitions "$PARTITIONS" --replication-factor "$REPLICATION" "${extra[@]}"
}

for suffix in $SUFFIXES; do
    kind=""
    case " $TELEMETRY " in *" $suffix "*) kind=telemetry ;; esac
    if [ -n "$PREFIX" ]; then create "$PREFIX.$suffix" $kind; else create "$suffix" $kind; fi
done
for topic in $LDMS_TOPICS; do
    create "$topic" telemetry
done
"$KAFKA_TOPICS" --bootstrap-server "$BOOTSTRAP" --describe | grep -E "^Topic:" || true
echo "create-topics: done ($PARTITIONS partitions each)"
