"""The execution agent (`xce agent`): runs the jobs the controller launches on this host.

* `jobfiles`: the files of one job directory, shared by the agent and the shim.
* `shim`: the detached wrapper process that runs one job and records its exit.
* `jobs`: the agent's job directory store (start, running, finished, kill, ack).
* `hostspec`: what the agent registers (slots, type, model, resources).
* `daemon`: the register/heartbeat loop against the controller.
"""
