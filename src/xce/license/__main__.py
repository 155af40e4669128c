"""`python -m xce.license ...`: the same as `xce license-pool ...`, without loading the
rest of the `xce` command (a quicker start, for scripts and tests)."""

from xce.license.command import license_pool

if __name__ == "__main__":
    license_pool(prog_name="xce license-pool")
