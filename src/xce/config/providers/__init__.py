"""The providers file and each provider type's own settings (ec2.yaml, scriptconf.yaml,
local.yaml, license.yaml): read here, below the drivers, because two of them read
them: the provisioner, which builds its providers from them, and the simulator, which
models them (`xce sim run --providers`). Every problem is a ConfigError naming file,
line and field.

* `file`: the providers file (`load_providers`, `ProviderSpec`).
* `ec2`, `script`, `local`, `license`: each type's settings.
"""
