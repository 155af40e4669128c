"""The live controller: the single source of truth of a running XCE cluster.

`xce.controller.store` keeps its durable append-only log of facts (every state change,
as a scheduler event) with snapshots, and rebuilds the scheduler state from them after
a restart (`recover`).
"""
