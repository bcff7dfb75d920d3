"""The service images' locked requirement sets: resolve them (`make lock`) and check them (tests).

    python -m tools.image_locks compile [neuron] [nvidia]   # re-resolve with uv (needs PyPI)
    python -m tools.image_locks check                       # offline: each lock agrees with its input

Each image installs `app/requirements/<accelerator>.lock`, resolved from `<accelerator>.in` for that
image's Python version and platform, against the torch its Deep Learning Container already holds
(`cdk/versions.py` BASE_IMAGE_*). torch stays the DLC's own build: uv is told it has no dependencies
(`app/requirements/uv.toml`) and leaves it out of the lock. The lock's header records what it was
resolved for, so `check` can tell when a bump in `cdk/versions.py` or an edited input left it stale.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cdk import versions

REPO_ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS_DIR = REPO_ROOT / "app" / "requirements"
UV_CONFIG = REQUIREMENTS_DIR / "uv.toml"
# The image builds install from PyPI, so the locks name only what PyPI serves; the local indexes in
# this machine's pip.conf (file:// mirrors, find-links) are deliberately not consulted.
INDEX_URL = "https://pypi.org/simple"
BASE_IMAGE_PACKAGES = ("torch",)  # the DLC's own builds: never in a lock
HEADER_LINE = re.compile(r"^# ([a-z-]+): (.+)$")
PIN_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


@dataclass(frozen=True)
class ImageLockSpec:
    """What one image's lock is resolved for."""

    accelerator: str
    python_version: str
    platform: str
    torch_version: str
    optimum_neuron_version: str | None

    @property
    def input_file(self) -> Path:
        """The requirement set the lock is resolved from."""
        return REQUIREMENTS_DIR / f"{self.accelerator}.in"

    @property
    def base_constraints_file(self) -> Path:
        """Ranges of packages the DLC holds that the lock must not move."""
        return REQUIREMENTS_DIR / f"{self.accelerator}-dlc.txt"

    @property
    def lock_file(self) -> Path:
        """The locked set the image's Dockerfile installs."""
        return REQUIREMENTS_DIR / f"{self.accelerator}.lock"

    def pinned_constraints(self) -> list[str]:
        """The constraints that come from cdk/versions.py."""
        pins = [f"torch=={self.torch_version}"]
        if self.optimum_neuron_version:
            pins.append(f"optimum-neuron=={self.optimum_neuron_version}")
        return pins

    def header(self) -> dict[str, str]:
        """The facts the lock's header records (and `check` compares with cdk/versions.py)."""
        return {
            "accelerator": self.accelerator,
            "python-version": self.python_version,
            "python-platform": self.platform,
            "base-image-torch": self.torch_version,
        }

    def marker_environment(self) -> dict[str, str]:
        """PEP 508 marker values of the image's interpreter, to tell which input lines apply there."""
        return linux_marker_environment(self.python_version, self.platform.split("-", 1)[0])


def linux_marker_environment(python_version: str, machine: str = "x86_64") -> dict[str, str]:
    """PEP 508 marker values of CPython `python_version` (X.Y) on Linux `machine`, no extra requested."""
    return {
        "python_version": python_version,
        "python_full_version": python_version + ".0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "os_name": "posix",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": machine,
        "extra": "",
    }


def image_lock_specs() -> dict[str, ImageLockSpec]:
    """One spec per accelerator image, from cdk/versions.py."""
    return {
        name: ImageLockSpec(
            accelerator=name,
            python_version=versions.BASE_IMAGE_PYTHON[name],
            platform=versions.BASE_IMAGE_PLATFORM[name],
            torch_version=versions.BASE_IMAGE_TORCH[name],
            optimum_neuron_version=versions.OPTIMUM_NEURON_VERSION if name == "neuron" else None,
        )
        for name in versions.BASE_IMAGES
    }


def read_requirements(path: Path, *, follow_constraints: bool = False) -> list[Requirement]:
    """The requirements in a requirements file, following `-r` (and `-c` when asked)."""
    found: list[Requirement] = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        option, _, argument = line.partition(" ")
        if option in ("-r", "--requirement") or (follow_constraints and option in ("-c", "--constraint")):
            found += read_requirements(path.parent / argument.strip(), follow_constraints=follow_constraints)
        elif line.startswith("-"):
            raise ValueError(f"{path}: unsupported option line {line!r}")
        else:
            found.append(Requirement(line))
    return found


