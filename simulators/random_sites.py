"""Randomised sites: each seed draws a site nobody tuned on, from a wide library.

Issue 56's yardstick: a profile written from a site's description and tuned on it proves
nothing, so ``evaluate sites`` measures on many sites drawn at random.  :func:`random_site`
draws, from its seed alone:

* the **vendor and collector mix**: one to three BMC hardware generations
  (:data:`~hpcguard.simulators.profiles.GENERATIONS`: their sensor names, units and
  FreeIPMI CSV or ``ipmitool sdr elist`` output) in random shares, reading noise, ``N/A``
  readings, missing polls, BMC outages and LDMS sampler outages;
* the **failure mix**: node MTBF, Weibull shape, repair times and the share of sudden
  failures (no precursor);
* **precursor families** (one to four) and **benign look-alikes** (one to four, most of
  them resembling a family the site has) from :data:`PRECURSOR_LIBRARY` and
  :data:`LOOKALIKE_LIBRARY`, each with a randomised shape: onset lead, strength, how it
  grows, intermittency (flickers, bursts, oscillation, jitter) and which of its sensors
  move;
* **baselines**: inlet temperature, rack spread, daily cycle, fan speeds, cores, job mix.

A library entry is a small declarative table (:class:`Entry`); a new failure physics is a
new entry, never a profile fitted to a description.  ``builtin`` entries are the families
and look-alikes the simulator has always had (their physics in ``simulators/telemetry.py``,
their shape drawn through the site's ``precursor_*`` ranges); the others become
:class:`~hpcguard.simulators.profiles.Physics` rows the telemetry generator applies.

Example
-------
>>> profile, description = random_site(7)
>>> profile.name, description["seed"]
('random-7', 7)
>>> random_site(7)[1] == description            # deterministic per seed
True
>>> import json; _ = json.dumps(description)    # serialisable: reports print it
"""
from __future__ import annotations

import dataclasses
import zlib
from dataclasses import dataclass

import numpy as np

from hpcguard.simulators.profiles import (GENERATIONS, LOOKALIKE_KINDS, PRECURSOR_FAMILIES, Effect, Physics,
                                          Profile, SiteParams)

Range = tuple[float, float]


@dataclass(frozen=True)
class Entry:
    """One library entry: a precursor family (``precursor``) or a benign look-alike resembling ``resembles``.

    ``effects`` rows are ``(target, size range, patterns, optional)``: what moves
    (:data:`~hpcguard.simulators.profiles.BMC_TARGETS`, :data:`~hpcguard.simulators.profiles.OS_TARGETS`),
    by how much at full strength (drawn per site), the patterns it may take (the first row's drawn
    pattern is shared by the rows that allow it) and whether a site's draw may leave it out.
    ``builtin`` entries have no rows: the simulator's own physics of that name.  The other fields
    are the ranges a site's shape is drawn from.
    """

    name: str
    effects: tuple[tuple[str, Range, tuple[str, ...], bool], ...] = ()
    precursor: bool = True
    resembles: str = ""
    builtin: bool = False
    lead_minutes: Range = (2.0, 20.0)
    intermittency: Range = (0.1, 0.6)
    period_s: Range = (45.0, 300.0)
    burst_s: Range = (20.0, 240.0)
    minutes: Range = (2.0, 12.0)
    scopes: tuple[str, ...] = ("node",)
    envelopes: tuple[str, ...] = ("hump", "plateau")


SMOOTH, INTERMITTENT = ("smooth",), ("bursts", "flicker")

