"""The jobs' AWS resources in the synthesized serving stack: encrypted, least-privilege, scaled on.

Uses the session synth; async-only scaling and routing are checked on the pure functions that
build them, with a config variant read through ServingConfig (no extra synth).
"""

from __future__ import annotations

import json

import pytest

from app.settings import Settings
from cdk.accelerators import ACCELERATORS
from cdk.config.context import ConfigError
from cdk.config.serving import ServingConfig
from cdk.image import scaling
from cdk.image import serving as image_serving
from cdk.image.jobs import JOBS_PREFIX, QUEUE_MAX_RECEIVES_FLOOR, queue_max_receives
from cdk.image.serving import routing_weights
from cdk.image.workload import deployment_name
from common import metric_names
from tests.cdk.conftest import DEFAULT_CONTEXT, as_list, service_deployments
from tests.cdk.test_serving_metrics_contract import alarm_metrics
from tests.support.k8s_schema import validate_custom_resources

# The aws-sqs-queue metadata KEDA v2.20.1 parses (kedacore/keda, pkg/scalers/aws_sqs_queue_scaler.go).
KEDA_SQS_KEYS = {
    "queueLength",
    "activationQueueLength",
    "queueURL",
    "awsRegion",
    "awsEndpoint",
    "scaleOnInFlight",
    "scaleOnDelayed",
    "identityOwner",
}


def one(template, resource_type, logical_prefix):
    found = {k: v for k, v in template.find_resources(resource_type).items() if k.startswith(logical_prefix)}
    assert len(found) == 1, sorted(found)
    return next(iter(found.items()))


@pytest.fixture(scope="module")
def jobs(serving):
    t = serving.template
    key_id, key = one(t, "AWS::KMS::Key", "JobsKey")
    queue_id, queue = one(t, "AWS::SQS::Queue", "JobsQueue")
    dlq_id, dlq = one(t, "AWS::SQS::Queue", "JobsDeadLetters")
    topic_id, topic = one(t, "AWS::SNS::Topic", "JobsFinished")
    bucket_id, bucket = one(t, "AWS::S3::Bucket", "JobsResults")
    return {
        "key": (key_id, key),
        "queue": (queue_id, queue),
        "dlq": (dlq_id, dlq),
        "topic": (topic_id, topic),
        "bucket": (bucket_id, bucket),
    }


