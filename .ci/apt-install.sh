#!/usr/bin/env bash
# apt-get install PACKAGES without letting their post-install scripts start system daemons
# (the test fixtures run their own munged/slurmctld/slurmd/influxd). Needs root.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
    echo "apt-install: not root: cannot apt-get install $*" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
rc_policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$rc_policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$rc_policy"
    chmod +x "$rc_policy"
    created_policy=1
fi
trap '[ "$created_policy" = 1 ] && rm -f "$rc_policy" || true' EXIT
apt-get install -y -q --no-install-recommends "$@"
