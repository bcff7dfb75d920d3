"""Deploy-time configuration: one AppConfig (platform settings plus its ServingConfig) from CDK context."""

from cdk.config.context import ConfigError, Context
from cdk.config.platform import AcceleratorCapacity, AppConfig
from cdk.config.serving import ServingConfig

__all__ = ["AcceleratorCapacity", "AppConfig", "ConfigError", "Context", "ServingConfig"]
