"""The `xce` command."""
