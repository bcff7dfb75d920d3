"""Keys of the model store: what the CDK side, the compile job and the README all rely on."""

import pytest

from app.model_store.layout import (
    CompileShape,
    compiled_prefix,
    model_slug,
    s3_uri,
    weights_prefix,
)


def test_keys_follow_the_documented_layout():
    model = "stabilityai/stable-diffusion-2-1-base"
    assert model_slug(model) == "stabilityai--stable-diffusion-2-1-base"
    assert weights_prefix(model) == "models/stabilityai--stable-diffusion-2-1-base/"
    assert (
        compiled_prefix(model, "2.31.1", CompileShape(2, 768, 512))
        == "compiled/stabilityai--stable-diffusion-2-1-base/neuron-sdk-2.31.1/b2-h768-w512/"
    )
    assert s3_uri("bkt", weights_prefix(model)) == "s3://bkt/models/stabilityai--stable-diffusion-2-1-base/"


@pytest.mark.parametrize("bad", ["", "a/b/c", "../x", "org/..", "/abs", "a b", "org/"])
def test_bad_model_ids_cannot_escape_their_prefix(bad):
    with pytest.raises(ValueError):
        model_slug(bad)


@pytest.mark.parametrize(
    ("shape", "version"), [((0, 512, 512), "2.31.1"), ((1, 500, 512), "2.31.1"), ((1, 32, 512), "2.31.1")]
)
def test_bad_shapes_are_rejected(shape, version):
    with pytest.raises(ValueError):
        compiled_prefix("m", version, CompileShape(*shape))


def test_bad_sdk_version_is_rejected():
    with pytest.raises(ValueError, match="SDK version"):
        compiled_prefix("m", "latest", CompileShape(1, 512, 512))
