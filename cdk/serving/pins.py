"""Versions the serving side depends on. The lead moves these into `cdk/versions.py` on merge.

The Neuron SDK version is part of the compiled-artifact key: artifacts compiled by one SDK do not
load on another, so a bump of the Neuron image must bump this line too (and triggers a recompile).
"""

from __future__ import annotations

from typing import Final

NEURON_SDK_VERSION: Final = "2.31.1"  # matches the Neuron DLC pytorch-inference-neuronx:...-sdk2.31.1
OPTIMUM_NEURON_VERSION: Final = "0.4.5"  # installed in the Neuron image; used by app/neuron_compile.py
NEURON_CORES_PER_DEVICE: Final = 2  # inf2 / trn1: one aws.amazon.com/neuron device = 2 NeuronCores
NEURON_SCHEDULER_NAME: Final = "my-scheduler"  # the custom scheduler the Neuron Helm chart installs
