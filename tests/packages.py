"""Debian packages a test needs (a browser, a database server), installed with apt-get
when missing: as root, or with sudo; a failure says why (the tests never skip)."""

from __future__ import annotations

import os
import shutil
import subprocess


class PackageError(RuntimeError):
    """A package the tests need is missing and cannot be installed."""


def apt_install(packages: tuple[str, ...]) -> None:
    """`apt-get install` `packages` (as root, or with sudo); an error says why."""
    if os.geteuid() == 0:
        prefix: list[str] = []
    elif shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"],
                                                 capture_output=True).returncode == 0:
        prefix = ["sudo", "-n"]
    else:
        raise PackageError(f"{' '.join(packages)} missing and cannot be installed: not root "
                           f"and no sudo; run: apt-get install -y {' '.join(packages)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for step in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        done = subprocess.run([*prefix, *step], capture_output=True, text=True, env=env,
                              timeout=900)
        if done.returncode != 0:
            raise PackageError(f"{' '.join(step)} failed ({done.returncode}):\n"
                               f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
