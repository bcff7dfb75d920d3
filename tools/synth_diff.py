"""Compare two `cdk synth -o DIR` outputs: what a deploy of the second would change for a user of the first.

    python -m tools.synth_diff /tmp/synth-before-default /tmp/synth-after-default

Per stack template it reports whether the file is byte-identical; if not, whether it is the same template
once asset hashes (64 hex digits: S3 keys, image tags) are blanked and key order is ignored; and otherwise
the logical ids added or removed (a removed stateful resource is deleted, or replaced when its id moved), the
Kubernetes manifests (Custom::AWSCDK-EKS-KubernetesResource `Manifest`, Custom::AWSCDK-EKS-HelmChart `Values`)
that changed, and every other resource whose properties, DependsOn or other attributes changed. Exit status
1 when a logical id disappeared or a manifest changed: those are what users would see.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ASSET_HASH = re.compile(r"[0-9a-f]{64}")
MANIFEST_TYPES = {
    "Custom::AWSCDK-EKS-KubernetesResource": "Manifest",
    "Custom::AWSCDK-EKS-HelmChart": "Values",
}


def normalize(value: Any) -> Any:
    """`value` with every asset hash blanked (strings, keys and nested values)."""
    if isinstance(value, str):
        return ASSET_HASH.sub("<asset-hash>", value)
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        return {normalize(k): normalize(v) for k, v in value.items()}
    return value


@dataclass
class StackDiff:
    """What differs in one stack's template."""

    name: str
    byte_identical: bool
    same_but_order: bool = False  # the same JSON once key order is ignored (resources, outputs, DependsOn)
    same_after_normalizing: bool = False
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    manifests: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    other_sections: list[str] = field(default_factory=list)

    @property
    def breaking(self) -> bool:
        """Removed logical ids or changed Kubernetes objects: what a deploy would change for a user."""
        return bool(self.removed or self.manifests)

    def lines(self) -> list[str]:
        """The report, one line per finding."""
        if self.byte_identical:
            return [f"{self.name}: byte-identical"]
        if self.same_but_order:
            return [f"{self.name}: the same JSON in another order (resources, outputs or keys)"]
        if self.same_after_normalizing:
            return [f"{self.name}: identical apart from asset hashes (and order)"]
        out = [f"{self.name}: differs"]
        out += [f"  + logical id {i}" for i in self.added]
        out += [f"  - logical id {i}" for i in self.removed]
        out += [f"  ~ Kubernetes objects of {i}" for i in self.manifests]
        out += [f"  ~ resource {i}" for i in self.resources]
        out += [f"  ~ section {s}" for s in self.other_sections]
        return out


def diff_template(name: str, before_path: Path, after_path: Path) -> StackDiff:
    """Compare one stack's two templates."""
    raw_before, raw_after = before_path.read_bytes(), after_path.read_bytes()
    result = StackDiff(name, byte_identical=raw_before == raw_after)
    if result.byte_identical:
        return result
    before, after = json.loads(raw_before), json.loads(raw_after)
    if before == after:
        result.same_but_order = True
        return result
    before, after = normalize(before), normalize(after)
    if before == after:
        result.same_after_normalizing = True
        return result
    res_before, res_after = before.get("Resources", {}), after.get("Resources", {})
    result.added = sorted(set(res_after) - set(res_before))
    result.removed = sorted(set(res_before) - set(res_after))
    for logical_id in sorted(set(res_before) & set(res_after)):
        old, new = res_before[logical_id], res_after[logical_id]
        if old == new:
            continue
        key = MANIFEST_TYPES.get(old.get("Type", ""))
        if key is not None and old.get("Properties", {}).get(key) != new.get("Properties", {}).get(key):
            result.manifests.append(logical_id)
        else:
            result.resources.append(f"{logical_id} ({changed_keys(old, new)})")
    result.other_sections = sorted(
        k for k in set(before) | set(after) if k != "Resources" and before.get(k) != after.get(k)
    )
    return result


def changed_keys(old: dict[str, Any], new: dict[str, Any]) -> str:
    """Which top-level attributes (and which properties) of a resource changed."""
    keys = []
    for k in sorted(set(old) | set(new)):
        if old.get(k) == new.get(k):
            continue
        if k == "Properties":
            props_old, props_new = old.get(k, {}), new.get(k, {})
            names = sorted(p for p in set(props_old) | set(props_new) if props_old.get(p) != props_new.get(p))
            keys.append(f"Properties: {', '.join(names)}")
        else:
            keys.append(k)
    return "; ".join(keys)


def compare(before_dir: Path, after_dir: Path) -> list[StackDiff]:
    """Every stack template of `before_dir` against the same file in `after_dir`."""
    diffs = []
    for before in sorted(before_dir.glob("*.template.json")):
        after = after_dir / before.name
        if not after.exists():
            diffs.append(StackDiff(before.name, byte_identical=False, removed=["<whole stack>"]))
            continue
        diffs.append(diff_template(before.name.removesuffix(".template.json"), before, after))
    diffs += [
        StackDiff(a.name, byte_identical=False, added=["<whole stack>"])
        for a in sorted(after_dir.glob("*.template.json"))
        if not (before_dir / a.name).exists()
    ]
    return diffs


def main(argv: list[str] | None = None) -> int:
    """Print the report; 1 when a logical id disappeared or a Kubernetes object changed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="cdk synth -o output of the earlier commit")
    parser.add_argument("after", type=Path, help="cdk synth -o output of the later commit")
    args = parser.parse_args(argv)
    diffs = compare(args.before, args.after)
    for d in diffs:
        print("\n".join(d.lines()))
    return 1 if any(d.breaking for d in diffs) else 0


if __name__ == "__main__":
    sys.exit(main())
