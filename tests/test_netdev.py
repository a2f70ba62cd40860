"""Which network interfaces feed bytes_in/bytes_out, and a job network left out (issue 59, item 2).

A Slingshot node reports ``eno1`` (management, NFS) and ``hsn0`` (the job network) in one
``procnetdev`` store_csv file.  The default ``[ldms] netdev_interfaces`` knows the common
fabrics; coverage says which interfaces fed the values with their share of the traffic, and
warns when a left-out interface is a node's busiest during jobs; ``train failure`` and
``evaluate failure`` take ``--config`` for it like the other commands.
"""
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hpcguard.cli import app
from hpcguard.connectors.ldms import LdmsColumns, LdmsDecoder
from hpcguard.connectors.netdev import fabric_of
from hpcguard.connectors.recorded import load_sensor_grid
from hpcguard.connectors.replay import dry_run
from hpcguard.models.features import CANONICAL_SENSORS
from hpcguard.settings import Settings

T0 = 1_700_000_010
BYTES_IN = CANONICAL_SENSORS.index("bytes_in")
OLD_DEFAULT = ("eth*", "eno*", "ens*", "enp*", "ib*")  # the list before Slingshot was known
runner = CliRunner()


def procnetdev(root, ifaces, per_step, steps=8, job_from=2, nodes=("c1", "c2")):
    """A procnetdev store_csv file; ``per_step(iface, k, in_job)`` gives an interface's rx bytes in step k
    (tx: a third of it); rows from ``job_from`` on run job 42."""
    (root / "ldms").mkdir(parents=True, exist_ok=True)
    head = "#Time,Time_usec,ProducerName,component_id,job_id," + ",".join(
        f"{d}#{i}" for i in ifaces for d in ("rx_bytes", "tx_bytes"))
    rows = []
    for c, node in enumerate(nodes):
        total = dict.fromkeys(ifaces, 0)
        for k in range(steps):
            job = 42 if k >= job_from else 0
            if k:
                for i in ifaces:
                    total[i] += int(per_step(i, k, job > 0))
            rows.append(f"{T0 + 15 * k}.0,0,{node},{c + 1},{job}," + ",".join(
                f"{total[i]},{total[i] // 3}" for i in ifaces))
    (root / "ldms" / "procnetdev.csv").write_text(head + "\n" + "\n".join(rows) + "\n")
    return root


def slingshot(iface, k, in_job):
    """eno1 carries KB of management traffic; hsn0 GB/s during jobs."""
    return {"lo": 50, "eno1": 15_000, "hsn0": 3e10 if in_job else 0}[iface]


def settings(*patterns):
    return Settings().with_overrides(ldms={"netdev_interfaces": tuple(patterns)})


def test_default_interfaces_know_the_hpc_fabrics():
    defaults = Settings().ldms.netdev_interfaces
    assert LdmsColumns().netdev_interfaces == tuple(defaults)
    for iface in ("hsn0", "ib0", "opa0", "hfi1_0", "eno1", "ens3", "enp65s0", "eth0"):
        assert LdmsDecoder(columns=LdmsColumns(netdev_interfaces=tuple(defaults))).decode(
            "procnetdev", {"timestamp": 0.0, "ProducerName": "n", f"rx_bytes#{iface}": 0,
                           f"tx_bytes#{iface}": 0}) is None, iface  # counted: a first counter sample, no error
    assert [fabric_of(i) for i in ("hsn0", "ib0", "opa0", "hfi1_0", "bond0", "eno1", "lo", "veth9", "wlan0")] == [
        "slingshot", "infiniband", "omni-path", "omni-path", "bond", "ethernet", "loopback", "virtual", "other"]


def test_slingshot_feeds_bytes_in_by_default_and_coverage_says_which_interfaces(tmp_path):
    d = procnetdev(tmp_path, ("lo", "eno1", "hsn0"), slingshot)
    grid = load_sensor_grid(d, settings=Settings())
    # hsn0 (2 GB/s during the job) plus eno1 (1 KB/s): the job network's traffic, not the management NIC's
    assert grid.values[0, 3, BYTES_IN] == pytest.approx((3e10 + 15_000) / 15)
    net = grid.coverage.report()["netdev"]
    assert net["fed_by"] == ["hsn0", "eno1"] and net["nodes"] == 2 and net["nodes_measured_in_jobs"] == 2
    hsn, eno, lo = (net["interfaces"][i] for i in ("hsn0", "eno1", "lo"))
    assert (hsn["fabric"], hsn["counted"], eno["fabric"], eno["counted"], lo["counted"]) == (
        "slingshot", True, "ethernet", True, False)
    assert hsn["share"] > 0.9999 and 0 < eno["share"] < 1e-4
    assert hsn["bytes_in"] == pytest.approx(2 * 6 * 3e10) and hsn["bytes_out"] == pytest.approx(2 * 6 * 1e10)
    assert net["busiest_left_out"] == {} and not any("bytes_in" in w for w in grid.coverage.warnings())


