"""`python -m tools.deployer`: print the IAM principal ARN of whoever runs the AWS CLI, for `make deploy` to pass
as `-c deployerArn=...` (cdk/config/access.py gives it a cluster-admin access entry).

STS names a role session (`arn:aws:sts::<account>:assumed-role/<role>/<session>`); an access entry needs the
role's own ARN, path included (an SSO role lives under /aws-reserved/sso.amazonaws.com/), so the role is read
with `aws iam get-role`; where that is denied, the ARN without a path is the best guess and a note says so.
"""

from __future__ import annotations

import re
import sys

from tools.aws_cli import CommandError, aws_json

_ASSUMED_ROLE = re.compile(r"arn:(?P<partition>aws[a-z-]*):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/.+")
_IAM_USER = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:user/.+")


def principal_arn(caller_arn: str) -> str:
    """The IAM role or user behind `caller_arn` (the `Arn` of `aws sts get-caller-identity`)."""
    if _IAM_USER.fullmatch(caller_arn):
        return caller_arn
    match = _ASSUMED_ROLE.fullmatch(caller_arn)
    if match is None:
        raise CommandError(
            f"{caller_arn} is neither an IAM role session nor an IAM user, and EKS gives access entries only to "
            "those: deploy with a role (or name one in adminRoleArns)"
        )
    try:
        return str(aws_json("iam", "get-role", "--role-name", match["role"], "--query", "Role.Arn"))
    except CommandError as exc:
        guess = f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}"
        print(
            f"note: could not read role {match['role']} ({exc}); using {guess}, which is right unless the role "
            "has a path",
            file=sys.stderr,
        )
        return guess


def main() -> int:
    """Print the deploying principal's ARN; exit 2 with one line when it cannot be found."""
    try:
        caller = aws_json("sts", "get-caller-identity")
        print(principal_arn(str(caller["Arn"])))
    except CommandError as exc:
        print(f"make deploy: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
