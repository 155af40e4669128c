"""Admission live (issue 21, part 6): `xce submit` against a controller with real
agents refuses a job no configured host nor template could ever run, saying what is
missing, with exit status 1 and no job id taken; a job that could run is accepted
and runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from live import LiveCluster, live_cluster, skip_unless_linux

pytestmark = skip_unless_linux

CONFIG = """\
cluster: t
session_interval: 0.2
resources:
  mem: {type: numeric, consumable: true}
  vcs: {type: numeric, consumable: true, shared: true}
hosts:
  - {name: n1, slots: 2, resources: {mem: 8000}}
  - {name: n2, slots: 2, resources: {mem: 4000}, gpus: 1}
shared:
  vcs: {total: 1}
queues:
  - {name: normal, priority: 30}
catalog:
  countables:
    - {resource: vcs, max_borrow: 2}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveCluster]:
    root = tmp_path_factory.mktemp("live-admission")
    with live_cluster(root, CONFIG, users=("alice",), agents=("n1", "n2")) as cluster:
        cluster.start_controller()
        cluster.start_agent("n1")
        cluster.start_agent("n2")
        yield cluster


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-R", "select[mem>20000]"),
         "No host or template satisfies select[mem>20000] (largest mem: 8000 on n1)"),
        (("-R", "rusage[vcs=4]"),
         "job requests 4 vcs (shared); the most vcs can ever have is 3 "
         "(total 1 + 2 borrowable)"),
        (("-gpu", "num=2"),
         "job requests 2 GPUs per host; the most any host or template has is 1"),
        (("-n", "2", "-R", "select[ngpus>0] span[hosts=1] rusage[mem=3000]"),
         "no host or template under select[ngpus>0] can hold 2 slot(s) of this job "
         "with mem=6000"),
    ],
    ids=["select", "shared-beyond-borrow", "gpus", "select-and-rusage"],
)
def test_submit_refuses_what_nothing_could_ever_run(
    cluster: LiveCluster, args: tuple[str, ...], message: str
) -> None:
    before = [j["id"] for j in cluster.jobs()]
    done = cluster.xce("submit", *args, "--", "true", who="alice")
    assert (done.returncode, done.stdout) == (1, ""), done
    assert done.stderr.strip() == f"xce: {message}"
    assert [j["id"] for j in cluster.jobs()] == before, "a refused job takes no id"


def test_what_could_run_is_accepted_and_runs(cluster: LiveCluster) -> None:
    # vcs=3 needs 2 borrowed tokens: no provisioner lends any here, so it pends for
    # them (with demand), never as a job that can never run.
    tokens = cluster.xce(
        "submit", "-R", "select[mem>=8000] rusage[vcs=3]", "--", "true"
    )
    assert tokens.returncode == 0, tokens
    waiting = max(j["id"] for j in cluster.jobs())
    job = cluster.wait_state(waiting, "PEND")
    assert job["pend_kind"] != "never", job
    ok = cluster.xce("submit", "-R", "select[ngpus>0]", "--", "true")  # (a user of n2)
    assert ok.returncode == 0, ok
    runs = max(j["id"] for j in cluster.jobs())
    assert runs == waiting + 1
    cluster.wait_state(runs, "DONE", timeout=30)


def test_several_r_options_are_joined_as_lsf_does(cluster: LiveCluster) -> None:
    done = cluster.xce("submit", "-n", "2", "-R", "rusage[mem=3000]", "-R", "span[hosts=1]",
                       "--", "true")
    assert done.returncode == 0, done
    job = cluster.job(max(j["id"] for j in cluster.jobs()))
    assert job["res"] == "rusage[mem=3000] span[hosts=1]", job
    both = cluster.xce("submit", "-R", "select[mem>1]", "-R", "select[mem>2]", "--", "true")
    assert (both.returncode, both.stdout) == (1, ""), both
    assert "select" in both.stderr, "two select[] sections: the joined string is refused"
