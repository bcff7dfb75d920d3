"""Every setting's bad value stops the synth with a message naming it; no synth needed here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cdk import versions
from cdk.config import AppConfig, ConfigError
from tests.cdk.conftest import DEFAULT_CONTEXT, EXAMPLE_ENVIRONMENT, REPO_ROOT
from tests.support.pinned_node import NODE_BIN


def _config(**overrides):
    return AppConfig.from_context({**DEFAULT_CONTEXT, **EXAMPLE_ENVIRONMENT, **overrides})


def test_defaults_are_complete_and_valid():
    config = _config()
    assert config.cluster_name == "sd-on-eks"
    assert config.kubernetes_version == versions.KUBERNETES_VERSION
    assert [a.name for a in config.accelerators] == ["neuron", "nvidia"]
    assert config.node_provisioner == "karpenter"
    assert config.endpoint_access == "private"
    assert config.vpc_id is None
    assert config.capacity_for("neuron").base_image == versions.NEURON_BASE_IMAGE.replace("{region}", config.region)
    assert config.capacity_for("nvidia").instance_families == ("g5", "g6")


def test_command_line_strings_are_accepted():
    # The image pod's instance must be of the families given (tests/cdk/test_pod_fit.py): it moves with them.
    config = _config(
        accelerators="nvidia,neuron",
        neuronMaxVcpu="64",
        nvidiaInstanceFamilies="g6e",
        servingInstanceTypeNvidia="g6e.xlarge",
    )
    # Stable order whatever the order given.
    assert [a.name for a in config.accelerators] == ["neuron", "nvidia"]
    assert config.capacity_for("neuron").max_vcpu == 64
    assert config.capacity_for("nvidia").instance_families == ("g6e",)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("clusterName", "9-starts-with-a-digit", "clusterName"),
        ("clusterName", "", "clusterName"),
        ("kubernetesVersion", "1.20", "one of 1.34, 1.35, 1.36"),
        ("accelerators", "tpu", "values from neuron, nvidia"),
        ("accelerators", [], "at least one value"),
        ("accelerators", "nvidia,nvidia", "no repeated values"),
        ("nodeProvisioner", "fargate", "one of karpenter, managed"),
        ("neuronInstanceFamilies", ["g5"], "neuronInstanceFamilies"),
        ("nvidiaInstanceFamilies", ["inf2"], "nvidiaInstanceFamilies"),
        ("neuronCapacityTypes", ["reserved"], "values from on-demand, spot"),
        ("nvidiaCapacityTypes", "SPOT", "values from on-demand, spot"),
        ("nvidiaCapacityTypes", ["on-demand", "spot"], "list spot first"),
        ("nvidiaCapacityTypes", [], "nvidiaCapacityTypes"),
        ("neuronCapacityType", "spot", "replaced by 'neuronCapacityTypes'"),
        ("neuronMaxVcpu", "lots", "an integer"),
        ("nvidiaMaxVcpu", 0, "at least 4"),
        ("neuronMaxNodes", 1000, "at most 100"),
        ("neuronBaseImage", "not an image", "neuronBaseImage"),
        ("nvidiaBaseImage", "registry/repo-without-tag", "nvidiaBaseImage"),
        ("endpointAccess", "public", "one of private, public-and-private"),
        ("endpointPublicCidrs", ["10.0.0.0/33"], "IPv4 CIDR"),
        ("vpcId", "vpc-123", "vpcId"),
        ("vpcCidr", "10.0.0.0/8", "vpcCidr"),
        ("maxAzs", 1, "at least 2"),
        ("systemInstanceType", "large", "systemInstanceType"),
        ("systemNodeCount", 0, "at least 1"),
        ("adminRoleArns", ["arn:aws:iam::123:user/me"], "adminRoleArns"),
        ("flowLogRetentionDays", 29, "flowLogRetentionDays"),
        ("account", "12345", "account"),
        ("region", "Moon-1", "region"),
    ],
)
def test_bad_values_name_the_setting(key, value, expected):
    with pytest.raises(ConfigError) as raised:
        _config(**{key: value})
    message = str(raised.value)
    assert key in message
    assert expected in message


def test_capacity_types_default_to_spot_with_on_demand_fallback():
    config = _config()
    for name in ("neuron", "nvidia"):
        assert config.capacity_for(name).capacity_types == ("spot", "on-demand")
    assert _config(neuronCapacityTypes="on-demand").capacity_for("neuron").capacity_types == ("on-demand",)


def test_managed_node_groups_take_one_capacity_type():
    with pytest.raises(ConfigError, match=r"'neuronCapacityTypes'.*nodeProvisioner=karpenter"):
        _config(nodeProvisioner="managed", nvidiaCapacityTypes="spot")
    assert _config(nodeProvisioner="managed", neuronCapacityTypes="spot", nvidiaCapacityTypes="on-demand")


def test_a_missing_required_setting_is_named():
    context = {k: v for k, v in DEFAULT_CONTEXT.items() if k != "clusterName"}
    with pytest.raises(ConfigError, match="'clusterName' is required"):
        AppConfig.from_context(context)


def test_public_endpoint_needs_cidrs_and_never_the_whole_internet():
    with pytest.raises(ConfigError, match="endpointPublicCidrs"):
        _config(endpointAccess="public-and-private", endpointPublicCidrs=[])
    with pytest.raises(ConfigError, match=r"0\.0\.0\.0/0"):
        _config(endpointAccess="public-and-private", endpointPublicCidrs=["0.0.0.0/0"])
    with pytest.raises(ConfigError, match="must be empty"):
        _config(endpointAccess="private", endpointPublicCidrs=["203.0.113.0/24"])
    assert _config(endpointAccess="public-and-private", endpointPublicCidrs="203.0.113.7/32").endpoint_public_cidrs == (
        "203.0.113.7/32",
    )


def test_existing_vpc_needs_an_explicit_environment():
    with pytest.raises(ConfigError, match="'vpcId' needs a real environment"):
        _config(vpcId="vpc-0123456789abcdef0")
    config = _config(vpcId="vpc-0123456789abcdef0", account="123456789012", region="eu-west-1")
    assert config.vpc_id == "vpc-0123456789abcdef0"


def test_disabled_accelerator_settings_are_not_required():
    context = {k: v for k, v in DEFAULT_CONTEXT.items() if not k.startswith("neuron")}
    config = AppConfig.from_context({**context, **EXAMPLE_ENVIRONMENT, "accelerators": ["nvidia"]})
    assert [a.name for a in config.accelerators] == ["nvidia"]


@pytest.mark.synth  # runs the CDK app (python app.py), through no fixture
def test_app_exits_with_the_message_on_a_bad_setting():
    result = subprocess.run(
        [sys.executable, "app.py"],
        cwd=REPO_ROOT,
        # What the CLI passes: cdk.json's context merged with -c nodeProvisioner=fargate.
        env={
            "PATH": f"{NODE_BIN}:/usr/bin:/bin",  # the pinned Node, as `make` provides it
            "CDK_CONTEXT_JSON": json.dumps({**DEFAULT_CONTEXT, "nodeProvisioner": "fargate"}),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "configuration error: setting 'nodeProvisioner'" in result.stderr
