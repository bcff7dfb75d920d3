"""`python -m tools.bench_gpu_carry` (`make bench-gpu-wheels`): what `make bench-gpu` needs on a bare GPU machine.

It fills the ignored folder `.bench-gpu/` on this machine, which then travels with the working tree:

- `wheels/`: the packages the GPU benchmark imports that the GPU machine's image lacks (diffusers and the image
  service's settings: pydantic and pydantic-settings, with what they need beyond the image's packages), at the
  versions of the GPU image's lock (app/requirements/nvidia.lock), for its Python and platform, without
  dependencies: the recipe of the device tool's notes (`pip download --no-deps --only-binary=:all:`).
  typing-extensions is in the image, but at a version nobody has read there, and pydantic-core needs a recent one.
- `prices.json`: each image preset's pinned NVIDIA instance and its on-demand price (cdk/image/presets.py,
  cdk/instance_types.py), which the benchmark cannot import there (the CDK app needs aws-cdk-lib and Node).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from packaging.utils import canonicalize_name

from cdk.image.presets import PRESETS
from tools.image_locks import image_lock_specs, read_lock

REPO_ROOT = Path(__file__).resolve().parents[1]
CARRY_DIR = REPO_ROOT / ".bench-gpu"
# What `python -m app.bench gpu` imports beyond the GPU machine's image (its package list in the device tool's
# KINDS.md has torch, transformers, huggingface-hub, safetensors, tokenizers, accelerate, numpy, pillow, regex,
# requests and filelock, and none of these). diffusers' importlib-metadata requirement is for Pythons before 3.8
# (diffusers/utils/import_utils.py imports importlib.metadata on 3.12), so it is left out.
CARRIED = (
    "diffusers",
    "pydantic",
    "pydantic-core",
    "pydantic-settings",
    "python-dotenv",
    "annotated-types",
    "typing-inspection",
    "typing-extensions",
)
# The device tool's recipe: pip matches each manylinux tag exactly, so every one a wheel may carry is named.
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)


def carried_requirements() -> list[str]:
    """`name==version` for each carried package, at the GPU image lock's version."""
    pins = read_lock(image_lock_specs()["nvidia"].lock_file).pins
    missing = [name for name in CARRIED if canonicalize_name(name) not in pins]
    if missing:
        raise SystemExit(f"app/requirements/nvidia.lock pins no {', '.join(missing)}: run `make lock`")
    return [f"{name}=={pins[canonicalize_name(name)]}" for name in CARRIED]


def download_command(requirements: Sequence[str], dest: Path) -> list[str]:
    """The pip command that downloads `requirements` as wheels for the GPU image's Python and platform."""
    spec = image_lock_specs()["nvidia"]
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", spec.python_version, "--implementation", "cp", "-d", str(dest)]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    return [*command, *requirements]


def price_plan() -> dict[str, object]:
    """Each preset's pinned NVIDIA instance and on-demand price, in the form app/bench/gpu_costs.py reads."""
    return {
        "source": "cdk/image/presets.py servingInstanceTypeNvidia, on-demand us-east-1 prices of cdk/instance_types.py",
        "presets": {
            name: {"instance": preset.nvidia.instance.name, "usd_per_hour": preset.nvidia.instance.usd_per_hour}
            for name, preset in PRESETS.items()
        },
    }


def write_prices(path: Path) -> None:
    """Write `price_plan()` to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(price_plan(), indent=2, sort_keys=True) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Download the wheels (unless --prices-only) and write the prices into `--dest`."""
    parser = argparse.ArgumentParser(prog="python -m tools.bench_gpu_carry", description=__doc__)
    parser.add_argument("--dest", type=Path, default=CARRY_DIR, help="the folder to fill (default .bench-gpu)")
    parser.add_argument("--prices-only", action="store_true", help="write prices.json, download nothing")
    args = parser.parse_args(argv)
    write_prices(args.dest / "prices.json")
    if not args.prices_only:
        wheels = args.dest / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        for stale in wheels.glob("*.whl"):
            stale.unlink()  # one version of each: two would stop the install there
        subprocess.run(download_command(carried_requirements(), wheels), check=True)
        size = sum(f.stat().st_size for f in wheels.glob("*.whl"))
        print(f"{len(list(wheels.glob('*.whl')))} wheels, {size / 2**20:.1f} MiB, in {wheels}")
    print(f"prices in {args.dest / 'prices.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
