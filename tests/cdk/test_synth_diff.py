"""tools/synth_diff.py tells a move that changes nothing deployed from one that replaces or changes something."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools import synth_diff

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
HASH_A, HASH_B = "a" * 64, "b" * 64


def template(resources: dict[str, Any]) -> dict[str, Any]:
    return {"Resources": resources, "Outputs": {"Url": {"Value": "x"}}}


def write(folder: Path, body: dict[str, Any], *, indent: int = 1) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "SdOnEksServing.template.json").write_text(json.dumps(body, indent=indent))
    return folder


BUCKET = {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "b"}}
NAMESPACE = {"Type": MANIFEST, "Properties": {"Manifest": '[{"kind":"Namespace"}]'}}
CODE = {"Type": "AWS::Lambda::Function", "Properties": {"Code": {"S3Key": f"{HASH_A}.zip"}}}


def report(tmp_path: Path, before: dict[str, Any], after: dict[str, Any]) -> tuple[int, list[str]]:
    a, b = write(tmp_path / "a", before), write(tmp_path / "b", after)
    diffs = synth_diff.compare(a, b)
    return (1 if any(d.breaking for d in diffs) else 0), [line for d in diffs for line in d.lines()]


def test_the_same_resources_in_another_order_are_reported_as_such(tmp_path):
    before = template({"Bucket": BUCKET, "Namespace": NAMESPACE})
    after = template({"Namespace": NAMESPACE, "Bucket": BUCKET})
    assert report(tmp_path, before, after) == (
        0,
        ["SdOnEksServing: the same JSON in another order (resources, outputs or keys)"],
    )


def test_asset_hashes_alone_are_not_a_change(tmp_path):
    moved = {**CODE, "Properties": {"Code": {"S3Key": f"{HASH_B}.zip"}}}
    status, lines = report(tmp_path, template({"Fn": CODE}), template({"Fn": moved}))
    assert (status, lines) == (0, ["SdOnEksServing: identical apart from asset hashes (and order)"])


def test_a_renamed_stateful_resource_is_breaking(tmp_path):
    status, lines = report(tmp_path, template({"Bucket": BUCKET}), template({"StoreBucket": BUCKET}))
    assert status == 1
    assert "  - logical id Bucket" in lines and "  + logical id StoreBucket" in lines


def test_a_changed_kubernetes_object_is_breaking(tmp_path):
    changed = {**NAMESPACE, "Properties": {"Manifest": '[{"kind":"Namespace","metadata":{}}]'}}
    status, lines = report(tmp_path, template({"Namespace": NAMESPACE}), template({"Namespace": changed}))
    assert (status, lines) == (1, ["SdOnEksServing: differs", "  ~ Kubernetes objects of Namespace"])


def test_another_changed_property_is_named(tmp_path):
    renamed = {**BUCKET, "Properties": {"BucketName": "c"}}
    status, lines = report(tmp_path, template({"Bucket": BUCKET}), template({"Bucket": renamed}))
    assert (status, lines) == (0, ["SdOnEksServing: differs", "  ~ resource Bucket (Properties: BucketName)"])
