"""Parallel-file-system degradation, canary probes and job scripts (seed 004 ch. 4).

Ground truth for CanarIO: a per-second slowdown factor ``s(t) >= 1`` of the parallel
file system made of degradation episodes (short or long, mild or severe, like the
spikes of seed 004 Fig. 4.2) on top of small daily fluctuations; the five MACSio
probe types of Tab. 4.1 submitted continuously (each type keeps ``probe_slots`` runs
going back to back); user jobs from a pool of repeated job templates whose batch
scripts are realistic Slurm text and whose IO sensitivity is known.

A job (or probe) with IO fraction ``f`` progresses at rate ``1 / ((1 - f) + f s(t))``
nominal seconds per second, so IO-sensitive jobs stretch during an episode and
IO-resistant ones (``f ~ 0``) do not.  The system-aggregate 1 s read/write rates are
the sum of the running jobs' nominal rates, divided by ``s(t)`` and with per-second
fluctuations that grow with ``s(t)`` ("system IO drops and fluctuates", §4.5).

Example
-------
>>> import numpy as np
>>> tr = simulate_pfs(np.random.default_rng(0), 0.0, 6 * 3600.0, jobs_per_hour=10)
>>> tr.slowdown.shape, bool((tr.slowdown >= 1).all())
((21600,), True)
>>> sorted(set(tr.probes["probe_type"].tolist()))[:2]
['probe-1', 'probe-2']
"""
from __future__ import annotations

import csv
import json
import os
from typing import Optional, Sequence

import numpy as np

from hpcguard.connectors.canario_io import (  # noqa: F401  (the files' columns and the trace, re-exported)
    EPISODE_FIELDS,
    JOB_FIELDS,
    PROBE_FIELDS,
    PfsTrace,
)
from hpcguard.models.canario.probes import PROBE_TYPES

PROBE_IO_FRACTION = 0.9  # MACSio probes are IO proxies: nearly all their time is IO


# --------------------------------------------------------------------------- episodes
def degradation_episodes(rng: np.random.Generator, duration_s: float, per_day: float = 3.0,
                         quiet_head_s: float = 0.0) -> list[dict]:
    """Poisson episodes: short (10–45 min) or long (2–8 h); mild (peak 1.08–1.35) or severe (1.8–4)."""
    n = rng.poisson(per_day * duration_s / 86400.0)
    starts = np.sort(rng.uniform(quiet_head_s, duration_s, n))
    episodes = []
    for t0 in starts:
        long = rng.random() < 0.35
        severe = rng.random() < 0.45
        length = rng.uniform(2 * 3600, 8 * 3600) if long else rng.uniform(600, 2700)
        peak = rng.uniform(1.8, 4.0) if severe else rng.uniform(1.08, 1.35)
        episodes.append({"start": float(t0), "end": float(min(t0 + length, duration_s)),
                         "kind": "long" if long else "short", "severity": "severe" if severe else "mild",
                         "peak_slowdown": float(peak)})
    return episodes