def test_queue_dlq_topic_and_results_are_encrypted_with_the_rotating_jobs_key(serving, jobs):
    key_id, key = jobs["key"]
    assert key["Properties"]["EnableKeyRotation"] is True
    key_arn = {"Fn::GetAtt": [key_id, "Arn"]}
    for name in ("queue", "dlq"):
        assert jobs[name][1]["Properties"]["KmsMasterKeyId"] == key_arn
    assert jobs["topic"][1]["Properties"]["KmsMasterKeyId"] == key_arn
    (rule,) = jobs["bucket"][1]["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key_arn}
    # TLS only, on every one of them.
    policies = json.dumps(
        [serving.template.find_resources(t) for t in ("AWS::SQS::QueuePolicy", "AWS::SNS::TopicPolicy")]
    )
    for logical in (jobs["queue"][0], jobs["dlq"][0], jobs["topic"][0]):
        assert logical in policies
    assert policies.count('"aws:SecureTransport": "false"') >= 3


def test_the_queue_gives_up_only_far_beyond_the_attempts_and_results_expire(serving, jobs):
    cfg = serving.config.jobs
    redrive = jobs["queue"][1]["Properties"]["RedrivePolicy"]
    # Hand-backs at SIGTERM are receives, not attempts: the service counts attempts, the queue's
    # limit is a safety net (and the pods read the same number).
    assert redrive == {
        "deadLetterTargetArn": {"Fn::GetAtt": [jobs["dlq"][0], "Arn"]},
        "maxReceiveCount": queue_max_receives(cfg),
    }
    assert redrive["maxReceiveCount"] >= max(QUEUE_MAX_RECEIVES_FLOOR, 10 * cfg.max_receives)
    assert jobs["queue"][1]["Properties"]["VisibilityTimeout"] == cfg.visibility_s
    (rule,) = jobs["bucket"][1]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rule["Prefix"] == JOBS_PREFIX and rule["Status"] == "Enabled"
    assert rule["ExpirationInDays"] == cfg.result_retention_days
    assert jobs["bucket"][1]["Properties"]["PublicAccessBlockConfiguration"]["RestrictPublicBuckets"] is True


def jobs_policy_statements(template, accelerator):
    policies = {
        k: v
        for k, v in template.find_resources("AWS::IAM::Policy").items()
        if k.startswith(f"{accelerator.capitalize()}IdentityJobs")
    }
    (policy,) = policies.values()
    return policy["Properties"]["PolicyDocument"]["Statement"], policy["Properties"]["Roles"]


@pytest.mark.parametrize("accelerator", ["neuron", "nvidia"])
def test_pods_may_only_use_their_queue_prefix_topic_and_key(serving, jobs, accelerator):
    statements, roles = jobs_policy_statements(serving.template, accelerator)
    assert roles == [
        {
            "Ref": next(
                k
                for k in serving.template.find_resources("AWS::IAM::Role")
                if k.startswith(f"{accelerator.capitalize()}IdentityRole")
            )
        }
    ]
    dlq_arn = {"Fn::GetAtt": [jobs["dlq"][0], "Arn"]}
    # The dead-letter queue: receive and delete only (a pod fails and announces the job, then deletes it).
    (settle,) = [s for s in statements if s["Resource"] == dlq_arn]
    assert sorted(as_list(settle["Action"])) == ["sqs:DeleteMessage", "sqs:ReceiveMessage"]
    statements = [s for s in statements if s is not settle]
    by_action = {a: s for s in statements for a in as_list(s["Action"])}
    assert set(by_action) == {
        "sqs:SendMessage",
        "sqs:ReceiveMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:DeleteMessage",
        "s3:GetObject",
        "s3:PutObject",
        "s3:ListBucket",
        "sns:Publish",
        "kms:Decrypt",
        "kms:GenerateDataKey",
    }
    queue_arn = {"Fn::GetAtt": [jobs["queue"][0], "Arn"]}
    for action in ("sqs:SendMessage", "sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage"):
        assert by_action[action]["Resource"] == queue_arn
    (objects,) = as_list(by_action["s3:GetObject"]["Resource"])
    assert objects["Fn::Join"][1] == [{"Fn::GetAtt": [jobs["bucket"][0], "Arn"]}, f"/{JOBS_PREFIX}*"]
    assert by_action["s3:PutObject"] is by_action["s3:GetObject"]
    assert by_action["s3:ListBucket"]["Condition"] == {"StringLike": {"s3:prefix": [f"{JOBS_PREFIX}*"]}}
    assert by_action["sns:Publish"]["Resource"] == {"Ref": jobs["topic"][0]}
    kms = by_action["kms:Decrypt"]
    assert kms["Resource"] == {"Fn::GetAtt": [jobs["key"][0], "Arn"]}
    services = json.dumps(kms["Condition"]["StringEquals"]["kms:ViaService"])
    for service in ("sqs.", "s3.", "sns."):
        assert service in services
    assert jobs["dlq"][0] not in json.dumps(statements)  # nothing else touches the dead-letter queue


def test_keda_may_only_read_the_queue_depth(serving, jobs):
    (policy,) = [
        p for k, p in serving.template.find_resources("AWS::IAM::Policy").items() if k.startswith("KedaReadsJobQueue")
    ]
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Action"] == "sqs:GetQueueAttributes"
    assert statement["Resource"] == {"Fn::GetAtt": [jobs["queue"][0], "Arn"]}
    (role,) = policy["Properties"]["Roles"]
    assert "Fn::ImportValue" in json.dumps(role)  # the KEDA operator's role, from the cluster stack


def test_each_scaled_object_also_scales_on_the_queue_and_passes_the_keda_schema(serving, jobs):
    # The image service's (the LLM Deployments scale on vLLM's queue and KV cache: tests/cdk/test_llm_serving.py).
    scaled = [m for m in serving.manifests if m["kind"] == "ScaledObject" and m["metadata"]["name"].startswith("sd-")]
    assert len(scaled) == len(serving.platform.accelerators)
    auth = {m["metadata"]["name"] for m in serving.manifests if m["kind"] == "TriggerAuthentication"}
    for so in scaled:
        (trigger,) = [t for t in so["spec"]["triggers"] if t["type"] == "aws-sqs-queue"]
        metadata = trigger["metadata"]
        assert set(metadata) <= KEDA_SQS_KEYS
        assert all(isinstance(v, str) for v in metadata.values())
        assert metadata["queueURL"] == jobs["queue"][0]  # the Ref placeholder of the job queue
        acc = next(a for a in ACCELERATORS.values() if deployment_name(a) == so["metadata"]["name"])
        assert int(metadata["queueLength"]) == serving.config.per_accelerator[acc.name].jobs_target
        assert trigger["authenticationRef"]["name"] in auth
    assert validate_custom_resources(scaled) == []


def test_pods_get_the_job_settings_the_service_reads(serving, jobs):
    for deployment in service_deployments(serving.manifests):
        env = {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert env["JOBS"] == "aws" and env["JOBS_PREFIX"] == JOBS_PREFIX
        assert env["JOBS_QUEUE_URL"] == jobs["queue"][0] and env["JOBS_TOPIC_ARN"] == jobs["topic"][0]
        assert int(env["JOBS_MAX_RECEIVES"]) == serving.config.jobs.max_receives
        assert env["JOBS_DEAD_LETTER_URL"] == jobs["dlq"][0]  # the Ref placeholder of the dead-letter queue
        assert int(env["JOBS_QUEUE_MAX_RECEIVES"]) == queue_max_receives(serving.config.jobs)
        # The service accepts them (names and bounds) as the pod would set them.
        settings = Settings(**{k.lower(): v for k, v in env.items() if k.startswith("JOBS")})
        assert settings.jobs_visibility_s == serving.config.jobs.visibility_s


def test_dashboard_and_alarms_watch_the_queue_and_its_dead_letters(serving, jobs):
    (dashboard,) = serving.template.find_resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for name in (metric_names.SQS_VISIBLE, metric_names.SQS_NOT_VISIBLE, metric_names.SQS_OLDEST_AGE):
        assert name in body
    for title in ("Job queue depth", "Age of the oldest job", "Jobs finished / failed", "Dead-letter queue depth"):
        assert title in body
    alarms = serving.template.find_resources("AWS::CloudWatch::Alarm")
    (dead,) = [a["Properties"] for k, a in alarms.items() if k.startswith("AlarmsJobsDeadLettered")]
    (read,) = alarm_metrics(dead)
    # The pods delete a dead letter once they settled its job: the alarm counts receives, not depth.
    assert read == (
        metric_names.SQS_NAMESPACE,
        metric_names.SQS_RECEIVED,
        [{"Name": "QueueName", "Value": {"Fn::GetAtt": [jobs["dlq"][0], "QueueName"]}}],
    )
    stats = [dead.get("Statistic")] + [q["MetricStat"]["Stat"] for q in dead.get("Metrics", []) if "MetricStat" in q]
    assert [stat for stat in stats if stat] == ["Sum"]
    assert dead["Threshold"] == 0 and dead["ComparisonOperator"] == "GreaterThanThreshold"
    (age,) = [a["Properties"] for k, a in alarms.items() if k.startswith("AlarmsJobsWaitingTooLong")]
    assert [name for _, name, _ in alarm_metrics(age)] == [metric_names.SQS_OLDEST_AGE]
    assert age["Threshold"] == serving.config.jobs.alarm_oldest_age_s


ASYNC_NVIDIA = DEFAULT_CONTEXT | {"servingAsyncOnlyNvidia": True, "scalingMinReplicasNvidia": 0}


def test_an_async_only_accelerator_scales_on_the_queue_alone_from_zero_and_gets_no_traffic():
    cfg = ServingConfig.from_context(ASYNC_NVIDIA)
    nvidia, neuron = ACCELERATORS["nvidia"], ACCELERATORS["neuron"]
    so = scaling.scaled_object(nvidia, cfg, "us-east-1", "https://sqs.us-east-1.amazonaws.com/123456789012/jobs")
    assert so["spec"]["minReplicaCount"] == 0
    assert [t["type"] for t in so["spec"]["triggers"]] == ["aws-sqs-queue"]
    assert validate_custom_resources([so]) == []
    interactive = scaling.scaled_object(neuron, cfg, "us-east-1", "https://sqs.us-east-1.amazonaws.com/1/jobs")
    assert [t["type"] for t in interactive["spec"]["triggers"]] == ["aws-cloudwatch", "aws-sqs-queue"]
    assert routing_weights(cfg, (neuron, nvidia)) == {deployment_name(neuron): 100}
    # The routing controller steers only what the ALB routes.
    routed = image_serving.image_routing((neuron, nvidia), routing_weights(cfg, (neuron, nvidia))).pools
    assert [p.accelerator for p in routed] == ["neuron"]


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"scalingMinReplicasNvidia": 0}, "servingAsyncOnlyNvidia"),
        ({"servingAsyncOnlyNvidia": True, "servingAsyncOnlyNeuron": True}, "servingAsyncOnlyNeuron"),
        ({"servingAsyncOnlyNvidia": True, "routingMode": "capacity"}, "servingAsyncOnlyNvidia"),
        ({"jobsMaxReceives": 0}, "jobsMaxReceives"),
        ({"jobsVisibilitySeconds": 5}, "jobsVisibilitySeconds"),
        ({"jobsImageUrlSeconds": 86400}, "jobsImageUrlSeconds"),
        ({"scalingJobsTargetNeuron": "many"}, "scalingJobsTargetNeuron"),
    ],
)
def test_bad_job_settings_name_their_key(values, key):
    with pytest.raises(ConfigError, match=key):
        ServingConfig.from_context(DEFAULT_CONTEXT | values)
