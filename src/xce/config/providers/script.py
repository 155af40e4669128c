"""What a `script` provider needs besides its providers-file entry (docs/providers/script.md):
where the plugin's scripts are, and the optional `<confPath>/scriptconf.yaml` (or `.yml`,
`.json`):

```yaml
controller: https://xce.example:6820   # the URL the machines' agents join
timeout: 60                            # seconds a script may run
query_interval: 10                     # seconds between polls of getRequestStatus & co
lead_time: 300                         # describe(): seconds from request to joined host
describe_ttl: 30                       # seconds getAvailableTemplates' answer is reused
templates: {aws.c5: Template-VM-1}     # catalog template -> the plugin's templateId
env: {PRO_LSF_TOP: /opt/lsf}           # more environment for the scripts
data_dir: /var/lib/xce/rc/aws          # PRO_DATA_DIR
log_dir: /var/log/xce                  # PRO_LSF_LOGDIR
script_options: "-v"                   # SCRIPT_OPTIONS
```

Every problem is a ConfigError naming file, line and field. The provider
(`xce.provisioner.providers.script`) and the simulator's model of it read it here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import msgspec

from xce.config import ConfigError, MarkedMap, load_yaml_file
from xce.config.fields import MapReader, Place, as_text

CONF_NAMES = ("scriptconf.yaml", "scriptconf.yml", "scriptconf.json")
# The five scripts of an LSF resource connector plugin; the last one is optional.
SCRIPTS = ("getAvailableTemplates", "requestMachines", "requestReturnMachines",
           "getRequestStatus", "getReturnRequests")
OPTIONAL_SCRIPTS = ("getReturnRequests",)
_KEYS = ("controller", "timeout", "query_interval", "lead_time", "describe_ttl", "templates",
         "env", "data_dir", "log_dir", "script_options")


class ScriptConf(msgspec.Struct, frozen=True):
    """A script provider's settings: the optional scriptconf file over defaults."""

    controller: str = ""  # "" : the provisioner's --controller
    timeout: float = 60.0
    query_interval: float = 10.0  # instances() asks the plugin at most this often
    lead_time: float = 300.0
    describe_ttl: float = 30.0
    templates: dict[str, str] = {}  # catalog template -> the plugin's templateId
    env: dict[str, str] = {}
    data_dir: str = ""  # "" : WORK/<name>/data
    log_dir: str = ""  # "" : WORK/<name>/log
    script_options: str = ""
    file: str = ""  # where it was read from ("" : no file)


def find_scripts(script_path: str, spec_file: str, spec_line: int,
                 provider: str) -> dict[str, Path]:
    """The plugin's executables by script name: `<scriptPath>/scripts/NAME.sh` when
    that directory exists (LSF's layout), else `<scriptPath>/NAME.sh`. A missing or
    non-executable required script is a ConfigError at the providers entry."""
    if not script_path:
        raise ConfigError(spec_file, spec_line, "scriptPath",
                          f"provider {provider}: the script provider needs a scriptPath "
                          "(the directory of the plugin's scripts)")
    base = Path(script_path)
    directory = base / "scripts" if (base / "scripts").is_dir() else base
    if not directory.is_dir():
        raise ConfigError(spec_file, spec_line, "scriptPath",
                          f"provider {provider}: {base} is not a directory")
    found: dict[str, Path] = {}
    for name in SCRIPTS:
        path = directory / f"{name}.sh"
        if path.is_file() and os.access(path, os.X_OK):
            found[name] = path
        elif path.exists():
            raise ConfigError(spec_file, spec_line, "scriptPath",
                              f"provider {provider}: {path} is not an executable file")
        elif name not in OPTIONAL_SCRIPTS:
            raise ConfigError(spec_file, spec_line, "scriptPath",
                              f"provider {provider}: no {name}.sh in {directory}")
    return found


def load_script_conf(conf_path: str, spec_file: str, spec_line: int, provider: str,
                     served: Sequence[str] = ()) -> ScriptConf:
    """`<confPath>/scriptconf.yaml` (or .yml, .json) if there is one, else the
    defaults. confPath itself is required: it is the plugin's PRO_CONF_DIR. `served`:
    the catalog's templates of this provider (what `templates:` may map)."""
    if not conf_path:
        raise ConfigError(spec_file, spec_line, "confPath",
                          f"provider {provider}: the script provider needs a confPath "
                          "(the plugin's configuration directory, its PRO_CONF_DIR)")
    directory = Path(conf_path)
    if not directory.is_dir():
        raise ConfigError(spec_file, spec_line, "confPath",
                          f"provider {provider}: {directory} is not a directory")
    found = [directory / name for name in CONF_NAMES if (directory / name).is_file()]
    if not found:
        return ScriptConf()
    if len(found) > 1:
        raise ConfigError(spec_file, spec_line, "confPath",
                          f"provider {provider}: both {found[0].name} and {found[1].name} "
                          f"in {directory}: keep one")
    return read_script_conf(found[0], served)


def read_script_conf(path: Path, served: Sequence[str] = ()) -> ScriptConf:
    """The settings in one scriptconf file, or ConfigError."""
    filename = str(path)
    root = load_yaml_file(path)
    if root is None:
        root = MarkedMap(1)
    top = MapReader(root, Place(filename, 1, ""), _KEYS)
    defaults = ScriptConf()
    return ScriptConf(
        controller=top.text("controller", defaults.controller),
        timeout=top.number("timeout", defaults.timeout, positive=True),
        query_interval=top.number("query_interval", defaults.query_interval, minimum=0),
        lead_time=top.number("lead_time", defaults.lead_time, minimum=0),
        describe_ttl=top.number("describe_ttl", defaults.describe_ttl, minimum=0),
        templates=_template_ids(top, served),
        env=_strings(top, "env"),
        data_dir=_directory(top, "data_dir", path.parent),
        log_dir=_directory(top, "log_dir", path.parent),
        script_options=top.text("script_options", "", nonempty=False),
        file=filename,
    )


def _template_ids(top: MapReader, served: Sequence[str]) -> dict[str, str]:
    """Catalog template -> the plugin's templateId; every key a template of the
    catalog whose provider is this one."""
    ids = _strings(top, "templates")
    section = top.section("templates")
    if section is not None:
        entries = MapReader(*section)
        for name in ids:
            if name not in served:
                entries.key_place(name).fail(
                    f"template {name!r} is not a catalog template of this provider "
                    f"(its templates: {', '.join(served) or 'none'})")
    return ids


def _strings(top: MapReader, key: str) -> dict[str, str]:
    """A mapping of strings to strings (an absent or null section: empty)."""
    section = top.section(key)
    if section is None:
        return {}
    entries = MapReader(*section)
    return {as_text(name, place): as_text(value, place, nonempty=False)
            for name, value, place in entries.items()}


def _directory(top: MapReader, key: str, base: Path) -> str:
    """A directory path; a relative one is taken from the scriptconf file's directory."""
    value = top.text(key, "")
    return str((base / value).resolve()) if value else ""
