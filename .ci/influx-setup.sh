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
if [ "$(id -u)" -ne 0 ]; then
    echo "influx-setup: influxd missing and not root: cannot apt-get install influxdb" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# policy-rc.d keeps the package's post-install script from starting the system daemon.
rc_policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$rc_policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$rc_policy"
    chmod +x "$rc_policy"
    created_policy=1
fi
trap '[ "$created_policy" = 1 ] && rm -f "$rc_policy" || true' EXIT
apt-get install -y -q --no-install-recommends influxdb
echo "influx-setup: installed $(dpkg-query -W -f='${Package} ${Version}' influxdb)"
