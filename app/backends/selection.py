"""Which backend runs here: small detection functions per accelerator, then one decision.

`BACKEND=auto` picks Neuron when a Neuron device is present and optimum-neuron imports, else CUDA
when torch sees a GPU, else the CPU. A forced value is taken as is: its loader fails with a clear
error when the accelerator is missing, instead of silently serving on another one.
"""

from __future__ import annotations

import glob
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

from app.backends.base import Backend
from app.settings import Settings
from common.logs import quiet_model_libraries


def neuron_device_present() -> bool:
    """True when the Neuron driver exposes a device (/dev/neuron0, /dev/neuron1, ...)."""
    return bool(glob.glob("/dev/neuron[0-9]*"))


def optimum_neuron_importable() -> bool:
    """True when optimum-neuron is installed (found without importing it: that is slow)."""
    try:
        return importlib.util.find_spec("optimum.neuron") is not None
    except ModuleNotFoundError:  # the parent package `optimum` is missing
        return False


def cuda_available() -> bool:
    """True when torch sees a usable CUDA device."""
    import torch

    return torch.cuda.is_available()


@dataclass(frozen=True)
class Probes:
    """The detection functions, injectable so tests can play any machine."""

    neuron_device: Callable[[], bool] = neuron_device_present
    optimum_neuron: Callable[[], bool] = optimum_neuron_importable
    cuda: Callable[[], bool] = cuda_available


def choose_backend(requested: str, probes: Probes | None = None) -> str:
    """The backend name to run: `requested` unless it is "auto", then the best one present."""
    if requested != "auto":
        return requested
    probes = probes or Probes()
    if probes.neuron_device() and probes.optimum_neuron():
        return "neuron"
    if probes.cuda():
        return "cuda"
    return "cpu"


def load_backend(settings: Settings) -> Backend:
    """Choose the backend, then load the model on it (heavy imports happen only in the chosen module)."""
    name = choose_backend(settings.backend)
    quiet_model_libraries()
    if name == "neuron":
        from app.backends.neuron import load_neuron_backend

        return load_neuron_backend(settings)
    if name == "cuda":
        from app.backends.cuda import load_cuda_backend

        return load_cuda_backend(settings)
    from app.backends.cpu import load_cpu_backend

    return load_cpu_backend(settings)
