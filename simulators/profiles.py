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

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first impossible setting."""
        checks = [
            (all(f in PRECURSOR_FAMILIES and w >= 0 for f, w in self.families)
             and sum(w for _, w in self.families) > 0,
             f"families must be non-negative weights over {PRECURSOR_FAMILIES} (got {self.families})"),
            (all(k in LOOKALIKE_KINDS and w >= 0 for k, w in self.lookalikes),
             f"lookalikes must be non-negative weights over {tuple(LOOKALIKE_KINDS)} (got {self.lookalikes})"),
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
