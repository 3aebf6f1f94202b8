"""Party configuration: one TOML file per organization, validated all at once."""

from vsplit.config.load import apply_override, load_config, resolve
from vsplit.config.schema import PartyConfig

__all__ = ["PartyConfig", "apply_override", "load_config", "resolve"]
