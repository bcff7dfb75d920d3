"""One container, run the way its pod runs it, in one bubblewrap sandbox.

The sandbox is built from the manifest: the host's directories read-only in place of the image's root
(`readOnlyRootFilesystem`), a tmpfs of the volume's `sizeLimit` at each emptyDir's mount path, the image's
files at its WORKDIR, the pod's user and group (`runAsUser`/`runAsGroup`, no capabilities), and new
namespaces for everything, the network included: its only interface is a loopback, on which
tests/rehearsal/inside.py serves moto. The container's environment is the image's (its Dockerfile's ENV
and a PATH to the rehearsal's Python environment) overlaid with exactly the manifest's variables, plus
what the platform injects: the pod's HOSTNAME, and, in place of EKS Pod Identity's credentials, an
AWS_ENDPOINT_URL to the moto server with static keys. A pod that mounts its service-account token gets one
(with the API server's CA) where the kubelet puts it, and the KUBERNETES_SERVICE_* variables of an API
server the harness serves over TLS on the same loopback (tests/routing_controller/fake_kube.py), holding the
stacks' own objects.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tests.rehearsal.builds import (
    SOURCE_DIR,
    Build,
    build_script,
    build_tools,
    build_volumes,
    copy_source,
    runtime_python,
)
from tests.rehearsal.images import IMAGE_FILES, image_stage, python_env
from tests.rehearsal.pods import MOTO_ENDPOINT, Container, Volume
from tools.image_locks import REPO_ROOT

BWRAP: Final = os.environ.get("BWRAP", "/usr/bin/bwrap")
CONTROL: Final = "/rehearsal"  # the harness's own folder in the sandbox: plan, report, log (not the pod's)
SEED: Final = "/rehearsal-seed"  # read-only: what the seeding uploads (the model's weights)
# Host directories never bound into the sandbox: the kernel's, and those the sandbox makes its own.
_NOT_BOUND: Final = {"proc", "dev", "tmp", "run", "lost+found"}
# Where the kubelet mounts a pod's service-account token (/var/run is a link to /run).
TOKEN_DIR: Final = "/run/secrets/kubernetes.io/serviceaccount"
SANDBOX_EXTRA_S: Final = 60  # moto's start and the seeding, beyond the command's own timeout


def bwrap_unusable() -> str | None:
    """Why bubblewrap cannot make a sandbox here (not installed, or no user namespaces), else None."""
    if shutil.which(BWRAP) is None:
        return f"no bubblewrap at {BWRAP} (apt-get install bubblewrap)"
    probe = [BWRAP, "--unshare-all", "--uid", "10001", "--ro-bind", "/", "/", "--", "/bin/true"]
    result = subprocess.run(probe, capture_output=True, text=True, timeout=30, check=False)
    if result.returncode != 0:
        return f"bubblewrap cannot make a sandbox here: {result.stderr.strip()}"
    return None


@dataclass(frozen=True, repr=False)
class Outcome:
    """What a rehearsal observed: the harness's report and the container's output."""

    report: dict[str, Any]
    log: str
    argv: tuple[str, ...]

    @property
    def returncode(self) -> int | None:
        """The command's exit status (None when the harness could not start it)."""
        return self.report.get("returncode")

    def s3_keys(self, bucket: str) -> dict[str, int]:
        """key -> size of every object in `bucket` after the run."""
        return self.report.get("s3", {}).get(bucket, {})

    def __repr__(self) -> str:  # what a failed assertion shows: the report and the end of the output
        return f"argv {list(self.argv)} -> {json.dumps(self.report)[:3000]}\n--- output (end) ---\n{self.log[-6000:]}"


def pod_name(container: Container) -> str:
    """The rehearsal pod's name (and hostname)."""
    return container.workload.split("/", 1)[1] + "-rehearsal"


