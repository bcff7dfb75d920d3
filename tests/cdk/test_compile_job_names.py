"""A compile Job's name follows what it compiles, not the order the CDK app happened to create its tokens in:
otherwise an unrelated change to the app renames the Job, and the deploy starts a new compile (an inf2 node)."""

from __future__ import annotations

import subprocess
import sys

from tests.cdk.conftest import REPO_ROOT

PROGRAM = """
import json, sys
from aws_cdk import Token
from cdk.build import resolve_context
from cdk.config.serving import ServingConfig
from cdk.constructs.image_builds import image_uri
from cdk.image import neuron_compile_job as njob
for n in range(int(sys.argv[1])):  # tokens an unrelated part of the app creates first
    Token.as_string({"Ref": f"Unrelated{n}"})
cfg = ServingConfig.from_context(resolve_context(json.load(open("cdk.json"))["context"]))
image = image_uri("sd-on-eks", sys.argv[2])
print(image)
print(njob.job_name(cfg, image))
"""


def job_name_after(tokens_before: int, tag: str) -> tuple[str, str]:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tokens_before), tag],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    image, name = result.stdout.split()[-2:]
    return image, name


def test_the_job_name_ignores_token_numbering_but_not_the_image_tag():
    image, name = job_name_after(0, "neuron-abc")
    renumbered, same = job_name_after(7, "neuron-abc")
    assert renumbered != image, "the tokens were renumbered (else this test proves nothing)"
    assert same == name
    assert job_name_after(0, "neuron-def")[1] != name


def test_the_job_name_follows_the_sizes_and_the_tensor_parallel_degree():
    """Both are arguments of the Job's immutable pod template: a change must be a new Job, not a failed update."""
    from cdk.config.serving import ServingConfig
    from cdk.image import neuron_compile_job as njob
    from tests.cdk.conftest import DEFAULT_CONTEXT

    def name(**overrides: object) -> str:
        return njob.job_name(ServingConfig.from_context({**DEFAULT_CONTEXT, **overrides}), "img")

    shipped = name()
    with_a_size = name(neuronCompileShapes=["512x512", "768x512"])
    sharded = name(neuronCompileTensorParallelSize=2, servingNeuronDevices=1)
    assert len({shipped, with_a_size, sharded}) == 3
