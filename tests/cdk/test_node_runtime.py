"""The CDK runs on the Node 22 that package.json pins, so a newcomer, CI and the tests share one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.support.pinned_node import NODE_BIN, REPO_ROOT, pinned_node_versions

# Phrases of jsii's runtime warnings about the Node it runs on (end-of-life, untested, unsupported).
NODE_WARNINGS = ("end-of-life", "untested", "not supported")


def test_every_platform_gets_the_same_node_22():
    pins = pinned_node_versions()
    assert pins, "package.json pins no Node platform package"
    assert len(set(pins.values())) == 1, pins
    assert next(iter(pins.values())).startswith("22.")


def test_the_node_on_path_is_the_pinned_one():
    node = shutil.which("node")
    assert node == str(NODE_BIN / "node"), f"{node} is first on PATH; run `npm ci` (make does)"
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert version == f"v{next(iter(pinned_node_versions().values()))}"


def test_the_cdk_starts_without_a_node_warning():
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_SILENCE_WARNING")}
    result = subprocess.run(
        [sys.executable, "-c", "import aws_cdk; aws_cdk.App()"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert not [w for w in NODE_WARNINGS if w in result.stderr.lower()], result.stderr
