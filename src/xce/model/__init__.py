"""Data types shared by every layer: configuration, jobs, events, session results."""
