"""The Neuron contract: the Neuron image's packages, in a cached venv of its Python version."""
