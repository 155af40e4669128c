"""Workloads for the simulator: SWF and YAML readers, transform, and the real traces."""

from __future__ import annotations

import csv
import gzip
import math
import re
import textwrap
import time
from itertools import pairwise
from pathlib import Path

import pytest

from xce.sim.workload import (
    Workload,
    WorkloadError,
    WorkloadJob,
    load_workload,
    read_swf,
    read_yaml_jobs,
    transform,
)

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
TRACE_FILES = sorted(TRACES.glob("*.swf.gz")) if TRACES.is_dir() else []


def rec(
    job: int | str,
    submit: float | str,
    run: float | str,
    alloc: int | str,
    *,
    req_procs: int = -1,
    req_time: float = -1,
    mem_kb: float = -1,
    user: int = 1,
    queue: int = -1,
) -> str:
    """One 18-field SWF record (unused fields -1)."""
    fields: list[object] = [
        job, submit, -1, run, alloc, -1, -1, req_procs, req_time, mem_kb, 1, user, -1, -1,
        queue, -1, -1, -1,
    ]
    return "  ".join(str(f) for f in fields)


HEADER = [
    "; Version: 2.2",
    "; Computer: Test cluster",
    "; Information: http://example.org/",
    ";              http://example.org/more",
    "; MaxNodes: 16 (batch partition; 32 total)",
    "; MaxProcs: 64",
    "; Queue:  0 interactive",
    "; Queue:  1 batch",
    ";",
]
RECORDS = [
    rec(10, 1010, 20, 2, user=4),  # before job 2 in the file, after it in (submit, id) order
    rec(1, 1000, 100, 4, user=3, queue=1, req_time=200, mem_kb=2048),
    rec(2, 1010, 50.5, -1, req_procs=8, user=3, queue=0),  # allocated unknown: requested
    rec(3, 1005, 10, 1, user=-1, queue=-1),
    rec(4, 1020, 0, 4),  # run time <= 0
    rec(5, 1020, -1, 4),  # run time <= 0
    rec(6, 1030, 10, -1, req_procs=-1),  # processors <= 0
    rec(7, -1, 10, 1),  # submit < 0
    rec(2, 1040, 10, 1),  # duplicate job number
    "; Note: a comment between records",
    "8 1050 1 2 3",  # malformed: 5 fields
    rec(9, 1060, "x", 1),  # malformed: not a number
    rec(11, "nan", 10, 1),  # malformed: not finite
    "",
    "   ",
]
EXPECTED_JOBS = [
    WorkloadJob(1, 0.0, 100.0, 4, "u3", "q1", mem_per_proc_mb=2.0, run_limit=200.0),
    WorkloadJob(3, 5.0, 10.0, 1, "nobody", ""),
    WorkloadJob(2, 10.0, 50.5, 8, "u3", "q0"),
    WorkloadJob(10, 10.0, 20.0, 2, "u4", ""),
]
EXPECTED_REASONS = {
    "run time <= 0": 2,
    "processors <= 0": 1,
    "submit < 0": 1,
    "duplicate job number": 1,
    "malformed": 3,
}


def swf_text(newline: str = "\n") -> str:
    return newline.join([*HEADER, *RECORDS]) + newline


def check_sample(w: Workload, name: str) -> None:
    assert w.name == name
    assert w.jobs == EXPECTED_JOBS
    assert w.skipped_reasons == EXPECTED_REASONS
    assert w.skipped == 8
    assert w.max_procs == 64
    assert w.max_nodes == 16
    assert w.header == {
        "Version": "2.2",
        "Computer": "Test cluster",
        "Information": "http://example.org/\nhttp://example.org/more",
        "MaxNodes": "16 (batch partition; 32 total)",
        "MaxProcs": "64",
        "Queue": "0 interactive\n1 batch",
        "Note": "a comment between records",
    }


# --- SWF -------------------------------------------------------------------------------


