"""`python -m tools.routing_simulation`: the routing modes compared on cdk.json's settings, written into the docs.

It reads the prices, seconds per image, cost weights, KEDA bounds and controller settings from cdk.json
through the CDK's own config, runs routing_controller/simulate.py's three modes, prints the table and writes
it into docs/serving.md between the routing-simulation markers.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Final

from cdk.accelerators import ACCELERATORS
from cdk.build import resolve_context
from cdk.config.serving import ServingConfig
from cdk.serving.routing import CostInput, resolve_weights
from routing_controller.simulate import MODES, PoolSpec, Scenario, simulate, table

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
DOC: Final = REPO_ROOT / "docs" / "serving.md"
BEGIN: Final = "<!-- routing-simulation:begin -->"
END: Final = "<!-- routing-simulation:end -->"


def write_into_doc(text: str, doc: Path = DOC) -> None:
    """Replace what stands between the markers in docs/serving.md."""
    content = doc.read_text()
    if BEGIN not in content or END not in content:
        raise SystemExit(f"{doc} has no {BEGIN} ... {END} section to write into")
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    doc.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text}\n{END}", content, count=1))


def pools_from_cdk_json(path: Path = REPO_ROOT / "cdk.json") -> tuple[tuple[PoolSpec, ...], Scenario]:
    """Prices, seconds per image, cost weights, KEDA bounds and controller settings as cdk.json has them."""
    context = resolve_context(json.loads(path.read_text())["context"])
    cfg = ServingConfig.from_context(context, accelerators=("neuron", "nvidia"))
    per = cfg.per_accelerator
    accs = tuple(ACCELERATORS[n] for n in ("neuron", "nvidia"))
    weights = resolve_weights(
        accs,
        {a.name: per[a.name].routing_weight for a in accs},
        {a.name: CostInput(per[a.name].price_per_hour, per[a.name].seconds_per_image) for a in accs},
    )
    # Node launch and model load: typical figures for inf2/g5 with a cached image (not from cdk.json).
    timing = {"neuron": (90.0, 120.0), "nvidia": (90.0, 150.0)}
    pools = tuple(
        PoolSpec(
            name=a.name,
            price_per_hour=per[a.name].price_per_hour,
            seconds_per_image=per[a.name].seconds_per_image,
            cost_weight=weights[a.name],
            target_per_pod=per[a.name].scaling_target,
            min_replicas=per[a.name].min_replicas,
            max_replicas=per[a.name].max_replicas,
            node_s=timing[a.name][0],
            load_s=timing[a.name][1],
        )
        for a in accs
    )
    rc = cfg.routing_controller
    scenario = Scenario(
        keda_polling_s=cfg.scaling_polling_s,
        keda_cooldown_s=cfg.scaling_cooldown_s,
        controller_period_s=rc.period_s,
        hold_s=rc.hold_s,
        band_pods=rc.band_pods,
    )
    return pools, scenario


def main(argv: list[str] | None = None) -> int:
    """Run the three modes, print the table, write it into docs/serving.md unless --no-write."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="only print the table")
    args = parser.parse_args(argv)
    pools, scenario = pools_from_cdk_json()
    results = [simulate(mode, pools, scenario) for mode in MODES]
    text = table(results, pools, scenario)
    print(text)
    if not args.no_write:
        write_into_doc(text)
        print(f"\nwritten into {DOC.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