# Precursor families.  Sizes: °C added to temperatures, relative change of fans, voltages, cpu_user,
# io and net, memory share reached (mem), hung tasks per core (load), disk share added (disk).
PRECURSOR_LIBRARY: dict[str, Entry] = {e.name: e for e in (
    *(Entry(f, builtin=True) for f in PRECURSOR_FAMILIES),
    Entry("fan_decay", (("fans", (-0.6, -0.2), ("smooth", "bursts"), False),
                        ("cpu1", (6.0, 20.0), SMOOTH, True), ("cpu2", (4.0, 14.0), SMOOTH, True))),
    Entry("fan_stall", (("fan_hit", (-0.9, -0.5), ("bursts", "flicker", "smooth"), False),
                        ("fan_rest", (0.05, 0.2), SMOOTH, True), ("cpu1", (2.0, 8.0), SMOOTH, True))),
    Entry("thermal_runaway", (("cpu1", (8.0, 25.0), SMOOTH, False), ("cpu2", (2.0, 10.0), SMOOTH, True),
                              ("fans", (0.05, 0.3), SMOOTH, True), ("cpu_user", (-0.5, -0.1), SMOOTH, True))),
    Entry("vrm_ripple", (("vcore", (-0.08, -0.02), ("jitter", "oscillation", "flicker"), False),
                         ("psu1", (1.0, 6.0), SMOOTH, True))),
    Entry("psu_capacitor", (("psu1", (5.0, 18.0), ("smooth", "oscillation"), False),
                            ("psu2", (2.0, 8.0), ("smooth", "oscillation"), True),
                            ("v12", (-0.06, -0.01), SMOOTH, True))),
    Entry("ecc_storm", (("load", (0.3, 1.5), INTERMITTENT, False), ("cpu_user", (-0.6, -0.2), INTERMITTENT, True))),
    Entry("nic_flap", (("net", (-1.0, -0.6), ("bursts",), False), ("io", (-0.9, -0.4), ("bursts",), True))),
    Entry("disk_fill", (("disk", (0.05, 0.4), SMOOTH, False), ("load", (0.1, 0.5), SMOOTH, True),
                        ("io", (-0.5, -0.1), SMOOTH, True)), lead_minutes=(5.0, 20.0)),
    Entry("swap_thrash", (("mem", (0.93, 0.995), SMOOTH, False), ("load", (0.5, 2.0), SMOOTH, True),
                          ("cpu_user", (-0.7, -0.3), SMOOTH, True)), lead_minutes=(4.0, 20.0)),
    Entry("device_hang", (("cpu_user", (-0.95, -0.6), ("smooth", "bursts"), False),
                          ("net", (-0.9, -0.5), ("smooth", "bursts"), True), ("load", (0.5, 2.0), SMOOTH, True),
                          ("psu1", (-6.0, -2.0), SMOOTH, True))),
    # mostly invisible to the ten canonical sensors: on most sites it fails as if suddenly
    Entry("rail_12v_sag", (("v12", (-0.08, -0.02), ("smooth", "jitter"), False), ("psu1", (1.0, 5.0), SMOOTH, True))),
)}

# Benign look-alikes: each resembles a family of the library.
LOOKALIKE_LIBRARY: dict[str, Entry] = {e.name: e for e in (
    *(Entry(k, precursor=False, resembles=f, builtin=True) for k, f in LOOKALIKE_KINDS.items()),
    Entry("fan_selftest", (("fans", (0.3, 0.7), SMOOTH, False),), precursor=False, resembles="fan_decay",
          minutes=(1.0, 4.0), envelopes=("plateau",)),
    Entry("avx_job_heat", (("cpu1", (5.0, 15.0), SMOOTH, False), ("cpu2", (3.0, 10.0), SMOOTH, True),
                           ("fans", (0.05, 0.25), SMOOTH, True), ("psu1", (2.0, 6.0), SMOOTH, True)),
          precursor=False, resembles="thermal_runaway", minutes=(5.0, 30.0), scopes=("node", "job_end")),
    Entry("bmc_vcore_glitch", (("vcore", (-0.1, -0.04), ("flicker",), False),), precursor=False,
          resembles="vrm_ripple", minutes=(5.0, 30.0)),
    Entry("switch_reboot", (("net", (-1.0, -0.7), SMOOTH, False), ("io", (-0.9, -0.5), SMOOTH, True)),
          precursor=False, resembles="nic_flap", minutes=(1.0, 5.0), scopes=("rack", "node"),
          envelopes=("plateau",)),
    Entry("log_burst", (("disk", (0.03, 0.2), SMOOTH, False), ("io", (0.2, 1.0), SMOOTH, True)), precursor=False,
          resembles="disk_fill", minutes=(10.0, 40.0)),
    Entry("mpi_wait", (("cpu_user", (-0.7, -0.3), SMOOTH, False), ("net", (-0.8, -0.3), SMOOTH, True)),
          precursor=False, resembles="device_hang", minutes=(2.0, 10.0), scopes=("job_end", "node")),
    Entry("psu_load_swing", (("psu1", (3.0, 8.0), ("oscillation",), False), ("psu2", (1.0, 4.0), ("oscillation",), True)),
          precursor=False, resembles="psu_capacitor", minutes=(5.0, 20.0)),
    Entry("cache_spike", (("mem", (0.88, 0.97), SMOOTH, False), ("load", (0.1, 0.5), SMOOTH, True)),
          precursor=False, resembles="swap_thrash", minutes=(3.0, 15.0), scopes=("job_end", "node")),
)}


def _u(rng: np.random.Generator, r: Range) -> float:
    return float(rng.uniform(r[0], r[1]))


