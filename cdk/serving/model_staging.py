"""Stage the model's weights into the model store during `cdk deploy`, so nothing waits on a manual copy.

A CodeBuild project runs the project's own `python -m common.model_store.stage` (from a small source
asset: `common/model_store/` and `requirements-stage.txt`), and a `Custom::ModelStaging` resource
starts it and waits for it with the same handler as the image builds (`lambdas/codebuild_runner.py`).
The compile Job and the serving workloads depend on that resource, so they are applied only once
the weights are complete. The program skips a model whose completion marker exists, so a redeploy
costs one build of about a minute.

CodeBuild rather than a Kubernetes Job: it needs no cluster capacity, its disk and bandwidth suit a
multi-GB download, and its `SECRETS_MANAGER` environment variable type resolves the Hub token at build
time, so the token never appears in the template, the project definition or a pod spec.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from aws_cdk import Acknowledgment, CustomResource, Stack, Validations
from aws_cdk import aws_codebuild as codebuild
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from cdk import deploy_limits, versions
from cdk.constructs.build_runner import build_runner
from cdk.constructs.log_groups import encrypted_log_group
from cdk.retention import RETAINED
from common.model_store.layout import model_slug, s3_uri, weights_prefix

REPO_ROOT = Path(__file__).resolve().parents[2]
# Only what `python -m common.model_store.stage` imports, so a service change does not re-run staging.
SOURCE_EXCLUDES = [
    "*",
    ".*",
    "!common",
    "!common/__init__.py",
    "!common/model_store",
    "!common/model_store/**",
    "!requirements-stage.txt",
    "**/__pycache__",
    "**/*.pyc",
]
HUB_AUTH_ENV_NAME = "HF_TOKEN"  # huggingface_hub's own variable name; common/model_store/stage.py reads it


def buildspec(program_args: Sequence[str] = ()) -> dict[str, object]:
    """Install the pinned staging requirements and run the staging program once (with `program_args`:
    the layout, settings and config checks of a language model)."""
    return {
        "version": "0.2",
        "env": {"shell": "bash"},
        "phases": {
            "install": {
                "runtime-versions": {"python": versions.STAGE_PYTHON_VERSION},
                "commands": [
                    "python -m venv .stage-venv",
                    # Every package is pinned in the file; --no-deps keeps anything else from floating in.
                    ".stage-venv/bin/pip install --quiet --no-deps --only-binary=:all: -r requirements-stage.txt",
                ],
            },
            "build": {
                "commands": [
                    '.stage-venv/bin/python -m common.model_store.stage --bucket "$MODEL_BUCKET" '
                    '--model-id "$MODEL_ID" --revision "$MODEL_REVISION"'
                    + "".join(f" {shlex.quote(arg)}" for arg in program_args),
                ]
            },
        },
    }


class WeightsStaging(Construct):
    """Copies `model_id` at `revision` from the Hugging Face Hub into `models/<slug>/` of the bucket, once."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        model_id: str,
        revision: str | None,
        token_secret: str | None,
        program_args: Sequence[str] = (),
    ) -> None:
        """`program_args`: more arguments of `python -m common.model_store.stage` (`--layout transformers ...`)."""
        super().__init__(scope, construct_id)
        prefix = weights_prefix(model_id)
        self.weights_uri = s3_uri(bucket.bucket_name, prefix)
        source = s3_assets.Asset(self, "Source", path=str(REPO_ROOT), exclude=SOURCE_EXCLUDES)
        variables = {
            "MODEL_BUCKET": codebuild.BuildEnvironmentVariable(value=bucket.bucket_name),
            "MODEL_ID": codebuild.BuildEnvironmentVariable(value=model_id),
            # Empty: the repository's main branch (the staging program reads "" as no revision).
            "MODEL_REVISION": codebuild.BuildEnvironmentVariable(value=revision or ""),
        }
        if token_secret:
            # Resolved by CodeBuild at build time; the template holds only the secret's name or ARN, and
            # CDK grants secretsmanager:GetSecretValue on that secret (aws-cdk-lib 2.275.0,
            # aws-codebuild/lib/project.js, SECRETS_MANAGER branch).
            variables[HUB_AUTH_ENV_NAME] = codebuild.BuildEnvironmentVariable(
                type=codebuild.BuildEnvironmentVariableType.SECRETS_MANAGER, value=token_secret
            )
        key = kms.Key(
            self,
            "BuildKey",
            description="Encrypts the weights-staging build",
            enable_key_rotation=True,
            removal_policy=RETAINED,
        )
        log_group = encrypted_log_group(self, "Logs")
        self.project = codebuild.Project(
            self,
            "Project",
            description=f"Stages {model_id} from the Hugging Face Hub into s3://.../{prefix}",
            source=codebuild.Source.s3(bucket=source.bucket, path=source.s3_object_key),
            build_spec=codebuild.BuildSpec.from_object(buildspec(program_args)),
            environment=codebuild.BuildEnvironment(
                build_image=codebuild.LinuxBuildImage.from_code_build_image_id(versions.CODEBUILD_IMAGE),
                # LARGE for its network bandwidth; nothing here needs Docker, so not privileged.
                compute_type=codebuild.ComputeType.LARGE,
            ),
            environment_variables=variables,
            encryption_key=key,
            logging=codebuild.LoggingOptions(cloud_watch=codebuild.CloudWatchLoggingOptions(log_group=log_group)),
            timeout=deploy_limits.STAGING_BUILD,
        )
        self._grant_prefix(bucket, prefix)
        # The build's own limit ends first, so the failure the deploy reports is CodeBuild's, with its log link.
        provider = build_runner(
            self, projects=[self.project], what="weights staging", wait=deploy_limits.STAGING_WAIT
        ).provider
        self._acknowledge_writes(bucket, prefix, token_secret)
        self.resource = CustomResource(
            self,
            "Weights",
            service_token=provider.service_token,
            resource_type="Custom::ModelStaging",
            properties={
                "Builds": [{"Project": self.project.project_name, "Outputs": {"WeightsUri": self.weights_uri}}],
                # A new model is a new resource; a changed staging program re-runs it (and is skipped by the
                # marker if the weights are already complete).
                "PhysicalResourceId": f"weights-{model_slug(model_id)}",
                "ModelId": model_id,
                "ModelRevision": revision or "",
                "SourceHash": source.asset_hash,
                "TokenSecret": token_secret or "",
            },
        )

    def _acknowledge_writes(self, bucket: s3.IBucket, prefix: str, token_secret: str | None) -> None:
        """The prefix wildcard of the weights grant, and the secret's ARN suffix wildcard, by name."""
        stack = Stack.of(self)
        bucket_id = stack.resolve(stack.get_logical_id(bucket.node.default_child))
        acks = [
            Acknowledgment(
                id=f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{prefix}*]",
                reason="Staging reads, writes and deletes only under the model's own weights prefix; S3 needs the "
                "trailing wildcard to name the objects under it.",
            )
        ]
        if token_secret:
            # As CDK names it: pseudo parameters for a secret name, the ARN's own parts for an ARN.
            resource = f"arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:{token_secret}*"
            if token_secret.startswith("arn:"):
                _, partition, _, region, account, _, name = token_secret.split(":", 6)
                resource = f"arn:{partition}:secretsmanager:{region}:{account}:secret:{name.split(':')[0]}*"
            acks.append(
                Acknowledgment(
                    id=f"AwsSolutions-IAM5[Resource::{resource}]",
                    reason="CDK's grant for the SECRETS_MANAGER build variable: the one secret holding the Hub "
                    "token, by name plus the random suffix Secrets Manager appends to its ARN.",
                )
            )
        Validations.of(self.project).acknowledge(*acks)

    def _grant_prefix(self, bucket: s3.IBucket, prefix: str) -> None:
        """Read, write and delete under the model's weights prefix only (delete: leftovers of an unfinished run)."""
        self.project.add_to_role_policy(
            iam.PolicyStatement(
                sid="StageWeightsPrefix",
                actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
                resources=[bucket.arn_for_objects(f"{prefix}*")],
            )
        )
        self.project.add_to_role_policy(
            iam.PolicyStatement(
                sid="ListWeightsPrefix",
                actions=["s3:ListBucket"],
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{prefix}*"]}},
            )
        )
