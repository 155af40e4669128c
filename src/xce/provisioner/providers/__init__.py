"""Providers the provisioner can drive; `local` (agents on this machine) is built in."""
