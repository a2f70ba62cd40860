"""decide: node warnings → actions, reading the jobs and spare pool *at the sample time*.

A node's warning episode starts with its first warning and ends after
``policy.quiet_minutes`` of sample time without one.  At an episode's start the agent
waits (bounded) for the job stream's watermark to pass the warning's sample time, then
asks the policy with the job whose run contains that time
(``JobTimeline.job_at``) and FARS's spare pool at that time
(``models.policy.spare_pool_at``: idle nodes − warned nodes − the queue head's
reservation).  Action ids derive from the trigger (model, node, sample time), so a
replay repeats them; ``time`` is the trigger's sample time, ``trigger_time`` the wall
time its sample reached Kafka (latency only).

Exactly once across a kill -9 (``streams/output_log.py``): a batch's actions are
delivered before the nodes' episodes (with the offset of the newest prediction they
hold) and the partition's mark go to the ``node-warnings`` changelog; after a restart,
redelivered predictions an episode holds already are skipped, and actions published
after the mark are read back and not published again.
"""
from __future__ import annotations

import faust

from hpcguard.models.actions import action_id
from hpcguard.models.policy import migration_claim, spare_pool_at
from hpcguard.streams import metrics
from hpcguard.streams.decisions import hot_spares, policy_for
from hpcguard.streams.output_log import OutputLog, deliver
from hpcguard.streams.topics import out

BATCH, WITHIN_S = 500, 0.05


def make_action(a: dict, trigger: str, time: float, trigger_time: float | None) -> dict:
    """One decided action as published; its id is derived from what triggered it."""
    return {"action_id": action_id(a["kind"], a.get("job_id"), a.get("nodes", []), trigger), "kind": a["kind"],
            "source": a["source"], "reason": a.get("reason", {}), "time": time, "job_id": a.get("job_id"),
            "nodes": list(a.get("nodes", [])), "deadline": a.get("deadline"), "trigger_time": trigger_time, "v": 1}


def emit_action(app: faust.App, a: dict, trigger: str, key: str, time: float, trigger_time: float | None) -> None:
    """Publish one decided action (without waiting for the broker)."""
    action = make_action(a, trigger, time, trigger_time)
    metrics.count_action(action)
    app.hpc.plumbing.publish(out(app, "actions"), action["job_id"] or key, action)


def register(app: faust.App) -> None:
    hpc = app.hpc
    pipe, door, warnings, view = hpc.pipeline, hpc.plumbing, hpc.tables.warnings, hpc.cluster
    cluster_topic, actions_topic = out(app, "cluster"), out(app, "actions")
    outputs = OutputLog(app, warnings, hpc.names.actions)
    published: set[str] = set()  # action ids read back after a restart: not published again
    if pipe.policy is None:
        pipe.policy = policy_for(hpc.settings)
    quiet_s = 60.0 * hpc.settings.policy.quiet_minutes
    step_days = hpc.settings.worker.grid_s / 86400.0  # one prediction judges one grid step of its node
    held = hot_spares(hpc.settings)  # nodes no batch job takes: spare for migrations whenever idle

    @app.on_partitions_revoked.connect
    async def forget(sender, revoked, **kwargs) -> None:
        """A rebalance: partitions may come back with episodes another worker wrote; restore them anew."""
        outputs.forget()

    @app.agent(hpc.topics.predictions, name="decide")
    async def decide(stream: faust.StreamT) -> None:
        async for events in stream.take_events(BATCH, within=WITHIN_S):
            metrics.RECORDS_IN.labels(hpc.names.predictions).inc(len(events))
            for partition in {ev.message.partition for ev in events}:
                published.update(str(a.get("action_id")) for a in await outputs.resume(partition))
            starts: list[tuple[dict, object]] = []
            touched: dict[str, int] = {}  # node → changelog partition
            for ev in events:
                source, offset, partition = ev.message.topic, ev.message.offset, ev.message.partition
                with door.guard(source, ev.value, offset):
                    p = door.decode("NodePrediction", ev.value, source, offset)
                    if p is None:
                        continue
                    node, t = p["node"], p.get("sample_time") or p["time"]
                    state = warnings.get(node) or {}
                    if offset <= state.get("applied", -1):
                        continue  # redelivered after a restart: the recovered episode holds it already
                    metrics.NODE_DAYS.labels(p["model"]).inc(step_days)
                    active = state.get("episode")
                    touched[node] = partition
                    if not p["warn"]:
                        if active and t - active["last_warn"] > quiet_s:
                            active = None  # the warning episode is over
                        warnings.data[node] = {"applied": offset, "episode": active}
                        continue
                    episode = {"first_warn": active["first_warn"] if active else t, "last_warn": t}
                    view.apply_cluster({"node": node, **episode})
                    # other workers learn of an episode at its start and then every quiet_s / 2 of sample time
                    shared = active.get("shared", -float("inf")) if active else -float("inf")
                    if t - shared >= quiet_s / 2:
                        door.publish(cluster_topic, node, {"node": node, **episode, "v": 1})
                        shared = t
                    warnings.data[node] = {"applied": offset, "episode": {**episode, "shared": shared}}
                    if not active:
                        metrics.WARNING_EPISODES.labels(p["model"]).inc()
                        starts.append((p, ev))
            decided: list[tuple[str, dict]] = []
            for p, ev in starts:
                with door.guard(ev.message.topic, ev.value, ev.message.offset):
                    t = p.get("sample_time") or p["time"]
                    joined = await hpc.job_wait.until(t)
                    job = view.timeline.job_at(p["node"], t)
                    busy = view.warned_at(t, quiet_s) | view.claimed_at(t)
                    spare = spare_pool_at(view.timeline, view.nodes_at(t), busy, t, held)
                    for a in pipe.policy(p, job, spare, pipe.predictor):
                        claim = migration_claim(a, spare, job, t)
                        if claim is not None:  # the spare is the migrated job's until it ends: no other job's
                            view.apply_cluster(claim)
                            door.publish(cluster_topic, claim["node"], claim)
                        a = {"source": p["model"], "deadline": t + 60 * p["lead_minutes"],
                             **{k: v for k, v in a.items() if v is not None or k == "job_id"}}
                        if not joined:
                            a["reason"] = {**a.get("reason", {}), "job_join": "timeout"}
                        action = make_action(a, f"{p['model']}@{p['node']}@{t:.0f}", t, p.get("ingest_time"))
                        if action["action_id"] in published:
                            continue  # published before the restart
                        metrics.count_action(action)  # with its estimated node-hours saved and spent
                        decided.append((action["job_id"] or p["node"], action))
            # why this order: an episode persisted before its action was delivered would lose the action in a crash
            outputs.sent(await deliver(app, actions_topic, decided))
            for node, partition in touched.items():
                warnings.send_changelog(partition, node, warnings.data[node])
            for partition in set(touched.values()):
                outputs.mark(partition)