@dataclass(frozen=True)
class Lock:
    """A parsed lock: its header facts and its pins."""

    header: dict[str, str]
    pins: dict[str, Version]


def read_lock(path: Path) -> Lock:
    """Parse a lock written by `compile_lock`."""
    header: dict[str, str] = {}
    pins: dict[str, Version] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if match := HEADER_LINE.match(line):
            header.setdefault(match[1], match[2].split(" (", 1)[0].strip())
        elif match := PIN_LINE.match(line):
            pins[canonicalize_name(match[1])] = Version(match[2])
    return Lock(header, pins)


def lock_problems(spec: ImageLockSpec) -> list[str]:
    """Every way the lock disagrees with its input, its DLC constraints and cdk/versions.py; [] when none."""
    if not spec.lock_file.is_file():
        return [f"{spec.lock_file.name} is missing: run `make lock`"]
    lock = read_lock(spec.lock_file)
    problems = [
        f"{spec.lock_file.name} header says {key}: {lock.header.get(key)!r}, cdk/versions.py says {expected!r}"
        for key, expected in spec.header().items()
        if lock.header.get(key) != expected
    ]
    problems += [
        f"{spec.lock_file.name} pins {name}, which the base image provides (its own build must stay)"
        for name in BASE_IMAGE_PACKAGES
        if name in lock.pins
    ]
    environment = spec.marker_environment()
    inputs = read_requirements(spec.input_file)
    constraints = read_requirements(spec.base_constraints_file)
    constraints += [Requirement(line) for line in spec.pinned_constraints()]
    for requirement in inputs + constraints:
        name = canonicalize_name(requirement.name)
        if name in BASE_IMAGE_PACKAGES or (requirement.marker and not requirement.marker.evaluate(environment)):
            continue
        pinned = lock.pins.get(name)
        if pinned is None:
            # A constraint (a DLC range) may name a package nothing requires; an input line may not.
            if requirement in inputs or name == "optimum-neuron":
                problems.append(f"{spec.lock_file.name} has no pin for {requirement}: run `make lock`")
        elif not requirement.specifier.contains(pinned, prereleases=True):
            problems.append(
                f"{spec.lock_file.name} pins {name}=={pinned}, which does not satisfy {requirement}: run `make lock`"
            )
    return problems


def _applies(requirement: Requirement, environment: dict[str, str], extras: frozenset[str]) -> bool:
    """Whether `requirement` holds in `environment` when its distribution was asked for `extras`."""
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({**environment, "extra": extra}) for extra in ("", *sorted(extras)))


def lock_closure_problems(
    lock_file: Path, input_file: Path, python_version: str, *, path: Sequence[str] | None = None
) -> list[str]:
    """Every way `lock_file` (pins only, installed with --no-deps) is not the complete install set of
    `input_file` for CPython `python_version` on Linux x86_64; [] when none.

    Each input line must be pinned at a version it accepts; each pinned distribution's declared dependencies
    (Requires-Dist, markers evaluated for that Python with the extras asked of it) must be pinned at versions
    they accept; and every pin must be reached from the input. The dependencies are read from the installed
    metadata on `path` (default sys.path: the environment the tests run in), which must hold each pinned
    distribution at its pinned version, or the pin is reported as unchecked rather than passed over.
    """
    lock = read_lock(lock_file)
    name = lock_file.name
    environment = linux_marker_environment(python_version)
    search_path = list(path) if path is not None else sys.path
    problems: list[str] = []
    asked: dict[str, set[str]] = {}  # distribution -> extras asked of it
    pending: list[tuple[str, frozenset[str]]] = []

    def require(requirement: Requirement, wanted_by: str) -> None:
        dependency = canonicalize_name(requirement.name)
        pinned = lock.pins.get(dependency)
        if pinned is None:
            problems.append(f"{name} has no pin for {requirement} (wanted by {wanted_by})")
            return
        if not requirement.specifier.contains(pinned, prereleases=True):
            problems.append(f"{name} pins {dependency}=={pinned}, which does not satisfy {requirement} ({wanted_by})")
        extras = frozenset(canonicalize_name(extra) for extra in requirement.extras)
        if dependency not in asked or not extras <= asked[dependency]:
            asked.setdefault(dependency, set()).update(extras)
            pending.append((dependency, extras))

    for requirement in read_requirements(input_file):
        if _applies(requirement, environment, frozenset()):
            require(requirement, input_file.name)
    read: set[str] = set()
    while pending:
        dependency, extras = pending.pop()
        pinned = lock.pins[dependency]
        found = [d for d in importlib.metadata.distributions(name=dependency, path=search_path)]
        versions_found = sorted({d.version for d in found})
        held = next((d for d in found if Version(d.version) == pinned), None)
        if held is None:
            if dependency not in read:
                read.add(dependency)
                problems.append(
                    f"{name} pins {dependency}=={pinned}, but the environment holds "
                    f"{', '.join(versions_found) or 'no version of it'}: its dependencies cannot be checked "
                    "(install the pinned version there, or re-resolve the lock)"
                )
            continue
        read.add(dependency)
        declared = {canonicalize_name(extra) for extra in held.metadata.get_all("Provides-Extra") or []}
        problems += [f"{name}: {dependency}=={pinned} has no extra {extra!r}" for extra in sorted(extras - declared)]
        for line in held.requires or []:
            requirement = Requirement(line)
            if _applies(requirement, environment, extras):
                require(requirement, f"{dependency}=={pinned}")
    problems += [
        f"{name} pins {pinned}=={lock.pins[pinned]}, which nothing in {input_file.name} needs"
        for pinned in sorted(set(lock.pins) - set(asked))
    ]
    return problems


