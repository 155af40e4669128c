"""The parts of job arrays outside the scheduler (issue 21): what an element's process
gets (LSB_JOBINDEX, %J and %I), how the controller expands a `-J` array, and how the
CLI names and shows elements (`ID[INDEX]`, `xce jobs -A`)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from xce.agent.shim import job_environment, job_files
from xce.cli.job_refs import JOB_REF, array_rows, shown_id, shown_name
from xce.controller.arrays import elements_of
from xce.controller.problems import ApiProblem
from xce.model.api import JobInfo, Launch
from xce.model.jobs import JobSpec


def launch(**fields: object) -> Launch:
    base: dict[str, object] = {"job": 1048, "user": "alice", "command": ["./run.sh"],
                               "hosts": {"n01": 1}, "run": True, "name": "sweep"}
    return Launch(**{**base, **fields})  # type: ignore[arg-type]


def test_an_element_gets_its_index_and_lsf_s_array_id_and_name() -> None:
    env = job_environment(launch(array=1045, index=3))
    assert (env["LSB_JOBINDEX"], env["LSB_JOBID"], env["LSB_JOBNAME"], env["XCE_JOBID"]) == (
        "3", "1045", "sweep[3]", "1048"
    ), "LSB_JOBID is the array's (LSF); XCE_JOBID the element's own, for xce commands"
    plain = job_environment(launch())
    assert "LSB_JOBINDEX" not in plain and plain["LSB_JOBID"] == "1048"


def test_percent_j_is_the_array_id_and_percent_i_the_index_in_output_paths(tmp_path: Path):
    files = job_files(launch(array=1045, index=3, output="out.%J.%I", error="err.%I",
                             cwd=str(tmp_path)), tmp_path, None)
    assert (files.stdout, files.stderr) == (str(tmp_path / "out.1045.3"),
                                            str(tmp_path / "err.3"))
    plain = job_files(launch(output="o.%J.%I", cwd=str(tmp_path)), tmp_path, None)
    assert plain.stdout == str(tmp_path / "o.1048.0"), "%I of a job of no array is 0"


def test_the_controller_expands_an_array_into_elements_of_id_array_plus_index() -> None:
    spec = JobSpec(id=1045, user="alice", name="sweep[1-10:4,20]%2", command=["x"])
    elements = elements_of(spec, 1000)
    assert [(e.id, e.index, e.array, e.array_limit, e.name) for e in elements] == [
        (1046, 1, 1045, 2, "sweep"), (1050, 5, 1045, 2, "sweep"),
        (1054, 9, 1045, 2, "sweep"), (1065, 20, 1045, 2, "sweep"),
    ]
    with pytest.raises(ApiProblem) as caught:
        elements_of(JobSpec(id=1, name="a[1-20]"), 10)
    assert (caught.value.status, str(caught.value.message)) == (
        400, "job array error at column 5: index 20 exceeds max_job_array_size 10"
    )


def test_job_ids_on_the_command_line_are_id_or_id_index() -> None:
    assert JOB_REF.convert("1045", None, None) == (1045, None)
    assert JOB_REF.convert("1045[3]", None, None) == (1045, 3)
    for bad in ("1045[", "x", "1045[0]", "[3]"):
        with pytest.raises(click.BadParameter):
            JOB_REF.convert(bad, None, None)


def info(job: int, state: str, array: int = 0, index: int = 0, name: str = "sweep") -> JobInfo:
    return JobInfo(id=job, user="alice", queue="normal", state=state, n=1, res="",
                   name=name, command=["x"], submit_time=0.0, array=array, index=index)


def test_elements_show_as_id_index_and_arrays_as_one_line_by_state() -> None:
    jobs = [info(1046, "DONE", 1045, 1), info(1047, "RUN", 1045, 2),
            info(1048, "PEND", 1045, 3), info(1050, "EXIT", 1045, 5),
            info(1051, "PSUSP", 1045, 6), info(1052, "USUSP", 1045, 7),
            info(7, "RUN", name="post")]
    assert (shown_id(jobs[1]), shown_name(jobs[1])) == ("1045[2]", "sweep[2]")
    assert (shown_id(jobs[-1]), shown_name(jobs[-1])) == ("7", "post")
    assert array_rows(jobs) == [
        ["1045", "sweep[1-3,5-7]", "alice", "6", "1", "1", "1", "1", "0", "1", "1"]
    ], "JOBID ARRAY_SPEC OWNER NJOBS PEND DONE RUN EXIT SSUSP USUSP PSUSP, as bjobs -A"
