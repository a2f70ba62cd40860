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
bash "$(dirname "$0")/apt-install.sh" slurm-wlm munge
echo "slurm-setup: installed $(dpkg-query -W -f='${Package} ${Version} ' slurm-wlm munge)"
