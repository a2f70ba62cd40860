#!/usr/bin/env bash
# Create hpcguard's topics with their partition counts (run by the compose service
# `create-topics` inside the apache/kafka image; idempotent: --if-not-exists).
# Environment: BOOTSTRAP, PREFIX, PARTITIONS, REPLICATION, LDMS_TOPICS (space-separated).
# Keys are node/job/system ids, so a topic's partitions bound how many workers share it.
set -euo pipefail
BOOTSTRAP=${BOOTSTRAP:-kafka:9092}
PREFIX=${PREFIX:-hpcguard}
PARTITIONS=${PARTITIONS:-4}
REPLICATION=${REPLICATION:-1}
LDMS_TOPICS=${LDMS_TOPICS:-ldms.lustre_client ldms.meminfo ldms.procstat ldms.loadavg ldms.procnetdev ldms.diskusage}
KAFKA_TOPICS=${KAFKA_TOPICS:-/opt/kafka/bin/kafka-topics.sh}

# Canonical suffixes (streams/topics.py CANONICAL); <prefix>.<suffix>.
SUFFIXES="samples.ipmi samples.io samples.os jobs probes predictions.node io.degradation actions actions.ack dlq raw.ipmi raw.slurm raw.probes internal.node-jobs internal.cluster internal.probes checkpoint.plans labels"

create() {
    "$KAFKA_TOPICS" --bootstrap-server "$BOOTSTRAP" --create --if-not-exists \
        --topic "$1" --partitions "$PARTITIONS" --replication-factor "$REPLICATION"
}

for suffix in $SUFFIXES; do
    if [ -n "$PREFIX" ]; then create "$PREFIX.$suffix"; else create "$suffix"; fi
done
for topic in $LDMS_TOPICS; do
    create "$topic"
done
"$KAFKA_TOPICS" --bootstrap-server "$BOOTSTRAP" --describe | grep -E "^Topic:" || true
echo "create-topics: done ($PARTITIONS partitions each)"