def slowdown_series(rng: np.random.Generator, n_seconds: int, episodes: Sequence[dict]) -> np.ndarray:
    """Per-second slowdown: daily ±1 % wave, trapezoid episodes with per-minute jitter."""
    t = np.arange(n_seconds, dtype=float)
    s = 1.0 + 0.01 * (1 + np.sin(2 * np.pi * t / 86400.0)) / 2
    minute_jitter = np.repeat(rng.lognormal(0.0, 0.15, n_seconds // 60 + 1), 60)[:n_seconds]
    for ep in episodes:
        a, b = int(ep["start"]), int(ep["end"])
        if b <= a:
            continue
        ramp = max(1.0, 0.1 * (b - a))
        tt = t[a:b]
        shape = np.minimum(1.0, np.minimum(tt - a + 1, b - tt) / ramp)
        excess = (ep["peak_slowdown"] - 1.0) * shape * minute_jitter[a:b]
        s[a:b] = np.maximum(s[a:b], 1.0 + excess)
    return s


class _Progress:
    """Cumulative nominal progress per IO fraction, for vectorised end times."""

    def __init__(self, slowdown: np.ndarray) -> None:
        self.slowdown = slowdown
        self._cum: dict[float, np.ndarray] = {}

    def cum(self, f: float) -> np.ndarray:
        f = round(float(f), 3)
        if f not in self._cum:
            rate = 1.0 / ((1.0 - f) + f * self.slowdown)
            self._cum[f] = np.concatenate([[0.0], np.cumsum(rate)])
        return self._cum[f]

    def end_offsets(self, start_s: np.ndarray, work_s: np.ndarray, f: np.ndarray) -> np.ndarray:
        """Offsets (s from trace start) at which runs starting at ``start_s`` finish ``work_s``."""
        start_s = np.asarray(start_s, float)
        work_s = np.asarray(work_s, float)
        f = np.asarray(f, float)
        out = np.empty(start_s.shape)
        n = self.slowdown.size
        for level in np.unique(np.round(f, 3)):
            m = np.round(f, 3) == level
            c = self.cum(level)
            i0 = np.clip(start_s[m], 0, n).astype(int)
            frac = start_s[m] - i0
            target = c[i0] + work_s[m] + frac  # fractional start: approx. rate 1 for the partial second
            j = np.searchsorted(c, target, side="left")
            inside = j <= n
            jj = np.clip(j, 1, n)
            # linear interpolation inside the step, extrapolation at rate 1 past the end
            step = c[jj] - c[jj - 1]
            within = jj - 1 + (target - c[jj - 1]) / np.where(step > 0, step, 1.0)
            out[m] = np.where(inside, within, n + (target - c[n]))
        return out


# --------------------------------------------------------------------------- probes
def simulate_probes(rng: np.random.Generator, progress: _Progress, duration_s: float, node_names: Sequence[str],
                    probe_slots: int = 2, queue_wait_s: float = 120.0, noise: float = 0.015,
                    head_s: Optional[float] = None) -> dict[str, np.ndarray]:
    """Probe runs kept going back to back, ``probe_slots`` per type (§4.2.1).

    The first run of each slot starts uniformly in ``[0, head_s)`` (default: the
    type's expected runtime, i.e. slots already staggered at the trace start).
    """
    rows: list[tuple] = []
    for ptype in PROBE_TYPES:
        for _slot in range(probe_slots):
            t = rng.uniform(0, ptype.expected_runtime_s if head_s is None else head_s)
            while t < duration_s:
                work = ptype.expected_runtime_s * max(0.9, 1 + rng.normal(0, noise))
                end = float(progress.end_offsets(np.array([t]), np.array([work]),
                                                 np.array([PROBE_IO_FRACTION]))[0])
                rows.append((ptype.name, str(rng.choice(node_names)), t, end))
                t = end + rng.exponential(queue_wait_s)
    rows.sort(key=lambda r: r[2])
    start = np.array([r[2] for r in rows])
    end = np.array([r[3] for r in rows])
    return {"probe_id": np.array([f"probe.{i}" for i in range(len(rows))]),
            "probe_type": np.array([r[0] for r in rows]), "node": np.array([r[1] for r in rows]),
            "start": start, "end": end, "runtime_s": end - start}


# --------------------------------------------------------------------------- job scripts
# (app, io_sensitive, io_fraction choices, read MB/s, write MB/s per node) — launch builders below.
_APPS = {
    "vpic": (True, (0.5, 0.7)), "hacc_io": (True, (0.7,)), "wrf_pnetcdf": (True, (0.4, 0.6)),
    "lammps_dump": (True, (0.4, 0.6)), "h5bench": (True, (0.7,)), "e3sm_pio": (True, (0.4, 0.6)),
    "py_analysis_lustre": (True, (0.5, 0.7)), "gromacs_traj": (True, (0.4,)),
    "hpl": (False, (0.0,)), "namd": (False, (0.0, 0.005)), "gromacs": (False, (0.005,)),
    "lulesh": (False, (0.0,)), "amg": (False, (0.0,)), "quicksilver": (False, (0.0, 0.005)),
    "lammps": (False, (0.005,)), "py_train_cpu": (False, (0.005,)), "qbox": (False, (0.005,)),
    "wrf": (False, (0.005,)),
}
_USERS = ("alee", "bkumar", "cchen", "dsmith", "egarcia", "fwang", "gmuller", "hnguyen", "ipatel", "jrossi",
          "kodell", "lmartin", "mbrown", "nsato", "okim")
_COMPILERS = ("intel/19.0.4", "intel/2021.6", "gcc/8.3.1", "gcc/10.3.1", "clang/14.0.6")
_MPIS = ("mvapich2/2.3.6", "openmpi/4.1.2", "impi/2019.8")


def _launch(app: str, rng: np.random.Generator, tasks: int, user: str) -> tuple[list[str], list[str]]:
    """(setup lines, launch lines) for one application template."""
    lustre = f"/p/lustre{rng.integers(1, 4)}/{user}"
    nfs = f"/g/g{rng.integers(10, 99)}/{user}"
    if app == "vpic":
        d = f"{lustre}/vpic/run{rng.integers(1, 500)}"
        return ([f"export OUT={d}", "mkdir -p $OUT", "lfs setstripe -c 32 -S 4m $OUT",
                 f"export VPIC_DUMP_INTERVAL={rng.choice([50, 100, 200])}"],
                [f"srun -n {tasks} ./vpic.Linux {rng.choice(['lpi', 'reconnection', 'harris'])}.cxx --restart-dir $OUT"])
    if app == "hacc_io":
        return ([f"OUTDIR={lustre}/hacc", "lfs setstripe -c -1 $OUTDIR"],
                [f"srun -n {tasks} ./hacc_io {rng.choice([1000000, 5000000, 20000000])} $OUTDIR/part.dat"])
    if app in ("wrf_pnetcdf", "wrf"):
        io = "11" if app == "wrf_pnetcdf" else "2"
        hist = rng.choice([10, 30, 60]) if app == "wrf_pnetcdf" else 1440
        return ([f"cd {lustre if app == 'wrf_pnetcdf' else nfs}/wrf/{rng.choice(['conus12km', 'katrina', 'ideal_les'])}",
                 f"sed -i 's/io_form_history.*/io_form_history = {io},/' namelist.input",
                 f"sed -i 's/history_interval.*/history_interval = {hist},/' namelist.input"],
                [f"srun -n {tasks} ./wrf.exe"])
    if app in ("lammps_dump", "lammps"):
        inp = f"in.{rng.choice(['lj', 'chain', 'eam', 'rhodo'])}"
        if app == "lammps_dump":
            return ([f"cd {lustre}/lammps", f"export DUMP_EVERY={rng.choice([10, 50, 100])}"],
                    [f"srun -n {tasks} lmp -in {inp} -var dumpfreq $DUMP_EVERY -var dumpdir {lustre}/lammps/dumps"])
        return ([f"cd {nfs}/lammps"], [f"srun -n {tasks} lmp -in {inp} -var nsteps {rng.choice([10000, 50000])}"])
    if app == "h5bench":
        return (["module load hdf5-parallel/1.12.1", f"export H5_DIR={lustre}/h5bench"],
                [f"srun -n {tasks} h5bench_write h5bench.cfg $H5_DIR/test.h5",
                 f"srun -n {tasks} h5bench_read h5bench.cfg $H5_DIR/test.h5"])
    if app == "e3sm_pio":
        return (["module load netcdf-c/4.8.1 parallel-netcdf/1.12.2", f"export PIO_STRIDE={rng.choice([4, 8, 36])}",
                 f"cd {lustre}/e3sm/case{rng.integers(1, 90)}/run"],
                [f"srun -n {tasks} ../bld/e3sm.exe >> e3sm.log.$SLURM_JOB_ID 2>&1"])
    if app == "py_analysis_lustre":
        return (["module load python/3.9.12", "source ~/venvs/analysis/bin/activate"],
                [f"srun -n {tasks} python analyze_snapshots.py --input {lustre}/sims/snap_* --output {lustre}/reduced"])
    if app in ("gromacs_traj", "gromacs"):
        nst = rng.choice([100, 500]) if app == "gromacs_traj" else 0
        out = f"-nstxout {nst} -nstvout {nst} -o {lustre}/md/traj.trr" if app == "gromacs_traj" else "-nb cpu -noconfout"
        return (["module load gromacs/2021.5"], [f"srun -n {tasks} gmx_mpi mdrun -s topol.tpr -ntomp 1 {out}"])
    if app == "hpl":
        return ([f"cd {nfs}/hpl", f"cp HPL.dat.{rng.choice(['n100k', 'n200k', 'n400k'])} HPL.dat"],
                [f"srun -n {tasks} ./xhpl"])
    if app == "namd":
        return (["module load namd/2.14"], [f"srun -n {tasks} namd2 +ppn 35 {rng.choice(['apoa1', 'stmv', 'f1atpase'])}.namd"])
    if app == "lulesh":
        return ([], [f"srun -n {tasks} ./lulesh2.0 -s {rng.choice([60, 100, 150])} -i {rng.choice([1000, 5000])} -q"])
    if app == "amg":
        n = rng.choice([128, 256])
        return ([], [f"srun -n {tasks} ./amg -problem 2 -n {n} {n} {n} -P 4 4 {max(tasks // 16, 1)}"])
    if app == "quicksilver":
        return ([f"cd {nfs}/qs"], [f"srun -n {tasks} ./qs -i Coral2_P{rng.choice([1, 2])}.inp -N {rng.choice([50, 100])}"])
    if app == "py_train_cpu":
        return (["module load python/3.9.12", "export OMP_NUM_THREADS=36"],
                [f"srun -n {tasks} python train.py --epochs {rng.choice([20, 50])} --data {nfs}/small.npz"])
    if app == "qbox":
        return ([f"cd {nfs}/qbox"], [f"srun -n {tasks} qb {rng.choice(['gold', 'water64', 'si512'])}.i > qb.out"])
    raise ValueError(f"unknown application {app!r}")


def job_script(rng: np.random.Generator, app: str, user: str, name: str, num_nodes: int,
               time_limit_s: float) -> str:
    """A realistic Slurm batch script for ``app``."""
    tasks = num_nodes * 36
    setup, launch = _launch(app, rng, tasks, user)
    limit = int(time_limit_s)
    lines = ["#!/bin/bash", f"#SBATCH --job-name={name}", f"#SBATCH --nodes={num_nodes}",
             "#SBATCH --ntasks-per-node=36",
             f"#SBATCH --time={limit // 3600:02d}:{limit % 3600 // 60:02d}:00",
             f"#SBATCH --partition={rng.choice(['pbatch', 'pbatch', 'pdebug'])}",
             f"#SBATCH --account={rng.choice(['cmetrics', 'climate', 'matsci', 'bio', 'astro'])}",
             f"#SBATCH --output={name}-%j.out"]
    if rng.random() < 0.4:
        lines += ["#SBATCH --mail-type=END,FAIL", f"#SBATCH --mail-user={user}@llnl.gov"]
    lines += ["", "module purge", f"module load {rng.choice(_COMPILERS)} {rng.choice(_MPIS)}"]
    if rng.random() < 0.5:
        lines.append(f"export OMP_NUM_THREADS={rng.choice([1, 2])}")
    if rng.random() < 0.3:
        lines.append("# " + rng.choice(["production run", "rerun after fix", "scaling study", "TODO bigger mesh"]))
    lines += setup + ['echo "start $(date)"'] + launch
    if rng.random() < 0.3:
        lines.append('echo "done $(date)"')
    return "\n".join(lines) + "\n"


def _templates(rng: np.random.Generator, n: int, first_id: int = 0) -> list[dict]:
    apps = list(_APPS)
    out = []
    for i in range(n):
        app = apps[rng.integers(len(apps))]
        sensitive, fracs = _APPS[app]
        user = _USERS[rng.integers(len(_USERS))]
        nodes = int(rng.choice([1, 2, 4, 8, 16, 32], p=[0.25, 0.2, 0.2, 0.15, 0.12, 0.08]))
        base = float(np.clip(rng.lognormal(np.log(2400), 0.8), 300, 8 * 3600))
        name = f"{app.split('_')[0]}_{rng.integers(1, 999)}"
        per_node_mb = rng.uniform(150, 600) if sensitive else rng.uniform(0.5, 8)
        write_share = rng.uniform(0.3, 0.9)
        out.append({"template_id": first_id + i, "app": app, "io_sensitive": sensitive,
                    "io_fraction": float(rng.choice(fracs)), "user": user, "num_nodes": nodes,
                    "base_runtime_s": base, "name": name,
                    "read_rate": per_node_mb * 1e6 * nodes * (1 - write_share),
                    "write_rate": per_node_mb * 1e6 * nodes * write_share,
                    "script": job_script(rng, app, user, name, nodes, min(base * 3, 24 * 3600))})
    return out


def scripts_for_jobs(rng: np.random.Generator, jobs: Sequence[dict], n_templates: int = 200,
                     new_template_prob: float = 0.1) -> list[dict]:
    """A template (application, IO sensitivity) and a batch script for each job of another simulator.

    Templates are drawn as in :func:`simulate_pfs` (Zipf-like popularity, sometimes a
    new one); the script is written for the job's own ``num_nodes``, ``time_limit_s``,
    ``user`` and ``name`` so that it agrees with the job's accounting record.

    >>> out = scripts_for_jobs(np.random.default_rng(0), [{"num_nodes": 2, "time_limit_s": 3600.0, "name": "x"}])
    >>> sorted(out[0]), "#SBATCH --nodes=2" in out[0]["script"]
    (['app', 'io_sensitive', 'script'], True)
    """
    templates = _templates(rng, n_templates)
    weights = 1.0 / np.arange(1, len(templates) + 1) ** 0.8
    out = []
    for job in jobs:
        if rng.random() < new_template_prob:
            t = _templates(rng, 1, len(templates))[0]
        else:
            t = templates[rng.choice(len(weights), p=weights / weights.sum())]
        limit = float(job.get("time_limit_s") or min(t["base_runtime_s"] * 3, 24 * 3600))
        script = job_script(rng, t["app"], str(job.get("user") or t["user"]), str(job.get("name") or t["name"]),
                            int(job.get("num_nodes") or t["num_nodes"]), limit)
        out.append({"app": t["app"], "io_sensitive": bool(t["io_sensitive"]), "script": script})
    return out


# --------------------------------------------------------------------------- main entry
def simulate_pfs(rng: np.random.Generator, start: float, end: float, jobs: Optional[Sequence[dict]] = None, *,
                 n_nodes: int = 128, jobs_per_hour: float = 30.0, n_templates: int = 200,
                 new_template_prob: float = 0.1, episodes_per_day: float = 3.0, quiet_head_s: float = 0.0,
                 probe_slots: int = 2, queue_wait_s: float = 1800.0, failed_start_prob: float = 0.03,
                 deck_change_prob: float = 0.03,
                 background_io: float = 2e8, episodes: Optional[Sequence[dict]] = None,
                 probe_head_s: Optional[float] = None) -> PfsTrace:
    """Simulate the PFS, probes and jobs from ``start`` to ``end`` (epoch seconds).

    Parameters
    ----------
    jobs
        Optional job table from another simulator (dicts with ``job_id``, ``submit``,
        ``start``, ``num_nodes``, optional ``nodes``, ``user``, ``name`` and the nominal
        ``runtime_s``).  Each job gets a template (application, script, IO
        sensitivity) and its end time stretched by the slowdown.  ``None`` generates a
        Poisson job stream of ``jobs_per_hour``.
    quiet_head_s
        No episode starts in the first ``quiet_head_s`` seconds.
    episodes
        Explicit degradation episodes (dicts with ``start``, ``end`` in seconds from
        ``start``, ``kind``, ``severity``, ``peak_slowdown``) instead of the Poisson
        draw (``episodes_per_day`` and ``quiet_head_s`` are then ignored).
    probe_head_s
        The first run of every probe slot starts within this many seconds (default:
        the probe type's expected runtime).
    queue_wait_s
        Mean queue wait of generated jobs (exponential); a busy production queue
        is what gives IO-aware replacement its waiting IO-resistant jobs.
    """
    if not end > start:
        raise ValueError("end must be after start")
    n = int(np.ceil(end - start))
    if episodes is None:
        episodes = degradation_episodes(rng, n, episodes_per_day, quiet_head_s)
    else:
        episodes = [{"kind": "short", "severity": "severe", **ep, "start": float(ep["start"]),
                     "end": float(min(ep["end"], n)), "peak_slowdown": float(ep["peak_slowdown"])}
                    for ep in episodes]
        if any(not (0 <= ep["start"] < ep["end"]) or ep["peak_slowdown"] < 1 for ep in episodes):
            raise ValueError("each episode needs 0 <= start < end (seconds from start) and peak_slowdown >= 1")
    slowdown = slowdown_series(rng, n, episodes)
    progress = _Progress(slowdown)
    node_names = [f"n{i:03d}" for i in range(1, n_nodes + 1)]
    probes = simulate_probes(rng, progress, n, node_names, probe_slots, head_s=probe_head_s)

    templates = _templates(rng, n_templates)
    if jobs is None:
        m = rng.poisson(jobs_per_hour * n / 3600.0)
        submit = np.sort(rng.uniform(0, n, m))
        job_ids = np.array([str(100000 + i) for i in range(m)])
        wait = rng.exponential(queue_wait_s, m)
        start_off = submit + wait
        given_nodes = [None] * m
        given_users = [None] * m
        given_names = [None] * m
        given_runtime = np.full(m, np.nan)
        given_num_nodes = np.zeros(m, int)
    else:
        m = len(jobs)
        job_ids = np.array([str(j["job_id"]) for j in jobs])
        submit = np.array([float(j["submit"]) - start for j in jobs])
        start_off = np.array([float(j.get("start", j["submit"])) - start for j in jobs])
        given_nodes = [j.get("nodes") for j in jobs]
        given_users = [j.get("user") for j in jobs]
        given_names = [j.get("name") for j in jobs]
        given_runtime = np.array([float(j.get("runtime_s", np.nan)) for j in jobs])
        given_num_nodes = np.array([int(j.get("num_nodes", 0)) for j in jobs])

    # template choice: Zipf-like popularity, occasionally a brand-new template
    weights = 1.0 / np.arange(1, len(templates) + 1) ** 0.8
    chosen = []
    for i in range(m):
        if rng.random() < new_template_prob:
            templates += _templates(rng, 1, len(templates))
            weights = np.append(weights, weights[0])
            chosen.append(templates[-1])
        else:
            chosen.append(templates[rng.choice(len(weights) - 0, p=weights / weights.sum())])
    base = np.array([t["base_runtime_s"] for t in chosen])
    base = np.where(np.isfinite(given_runtime), given_runtime, base)
    failed = rng.random(m) < failed_start_prob
    deck = (~failed) & (rng.random(m) < deck_change_prob)  # input-deck change: more IO, longer, not IO-degraded
    work = base * (1 + np.abs(rng.normal(0, 0.01, m))) * np.where(deck, 1.3, 1.0)
    work = np.where(failed, rng.uniform(5, 50, m), work)
    io_frac = np.array([t["io_fraction"] for t in chosen])
    end_off = progress.end_offsets(start_off, work, io_frac)
    num_nodes = np.where(given_num_nodes > 0, given_num_nodes, [t["num_nodes"] for t in chosen])
    io_scale = np.where(deck, 1.5, 1.0) * (1 + rng.normal(0, 0.02, m))
    rrate = np.array([t["read_rate"] for t in chosen])
    wrate = np.array([t["write_rate"] for t in chosen])
    nodes_col = []
    for i in range(m):
        nodes = given_nodes[i]
        if nodes is None:
            nodes = list(rng.choice(node_names, size=min(int(num_nodes[i]), n_nodes), replace=False))
        nodes_col.append(",".join(nodes) if not isinstance(nodes, str) else nodes)
    jobs_tab = {
        "job_id": job_ids,
        "user": np.array([u or t["user"] for u, t in zip(given_users, chosen)]),
        "name": np.array([nm or t["name"] for nm, t in zip(given_names, chosen)]),
        "num_nodes": num_nodes.astype(int), "nodes": np.array(nodes_col, dtype=object),
        "submit": start + submit, "start": start + start_off, "end": start + end_off,
        "runtime_s": end_off - start_off, "base_runtime_s": base,
        "app": np.array([t["app"] for t in chosen]),
        "io_sensitive": np.array([t["io_sensitive"] for t in chosen], bool),
        "io_fraction": io_frac,
        "total_read_bytes": rrate * work * io_scale, "total_write_bytes": wrate * work * io_scale,
        "template_id": np.array([t["template_id"] for t in chosen], int), "deck_change": deck,
    }
    scripts = {jid: t["script"] for jid, t in zip(job_ids, chosen)}

    # system-aggregate IO: nominal demand of running jobs and probes, throttled by s(t)
    demand_r = np.zeros(n + 1)
    demand_w = np.zeros(n + 1)
    a = np.clip(start_off, 0, n).astype(int)
    b = np.clip(end_off, 0, n).astype(int)
    dur = np.maximum(end_off - start_off, 1.0)
    np.add.at(demand_r, a, jobs_tab["total_read_bytes"] / dur)
    np.add.at(demand_r, b, -jobs_tab["total_read_bytes"] / dur)
    np.add.at(demand_w, a, jobs_tab["total_write_bytes"] / dur)
    np.add.at(demand_w, b, -jobs_tab["total_write_bytes"] / dur)
    gb = {p.name: p.total_write_gb for p in PROBE_TYPES}
    pw = np.array([gb[t] for t in probes["probe_type"]]) * 1e9 / np.maximum(probes["runtime_s"], 1.0)
    np.add.at(demand_w, np.clip(probes["start"], 0, n).astype(int), pw)
    np.add.at(demand_w, np.clip(probes["end"], 0, n).astype(int), -pw)
    demand_r = np.maximum(np.cumsum(demand_r)[:n], 0) + background_io
    demand_w = np.maximum(np.cumsum(demand_w)[:n], 0) + background_io / 2
    sigma = 0.25 + 0.6 * np.minimum(slowdown - 1.0, 1.5)
    noise_r = rng.lognormal(-sigma ** 2 / 2, sigma)
    noise_w = rng.lognormal(-sigma ** 2 / 2, sigma)
    params = {"n_nodes": n_nodes, "jobs_per_hour": jobs_per_hour, "n_templates": n_templates,
              "episodes_per_day": episodes_per_day, "probe_slots": probe_slots, "queue_wait_s": queue_wait_s,
              "quiet_head_s": quiet_head_s, "probe_head_s": probe_head_s}
    return PfsTrace(start=float(start), end=float(start + n), slowdown=slowdown,
                    io_read=demand_r / slowdown * noise_r, io_write=demand_w / slowdown * noise_w,
                    episodes=[{**ep, "start": start + ep["start"], "end": start + ep["end"]} for ep in episodes],
                    probes={**probes, "start": start + probes["start"], "end": start + probes["end"]},
                    jobs=jobs_tab, scripts=scripts, params=params)


# --------------------------------------------------------------------------- writer
def write_probes_csv(probes: dict[str, np.ndarray], path: str) -> None:
    """``probes.csv``: one completed probe run per row (columns :data:`PROBE_FIELDS`)."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(PROBE_FIELDS)
        for i in range(probes["start"].size):
            w.writerow([probes["probe_id"][i], probes["probe_type"][i], probes["node"][i],
                        f"{probes['start'][i]:.3f}", f"{probes['end'][i]:.3f}", f"{probes['runtime_s'][i]:.3f}"])


def write_episodes_csv(episodes: Sequence[dict], path: str) -> None:
    """``degradation.csv``: the ground-truth episodes (columns :data:`EPISODE_FIELDS`)."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(EPISODE_FIELDS)
        for ep in episodes:
            w.writerow([f"{ep['start']:.3f}", f"{ep['end']:.3f}", ep["kind"], ep["severity"],
                        f"{ep['peak_slowdown']:.4f}"])


def write_pfs(trace: PfsTrace, out_dir: str, seed: Optional[int] = None) -> dict[str, str]:
    """Write the trace into a recorded-data directory; returns the paths written.

    Files: ``probes.csv``, ``degradation.csv`` (episodes), ``jobs_io.csv`` (ground
    truth per job), ``jobscripts/<job_id>.sh``, ``io_system.csv`` (1 s
    ``time,read_bytes,write_bytes,slowdown``) and ``pfs.json`` (parameters).
    """
    os.makedirs(os.path.join(out_dir, "jobscripts"), exist_ok=True)
    paths = {k: os.path.join(out_dir, f) for k, f in (("probes", "probes.csv"), ("degradation", "degradation.csv"),
                                                         ("jobs", "jobs_io.csv"), ("io", "io_system.csv"),
                                                         ("meta", "pfs.json"))}
    write_probes_csv(trace.probes, paths["probes"])
    write_episodes_csv(trace.episodes, paths["degradation"])
    with open(paths["jobs"], "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(JOB_FIELDS)
        j = trace.jobs
        for i in range(j["job_id"].size):
            w.writerow([j["job_id"][i], j["user"][i], j["name"][i], int(j["num_nodes"][i]), j["nodes"][i],
                        f"{j['submit'][i]:.3f}", f"{j['start'][i]:.3f}", f"{j['end'][i]:.3f}",
                        f"{j['runtime_s'][i]:.3f}", f"{j['base_runtime_s'][i]:.3f}", j["app"][i],
                        int(j["io_sensitive"][i]), f"{j['io_fraction'][i]:.3f}", f"{j['total_read_bytes'][i]:.0f}",
                        f"{j['total_write_bytes'][i]:.0f}", int(j["template_id"][i]), int(j["deck_change"][i])])
    for jid, text in trace.scripts.items():
        with open(os.path.join(out_dir, "jobscripts", f"{jid}.sh"), "w") as fh:
            fh.write(text)
    table = np.column_stack([trace.times, trace.io_read, trace.io_write, trace.slowdown])
    np.savetxt(paths["io"], table, fmt=["%.0f", "%.0f", "%.0f", "%.4f"], delimiter=",",
               header="time,read_bytes,write_bytes,slowdown", comments="")
    with open(paths["meta"], "w") as fh:
        json.dump({"start": trace.start, "end": trace.end, "seed": seed, **trace.params,
                   "episodes": len(trace.episodes), "probes": int(trace.probes["start"].size),
                   "jobs": int(trace.jobs["job_id"].size)}, fh, indent=2)
    return paths
