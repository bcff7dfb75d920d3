"""IAM: each pod role reads only its model-store prefix and the model's LoRA adapters, and puts only the service's
metric namespace."""

from __future__ import annotations

import json

from cdk.constructs.pod_identity import POD_IDENTITY_PRINCIPAL
from cdk.image import neuron_compile_job as njob
from cdk.image.serving import ROUTING_CONTROLLER_NAME as IMAGE_CONTROLLER
from cdk.llm.routes import ROUTING_CONTROLLER_NAME as LLM_CONTROLLER
from common import metric_names
from common.model_store.layout import loras_prefix, weights_prefix


def statements(template, role_prefix):
    roles = {k: v for k, v in template.find_resources("AWS::IAM::Role").items() if k.startswith(role_prefix)}
    (role,) = roles.values()
    trust = role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert all(s["Principal"] == {"Service": POD_IDENTITY_PRINCIPAL} for s in trust)
    assert {a for s in trust for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])} == {
        "sts:AssumeRole",
        "sts:TagSession",
    }
    (policy,) = role["Properties"]["Policies"]
    return policy["PolicyDocument"]["Statement"]


def actions(statement):
    return [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]


def object_suffixes(statement):
    resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
    return sorted(r["Fn::Join"][1][1] for r in resources)


def check_service_role(template, role_prefix, prefixes):
    by_action = {}
    for s in statements(template, role_prefix):
        assert s["Effect"] == "Allow"
        for a in actions(s):
            assert "*" not in a
            by_action[a] = s
    assert set(by_action) == {"s3:GetObject", "s3:ListBucket", "cloudwatch:PutMetricData"}
    assert object_suffixes(by_action["s3:GetObject"]) == sorted(f"/{prefix}*" for prefix in prefixes)
    assert by_action["s3:ListBucket"]["Condition"] == {"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}}
    assert by_action["s3:ListBucket"]["Resource"] == {
        "Fn::GetAtt": [by_action["s3:ListBucket"]["Resource"]["Fn::GetAtt"][0], "Arn"]
    }
    put = by_action["cloudwatch:PutMetricData"]
    assert put["Condition"] == {"StringEquals": {"cloudwatch:namespace": metric_names.NAMESPACE}}


def test_gpu_role_reads_weights_and_adapters_prefixes_only(serving):
    model_id = serving.config.model_id
    check_service_role(serving.template, "NvidiaIdentityRole", [weights_prefix(model_id), loras_prefix(model_id)])


def test_neuron_role_reads_compiled_and_adapters_prefixes_only(serving):
    prefixes = [njob.artifact_prefix(serving.config), loras_prefix(serving.config.model_id)]
    check_service_role(serving.template, "NeuronIdentityRole", prefixes)


def test_compile_role_reads_weights_writes_compiled_only(serving):
    cfg = serving.config
    by_action = {a: s for s in statements(serving.template, "NeuronCompileIdentityRole") for a in actions(s)}
    assert set(by_action) == {"s3:GetObject", "s3:ListBucket", "s3:PutObject"}
    assert object_suffixes(by_action["s3:PutObject"]) == [f"/{njob.artifact_prefix(cfg)}*"]
    assert object_suffixes(by_action["s3:GetObject"]) == sorted(
        [f"/{weights_prefix(cfg.model_id)}*", f"/{njob.artifact_prefix(cfg)}*", f"/{loras_prefix(cfg.model_id)}*"]
    )


def test_pod_identity_associations_bind_each_service_account(serving):
    assocs = serving.template.find_resources("AWS::EKS::PodIdentityAssociation")
    bound = {(a["Properties"]["Namespace"], a["Properties"]["ServiceAccount"]) for a in assocs.values()}
    ns = serving.config.namespace
    image = {(ns, "sd-neuron"), (ns, "sd-gpu"), (ns, njob.SERVICE_ACCOUNT), (ns, IMAGE_CONTROLLER)}
    llm = {
        (ns, "llm-neuron-sa"),
        (ns, "llm-gpu-sa"),
        (ns, "llm-neuron-compile"),
        (ns, LLM_CONTROLLER),
    }
    assert bound == image | (llm if serving.llm is not None else set())
    service_accounts = {m["metadata"]["name"] for m in serving.manifests if m["kind"] == "ServiceAccount"}
    assert {sa for _, sa in bound} == service_accounts


def test_model_store_bucket_is_locked_down(serving):
    buckets = serving.template.find_resources("AWS::S3::Bucket")
    for bucket in buckets.values():
        props = bucket["Properties"]
        assert props["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True,
            "BlockPublicPolicy": True,
            "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True,
        }
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
        assert props["VersioningConfiguration"] == {"Status": "Enabled"}
    policies = json.dumps(serving.template.find_resources("AWS::S3::BucketPolicy"))
    assert policies.count('"aws:SecureTransport": "false"') == len(buckets)
