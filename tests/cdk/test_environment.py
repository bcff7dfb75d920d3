"""A deploy targets one explicit account and region, and every region-dependent fact follows from it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from aws_cdk import App, Stack
from aws_cdk import Environment as CdkEnvironment
from aws_cdk.assertions import Template

from cdk import versions
from cdk.config import AppConfig, ConfigError
from cdk.config.environment import EXAMPLE_ACCOUNT, EXAMPLE_REGION
from cdk.serving.model_store import ACCESS_LOG_PREFIX, ELB_LOG_DELIVERY_SERVICE, ModelStore
from tests.cdk.conftest import DEFAULT_CONTEXT, EXAMPLE_ENVIRONMENT, REPO_ROOT, VARIANT_REGION, resources_of

# ELB account for us-east-1 as AWS documents it for ALB access logs (Elastic Load Balancing user guide,
# "Enable access logs": regions available before August 2022), written here, not read from CDK.
US_EAST_1_ELB_ACCOUNT = "127311923021"
# Asia Pacific (Melbourne) opened in January 2023, after August 2022: no ELB account, the service principal.
NEW_REGION = "ap-southeast-4"
CLI_ENV = {"CDK_DEFAULT_ACCOUNT": "111122223333", "CDK_DEFAULT_REGION": "eu-west-1"}


def _config(environ=None, **overrides):
    return AppConfig.from_context({**DEFAULT_CONTEXT, **overrides}, environ)


def test_no_account_is_an_error_naming_the_settings():
    with pytest.raises(ConfigError) as raised:
        _config()
    message = str(raised.value)
    for named in ("CDK_DEFAULT_ACCOUNT", "-c account=", "CDK_DEFAULT_REGION", "-c region=", "exampleEnvironment"):
        assert named in message


def test_an_account_without_a_region_is_an_error_naming_the_settings():
    with pytest.raises(ConfigError, match=r"CDK_DEFAULT_REGION.*-c region="):
        _config({"CDK_DEFAULT_ACCOUNT": "111122223333"})


def test_the_cli_environment_is_used_and_context_wins_over_it():
    assert (_config(CLI_ENV).account, _config(CLI_ENV).region) == ("111122223333", "eu-west-1")
    config = _config(CLI_ENV, account="444455556666", region="us-west-2")
    assert (config.account, config.region, config.environment.example) == ("444455556666", "us-west-2", False)
    with pytest.raises(ConfigError, match="CDK_DEFAULT_ACCOUNT"):
        _config({"CDK_DEFAULT_ACCOUNT": "12345", "CDK_DEFAULT_REGION": "eu-west-1"})


def test_the_example_environment_is_only_a_stand_in_for_a_missing_account():
    # The CLI always sets CDK_DEFAULT_REGION; without credentials the example keeps its own region.
    example = _config({"CDK_DEFAULT_REGION": "eu-west-1"}, **EXAMPLE_ENVIRONMENT)
    assert (example.account, example.region, example.environment.example) == (EXAMPLE_ACCOUNT, EXAMPLE_REGION, True)
    # With credentials, a real synth even when exampleEnvironment is on.
    real = _config(CLI_ENV, **EXAMPLE_ENVIRONMENT)
    assert (real.account, real.environment.example) == ("111122223333", False)
    with pytest.raises(ConfigError, match="needs an account"):
        _config(region=NEW_REGION, **EXAMPLE_ENVIRONMENT)


# A base image named the way versions.py names DLC images: the default DLC account, "{region}".
DLC_IMAGE = f"{versions.DLC_REGISTRY_ACCOUNT}.dkr.ecr.{{region}}.amazonaws.com/pytorch:a-tag"


def test_dlc_base_images_come_from_the_regions_dlc_registry():
    # aws/deep-learning-containers available_images.md: eu-south-1 (Milan) serves DLCs from 692866216735.
    milan = _config(account="111122223333", region="eu-south-1", nvidiaBaseImage=DLC_IMAGE)
    assert milan.capacity_for("nvidia").base_image == "692866216735.dkr.ecr.eu-south-1.amazonaws.com/pytorch:a-tag"
    oregon = _config(account="111122223333", region="us-west-2", nvidiaBaseImage=DLC_IMAGE)
    assert oregon.capacity_for("nvidia").base_image == "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch:a-tag"
    # China: its own DLC account and domain (available_images.md: 727897471807, .amazonaws.com.cn).
    beijing = _config(account="111122223333", region="cn-north-1", nvidiaBaseImage=DLC_IMAGE)
    assert beijing.capacity_for("nvidia").base_image == "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/pytorch:a-tag"
    # A base outside the DLC registry is left as given.
    public = "public.ecr.aws/neuron/pytorch-inference-neuronx:2.8.0-neuronx-py311-sdk2.26.1-ubuntu22.04"
    assert (
        _config(account="111122223333", region="us-west-2", neuronBaseImage=public).capacity_for("neuron").base_image
        == public
    )


def test_a_region_without_a_known_dlc_registry_asks_for_the_full_image():
    with pytest.raises(ConfigError, match="nvidiaBaseImage"):
        _config(account="111122223333", region="af-south-1", accelerators="nvidia", nvidiaBaseImage=DLC_IMAGE)


def _log_policy_principals(region: str) -> list[object]:
    """Synthesize the model store alone in `region` and return its ALB log statement's principals."""
    app = App()
    stack = Stack(app, "Store", env=CdkEnvironment(account="111122223333", region=region))
    ModelStore(stack, "ModelStore", retain=False)
    template = Template.from_stack(stack).to_json()
    return _alb_log_principals(template)


