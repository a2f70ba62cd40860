#!/bin/bash
# Runs once after InfluxDB 2 setup (docker-entrypoint-initdb.d): map database
# "$DOCKER_INFLUXDB_INIT_BUCKET" / retention policy "autogen" to the bucket so the
# InfluxQL dashboards (Grafana data source hpcguard-influx) can query it.
set -euo pipefail
bucket_id=$(influx bucket list --org "$DOCKER_INFLUXDB_INIT_ORG" --name "$DOCKER_INFLUXDB_INIT_BUCKET" \
            --hide-headers | cut -f1)
influx v1 dbrp create --org "$DOCKER_INFLUXDB_INIT_ORG" --bucket-id "$bucket_id" \
    --db "$DOCKER_INFLUXDB_INIT_BUCKET" --rp autogen --default