def container_argv(container: Container) -> list[str]:
    """Kubernetes' rule: `command` replaces the image's ENTRYPOINT, `args` its CMD (and a command alone
    drops the CMD)."""
    stage = image_stage(container.image_kind)
    entrypoint = list(container.command) if container.command is not None else list(stage.entrypoint or [])
    if container.args is not None:
        cmd = list(container.args)
    else:
        cmd = [] if container.command is not None else list(stage.cmd or [])
    return entrypoint + cmd


def container_env(container: Container) -> dict[str, str]:
    """The image's environment, overlaid with the manifest's variables and what the platform injects."""
    stage = image_stage(container.image_kind)
    return {
        **stage.env,
        "PATH": f"{python_env(container.image_kind)}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        **container.env,
        "HOSTNAME": pod_name(container),
        "AWS_ENDPOINT_URL": MOTO_ENDPOINT,
        "AWS_ACCESS_KEY_ID": "rehearsal",
        "AWS_SECRET_ACCESS_KEY": "rehearsal",
    }


def _identity_files(work: Path, uid: int, gid: int) -> tuple[Path, Path]:
    """/etc/passwd and /etc/group with the image's user (the Dockerfiles create uid/gid 10001)."""
    passwd, group = work / "passwd", work / "group"
    passwd.write_text(Path("/etc/passwd").read_text() + f"app:x:{uid}:{gid}::/home/app:/usr/sbin/nologin\n")
    group.write_text(Path("/etc/group").read_text() + f"app:x:{gid}:\n")
    return passwd, group


def _api_credentials(work: Path, namespace: str) -> Path:
    """A service-account token folder (token, ca.crt, namespace) and the API server's key and certificate
    for 127.0.0.1 (self-signed: it is its own CA) under `work`; returns the token folder."""
    from tests.support.loopback_tls import self_signed_loopback

    _, _, pem = self_signed_loopback(work, "api-server", "kube-apiserver (rehearsal)")
    tokens = work / "serviceaccount"
    tokens.mkdir()
    (tokens / "ca.crt").write_bytes(pem)
    (tokens / "token").write_text("rehearsal-service-account-token")
    (tokens / "namespace").write_text(namespace)
    return tokens


@dataclass(frozen=True)
class Spec:
    """What a sandbox is made of, whatever runs in it."""

    uid: int
    gid: int
    hostname: str
    volumes: tuple[Volume, ...]  # tmpfs of each size at each path
    binds: tuple[tuple[str, str], ...]  # (host path, sandbox path), read-only
    workdir: str  # a path the sandbox makes its own (not the host's)
    network: bool = False  # the host's network (a client of a server outside); else only its own loopback


def container_spec(container: Container) -> Spec:
    """A pod's container: its user, its emptyDirs, the image's files at its WORKDIR."""
    if not container.read_only_root:
        raise ValueError(f"{container.label}: the rehearsal only runs read-only roots, as every pod here has")
    workdir = image_stage(container.image_kind).workdir
    binds = tuple((str(REPO_ROOT / src), f"{workdir}/{dst}") for src, dst in IMAGE_FILES[container.image_kind].items())
    return Spec(container.run_as_user, container.run_as_group, pod_name(container), container.volumes, binds, workdir)


def harness_paths(unbound: set[str], tmpfs: Sequence[str]) -> list[Path]:
    """The checkout and this interpreter's environment (its real folder: a venv may be a link), where the sandbox
    would hide them: under a top-level folder it does not bind from the host (/tmp, say, for a clone there) or
    under a pod's tmpfs. They are bound at their host paths, after the tmpfs, since the harness, the image
    environments (tests/rehearsal/images.py) and their .pth files name those paths."""
    found: list[Path] = []
    for path in (REPO_ROOT, Path(sys.prefix).resolve()):
        hidden = path.parts[1] in unbound or any(path.is_relative_to(mount) for mount in tmpfs)
        if hidden and not any(path.is_relative_to(other) for other in found):
            found.append(path)
    return found