def _alb_log_principals(template: dict) -> list[object]:
    found = []
    for policy in resources_of(template, "AWS::S3::BucketPolicy").values():
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
            if f"/{ACCESS_LOG_PREFIX}/AWSLogs/" in json.dumps(statement.get("Resource")):
                found.append(statement["Principal"])
    return found


def test_alb_logs_are_granted_to_the_regional_elb_account_in_us_east_1(variant_synth):
    assert variant_synth.config.region == VARIANT_REGION == "us-east-1"
    principals = _alb_log_principals(variant_synth.raw_templates["SdOnEksServing"])
    assert len(principals) == 1
    assert US_EAST_1_ELB_ACCOUNT in json.dumps(principals[0])
    assert ELB_LOG_DELIVERY_SERVICE not in json.dumps(principals)


@pytest.mark.synth  # synthesizes a stack of its own
def test_alb_logs_are_granted_to_the_log_delivery_service_in_a_newer_region():
    assert _log_policy_principals(NEW_REGION) == [{"Service": ELB_LOG_DELIVERY_SERVICE}]


def test_every_stack_of_the_default_synth_is_explicit_and_says_it_is_the_example(platform_synth):
    example_warnings = []
    for name, stack in ((s.stack_name, s) for s in platform_synth.assembly.stacks):
        assert (stack.environment.account, stack.environment.region) == (EXAMPLE_ACCOUNT, EXAMPLE_REGION), name
        outputs = platform_synth.raw_templates[name].get("Outputs", {})
        assert "NOT deployable" in outputs["ExampleEnvironment"]["Value"], name
        metadata = json.loads((platform_synth.outdir / f"{name}.metadata.json").read_text())
        warnings = [e["data"] for entries in metadata.values() for e in entries if e["type"] == "aws:cdk:warning"]
        example_warnings += [w for w in warnings if "EXAMPLE environment" in str(w) and "NOT deployable" in str(w)]
    assert len(example_warnings) == 1  # the CLI prints each stack's: once is enough


@pytest.mark.synth  # runs the CDK app (python app.py) in a process of its own, through no fixture
def test_the_default_synth_prints_no_deprecation_warning(tmp_path):
    """jsii prints each deprecated API once per process to the app's stderr (the CLI passes it on), so the
    app runs here as `make synth` runs it, in a process no other synth has warmed."""
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
            "CDK_CONTEXT_JSON": json.dumps({**DEFAULT_CONTEXT, **EXAMPLE_ENVIRONMENT}),
            "CDK_OUTDIR": str(tmp_path / "cdk.out"),
        },
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "cdk.out" / "SdOnEksCluster.template.json").is_file()
    assert "deprecated" not in result.stderr, result.stderr


def test_a_real_environment_carries_no_example_marks(variant_synth):
    for name, template in variant_synth.raw_templates.items():
        assert "ExampleEnvironment" not in template.get("Outputs", {}), name


@pytest.mark.synth  # runs the CDK app (python app.py), through no fixture
def test_app_without_an_account_exits_naming_the_settings():
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
            "CDK_CONTEXT_JSON": json.dumps(DEFAULT_CONTEXT),
            "CDK_DEFAULT_REGION": "us-east-1",  # what the CLI sets even without credentials
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "configuration error: no AWS account" in result.stderr
    assert "CDK_DEFAULT_ACCOUNT" in result.stderr