def _log_u(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _sub_range(rng: np.random.Generator, r: Range, min_width: float = 0.0) -> Range:
    """A random (low, high) inside ``r``, at least ``min_width`` wide where ``r`` allows."""
    lo = _u(rng, (r[0], max(r[0], r[1] - min_width)))
    return (round(lo, 3), round(_u(rng, (min(lo + min_width, r[1]), r[1])), 3))


def _physics(rng: np.random.Generator, entry: Entry) -> Physics:
    """A site's draw of a declarative entry: sizes, pattern, the optional effects kept, the shape."""
    pattern = str(rng.choice(entry.effects[0][2]))
    effects = []
    for i, (target, size, patterns, optional) in enumerate(entry.effects):
        keep = not optional or rng.random() < 0.6
        drawn = round(_u(rng, size), 4)
        if keep:
            effects.append(Effect(target, drawn, pattern if pattern in patterns else patterns[0]))
    shape = {"intermittency": round(_u(rng, entry.intermittency), 3), "period_s": round(_u(rng, entry.period_s), 1),
             "burst_s": _sub_range(rng, entry.burst_s, 15.0)}
    if entry.precursor:
        lo = _u(rng, (entry.lead_minutes[0], (entry.lead_minutes[0] + entry.lead_minutes[1]) / 2))
        return Physics(entry.name, tuple(effects), lead_minutes=(round(lo, 2), round(_u(rng, (lo + 1.0,
                                                                                              entry.lead_minutes[1])), 2)),
                       strength=_sub_range(rng, (0.5, 1.4), 0.1), step=(0.0, round(_u(rng, (0.0, 0.6)), 3)),
                       power=_sub_range(rng, (0.5, 2.5), 0.2), **shape)
    return Physics(entry.name, tuple(effects), precursor=False, resembles=entry.resembles,
                   strength=_sub_range(rng, (0.3, 1.2), 0.1), minutes=_sub_range(rng, entry.minutes, 1.0),
                   scope=str(rng.choice(entry.scopes)), envelope=str(rng.choice(entry.envelopes)), **shape)


def _pick_names(rng: np.random.Generator, names: list[str], k: int) -> list[str]:
    return [names[i] for i in sorted(rng.choice(len(names), size=min(k, len(names)), replace=False))]


def random_site(seed: int) -> tuple[Profile, dict]:
    """The site of ``seed``: a :class:`~hpcguard.simulators.profiles.Profile` (``random-<seed>``) whose
    overrides ``generate_telemetry(profile=...)`` takes, and its JSON-ready description.

    >>> a, b = random_site(1)[1], random_site(2)[1]
    >>> (a["families"], a["vendors"]) != (b["families"], b["vendors"])
    True
    """
    rng = np.random.default_rng([int(seed), zlib.crc32(b"hpcguard-random-site")])
    # vendor and collector mix
    gens = _pick_names(rng, sorted(GENERATIONS), int(rng.choice([1, 2, 3], p=[0.3, 0.45, 0.25])))
    shares = rng.dirichlet([2.0] * len(gens))
    generations = tuple((g, round(float(max(s, 0.05)), 3)) for g, s in zip(gens, shares))
    # precursor families, then look-alikes (most of them resembling a family the site has)
    fam_names = _pick_names(rng, sorted(PRECURSOR_LIBRARY), int(rng.integers(1, 5)))
    fam_weights = [round(_u(rng, (0.5, 3.0)), 2) for _ in fam_names]
    resembling = sorted(k for k, e in LOOKALIKE_LIBRARY.items() if e.resembles in fam_names)
    look_names: list[str] = []
    for _ in range(int(rng.integers(1, 5))):
        pool = resembling if resembling and rng.random() < 0.6 else sorted(LOOKALIKE_LIBRARY)
        pool = [k for k in pool if k not in look_names] or [k for k in sorted(LOOKALIKE_LIBRARY) if k not in look_names]
        look_names.append(pool[int(rng.integers(len(pool)))])
    look_weights = [round(_u(rng, (0.5, 3.0)), 2) for _ in look_names]
    physics = tuple(_physics(rng, PRECURSOR_LIBRARY[f]) for f in fam_names if not PRECURSOR_LIBRARY[f].builtin) + \
        tuple(_physics(rng, LOOKALIKE_LIBRARY[k]) for k in look_names if not LOOKALIKE_LIBRARY[k].builtin)
    fan_low = _u(rng, (3500.0, 8000.0))
    site = SiteParams(
        families=tuple(zip(fam_names, fam_weights)), lookalikes=tuple(zip(look_names, look_weights)),
        lookalike_ratio=round(_log_u(rng, 0.3, 3.0), 3), generations=generations,
        rack_size=int(rng.choice([8, 16, 24, 32])), inlet_c=round(_u(rng, (18.0, 27.0)), 2),
        rack_inlet_sd=round(_u(rng, (0.3, 3.0)), 2), diurnal_c=round(_u(rng, (0.0, 4.0)), 2),
        fan_rpm=(round(fan_low), round(fan_low * _u(rng, (1.1, 1.6)))),
        missing_poll_rate=round(_log_u(rng, 0.001, 0.05), 4), bmc_outage_rate=round(_u(rng, (0.0, 2.0)), 3),
        bmc_outage_minutes=_sub_range(rng, (1.0, 60.0), 5.0), physics=physics,
        noise_scale=round(_log_u(rng, 0.5, 2.5), 3),
        ldms_outage_rate=round(_u(rng, (0.0, 1.0)), 3) if rng.random() < 0.5 else 0.0,
        ldms_outage_minutes=_sub_range(rng, (1.0, 30.0), 2.0))
    lead = _sub_range(rng, (2.0, 20.0), 3.0)
    overrides = {
        "mtbf_hours": round(_log_u(rng, 36.0, 120.0), 1), "weibull_shape": round(_u(rng, (0.55, 1.0)), 3),
        "repair_minutes": _sub_range(rng, (5.0, 120.0), 10.0),
        "precursor_fraction": round(_u(rng, (0.5, 0.95)), 3),
        "precursor_lead_minutes": lead, "precursor_strength": _sub_range(rng, (0.5, 1.4), 0.1),
        "precursor_step": (0.0, round(_u(rng, (0.0, 0.7)), 3)), "precursor_power": _sub_range(rng, (0.5, 2.5), 0.2),
        "anomaly_rate": 0.0, "utilization": round(_u(rng, (0.6, 0.95)), 3),
        "runtime_median_minutes": round(_log_u(rng, 8.0, 60.0), 1),
        "cores_per_node": int(rng.choice([32, 48, 64, 96, 128])), "na_rate": round(_log_u(rng, 1e-4, 5e-3), 5),
        "counter_reset_rate": round(_u(rng, (0.0, 2.0)), 3), "site": site,
    }
    description = describe(seed, overrides)
    profile = Profile(f"random-{seed}", description["summary"], overrides)
    return profile, description


def describe(seed: int, overrides: dict) -> dict:
    """The JSON-ready description of a drawn site (what reports print), with a one-line ``summary``."""
    site: SiteParams = overrides["site"]
    custom = site.custom

    def shape(name: str) -> dict:
        phys = custom.get(name)
        if phys is None:
            return {"builtin": True}
        keys = (("lead_minutes", "strength", "step", "power") if phys.precursor
                else ("strength", "minutes", "scope", "envelope"))
        patterns = {e.pattern for e in phys.effects}
        keys += (("intermittency",) if "flicker" in patterns else ()) + \
            (("period_s",) if "oscillation" in patterns else ()) + (("burst_s",) if "bursts" in patterns else ())
        d = {k: getattr(phys, k) for k in keys}
        return {"effects": [f"{e.target} {e.size:+g} {e.pattern}" for e in phys.effects], **d}

    vendors = [{"generation": g, "vendor": GENERATIONS[g].vendor, "format": GENERATIONS[g].format, "share": s}
               for g, s in site.generations]
    families = [{"name": f, "weight": w, **shape(f)} for f, w in site.families]
    looks = [{"name": k, "weight": w, "resembles": LOOKALIKE_KINDS.get(k) or custom[k].resembles, **shape(k)}
             for k, w in site.lookalikes]
    sudden = round(1.0 - overrides["precursor_fraction"], 3)
    params = {k: v for k, v in overrides.items() if k != "site"}
    site_params = {k: v for k, v in dataclasses.asdict(site).items()
                   if k not in ("families", "lookalikes", "generations", "physics")}
    summary = (f"{'+'.join(g for g, _ in site.generations)}; families {', '.join(f for f, _ in site.families)}; "
               f"{100 * sudden:.0f} % sudden; look-alikes {', '.join(k for k, _ in site.lookalikes)} "
               f"({site.lookalike_ratio:g} per precursor); MTBF {overrides['mtbf_hours']:g} h")
    return {"seed": int(seed), "name": f"random-{seed}", "summary": summary, "vendors": vendors,
            "families": families, "sudden_share": sudden, "lookalikes": looks, "parameters": params,
            "site": site_params}
