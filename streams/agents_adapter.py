"""adapter: actions → the scheduler adapter behind the safety governor → acks.

Adapters run scheduler commands, so they run off the event loop; an adapter that raises
gives a ``failed`` ack, never a dead worker.
"""
from __future__ import annotations

import asyncio
import logging
import time

import faust

from hpcguard.streams import metrics
from hpcguard.streams.app import out

log = logging.getLogger("hpcguard.worker")


def register(app: faust.App) -> None:
    hpc = app.hpc
    pipe, door = hpc.pipeline, hpc.plumbing
    if pipe.adapter is None:
        return
    acks = out(app, "acks")

    @app.task
    async def reconcile() -> None:
        """Finish the actions an interrupted worker left executing (the governor's ledger)."""
        finish = getattr(pipe.adapter, "reconcile", None)
        if finish is None:
            return
        for ack in await asyncio.get_running_loop().run_in_executor(None, finish):
            ack = ack.as_dict()
            metrics.ACKS.labels(ack.get("kind", ""), ack["status"]).inc()
            door.publish(acks, ack["action_id"], {**ack, "v": 1})

    @app.agent(hpc.topics.actions, name="scheduler-adapter")
    async def scheduler_adapter(stream: faust.StreamT) -> None:
        loop = asyncio.get_running_loop()
        async for events in stream.take_events(100, within=0.05):
            metrics.RECORDS_IN.labels(hpc.names.actions).inc(len(events))
            for ev in events:
                with door.guard(ev.message.topic, ev.value, ev.message.offset):
                    action = door.decode("Action", ev.value, ev.message.topic, ev.message.offset)
                    if action is None:
                        continue
                    try:
                        ack = (await loop.run_in_executor(None, pipe.adapter.apply, action)).as_dict()
                    except Exception as exc:  # noqa: BLE001 — a worker never dies on one action
                        log.exception("adapter failed on %s", action["action_id"])
                        ack = {"action_id": action["action_id"], "status": "failed",
                               "adapter": getattr(pipe.adapter, "name", "?"), "time": time.time(),
                               "kind": action["kind"], "job_id": action.get("job_id"),
                               "nodes": action.get("nodes", []), "detail": f"adapter error: {exc}"}
                    metrics.ACKS.labels(ack.get("kind", ""), ack["status"]).inc()
                    door.publish(acks, ack["action_id"], {**ack, "v": 1})
