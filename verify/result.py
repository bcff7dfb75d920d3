"""What a check returns: PASS, FAIL or SKIP with its evidence in a few words."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from verify.context import Context


class Status(StrEnum):
    """A check's verdict."""

    PASS = "PASS"  # noqa: S105 - a verdict, not a password
    FAIL = "FAIL"
    SKIP = "SKIP"


@dataclass(frozen=True)
class Outcome:
    """A verdict and the evidence for it: the tag found, the object key, the HTTP status..."""

    status: Status
    evidence: str


def passed(evidence: str) -> Outcome:
    """A PASS with its evidence."""
    return Outcome(Status.PASS, evidence)


def failed(evidence: str) -> Outcome:
    """A FAIL with what was found instead."""
    return Outcome(Status.FAIL, evidence)


def skipped(reason: str) -> Outcome:
    """A SKIP with the reason the check does not apply or cannot run here."""
    return Outcome(Status.SKIP, reason)


def verdict(ok: bool, evidence: str) -> Outcome:
    """PASS when `ok`, else FAIL, with the same evidence."""
    return passed(evidence) if ok else failed(evidence)


@dataclass(frozen=True)
class Check:
    """A named check: its name is the one docs/first-deploy.md's `make verify` column gives."""

    name: str
    run: Callable[[Context], Outcome]


@dataclass(frozen=True)
class Result:
    """A check's row in the report."""

    name: str
    status: Status
    evidence: str
