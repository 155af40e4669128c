"""A job lost with its host: requeued or exited per its queue (one rule for the live
controller and the simulator)."""

from __future__ import annotations

from xce.config import load_config_text
from xce.model.events import JobFinished, JobRequeued
from xce.model.jobs import JobSpec
from xce.sched import SchedulerState
from xce.sched.loss import LOST_EXIT_CODE, lost_job

CLUSTER = """
hosts:
  - {name: a, slots: 1}
queues:
  - {name: normal, priority: 1}
  - {name: once, priority: 1, requeue_on_host_loss: false}
"""


def test_requeued_or_exited_per_queue() -> None:
    state = SchedulerState(load_config_text(CLUSTER))
    assert lost_job(state, JobSpec(id=1, queue="normal"), 5.0, "host a lost") == JobRequeued(
        1, 5.0, "host a lost")
    assert lost_job(state, JobSpec(id=2, queue="once"), 5.0, "host a lost") == JobFinished(
        2, 5.0, LOST_EXIT_CODE, None, "host a lost")
