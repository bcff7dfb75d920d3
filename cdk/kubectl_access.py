"""The one contract between the kubectl tunnel the cluster stack deploys and the command that uses it
(tools/kubectl_tunnel.py): the Session Manager document, the ports and the session command line.

Pure Python (no aws_cdk import), so that the command-line tool starts fast.
"""

from __future__ import annotations

import json
import shlex

# Session Manager's AWS-owned document that forwards a local port to a host reachable from the instance
# (AWS Systems Manager User Guide, "Start a session": port forwarding to a remote host); its parameters are
# `host`, `portNumber` and `localPortNumber`.
PORT_FORWARDING_DOCUMENT = "AWS-StartPortForwardingSessionToRemoteHost"
API_PORT = 443
DEFAULT_LOCAL_PORT = 8443
# The cluster stack's output naming the tunnel instance (absent with kubectlTunnel=false).
TUNNEL_INSTANCE_OUTPUT = "KubectlTunnelInstanceId"


def session_command(*, instance_id: str, endpoint_host: str, local_port: int, region: str) -> list[str]:
    """`aws ssm start-session` forwarding 127.0.0.1:`local_port` to the API endpoint through the tunnel instance."""
    parameters = {"host": [endpoint_host], "portNumber": [str(API_PORT)], "localPortNumber": [str(local_port)]}
    return [
        "aws",
        "ssm",
        "start-session",
        "--region",
        region,
        "--target",
        instance_id,
        "--document-name",
        PORT_FORWARDING_DOCUMENT,
        "--parameters",
        json.dumps(parameters, separators=(",", ":")),
    ]


def shell_line(command: list[str]) -> str:
    """`command` as one line to paste into a POSIX shell: only the JSON parameters (the last part) need quotes.

    Not shlex.join: the other parts may be CDK token placeholders, which must stay unquoted to resolve cleanly.
    """
    return " ".join([*command[:-1], shlex.quote(command[-1])])
