"""Synthetic cluster telemetry with ground-truth failures, precursors and benign anomalies.

The generator is pure numpy (no file I/O; :mod:`hpcguard.simulators.writers` writes
the recorded-data directory of ``docs/formats.md``).  It produces, for ``N`` nodes
``n001..nNNN`` (``component_id`` = index + 1) over ``hours`` from ``start``:

* 1 s Lustre client counters (LDMS ``lustre_client``), 15 s OS samplers
  (``procstat``, ``loadavg``, ``meminfo``, ``diskusage``, ``procnetdev``) and 15 s BMC
  sensors (FreeIPMI names such as ``CPU1 Temp``, ``FAN1A``, ``Vcore``, ``PS1 Temp`` plus
  unmapped extras like ``System Temp`` and an occasional ``N/A`` reading);
* a Slurm job table (what ``sacct --parsable2`` shows);
* ground truth: failures (``time,node,job_id,cause,family,onset_minutes,onset_time``;
  ``family`` is ``sudden`` with onset 0 when no precursor came first) and anomalies
  (``start,end,node,kind,leads_to_failure,family``).

What follows is the ``classic`` profile (the default).  A site profile
(:mod:`hpcguard.simulators.profiles`, ``profile=`` or ``TelemetryParams.site``) keeps
the failure, job, counter and OS-sampler model and changes the rest: precursor
*families* (memory leaks, single-poll Vcore droops growing in frequency, PSU
temperature oscillation, fan bearing wear with the other fans compensating, plus the
classic kinds) with gradual onsets 3–20 min ahead; benign *look-alikes* (rack-wide
cooling blips, a fan that slows and recovers, jobs that fill RAM and end, isolated
Vcore droops, PSU warm-ups, IO stalls) as frequent as the precursors and kept 25 min
clear of any failure; BMC readings from a rack-wide inlet (rack offset, slow drift,
daily cycle) with per-node and per-fan baselines; hardware generations whose BMCs name
sensors their own way and write FreeIPMI CSV or ``ipmitool sdr elist``; missing single
polls and minutes-long BMC outages.  A site may add declarative families and look-alikes
(``SiteParams.physics``: the sensors each moves, by how much, smoothly or intermittently),
scale the BMC noise and lose LDMS samples for minutes (randomised sites,
:mod:`hpcguard.simulators.random_sites`); :meth:`Telemetry.window` cuts one history into
the days a site trains on and the days it then streams.

Model
-----
Failures
    Each node is an alternating renewal process: up-times are Weibull with shape
    ``k = weibull_shape`` (< 1: decreasing hazard, default 0.7) and mean
    ``mtbf_hours`` (scale ``mtbf / Γ(1 + 1/k)``), each failure followed by a repair of
    ``repair_minutes`` (uniform).  The process starts ``5 × mtbf`` before ``start`` so
    the recorded window is stationary: the expected number of failures is
    ``N · T / (mtbf + mean repair)``.  A node in repair (possibly at ``start``) writes
    nothing: its samples are missing, never invented.  The reboot after a repair
    resets its cumulative counters (lustre_client, procstat, procnetdev); besides,
    ``counter_reset_rate`` per node-day a Lustre or network counter restarts from 0
    without a gap (stats cleared, interface re-created), listed in ``meta.json``.
Precursors
    A fraction ``precursor_fraction`` of the failures is preceded, from an onset
    lead uniform in ``precursor_lead_minutes`` (default 6–10 min, inside the 2–10 min
    the issue asks for), by one hardware precursor.  Its strength is front-loaded: at
    onset it steps to a fraction ``b`` (``precursor_step``, default 0.6–0.9) of its
    full strength ``a`` (``precursor_strength``, default 0.9–1.3), then ramps as
    ``a · (b + (1 − b) · x^p)`` (``x`` the fraction of the window elapsed, ``p`` from
    ``precursor_power``, default 0.5–1) towards the failure — a degrading component
    shows early, so a window ending several minutes before the failure already holds
    a signal.  Kinds: ``fan`` (fan RPM falls, CPU
    temperature rises), ``voltage`` (Vcore sags and gets noisy), ``psu`` (PSU
    temperatures rise), ``stall`` (cpu_user, Lustre IO and network bytes drop while
    the load average climbs: the job's tasks hang in uninterruptible IO, state ``D``,
    which Linux counts as load).
    A failure whose preceding up-time is shorter than the minimum lead has none.
    ``failures.csv`` names the precursor kind as ``cause`` (``no_precursor`` if none).
Benign anomalies
    ``anomaly_rate`` per node-day (default 0.5) of the same kinds, lasting
    ``anomaly_minutes`` (default 1–6 min), with a hump-shaped strength whose peak is
    drawn from ``anomaly_strength`` (default 0.2–0.7): weaker and shorter than
    precursors on average but overlapping the level a precursor steps to at
    onset (``a · b`` ≥ 0.54), so false alarms stay possible.  They
    lie outside down-times and precursor windows and end without a failure
    (``leads_to_failure = 0``).
Baseline
    Per-node offsets; ambient temperature with a daily cycle; CPU temperature
    (≈ 40–62 °C), fan speed (≈ 3000–9000 RPM), Vcore (≈ 1.0–1.2 V) and PSU temperature
    (≈ 30–45 °C) follow the lagged CPU utilisation of the running job.  Load follows
    job occupancy through the kernel's 1/5/15-min exponential averages; memory and
    disk usage vary slowly; Lustre and network bytes follow the running job's IO
    profile (input read at start, steady IO, periodic checkpoint write bursts).
Jobs
    Poisson submissions sized to a target utilisation, with a daily cycle (±40 %,
    peak mid-afternoon UTC); sizes mostly 1–4 nodes, some 8–32 (capped by ``N``);
    log-normal run times (minutes to hours); first-fit in submit order onto idle up
    nodes; a job whose node fails ends at the failure with state ``NODE_FAIL`` (its id
    is the ``job_id`` of that failure); some jobs fail by themselves (``FAILED``) or
    hit their time limit (``TIMEOUT``).  Jobs export their id as the
    LDMS ``job_id`` of their nodes.  The scheduler starts ``warmup_hours`` early so the
    cluster is busy at ``start``.
Seams for the PFS simulator (:mod:`hpcguard.simulators.pfs`)
    :attr:`Telemetry.jobs` is the job table (ids, nodes, times, IO profile;
    :meth:`Telemetry.job_dicts` gives ``simulate_pfs(jobs=...)`` its input) and
    ``io_slowdown`` (a per-second factor ``>= 1``, ones by default) divides every
    node's Lustre rates.

Example
-------
>>> tel = generate_telemetry(nodes=4, hours=0.5, seed=1)
>>> tel.lustre.shape, tel.ipmi.shape[-1] == len(IPMI_SENSORS)
((4, 1800, 2), True)
>>> c = tel.summary()["counts"]
>>> c["anomalies"] == c["precursors"] + c["benign_anomalies"]
True
>>> site = generate_telemetry(nodes=8, hours=1, seed=2, profile="intermittent", mtbf_hours=1.0)
>>> site.ipmi.shape[-1] == len(ROLES), sorted(set(site.hardware))
(True, ['dell-idrac', 'generic-freeipmi', 'lenovo-xcc'])
"""
from __future__ import annotations

import dataclasses
import heapq
import zlib
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
from scipy.signal import lfilter
from scipy.special import gamma

from hpcguard.simulators.profiles import (
    FAN_ROLES,
    GENERATIONS,
    LOOKALIKE_KINDS,
    OS_TARGETS,
    ROLE,
    ROLES,
    HardwareGeneration,
    Profile,
    SiteParams,
    profile_overrides,
)
from hpcguard.simulators.writers import (  # noqa: F401  (the files' schemas and sensors, re-exported)
    IPMI_DISCRETE,
    IPMI_SENSORS,
    LDMS_SCHEMAS,
    write_recording,
)

DEFAULT_START = 1679682800.0
MAX_NODE_SECONDS = 5e7  # ≈ 8 GB of 1 s arrays (64 nodes × 9 days)
ANOMALY_KINDS: tuple[str, ...] = ("fan", "voltage", "psu", "stall")

_S = {name: i for i, (_, name, _, _) in enumerate(IPMI_SENSORS)}
_FANS = [_S[f] for f in ("FAN1A", "FAN1B", "FAN2A", "FAN2B")]
_QUANTUM = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.01, 0.06, 60.0, 60.0, 60.0, 60.0])

_SIZES = np.array([1, 2, 4, 8, 16, 32])
_SIZE_P = np.array([0.42, 0.2, 0.2, 0.1, 0.05, 0.03])


