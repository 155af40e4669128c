"""`xce license-pool`: a small license pool service (docs/providers/license.md).

A pool holds N tokens of each configured feature. A client borrows tokens with a
**lease** that lasts `ttl` seconds from its last renewal; a lease not renewed in time
is dropped and its tokens are free again, so a crashed cluster cannot hold them
forever. Leases can be renewed, returned whole or in part, and listed. The service
speaks JSON over HTTP (aiohttp); its wire types are msgspec structs
(`xce.model.license_api`, shared with the license provider), its rules live in `pool`
(no HTTP), its routes in `server`, the command in `command`.

The `license` provider (`xce.provisioner.providers.license`) borrows from it for the
countable pools of a cluster; a site fronts FlexNet or RLM by putting a thin adapter
with the same protocol in front of its license server.
"""
