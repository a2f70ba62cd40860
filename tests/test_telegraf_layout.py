"""Where Telegraf ``ipmi_sensor`` recordings go in a recorded-data directory (issue 59, item 5).

Telegraf's ``[[outputs.file]]`` writes line protocol: one file per node (``ipmi/<node>.out``),
any name (``ipmi/*.lp``), one file for many hosts (a central Telegraf polling remote BMCs, or
an aggregator), gathered per node into sub-directories, and, unless ``namepass`` filters them,
every other input's measurements in the same file.  Each placement loads offline and dry-runs
alike, the node coming from the lines' tags.
"""
import pytest

from hpcguard.connectors.errors import Rejected
from hpcguard.connectors.ipmi import parse_telegraf_line, read_ipmi_file
from hpcguard.connectors.recorded import load_sensor_grid
from hpcguard.connectors.replay import detect_format, dry_run, iter_recorded
from hpcguard.models.features import CANONICAL_SENSORS
from _shared import SHARED_DATA
from test_ipmi_real import telegraf_v1

REAL = SHARED_DATA / "real-formats" / "ipmi"
T0 = 1_700_000_010
TEMP, FAN = CANONICAL_SENSORS.index("cpu_temp"), CANONICAL_SENSORS.index("cpu_fan_rpm")


def v2(host: str, t: int, temp: float, fan: float) -> str:
    """Two Telegraf metric_version 2 ipmi_sensor lines of one poll."""
    ns = t * 10**9
    return (f"ipmi_sensor,entity_id=3.1,host={host},name=cpu1_temp,status_code=ok,status_desc=ok,unit=degrees_c "
            f"value={temp} {ns}\n"
            f"ipmi_sensor,entity_id=29.1,host={host},name=fan1a_rpm,status_code=ok,status_desc=ok,unit=rpm "
            f"value={fan} {ns}\n")


def other_inputs(host: str, t: int) -> str:
    """What Telegraf's default inputs write beside ipmi_sensor into the same file."""
    ns = t * 10**9
    return (f"cpu,cpu=cpu-total,host={host} usage_idle=97.5,usage_user=2.1,usage_system=0.4 {ns}\n"
            f"mem,host={host} available=123456789i,total=270000000000i,used_percent=12.5 {ns}\n"
            f"system,host={host} load1=0.5,load5=0.4,load15=0.3,n_cpus=128i {ns}\n"
            f'system,host={host} uptime_format="12 days,  3:04" {ns}\n'
            f"disk,device=nvme0n1p1,fstype=xfs,host={host},mode=rw,path=/ free=1i,used=2i,used_percent=0.5 {ns}\n")


def _both(d):
    """The offline grid's ``{node: [(cpu_temp, fan) per step]}`` and the dry run's report."""
    grid = load_sensor_grid(d)
    steps = {n: [tuple(float(x) for x in grid.values[i, k, [TEMP, FAN]]) for k in range(grid.values.shape[1])]
             for i, n in enumerate(grid.nodes)}
    return grid, steps, dry_run([d])


def test_one_file_per_node_named_after_it(tmp_path):
    (tmp_path / "ipmi").mkdir()
    for i, node in enumerate(("c01", "c02")):
        (tmp_path / "ipmi" / f"{node}.out").write_text(v2(node, T0, 40 + i, 5000) + v2(node, T0 + 15, 41 + i, 5100))
    grid, steps, report = _both(tmp_path)
    assert steps == {"c01": [(40.0, 5000.0), (41.0, 5100.0)], "c02": [(41.0, 5000.0), (42.0, 5100.0)]}
    assert grid.skipped == {} and report["errors"] == {} and report["samples"] == {"ipmi": 4}


