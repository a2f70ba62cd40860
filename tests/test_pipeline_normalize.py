"""Through the real broker: raw LDMS JSON rows, IPMI envelopes, Telegraf line protocol and
sacct envelopes become canonical records; malformed input becomes counted dead letters
with a reason, and the worker keeps going."""
import time

import pytest
from kafka import KafkaConsumer, TopicPartition

from _pipeline import WorkerProcess, samples_of
from hpcguard.connectors.kafka import kafka_python_config

pytestmark = pytest.mark.broker

T0 = 1679682808.0
HEADER = "JobID|JobName|User|Partition|NNodes|NodeList|Submit|Start|End|Timelimit|State|ExitCode"
FREEIPMI = ("ID,Name,Type,Reading,Units,Event\n3,CPU1 Temp,Temperature,57.00,C,'OK'\n"
            "9,FAN1A,Fan,6720.00,RPM,'OK'\n7,Vcore,Voltage,1.09,V,'OK'\n5,PS1 Temp,Temperature,38.00,C,'OK'\n")


def test_raw_inputs_normalize_and_bad_ones_dead_letter(kafka_settings, tmp_path):
    with WorkerProcess(kafka_settings, tmp_path, roles=["normalize"]) as w:
        t = w.topics
        lustre = t.ldms[0]
        rows = [("n1", {"timestamp": T0 + k, "component_id": 1, "ProducerName": "n1", "job_id": 7,
                         "read_bytes": 1000 * k * k, "write_bytes": 500 * k}) for k in range(3)]
        w.produce(lustre, rows + [("n1", b"{broken"), ("n1", {"timestamp": "soon", "ProducerName": "n1"})])
        w.produce(t.raw_ipmi, [
            ("n2", {"format": "freeipmi-csv", "host": "n2", "time": T0, "text": FREEIPMI, "source": "ipmi/n2.csv:1"}),
            ("n3", b"ipmi_sensor,host=n3,name=cpu1_temp,status_code=ok,status_desc=ok,unit=degrees_c value=45 "
                   b"1679682808000000000"),
            ("n4", {"format": "no-such-format", "host": "n4", "time": T0, "text": "x"}),
        ])
        w.produce(t.raw_slurm, [
            ("42", {"format": "sacct-parsable2", "header": HEADER, "event": "start", "time": T0,
                    "line": "42|lmp|alice|batch|2|n[1-2]|2023-03-24T18:30:00|2023-03-24T18:33:28|Unknown|"
                            "01:00:00|RUNNING|0:0", "source": "slurm/sacct.txt:2"}),
            ("43", {"format": "sacct-parsable2", "header": HEADER, "event": "start", "time": T0,
                    "line": "43|x|bob|batch|1|n[1-", "source": "slurm/sacct.txt:3"}),
        ])
        io = samples_of(w.wait_for(t.samples_io, lambda r: len(samples_of(r)) >= 2))
        ipmi = w.wait_for(t.samples_ipmi, lambda r: len(r) >= 2)
        jobs = w.wait_for(t.jobs, lambda r: len(r) >= 1)
        dead = w.wait_for(t.dlq, lambda r: len(r) >= 4)
        committed = _committed(kafka_settings, f"app-{w.prefix}-ldms", TopicPartition(lustre, 0), want=5)

    # counters → rates: (1000·k²) per second between consecutive rows
    assert [s["values"]["io_read_bytes"] for s in io] == [1000.0, 3000.0]
    assert all(s["values"]["io_write_bytes"] == 500.0 and s["ingest_time"] for s in io)
    by_node = {s["node"]: s["values"] for s in ipmi}
    assert by_node["n2"] == {"cpu_temp": 57.0, "cpu_fan_rpm": 6720.0, "cpu_voltage": 1.09, "psu_temp": 38.0}
    assert by_node["n3"] == {"cpu_temp": 45.0}  # bare Telegraf line protocol
    assert jobs[0]["job_id"] == "42" and jobs[0]["nodes"] == ["n1", "n2"] and jobs[0]["time_limit_s"] == 3600
    sources = sorted(d["source"] for d in dead)
    assert sources == sorted([lustre, lustre, t.raw_ipmi, t.raw_slurm])
    assert all(d["reason"] and d["error_kind"] and d["payload"] for d in dead)
    assert {d["offset"] for d in dead if d["source"] == lustre} == {3, 4}
    assert committed == 5  # the LDMS batch loop committed all five rows once their outputs were sent
    assert any(d["line"] == 3 for d in dead if d["source"] == t.raw_slurm)


def _committed(kafka_settings, group: str, tp: TopicPartition, want: int, timeout_s: float = 30.0) -> int | None:
    """The group's committed offset of ``tp`` once it reaches ``want`` (or what it is at the timeout)."""
    c = KafkaConsumer(**kafka_python_config(kafka_settings), group_id=group, enable_auto_commit=False)
    try:
        deadline = time.monotonic() + timeout_s
        while (got := c.committed(tp)) != want and time.monotonic() < deadline:
            time.sleep(0.5)
        return got
    finally:
        c.close()
