"""`python -m cdk.costs [key=value ...]`: the cost at rest and the observability bill of cdk.json's context with
the given keys on top (`profile=trial` for the trial, `imageModel=sdxl-base` for a preset), and what each image model
preset costs, as the markdown tables the docs quote."""

from __future__ import annotations

import sys

from cdk.build import project_defaults, resolve_context
from cdk.composition import catalog_cost_tables, workloads_for
from cdk.config import AppConfig, ConfigError
from cdk.costs import prices
from cdk.costs.at_rest import cost_at_rest, markdown_table
from cdk.costs.observability_bill import log_sources


def main(argv: list[str]) -> None:
    """Print both tables for cdk.json plus `argv`'s key=value pairs (an example environment: prices are us-east-1)."""
    malformed = [arg for arg in argv if "=" not in arg]
    if malformed:
        raise SystemExit(f'make costs: {" ".join(malformed)}: give settings as key=value (COSTS_ARGS="k=v ...")')
    overrides = dict(arg.split("=", 1) for arg in argv)
    try:
        config = AppConfig.from_context(
            resolve_context({**project_defaults(), "exampleEnvironment": True, **overrides}), {}
        )
    except ConfigError as exc:  # a setting's own message, as a synth would stop with it
        raise SystemExit(f"make costs: {exc}") from None
    cost = cost_at_rest(config, (line for w in workloads_for(config) for line in w.kept_up()))
    print(markdown_table(cost) + "\n")
    print("| log source | GB a day | per month | volume from |\n| --- | --- | --- | --- |")
    retention = config.flow_log_retention_days
    for source in log_sources(config.observability, config.existing_cluster):
        print(f"| {source.name} | {source.gb_per_day:.3f} | ${source.usd_per_month(retention):.2f} | {source.basis} |")
    print(f"| the serving dashboard | | ${prices.CLOUDWATCH_DASHBOARD_MONTH.usd:.2f} | one dashboard |\n")
    print("\n\n".join(catalog_cost_tables()))


if __name__ == "__main__":
    main(sys.argv[1:])