@dataclass
class TelemetryParams:
    """Model parameters (defaults give ~4–8 failures for 32 nodes × 2 h).

    Attributes
    ----------
    start : epoch seconds of the first sample (fixed default for reproducible files).
    mtbf_hours : mean up-time between failures of one node.
    weibull_shape : Weibull shape ``k`` of the up-times (< 1: infant-mortality hazard).
    repair_minutes : (low, high) uniform repair time after a failure.
    precursor_fraction : fraction of failures preceded by a hardware precursor.
    precursor_lead_minutes : (low, high) uniform precursor onset before the failure
        (the issue's 2–10 min; default 6–10 so windows ending 4–7 min before a
        failure usually hold a signal).
    precursor_strength : (low, high) uniform full strength ``a`` of a precursor
        (1 = fans −55 %, CPU +20 °C, Vcore −0.14 V, PSU +14 °C; a stall cuts cpu_user
        by 85 % and adds two hung tasks per core to the load).
    precursor_step : (low, high) uniform fraction ``b`` of ``a`` reached as a step at
        onset (0 = a pure ramp from zero).
    precursor_power : (low, high) uniform power ``p`` of the ramp after the step
        (< 1: front-loaded, > 1: late).
    anomaly_rate : benign anomalies per node-day.
    anomaly_minutes : (low, high) uniform duration of a benign anomaly.
    anomaly_strength : (low, high) uniform peak strength of a benign anomaly.
    kind_weights : relative frequency of the anomaly kinds ``fan, voltage, psu, stall``.
    utilization : target fraction of node-time occupied by jobs (sets the submit rate).
    runtime_median_minutes, runtime_sigma : log-normal job run times.
    warmup_hours : the scheduler and the failure process run this long before ``start``.
    cores_per_node : cores (load ≈ cores × utilisation; jiffies at 100 Hz per core).
    na_rate : probability that one BMC reading is ``N/A``.
    counter_reset_rate : counter resets per node-day without a reboot (Lustre stats
        cleared or the network interface re-created), on top of the reset at every reboot.
    first_job_id : id of the first generated job.
    site : ``None`` for the classic simulator, else the site effects of a profile
        (:class:`~hpcguard.simulators.profiles.SiteParams`: precursor families,
        look-alikes, hardware generations, missing polls, BMC outages).
    io_slowdown : optional per-second factor ``>= 1`` (length ``ceil(hours·3600)``
        rounded up to 15 s) dividing every node's Lustre rates (PFS degradation hook).
    hot_spares : the last this many nodes are held out of the batch scheduler (a Slurm
        reservation for migrations); listed in ``meta.json`` as ``hot_spares``.
    spare_failure_minutes : if set, the last hot spare also fails this many minutes after
        ``start``, after a ``psu`` precursor (lead, strength and repair drawn as for the others):
        a warning on an idle node, whose answer is a drain (the demo's scenario).  Drawn from a
        generator of its own, and a ``psu`` precursor draws no noise, so every other node's
        samples, jobs and failures are those of the same seed without it.
    """

    start: float = DEFAULT_START
    mtbf_hours: float = 10.0
    weibull_shape: float = 0.7
    repair_minutes: tuple[float, float] = (10.0, 40.0)
    precursor_fraction: float = 0.85
    precursor_lead_minutes: tuple[float, float] = (6.0, 10.0)
    precursor_strength: tuple[float, float] = (0.9, 1.3)
    precursor_step: tuple[float, float] = (0.6, 0.9)
    precursor_power: tuple[float, float] = (0.5, 1.0)
    anomaly_rate: float = 0.5
    anomaly_minutes: tuple[float, float] = (1.0, 6.0)
    anomaly_strength: tuple[float, float] = (0.2, 0.7)
    kind_weights: tuple[float, float, float, float] = (0.35, 0.2, 0.2, 0.25)
    utilization: float = 0.9
    runtime_median_minutes: float = 15.0
    runtime_sigma: float = 1.2
    warmup_hours: float = 4.0
    cores_per_node: int = 48
    na_rate: float = 5e-4
    counter_reset_rate: float = 1.0
    first_job_id: int = 4001
    site: Optional[SiteParams] = None
    io_slowdown: Optional[np.ndarray] = field(default=None, repr=False)
    hot_spares: int = 0
    spare_failure_minutes: Optional[float] = None

    def validate(self, nodes: int, hours: float) -> None:
        """Raise ``ValueError`` with a clear message for impossible settings."""
        checks = [
            (nodes >= 1, f"nodes must be >= 1 (got {nodes})"),
            (hours > 0, f"hours must be > 0 (got {hours})"),
            (nodes * hours * 3600.0 <= MAX_NODE_SECONDS,
             f"{nodes} nodes × {hours} h is {nodes * hours * 3600.0:.3g} node-seconds; the generator holds "
             f"~160 bytes per node-second in memory, so at most {MAX_NODE_SECONDS:.0e} per run "
             "(use fewer nodes or hours)"),
            (self.mtbf_hours > 0, f"mtbf_hours must be > 0 (got {self.mtbf_hours})"),
            (self.weibull_shape > 0, f"weibull_shape must be > 0 (got {self.weibull_shape})"),
            (0 <= self.precursor_fraction <= 1, f"precursor_fraction must be in [0, 1] (got {self.precursor_fraction})"),
            (self.anomaly_rate >= 0, f"anomaly_rate must be >= 0 (got {self.anomaly_rate})"),
            (0 < self.utilization <= 1, f"utilization must be in (0, 1] (got {self.utilization})"),
            (0 <= self.hot_spares < nodes, f"hot_spares must be in [0, nodes) (got {self.hot_spares})"),
            (self.spare_failure_minutes is None or (self.hot_spares >= 1
                                                    and 0 < self.spare_failure_minutes < hours * 60.0),
             f"spare_failure_minutes needs hot_spares >= 1 and a time inside the {hours * 60.0:g} recorded minutes "
             f"(got {self.spare_failure_minutes}, hot_spares {self.hot_spares})"),
            (0 < self.precursor_lead_minutes[0] <= self.precursor_lead_minutes[1],
             f"precursor_lead_minutes must be 0 < low <= high (got {self.precursor_lead_minutes})"),
            (0 < self.precursor_strength[0] <= self.precursor_strength[1] <= 1.5,
             f"precursor_strength must be 0 < low <= high <= 1.5 (got {self.precursor_strength})"),
            (0 <= self.precursor_step[0] <= self.precursor_step[1] <= 1,
             f"precursor_step must be 0 <= low <= high <= 1 (got {self.precursor_step})"),
            (0 < self.precursor_power[0] <= self.precursor_power[1],
             f"precursor_power must be 0 < low <= high (got {self.precursor_power})"),
            (0 < self.anomaly_strength[0] <= self.anomaly_strength[1] <= 1.5,
             f"anomaly_strength must be 0 < low <= high <= 1.5 (got {self.anomaly_strength})"),
            (0 < self.anomaly_minutes[0] <= self.anomaly_minutes[1],
             f"anomaly_minutes must be 0 < low <= high (got {self.anomaly_minutes})"),
            (0 < self.repair_minutes[0] <= self.repair_minutes[1],
             f"repair_minutes must be 0 < low <= high (got {self.repair_minutes})"),
            (len(self.kind_weights) == len(ANOMALY_KINDS) and min(self.kind_weights) >= 0
             and sum(self.kind_weights) > 0,
             f"kind_weights must be {len(ANOMALY_KINDS)} non-negative weights for {ANOMALY_KINDS}"),
            (0 <= self.na_rate < 1, f"na_rate must be in [0, 1) (got {self.na_rate})"),
            (self.counter_reset_rate >= 0, f"counter_reset_rate must be >= 0 (got {self.counter_reset_rate})"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        if self.site is not None:
            if self.anomaly_rate > 0:
                raise ValueError("anomaly_rate (classic benign humps) applies to the classic profile only; "
                                 "site profiles place benign look-alikes (SiteParams.lookalike_ratio)")
            self.site.validate()

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["io_slowdown"] = None if self.io_slowdown is None else "custom"
        return d


@dataclass
class Telemetry:
    """Everything :func:`generate_telemetry` produced.

    Arrays are node-major: ``(N, T1)`` on the 1 s grid, ``(N, T15)`` on the 15 s grid.
    ``up1``/``up15`` say whether a node is up (and reports) at each sample.  Times in
    ``jobs``, ``failures`` and ``anomalies`` are seconds from ``start``; ``failures`` and
    ``anomalies`` name nodes by index into ``nodes``.
    """

    start: float
    nodes: list[str]
    up1: np.ndarray            # (N, T1) bool
    up15: np.ndarray           # (N, T15) bool
    job1: np.ndarray           # (N, T1) LDMS job_id (0 = none)
    job15: np.ndarray          # (N, T15)
    usec1: np.ndarray          # (N, T1) microsecond offset of each lustre_client row
    usec15: np.ndarray         # (N, T15) microsecond offset of each 15 s LDMS row
    lustre: np.ndarray         # (N, T1, 2) cumulative read/write bytes
    ldms15: dict[str, np.ndarray]  # schema -> (N, T15, M)
    ipmi: np.ndarray           # (N, T15, S) readings, NaN = N/A
    ipmi_ms: np.ndarray        # (N, T15) poll time offset in ms
    jobs: dict[str, np.ndarray]
    failures: list[dict]
    anomalies: list[dict]
    params: TelemetryParams
    seed: int
    down_at_start: list[str] = field(default_factory=list)
    counter_resets: list[dict] = field(default_factory=list)  # resets without a reboot
    profile: str = "classic"
    hardware: list[str] = field(default_factory=list)  # generation per node ("classic": IPMI_SENSORS)
    racks: list[int] = field(default_factory=list)
    ipmi_up: Optional[np.ndarray] = None    # (N, T15) polls that arrive (None: up15)
    ldms_up15: Optional[np.ndarray] = None  # (N, T15) 15 s LDMS rows that arrive (None: up15)
    bmc_outages: list[dict] = field(default_factory=list)
    node_events: list[dict] = field(default_factory=list)  # Slurm's node events (sacctmgr show event)
    ldms_outages: list[dict] = field(default_factory=list)  # LDMS sampler outages (SiteParams.ldms_outage_rate)

    @property
    def ipmi_mask(self) -> np.ndarray:
        return self.up15 if self.ipmi_up is None else self.ipmi_up

    @property
    def ldms_mask(self) -> np.ndarray:
        return self.up15 if self.ldms_up15 is None else self.ldms_up15

    def ipmi_columns(self, n: int) -> list[int]:
        """Columns of ``ipmi`` that node ``n``'s BMC reports (its generation's sensors)."""
        gen = self.hardware[n] if self.hardware else "classic"
        return list(range(len(IPMI_SENSORS))) if gen == "classic" else GENERATIONS[gen].roles

    @property
    def end(self) -> float:
        return self.start + self.up1.shape[1]

    def n_values(self) -> int:
        """Sensor/metric values generated for up samples (the throughput unit)."""
        n = int(self.up1.sum()) * self.lustre.shape[-1]
        n += int(self.ldms_mask.sum()) * sum(a.shape[-1] for a in self.ldms15.values())
        polls = self.ipmi_mask.sum(axis=1)
        return n + int(sum(int(polls[i]) * len(self.ipmi_columns(i)) for i in range(len(self.nodes))))

    def job_dicts(self) -> list[dict]:
        """Started jobs as dicts with epoch times (input of ``simulate_pfs(jobs=...)``).

        Keys: ``job_id, user, name, num_nodes, nodes`` (list of names), ``submit, start,
        end`` (epoch; ``end`` NaN while running at the window end), ``runtime_s``
        (nominal), ``state`` and the IO profile ``read_rate, write_rate`` (bytes/s per
        node), ``ckpt_period_s, ckpt_burst_s, comm_rate, cpu_intensity, mem_frac``.
        """
        j = self.jobs
        keys = ("user", "name", "state", "runtime_s", "read_rate", "write_rate", "ckpt_period_s", "ckpt_burst_s",
                "comm_rate", "cpu_intensity", "mem_frac")
        out = []
        for i in np.flatnonzero(np.isfinite(j["start"]) & j["visible"]):
            d = {"job_id": int(j["job_id"][i]), "num_nodes": int(j["num_nodes"][i]),
                 "nodes": [self.nodes[n] for n in j["node_index"][i]],
                 "submit": self.start + float(j["submit"][i]), "start": self.start + float(j["start"][i]),
                 "end": self.start + float(j["end"][i]) if j["state"][i] != "RUNNING" else float("nan")}
            d.update({k: _py(j[k][i]) for k in keys})
            out.append(d)
        return out

    def window(self, start_s: float, end_s: float) -> "Telemetry":
        """The part ``[start_s, end_s)`` (seconds from ``start``, multiples of 15) as a recording of
        its own, as a site would have recorded it then: times from the part's start, jobs as ``sacct``
        saw them at its end (running ones ``RUNNING``, later ones not yet started or submitted),
        failures and ground truth of the part, counters continuing.  A history's first days and its
        next days, one cluster (``evaluate sites`` trains on the one and tests on the other).

        >>> tel = generate_telemetry(nodes=4, hours=2, seed=3, mtbf_hours=1.0)
        >>> a, b = tel.window(0, 3600), tel.window(3600, 7200)
        >>> len(a.failures) + len(b.failures) == len(tel.failures), b.start - tel.start, a.ipmi.shape[1]
        (True, 3600.0, 240)
        """
        T1 = self.up1.shape[1]
        if not (0 <= start_s < end_s <= T1 and start_s % 15 == 0 and end_s % 15 == 0):
            raise ValueError(f"a window is 0 <= start < end <= {T1} s in multiples of 15 s (got {start_s}, {end_s})")
        a1, b1, a15, b15 = int(start_s), int(end_s), int(start_s) // 15, int(end_s) // 15
        length = float(b1 - a1)

        def cut(x):
            return None if x is None else x[:, a1:b1] if x.shape[1] == T1 else x[:, a15:b15]

        def shifted(rows, keys, keep):
            return [{**r, **{k: r[k] - start_s for k in keys if r.get(k) is not None}} for r in rows if keep(r)]

        j = dict(self.jobs)
        submit, start, end = (np.asarray(j[k], float) - start_s for k in ("submit", "start", "end"))
        later = np.isfinite(start) & (start >= length)          # not yet started at the part's end
        start = np.where(later, np.nan, start)
        end = np.where(later, np.nan, end)
        state = np.asarray(j["state"]).astype(object)
        state[later] = "PENDING"
        state[np.isfinite(end) & (end >= length)] = "RUNNING"
        j.update({"submit": submit, "start": start, "end": end, "state": state.astype(str),
                  "visible": ~(np.isfinite(end) & (end < 0.0)) & (submit < length)})
        failures = shifted(self.failures, ("time", "onset_time"), lambda f: start_s <= f["time"] < end_s)
        anomalies = shifted(self.anomalies, ("start", "end"), lambda x: x["end"] > start_s and x["start"] < end_s)
        events = [{**e, "start": e["start"] - start_s,
                   "end": None if e["end"] is None or e["end"] >= end_s else e["end"] - start_s}
                  for e in self.node_events if e["start"] < end_s and (e["end"] is None or e["end"] > start_s)]
        return dataclasses.replace(
            self, start=self.start + start_s, up1=cut(self.up1), up15=cut(self.up15), job1=cut(self.job1),
            job15=cut(self.job15), usec1=cut(self.usec1), usec15=cut(self.usec15), lustre=cut(self.lustre),
            ldms15={k: cut(v) for k, v in self.ldms15.items()}, ipmi=cut(self.ipmi), ipmi_ms=cut(self.ipmi_ms),
            jobs=j, failures=failures, anomalies=anomalies, ipmi_up=cut(self.ipmi_up), ldms_up15=cut(self.ldms_up15),
            down_at_start=[self.nodes[n] for n in np.flatnonzero(~self.up1[:, a1])],
            counter_resets=shifted(self.counter_resets, ("time",), lambda r: start_s <= r["time"] < end_s),
            bmc_outages=[{**o, "start": max(o["start"], start_s) - start_s, "end": min(o["end"], end_s) - start_s}
                         for o in self.bmc_outages if o["end"] > start_s and o["start"] < end_s],
            ldms_outages=[{**o, "start": max(o["start"], start_s) - start_s, "end": min(o["end"], end_s) - start_s}
                          for o in self.ldms_outages if o["end"] > start_s and o["start"] < end_s],
            node_events=events)

    def summary(self) -> dict:
        kinds = [a["kind"] for a in self.anomalies]
        jobs_in_window = int(np.sum(self.jobs["visible"]))
        families = [f["family"] for f in self.failures]
        gens = sorted(set(self.hardware))
        return {
            "nodes": self.nodes, "start": self.start, "end": self.end, "seed": self.seed,
            "profile": self.profile,
            "hardware": dict(zip(self.nodes, self.hardware)),
            "generations": {g: _generation_info(g) for g in gens},
            "racks": dict(zip(self.nodes, self.racks)),
            **({"hot_spares": self.nodes[len(self.nodes) - self.params.hot_spares:]} if self.params.hot_spares else {}),
            "bmc_outages": [{**o, "start": self.start + o["start"], "end": self.start + o["end"],
                             "node": self.nodes[o["node"]]} for o in self.bmc_outages],
            **({"ldms_outages": [{**o, "start": self.start + o["start"], "end": self.start + o["end"],
                                  "node": self.nodes[o["node"]]} for o in self.ldms_outages]}
               if self.ldms_outages else {}),
            "parameters": self.params.as_dict(),
            "down_at_start": self.down_at_start,
            "counter_resets": [{**r, "time": self.start + r["time"], "node": self.nodes[r["node"]]}
                               for r in self.counter_resets],
            "counts": {
                "failures": len(self.failures),
                "failures_with_job": sum(1 for f in self.failures if f["job_id"]),
                "anomalies": len(self.anomalies),
                "precursors": sum(a["leads_to_failure"] for a in self.anomalies),
                "benign_anomalies": sum(1 - a["leads_to_failure"] for a in self.anomalies),
                "anomaly_kinds": {k: kinds.count(k) for k in dict.fromkeys([*ANOMALY_KINDS, *kinds])},
                "failure_families": {k: families.count(k) for k in sorted(set(families))},
                "jobs": jobs_in_window,
                "jobs_node_fail": int(np.sum(self.jobs["visible"] & (self.jobs["state"] == "NODE_FAIL"))),
                "samples": {"lustre_client": int(self.up1.sum()),
                            **{s: int(self.ldms_mask.sum()) for s in self.ldms15},
                            "ipmi_polls": int(self.ipmi_mask.sum())},
                "missing_polls": {"ipmi": int((self.up15 & ~self.ipmi_mask).sum()),
                                  "ldms": int((self.up15 & ~self.ldms_mask).sum())},
                "values": self.n_values(),
            },
        }


def _py(v):
    return v.item() if hasattr(v, "item") else v


def _generation_info(name: str) -> dict:
    """meta.json description of a hardware generation: vendor, format and sensor names."""
    if name == "classic":
        return {"vendor": "generic", "format": "freeipmi-csv", "sensors": [s[1] for s in IPMI_SENSORS],
                "discrete": [s[1] for s in IPMI_DISCRETE]}
    g = GENERATIONS[name]
    return {"vendor": g.vendor, "format": g.format, "sensors": [s[1] for s in g.sensors],
            "discrete": [d[0] for d in g.discrete]}


# --------------------------------------------------------------------------- failures
def failure_schedule(rng: np.random.Generator, n_nodes: int, duration_s: float, mtbf_s: float, shape: float,
                     repair_s: tuple[float, float], burn_in_s: Optional[float] = None) -> dict[str, np.ndarray]:
    """Weibull alternating renewal process per node, started ``burn_in_s`` before 0.

    Returns arrays ``node``, ``fail``, ``repaired`` (seconds from the window start) of
    every cycle whose failure happens before ``duration_s``, sorted by failure time.

    >>> s = failure_schedule(np.random.default_rng(0), 100, 3600.0 * 100, 36000.0, 0.7, (600, 1800))
    >>> bool((s["repaired"] > s["fail"]).all())
    True
    """
    scale = mtbf_s / gamma(1.0 + 1.0 / shape)
    t = np.full(n_nodes, -(5.0 * mtbf_s if burn_in_s is None else burn_in_s))
    node, fail, rep = [], [], []
    idx = np.arange(n_nodes)
    while (t < duration_s).any():
        up = scale * rng.weibull(shape, n_nodes)
        repair = rng.uniform(repair_s[0], repair_s[1], n_nodes)
        f = t + up
        keep = (t < duration_s) & (f < duration_s)
        node.append(idx[keep]); fail.append(f[keep]); rep.append(f[keep] + repair[keep])
        t = np.where(t < duration_s, f + repair, t)
    node_a, fail_a, rep_a = (np.concatenate(x) for x in (node, fail, rep))
    order = np.argsort(fail_a, kind="stable")
    return {"node": node_a[order], "fail": fail_a[order], "repaired": rep_a[order]}


def expected_failures(n_nodes: int, duration_s: float, mtbf_s: float, repair_s: tuple[float, float]) -> float:
    """Expected failures of the stationary alternating renewal process in a window."""
    return n_nodes * duration_s / (mtbf_s + 0.5 * (repair_s[0] + repair_s[1]))


# --------------------------------------------------------------------------- jobs
def _generate_jobs(rng: np.random.Generator, n_nodes: int, t_from: float, t_to: float,
                   p: TelemetryParams) -> dict[str, np.ndarray]:
    n_nodes -= p.hot_spares  # the scheduler's nodes: the hot spares take no batch job
    sizes_p = np.where(_SIZES <= n_nodes, _SIZE_P, 0.0)
    sizes_p /= sizes_p.sum()
    mu = np.log(p.runtime_median_minutes * 60.0)
    mean_runtime = np.exp(mu + p.runtime_sigma ** 2 / 2)
    rate = p.utilization * n_nodes / (float(np.dot(_SIZES, sizes_p)) * mean_runtime)  # jobs per second
    # diurnal submissions: rate × (1 + 0.4 sin), peak mid-afternoon, by thinning a 1.4× process
    cand = np.sort(rng.uniform(t_from, t_to, rng.poisson(1.4 * rate * (t_to - t_from))))
    hour = ((p.start + cand) % 86400.0) / 3600.0
    submit = cand[rng.random(cand.size) * 1.4 < 1.0 + 0.4 * np.sin(2 * np.pi * (hour - 9.0) / 24.0)]
    m = submit.size
    size = rng.choice(_SIZES, m, p=sizes_p)
    runtime = np.clip(rng.lognormal(mu, p.runtime_sigma, m), 120.0, 24 * 3600.0)
    limit = np.ceil(runtime * rng.uniform(1.1, 3.0, m) / 900.0) * 900.0
    overrun = rng.random(m) < 0.05
    limit = np.where(overrun, np.maximum(np.floor(runtime * 0.8 / 300.0) * 300.0, 300.0), limit)
    app_fail = (~overrun) & (rng.random(m) < 0.04)
    runtime = np.where(app_fail, runtime * rng.uniform(0.05, 1.0, m), runtime)
    apps = np.array(["lmp", "gmx", "cp2k", "wrf", "nek5000", "python", "vasp", "openfoam"])
    return {
        "job_id": p.first_job_id + np.arange(m),
        "user": np.array([f"user{u:03d}" for u in rng.integers(1, 40, m)]),
        "name": apps[rng.integers(0, apps.size, m)],
        "num_nodes": size.astype(int), "submit": submit, "runtime_s": runtime, "timelimit_s": limit,
        "app_fail": app_fail,
        # IO profile (per node): bytes/s read and write, checkpoint period and burst length
        "read_rate": rng.lognormal(np.log(15e6), 1.2, m),
        "write_rate": rng.lognormal(np.log(20e6), 1.2, m),
        "ckpt_period_s": rng.uniform(300.0, 1800.0, m),
        "ckpt_burst_s": rng.uniform(10.0, 60.0, m),
        "comm_rate": np.where(size > 1, rng.lognormal(np.log(30e6), 0.8, m), 0.0),
        "cpu_intensity": rng.uniform(0.55, 1.0, m),
        "mem_frac": rng.uniform(0.08, 0.75, m),
    }


def _schedule_jobs(jobs: dict[str, np.ndarray], sched: dict[str, np.ndarray], n_nodes: int,
                   t_end: float, hot_spares: int = 0) -> tuple[dict[str, np.ndarray], dict[int, int]]:
    """First-fit FCFS event simulation; returns the job table and ``failure index -> job row``.
    The last ``hot_spares`` nodes never take a job."""
    m = jobs["submit"].size
    start = np.full(m, np.nan)
    end = np.full(m, np.nan)
    state = np.full(m, "PENDING", dtype=object)
    nodes_of: list[list[int]] = [[] for _ in range(m)]
    fail_job: dict[int, int] = {}
    node_fail_times = [sched["fail"][sched["node"] == n] for n in range(n_nodes)]
    up = np.ones(n_nodes, bool)
    running = np.full(n_nodes, -1)
    events: list[tuple] = []  # (time, priority, seq, kind, payload); fail < end < repair < submit
    seq = 0
    for i, (n, f, r) in enumerate(zip(sched["node"], sched["fail"], sched["repaired"])):
        events += [(f, 0, seq, "fail", i), (r, 2, seq + 1, "repair", int(n))]
        seq += 2
    for j in range(m):
        events.append((jobs["submit"][j], 3, seq, "submit", j))
        seq += 1
    heapq.heapify(events)
    queue: list[int] = []
    while events:
        t, _, _, kind, x = heapq.heappop(events)
        if t >= t_end:
            break
        if kind == "fail":
            n = int(sched["node"][x])
            up[n] = False
            if running[n] >= 0:
                fail_job[x] = int(running[n])
        elif kind == "repair":
            up[x] = True
        elif kind == "end":
            running[running == x] = -1
        else:
            queue.append(x)
        # first-fit in submit order
        free = up & (running < 0)
        free[n_nodes - hot_spares:] = False
        for q in list(queue):
            k = int(jobs["num_nodes"][q])
            if free.sum() >= k:
                pick = np.flatnonzero(free)[:k]
                free[pick] = False
                running[pick] = q
                queue.remove(q)
                stop = t + min(jobs["runtime_s"][q], jobs["timelimit_s"][q])
                st = ("TIMEOUT" if jobs["runtime_s"][q] > jobs["timelimit_s"][q]
                      else "FAILED" if jobs["app_fail"][q] else "COMPLETED")
                for n in pick:
                    ft = node_fail_times[n]
                    nxt = ft[np.searchsorted(ft, t, side="right")] if ft.size and ft[-1] > t else np.inf
                    if nxt <= stop:
                        stop, st = nxt, "NODE_FAIL"
                start[q], end[q], state[q], nodes_of[q] = t, stop, st, [int(n) for n in pick]
                heapq.heappush(events, (stop, 1, seq, "end", q))
                seq += 1
    running_at_end = np.isfinite(end) & (end >= t_end)
    state[running_at_end] = "RUNNING"
    out = dict(jobs)
    node_index = np.empty(m, dtype=object)  # row -> int array of node indices
    for q, picked in enumerate(nodes_of):
        node_index[q] = np.array(picked, int)
    out.update({"start": start, "end": end, "state": state.astype(str), "node_index": node_index})
    out["visible"] = ~(np.isfinite(end) & (end < 0.0))  # ended before the window: not in sacct
    return out, fail_job


# --------------------------------------------------------------------------- anomalies
class SpareBusy(ValueError):
    """The hot spare already fails, or is down, around the time ``spare_failure_minutes`` asks for."""


def _spare_failure(seed: int, profile: str, sched: dict[str, np.ndarray], n_nodes: int, duration_s: float,
                   p: TelemetryParams) -> tuple[dict[str, np.ndarray], dict, dict]:
    """The last hot spare's scheduled failure (``p.spare_failure_minutes``): ``(schedule with it, its psu
    precursor, its Slurm DOWN event)``, drawn from a generator of its own (seed, profile).

    >>> s = {"node": np.array([0]), "fail": np.array([600.0]), "repaired": np.array([1800.0])}
    >>> p = TelemetryParams(hot_spares=1, spare_failure_minutes=40.0)
    >>> both, pre, event = _spare_failure(7, "classic", s, 4, 7200.0, p)
    >>> both["node"].tolist(), pre["node"], pre["kind"], event["state"], pre["end"] == 2400.0
    ([0, 3], 3, 'psu', 'DOWN*', True)
    """
    rng = np.random.default_rng([seed, zlib.crc32(b"spare-failure"), zlib.crc32(profile.encode())])
    node, f = n_nodes - 1, 60.0 * float(p.spare_failure_minutes)
    lead = rng.uniform(*(x * 60.0 for x in p.precursor_lead_minutes))
    repaired = f + rng.uniform(p.repair_minutes[0] * 60.0, p.repair_minutes[1] * 60.0)
    own = sched["node"] == node
    if np.any(own & (sched["fail"] < repaired + 300.0) & (sched["repaired"] > f - lead - 300.0)):
        raise SpareBusy(f"spare_failure_minutes {p.spare_failure_minutes}: the spare already fails or is down then "
                        "on this seed (pick another time)")
    strength, step, power = (rng.uniform(*r) for r in (p.precursor_strength, p.precursor_step, p.precursor_power))
    precursor = {"start": f - lead, "end": f, "node": node, "kind": "psu", "family": "psu", "leads_to_failure": 1,
                 "strength": strength, "step": step, "power": power}
    event = _down_event(node, f + rng.uniform(*SLURM_DETECT_S), repaired, duration_s)
    order = np.argsort(np.append(sched["fail"], f), kind="stable")
    both = {k: np.append(sched[k], v)[order] for k, v in (("node", node), ("fail", f), ("repaired", repaired))}
    return both, precursor, event


def _place_anomalies(rng: np.random.Generator, sched: dict[str, np.ndarray],
                     n_nodes: int, duration_s: float, p: TelemetryParams) -> list[dict]:
    anomalies: list[dict] = []
    lo, hi = (x * 60.0 for x in p.precursor_lead_minutes)
    weights = np.asarray(p.kind_weights, float) / np.sum(p.kind_weights)
    for i in np.flatnonzero((sched["fail"] >= 0) & (sched["fail"] < duration_s)):
        n, f = int(sched["node"][i]), float(sched["fail"][i])
        earlier = sched["repaired"][(sched["node"] == n) & (sched["fail"] < f)]
        uptime = f - (earlier.max() if earlier.size else -np.inf)
        has, lead = rng.random() < p.precursor_fraction, rng.uniform(lo, hi)
        kind = ANOMALY_KINDS[rng.choice(len(ANOMALY_KINDS), p=weights)]
        strength, step, power = (rng.uniform(*r) for r in (p.precursor_strength, p.precursor_step,
                                                           p.precursor_power))
        lead = min(lead, uptime)
        if has and lead >= lo:
            anomalies.append({"start": f - lead, "end": f, "node": n, "kind": kind, "family": kind,
                              "leads_to_failure": 1, "strength": strength, "step": step, "power": power})
    busy = [[(a["start"] - 300.0, a["end"]) for a in anomalies if a["node"] == n] for n in range(n_nodes)]
    for n, f, r in zip(sched["node"], sched["fail"], sched["repaired"]):
        busy[int(n)].append((f - 60.0, r + 60.0))
    count = rng.poisson(p.anomaly_rate * n_nodes * duration_s / 86400.0)
    amin, amax = (x * 60.0 for x in p.anomaly_minutes)
    for _ in range(count):
        n = int(rng.integers(n_nodes))
        length = rng.uniform(amin, amax)
        kind = ANOMALY_KINDS[rng.choice(len(ANOMALY_KINDS), p=weights)]
        strength = rng.uniform(*p.anomaly_strength)
        for a in rng.uniform(0.0, max(duration_s - length, 1.0), 20):
            if all(a + length <= s or a >= e for s, e in busy[n]):
                anomalies.append({"start": a, "end": a + length, "node": n, "kind": kind, "family": kind,
                                  "leads_to_failure": 0, "strength": strength, "step": 0.0, "power": 1.0})
                busy[n].append((a, a + length))
                break
    anomalies.sort(key=lambda a: (a["start"], a["node"]))
    return anomalies


# lengths (minutes) of the benign look-alikes
_LOOKALIKE_MINUTES = {"cooling_blip": (2.0, 8.0), "fan_dip": (2.0, 10.0), "mem_fill": (3.0, 15.0),
                      "vcore_blip": (3.0, 15.0), "psu_warm": (3.0, 12.0), "io_stall": (1.0, 6.0)}


def _pick(rng: np.random.Generator, pairs: tuple[tuple[str, float], ...]) -> str:
    names = [k for k, _ in pairs]
    w = np.array([x for _, x in pairs], float)
    return names[int(rng.choice(len(names), p=w / w.sum()))]


def _scope(kind: str, custom: dict) -> str:
    """Where a look-alike lands: ``rack`` (cooling blips), ``job_end`` (jobs filling RAM), else ``node``."""
    if kind in custom:
        return custom[kind].scope
    return {"cooling_blip": "rack", "mem_fill": "job_end"}.get(kind, "node")


def _free(busy: list[tuple[float, float]], a: float, b: float) -> bool:
    return all(b <= s or a >= e for s, e in busy)


def _place_site_anomalies(rng: np.random.Generator, sched: dict[str, np.ndarray], n_nodes: int,
                          duration_s: float, p: TelemetryParams, jobs: dict[str, np.ndarray],
                          rack_of: np.ndarray, fans_of: np.ndarray) -> list[dict]:
    """Precursors of a site profile's families and as many benign look-alikes (node-level rows).

    Every anomaly dict holds ``start, end, node, kind, family, leads_to_failure, strength,
    step, power`` and ``fan`` (the fan a ``fan_bearing``/``fan_dip`` hits), ``delta``
    (°C of a cooling blip), ``level`` (memory share a ``mem_fill`` reaches) and
    ``period`` (seconds of a PSU oscillation).
    """
    site = p.site
    custom = site.custom   # declarative families and look-alikes (profiles.Physics), by name
    lo, hi = (x * 60.0 for x in p.precursor_lead_minutes)
    anomalies: list[dict] = []

    def extra(node: int) -> dict:
        return {"fan": int(rng.integers(0, fans_of[node])), "delta": rng.uniform(3.0, 7.0),
                "level": rng.uniform(0.88, 0.97), "period": rng.uniform(60.0, 240.0)}

    for i in np.flatnonzero((sched["fail"] >= 0) & (sched["fail"] < duration_s)):
        n, f = int(sched["node"][i]), float(sched["fail"][i])
        earlier = sched["repaired"][(sched["node"] == n) & (sched["fail"] < f)]
        uptime = f - (earlier.max() if earlier.size else -np.inf)
        has = rng.random() < p.precursor_fraction
        family = _pick(rng, site.families)
        f_lo, f_hi = (max(lo, 300.0), max(min(hi, 1200.0), max(lo, 300.0))) if family == "memory_leak" else (lo, hi)
        phys = custom.get(family)
        if phys is not None and phys.lead_minutes is not None:   # a declarative family's own onsets
            f_lo, f_hi = phys.lead_minutes[0] * 60.0, phys.lead_minutes[1] * 60.0
        # a node back from repair less than the shortest onset ago dies without warning
        lead = rng.uniform(f_lo, max(min(f_hi, uptime), f_lo))
        ranges = (p.precursor_strength, p.precursor_step, p.precursor_power) if phys is None else (
            phys.strength or p.precursor_strength, phys.step or p.precursor_step, phys.power or p.precursor_power)
        strength, step, power = (rng.uniform(*r) for r in ranges)
        if has and uptime >= f_lo:
            anomalies.append({"start": f - lead, "end": f, "node": n, "kind": family, "family": family,
                              "leads_to_failure": 1, "strength": strength, "step": step, "power": power,
                              **extra(n)})
    n_precursors_expected = (expected_failures(n_nodes, duration_s, p.mtbf_hours * 3600.0,
                                               (p.repair_minutes[0] * 60.0, p.repair_minutes[1] * 60.0))
                             * p.precursor_fraction)
    target = rng.poisson(site.lookalike_ratio * n_precursors_expected)
    # look-alikes keep 25 min clear of every failure (longer than any precursor), so a
    # window labelled benign is never one that a failure follows
    busy: list[list[tuple[float, float]]] = [[] for _ in range(n_nodes)]
    for n, f, r in zip(sched["node"], sched["fail"], sched["repaired"]):
        busy[int(n)].append((f - 1500.0, r + 60.0))
    ended = np.flatnonzero(np.isin(jobs["state"], ["COMPLETED", "FAILED", "TIMEOUT"])
                           & np.isfinite(jobs["start"]) & (jobs["end"] < duration_s))
    benign: list[dict] = []
    for _ in range(20 * max(target, 1)):  # bounded: a crowded cluster may not fit them all
        if len(benign) >= target or not site.lookalikes:
            break
        # a cooling blip writes a row per node of its rack: weight it per row, not per event
        kind = _pick(rng, tuple((k, w / (site.rack_size if _scope(k, custom) == "rack" else 1))
                                for k, w in site.lookalikes))
        phys = custom.get(kind)
        length = rng.uniform(*(_LOOKALIKE_MINUTES[kind] if phys is None else phys.minutes)) * 60.0
        strength = rng.uniform(*(p.precursor_strength if phys is None else phys.strength or p.precursor_strength))
        if _scope(kind, custom) == "job_end":  # the last minutes of a real job that then ends
            if not ended.size:
                continue
            j = int(rng.choice(ended))
            t1 = float(jobs["end"][j])
            t0 = max(t1 - length, float(jobs["start"][j]) + 60.0, 0.0)
            nodes = [int(x) for x in jobs["node_index"][j]]
        elif _scope(kind, custom) == "rack":  # the whole rack at once
            t0 = rng.uniform(0.0, max(duration_s - length, 1.0))
            t1 = t0 + length
            nodes = [int(x) for x in np.flatnonzero(rack_of == rng.integers(0, rack_of.max() + 1))]
        else:
            t0 = rng.uniform(0.0, max(duration_s - length, 1.0))
            t1 = t0 + length
            nodes = [int(rng.integers(n_nodes))]
        if t1 - t0 < (180.0 if _scope(kind, custom) == "job_end" else 60.0):  # a job too short to fill RAM visibly
            continue
        shared = extra(nodes[0])
        for n in nodes:
            if _free(busy[n], t0, t1):
                benign.append({"start": t0, "end": t1, "node": n, "kind": kind,
                               "family": LOOKALIKE_KINDS[kind] if phys is None else phys.resembles,
                               "leads_to_failure": 0, "strength": strength, "step": 0.0, "power": 1.0,
                               **shared, "fan": int(rng.integers(0, fans_of[n]))})
                busy[n].append((t0, t1))
    anomalies += benign
    anomalies.sort(key=lambda a: (a["start"], a["node"]))
    return anomalies


def _strength(a: dict, t: np.ndarray) -> np.ndarray:
    """Anomaly strength at times ``t`` (seconds from start).

    A precursor steps to ``step`` of its strength at onset, then ramps as ``x^power`` to
    the full strength at the failure; a benign anomaly is a hump ``sin(πx)^0.7``.
    """
    x = np.clip((t - a["start"]) / (a["end"] - a["start"]), 0.0, 1.0)
    inside = (t >= a["start"]) & (t < a["end"])
    if a["leads_to_failure"]:
        shape = a["step"] + (1.0 - a["step"]) * x ** a["power"]
    else:
        shape = np.sin(np.pi * x) ** 0.7
    return np.where(inside, a["strength"] * shape, 0.0)


# --------------------------------------------------------------------------- helpers
def _ewma(x: np.ndarray, alpha: float) -> np.ndarray:
    """Exponential moving average along the last axis, started at the first value."""
    zi = (1 - alpha) * x[..., :1]
    y, _ = lfilter([alpha], [1.0, -(1.0 - alpha)], x, axis=-1, zi=zi)
    return y


def _cumulative(inc: np.ndarray, reset: np.ndarray, initial: np.ndarray) -> np.ndarray:
    """Cumulative counters along axis 1 that restart from 0 where ``reset`` is set.

    ``inc`` is ``(N, T, ...)`` non-negative increments, ``reset`` ``(N, T)``,
    ``initial`` the counter value before the first sample (same trailing shape).
    """
    c = np.cumsum(inc, axis=1)
    r = reset.reshape(reset.shape + (1,) * (inc.ndim - 2))
    base = np.where(r, c - inc, 0.0)
    base = np.maximum.accumulate(base, axis=1)
    first_segment = np.cumsum(reset, axis=1).reshape(r.shape) == 0
    return c - base + np.where(first_segment, initial[:, None], 0.0)


def _up_mask(sched: dict[str, np.ndarray], n_nodes: int, times: np.ndarray) -> np.ndarray:
    up = np.ones((n_nodes, times.size), bool)
    for n, f, r in zip(sched["node"], sched["fail"], sched["repaired"]):
        if r > times[0] and f <= times[-1]:
            a, b = np.searchsorted(times, [f, r])
            up[int(n), a:b] = False
    return up


def _counter_resets(rng: np.random.Generator, up1: np.ndarray, up15: np.ndarray, rate_per_day: float,
                    reboot1: np.ndarray, reboot15: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """Reset masks of the Lustre (1 s) and network (15 s) counters: every reboot plus
    Poisson resets without a gap (Lustre stats cleared, interface re-created)."""
    N, T1 = up1.shape
    n_resets = rng.poisson(rate_per_day * N * T1 / 86400.0)
    r_node, r_sec = rng.integers(0, N, n_resets), rng.integers(15, max(T1, 16), n_resets)
    r_lustre = rng.random(n_resets) < 0.5
    lustre_reset, net_reset = reboot1.copy(), reboot15.copy()
    counter_resets = []
    for n, t, is_lustre in zip(r_node, np.minimum(r_sec, T1 - 1), r_lustre):
        k = t // 15
        if k < 1:
            continue
        if is_lustre and up1[n, t] and up1[n, t - 1]:
            lustre_reset[n, t] = True
            counter_resets.append({"time": float(t), "node": int(n), "schema": "lustre_client"})
        elif not is_lustre and up15[n, k] and up15[n, k - 1]:
            net_reset[n, k] = True
            counter_resets.append({"time": float(k * 15), "node": int(n), "schema": "procnetdev"})
    return lustre_reset, net_reset, counter_resets


def _bmc_readings(rng: np.random.Generator, util: np.ndarray, anomalies: list[dict], times: np.ndarray,
                  na_rate: float) -> np.ndarray:
    """BMC readings ``(N, T15, len(IPMI_SENSORS))`` (NaN = N/A) from CPU utilisation and anomalies.

    ``times`` are the epochs of the 15 s grid (ambient follows the time of day);
    anomaly times are seconds from ``times[0]``.
    """
    N, T15 = util.shape
    hour = (times % 86400.0) / 3600.0
    ambient = 21.0 + rng.normal(0, 1.0, (N, 1)) + 1.5 * np.sin(2 * np.pi * (hour - 9.0) / 24.0)[None, :]
    lag = _ewma(util, 1 - np.exp(-15.0 / 45.0))
    S = len(IPMI_SENSORS)
    ipmi = np.empty((N, T15, S))
    ipmi[..., _S["Inlet Temp"]] = ambient
    ipmi[..., _S["System Temp"]] = ambient + 8.0 + 6.0 * lag
    cpu_off = rng.normal(0, 2.0, (N, 2))
    ipmi[..., _S["CPU1 Temp"]] = ambient + 17.0 + cpu_off[:, :1] + 22.0 * lag
    ipmi[..., _S["CPU2 Temp"]] = ambient + 15.0 + cpu_off[:, 1:] + 22.0 * lag
    ps_off = rng.normal(0, 1.0, (N, 2))
    ipmi[..., _S["PS1 Temp"]] = ambient + 10.0 + ps_off[:, :1] + 9.0 * lag
    ipmi[..., _S["PS2 Temp"]] = ambient + 9.0 + ps_off[:, 1:] + 9.0 * lag
    ipmi[..., _S["Vcore"]] = 1.16 + rng.normal(0, 0.015, (N, 1)) - 0.09 * lag
    ipmi[..., _S["12V"]] = 12.05 + rng.normal(0, 0.05, (N, 1)) - 0.06 * lag
    fan_base = 3000.0 + 5200.0 * lag + 120.0 * (ambient - 21.0)
    fan_off = rng.normal(0, 150.0, (N, 4))
    for i, s in enumerate(_FANS):
        ipmi[..., s] = fan_base + fan_off[:, i:i + 1]
    ipmi += rng.normal(0, 1, (N, T15, S)) * np.array([0.3, 0.3, 0.6, 0.6, 0.3, 0.3, 0.004, 0.02, 60, 60, 60, 60])
    for a in anomalies:  # hardware anomalies
        if a["kind"] == "stall":
            continue
        n = a["node"]
        k0 = int(np.clip(np.floor(a["start"] / 15.0), 0, T15))
        k1 = int(np.clip(np.ceil(a["end"] / 15.0) + 1, 0, T15))
        if k1 <= k0:
            continue
        s = _strength(a, times[k0:k1] - times[0])
        if a["kind"] == "fan":
            for s_i in _FANS:
                ipmi[n, k0:k1, s_i] *= 1.0 - 0.55 * s * rng.uniform(0.85, 1.15)
            ipmi[n, k0:k1, _S["CPU1 Temp"]] += 20.0 * s
            ipmi[n, k0:k1, _S["CPU2 Temp"]] += 14.0 * s
        elif a["kind"] == "voltage":
            ipmi[n, k0:k1, _S["Vcore"]] += -0.14 * s + rng.normal(0, 0.02, k1 - k0) * s
        else:  # psu
            ipmi[n, k0:k1, _S["PS1 Temp"]] += 14.0 * s
            ipmi[n, k0:k1, _S["PS2 Temp"]] += 6.0 * s
    ipmi = np.round(ipmi / _QUANTUM) * _QUANTUM
    ipmi[rng.random((N, T15, S)) < na_rate] = np.nan
    return ipmi


def _ar1(rng: np.random.Generator, shape: tuple[int, int], sd: float, tau_steps: float) -> np.ndarray:
    """Stationary AR(1) noise along the last axis (standard deviation ``sd``, time constant ``tau_steps``)."""
    phi = np.exp(-1.0 / tau_steps)
    x = rng.normal(0, sd * np.sqrt(1 - phi ** 2), shape)
    x[:, 0] = rng.normal(0, sd, shape[0])
    return lfilter([1.0], [1.0, -phi], x, axis=-1)


def _site_bmc(rng: np.random.Generator, util: np.ndarray, anomalies: list[dict], times: np.ndarray,
              site: SiteParams, gens: list[HardwareGeneration], rack_of: np.ndarray) -> np.ndarray:
    """BMC readings ``(N, T15, len(ROLES))`` of a site profile (NaN = N/A added later).

    Inlet air = site mean + rack offset + slow rack drift + daily cycle + node offset;
    CPU, exhaust and PSU temperatures follow the inlet and the lagged job load; every
    fan has its own baseline in ``site.fan_rpm`` and speeds up with load and inlet;
    the core voltage sits at the generation's nominal value and sags under load.
    """
    N, T15 = util.shape
    R = int(rack_of.max()) + 1
    hour = (times % 86400.0) / 3600.0
    rack_inlet = rng.normal(0, site.rack_inlet_sd, (R, 1)) + _ar1(rng, (R, T15), 0.8, 240.0)
    inlet = (site.inlet_c + rack_inlet[rack_of] + rng.normal(0, 0.4, (N, 1))
             + site.diurnal_c * np.sin(2 * np.pi * (hour - 9.0) / 24.0)[None, :])
    lag = _ewma(util, 1 - np.exp(-15.0 / 60.0))
    nominal = np.array([g.vcore_nominal for g in gens])[:, None]
    out = np.empty((N, T15, len(ROLES)))
    out[..., ROLE["inlet"]] = inlet
    out[..., ROLE["exhaust"]] = inlet + rng.uniform(4.0, 8.0, (N, 1)) + 12.0 * lag
    cpu = inlet + rng.normal(16.0, 3.0, (N, 1)) + rng.uniform(20.0, 30.0, (N, 1)) * lag
    out[..., ROLE["cpu1"]] = cpu
    out[..., ROLE["cpu2"]] = cpu - rng.normal(2.0, 1.5, (N, 1))
    psu = inlet + rng.normal(10.0, 2.0, (N, 1)) + 8.0 * lag
    out[..., ROLE["psu1"]] = psu
    out[..., ROLE["psu2"]] = psu - rng.normal(1.0, 1.0, (N, 1))
    out[..., ROLE["vcore"]] = nominal * (1.0 + rng.normal(0, 0.01, (N, 1)) - 0.05 * lag)
    out[..., ROLE["v12"]] = 12.0 + rng.normal(0, 0.06, (N, 1)) - 0.08 * lag
    fan_base = rng.uniform(*site.fan_rpm, (N, len(FAN_ROLES)))
    fan_gain = (0.9 + 0.15 * lag + 0.01 * (inlet - site.inlet_c))[..., None]  # ≈ 1 at mid load
    out[..., list(FAN_ROLES)] = fan_base[:, None, :] * fan_gain
    noise_sd = np.array([0.3, 0.4, 0.6, 0.6, 0.4, 0.4, 0.0, 0.02] + [50.0] * len(FAN_ROLES))
    out += rng.normal(0, 1, out.shape) * (noise_sd * site.noise_scale)   # noise_scale 1: the same numbers
    out[..., ROLE["vcore"]] += rng.normal(0, 0.003, (N, T15)) * nominal * site.noise_scale
    custom = site.custom
    for a in anomalies:
        if a["kind"] in ("stall", "io_stall", "memory_leak", "mem_fill"):
            continue  # operating-system effects (cpu_user, IO, load, memory)
        if a["kind"] in custom:   # a declarative family or look-alike (its own random numbers)
            _physics_bmc(out, a, custom[a["kind"]], times)
            continue
        n = a["node"]
        k0 = int(np.clip(np.floor(a["start"] / 15.0), 0, T15))
        k1 = int(np.clip(np.ceil(a["end"] / 15.0) + 1, 0, T15))
        if k1 <= k0:
            continue
        t = times[k0:k1] - times[0]
        s = _strength(a, t)
        x = np.clip((t - a["start"]) / (a["end"] - a["start"]), 0.0, 1.0)
        inside = (t >= a["start"]) & (t < a["end"])
        v = out[n, k0:k1]  # view: edits land in ``out``
        hit = FAN_ROLES[a["fan"]]
        others = [f for f in FAN_ROLES if f != hit]
        kind = a["kind"]
        if kind == "fan":
            v[:, list(FAN_ROLES)] *= (1.0 - 0.5 * s)[:, None]
            v[:, ROLE["cpu1"]] += 18.0 * s
            v[:, ROLE["cpu2"]] += 13.0 * s
        elif kind == "voltage":
            v[:, ROLE["vcore"]] *= 1.0 - 0.1 * s - np.abs(rng.normal(0, 0.015, k1 - k0)) * s
        elif kind in ("psu", "psu_warm"):
            v[:, ROLE["psu1"]] += 14.0 * s
            v[:, ROLE["psu2"]] += 6.0 * s
        elif kind in ("vcore_droop", "vcore_blip"):
            # single-poll droops: their rate grows with the precursor, stays flat in a look-alike
            rate = 0.03 + 0.4 * x ** 2 if kind == "vcore_droop" else np.full(x.size, 0.08)
            droop = inside & (rng.random(x.size) < rate)
            v[:, ROLE["vcore"]] *= 1.0 - droop * rng.uniform(0.06, 0.12, x.size) * max(a["strength"], 0.6)
        elif kind == "psu_oscillation":
            wave = np.sin(2 * np.pi * (t - a["start"]) / a["period"])
            v[:, ROLE["psu1"]] += (2.0 + 6.0 * wave) * s
            v[:, ROLE["psu2"]] += (1.0 + 3.0 * wave) * s
        elif kind in ("fan_bearing", "fan_dip"):
            depth = 0.6 if kind == "fan_bearing" else 0.5
            v[:, hit] = v[:, hit] * (1.0 - depth * s) + rng.normal(0, 400.0, x.size) * s * (kind == "fan_bearing")
            v[:, others] *= (1.0 + 0.12 * s)[:, None]  # the BMC's fan control compensates
            v[:, ROLE["cpu1"]] += 4.0 * s
            v[:, ROLE["cpu2"]] += 3.0 * s
        elif kind == "cooling_blip":
            warm = a["delta"] * s / max(a["strength"], 1e-9)
            for r, k in (("inlet", 1.0), ("exhaust", 1.0), ("cpu1", 0.9), ("cpu2", 0.9), ("psu1", 0.7), ("psu2", 0.7)):
                v[:, ROLE[r]] += k * warm
            v[:, list(FAN_ROLES)] *= (1.0 + 0.05 * warm)[:, None]
    quantum = np.empty((N, 1, len(ROLES)))
    quantum[:, 0, :] = 0.01
    for i, g in enumerate(gens):
        quantum[i, 0, [ROLE[r] for r in ("inlet", "exhaust", "cpu1", "cpu2", "psu1", "psu2")]] = g.temp_quantum
        quantum[i, 0, list(FAN_ROLES)] = g.fan_quantum
    out[..., list(FAN_ROLES)] = np.maximum(out[..., list(FAN_ROLES)], 0.0)
    return np.round(out / quantum) * quantum


# --------------------------------------------------------------------------- declarative physics
_TEMPERATURE_ROLES = ("inlet", "exhaust", "cpu1", "cpu2", "psu1", "psu2")


def _physics_span(a: dict, n_steps: int) -> tuple[int, int]:
    """The 15 s steps an anomaly's effects touch (as the built-in BMC effects)."""
    k0 = int(np.clip(np.floor(a["start"] / 15.0), 0, n_steps))
    k1 = int(np.clip(np.ceil(a["end"] / 15.0) + 1, 0, n_steps))
    return k0, k1


def _physics_signals(a: dict, phys, t: np.ndarray) -> dict[str, np.ndarray]:
    """Each pattern's modulation of a declarative anomaly at times ``t`` (seconds from start; 15 s steps).

    The random parts (which polls flicker, when bursts are on, the jitter) come from a generator of
    the anomaly's own (kind, node, start), drawn over its whole span: the BMC and the operating-system
    effects of one anomaly see the same flickers and bursts, and the run's generator is not touched.
    """
    x = np.clip((t - a["start"]) / (a["end"] - a["start"]), 0.0, 1.0)
    inside = (t >= a["start"]) & (t < a["end"])
    if a["leads_to_failure"] or phys.envelope == "hump":
        env = _strength(a, t)
    else:   # plateau: up in the first 15 % of the episode, down in the last 15 %
        env = np.where(inside, a["strength"] * np.minimum(1.0, np.minimum(x, 1.0 - x) / 0.15), 0.0)
    g = np.random.default_rng([zlib.crc32(a["kind"].encode()), int(a["node"]),
                               int(round(a["start"] * 1000.0)) % (1 << 32)])
    a0 = int(np.floor(a["start"] / 15.0))
    span = int(np.ceil(a["end"] / 15.0)) + 2 - a0
    u, z = g.random(span), g.normal(0.0, 1.0, span)
    on = np.zeros(span, bool)
    i, state = 0, bool(g.random() < 0.5)
    while i < span:   # alternating on and off stretches of burst_s
        length = max(1, int(round(g.uniform(*phys.burst_s) / 15.0)))
        on[i:i + length] = state
        i, state = i + length, not state
    idx = np.clip(np.round(t / 15.0).astype(int) - a0, 0, span - 1)
    rate = phys.intermittency * (0.25 + 0.75 * x ** 2) if a["leads_to_failure"] else np.full(x.size, phys.intermittency)
    flick = inside & (u[idx] < rate)
    return {"smooth": env, "flicker": flick * np.maximum(env, 0.5 * a["strength"]), "bursts": env * on[idx],
            "oscillation": env * np.sin(2 * np.pi * (t - a["start"]) / phys.period_s), "jitter": env * z[idx]}


def _physics_bmc(out: np.ndarray, a: dict, phys, times: np.ndarray) -> None:
    """Apply a declarative anomaly's BMC effects to ``out`` ``(N, T15, ROLES)`` in place."""
    effects = [e for e in phys.effects if e.target not in OS_TARGETS]
    k0, k1 = _physics_span(a, out.shape[1])
    if not effects or k1 <= k0:
        return
    sig = _physics_signals(a, phys, times[k0:k1] - times[0])
    v = out[a["node"], k0:k1]   # view
    hit = FAN_ROLES[a.get("fan", 0) % len(FAN_ROLES)]
    for e in effects:
        cols = {"fans": list(FAN_ROLES), "fan_hit": [hit],
                "fan_rest": [f for f in FAN_ROLES if f != hit]}.get(e.target, [ROLE.get(e.target, 0)])
        m = sig[e.pattern]
        if e.target in _TEMPERATURE_ROLES:
            v[:, cols] += (e.size * m)[:, None]
        else:
            v[:, cols] *= np.maximum(1.0 + e.size * m, 0.0)[:, None]


def _physics_os(anomalies: list[dict], custom: dict, t15: np.ndarray, *, rates: np.ndarray, util: np.ndarray,
                net_factor: np.ndarray, hung: np.ndarray, busy15: np.ndarray, cores: int) -> None:
    """Apply declarative anomalies' cpu_user, io, net and load effects in place (before counters are summed)."""
    T15 = util.shape[1]
    for a in anomalies:
        phys = custom.get(a["kind"])
        effects = [] if phys is None else [e for e in phys.effects if e.target in ("cpu_user", "io", "net", "load")]
        k0, k1 = _physics_span(a, T15)
        if not effects or k1 <= k0:
            continue
        n = a["node"]
        sig = _physics_signals(a, phys, t15[k0:k1])
        for e in effects:
            m = sig[e.pattern]
            factor = np.maximum(1.0 + e.size * m, 0.0)
            if e.target == "cpu_user":
                util[n, k0:k1] = np.clip(util[n, k0:k1] * factor, 0.0, 1.0)
            elif e.target == "net":
                net_factor[n, k0:k1] *= factor
            elif e.target == "io":
                b = min(k1 * 15, rates.shape[2])
                rates[:, n, k0 * 15:b] *= np.repeat(factor, 15)[:b - k0 * 15]
            else:   # hung tasks raise the load
                hung[n, k0:k1] += e.size * cores * np.maximum(m, 0.0) * (0.2 + 0.8 * busy15[n, k0:k1])


def _physics_levels(anomalies: list[dict], custom: dict, t15: np.ndarray, target: str, level: np.ndarray
                    ) -> np.ndarray:
    """``level`` (memory or disk share, ``(N, T15)``) with declarative anomalies' ``mem``/``disk`` effects:
    memory climbs towards the effect's size, disk usage grows by it."""
    out = level.copy()
    for a in anomalies:
        phys = custom.get(a["kind"])
        effects = [] if phys is None else [e for e in phys.effects if e.target == target]
        k0, k1 = _physics_span(a, out.shape[1])
        if not effects or k1 <= k0:
            continue
        sig = _physics_signals(a, phys, t15[k0:k1])
        n = a["node"]
        for e in effects:
            m = sig[e.pattern]
            if target == "mem":
                out[n, k0:k1] += (e.size - out[n, k0:k1]) * np.clip(m, 0.0, 1.0)
            else:
                out[n, k0:k1] += e.size * m
    return out


def _draw_outages(rng: np.random.Generator, up: np.ndarray, rate_per_node_day: float,
                  minutes: tuple[float, float]) -> list[dict]:
    """Outages of a collector (``rate_per_node_day``, lengths uniform in ``minutes``): clears ``up``."""
    N, T15 = up.shape
    outages = []
    for _ in range(rng.poisson(rate_per_node_day * N * T15 * 15.0 / 86400.0)):
        n = int(rng.integers(N))
        length = rng.uniform(*minutes) * 60.0
        t0 = rng.uniform(0.0, T15 * 15.0)
        k0, k1 = int(t0 // 15.0), int(min(np.ceil((t0 + length) / 15.0), T15))
        up[n, k0:k1] = False
        outages.append({"node": n, "start": k0 * 15.0, "end": k1 * 15.0})
    return outages


def _ldms_outages(rng: np.random.Generator, ldms_up: np.ndarray, site: SiteParams) -> list[dict]:
    """LDMS sampler outages (``ldms_outage_rate`` per node-day): no 15 s OS row for minutes; edits ``ldms_up``."""
    return _draw_outages(rng, ldms_up, site.ldms_outage_rate, site.ldms_outage_minutes)


def _site_memory(mem_used: np.ndarray, anomalies: list[dict], t15: np.ndarray) -> np.ndarray:
    """Memory share with leaks (climbing to ~100 % at the failure) and jobs filling RAM before they end."""
    mem = mem_used.copy()
    for a in anomalies:
        if a["kind"] not in ("memory_leak", "mem_fill"):
            continue
        n = a["node"]
        k0, k1 = int(max(np.floor(a["start"] / 15.0), 0)), int(min(np.ceil(a["end"] / 15.0), t15.size))
        if k1 <= k0:
            continue
        x = np.clip((t15[k0:k1] - a["start"]) / (a["end"] - a["start"]), 0.0, 1.0)
        if a["kind"] == "memory_leak":  # full by 90 % of the window: the node thrashes, then dies
            shape, top = a["step"] + (1.0 - a["step"]) * np.minimum(x / 0.9, 1.0) ** a["power"], 0.998
        else:
            shape, top = np.minimum(x / 0.85, 1.0), a["level"]  # the job holds its peak, then ends
        mem[n, k0:k1] += (top - mem[n, k0:k1]) * np.clip(shape, 0.0, 1.0)
    return np.clip(mem, 0.0, 0.999)


def _poll_masks(rng: np.random.Generator, up15: np.ndarray, site: SiteParams
                ) -> tuple[np.ndarray, np.ndarray, list[dict]]:
    """(IPMI polls that arrive, 15 s LDMS rows that arrive, BMC outages) of a site profile."""
    N, T15 = up15.shape
    ipmi_up = up15 & (rng.random((N, T15)) >= site.missing_poll_rate)
    ldms_up = up15 & (rng.random((N, T15)) >= site.missing_poll_rate)
    return ipmi_up, ldms_up, _draw_outages(rng, ipmi_up, site.bmc_outage_rate, site.bmc_outage_minutes)


# --------------------------------------------------------------------------- Slurm node events
SLURM_DETECT_S = (20.0, 120.0)     # failure → slurmctld marks the node DOWN (missed pings)
BENIGN_EVENTS_PER_NODE_DAY = 0.3   # drains that are no failure
BENIGN_EVENTS = (("DRAIN", "kernel upgrade", "root(0)"), ("DRAIN", "Reboot ASAP", "root(0)"),
                 ("DRAIN", "Kill task failed", "slurm(64030)"), ("DRAIN", "firmware update", "root(0)"))


def _down_event(node: int, start: float, repaired: float, duration_s: float) -> dict:
    """Slurm's ``DOWN*`` event of a failed node, noticed at ``start``, ended when it is repaired (``None``: still
    down at the window's end)."""
    return {"node": node, "start": start, "end": repaired if repaired < duration_s else None, "state": "DOWN*",
            "reason": "Not responding", "user": "slurm(64030)", "failure": True}


def slurm_node_events(seed: int, profile: str, sched: dict[str, np.ndarray], n_nodes: int,
                      duration_s: float) -> list[dict]:
    """The node events slurmdbd records (``sacctmgr show event``) for a failure schedule.

    Each failure whose outage reaches into the window is a ``DOWN*`` event, reason
    ``Not responding``, set by slurmctld ``SLURM_DETECT_S`` (uniform) after the failure and
    ended when the node is repaired (``None``: still down at the window's end); a failure
    Slurm notices only after the window is not listed.  Besides, benign drains (an
    upgrade, ``Reboot ASAP``, ``Kill task failed``; ``BENIGN_EVENTS_PER_NODE_DAY``) that
    are no failure.  Times are seconds from the window start, nodes indices.  Drawn from a
    generator of their own (seed, profile): the other outputs stay as they were.

    >>> s = {"node": np.array([0, 1]), "fail": np.array([-900.0, 100.0]), "repaired": np.array([-10.0, 1500.0])}
    >>> [(e["node"], e["state"], e["end"]) for e in slurm_node_events(0, "classic", s, 2, 3600.0) if e["failure"]]
    [(1, 'DOWN*', 1500.0)]
    """
    rng = np.random.default_rng([seed, zlib.crc32(b"slurm-node-events"), zlib.crc32(profile.encode())])
    events = []
    for n, f, r in zip(sched["node"], sched["fail"], sched["repaired"]):
        t = float(f) + rng.uniform(*SLURM_DETECT_S)
        if r <= 0.0 or t >= duration_s:
            continue
        events.append(_down_event(int(n), t, float(r), duration_s))
    for _ in range(rng.poisson(BENIGN_EVENTS_PER_NODE_DAY * n_nodes * duration_s / 86400.0)):
        state, reason, user = BENIGN_EVENTS[int(rng.integers(len(BENIGN_EVENTS)))]
        t0 = rng.uniform(0.0, duration_s)
        t1 = t0 + rng.uniform(600.0, 7200.0)
        events.append({"node": int(rng.integers(n_nodes)), "start": t0, "end": t1 if t1 < duration_s else None,
                       "state": state, "reason": reason, "user": user, "failure": False})
    events.sort(key=lambda e: (e["start"], e["node"]))
    return events


# --------------------------------------------------------------------------- main entry
def generate_telemetry(nodes: int = 32, hours: float = 2.0, seed: int = 0,
                       params: Optional[TelemetryParams] = None, profile: str | Profile = "classic",
                       **overrides) -> Telemetry:
    """Generate a cluster's telemetry and ground truth (no file I/O).

    Parameters
    ----------
    nodes, hours, seed
        Cluster size, recorded duration (rounded up to 15 s) and the seed of the
        ``numpy.random.Generator``; the same arguments give identical output.
    params, profile, overrides
        A :class:`TelemetryParams` (default: the defaults), then the overrides of the
        site profile ``profile`` (:mod:`hpcguard.simulators.profiles`), then fields as
        keyword arguments.  ``profile`` may also be a
        :class:`~hpcguard.simulators.profiles.Profile` not in the table (a randomised site,
        :mod:`hpcguard.simulators.random_sites`): its overrides and its name are used alike.

    >>> tel = generate_telemetry(nodes=4, hours=0.5, seed=1, profile="mixed")
    >>> sorted(set(tel.hardware))
    ['dell-idrac', 'supermicro-x11']
    """
    if isinstance(profile, Profile):   # a profile object (a randomised site): its overrides, then its name
        profile_params, profile = dict(profile.overrides), profile.name
    else:
        profile_params = profile_overrides(profile)
    p = dataclasses.replace(params or TelemetryParams(), **{**profile_params, **overrides})
    p.validate(nodes, hours)
    # a site profile mixes its name into the seed: one seed on two profiles gives two
    # different clusters (no failure at the same moment in a train and a test set)
    rng = np.random.default_rng(seed if profile == "classic" else [seed, zlib.crc32(profile.encode())])
    T15 = int(np.ceil(hours * 3600.0 / 15.0))
    T1 = 15 * T15
    dur = float(T1)
    N = nodes
    slow = np.ones(T1) if p.io_slowdown is None else np.asarray(p.io_slowdown, float)
    if slow.shape != (T1,) or not np.all(slow > 0):
        raise ValueError(f"io_slowdown must be {T1} positive per-second factors (got shape {slow.shape})")
    names = [f"n{i:0{max(3, len(str(N)))}d}" for i in range(1, N + 1)]
    site = p.site
    if site is None:
        hardware, rack_of = ["classic"] * N, np.zeros(N, int)
    else:  # generations in contiguous node blocks by share; racks of rack_size nodes
        shares = np.cumsum([w for _, w in site.generations]) / sum(w for _, w in site.generations)
        block = np.minimum(np.searchsorted(shares, (np.arange(N) + 0.5) / N), len(shares) - 1)
        hardware = [site.generations[b][0] for b in block]
        rack_of = np.arange(N) // site.rack_size
    gens = [GENERATIONS.get(h) for h in hardware]

    # failures, jobs, anomalies
    sched = failure_schedule(rng, N, dur, p.mtbf_hours * 3600.0, p.weibull_shape,
                             (p.repair_minutes[0] * 60.0, p.repair_minutes[1] * 60.0))
    warm = -p.warmup_hours * 3600.0
    jobs, fail_job = _schedule_jobs(_generate_jobs(rng, N, warm, dur, p), sched, N, dur, p.hot_spares)
    job_of_failure = {(int(sched["node"][i]), float(sched["fail"][i])): j for i, j in fail_job.items()}
    if site is None:
        anomalies = _place_anomalies(rng, sched, N, dur, p)
    else:
        fans_of = np.array([g.n_fans for g in gens])
        anomalies = _place_site_anomalies(rng, sched, N, dur, p, jobs, rack_of, fans_of)
    node_events = slurm_node_events(seed, profile, sched, N, dur)
    if p.spare_failure_minutes is not None:  # after every shared draw that reads the schedule: nothing else moves
        sched, spare_precursor, spare_event = _spare_failure(seed, profile, sched, N, dur, p)
        anomalies = sorted([*anomalies, spare_precursor], key=lambda a: (a["start"], a["node"]))
        node_events = sorted([*node_events, spare_event], key=lambda e: (e["start"], e["node"]))

    t1 = np.arange(T1, dtype=float)
    t15 = np.arange(T15, dtype=float) * 15.0
    up1 = _up_mask(sched, N, t1)
    up15 = up1[:, ::15]
    reboot1 = np.zeros((N, T1), bool)
    reboot1[:, 1:] = up1[:, 1:] & ~up1[:, :-1]
    reboot15 = np.zeros((N, T15), bool)
    reboot15[:, 1:] = up15[:, 1:] & ~up15[:, :-1]
    lustre_reset, net_reset, counter_resets = _counter_resets(rng, up1, up15, p.counter_reset_rate, reboot1,
                                                              reboot15)

    # job occupancy on the 1 s grid (row index into the job table, -1 idle)
    occ = np.full((N, T1), -1, np.int32)
    for j in np.flatnonzero(np.isfinite(jobs["start"])):
        a = int(np.clip(np.ceil(jobs["start"][j]), 0, T1))
        b = int(np.clip(np.ceil(jobs["end"][j]), 0, T1))
        if b > a:
            occ[jobs["node_index"][j], a:b] = j
    busy1 = occ >= 0

    def col(key: str) -> np.ndarray:  # job column padded with 0: index -1 (idle) reads 0
        return np.append(np.nan_to_num(np.asarray(jobs[key], float)), 0.0)

    job1 = col("job_id")[occ].astype(np.int64)
    occ15 = occ[:, ::15]
    busy15 = occ15 >= 0
    job15 = job1[:, ::15]

    # ---- Lustre client 1 s rates: input read at start, steady IO, checkpoint bursts
    age = t1[None, :] - col("start")[occ]
    read = col("read_rate")[occ] * (1.0 + 4.0 * (age < 300.0))
    period, burst = col("ckpt_period_s")[occ], np.maximum(col("ckpt_burst_s")[occ], 1.0)
    write = col("write_rate")[occ] * (0.2 + 0.8 * period / burst * (np.mod(age, np.maximum(period, 1.0)) < burst))
    noise = rng.lognormal(-0.045, 0.3, (2, N, T1))
    idle_bg = rng.exponential(2000.0, (2, N, T1))
    rates = np.where(busy1[None], np.stack([read, write]) * noise, idle_bg) / slow[None, None, :]
    # ---- CPU utilisation on the 15 s grid
    util = np.where(busy15, col("cpu_intensity")[occ15] * rng.normal(1.0, 0.03, (N, T15)), 0.01)
    util = np.clip(util + rng.normal(0, 0.005, (N, T15)), 0.0, 1.0)

    # stall anomalies act on cpu_user, IO and network, and hang tasks (load rises)
    net_factor = np.ones((N, T15))
    hung = np.zeros((N, T15))
    for a in anomalies:
        if a["kind"] not in ("stall", "io_stall"):
            continue
        n = a["node"]
        i0, i1 = int(max(np.floor(a["start"]), 0)), int(min(np.ceil(a["end"]), T1))
        if i1 > i0:
            rates[:, n, i0:i1] *= 1.0 - 0.95 * _strength(a, t1[i0:i1])
        k0, k1 = max(i0 // 15, 0), min(i1 // 15 + 1, T15)
        s15 = _strength(a, t15[k0:k1])
        util[n, k0:k1] *= 1.0 - 0.85 * s15
        net_factor[n, k0:k1] *= 1.0 - 0.9 * s15
        hung[n, k0:k1] += 2.0 * p.cores_per_node * s15 * (0.2 + 0.8 * busy15[n, k0:k1])  # ranks and health checks
    if site is not None and site.physics:   # declarative families and look-alikes
        _physics_os(anomalies, site.custom, t15, rates=rates, util=util, net_factor=net_factor, hung=hung,
                    busy15=busy15, cores=p.cores_per_node)
    rates *= up1[None]
    lustre = _cumulative(np.round(rates).transpose(1, 2, 0), lustre_reset,
                         rng.uniform(1e11, 5e13, (N, 2)).round())

    # ---- OS samplers on the 15 s grid
    ncores = p.cores_per_node
    util *= up15
    jiffies = 100.0 * ncores * 15.0
    user = util * jiffies * rng.uniform(0.9, 0.98, (N, 1))
    iowait = np.minimum(rates.reshape(2, N, T15, 15).sum(axis=(0, 3)) / 15.0 / 2e9, 0.05) * jiffies * up15
    sys_ = (0.01 + 0.04 * util) * jiffies
    nice = np.full((N, T15), 0.0005 * jiffies)
    idle = np.maximum(jiffies - user - sys_ - iowait - nice, 0.0)
    inc = np.stack([user, nice, sys_, idle, iowait], axis=-1) * up15[..., None]
    uptime_jiffies = rng.uniform(1.0, 60.0, (N, 1)) * 86400.0 * 100.0 * ncores  # booted 1–60 days ago
    procstat = _cumulative(np.round(inc), reboot15,
                           np.round(uptime_jiffies * np.array([0.45, 0.0005, 0.03, 0.51, 0.0095])))
    inst_load = ncores * util + hung * up15 + rng.exponential(0.05, (N, T15))
    loadavg = np.stack([_ewma(inst_load, 1 - np.exp(-15.0 / tau)) for tau in (60.0, 300.0, 900.0)], axis=-1)
    mem_total = rng.choice([98304000.0, 196608000.0, 393216000.0], N, p=[0.25, 0.6, 0.15])
    mem_used = 0.04 + np.where(busy15, col("mem_frac")[occ15], 0.0)
    mem_used = _ewma(mem_used, 0.3) + np.cumsum(rng.normal(0, 0.0008, (N, T15)), axis=1)
    mem_used = np.clip(mem_used, 0.02, 0.97)
    if site is not None:
        mem_used = _site_memory(mem_used, anomalies, t15)
    if site is not None and site.physics:
        mem_used = np.clip(_physics_levels(anomalies, site.custom, t15, "mem", mem_used), 0.0, 0.999)
    avail = mem_total[:, None] * (1 - mem_used)
    free = avail * rng.uniform(0.55, 0.85, (N, 1))
    meminfo = np.stack([np.broadcast_to(mem_total[:, None], (N, T15)), free, avail], axis=-1)
    size_kb = rng.choice([468320256.0, 937692160.0], N)
    disk = rng.uniform(0.15, 0.6, (N, 1)) + np.cumsum(rng.normal(2e-5, 3e-4, (N, T15)), axis=1)
    disk = np.clip(disk, 0.01, 0.99)
    if site is not None and site.physics:
        disk = np.clip(_physics_levels(anomalies, site.custom, t15, "disk", disk), 0.01, 0.99)
    diskusage = np.stack([disk * size_kb[:, None], np.broadcast_to(size_kb[:, None], (N, T15))], axis=-1)
    io15 = rates.reshape(2, N, T15, 15).mean(axis=-1)
    comm = np.where(busy15, col("comm_rate")[occ15], 0.0) * util
    net = np.stack([comm + 0.2 * io15[0], comm + 0.2 * io15[1]], axis=-1) * net_factor[..., None]
    net = (net + rng.exponential(1500.0, (N, T15, 2))) * rng.lognormal(-0.02, 0.2, (N, T15, 2))
    procnetdev = _cumulative(np.round(net * 15.0) * up15[..., None], net_reset,
                             rng.uniform(1e10, 1e12, (N, 2)).round())

    ldms_outages: list[dict] = []
    if site is None:
        ipmi = _bmc_readings(rng, util, anomalies, p.start + t15, p.na_rate)
        ipmi_up = ldms_up15 = None
        outages: list[dict] = []
    else:
        ipmi = _site_bmc(rng, util, anomalies, p.start + t15, site, gens, rack_of)
        ipmi[rng.random(ipmi.shape) < p.na_rate] = np.nan
        ipmi_up, ldms_up15, outages = _poll_masks(rng, up15, site)
        if site.ldms_outage_rate > 0:
            ldms_outages = _ldms_outages(rng, ldms_up15, site)

    # sample time offsets: per-node sampler phase plus jitter
    phase = rng.integers(500, 5000, (N, 1))
    usec1 = phase + rng.integers(0, 400, (N, T1))
    usec15 = phase + rng.integers(0, 400, (N, T15)) + 1000
    ipmi_ms = rng.integers(150, 900, (N, 1)) + rng.integers(0, 60, (N, T15))

    precursor_of = {(a["node"], a["end"]): a for a in anomalies if a["leads_to_failure"]}
    failures = []
    for i in np.flatnonzero((sched["fail"] >= 0) & (sched["fail"] < dur)):
        n, f = int(sched["node"][i]), float(sched["fail"][i])
        j = job_of_failure.get((n, f))
        a = precursor_of.get((n, f))
        failures.append({"time": f, "node": n, "job_id": int(jobs["job_id"][j]) if j is not None else None,
                         "cause": a["kind"] if a else "no_precursor", "family": a["kind"] if a else "sudden",
                         "onset_time": a["start"] if a else f})
    down_at_start = [names[n] for n in np.flatnonzero(~up1[:, 0])]

    jobs["nodes"] = np.array([",".join(names[n] for n in idx) for idx in jobs["node_index"]], dtype=object)
    return Telemetry(start=float(p.start), nodes=names, up1=up1, up15=up15, job1=job1, job15=job15,
                     usec1=usec1, usec15=usec15, lustre=lustre,
                     ldms15={"procstat": procstat, "loadavg": loadavg, "meminfo": meminfo,
                             "diskusage": diskusage, "procnetdev": procnetdev},
                     ipmi=ipmi, ipmi_ms=ipmi_ms, jobs=jobs, failures=failures, anomalies=anomalies,
                     params=p, seed=seed, down_at_start=down_at_start, counter_resets=counter_resets,
                     profile=profile, hardware=hardware, racks=[int(r) for r in rack_of], ipmi_up=ipmi_up,
                     ldms_up15=ldms_up15, bmc_outages=outages, ldms_outages=ldms_outages,
                     node_events=node_events)


def simulate_telemetry(out_dir: str, nodes: int = 32, hours: float = 2.0, seed: int = 0, *,
                       profile: str | Profile = "classic", altheader: bool = False, io: bool = True,
                       slurm_events: bool = False, **params) -> dict:
    """Generate and write a recorded-data directory (``docs/formats.md``); returns the summary.

    ``params`` are :class:`TelemetryParams` fields; ``io=False`` skips the 1 s
    ``lustre_client`` file and ``slurm_events=True`` adds ``slurm/events.txt``
    (:func:`~hpcguard.simulators.writers.write_recording`).  The summary adds ``generate_s``,
    ``write_s`` and ``values_per_s`` (generation throughput) to ``meta.json``'s content.

    >>> import tempfile
    >>> s = simulate_telemetry(tempfile.mkdtemp(), nodes=2, hours=0.1, seed=3)
    >>> s["counts"]["samples"]["lustre_client"] <= 2 * 360
    True
    """
    import time

    t0 = time.perf_counter()
    tel = generate_telemetry(nodes, hours, seed, profile=profile, **params)
    t1 = time.perf_counter()
    summary = write_recording(tel, out_dir, altheader=altheader, io=io, slurm_events=slurm_events)
    t2 = time.perf_counter()
    summary.update({"generate_s": t1 - t0, "write_s": t2 - t1,
                    "values_per_s": tel.n_values() / max(t1 - t0, 1e-9)})
    return summary