def test_plain_swf_gives_the_exact_jobs_and_counts_every_skip(tmp_path: Path) -> None:
    path = tmp_path / "trace.swf"
    path.write_text(swf_text(), encoding="utf-8")
    check_sample(read_swf(path), "trace")
    check_sample(load_workload(str(path)), "trace")


def test_gzipped_swf_is_recognised_by_name_and_by_magic_bytes(tmp_path: Path) -> None:
    data = gzip.compress(swf_text("\r\n").encode())
    named = tmp_path / "trace.swf.gz"
    named.write_bytes(data)
    check_sample(load_workload(named), "trace")
    disguised = tmp_path / "other.swf"  # gzip content under a plain name
    disguised.write_bytes(data)
    check_sample(read_swf(disguised), "other")


def test_swf_requested_time_is_the_run_limit_when_positive(tmp_path: Path) -> None:
    path = tmp_path / "limits.swf"
    path.write_text("\n".join([
        rec(1, 0, 100, 1, req_time=3600), rec(2, 0, 100, 1, req_time=0),
        rec(3, 0, 100, 1, req_time=-1), rec(4, 0, 100, 1, req_time=50.5),
    ]) + "\n")
    limits = {job.id: job.run_limit for job in read_swf(path).jobs}
    assert limits == {1: 3600.0, 2: None, 3: None, 4: 50.5}, (
        "field 9 (requested time) is the limit when > 0; a job past it keeps its run time"
    )


def test_max_procs_falls_back_to_max_nodes_and_is_none_without_header(tmp_path: Path) -> None:
    nodes_only = tmp_path / "nodes.swf"
    nodes_only.write_text("; MaxNodes: 256\n" + rec(1, 5, 10, 1) + "\n")
    w = read_swf(nodes_only)
    assert (w.max_procs, w.max_nodes) == (256, 256)
    assert w.jobs == [WorkloadJob(1, 0.0, 10.0, 1, "u1", "")]
    bare = tmp_path / "bare.swf"
    bare.write_text(rec(1, 5, 10, 1) + "\n" + rec(2, 7, 10, 1) + "\n")
    w = read_swf(bare)
    assert (w.max_procs, w.max_nodes, w.header) == (None, None, {})
    assert [j.submit for j in w.jobs] == [0.0, 2.0]
    unknown = tmp_path / "unknown.swf"
    unknown.write_text("; MaxProcs: -1\n; MaxNodes: many\n" + rec(1, 5, 10, 1) + "\n")
    assert (read_swf(unknown).max_procs, read_swf(unknown).max_nodes) == (None, None)


def test_submit_times_are_relative_to_the_earliest_job_even_out_of_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "unsorted.swf"
    path.write_text("\n".join([rec(1, 500, 10, 1), rec(2, 300, 10, 1), rec(3, 200, 1, 0)]))
    w = read_swf(path)  # job 3 (the earliest record) is skipped: it does not set the origin
    assert [(j.id, j.submit) for j in w.jobs] == [(2, 0.0), (1, 200.0)]
    assert w.skipped_reasons == {"processors <= 0": 1}


def test_header_only_and_all_skipped_files_are_empty_workloads(tmp_path: Path) -> None:
    header_only = tmp_path / "h.swf"
    header_only.write_text("; MaxProcs: 8\n")
    w = read_swf(header_only)
    assert (w.jobs, w.skipped, w.max_procs) == ([], 0, 8)
    all_skipped = tmp_path / "s.swf"
    all_skipped.write_text(rec(1, 0, 0, 1) + "\n")
    w = read_swf(all_skipped)
    assert (w.jobs, w.skipped, w.skipped_reasons) == ([], 1, {"run time <= 0": 1})


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("", 1),
        ("\n\njobs:\n  - {id: 1, run: 10}\n", 3),
        ("; just a remark without a key\nhello world\n", 1),
        ("1 2 3\n", 1),
    ],
)
def test_a_file_that_is_not_swf_at_all_is_an_error(
    tmp_path: Path, content: str, line: int
) -> None:
    path = tmp_path / "x.swf"
    path.write_text(content)
    with pytest.raises(WorkloadError) as err:
        read_swf(path)
    assert str(err.value) == (
        f"{path}:{line}: not an SWF file: no job record and no '; Key: value' header line"
    )
    assert (err.value.file, err.value.line) == (str(path), line)