def test_any_name_lp_file_from_a_real_dump_metric_version_1(tmp_path):
    (tmp_path / "ipmi").mkdir()
    dump = (REAL / "datakit_R620v1.txt").read_text()  # Dell R620 ipmitool sdr, as Telegraf v1 writes it
    (tmp_path / "ipmi" / "r620-telegraf.lp").write_text(telegraf_v1(dump, host="r620", ts=T0 * 10**9))
    (tmp_path / "ipmi" / "readme.lp").write_text(  # the README's v2 lines, with the agent's host tag
        (REAL / "telegraf_readme_v2_local.lp").read_text().replace("ipmi_sensor,", "ipmi_sensor,host=ilo1,")
        .replace("1517125474", str(T0)))
    grid, steps, report = _both(tmp_path)
    assert steps == {"r620": [(47.0, 2040.0)]}  # the iLO README reports no canonical value in its units
    assert report["errors"] == {} and report["records"] == {"ipmi": 2} and report["samples"] == {"ipmi": 1}
    assert report["coverage"]["groups"]["dell-idrac"]["example_nodes"] == ["r620"]


def test_one_file_for_many_hosts_with_every_input_as_telegraf_writes_it(tmp_path):
    (tmp_path / "ipmi").mkdir()
    text = ""
    for k in range(3):  # one flush per interval: each host's inputs, interleaved
        for i, host in enumerate(("c01", "c02", "c03")):
            text += other_inputs(host, T0 + 15 * k) + v2(host, T0 + 15 * k, 40 + i + k, 5000 + 10 * k)
    f = tmp_path / "ipmi" / "metrics.out"
    f.write_text(other_inputs("c01", T0 - 15) * 6 + text)  # the file may start with other inputs' lines
    assert detect_format(f) == "telegraf"
    grid, steps, report = _both(tmp_path)
    assert steps == {h: [(40.0 + i + k, 5000.0 + 10 * k) for k in range(3)]
                     for i, h in enumerate(("c01", "c02", "c03"))}
    assert grid.skipped == {} and report["errors"] == {} and report["samples"] == {"ipmi": 9}
    # replay publishes the ipmi_sensor polls only, and no dead letter for cpu, mem, system, disk
    items = list(iter_recorded([tmp_path]))
    assert not [r for r in items if isinstance(r, Rejected)]
    assert sorted({m.key for m in items}) == ["c01", "c02", "c03"]
    assert all("ipmi_sensor" in line for m in items for line in m.value["text"].splitlines())


def test_per_node_sub_directories(tmp_path):
    for node in ("c01", "c02"):
        (tmp_path / "ipmi" / node).mkdir(parents=True)
        (tmp_path / "ipmi" / node / "metrics.out").write_text(other_inputs(node, T0) + v2(node, T0, 45, 4800))
    grid, steps, report = _both(tmp_path)
    assert steps == {"c01": [(45.0, 4800.0)], "c02": [(45.0, 4800.0)]}
    assert report["samples"] == {"ipmi": 2} and report["errors"] == {}


def test_a_telegraf_file_without_ipmi_sensor_is_one_dead_letter_not_one_per_line(tmp_path):
    (tmp_path / "ipmi").mkdir()
    f = tmp_path / "ipmi" / "metrics.out"
    f.write_text(other_inputs("c01", T0) * 50)
    (rej,) = list(read_ipmi_file(f))
    assert isinstance(rej, Rejected) and rej.kind == "unknown_format" and rej.line == 1
    assert "without an ipmi_sensor measurement" in rej.reason and "cpu, disk, mem, system" in rej.reason
    assert dry_run([tmp_path])["errors"] == {"unknown_format": 1}
    assert load_sensor_grid(tmp_path).skipped == {"ipmi_unknown_format": 1}


@pytest.mark.parametrize("tag", ["server", "host", "hostname"])
def test_the_node_comes_from_the_lines_tags(tag):
    line = f"ipmi_sensor,{tag}=bmc7,name=cpu1_temp,status_code=ok,unit=degrees_c value=45 {T0 * 10**9}"
    assert parse_telegraf_line(line)[0] == "bmc7"