def test_a_left_out_job_network_is_named_in_a_warning(tmp_path):
    d = procnetdev(tmp_path, ("lo", "eno1", "hsn0"), slingshot)
    grid = load_sensor_grid(d, settings=settings(*OLD_DEFAULT))
    assert grid.values[0, 3, BYTES_IN] == pytest.approx(15_000 / 15)  # what the site got: the management NIC
    net = grid.coverage.report()["netdev"]
    assert net["fed_by"] == ["eno1"] and net["busiest_left_out"] == {"hsn0": ["c1", "c2"]}
    (warning,) = [w for w in grid.coverage.warnings() if w.startswith("bytes_in/bytes_out")]
    assert "hsn0 (slingshot, 100% of the traffic)" in warning and "during jobs on 2 of 2 nodes (c1, c2)" in warning
    assert "the values come from eno1 (<1%)" in warning and "add 'hsn*'" in warning
    # the dry run reports the same, with the [ldms] of --config
    cfg = tmp_path / "site.toml"
    cfg.write_text("[ldms]\nnetdev_interfaces = [" + ", ".join(f'"{p}"' for p in OLD_DEFAULT) + "]\n")
    r = runner.invoke(app, ["replay", str(d), "--dry-run", "--json", "--config", str(cfg)],
                      env={"HPCGUARD_CONFIG": ""})
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["coverage"]["netdev"]["busiest_left_out"] == {"hsn0": ["c1", "c2"]}
    assert warning in out["coverage_warnings"]
    assert "hsn0" not in " ".join(dry_run([d])["coverage_warnings"])  # the default list counts it


def test_busiest_during_jobs_not_over_the_day(tmp_path):
    def backup_at_night(iface, k, in_job):  # eno1 moves more overall (a backup before the job), hsn0 during it
        return {"eno1": 5e9 if not in_job else 1e3, "ib0": 2e8 if in_job else 0}[iface]

    d = procnetdev(tmp_path, ("eno1", "ib0"), backup_at_night, steps=10, job_from=5)
    net = load_sensor_grid(d, settings=settings("eno*")).coverage.report()["netdev"]
    assert net["busiest_left_out"] == {"ib0": ["c1", "c2"]} and net["interfaces"]["ib0"]["share"] > 0.99
    # without job ids the whole recording counts, and the backup makes eno1 the busiest: no warning
    no_jobs = procnetdev(tmp_path / "nojobs", ("eno1", "ib0"), backup_at_night, steps=10, job_from=99)
    net = load_sensor_grid(no_jobs, settings=settings("eno*")).coverage.report()["netdev"]
    assert net["nodes_measured_in_jobs"] == 0 and net["busiest_left_out"] == {}


def test_a_bond_over_counted_members_and_container_interfaces_are_not_named(tmp_path):
    def bonded(iface, k, in_job):
        member = 1e9 if in_job else 1e3
        return {"eth0": member, "eth1": member, "bond0": 2 * member, "veth1a2b": 9e9, "docker0": 9e9}[iface]

    d = procnetdev(tmp_path, ("eth0", "eth1", "bond0", "veth1a2b", "docker0"), bonded)
    grid = load_sensor_grid(d, settings=Settings())
    net = grid.coverage.report()["netdev"]
    assert sorted(net["fed_by"]) == ["eth0", "eth1"]
    assert (net["interfaces"]["bond0"]["fabric"], net["interfaces"]["bond0"]["counted"]) == ("bond", False)
    assert net["interfaces"]["veth1a2b"]["fabric"] == "virtual" and net["busiest_left_out"] == {}
    # the bond is not counted twice: bytes_in is its members' sum
    assert grid.values[0, 3, BYTES_IN] == pytest.approx(2e9 / 15)


def test_train_and_evaluate_failure_take_config(tmp_path):
    d = procnetdev(tmp_path / "site", ("lo", "eno1", "hsn0"), slingshot)
    (d / "failures.csv").write_text(f"time,node\n{T0 + 60},c1\n")
    cfg = tmp_path / "site.toml"
    cfg.write_text("[ldms]\nnetdev_interfaces = [\"eno*\"]\n")
    env = {"HPCGUARD_CONFIG": "", "HPCGUARD_CACHE_DIR": str(tmp_path / "cache")}
    train = ["train", "failure", "--features", "paper", "--data", str(d), "--out", str(tmp_path / "m")]
    r = runner.invoke(app, train + ["--config", str(cfg)], env=env)
    # no IPMI at all: refused (exit 2), after the coverage warnings of the loader under --config
    assert r.exit_code == 2 and "--allow-missing" in r.output
    assert "hsn0 (slingshot" in r.stderr and "add 'hsn*'" in r.stderr
    r = runner.invoke(app, train, env=env)
    assert r.exit_code == 2 and "hsn0" not in r.stderr
    r = runner.invoke(app, train + ["--config", str(tmp_path / "missing.toml")], env=env)
    assert r.exit_code == 2 and "not found" in r.output
    r = runner.invoke(app, ["evaluate", "failure", "--model", str(tmp_path / "m"), "--data", str(d),
                            "--config", str(tmp_path / "missing.toml")], env=env)
    assert r.exit_code == 2 and "not found" in r.output and "missing.toml" in r.output
    assert np.isfinite(load_sensor_grid(d).values[..., BYTES_IN]).any()
