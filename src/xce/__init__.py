"""XCE: a batch workload manager with elastic supply."""

__version__ = "0.1.0"
