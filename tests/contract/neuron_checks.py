"""The Neuron contract checks, run INSIDE the Neuron contract venv (Python and packages of neuron.lock).

    python -m tests.contract.neuron_checks plain|standin RESULTS.json

`plain`: optimum-neuron as PyPI installs it (no Neuron SDK). `standin`: with the Neuron SDK stand-in
(tests/contract/neuron_sdk_standin.py), checking every call the Neuron backend and the compile job make
against optimum-neuron's own code. Each check writes {"ok": bool, "detail": str} under its name;
tests/contract/test_neuron_contract.py turns them into test results.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import inspect
import json
import os
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

# A shape the built-in tiny model (VAE scale 8) can be exported for.
BATCH, HEIGHT, WIDTH = 2, 256, 192

Check = Callable[[], str]


def check_versions() -> str:
    """The venv holds the Neuron image's Python and the lock's optimum-neuron (cdk/versions.py)."""
    from cdk import versions

    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert python == versions.BASE_IMAGE_PYTHON["neuron"], f"Python {python}"
    found = {p: importlib.metadata.version(p) for p in ("optimum-neuron", "diffusers", "transformers", "torch")}
    assert found["optimum-neuron"] == versions.OPTIMUM_NEURON_VERSION, found
    return f"Python {python}, " + ", ".join(f"{k} {v}" for k, v in found.items())


def check_pip_check() -> str:
    """Every installed package's requirements are met (the lock is complete and consistent)."""
    result = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


def check_import_without_sdk() -> str:
    """optimum.neuron imports from PyPI alone; the pipeline class needs torch_neuronx and nothing else."""
    import optimum.neuron  # noqa: F401  (the package itself imports without the SDK)

    try:
        from optimum.neuron import NeuronStableDiffusionPipeline  # noqa: F401
    except ModuleNotFoundError as exc:
        cause: BaseException | None = exc
        names = []
        while cause is not None:
            names.append(getattr(cause, "name", None))
            cause = cause.__cause__
        assert "torch_neuronx" in names, f"failed for another reason: {exc!r} (missing: {names})"
        version = importlib.metadata.version("optimum-neuron")
        return f"optimum.neuron {version} imports; the pipeline class stops at torch_neuronx"
    raise AssertionError("NeuronStableDiffusionPipeline imported without torch_neuronx: the stand-in is not needed")


def _pipeline_class(family_name: str = "sd") -> Any:
    """The optimum-neuron class the compile job and the backend use for the family."""
    import optimum.neuron

    from app.model_store.neuron_compile import pipeline_class_name
    from app.models.families import family_named

    return getattr(optimum.neuron, pipeline_class_name(family_named(family_name)))


def _neuron_families() -> list[Any]:
    """The families the Neuron compile exports (the others stop at the synth and at the compile, by name)."""
    from app.model_store.neuron_compile import PIPELINE_CLASSES
    from app.models.families import FAMILIES

    return [family for family in FAMILIES if family.name in PIPELINE_CLASSES]


def check_pipeline_class() -> str:
    """Each Neuron family's optimum-neuron class runs a diffusers pipeline of that family (model_index.json's
    class)."""
    runs = []
    for family in _neuron_families():
        pipeline_class = _pipeline_class(family.name)
        runs.append(f"{pipeline_class.__qualname__} runs {pipeline_class.auto_model_class.__qualname__}")
        assert pipeline_class.auto_model_class.__qualname__ in family.pipeline_classes, runs[-1]
    return "; ".join(runs)


def check_backend_load_and_call() -> str:
    """For each family, the backend's from_pretrained(path), set_progress_bar_config and pipeline call
    arguments are accepted."""
    from app.backends.base import GenerationParams, pipeline_arguments

    described = []
    for family in _neuron_families():
        pipeline_class = _pipeline_class(family.name)
        inspect.signature(pipeline_class.from_pretrained).bind("/models/compiled/1024x1024")
        inspect.signature(pipeline_class.set_progress_bar_config).bind(None, disable=True)
        batch = [
            GenerationParams(
                prompt="a",
                negative_prompt="",
                steps=2,
                guidance_scale=family.default_guidance,
                width=WIDTH,
                height=HEIGHT,
                seed=1,
            )
        ]
        arguments = pipeline_arguments(batch, on_step=None, family=family)
        # The Neuron pipelines' __call__ takes **kwargs and calls auto_model_class.__call__ with the
        # compiled height and width added; every argument the backend passes must be a parameter there.
        call = inspect.signature(pipeline_class.auto_model_class.__call__)
        call.bind(None, height=HEIGHT, width=WIDTH, **arguments)
        missing = [name for name in arguments if name not in call.parameters]
        assert not missing, (family.name, missing)
        described.append(f"{family.name}: " + ", ".join(sorted(arguments)))
    return "call arguments: " + "; ".join(described)


