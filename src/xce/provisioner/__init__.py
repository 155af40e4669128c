"""The provisioner: obtains supply from providers and gives it back
(see docs/providers.md for the provider protocol)."""
