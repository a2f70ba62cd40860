"""Which raw collector names feed which canonical sensor (``connectors/sensors.toml``).

Example
-------
>>> m = SensorMapping.load()
>>> m.ipmi_canonical("cpu1_temp"), m.ipmi_canonical("FAN1A"), m.ipmi_canonical("Inlet Temp")
('cpu_temp', 'cpu_fan_rpm', None)
>>> m.ldms["meminfo"].derive[0].canonical
'mem_usage'
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from hpcguard.connectors.errors import ParseError
from hpcguard.models.features import CANONICAL_SENSORS, IO_METRICS

DERIVE_KINDS = ("gauge", "rate", "ratio", "delta_share")
REDUCERS = ("first", "max", "min", "mean")
_SEPARATORS = re.compile(r"[\s_\-.]+")


def normalize_name(raw: str) -> str:
    """Case- and separator-insensitive key: ``'CPU1 Temp'`` → ``'cpu1temp'``."""
    return _SEPARATORS.sub("", raw).lower()


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


@dataclass
class SensorMapping:
    """IPMI name → canonical sensor, and LDMS schema derivations."""

    ipmi: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)  # canonical → (names, reduce)
    ldms: dict[str, SchemaSpec] = field(default_factory=dict)
    _lookup: dict[str, tuple[str, int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._lookup = {}
        for canonical, (names, _) in self.ipmi.items():
            for priority, raw in enumerate(names):
                self._lookup.setdefault(normalize_name(raw), (canonical, priority))

    @classmethod
    def load(cls, path: str | Path | None = None) -> "SensorMapping":
        """The packaged default mapping, with the sections of a site file ``path`` replacing it."""
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
            for section in ("ipmi", "ldms"):
                data.setdefault(section, {}).update(site.get(section, {}))
            unknown = set(site) - {"ipmi", "ldms"}
            if unknown:
                raise ParseError("bad_config", f"unknown sections {sorted(unknown)} (known: ipmi, ldms)", source=str(p))
        return cls.from_dict(data, source=str(path or "sensors.toml"))

    @classmethod
    def from_dict(cls, data: dict, source: str = "mapping") -> "SensorMapping":
        ipmi: dict[str, tuple[tuple[str, ...], str]] = {}
        for canonical, spec in data.get("ipmi", {}).items():
            if canonical not in CANONICAL_SENSORS:
                raise ParseError("bad_config", f"[ipmi.{canonical}] is not a canonical sensor", source=source)
            if isinstance(spec, list):
                spec = {"names": spec}
            reduce = spec.get("reduce", "first")
            if reduce not in REDUCERS:
                raise ParseError("bad_config", f"[ipmi.{canonical}] reduce must be one of {REDUCERS}", source=source)
            ipmi[canonical] = (tuple(str(n) for n in spec.get("names", ())), reduce)
        ldms: dict[str, SchemaSpec] = {}
        for schema, spec in data.get("ldms", {}).items():
            derive = []
            for canonical, d in spec.get("derive", {}).items():
                if canonical not in CANONICAL_SENSORS and canonical not in IO_METRICS:
                    raise ParseError("bad_config", f"[ldms.{schema}] {canonical} is not a canonical name", source=source)
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
        return cls(ipmi=ipmi, ldms=ldms)

    def ipmi_canonical(self, raw_name: str) -> str | None:
        """Canonical sensor fed by a raw IPMI name, or ``None`` when unmapped."""
        hit = self._lookup.get(normalize_name(raw_name))
        return hit[0] if hit else None

    def ipmi_lookup(self, raw_name: str) -> tuple[str, int] | None:
        """``(canonical, priority)`` of a raw IPMI name (priority 0 = listed first)."""
        return self._lookup.get(normalize_name(raw_name))

    def ipmi_reduce(self, canonical: str) -> str:
        return self.ipmi[canonical][1]
