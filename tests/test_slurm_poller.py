"""The Slurm poller's publishing rules, on snapshots (the real controller: tests/test_slurm_e2e.py)."""
import threading

from hpcguard.connectors.slurm_poller import SlurmPoller
from hpcguard.models.labels import node_state_labels


def node(name, state, reason=""):
    flags = set(state.split("+"))
    return {"name": name, "state": state, "flags": flags, "reason": reason}


class Snapshots(SlurmPoller):
    """A poller whose controller is a list of ``(jobs, nodes)`` snapshots; an exception is a failed poll."""

    def __init__(self, snapshots):
        super().__init__(runner=None, use_json=True)
        self.snapshots = list(snapshots)

    def poll(self, now=None):
        jobs, nodes = self.snapshots.pop(0)
        if isinstance(jobs, Exception):
            raise jobs
        return self.diff(jobs, nodes, now=now)


def test_node_states_open_change_and_close():
    p = SlurmPoller(runner=None, use_json=True)
    first = p.diff([], [node("a", "IDLE"), node("b", "DRAIN+IDLE", "bad DIMM")], now=10.0)
    assert [(e["nodes"], e["state"], e["end_time"]) for e in first if e["event"] == "node-state"] == \
        [(["b"], "DRAIN+IDLE", None)]
    assert not [e for e in p.diff([], [node("a", "IDLE"), node("b", "DRAIN+IDLE", "bad DIMM")], now=20.0)
                if e["event"] == "node-state"]  # nothing changed: nothing said
    worse = [e for e in p.diff([], [node("a", "IDLE"), node("b", "DOWN+DRAIN", "bad DIMM")], now=30.0)
             if e["event"] == "node-state"]
    assert [(e["state"], e["time"], e["end_time"]) for e in worse] == [("DRAIN+IDLE", 10.0, 30.0),
                                                                       ("DOWN+DRAIN", 30.0, None)]
    back = [e for e in p.diff([], [node("a", "IDLE"), node("b", "IDLE")], now=90.0) if e["event"] == "node-state"]
    assert [(e["state"], e["time"], e["end_time"]) for e in back] == [("DOWN+DRAIN", 30.0, 90.0)]
    # the labels: a drain for a DIMM is weak evidence, the down state stops the node until it is back
    (label,) = node_state_labels(worse[1])
    assert (label["stopped"], label["confidence"]) == (True, 0.9)
    assert node_state_labels(back[0])[0]["until"] == 90.0


def test_run_publishes_what_the_worker_reads_and_survives_a_failed_poll():
    job = {"job_id": "7", "state": "RUNNING", "nodes": ["a"], "num_nodes": 1, "user": "u", "partition": "p",
           "name": "x", "time_limit_s": 600.0, "submit_time": 1.0, "start_time": 2.0, "end_time": None,
           "restarts": 0, "reason": ""}
    p = Snapshots([([job], [node("a", "ALLOCATED"), node("b", "DOWN", "Not responding")]),
                   (RuntimeError("slurmctld timed out"), None),
                   ([], [node("a", "IDLE"), node("b", "IDLE")])])
    sent, errors = [], []
    failed = p.run(lambda key, event: sent.append((key, event["event"])), interval_s=0.0, polls=3,
                   on_error=errors.append, stop=threading.Event())
    assert failed == 1 and errors == ["slurmctld timed out"]
    # job events keyed by job, node states by node, a progress marker after each good poll; no node sets
    assert sent == [("7", "start"), ("b", "node-state"), ("", "progress"),
                    ("7", "end"), ("b", "node-state"), ("", "progress")]
