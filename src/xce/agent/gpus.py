"""The GPUs of this host, and which job has which (docs/agent.md#gpus).

Discovery: `nvidia-smi -L` when it is found on PATH (its `GPU N: ...` lines), else the
host spec's `gpus` (devices 0..N-1): what the agent registers. Assignment: a job that
asks for GPUs gets the lowest devices that no running job holds, so a device is never
given to two jobs at once (an exclusive job is always alone on its devices). The
scheduler counts every GPU of a job as taken on each of its hosts, so there are always
enough; a job whose devices are still held by jobs being killed (the kill and the
start in one heartbeat reply) is not started until they end (the controller sends it
again); when there are not (the host has fewer devices than the controller thinks),
the job is refused with a reason, never given a device another job holds. Each grant
is kept in its job's directory (`gpus.json`), so an agent restart knows what is taken.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence

from xce.agent.jobfiles import GpuGrant
from xce.model.api import Launch

log = logging.getLogger(__name__)

NVIDIA_SMI = "nvidia-smi"
EXCLUSIVE_MODE = "exclusive_process"
_GPU_LINE = re.compile(r"^GPU (\d+):", re.MULTILINE)
_SMI_TIMEOUT = 30.0  # s: nvidia-smi can be slow while the driver loads


def discover_gpus(configured: int, command: str = NVIDIA_SMI) -> list[int]:
    """The device indices of this host: `command -L`'s when the command is found and
    works, else 0..configured-1 (the host spec's)."""
    path = shutil.which(command)
    if path is None:
        return list(range(configured))
    fallback = f"using the host spec's {configured} GPU(s)"
    try:
        done = subprocess.run([path, "-L"], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=_SMI_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as err:
        log.warning("%s -L failed (%s): %s", path, err, fallback)
        return list(range(configured))
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        log.warning("%s -L exited %d (%s): %s", path, done.returncode,
                    said[0] if said else "no output", fallback)
        return list(range(configured))
    devices = sorted({int(index) for index in _GPU_LINE.findall(done.stdout)})
    if configured and len(devices) != configured:
        log.warning("%s -L lists %d GPU(s), the host spec says %d: registering %d",
                    path, len(devices), configured, len(devices))
    log.info("GPUs found by %s: %s", path, ", ".join(map(str, devices)) or "none")
    return devices


def exclusive(launch: Launch) -> bool:
    """LSF's j_exclusive, which exclusive_process mode implies."""
    return launch.gpu_exclusive or launch.gpu_mode == EXCLUSIVE_MODE


def grant_gpus(launch: Launch, devices: Sequence[int],
               held: Mapping[int, Sequence[int]]) -> GpuGrant:
    """The devices for `launch` (it asks for `launch.gpus` > 0): the lowest of
    `devices` that no running job holds (`held`: job -> its devices); a refusal
    that says why when too few are free."""
    taken = {device: job for job, owned in held.items() for device in owned}
    free = [device for device in sorted(devices) if device not in taken]
    if len(free) >= launch.gpus:
        return GpuGrant(free[:launch.gpus], launch.gpu_mode, exclusive(launch))
    holders = ", ".join(f"{device} (job {taken[device]})" for device in sorted(taken))
    why = (f"it needs {launch.gpus} GPU(s) and {len(free)} of this host's {len(devices)} "
           f"are free" + (f"; held: {holders}" if holders else ""))
    return GpuGrant([], launch.gpu_mode, exclusive(launch), refused=why,
                    holders=sorted(held))


def gpu_environment(grant: GpuGrant) -> dict[str, str]:
    """What a job with GPUs finds in its environment: its devices (CUDA counts them in
    PCI bus order, as nvidia-smi does) and their mode."""
    return {
        "CUDA_VISIBLE_DEVICES": ",".join(map(str, grant.devices)),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "XCE_GPU_MODE": grant.mode,
    }
