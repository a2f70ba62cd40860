#!/usr/bin/env bash
# Install a single-host Slurm (Debian slurm-wlm 22.05) and munge for the adapter tests.
# Idempotent: does nothing when the binaries are already there.  Needs root (apt-get).
# The tests' fixture (tests/_slurm_fixture.py) starts and stops the daemons itself.
set -euo pipefail
need=()
for bin in munged slurmctld slurmd sbatch scontrol squeue sinfo scancel; do
    command -v "$bin" >/dev/null 2>&1 || need+=("$bin")
done
if [ ${#need[@]} -eq 0 ]; then
    echo "slurm-setup: slurm and munge already installed ($(dpkg-query -W -f='${Package} ${Version} ' slurm-wlm munge 2>/dev/null || true))"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "slurm-setup: missing ${need[*]} and not root: cannot apt-get install slurm-wlm munge" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# policy-rc.d keeps the packages' post-install scripts from starting system daemons;
# the test fixture runs its own munged/slurmctld/slurmd with a per-run configuration.
rc_policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$rc_policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$rc_policy"
    chmod +x "$rc_policy"
    created_policy=1
fi
trap '[ "$created_policy" = 1 ] && rm -f "$rc_policy"' EXIT
apt-get install -y -q --no-install-recommends slurm-wlm munge
echo "slurm-setup: installed $(dpkg-query -W -f='${Package} ${Version} ' slurm-wlm munge)"
