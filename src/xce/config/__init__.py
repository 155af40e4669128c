"""Cluster configuration: YAML loading and validation into `xce.model.cluster` types.

Every problem is a ConfigError naming file, line and field, e.g.
`cluster.yaml:12: queues[1].hosts[0]: unknown host 'n99'`.
"""

from xce.config.errors import ConfigError
from xce.config.hostnames import expand_hostnames
from xce.config.loader import build_config, load_config, load_config_text
from xce.config.marked_yaml import MarkedMap, MarkedSeq, load_yaml, load_yaml_file, read_text

__all__ = [
    "ConfigError",
    "MarkedMap",
    "MarkedSeq",
    "build_config",
    "expand_hostnames",
    "load_config",
    "load_config_text",
    "load_yaml",
    "load_yaml_file",
    "read_text",
]
