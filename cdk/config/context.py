"""Typed reads of CDK context values, with errors that name the setting.

Values come from `cdk.json` (JSON types) or from `-c key=value` on the command line (always strings),
so every reader accepts both forms and rejects anything else with a `ConfigError`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

T = TypeVar("T")
_MISSING = object()


class ConfigError(ValueError):
    """A deploy-time setting has a value the app cannot synthesize."""


class Context:
    """Read-only view of the context with one typed reader per kind of value."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def raw(self, key: str, default: object = _MISSING) -> Any:
        """The untyped value, or the default; a missing key without default is an error."""
        if key in self._values and self._values[key] is not None:
            return self._values[key]
        if default is _MISSING:
            raise ConfigError(f"setting '{key}' is required in cdk.json context (or -c {key}=...)")
        return default

    def _fail(self, key: str, value: object, expected: str) -> ConfigError:
        return ConfigError(f"setting '{key}' = {value!r} is invalid: expected {expected}")

    def string(
        self,
        key: str,
        default: str | object | None = _MISSING,
        *,
        allowed: Collection[str] | None = None,
        pattern: str | None = None,
        description: str = "a string",
    ) -> Any:
        """A string, optionally limited to `allowed` values or a full-match regex `pattern`."""
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str) or not value:
            raise self._fail(key, value, description)
        if allowed is not None and value not in allowed:
            raise self._fail(key, value, "one of " + ", ".join(sorted(allowed)))
        if pattern is not None and not re.fullmatch(pattern, value):
            raise self._fail(key, value, description)
        return value

    def integer(
        self,
        key: str,
        default: int | object = _MISSING,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int:
        """An integer within [minimum, maximum]; accepts "3" from the command line."""
        value = self.raw(key, default)
        parsed = _parse(value, int, lambda s: int(s.strip()))
        if parsed is None or isinstance(parsed, bool):
            raise self._fail(key, value, "an integer")
        _check_range(self, key, parsed, minimum, maximum)
        return parsed

    def number(
        self,
        key: str,
        default: float | object = _MISSING,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> float:
        """A finite number within [minimum, maximum]; accepts "0.5" from the command line."""
        value = self.raw(key, default)
        parsed = _parse(value, (int, float), lambda s: float(s.strip()))
        if parsed is None or isinstance(parsed, bool) or parsed != parsed or parsed in (float("inf"), float("-inf")):
            raise self._fail(key, value, "a finite number")
        _check_range(self, key, float(parsed), minimum, maximum)
        return float(parsed)

    def boolean(self, key: str, default: bool | object = _MISSING) -> bool:
        """true/false, as JSON or as the strings "true"/"false"."""
        value = self.raw(key, default)
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise self._fail(key, value, "true or false")

    def string_list(
        self,
        key: str,
        default: list[str] | object = _MISSING,
        *,
        allowed: Collection[str] | None = None,
        allow_empty: bool = False,
    ) -> list[str]:
        """A list of strings: a JSON array, or "a,b,c" from the command line."""
        value = self.raw(key, default)
        if isinstance(value, str):
            items = [part.strip() for part in value.split(",") if part.strip()]
        elif isinstance(value, list) and all(isinstance(v, str) and v for v in value):
            items = list(value)
        else:
            raise self._fail(key, value, "a list of strings (JSON array or comma-separated)")
        if not items and not allow_empty:
            raise self._fail(key, value, "at least one value")
        if allowed is not None:
            unknown = [item for item in items if item not in allowed]
            if unknown:
                raise self._fail(key, value, "values from " + ", ".join(sorted(allowed)))
        if len(set(items)) != len(items):
            raise self._fail(key, value, "no repeated values")
        return items

    def cidr_list(self, key: str, default: list[str] | object = _MISSING, *, allow_empty: bool = False) -> list[str]:
        """A list of IPv4 CIDR blocks such as 203.0.113.0/24."""
        items = self.string_list(key, default, allow_empty=allow_empty)
        for item in items:
            try:
                network = ipaddress.ip_network(item, strict=True)
            except ValueError:
                raise self._fail(key, item, "IPv4 CIDR blocks such as 203.0.113.0/24") from None
            if network.version != 4:
                raise self._fail(key, item, "IPv4 CIDR blocks such as 203.0.113.0/24")
        return items


def _parse(value: object, types: type | tuple[type, ...], from_string: Callable[[str], T]) -> Any:
    if isinstance(value, types):
        return value
    if isinstance(value, str):
        try:
            return from_string(value)
        except ValueError:
            return None
    return None


def _check_range(ctx: Context, key: str, value: float, minimum: float | None, maximum: float | None) -> None:
    if minimum is not None and value < minimum:
        raise ctx._fail(key, value, f"a value of at least {minimum}")
    if maximum is not None and value > maximum:
        raise ctx._fail(key, value, f"a value of at most {maximum}")