def _compilation_configs(models_and_neuron_configs: dict[str, Any], **export_kwargs: Any) -> dict[str, Any]:
    """The config optimum-neuron writes beside each compiled model, by model type: what its export_models
    does after each compile (optimum-neuron 0.4.5 exporters/neuron/convert.py lines 383-410), with its
    own function, so the compile's settings can be read before the stand-in stops the first compile."""
    from collections import OrderedDict

    from diffusers.configuration_utils import FrozenDict
    from optimum.exporters.neuron import convert
    from optimum.neuron.utils import DiffusersPretrainedConfig, store_compilation_config

    configs = {}
    for _, neuron_config in models_and_neuron_configs.values():
        model_config = neuron_config._config
        if isinstance(model_config, FrozenDict):
            model_config = DiffusersPretrainedConfig.from_dict(OrderedDict(model_config))
        mandatory = [e for arg in neuron_config.INPUT_ARGS for e in ((arg,) if isinstance(arg, str) else arg[1:])]
        config = store_compilation_config(
            config=model_config,
            input_shapes={k: v for k, v in neuron_config.input_shapes.items() if k in mandatory},
            compiler_kwargs=export_kwargs["compiler_kwargs"],
            int_dtype=neuron_config.int_dtype,
            float_dtype=neuron_config.float_dtype,
            dynamic_batch_size=neuron_config.dynamic_batch_size,
            tensor_parallel_size=neuron_config.tensor_parallel_size,
            compiler_type=convert.NEURON_COMPILER_TYPE,
            compiler_version=convert.NEURON_COMPILER_VERSION,
            inline_weights_to_neff=export_kwargs["inline_weights_to_neff"],
            optlevel=export_kwargs["optlevel"],
            model_type=getattr(neuron_config, "MODEL_TYPE", None),
            task=getattr(neuron_config, "task", None),
            output_attentions=getattr(neuron_config, "output_attentions", False),
            output_hidden_states=getattr(neuron_config, "output_hidden_states", False),
        )
        configs[config.neuron["model_type"]] = config
    return configs


@dataclasses.dataclass(frozen=True)
class Export:
    """What one run of the compile job's export on a built-in model left: the error it stopped with, the
    compile configs by model type, the weights, each from_pretrained call's keywords, export_models' keywords."""

    error: BaseException | None
    recorded: dict[str, Any]
    weights: Path
    calls: list[dict[str, Any]]
    export: dict[str, Any]


# Where the test process saved the built-in models as folders: it builds them with the service's own transformers,
# because builtin:tiny-flux's T5 tokenizer is built with T5TokenizerFast(vocab=...), which the Neuron image's
# transformers 4.57 refuses (its convert_slow_tokenizer wants a vocab file); that line only loads the saved folder.
MODELS_ENV = "NEURON_CONTRACT_MODELS"

# The built-in model per family, and the tensor parallel degree its export is asked for (Flux: more than one,
# as FLUX.1-schnell is compiled, to check the keyword reaches the transformer's compile config).
EXPORTS: dict[str, tuple[str, int]] = {
    "sd": ("builtin:tiny", 1),
    "sdxl": ("builtin:tiny-sdxl", 1),
    "flux": ("builtin:tiny-flux", 2),
}


