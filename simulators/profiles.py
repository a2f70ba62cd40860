"""Site profiles of the telemetry simulator: hardware generations and what each site varies.

A *profile* is a named set of :class:`~hpcguard.simulators.telemetry.TelemetryParams`
overrides.  ``classic`` is the simulator as it always was (one FreeIPMI hardware
generation, front-loaded 6–10 min precursors, no site effects).  The other profiles
add a :class:`SiteParams`: precursor *families* with gradual onsets 3–20 min ahead,
a share of sudden deaths, benign look-alikes as frequent as real precursors,
rack-wide inlet effects, per-node and per-fan baselines, several hardware
*generations* (BMC vendors with their own sensor names, units and output format in
one cluster), missing polls and BMC outages.  Profiles are how the project measures
generalisation: train on one, evaluate on another.

Precursor families (``failures.csv`` ``family``; the signal grows from ``step`` of
its strength at onset, ``step`` ≈ 0 being a gradual start from small amplitude):

``fan``              all fans slow, CPU temperature climbs
``voltage``          CPU core voltage sags and gets noisy
``psu``              PSU temperature climbs
``stall``            cpu_user, IO and network fall while hung tasks raise the load
``memory_leak``      memory climbs to ~100 % over 5–20 min
``vcore_droop``      single-poll core-voltage droops, more and more frequent
``psu_oscillation``  PSU temperature oscillates (1–4 min period) with growing amplitude
``fan_bearing``      one fan decays and gets jittery, the other fans speed up to compensate

Benign look-alikes (``anomalies.csv`` rows with ``leads_to_failure = 0``; ``family``
names the precursor family each resembles):

``cooling_blip``  rack-wide: inlet, CPU and PSU temperatures rise, fans spin up (resembles ``fan``)
``fan_dip``       one fan slows and recovers (``fan_bearing``)
``mem_fill``      a job fills RAM to 88–97 % in its last minutes and ends (``memory_leak``)
``vcore_blip``    a few isolated core-voltage droops at a constant rate (``vcore_droop``)
``psu_warm``      PSU temperature rises and falls back (``psu``)
``io_stall``      a job's IO stalls for minutes, then resumes (``stall``)

Declarative physics: a :class:`Physics` row names the sensors a new precursor family or
look-alike moves (:class:`Effect`: target, size, pattern) and the ranges of its shape;
``SiteParams.physics`` lists them and ``families``/``lookalikes`` may then name them.  The
randomised sites of :mod:`hpcguard.simulators.random_sites` draw theirs from a library.  Two
more generations (``gigabyte``, ``supermicro-x13``) serve those sites; no profile here uses them.

Example
-------
>>> sorted(PROFILES)
['classic', 'gradual', 'intermittent', 'memory', 'mixed', 'reported']
>>> profile_overrides("classic")
{}
>>> p = profile_overrides("mixed")["site"]
>>> sorted({GENERATIONS[g].format for g, _ in p.generations})
['freeipmi-csv', 'ipmitool-sdr']
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

PRECURSOR_FAMILIES: tuple[str, ...] = ("fan", "voltage", "psu", "stall", "memory_leak", "vcore_droop",
                                       "psu_oscillation", "fan_bearing")
LOOKALIKE_KINDS: dict[str, str] = {  # look-alike kind -> the precursor family it resembles
    "cooling_blip": "fan", "fan_dip": "fan_bearing", "mem_fill": "memory_leak", "vcore_blip": "vcore_droop",
    "psu_warm": "psu", "io_stall": "stall",
}

# BMC roles: the physical quantities a node's BMC reports; a generation names a subset.
ROLES: tuple[str, ...] = ("inlet", "exhaust", "cpu1", "cpu2", "psu1", "psu2", "vcore", "v12",
                          "fan1", "fan2", "fan3", "fan4", "fan5", "fan6", "fan7", "fan8")
ROLE = {r: i for i, r in enumerate(ROLES)}
FAN_ROLES: tuple[int, ...] = tuple(ROLE[f"fan{i}"] for i in range(1, 9))


@dataclass(frozen=True)
class HardwareGeneration:
    """One BMC generation: vendor naming, units, output format and reading resolution.

    ``sensors`` rows are ``(role, raw name, type, units, entity)``; ``units`` is
    FreeIPMI's Units column (``C``, ``V``, ``RPM``) and becomes ipmitool's
    ``degrees C``/``Volts``/``RPM``.  ``discrete`` rows are state sensors written as-is
    (they never carry a value).  ``vcore_nominal`` is the idle core (or input) voltage
    the BMC reports; ``fan_quantum`` the tachometer resolution.
    """

    name: str
    vendor: str
    format: str  # "freeipmi-csv" or "ipmitool-sdr"
    sensors: tuple[tuple[str, str, str, str, str], ...]
    discrete: tuple[tuple[str, str, str], ...] = ()  # (name, entity, state text)
    vcore_nominal: float = 1.1
    fan_quantum: float = 60.0
    temp_quantum: float = 1.0

    @property
    def roles(self) -> list[int]:
        return [ROLE[s[0]] for s in self.sensors]

    @property
    def n_fans(self) -> int:
        return sum(1 for s in self.sensors if s[0].startswith("fan"))


def _fans(names: list[str], entity: str = "7.1") -> tuple[tuple[str, str, str, str, str], ...]:
    return tuple((f"fan{i + 1}", n, "Fan", "RPM", entity) for i, n in enumerate(names))


GENERATIONS: dict[str, HardwareGeneration] = {g.name: g for g in (
    # Supermicro X11 (FreeIPMI CSV): CPU1/CPU2 Temp, CPU1 VCORE, FAN1..FAN4 and FANA
    HardwareGeneration(
        "supermicro-x11", "Supermicro", "freeipmi-csv",
        (("inlet", "Inlet Temp", "Temperature", "C", "7.1"), ("exhaust", "System Temp", "Temperature", "C", "7.1"),
         ("cpu1", "CPU1 Temp", "Temperature", "C", "3.1"), ("cpu2", "CPU2 Temp", "Temperature", "C", "3.2"),
         ("psu1", "PS1 Temp", "Temperature", "C", "10.1"), ("psu2", "PS2 Temp", "Temperature", "C", "10.2"),
         ("vcore", "CPU1 VCORE", "Voltage", "V", "3.1"), ("v12", "12V", "Voltage", "V", "7.1"))
        + _fans(["FAN1", "FAN2", "FAN3", "FAN4", "FANA"]),
        discrete=(("PS1 Status", "10.1", "'Presence detected'"), ("Chassis Intru", "23.1", "'OK'")),
        vcore_nominal=1.8, fan_quantum=100.0),
    # Dell PowerEdge iDRAC (ipmitool sdr elist): both CPUs are named "Temp" (entity 3.1/3.2)
    HardwareGeneration(
        "dell-idrac", "Dell", "ipmitool-sdr",
        (("inlet", "Inlet Temp", "Temperature", "C", "7.1"), ("exhaust", "Exhaust Temp", "Temperature", "C", "7.1"),
         ("cpu1", "Temp", "Temperature", "C", "3.1"), ("cpu2", "Temp", "Temperature", "C", "3.2"),
         ("psu1", "PS1 Temp", "Temperature", "C", "10.1"), ("psu2", "PS2 Temp", "Temperature", "C", "10.2"),
         ("vcore", "CPU1 VCORE", "Voltage", "V", "3.1"))
        + _fans(["Fan1A RPM", "Fan1B RPM", "Fan2A RPM", "Fan2B RPM", "Fan3A RPM", "Fan3B RPM"]),
        discrete=(("Intrusion", "7.1", ""), ("PS Redundancy", "7.1", "Fully Redundant"),
                  ("Fan Redundancy", "7.1", "Fully Redundant")),
        vcore_nominal=1.05, fan_quantum=120.0),
    # Lenovo ThinkSystem XCC (ipmitool sdr elist): "CPU 1 Temp", "Fan1A_Tach" as in real XCC logs
    HardwareGeneration(
        "lenovo-xcc", "Lenovo", "ipmitool-sdr",
        (("inlet", "Ambient Temp", "Temperature", "C", "7.1"), ("exhaust", "Exhaust Temp", "Temperature", "C", "7.1"),
         ("cpu1", "CPU 1 Temp", "Temperature", "C", "3.1"), ("cpu2", "CPU 2 Temp", "Temperature", "C", "3.2"),
         ("psu1", "PSU1 Temp", "Temperature", "C", "10.1"), ("psu2", "PSU2 Temp", "Temperature", "C", "10.2"),
         ("vcore", "CPU1 VCCIN", "Voltage", "V", "3.1"), ("v12", "Planar 12V", "Voltage", "V", "7.1"))
        + _fans(["Fan1A_Tach", "Fan1B_Tach", "Fan2A_Tach", "Fan2B_Tach", "Fan3A_Tach", "Fan3B_Tach",
                 "Fan4A_Tach", "Fan4B_Tach"], "29.1"),
        discrete=(("CPU 1 Status", "3.1", "0x00"), ("XCC Corrupted", "7.1", "0x00"),
                  ("Power Supply 1", "10.1", "Presence detected")),
        vcore_nominal=1.8, fan_quantum=128.0),
    # Gigabyte (FreeIPMI CSV): CPU0_TEMP/CPU1_TEMP, CPU0_VCORE, PSU1_TEMP, SYS_FAN1.. and CPU0_FAN
    HardwareGeneration(
        "gigabyte", "Gigabyte", "freeipmi-csv",
        (("inlet", "MB_TEMP1", "Temperature", "C", "7.1"), ("exhaust", "MB_TEMP2", "Temperature", "C", "7.1"),
         ("cpu1", "CPU0_TEMP", "Temperature", "C", "3.1"), ("cpu2", "CPU1_TEMP", "Temperature", "C", "3.2"),
         ("psu1", "PSU1_TEMP", "Temperature", "C", "10.1"), ("psu2", "PSU2_TEMP", "Temperature", "C", "10.2"),
         ("vcore", "CPU0_VCORE", "Voltage", "V", "3.1"), ("v12", "P_12V", "Voltage", "V", "7.1"))
        + _fans(["CPU0_FAN", "SYS_FAN1", "SYS_FAN2", "SYS_FAN3"]),
        discrete=(("PSU1_STATUS", "10.1", "'Presence detected'"),),
        vcore_nominal=1.8, fan_quantum=75.0),
    # Supermicro X13 (ipmitool sdr elist): one "CPU Temp", "Vcpu", FAN1..FAN6, PSU temperatures as "PSU1 Temp"
    HardwareGeneration(
        "supermicro-x13", "Supermicro", "ipmitool-sdr",
        (("inlet", "Inlet Temp", "Temperature", "C", "7.1"), ("exhaust", "System Temp", "Temperature", "C", "7.1"),
         ("cpu1", "CPU Temp", "Temperature", "C", "3.1"),
         ("psu1", "PSU1 Temp", "Temperature", "C", "10.1"), ("psu2", "PSU2 Temp", "Temperature", "C", "10.2"),
         ("vcore", "Vcpu", "Voltage", "V", "3.1"), ("v12", "12V", "Voltage", "V", "7.1"))
        + _fans(["FAN1", "FAN2", "FAN3", "FAN4", "FAN5", "FAN6"]),
        discrete=(("Chassis Intru", "23.1", "0x00"),),
        vcore_nominal=1.8, fan_quantum=140.0),
    # Generic FreeIPMI names (the classic simulator's): CPU1 Temp, Vcore, FAN1A..FAN2B
    HardwareGeneration(
        "generic-freeipmi", "generic", "freeipmi-csv",
        (("inlet", "Inlet Temp", "Temperature", "C", "7.1"), ("exhaust", "System Temp", "Temperature", "C", "7.1"),
         ("cpu1", "CPU1 Temp", "Temperature", "C", "3.1"), ("cpu2", "CPU2 Temp", "Temperature", "C", "3.2"),
         ("psu1", "PS1 Temp", "Temperature", "C", "10.1"), ("psu2", "PS2 Temp", "Temperature", "C", "10.2"),
         ("vcore", "Vcore", "Voltage", "V", "3.1"), ("v12", "12V", "Voltage", "V", "7.1"))
        + _fans(["FAN1A", "FAN1B", "FAN2A", "FAN2B"]),
        discrete=(("PS1 Status", "10.1", "'Presence detected'"),),
        vcore_nominal=1.16, fan_quantum=60.0),
)}


# What a declarative :class:`Physics` can move: BMC roles (plus every fan, the anomaly's fan and the
# others) and operating-system quantities.  Temperatures take ``size`` in °C added; fans, voltages,
# cpu_user, io and net a relative change (``-0.4``: 40 % lower); ``mem`` the memory share reached;
# ``load`` hung tasks per core added; ``disk`` the disk share added.
BMC_TARGETS: tuple[str, ...] = ROLES + ("fans", "fan_hit", "fan_rest")
OS_TARGETS: tuple[str, ...] = ("mem", "load", "cpu_user", "io", "net", "disk")
# How an effect follows the anomaly's envelope: ``smooth`` (with it), ``flicker`` (single polls, a
# precursor's more and more frequent), ``bursts`` (on for a while, off for a while), ``oscillation``
# (a wave whose amplitude is the envelope), ``jitter`` (noise whose spread is the envelope).
PATTERNS: tuple[str, ...] = ("smooth", "flicker", "bursts", "oscillation", "jitter")


@dataclass(frozen=True)
class Effect:
    """One quantity a :class:`Physics` moves: ``target`` (:data:`BMC_TARGETS`, :data:`OS_TARGETS`), its
    change at full strength ``size`` (units: see :data:`BMC_TARGETS`) and its ``pattern`` (:data:`PATTERNS`)."""

    target: str
    size: float
    pattern: str = "smooth"


@dataclass(frozen=True)
class Physics:
    """A precursor family or a benign look-alike given as a table of effects (a new failure physics
    is a new :class:`Physics`, not new simulator code).

    ``precursor`` False makes a look-alike that resembles the family ``resembles``.  Ranges left
    ``None`` take the site's (:class:`~hpcguard.simulators.telemetry.TelemetryParams`
    ``precursor_lead_minutes``, ``precursor_strength``, ``precursor_step``, ``precursor_power``).
    A look-alike lasts ``minutes`` and hits one node (``scope`` ``node``), a rack (``rack``) or the
    nodes of a job in its last minutes (``job_end``), with an ``envelope`` ``hump`` or ``plateau``.
    ``intermittency`` is the share of polls a ``flicker`` hits (a precursor's grows to it),
    ``period_s`` an ``oscillation``'s period, ``burst_s`` the (low, high) on and off lengths of ``bursts``.
    """

    name: str
    effects: tuple[Effect, ...]
    precursor: bool = True
    resembles: str = ""
    lead_minutes: Optional[tuple[float, float]] = None
    strength: Optional[tuple[float, float]] = None
    step: Optional[tuple[float, float]] = None
    power: Optional[tuple[float, float]] = None
    minutes: tuple[float, float] = (2.0, 10.0)
    scope: str = "node"
    envelope: str = "hump"
    intermittency: float = 0.3
    period_s: float = 120.0
    burst_s: tuple[float, float] = (30.0, 120.0)

    def problems(self) -> list[str]:
        """What is impossible in this entry (empty: nothing)."""
        out = []
        builtin = set(PRECURSOR_FAMILIES) | set(LOOKALIKE_KINDS)
        if not self.name or self.name in builtin or len(self.name) > 32:
            out.append(f"physics name {self.name!r} must be new, non-empty and at most 32 characters")
        if not self.effects:
            out.append(f"physics {self.name!r} moves nothing")
        for e in self.effects:
            if e.target not in BMC_TARGETS + OS_TARGETS or e.pattern not in PATTERNS:
                out.append(f"physics {self.name!r}: effect {e} needs a target of {BMC_TARGETS + OS_TARGETS} "
                           f"and a pattern of {PATTERNS}")
        for label, r in (("lead_minutes", self.lead_minutes), ("strength", self.strength), ("step", self.step),
                         ("power", self.power), ("minutes", self.minutes), ("burst_s", self.burst_s)):
            if r is not None and not (0 <= r[0] <= r[1]):
                out.append(f"physics {self.name!r}: {label} must be 0 <= low <= high (got {r})")
        if self.lead_minutes is not None and not (0 < self.lead_minutes[0] and self.lead_minutes[1] <= 24.0):
            out.append(f"physics {self.name!r}: lead_minutes must lie in (0, 24] (look-alikes keep 25 min clear)")
        if self.scope not in ("node", "rack", "job_end") or self.envelope not in ("hump", "plateau"):
            out.append(f"physics {self.name!r}: scope node/rack/job_end and envelope hump/plateau")
        if not 0 <= self.intermittency <= 1 or self.period_s <= 0:
            out.append(f"physics {self.name!r}: intermittency in [0, 1] and period_s > 0")
        return out


@dataclass(frozen=True)
class SiteParams:
    """What a non-classic profile varies (all drawn with the run's seed).

    Attributes
    ----------
    families : ``(family, weight)`` pairs of the precursor families (:data:`PRECURSOR_FAMILIES`).
    lookalikes : ``(kind, weight)`` pairs of the benign look-alikes (:data:`LOOKALIKE_KINDS`).
    lookalike_ratio : benign look-alikes (node-level rows) per real precursor.
    generations : ``(generation, share of nodes)`` pairs (:data:`GENERATIONS`); nodes are
        assigned in contiguous blocks, like racks bought together.
    rack_size : nodes per rack (rack-wide inlet offsets, drifts and cooling blips).
    inlet_c : mean inlet temperature; ``rack_inlet_sd`` its spread between racks.
    diurnal_c : amplitude of the daily inlet cycle (peak mid-afternoon UTC).
    fan_rpm : (low, high) uniform per-fan baseline RPM at mid load.
    missing_poll_rate : share of single polls (BMC and 15 s LDMS rows) that never arrive.
    bmc_outage_rate : BMC outages (no IPMI poll at all) per node-day;
        ``bmc_outage_minutes`` their (low, high) uniform length.
    physics : declarative precursor families and look-alikes (:class:`Physics`) whose names
        ``families`` and ``lookalikes`` may then use beside the built-in ones.
    noise_scale : factor on the BMC readings' noise (1: as the profiles always had it).
    ldms_outage_rate : LDMS sampler outages (no 15 s OS row) per node-day;
        ``ldms_outage_minutes`` their (low, high) uniform length.
    """

    families: tuple[tuple[str, float], ...] = tuple((f, 1.0) for f in PRECURSOR_FAMILIES)
    lookalikes: tuple[tuple[str, float], ...] = tuple((k, 1.0) for k in LOOKALIKE_KINDS)
    lookalike_ratio: float = 1.0
    generations: tuple[tuple[str, float], ...] = (("supermicro-x11", 0.5), ("dell-idrac", 0.5))
    rack_size: int = 16
    inlet_c: float = 22.0
    rack_inlet_sd: float = 1.5
    diurnal_c: float = 2.0
    fan_rpm: tuple[float, float] = (6000.0, 9000.0)
    missing_poll_rate: float = 0.01
    bmc_outage_rate: float = 0.5
    bmc_outage_minutes: tuple[float, float] = (2.0, 30.0)
    physics: tuple[Physics, ...] = ()
    noise_scale: float = 1.0
    ldms_outage_rate: float = 0.0
    ldms_outage_minutes: tuple[float, float] = (1.0, 20.0)

    @property
    def custom(self) -> dict[str, Physics]:
        """The declarative physics by name."""
        return {p.name: p for p in self.physics}

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first impossible setting."""
        families = PRECURSOR_FAMILIES + tuple(p.name for p in self.physics if p.precursor)
        kinds = tuple(LOOKALIKE_KINDS) + tuple(p.name for p in self.physics if not p.precursor)
        for p in self.physics:
            for problem in p.problems():
                raise ValueError(problem)
        checks = [
            (len({p.name for p in self.physics}) == len(self.physics), "physics names must be distinct"),
            (all(f in families and w >= 0 for f, w in self.families)
             and sum(w for _, w in self.families) > 0,
             f"families must be non-negative weights over {families} (got {self.families})"),
            (all(k in kinds and w >= 0 for k, w in self.lookalikes),
             f"lookalikes must be non-negative weights over {kinds} (got {self.lookalikes})"),
            (self.noise_scale >= 0, f"noise_scale must be >= 0 (got {self.noise_scale})"),
            (self.ldms_outage_rate >= 0 and 0 < self.ldms_outage_minutes[0] <= self.ldms_outage_minutes[1],
             f"ldms_outage_rate must be >= 0 and ldms_outage_minutes 0 < low <= high "
             f"(got {self.ldms_outage_rate}, {self.ldms_outage_minutes})"),
            (self.lookalike_ratio >= 0, f"lookalike_ratio must be >= 0 (got {self.lookalike_ratio})"),
            (bool(self.generations) and all(g in GENERATIONS and w > 0 for g, w in self.generations),
             f"generations must be positive shares of {tuple(GENERATIONS)} (got {self.generations})"),
            (self.rack_size >= 1, f"rack_size must be >= 1 (got {self.rack_size})"),
            (0 < self.fan_rpm[0] <= self.fan_rpm[1], f"fan_rpm must be 0 < low <= high (got {self.fan_rpm})"),
            (0 <= self.missing_poll_rate < 0.5, f"missing_poll_rate must be in [0, 0.5) (got {self.missing_poll_rate})"),
            (self.bmc_outage_rate >= 0, f"bmc_outage_rate must be >= 0 (got {self.bmc_outage_rate})"),
            (0 < self.bmc_outage_minutes[0] <= self.bmc_outage_minutes[1],
             f"bmc_outage_minutes must be 0 < low <= high (got {self.bmc_outage_minutes})"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(message)


@dataclass(frozen=True)
class Profile:
    """A named site: a one-line summary and its :class:`TelemetryParams` overrides."""

    name: str
    summary: str
    overrides: dict = dataclasses.field(default_factory=dict)


# Precursor shape of the site profiles: onsets 3–20 min ahead, starting small (step
# 0–0.25 of the full strength) and growing (power 1–2): a degrading part shows late
# and faintly, unlike classic's front-loaded step.
_GRADUAL = {"precursor_lead_minutes": (3.0, 20.0), "precursor_step": (0.0, 0.25),
            "precursor_power": (1.0, 2.0), "precursor_strength": (0.7, 1.2), "mtbf_hours": 48.0,
            "anomaly_rate": 0.0}

PROFILES: dict[str, Profile] = {p.name: p for p in (
    Profile("classic", "the original simulator: FreeIPMI names, fan/voltage/psu/stall precursors stepping up "
                       "6-10 min ahead, 15 % sudden, weak benign humps, no site effects (default)"),
    Profile("mixed", "all eight precursor families, 20 % sudden, look-alikes 1:1, Supermicro (FreeIPMI CSV) "
                     "+ Dell (ipmitool sdr elist), 1 % missing polls, BMC outages",
            {**_GRADUAL, "precursor_fraction": 0.8, "site": SiteParams()}),
    Profile("gradual", "faint slow onsets (strength 0.5-0.9, step <= 0.1, power 1.5-2.5), 30 % sudden, "
                       "look-alikes 1.5:1, strong diurnal and rack inlet effects, Lenovo XCC (ipmitool) + "
                       "Supermicro (FreeIPMI)",
            {**_GRADUAL, "precursor_fraction": 0.7, "precursor_strength": (0.5, 0.9),
             "precursor_step": (0.0, 0.1), "precursor_power": (1.5, 2.5),
             "site": SiteParams(lookalike_ratio=1.5, diurnal_c=3.5, rack_inlet_sd=2.5,
                                generations=(("lenovo-xcc", 0.5), ("supermicro-x11", 0.5)))}),
    Profile("intermittent", "mostly intermittent precursors (Vcore droops, PSU oscillation, fan bearing wear), "
                            "25 % sudden, their look-alikes 1:1, Dell + Lenovo (both ipmitool) + generic "
                            "FreeIPMI, 2 % missing polls, frequent BMC outages",
            {**_GRADUAL, "precursor_fraction": 0.75,
             "site": SiteParams(families=(("vcore_droop", 3.0), ("psu_oscillation", 2.0), ("fan_bearing", 3.0),
                                          ("fan", 0.5), ("voltage", 0.5), ("memory_leak", 0.5)),
                                lookalikes=(("vcore_blip", 3.0), ("fan_dip", 3.0), ("psu_warm", 2.0),
                                            ("cooling_blip", 1.0)),
                                generations=(("dell-idrac", 0.4), ("lenovo-xcc", 0.3), ("generic-freeipmi", 0.3)),
                                missing_poll_rate=0.02, bmc_outage_rate=1.5)}),
    Profile("memory", "memory leaks and IO stalls dominate (data-intensive site), 15 % sudden, jobs that fill "
                      "RAM and end as look-alikes, Supermicro + Lenovo",
            {**_GRADUAL, "precursor_fraction": 0.85,
             "site": SiteParams(families=(("memory_leak", 4.0), ("stall", 2.0), ("fan", 1.0), ("psu", 1.0),
                                          ("fan_bearing", 1.0)),
                                lookalikes=(("mem_fill", 4.0), ("io_stall", 2.0), ("cooling_blip", 1.0),
                                            ("psu_warm", 1.0), ("fan_dip", 1.0)),
                                generations=(("supermicro-x11", 0.6), ("lenovo-xcc", 0.4)))}),
    # Transcribed from issue 11's description of the held-out site (not from any result
    # here): fans decaying, memory leaks and growing Vcore droops, 30 % sudden, only the
    # look-alikes it names (rack cooling blips, a fan that slows and recovers, jobs that
    # fill RAM and end), 36 failures per 64 nodes x 48 h.
    Profile("reported", "the held-out site as issue 11 reports it: fans decaying (all or one), memory leaks, "
                        "growing Vcore droops, 30 % sudden, look-alikes 1:1 of three kinds only (rack cooling "
                        "blips, fan dips, jobs filling RAM), node MTBF 85 h, Supermicro + Dell",
            {**_GRADUAL, "precursor_fraction": 0.7, "mtbf_hours": 85.0,
             "site": SiteParams(families=(("fan", 1.5), ("fan_bearing", 1.5), ("memory_leak", 2.0),
                                          ("vcore_droop", 2.0)),
                                lookalikes=(("cooling_blip", 1.0), ("fan_dip", 1.0), ("mem_fill", 1.0)))}),
)}


def profile_overrides(name: str) -> dict:
    """The :class:`TelemetryParams` overrides of profile ``name`` (``ValueError`` if unknown)."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; known: {', '.join(PROFILES)}")
    return dict(PROFILES[name].overrides)


def describe_profiles() -> list[dict]:
    """One JSON-ready dict per profile: name, summary and the parameters it changes.

    >>> [p["parameters"]["precursor_fraction"] for p in describe_profiles()[1:]]
    [0.8, 0.7, 0.75, 0.85, 0.7]
    """
    out = []
    for p in PROFILES.values():
        params = {k: (dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v) for k, v in p.overrides.items()}
        out.append({"name": p.name, "summary": p.summary, "parameters": params})
    return out
