"""A stand-in for the Neuron SDK's Python packages, so that optimum-neuron imports without them.

torch-neuronx, neuronx-cc, neuronx-distributed, libneuronxla and torch-xla come from AWS's package
index (the Neuron DLC holds them); PyPI does not serve them. `install()` lets optimum-neuron's imports
and "is it installed?" checks through, with the versions optimum-neuron's own metadata pins (its
`neuronx` extra). Every attribute of a stand-in module is a class whose use (a call, an attribute)
raises `NeuronSdkUnavailable`, with two exceptions that let optimum-neuron's real code run up to the
first real compile:
- `libneuronxla.neuron_cc_cache` resolves the compiler cache's location as the Neuron documentation
  says (`--cache_dir` in NEURON_CC_FLAGS, else NEURON_COMPILE_CACHE_URL, else /var/tmp/neuron-compile-cache;
  aws-neuron/aws-neuron-sdk general/arch/neuron-features/neuron-caching.rst) and answers "is it cached?"
  from that directory, so optimum-neuron's cache lookup runs for real (and reaches the Hub if asked to);
- `torch_neuronx.trace`, the first real compile, prepares the compiler's work directory (creating it and
  writing the traced module's weights, which a compile with inlined weights starts from) and then stops.
No stand-in ever returns a compiled result.

Runs inside the Neuron contract venv (tests/contract/neuron_checks.py) or, for the pod rehearsal, at the
start of every Python process of the rehearsal's Neuron environment (`install_at_startup`); never in the
test process.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import re
import sys
import tempfile
import types
from pathlib import Path
from typing import Any, NoReturn

# Importable module name -> distribution name in optimum-neuron's `neuronx` extra (None: not pinned there).
SDK_MODULES: dict[str, str | None] = {
    "torch_neuronx": "torch-neuronx",
    "neuronxcc": "neuronx-cc",
    "neuronx_distributed": "neuronx_distributed",
    "libneuronxla": "libneuronxla",
    "torch_xla": None,  # a dependency of torch-neuronx, imported by optimum-neuron's cache module
}


# The compiler cache's default location (neuron-caching.rst: "The default cache path is the directory
# /var/tmp/neuron-compile-cache").
DEFAULT_CACHE_URL = "/var/tmp/neuron-compile-cache"
# The file the stand-in compile writes first in its work directory.
TRACED_GRAPH_FILE = "traced-graph-with-weights.bin"


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


class CacheUrl:
    """libneuronxla.neuron_cc_cache.CacheUrl: where the compiler cache lives (a folder or s3:// URL)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def is_s3(self) -> bool:
        """True for an s3:// cache."""
        return self.url.startswith("s3://")

    @classmethod
    def get_cache_url(cls, cache_dir: str | None = None) -> CacheUrl:
        """The documented order: an explicit folder, else `--cache_dir` in NEURON_CC_FLAGS, else
        NEURON_COMPILE_CACHE_URL, else the default folder."""
        if cache_dir:
            return cls(cache_dir)
        flag = re.search(r"--cache_dir[= ](\S+)", os.environ.get("NEURON_CC_FLAGS", ""))
        if flag:
            return cls(flag.group(1))
        return cls(os.environ.get("NEURON_COMPILE_CACHE_URL") or DEFAULT_CACHE_URL)


class CompileCache:
    """The base of the compiler caches: anything beyond the lookup optimum-neuron makes is the SDK's."""

    def __init__(self, cache_url: CacheUrl) -> None:
        self.cache_url = cache_url

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        _unavailable(f"libneuronxla.neuron_cc_cache.{type(self).__name__}.{name}")


class CompileCacheFs(CompileCache):
    """A compiler cache in a local folder: `<folder>/neuronxcc-<version>/<key>` per compiled graph (the
    layout of the cache paths the Neuron documentation's log lines show)."""

    def __init__(self, cache_url: CacheUrl) -> None:
        super().__init__(cache_url)
        self.cache_path = cache_url.url

    def get_cache_dir_with_cache_key(self, key: str) -> str:
        """The folder of one cache entry."""
        return f"{self.cache_path}/neuronxcc-{pinned_version('neuronxcc')}/{key}"

    def exists(self, path: str) -> bool:
        """True when `path` is in the cache."""
        return os.path.exists(path)


CompileCacheS3 = _UnavailableMeta("CompileCacheS3", (), {"__module__": "libneuronxla.neuron_cc_cache"})


def create_compile_cache(cache_url: CacheUrl) -> Any:
    """The cache for a URL: a folder, or S3 (which belongs to the SDK)."""
    return CompileCacheS3(cache_url) if cache_url.is_s3() else CompileCacheFs(cache_url)


def trace(func: Any, example_inputs: Any, *_: Any, compiler_workdir: str | None = None, **kwargs: Any) -> NoReturn:
    """torch_neuronx.trace, the first real compile: prepare the compiler's work directory, then stop.

    The work directory is `compiler_workdir`, else a new temporary folder; the traced module's weights
    are written there first, as a compile with inlined weights (the default) starts from them. So a work
    directory on a read-only or too small file system fails here as the real compile would.
    """
    workdir = Path(compiler_workdir) if compiler_workdir else Path(tempfile.mkdtemp(prefix="neuronx-cc-"))
    workdir.mkdir(parents=True, exist_ok=True)
    state = func.state_dict() if hasattr(func, "state_dict") else {}
    size = sum(t.numel() * t.element_size() for t in state.values())
    with (workdir / TRACED_GRAPH_FILE).open("wb") as out:
        for start in range(0, size, 1 << 20):
            out.write(bytes(min(1 << 20, size - start)))
    # Where this process puts its files, for whoever reads the stop (the pod rehearsal checks each place).
    places = f"work dir {workdir}, temporary files {tempfile.gettempdir()}, cache {CacheUrl.get_cache_url().url}"
    _unavailable(f"torch_neuronx.trace (the first compile: {type(func).__name__}, {size} bytes; {places})")


# Stand-in modules with real attributes: what optimum-neuron calls before the first compile.
_WORKING_ATTRIBUTES: dict[str, dict[str, Any]] = {
    "libneuronxla.neuron_cc_cache": {
        "CacheUrl": CacheUrl,
        "CompileCache": CompileCache,
        "CompileCacheFs": CompileCacheFs,
        "CompileCacheS3": CompileCacheS3,
        "create_compile_cache": create_compile_cache,
    },
    "torch_neuronx": {"trace": trace},
}


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
        for name, value in _WORKING_ATTRIBUTES.get(module.__name__, {}).items():
            setattr(module, name, value)


IMPORT_UTILS = "optimum.neuron.utils.import_utils"


def _report_sdk_installed(import_utils: types.ModuleType) -> None:
    """Every is_*_available() in optimum-neuron goes through `_get_package_version`: answer the pins."""
    real_version = import_utils._get_package_version

    def package_version(name: str) -> str | None:
        return pinned_version(name) if name in SDK_MODULES else real_version(name)

    import_utils._get_package_version = package_version


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches optimum-neuron's import_utils as soon as it is imported (for `install_at_startup`)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != IMPORT_UTILS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        real_exec = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            real_exec(module)
            _report_sdk_installed(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Make the SDK modules importable as stand-ins and report them installed at optimum-neuron's pins."""
    if any(isinstance(finder, _Finder) for finder in sys.meta_path):
        return
    sys.meta_path.append(_Finder())
    from optimum.neuron.utils import import_utils

    _report_sdk_installed(import_utils)


def install_at_startup() -> None:
    """`install()` without importing optimum-neuron now: for a `.pth` line, so every Python process of an
    environment (the pod rehearsal's Neuron image) starts with the stand-in, whatever its command."""
    if any(isinstance(finder, _Finder) for finder in sys.meta_path):
        return
    sys.meta_path.append(_Finder())
    if IMPORT_UTILS in sys.modules:
        _report_sdk_installed(sys.modules[IMPORT_UTILS])
    else:
        sys.meta_path.insert(0, _PatchOnImport())
