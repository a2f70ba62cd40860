#!/usr/bin/env bash
# Install a single-host Slurm (Debian slurm-wlm 22.05) and munge for the adapter tests, and
# slurmdbd + mariadb-server for the accounting tests (real `sacct`/`sacctmgr show event`).
# Idempotent: does nothing when the binaries are already there.  Needs root (apt-get).
# The tests' fixtures (tests/_slurm_fixture.py) start and stop the daemons themselves.
set -euo pipefail
packages=(slurm-wlm munge slurmdbd mariadb-server)
need=()
for bin in munged slurmctld slurmd sbatch scontrol squeue sinfo scancel slurmdbd sacctmgr sacct mariadbd \
           mariadb-install-db; do
    command -v "$bin" >/dev/null 2>&1 || need+=("$bin")
done
if [ ${#need[@]} -eq 0 ]; then
    echo "slurm-setup: slurm, slurmdbd, mariadb and munge already installed ($(dpkg-query -W -f='${Package} ${Version} ' "${packages[@]}" 2>/dev/null || true))"
    exit 0
fi
bash "$(dirname "$0")/apt-install.sh" "${packages[@]}"
echo "slurm-setup: installed $(dpkg-query -W -f='${Package} ${Version} ' "${packages[@]}")"
