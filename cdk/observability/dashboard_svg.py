"""Render a CloudWatch dashboard body's layout as an SVG picture, offline (no plotting library).

    make synth && python -m cdk.observability.dashboard_svg cdk.out/SdOnEksServing.template.json \
        > docs/dashboard-layout.svg

Each widget becomes a box at its grid position (24 columns) with its title and the series it plots.
"""

from __future__ import annotations

import json
import sys
from html import escape
from pathlib import Path
from typing import Any

CELL_W = 40
CELL_H = 30


def _series(widget: dict[str, Any]) -> list[str]:
    props = widget.get("properties", {})
    labels = []
    for line in props.get("metrics", []):
        options = next((p for p in line if isinstance(p, dict)), {})
        if options.get("visible") is False:
            continue
        labels.append(options.get("label") or " ".join(str(p) for p in line if not isinstance(p, dict))[:60])
    return labels


def render_svg(body: dict[str, Any]) -> str:
    """The SVG text for a dashboard body (`{"widgets": [...]}` with x, y, width, height)."""
    widgets = body["widgets"]
    rows = max(w["y"] + w["height"] for w in widgets)
    width, height = 24 * CELL_W, rows * CELL_H
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
        f'<rect width="{width}" height="{height}" fill="#f2f3f3"/>',
    ]
    for w in widgets:
        x, y = w["x"] * CELL_W + 3, w["y"] * CELL_H + 3
        ww, wh = w["width"] * CELL_W - 6, w["height"] * CELL_H - 6
        props = w.get("properties", {})
        title = props.get("title") or props.get("markdown", "").split("\n")[0].lstrip("# ")
        out.append(f'<rect x="{x}" y="{y}" width="{ww}" height="{wh}" rx="4" fill="#ffffff" stroke="#aab7b8"/>')
        out.append(f'<text x="{x + 8}" y="{y + 18}" font-size="13" font-weight="bold">{escape(title)}</text>')
        for i, label in enumerate(_series(w)[: max(0, (wh - 30) // 14)]):
            out.append(f'<text x="{x + 12}" y="{y + 36 + i * 14}" font-size="11" fill="#545b64">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def dashboard_body_from_template(template: dict[str, Any]) -> dict[str, Any]:
    """The dashboard body of a synthesized template, with CFN tokens replaced by readable names."""
    (dashboard,) = [r for r in template["Resources"].values() if r["Type"] == "AWS::CloudWatch::Dashboard"]
    body = dashboard["Properties"]["DashboardBody"]
    if isinstance(body, dict):
        parts = body["Fn::Join"][1]
        body = "".join(p if isinstance(p, str) else "<cluster/alb>" for p in parts)
    return json.loads(body)


def main() -> None:
    """Print the layout SVG of the dashboard in the synthesized serving template named on the command line."""
    if len(sys.argv) != 2:
        sys.exit("usage: python -m cdk.observability.dashboard_svg cdk.out/SdOnEksServing.template.json")
    template = json.loads(Path(sys.argv[1]).read_text())
    print(render_svg(dashboard_body_from_template(template)), end="")


if __name__ == "__main__":
    main()
