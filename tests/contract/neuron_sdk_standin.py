"""A stand-in for the Neuron SDK's Python packages, so that optimum-neuron imports without them.

torch-neuronx, neuronx-cc, neuronx-distributed, libneuronxla and torch-xla come from AWS's package
index (the Neuron DLC holds them); PyPI does not serve them. `install()` lets optimum-neuron's imports
and "is it installed?" checks through, with the versions optimum-neuron's own metadata pins (its
`neuronx` extra), and nothing more: every attribute of a stand-in module is a class whose use (a
call, an attribute) raises `NeuronSdkUnavailable`. So code runs until it first needs the SDK and
then stops with that error; no stand-in ever returns a result.

Runs inside the Neuron contract venv (tests/contract/neuron_checks.py), never in the test process.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, NoReturn

# Importable module name -> distribution name in optimum-neuron's `neuronx` extra (None: not pinned there).
SDK_MODULES: dict[str, str | None] = {
    "torch_neuronx": "torch-neuronx",
    "neuronxcc": "neuronx-cc",
    "neuronx_distributed": "neuronx_distributed",
    "libneuronxla": "libneuronxla",
    "torch_xla": None,  # a dependency of torch-neuronx, imported by optimum-neuron's cache module
}


class NeuronSdkUnavailable(RuntimeError):
    """Code reached a part of the Neuron SDK, which is not installed here."""


def _unavailable(what: str) -> NoReturn:
    raise NeuronSdkUnavailable(f"{what} belongs to the Neuron SDK, which is not installed here")


class _UnavailableMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        _unavailable(f"{cls.__module__}.{cls.__qualname__}.{name}")

    def __call__(cls, *args: Any, **kwargs: Any) -> NoReturn:
        _unavailable(f"{cls.__module__}.{cls.__qualname__}()")


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        # A class, so that `class X(sdk.Base)` at import time works too; using it raises.
        value = _UnavailableMeta(name, (), {"__module__": self.__name__, "__qualname__": name})
        setattr(self, name, value)
        return value


def pinned_version(module: str) -> str | None:
    """The version optimum-neuron's metadata pins for an SDK module's distribution (None if it pins none)."""
    from optimum.neuron.utils.version_utils import get_pinned_version

    distribution = SDK_MODULES[module]
    return get_pinned_version(distribution) if distribution else None


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] in SDK_MODULES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _StandInModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []
        if module.__name__ == "neuronxcc":  # read at import time by optimum.neuron.modeling_diffusion
            module.__version__ = pinned_version("neuronxcc")


def install() -> None:
    """Make the SDK modules importable as stand-ins and report them installed at optimum-neuron's pins."""
    if any(isinstance(finder, _Finder) for finder in sys.meta_path):
        return
    sys.meta_path.append(_Finder())
    from optimum.neuron.utils import import_utils

    real_version = import_utils._get_package_version

    def package_version(name: str) -> str | None:
        return pinned_version(name) if name in SDK_MODULES else real_version(name)

    # Every is_*_available() in optimum-neuron goes through this one function.
    import_utils._get_package_version = package_version
