import json

import pytest

from hpcguard.connectors.errors import ParseError
from hpcguard.connectors.mapping import SensorMapping, normalize_unit

# raw BMC names as the vendors print them → the canonical sensor the default mapping must give
VENDOR_NAMES = {
    # Dell iDRAC
    "Temp": "cpu_temp", "Fan1A RPM": "cpu_fan_rpm", "Fan7B RPM": "cpu_fan_rpm", "Fan3": "cpu_fan_rpm",
    # Supermicro
    "CPU Temp": "cpu_temp", "System Fan 2": "cpu_fan_rpm", "FANA": "cpu_fan_rpm", "FAN4": "cpu_fan_rpm",
    "Vcpu": "cpu_voltage", "CPU1 VCORE": "cpu_voltage", "PS1 Temp": "psu_temp",
    # Lenovo XCC / IBM IMM
    "CPU 1 Temp": "cpu_temp", "Fan 1 Tach": "cpu_fan_rpm", "Fan 2B Tach": "cpu_fan_rpm", "Fan1A_Tach": "cpu_fan_rpm",
    "Fan 3 Front Tach": "cpu_fan_rpm", "PSU1 Temp": "psu_temp",
    # HPE iLO (fans are in percent: mapped, then refused by unit)
    "02-CPU 1": "cpu_temp", "Fan 1": "cpu_fan_rpm",
    # Huawei iBMC
    "CPU1 Core Rem": "cpu_temp", "FAN1 F Speed": "cpu_fan_rpm", "CPU1 VCore": "cpu_voltage",
    # Intel / Gigabyte
    "Processor 1 Temp": "cpu_temp", "P1 Therm Margin": "cpu_temp", "CPU0_TEMP": "cpu_temp", "P1 VCCIN": "cpu_voltage",
    "CPU0_VCORE": "cpu_voltage", "P_VCCIN_CPU0": "cpu_voltage", "PSU1_TEMP": "psu_temp", "SYS_FAN1": "cpu_fan_rpm",
}
# look-alikes that must stay unmapped (discrete PG/VR states, PSU fans, other temperatures)
NOT_CANONICAL = ["VCORE PG", "CPU1 VR", "PSU1 FAN_A", "CPU 1 Overtemp", "Inlet Temp", "System Temp", "Exhaust Temp",
                 "Fan Redundancy", "Sys Fan Pwr", "CPU 1 DTS", "PCH Temp", "Fan1 Status", "PS 1 Fan Fault",
                 "CPU1 MEM Temp"]


@pytest.fixture(scope="module")
def default():
    return SensorMapping.load()


@pytest.mark.parametrize("raw,canonical", sorted(VENDOR_NAMES.items()))
def test_default_mapping_knows_common_bmcs(default, raw, canonical):
    assert default.ipmi_canonical(raw) == canonical


@pytest.mark.parametrize("raw", NOT_CANONICAL)
def test_look_alikes_stay_unmapped(default, raw):
    assert default.ipmi_canonical(raw) is None


def test_units_are_checked_per_sensor(default):
    assert default.unit_ok("cpu_fan_rpm", "RPM") and default.unit_ok("cpu_fan_rpm", "rpm")
    assert not default.unit_ok("cpu_fan_rpm", "percent") and not default.unit_ok("cpu_fan_rpm", None)
    assert default.unit_ok("cpu_temp", "degrees C") and default.unit_ok("cpu_temp", "degrees_c")
    assert not default.unit_ok("cpu_temp", "Watts")
    assert default.unit_ok("cpu_voltage", "Volts") and default.unit_ok("cpu_voltage", "V")
    assert normalize_unit("°C") == "C" and normalize_unit("unspecified") is None


def test_families(default):
    assert default.family_of(["CPU 1 Temp", "XCC Corrupted", "DIMM 1"]) == "lenovo-xcc"
    assert default.family_of(["Temp", "Fan1A RPM", "Dedicated NIC"]) == "dell-idrac"
    assert default.family_of(["CPU1 Core Rem"]) == "huawei-ibmc"
    assert default.family_of(["Something"]) == "other" and default.family_of([]) == "no-sensors"


def test_digest_is_stable_and_follows_content(default, tmp_path):
    assert default.digest == SensorMapping.load().digest and len(default.digest) == 64
    same = tmp_path / "same.toml"  # the default's own cpu_temp entry, written differently
    spec = default.ipmi["cpu_temp"]
    same.write_text("# a comment\n[ipmi.cpu_temp]\nreduce = 'max'\nunits = ['degrees C']\n"
                    f"names = {json.dumps(list(spec.names))}\npatterns = {json.dumps(list(spec.patterns))}\n")
    assert SensorMapping.load(same).digest == default.digest
    other = tmp_path / "other.toml"
    other.write_text('[ipmi.cpu_temp]\nnames = ["Proc Temp"]\n')
    assert SensorMapping.load(other).digest != default.digest


def test_bad_site_files_are_refused(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[ipmi.cpu_temp]\npatterns = ["cpu(temp"]\n')
    with pytest.raises(ParseError, match="pattern"):
        SensorMapping.load(bad)
    bad.write_text('[vendors]\nx = 1\n')
    with pytest.raises(ParseError, match="unknown sections"):
        SensorMapping.load(bad)
    with pytest.raises(FileNotFoundError):
        SensorMapping.load(tmp_path / "missing.toml")