def test_binary_and_broken_gzip_files_are_errors(tmp_path: Path) -> None:
    binary = tmp_path / "b.swf"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(WorkloadError, match="not an SWF file"):
        read_swf(binary)
    broken = tmp_path / "t.swf.gz"
    broken.write_bytes(gzip.compress(swf_text().encode())[:100])
    with pytest.raises(WorkloadError, match=rf"^{re.escape(str(broken))}:0: cannot decompress"):
        read_swf(broken)
    missing = tmp_path / "missing.swf"
    with pytest.raises(WorkloadError, match=rf"^{re.escape(str(missing))}:0: cannot read"):
        read_swf(missing)


def test_load_workload_refuses_unknown_suffixes(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(rec(1, 0, 1, 1))
    with pytest.raises(WorkloadError) as err:
        load_workload(path)
    assert str(err.value) == (
        f"{path}:0: unknown workload format "
        "(expected .swf, .swf.gz, .yaml, .yml, .jsonl or .jsonl.gz)"
    )
    assert isinstance(err.value, ValueError)


# --- YAML ------------------------------------------------------------------------------

YAML_WORKLOAD = """\
now: 5                       # a scenario's other keys are ignored
cluster_file: cluster.yaml
jobs:
  - {ids: "3-5", submit: 20, run: 100, n: 4, user: alice, queue: normal}
  - {id: 1, submit: 10, run: 50}
  - {id: 2, submit: 20, run: 5.5, mem_per_proc_mb: 512, requested_time: 60}
  - {id: 0, run: 1}
"""


def test_yaml_jobs_with_id_ranges_and_defaults(tmp_path: Path) -> None:
    path = tmp_path / "small.yaml"
    path.write_text(YAML_WORKLOAD)
    for w in (read_yaml_jobs(path), load_workload(str(path))):
        assert w.name == "small"
        assert w.jobs == [
            WorkloadJob(0, 0.0, 1.0, 1, "nobody", ""),
            WorkloadJob(1, 10.0, 50.0, 1, "nobody", ""),
            WorkloadJob(2, 20.0, 5.5, 1, "nobody", "", 512.0, 60.0),
            WorkloadJob(3, 20.0, 100.0, 4, "alice", "normal"),
            WorkloadJob(4, 20.0, 100.0, 4, "alice", "normal"),
            WorkloadJob(5, 20.0, 100.0, 4, "alice", "normal"),
        ]
        assert (w.skipped, w.skipped_reasons, w.max_procs, w.max_nodes, w.header) == (
            0, {}, None, None, {}
        )


def test_yaml_run_limit_and_its_older_spelling(tmp_path: Path) -> None:
    path = tmp_path / "limits.yaml"
    path.write_text(
        "jobs:\n"
        "  - {id: 1, run: 10, run_limit: 60}\n"
        "  - {id: 2, run: 10, requested_time: 30}\n"
        "  - {id: 3, run: 10, run_limit: 0}\n"
        "  - {id: 4, run: 10}\n"
    )
    limits = {job.id: job.run_limit for job in read_yaml_jobs(path).jobs}
    assert limits == {1: 60.0, 2: 30.0, 3: 0.0, 4: None}


def test_yaml_name_key_and_yml_suffix(tmp_path: Path) -> None:
    path = tmp_path / "w.yml"
    path.write_text("name: nightly\njobs: []\n")
    assert load_workload(path) == Workload(name="nightly", jobs=[])


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            """\
            jobs:
              - id: 1
                run: 10
              - id: 2
                run: 10
                n: 0
            """,
            "6: jobs[1].n: n must be >= 1",
        ),
        (
            """\
            jobs:
              - id: 1
                submit: 4
            """,
            "2: jobs[0].run: missing required key 'run'",
        ),
        (
            """\
            jobs:
              - {id: 1, run: 0}
            """,
            "2: jobs[0].run: run must be > 0",
        ),
        (
            """\
            jobs:
              - {id: 1, run: 10}

              - {ids: "9-3", run: 10}
            """,
            "4: jobs[1].ids: bad id range '9-3'",
        ),
        (
            """\
            jobs:
              - {ids: "a-b", run: 10}
            """,
            "2: jobs[0].ids: expected an id range like '3-1002', got 'a-b'",
        ),
        (
            """\
            jobs:
              - {ids: "1-3", run: 10}
              - {id: 2, run: 10}
            """,
            "3: jobs[1].id: duplicate job id 2",
        ),
        (
            """\
            jobs:
              - {id: 1, ids: "2-3", run: 10}
            """,
            "2: jobs[0]: give exactly one of id or ids",
        ),
        (
            """\
            jobs:
              - {id: 1, run: 10, state: RUN}
            """,
            "2: jobs[0].state: unknown key 'state'",
        ),
        (
            """\
            jobs:
              - {id: 1, run: 10, user: 7}
            """,
            "2: jobs[0].user: expected a string, got a number (7)",
        ),
        (
            """\
            jobs:
              - {id: 1, run: 10, run_limit: -5}
            """,
            "2: jobs[0].run_limit: run_limit must be >= 0",
        ),
        (
            """\
            jobs:
              - id: 1
                run: 10
                run_limit: abc
            """,
            "4: jobs[0].run_limit: expected a number, got a string ('abc')",
        ),
        (
            """\
            jobs:
              - {id: 1, run: 10, run_limit: 5, requested_time: 5}
            """,
            "2: jobs[0].requested_time: give one of run_limit or requested_time",
        ),
        (
            """\
            now: 1
            """,
            "1: jobs: missing required key 'jobs'",
        ),
        (
            """\
            jobs: {id: 1}
            """,
            "1: jobs: expected a list, got a mapping",
        ),
        (
            """\
            name: 5
            jobs: []
            """,
            "1: name: expected a string, got a number (5)",
        ),
    ],
)
def test_yaml_errors_name_file_line_and_field(tmp_path: Path, body: str, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(textwrap.dedent(body))
    with pytest.raises(WorkloadError) as err:
        read_yaml_jobs(path)
    assert str(err.value) == f"{path}:{expected}"
    assert err.value.file == str(path)


def test_yaml_syntax_error_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("jobs:\n  - {id: 1, run: 10\n")
    with pytest.raises(WorkloadError, match=rf"^{re.escape(str(path))}:\d+: invalid YAML"):
        read_yaml_jobs(path)
    with pytest.raises(WorkloadError, match=r":0: cannot read"):
        load_workload(tmp_path / "absent.yaml")


# --- transform -------------------------------------------------------------------------


def sample_workload() -> Workload:
    return Workload(
        name="t",
        jobs=[WorkloadJob(i, 10.0 * (i - 1), 5.0, 1, "u", "") for i in range(1, 6)],
        skipped=3,
        skipped_reasons={"run time <= 0": 3},
        max_procs=8,
        max_nodes=4,
        header={"MaxProcs": "8"},
    )


def ids_and_submits(w: Workload) -> list[tuple[int, float]]:
    return [(j.id, j.submit) for j in w.jobs]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, [(1, 0.0), (2, 10.0), (3, 20.0), (4, 30.0), (5, 40.0)]),
        ({"start": 10, "end": 30}, [(2, 10.0), (3, 20.0)]),
        ({"start": 15}, [(3, 20.0), (4, 30.0), (5, 40.0)]),
        ({"end": 10}, [(1, 0.0)]),
        ({"first": 2}, [(1, 0.0), (2, 10.0)]),
        ({"first": 0}, []),
        ({"load": 2.0}, [(1, 0.0), (2, 5.0), (3, 10.0), (4, 15.0), (5, 20.0)]),
        ({"load": 0.5, "first": 3}, [(1, 0.0), (2, 20.0), (3, 40.0)]),
        ({"start": 10, "first": 3, "load": 2.0}, [(2, 10.0), (3, 15.0), (4, 20.0)]),
        ({"start": 25, "end": 100, "load": 4.0}, [(4, 30.0), (5, 32.5)]),
        ({"start": 50}, []),
        ({"start": 30, "end": 30}, []),
    ],
)
def test_transform_window_first_and_load(
    kwargs: dict[str, float], expected: list[tuple[int, float]]
) -> None:
    original = sample_workload()
    result = transform(original, **kwargs)  # type: ignore[arg-type]
    assert ids_and_submits(result) == expected
    assert result is not original
    assert (result.name, result.skipped, result.skipped_reasons) == ("t", 3, {"run time <= 0": 3})
    assert (result.max_procs, result.max_nodes, result.header) == (8, 4, {"MaxProcs": "8"})
    assert original == sample_workload()  # the input is left alone
    assert all(j.run == 5.0 and j.procs == 1 for j in result.jobs)


