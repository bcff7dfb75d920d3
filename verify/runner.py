"""Runs the checks in the checklist's order and prints one row per check."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, TextIO

from verify import front_door, llm, pins, platform, prerequisites, serving
from verify.context import Context
from verify.result import Check, Result, Status

# The order of docs/first-deploy.md: pins, prerequisites (a team's cluster), platform, serving, front door, LLM.
ALL_CHECKS: Final[tuple[Check, ...]] = (
    *pins.CHECKS,
    *prerequisites.CHECKS,
    *platform.CHECKS,
    *serving.CHECKS,
    *front_door.CHECKS,
    *llm.CHECKS,
)


def run_check(ctx: Context, check: Check) -> Result:
    """One check's row; an error it did not expect (an AWS or kubectl error, a refused connection) is its FAIL,
    so that one broken check does not hide the others."""
    try:
        outcome = check.run(ctx)
    except Exception as exc:  # reported as this check's FAIL; the run goes on
        message = " ".join(str(exc).split()) or type(exc).__name__
        return Result(check.name, Status.FAIL, f"{type(exc).__name__}: {message}"[:300])
    return Result(check.name, outcome.status, outcome.evidence)


def run_checks(ctx: Context, checks: Sequence[Check], out: TextIO) -> list[Result]:
    """Run each check, printing its row as soon as it is known."""
    width = max(len(c.name) for c in checks)
    results = []
    for check in checks:
        result = run_check(ctx, check)
        print(f"{result.name:<{width}}  {result.status.value}  {result.evidence}", file=out, flush=True)
        results.append(result)
    return results


def summary(results: Iterable[Result]) -> str:
    """`N PASS, N FAIL, N SKIP`."""
    listed = [r.status for r in results]
    return ", ".join(f"{listed.count(s)} {s.value}" for s in Status)


def select(names: Sequence[str]) -> list[Check]:
    """The checks named (all when none is); an unknown name raises ValueError listing the known ones."""
    if not names:
        return list(ALL_CHECKS)
    known = {c.name: c for c in ALL_CHECKS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"make verify: no check named {', '.join(unknown)}; the checks: {', '.join(known)}")
    return [known[n] for n in names]
