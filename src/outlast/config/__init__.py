"""Server settings, declared once.

Each field of :class:`Settings` carries its meaning, unit, range or choices and
its ``OUTLAST_*`` environment variable. ``outlast serve``'s flags and their
``--help`` text are derived from this declaration (see :func:`options`), and a
flag's value and its environment variable's value go through the same
validation. Python callers build ``Settings(data_dir=..., lease_ttl=1.0)``;
keywords win over the environment, the environment over the defaults.
"""

from outlast.config.flags import ENV_PREFIX, Option
from outlast.config.hosts import allowed_host_problem, host_name
from outlast.config.limits import LIMIT_KEYS, parse_limits
from outlast.config.settings import Settings, SnapshotHook, load_target, option, options, setting
from outlast.config.webhook import webhook_key, webhook_url_problem, within_prefix

__all__ = ["ENV_PREFIX", "LIMIT_KEYS", "Option", "Settings", "SnapshotHook",
           "allowed_host_problem", "host_name", "load_target", "option", "options",
           "parse_limits", "setting", "webhook_key", "webhook_url_problem", "within_prefix"]