@functools.cache
def _export_tiny_model(family_name: str) -> Export:
    """Run the compile job's export on the family's built-in model (saved as a folder), once, up to the stand-in's
    first compile; the pipeline class is the one the compile job picks from the folder's model_index.json."""
    import optimum.exporters.neuron.__main__ as export_main
    import optimum.neuron

    from app.model_store.neuron_compile import ExportSpec, optimum_compile, pipeline_class_name
    from app.models.builtin import builtin_spec
    from app.models.families import family_of
    from app.models.random_pipeline import materialize
    from common.model_store.layout import CompileShape

    model_id, tensor_parallel_size = EXPORTS[family_name]
    recorded: dict[str, Any] = {}
    export: dict[str, Any] = {}
    export_models = export_main.export_models

    def recording_export_models(**kwargs: Any) -> Any:
        export.update(kwargs)
        recorded.update(_compilation_configs(**kwargs))
        return export_models(**kwargs)  # the real export, up to the stand-in's first compile

    scratch = Path(tempfile.mkdtemp(prefix="export-"))  # under main()'s scratch folder
    # The folder the test process saved (materialize finds it there and builds nothing; see MODELS_ENV).
    weights = materialize(builtin_spec(model_id), Path(os.environ[MODELS_ENV]))
    family = family_of(weights)
    assert family.name == family_name, (model_id, family.name)
    pipeline_class = getattr(optimum.neuron, pipeline_class_name(family))
    from_pretrained = pipeline_class.from_pretrained  # bound to the class; inherited, not in its __dict__
    calls: list[dict[str, Any]] = []

    def recording_from_pretrained(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return from_pretrained(*args, **kwargs)

    export_main.export_models = recording_export_models
    pipeline_class.from_pretrained = recording_from_pretrained
    error = None
    try:
        spec = ExportSpec(family, CompileShape(BATCH, HEIGHT, WIDTH), tensor_parallel_size)
        optimum_compile(weights, spec, scratch / "compiled" / f"{WIDTH}x{HEIGHT}")
    except Exception as exc:  # expected: the first use of the Neuron SDK
        error = exc
    finally:
        export_main.export_models = export_models
        del pipeline_class.from_pretrained
    return Export(error, recorded, weights, calls, export)


# Where each family's export meets the Neuron SDK first. SD and SDXL: torch_neuronx.trace, the first compile (the
# stand-in prepares its work directory, then stops). Flux: its T5 encoder and transformer are neuronx-distributed
# models, which optimum-neuron 0.4.5 wraps in neuronx_distributed's BaseModelInstance right before it traces and
# compiles them (exporters/neuron/convert.py export_neuronx: patch_model_and_prepare_aliases, then trace_neuronx;
# config.py NxDExportNeuronConfig), after the dummy inputs are made; the stand-in stops at that wrapper.
FIRST_SDK_USE = {
    "sd": "torch_neuronx.trace",
    "sdxl": "torch_neuronx.trace",
    "flux": "neuronx_distributed.trace.model_builder.BaseModelInstance()",
}


def _check_export(family_name: str) -> Export:
    """What every family's export must show: it stops at the Neuron SDK's first compile, not earlier (the Hub,
    another SDK call), with every keyword the compile job passes known to optimum-neuron, and no compile cache."""
    import optimum.neuron
    from optimum.neuron.utils.argument_utils import InputShapesArguments

    from app.model_store.neuron_compile import pipeline_class_name
    from app.models.families import family_named
    from tests.contract.neuron_sdk_standin import NeuronSdkUnavailable

    result = _export_tiny_model(family_name)
    error = result.error
    assert isinstance(error, NeuronSdkUnavailable), "".join(traceback.format_exception(error)) if error else error
    # The stop is the first compile (FIRST_SDK_USE), not an earlier use of the SDK or the Hub.
    assert FIRST_SDK_USE[family_name] in str(error), "".join(traceback.format_exception(error))
    if family_name == "flux":
        frames = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
        assert frames[-4:-2] == ["export_neuronx", "patch_model_and_prepare_aliases"], frames
    # optimum-neuron drops keywords it does not know without a word: each must be a parameter of
    # from_pretrained or _export, or an input shape of its own InputShapesArguments.
    (kwargs,) = result.calls
    pipeline_class = getattr(optimum.neuron, pipeline_class_name(family_named(family_name)))
    known = {field.name for field in dataclasses.fields(InputShapesArguments)}
    for method in (pipeline_class.from_pretrained, pipeline_class._export):
        known |= set(inspect.signature(method).parameters)
    unknown = sorted(set(kwargs) - known)
    assert kwargs.get("export") is True and not unknown, f"export={kwargs.get('export')}, ignored: {unknown}"
    # No compile cache: no Hub lookup before the export, no cache write after it.
    assert result.export["disable_neuron_cache"] is True and result.export["compiler_workdir"], result.export
    return result


def _describe(result: Export) -> str:
    (kwargs,) = result.calls
    return (
        f"keywords {sorted(kwargs)}; export stopped at the SDK ({result.error}); configs for {sorted(result.recorded)}"
    )


def check_compile_export() -> str:
    """SD: the compile job's from_pretrained(export=True, ...) runs optimum-neuron's export up to the Neuron SDK,
    with every keyword honoured: the compile configs hold its shape and auto-cast settings."""
    result = _check_export("sd")
    unet, text_encoder = result.recorded["unet"].neuron, result.recorded["clip-text-model"].neuron
    assert (unet["auto_cast"], unet["auto_cast_type"]) == ("matmul", "bf16"), unet
    assert text_encoder["static_batch_size"] == BATCH, text_encoder
    assert (unet["static_height"] * 8, unet["static_width"] * 8) == (HEIGHT, WIDTH), unet
    assert unet["tensor_parallel_size"] == 1, unet
    return _describe(result)


def check_compile_export_sdxl() -> str:
    """SDXL: NeuronStableDiffusionXLPipeline's export of the built-in SDXL model runs up to the Neuron SDK; both
    text encoders and the UNet are configured with the compile job's shape and auto-cast settings."""
    result = _check_export("sdxl")
    recorded = {name: config.neuron for name, config in result.recorded.items()}
    unet = recorded["unet"]
    assert (unet["auto_cast"], unet["auto_cast_type"]) == ("matmul", "bf16"), unet
    assert (unet["static_height"] * 8, unet["static_width"] * 8) == (HEIGHT, WIDTH), unet
    assert unet["tensor_parallel_size"] == 1, unet
    # SDXL's two text encoders: CLIP and CLIP with projection (the pooled embeds of text_time conditioning).
    text_encoders = [config for name, config in recorded.items() if "clip" in name]
    assert len(text_encoders) == 2 and all(c["static_batch_size"] == BATCH for c in text_encoders), recorded
    return _describe(result)


def check_compile_export_flux() -> str:
    """Flux: NeuronFluxPipeline's export of the built-in Flux model runs up to the Neuron SDK with the tensor
    parallel degree, bf16 and the T5 prompt length the compile job asks for in the transformer's compile config."""
    from app.models.families import FLUX_SCHNELL

    _, tensor_parallel_size = EXPORTS["flux"]
    result = _check_export("flux")
    recorded = {name: config.neuron for name, config in result.recorded.items()}
    transformer = recorded["flux-transformer-2d"]
    assert transformer["tensor_parallel_size"] == tensor_parallel_size, transformer
    assert transformer["float_dtype"] == "bf16" and transformer["auto_cast"] is None, transformer
    assert transformer["static_batch_size"] == BATCH, transformer
    t5 = recorded["t5-encoder"]
    assert t5["static_sequence_length"] == FLUX_SCHNELL.max_sequence_length, t5
    return _describe(result)


def check_compiled_shape_keys() -> str:
    """read_compiled_shape finds the compiled shape in configs written the way optimum-neuron writes them."""
    from optimum.neuron.utils import (
        DIFFUSION_MODEL_TEXT_ENCODER_NAME,
        DIFFUSION_MODEL_UNET_NAME,
        DIFFUSION_MODEL_VAE_DECODER_NAME,
    )

    from app.backends.neuron import CompiledShape, read_compiled_shape

    result = _export_tiny_model("sd")
    recorded, weights = result.recorded, result.weights
    with tempfile.TemporaryDirectory() as scratch:
        artifacts = Path(scratch) / "artifacts"
        recorded["unet"].save_pretrained(artifacts / DIFFUSION_MODEL_UNET_NAME)
        recorded["clip-text-model"].save_pretrained(artifacts / DIFFUSION_MODEL_TEXT_ENCODER_NAME)
        # The VAE decoder's config is the model's VAE config (its block count gives the latent scale).
        vae_decoder = artifacts / DIFFUSION_MODEL_VAE_DECODER_NAME
        vae_decoder.mkdir()
        (vae_decoder / "config.json").write_text((weights / "vae" / "config.json").read_text())
        shape = read_compiled_shape(artifacts, fallback=CompiledShape(7, 64, 64))
    assert shape == CompiledShape(BATCH, HEIGHT, WIDTH), shape
    return f"{shape} from {DIFFUSION_MODEL_UNET_NAME}/, {DIFFUSION_MODEL_TEXT_ENCODER_NAME}/ configs"


def check_compile_save() -> str:
    """The compile job's save_pretrained(out_dir) is accepted."""
    inspect.signature(_pipeline_class().save_pretrained).bind(None, "/tmp/compiled")
    return "save_pretrained(save_directory)"


MODES: dict[str, list[Check]] = {
    "plain": [check_versions, check_pip_check, check_import_without_sdk],
    "standin": [
        check_pipeline_class,
        check_backend_load_and_call,
        check_compile_export,
        check_compile_export_sdxl,
        check_compile_export_flux,
        check_compiled_shape_keys,
        check_compile_save,
    ],
}


def main(argv: list[str]) -> int:
    """Run one mode's checks and write their results as JSON."""
    mode, out = argv
    if mode == "standin":
        from tests.contract import neuron_sdk_standin

        neuron_sdk_standin.install()
    results = {}
    with tempfile.TemporaryDirectory(prefix="neuron-contract-") as scratch:
        tempfile.tempdir = scratch  # every temporary file of the checks goes here, and goes with it
        for check in MODES[mode]:
            try:
                results[check.__name__] = {"ok": True, "detail": check()}
            except Exception:
                results[check.__name__] = {"ok": False, "detail": traceback.format_exc()}
    Path(out).write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