def uv_executable() -> str:
    """uv from this interpreter's environment (requirements-dev.txt pins it), else from PATH."""
    return shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv") or "uv"


def compile_lock(spec: ImageLockSpec) -> None:
    """Resolve `spec`'s input with uv for the image's Python and platform and write its lock."""
    uv = uv_executable()
    uv_version = subprocess.run([uv, "--version"], check=True, capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="image-locks-") as scratch:
        pinned = Path(scratch) / "versions-constraints.txt"
        pinned.write_text("\n".join(spec.pinned_constraints()) + "\n", encoding="utf-8")
        resolved = Path(scratch) / "resolved.txt"
        command = [
            uv,
            "pip",
            "compile",
            "--quiet",
            "--config-file",
            str(UV_CONFIG),
            "--python-version",
            spec.python_version,
            "--python-platform",
            spec.platform,
            "--default-index",
            INDEX_URL,
            "--no-header",
            "--constraints",
            str(spec.base_constraints_file),
            "--constraints",
            str(pinned),
            *(arg for name in BASE_IMAGE_PACKAGES for arg in ("--no-emit-package", name)),
            "--output-file",
            str(resolved),
            str(spec.input_file),
        ]
        # Relative paths in the annotations ("# via -r ..."), the same on every machine.
        subprocess.run(command, check=True, cwd=REPO_ROOT, env={**os.environ, "UV_NO_PROGRESS": "1"})
        body = resolved.read_text(encoding="utf-8").replace(str(pinned), "cdk/versions.py")
    header = [
        f"# Locked requirements of the {spec.accelerator} service image. Generated by `make lock`; do not edit.",
        *(f"# {key}: {value}" for key, value in spec.header().items()),
        f"# input: app/requirements/{spec.input_file.name}, constraints {spec.base_constraints_file.name}"
        " and cdk/versions.py",
        f"# resolver: {uv_version}",
        "# torch is the base image's own build and is not listed here.",
    ]
    spec.lock_file.write_text("\n".join(header) + "\n" + body, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """`compile` re-resolves locks; `check` reports every disagreement and exits 1 if there is one."""
    parser = argparse.ArgumentParser(prog="python -m tools.image_locks", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    compile_parser = sub.add_parser("compile", help="resolve the locks with uv (needs PyPI)")
    compile_parser.add_argument("accelerators", nargs="*", help="default: every image")
    sub.add_parser("check", help="check every lock against its input and cdk/versions.py (offline)")
    args = parser.parse_args(argv)
    specs = image_lock_specs()
    if args.command == "compile":
        unknown = sorted(set(args.accelerators) - set(specs))
        if unknown:
            parser.error(f"unknown accelerator(s) {', '.join(unknown)}; choose from {', '.join(specs)}")
        for name in args.accelerators or specs:
            compile_lock(specs[name])
            print(f"wrote {specs[name].lock_file.relative_to(REPO_ROOT)}")
        return 0
    problems = [problem for spec in specs.values() for problem in lock_problems(spec)]
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
