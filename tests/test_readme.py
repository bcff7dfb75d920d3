"""The README's paragraph on what has run where stays true to docs/evidence/what-runs-where.md: what the evidence
marks as not run is what the README lists as not exercised yet, and nothing else of these."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
EVIDENCE = REPO_ROOT / "docs" / "evidence" / "what-runs-where.md"

# A row of the evidence table (by a phrase of its first cell) -> how the README names it.
SUBJECTS = {
    "docker build": "building the container images",
    "NeuronStableDiffusionPipeline": "the Neuron path on Inferentia2",
    "real CloudWatch, real S3": "a deploy to a real AWS account",
}


def not_exercised() -> str:
    """The README's sentence listing what has not run yet."""
    readme = " ".join((REPO_ROOT / "README.md").read_text(encoding="utf-8").split())
    (sentence,) = re.findall(r"Not exercised yet: (.*?)\. ", readme)
    return sentence


@pytest.mark.parametrize(("row", "named"), SUBJECTS.items())
def test_the_readme_lists_as_not_run_what_the_evidence_marks_not_run(row: str, named: str):
    (line,) = [line for line in EVIDENCE.read_text(encoding="utf-8").splitlines() if row in line]
    where = line.rstrip(" |").rsplit(" | ", 1)[1]
    assert ("not run" in where.lower()) == (named in not_exercised()), (line, not_exercised())