def test_transform_returns_independent_containers() -> None:
    original = sample_workload()
    result = transform(original)
    result.jobs.clear()
    result.skipped_reasons["x"] = 1
    result.header["y"] = "z"
    assert original == sample_workload()


@pytest.mark.parametrize(
    "kwargs",
    [{"load": 0.0}, {"load": -1.0}, {"load": math.nan}, {"load": math.inf}, {"first": -1}],
)
def test_transform_refuses_bad_arguments(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be"):
        transform(sample_workload(), **kwargs)  # type: ignore[arg-type]


# --- the real traces -------------------------------------------------------------------


def manifest() -> dict[str, dict[str, str]]:
    path = TRACES / "MANIFEST.tsv"
    if not path.is_file():
        return {}
    with path.open(encoding="utf-8", newline="") as stream:
        return {row["file"]: row for row in csv.DictReader(stream, delimiter="\t")}


def leading_int(text: str) -> int:
    found = re.match(r"\d+", text)
    assert found is not None, text
    return int(found.group())


@pytest.mark.parametrize("path", TRACE_FILES, ids=[p.name for p in TRACE_FILES])
def test_real_trace_parses_and_accounts_for_every_record(path: Path) -> None:
    started = time.process_time()
    w = load_workload(path)
    cpu = time.process_time() - started
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as stream:
        lines = [line for line in stream if line.strip() and not line.lstrip().startswith(";")]
    assert len(w.jobs) > 0
    assert len(w.jobs) + w.skipped == len(lines)
    assert w.skipped == sum(w.skipped_reasons.values())
    assert "malformed" not in w.skipped_reasons
    if "MaxProcs" in w.header or "MaxNodes" in w.header:
        assert w.max_procs is not None and w.max_procs > 0
    else:  # a header-less fixture: the simulator sizes the machine from the jobs
        assert w.max_procs is None and w.max_nodes is None
    jobs = w.jobs
    assert jobs[0].submit == 0.0
    assert all((a.submit, a.id) < (b.submit, b.id) for a, b in pairwise(jobs))
    assert all(j.run > 0 and j.procs > 0 for j in jobs)
    assert len({j.id for j in jobs}) == len(jobs)
    row = manifest().get(path.name)
    if row is not None:  # agrees with the archive's own accounting
        assert len(w.jobs) == int(row["usable_jobs"])
        assert len(lines) == int(row["jobs"])
        assert w.max_procs == leading_int(row["MaxProcs"])
        assert w.max_nodes == leading_int(row["MaxNodes"])
    assert cpu < 4.0, f"reading {path.name} took {cpu:.2f} s of CPU"
