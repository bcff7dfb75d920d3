"""Deploy-time configuration: typed context readers and the platform's settings object."""

from cdk.config.context import ConfigError, Context
from cdk.config.platform import AcceleratorCapacity, AppConfig

__all__ = ["AcceleratorCapacity", "AppConfig", "ConfigError", "Context"]