def bwrap_argv(spec: Spec, work: Path, seed_dir: Path) -> list[str]:
    """The bubblewrap command line that runs tests/rehearsal/inside.py in a sandbox made to `spec`."""
    own = {Path(v.mount_path).parts[1] for v in spec.volumes} | {Path(spec.workdir).parts[1]}
    argv = [BWRAP, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    if spec.network:
        argv.append("--share-net")
    argv += ["--uid", str(spec.uid), "--gid", str(spec.gid), "--hostname", spec.hostname]
    for entry in sorted(Path("/").iterdir()):
        if entry.name in _NOT_BOUND or entry.name in own or not (entry.is_dir() or entry.is_symlink()):
            continue
        if entry.is_symlink():
            argv += ["--symlink", os.readlink(entry), str(entry)]
        else:
            argv += ["--ro-bind", str(entry), str(entry)]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    for volume in spec.volumes:  # a memory-backed emptyDir is a tmpfs in the pod too
        argv += ["--size", str(volume.size_bytes), "--tmpfs", volume.mount_path]
    for path in harness_paths(own | _NOT_BOUND, [v.mount_path for v in spec.volumes]):  # after the tmpfs: on top
        argv += ["--ro-bind", str(path), str(path)]
    for source, target in spec.binds:
        argv += ["--ro-bind", source, target]
    if spec.uid != 0:  # the images create their user; root is in every /etc/passwd
        passwd, group = _identity_files(work, spec.uid, spec.gid)
        argv += ["--ro-bind", str(passwd), "/etc/passwd", "--ro-bind", str(group), "/etc/group"]
    if (work / "serviceaccount").is_dir():
        argv += ["--ro-bind", str(work / "serviceaccount"), TOKEN_DIR]
    argv += ["--bind", str(work), CONTROL, "--ro-bind", str(seed_dir), SEED]
    # The harness starts in its own folder (the image's WORKDIR would shadow the repository's packages);
    # the command runs in the plan's folder.
    argv += ["--remount-ro", "/", "--chdir", CONTROL, "--clearenv"]
    # The harness's own environment; the command gets the plan's.
    harness_env = {"PATH": f"{sys.prefix}/bin:/usr/bin:/bin", "HOME": CONTROL, "TMPDIR": f"{CONTROL}/tmp"}
    harness_env["PYTHONPATH"] = str(REPO_ROOT)
    harness_env["PYTHONDONTWRITEBYTECODE"] = "1"
    for key, value in harness_env.items():
        argv += ["--setenv", key, value]
    return [*argv, "--", f"{sys.prefix}/bin/python", "-m", "tests.rehearsal.inside", f"{CONTROL}/plan.json"]


def run_sandbox(spec: Spec, work: Path, seed_dir: Path, plan: dict[str, Any], timeout_s: float) -> Outcome:
    """Write the plan, run the harness in the sandbox, and read what it reported."""
    plan = {**plan, "timeout_s": timeout_s, "log": f"{CONTROL}/output.log", "report": f"{CONTROL}/report.json"}
    (work / "plan.json").write_text(json.dumps(plan, indent=2), encoding="utf-8")
    result = subprocess.run(
        bwrap_argv(spec, work, seed_dir),
        capture_output=True,
        text=True,
        timeout=timeout_s + SANDBOX_EXTRA_S,
        check=False,
    )
    report_file, log_file = work / "report.json", work / "output.log"
    report = json.loads(report_file.read_text()) if report_file.is_file() else {}
    log = log_file.read_text(errors="replace") if log_file.is_file() else ""
    if result.returncode != 0 or not report:
        report["harness"] = {"returncode": result.returncode, "output": (result.stdout + result.stderr)[-4000:]}
    return Outcome(report=report, log=log, argv=tuple(plan["argv"]))


def rehearse(
    container: Container,
    work: Path,
    seed_dir: Path,
    *,
    region: str,
    resources: Mapping[str, Sequence[str] | Mapping[str, str]],
    staged: Sequence[Mapping[str, str]] = (),
    compiled: Sequence[Mapping[str, Any]] = (),
    service: Mapping[str, Any] | None = None,
    kube_objects: Sequence[Mapping[str, Any]] = (),
    kube_lists: Sequence[Mapping[str, Any]] = (),
    timeout_s: float = 300,
) -> Outcome:
    """Run one container in its sandbox. `service` (the expected load failure, the stop grace, paths to read
    too) makes the harness probe the container's readinessProbe instead of waiting for an exit;
    `kube_objects` / `kube_lists` ({"path", "object"} / {"path", "items"}) are what the fake API server holds
    for a pod that mounts its token."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "tmp").mkdir(exist_ok=True)
    kube = None
    if container.service_account_token:
        _api_credentials(work, container.namespace)
        kube = {
            "objects": list(kube_objects),
            "lists": list(kube_lists),
            "cert": f"{CONTROL}/api-server.crt",
            "key": f"{CONTROL}/api-server.key",
        }
    plan = {
        "region": region,
        **resources,
        "staged": list(staged),
        "compiled": list(compiled),
        "argv": container_argv(container),
        "env": container_env(container),
        "cwd": image_stage(container.image_kind).workdir,
        "mode": "service" if service else "exit",
        "readiness": container.readiness,
        "kube": kube,
        **(service or {}),
    }
    return run_sandbox(container_spec(container), work, seed_dir, plan, timeout_s)


def rehearse_build(
    build: Build,
    work: Path,
    seed_dir: Path,
    *,
    region: str,
    resources: Mapping[str, Any],
    hub: Mapping[str, str] | None = None,
    wheels: Path | None = None,
    images: Sequence[Mapping[str, str]] = (),
    timeout_s: float = 300,
) -> Outcome:
    """Run one CodeBuild project's build in its sandbox (tests/rehearsal/builds.py); `hub` ({"repo_id",
    "folder", "sha"}) serves a model as the Hub would, `wheels` stands in for PyPI."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "tmp").mkdir(exist_ok=True)
    copy_source(build.logical_id, work / "source")
    (work / "build.sh").write_text(build_script(build, CONTROL), encoding="utf-8")
    tools = build_tools(runtime_python(build))
    docker = shutil.which("docker")
    path = [f"{tools}/bin", *([str(Path(docker).parent)] if docker else []), "/usr/local/bin", "/usr/bin", "/bin"]
    env = {
        **build.env,
        # What CodeBuild sets in every build (its "Environment variables in build environments" page).
        "CODEBUILD_SRC_DIR": SOURCE_DIR,
        "CODEBUILD_BUILD_ID": f"{build.logical_id}:rehearsal",
        "AWS_REGION": region,
        "AWS_DEFAULT_REGION": region,
        "HOME": "/root",
        "PATH": ":".join(dict.fromkeys(path)),
        # The internet's stand-ins.
        "AWS_ENDPOINT_URL": MOTO_ENDPOINT,
        "AWS_ACCESS_KEY_ID": "rehearsal",
        "AWS_SECRET_ACCESS_KEY": "rehearsal",
        **({"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)} if wheels else {}),
    }
    plan = {
        "region": region,
        **resources,
        "staged": [],
        "compiled": [],
        "copies": [{"from": f"{CONTROL}/source", "to": SOURCE_DIR}],
        "hub": dict(hub) if hub else None,
        "images": list(images),
        "argv": ["bash", f"{CONTROL}/build.sh"],
        "env": env,
        "cwd": SOURCE_DIR,
        "mode": "exit",
        "kube": None,
        "failed_file": f"{CONTROL}/failed",
    }
    spec = Spec(0, 0, "codebuild", build_volumes(), (), SOURCE_DIR)
    return run_sandbox(spec, work, seed_dir, plan, timeout_s)
