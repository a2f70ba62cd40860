#!/usr/bin/env bash
# Install InfluxDB 1.x (Debian's `influxdb` 1.6) for the InfluxDB sink tests.
# Idempotent: does nothing when `influxd` is already on PATH.  Needs root (apt-get).
# The tests' fixture (tests/_influx_fixture.py) starts and stops its own influxd with a
# per-run configuration; the package's system service is never started.
set -euo pipefail
if command -v influxd >/dev/null 2>&1; then
    echo "influx-setup: influxd already installed ($(influxd version 2>/dev/null || true))"
    exit 0
fi
bash "$(dirname "$0")/apt-install.sh" influxdb
echo "influx-setup: installed $(dpkg-query -W -f='${Package} ${Version}' influxdb)"
