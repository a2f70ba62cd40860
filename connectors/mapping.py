"""Which raw collector names feed which canonical sensor (``connectors/sensors.toml``).

An IPMI canonical sensor lists raw BMC names (exact, case- and separator-insensitive),
regular expressions over the normalised name, and the units a reading must carry
(an RPM sensor reports RPM; a fan in percent or a discrete ``0x..`` state is not a
value).  ``[families]`` names the BMC families (vendor markers) that coverage
reports group nodes by.  :attr:`SensorMapping.digest` identifies the mapping's
content (models record it; a worker compares it).

Example
-------
>>> m = SensorMapping.load()
>>> m.ipmi_canonical("cpu1_temp"), m.ipmi_canonical("Fan 3B Tach"), m.ipmi_canonical("Inlet Temp")
('cpu_temp', 'cpu_fan_rpm', None)
>>> m.unit_ok("cpu_fan_rpm", "RPM"), m.unit_ok("cpu_fan_rpm", "percent"), m.unit_ok("cpu_temp", "degrees C")
(True, False, True)
>>> m.family_of({"CPU 1 Temp", "XCC Corrupted"})
'lenovo-xcc'
>>> m.ldms["meminfo"].derive[0].canonical
'mem_usage'
>>> len(m.digest)
64
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Iterable

from hpcguard.connectors.errors import ParseError
from hpcguard.models.features import CANONICAL_SENSORS, IO_METRICS

DERIVE_KINDS = ("gauge", "rate", "ratio", "delta_share")
REDUCERS = ("first", "max", "min", "mean")
SECTIONS = ("ipmi", "ldms", "families")
_SEPARATORS = re.compile(r"[\s_\-.]+")
# unit spellings of FreeIPMI (Units column), ipmitool ("degrees C", "Volts") and Telegraf
# (unit=degrees_c) → one symbol
UNIT_ALIASES = {"c": "C", "degreesc": "C", "degc": "C", "°c": "C", "celsius": "C", "f": "F", "degreesf": "F",
                "rpm": "RPM", "v": "V", "volt": "V", "volts": "V", "a": "A", "amp": "A", "amps": "A", "w": "W",
                "watt": "W", "watts": "W", "%": "%", "percent": "%", "pct": "%"}


def normalize_name(raw: str) -> str:
    """Case- and separator-insensitive key: ``'CPU1 Temp'`` → ``'cpu1temp'``."""
    return _SEPARATORS.sub("", raw).lower()


@functools.lru_cache(maxsize=4096)
def normalize_unit(raw: str | None) -> str | None:
    """One symbol per unit spelling (``'degrees C'``, ``'degrees_c'``, ``'C'`` → ``'C'``); ``None`` stays ``None``.

    >>> normalize_unit("degrees_c"), normalize_unit("Volts"), normalize_unit("percent"), normalize_unit(None)
    ('C', 'V', '%', None)
    """
    if raw is None:
        return None
    key = normalize_name(raw)
    if not key or key in ("n/a", "na", "unspecified"):
        return None
    return UNIT_ALIASES.get(key, key)


@dataclass(frozen=True)
class MetricSpec:
    """One canonical value derived from LDMS columns (see ``sensors.toml``)."""

    canonical: str
    kind: str
    columns: tuple[str, ...]  # gauge/rate: (column,); ratio: (num, den); delta_share: (num, den...)
    complement: bool = False

    @property
    def counters(self) -> tuple[str, ...]:
        """Columns that are cumulative counters."""
        if self.kind == "rate":
            return self.columns
        if self.kind == "delta_share":
            return tuple(dict.fromkeys(self.columns))
        return ()


@dataclass(frozen=True)
class SchemaSpec:
    schema: str
    period_s: float
    derive: tuple[MetricSpec, ...]
    io: bool = False  # 1 s IO stream (CanarIO) rather than node sensors


@dataclass(frozen=True)
class IpmiSpec:
    """Raw names, patterns (over :func:`normalize_name`), accepted units and reducer of one canonical sensor."""

    names: tuple[str, ...]
    reduce: str = "first"
    patterns: tuple[str, ...] = ()
    units: tuple[str, ...] = ()  # normalised symbols; empty = any unit (or none) accepted

    def canonical_dict(self) -> dict:
        return {"names": list(self.names), "patterns": list(self.patterns), "reduce": self.reduce,
                "units": list(self.units)}


@dataclass
class SensorMapping:
    """IPMI name → canonical sensor (with units), LDMS schema derivations, BMC families."""

    ipmi: dict[str, IpmiSpec] = field(default_factory=dict)
    ldms: dict[str, SchemaSpec] = field(default_factory=dict)
    families: dict[str, tuple[str, ...]] = field(default_factory=dict)  # family → marker names (normalised)
    _lookup: dict[str, tuple[str, int]] = field(default_factory=dict, repr=False)
    _patterns: list[tuple[re.Pattern, str, int]] = field(default_factory=list, repr=False)
    _cache: dict[str, tuple[str, int] | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._lookup, self._patterns, self._cache = {}, [], {}
        for canonical, spec in self.ipmi.items():
            for priority, raw in enumerate(spec.names):
                self._lookup.setdefault(normalize_name(raw), (canonical, priority))
            for k, pattern in enumerate(spec.patterns):
                self._patterns.append((re.compile(f"(?:{pattern})\\Z"), canonical, len(spec.names) + k))

    @classmethod
    def load(cls, path: str | Path | None = None) -> "SensorMapping":
        """The packaged default mapping, with the entries of a site file ``path`` replacing its own.

        A site's ``[ipmi]`` entry (a table, or the short form: a list of names) replaces the
        sensor's names and patterns; the ``units`` and ``reduce`` it leaves out stay the
        packaged ones, because they describe the quantity (a fan reports RPM, a node's fans
        combine by their minimum), not what the site's BMCs call it.
        """
        text = resources.files("hpcguard.connectors").joinpath("sensors.toml").read_text()
        data = tomllib.loads(text)
        if path is not None:
            p = Path(path)
            if not p.is_file():
                raise FileNotFoundError(f"sensor mapping file not found: {p}")
            try:
                site = tomllib.loads(p.read_text())
            except tomllib.TOMLDecodeError as exc:
                raise ParseError("bad_config", f"not valid TOML: {exc}", source=str(p)) from None
            unknown = set(site) - set(SECTIONS)
            if unknown:
                raise ParseError("bad_config", f"unknown sections {sorted(unknown)} (known: {', '.join(SECTIONS)})",
                                 source=str(p))
            packaged = data.get("ipmi", {})
            for canonical, spec in site.get("ipmi", {}).items():
                spec = {"names": spec} if isinstance(spec, list) else spec
                if isinstance(spec, dict):
                    inherited = {k: packaged[canonical][k] for k in ("units", "reduce")
                                 if canonical in packaged and k in packaged[canonical]}
                    site["ipmi"][canonical] = {**inherited, **spec}
            for section in SECTIONS:
                data.setdefault(section, {}).update(site.get(section, {}))
            # a node takes the first family whose marker it reports: the site's own families
            # (a generation, a rack of one vendor) come before the packaged vendor markers
            site_families = site.get("families", {})
            data["families"] = {**site_families, **{k: v for k, v in data["families"].items()
                                                     if k not in site_families}}
        return cls.from_dict(data, source=str(path or "sensors.toml"))

    @classmethod
    def from_dict(cls, data: dict, source: str = "mapping") -> "SensorMapping":
        ipmi: dict[str, IpmiSpec] = {}
        for canonical, spec in data.get("ipmi", {}).items():
            if canonical not in CANONICAL_SENSORS:
                raise ParseError("bad_config", f"[ipmi.{canonical}] is not a canonical sensor", source=source)
            if isinstance(spec, list):
                spec = {"names": spec}
            reduce = spec.get("reduce", "first")
            if reduce not in REDUCERS:
                raise ParseError("bad_config", f"[ipmi.{canonical}] reduce must be one of {REDUCERS}", source=source)
            for pattern in spec.get("patterns", ()):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ParseError("bad_config", f"[ipmi.{canonical}] pattern {pattern!r}: {exc}",
                                     source=source) from None
            ipmi[canonical] = IpmiSpec(tuple(str(n) for n in spec.get("names", ())), reduce,
                                       tuple(str(p) for p in spec.get("patterns", ())),
                                       tuple(normalize_unit(str(u)) for u in spec.get("units", ())))
        ldms: dict[str, SchemaSpec] = {}
        for schema, spec in data.get("ldms", {}).items():
            derive = []
            for canonical, d in spec.get("derive", {}).items():
                if canonical not in CANONICAL_SENSORS and canonical not in IO_METRICS:
                    raise ParseError("bad_config", f"[ldms.{schema}] {canonical} is not a canonical name",
                                     source=source)
                kind = d.get("kind")
                if kind in ("gauge", "rate"):
                    cols = (d["column"],)
                elif kind == "ratio":
                    cols = (d["numerator"], d["denominator"])
                elif kind == "delta_share":
                    cols = (d["numerator"], *d["denominator"])
                else:
                    raise ParseError("bad_config", f"[ldms.{schema}] {canonical}: kind must be one of {DERIVE_KINDS}",
                                     source=source)
                derive.append(MetricSpec(canonical, kind, tuple(cols), bool(d.get("complement", False))))
            ldms[schema] = SchemaSpec(schema, float(spec.get("period_s", 15.0)), tuple(derive), bool(spec.get("io")))
        families = {name: tuple(normalize_name(m) for m in markers)
                    for name, markers in data.get("families", {}).items()}
        return cls(ipmi=ipmi, ldms=ldms, families=families)

    @functools.cached_property
    def digest(self) -> str:
        """sha256 of the mapping's canonical content (independent of TOML layout and comments)."""
        content = {"ipmi": {k: v.canonical_dict() for k, v in sorted(self.ipmi.items())},
                   "ldms": {k: {"period_s": v.period_s, "io": v.io,
                                "derive": [[m.canonical, m.kind, list(m.columns), m.complement] for m in v.derive]}
                            for k, v in sorted(self.ldms.items())},
                   "families": {k: list(v) for k, v in sorted(self.families.items())}}
        return hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def ipmi_lookup(self, raw_name: str) -> tuple[str, int] | None:
        """``(canonical, priority)`` of a raw IPMI name (0 = listed first; patterns after names), or ``None``."""
        try:
            return self._cache[raw_name]
        except KeyError:
            pass
        key = normalize_name(raw_name)
        hit = self._lookup.get(key)
        if hit is None:
            for pattern, canonical, priority in self._patterns:
                if pattern.match(key):
                    hit = (canonical, priority)
                    break
        if len(self._cache) < 100_000:  # raw names are few per site; a flood of junk names must not grow it
            self._cache[raw_name] = hit
        return hit

    def ipmi_canonical(self, raw_name: str) -> str | None:
        """Canonical sensor fed by a raw IPMI name, or ``None`` when unmapped."""
        hit = self.ipmi_lookup(raw_name)
        return hit[0] if hit else None

    def ipmi_reduce(self, canonical: str) -> str:
        return self.ipmi[canonical].reduce

    def unit_ok(self, canonical: str, unit: str | None) -> bool:
        """Whether a reading in ``unit`` (any spelling; ``None`` = no unit) may feed ``canonical``."""
        wanted = self.ipmi[canonical].units
        return not wanted or normalize_unit(unit) in wanted

    def family_of(self, raw_names: Iterable[str]) -> str:
        """The first ``[families]`` entry one of whose markers is among ``raw_names``, else ``'other'``."""
        keys = {normalize_name(n) for n in raw_names}
        for family, markers in self.families.items():
            if any(m in keys for m in markers):
                return family
        return "other" if keys else "no-sensors"
