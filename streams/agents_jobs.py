"""jobs: job events → the cluster view's job timeline; node-keyed job events; checkpoint plans;
``internal.cluster`` at the door.

Every worker keeps the whole job timeline (:class:`~hpcguard.streams.cluster_view.ClusterView`,
read from all partitions of ``jobs``); ``app.hpc.job_wait`` (a
:class:`~hpcguard.streams.liveness.StreamWait`, bounded by ``worker.job_wait_s`` wall seconds
since the job stream last moved) waits until the job
stream's watermark has passed an event time, so a decision reads the jobs *at its sample
time*.  This agent checks each job event at the door (bad ones are dead-lettered), applies
it to this worker's view at once, re-publishes it keyed by node (``internal.node-jobs``)
and publishes a job's periodic checkpoint plan at its start (``checkpoint.plans``) and, for a job that
ended ``NODE_FAIL``, a failure label per node (``labels``; at least once, by ``label_id``).
CanarIO reads jobs (and their scripts) from the view's timeline at its windows' times.

``internal.cluster`` (nodes' first sample times, warning episodes) is read whole by every
worker's broadcast reader, which skips what fails the door; the ``cluster`` agent reads it
as a group member, so the one owner of each partition dead-letters those records, as the
``jobs`` agent does for job events.
"""
from __future__ import annotations

import faust

from hpcguard.models.jobs import NODE_STATE, PROGRESS
from hpcguard.models.labels import node_fail_labels, node_state_labels
from hpcguard.streams import metrics
from hpcguard.streams.topics import out

BATCH, WITHIN_S = 500, 0.05


def check_cluster_record(app: faust.App, kind: str, raw: bytes) -> dict:
    """The door's checks for what the cluster view reads (``JobEvent`` or an ``internal.cluster`` record)."""
    door = app.hpc.plumbing
    data = door.loads(raw)
    if kind == "JobEvent":
        return door.check(kind, data)
    # why learn=False: a name on an internal topic must not take a place in the bounded node inventory
    return door.check("ClusterUpdate", data, learn=False)


def register(app: faust.App) -> None:
    hpc = app.hpc
    pipe, door, view = hpc.pipeline, hpc.plumbing, hpc.cluster
    node_jobs, plans, labels = out(app, "node_jobs"), out(app, "plans"), out(app, "labels")
    inventory = door.inventory

    def machine_nodes(t: float) -> int:
        """The machine's node count for a plan at ``t`` (Eq. 3.14's N, unless ``policy.system_nodes`` is set).

        A configured hostlist (``door.nodes``) is the same whenever the job stream is read; without
        one, the nodes whose first sample this worker has seen by ``t`` — which depends on how far
        the telemetry had been read when the job event arrived.
        """
        if inventory is not None and inventory.fixed:
            return len(inventory.known)
        return len(view.nodes_at(t))

    @app.agent(hpc.topics.cluster, name="cluster")
    async def cluster(stream: faust.StreamT) -> None:
        """``internal.cluster`` at the door: what fails is dead-lettered here, by the partition's owner."""
        async for events in stream.take_events(BATCH, within=WITHIN_S):
            metrics.RECORDS_IN.labels(hpc.names.cluster).inc(len(events))
            for ev in events:
                source, offset = ev.message.topic, ev.message.offset
                with door.guard(source, ev.value, offset):  # a full pending set: unknown_node
                    record = door.decode("ClusterUpdate", ev.value, source, offset, learn=False)
                    if record is not None:
                        view.apply_cluster(record, shared=True)  # as the broadcast reader: idempotent

    @app.agent(hpc.topics.jobs, name="jobs")
    async def jobs(stream: faust.StreamT) -> None:
        async for events in stream.take_events(BATCH, within=WITHIN_S):
            metrics.RECORDS_IN.labels(hpc.names.jobs).inc(len(events))
            view.timeline.evict()  # bounded: jobs ended long before the job stream's watermark
            for ev in events:
                source, offset = ev.message.topic, ev.message.offset
                with door.guard(source, ev.value, offset):
                    event = door.decode("JobEvent", ev.value, source, offset)
                    if event is None:
                        continue
                    view.add_job(event, ev.message.partition)
                    if event["event"] == PROGRESS:
                        continue  # it only moves the job stream's watermark
                    for label in node_fail_labels(event) + node_state_labels(event):  # Slurm's word: a node failed
                        metrics.LABELS.labels("failure", label["source"]).inc()
                        door.publish(labels, label["node"], {**label, "v": 1})
                    if event["event"] == NODE_STATE:
                        continue  # a node's Slurm state names no job: its labels are all it gives
                    job_id = event["job_id"]
                    for node in event.get("nodes") or []:
                        door.publish(node_jobs, node, event)
                    if event["event"] == "start" and pipe.plan is not None and event.get("time_limit_s"):
                        plan = pipe.plan(event, max(machine_nodes(event["time"]), len(event.get("nodes") or [])))
                        door.publish(plans, job_id, {**plan, "time": event["time"], "v": 1})
