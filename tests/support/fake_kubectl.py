"""A stand-in for `kubectl` against a tiny cluster held in a JSON file (FAKE_KUBE_STATE): the few verbs the LLM
benchmark command uses, answering as kubectl does (JSON for `get -o json`, an error and exit 1 for a missing
object), and recording every call with its standard input.

The cluster: CronJobs (as the stack applies them), ScaledObjects' annotations, each Deployment's replicas (one
when its ScaledObject is paused at one, else `replicas`), Jobs that finish after `polls` looks with the outcome
the state names for their CronJob, and their logs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> int:
    path = Path(os.environ["FAKE_KUBE_STATE"])
    state: dict[str, Any] = json.loads(path.read_text())
    stdin = sys.stdin.read() if "-" in argv else None
    state["calls"].append({"argv": argv, "stdin": stdin})
    try:
        out = answer(state, argv, stdin)
    except LookupError as exc:
        print(f"Error from server (NotFound): {exc} not found", file=sys.stderr)
        return 1
    finally:
        path.write_text(json.dumps(state))
    print(out)
    return 0


def answer(state: dict[str, Any], argv: list[str], stdin: str | None) -> str:
    assert argv[:2] == ["--namespace", state["namespace"]], argv
    verb, *rest = argv[2:]
    if verb == "get" and rest[0] == "cronjobs":
        return json.dumps({"items": state["cronjobs"]})
    if verb == "get" and rest[0] == "deployment":
        name = rest[1]
        held = state["annotations"].get(name, {}).get("autoscaling.keda.sh/paused-replicas") == "1"
        replicas = 1 if held and not state.get("stuck") else state["replicas"]
        return json.dumps({"status": {"replicas": replicas, "readyReplicas": replicas}})
    if verb == "get" and rest[0] == "job":
        job = state["jobs"].get(rest[1])
        if job is None:
            raise LookupError(f'jobs.batch "{rest[1]}"')
        job["looks"] += 1
        if job["looks"] < state["polls"]:
            return json.dumps({"status": {"active": 1}})
        outcome = state["outcomes"][job["cronjob"]]
        return json.dumps({"status": {"conditions": [{"type": outcome, "status": "True", "reason": "Test"}]}})
    if verb == "annotate":
        kind, name, change = rest[:3]
        assert kind == "scaledobject"
        notes = state["annotations"].setdefault(name, {})
        if change.endswith("-"):
            notes.pop(change[:-1], None)
        else:
            key, value = change.split("=", 1)
            notes[key] = value
        return f"scaledobject.keda.sh/{name} annotated"
    if verb == "apply":
        secret = json.loads(stdin or "{}")
        state["secrets"][secret["metadata"]["name"]] = secret["stringData"]
        return "secret/configured"
    if verb == "create" and rest[0] == "job":
        name, source = rest[1], rest[2].removeprefix("--from=cronjob/")
        state["jobs"][name] = {"cronjob": source, "looks": 0}
        return f"job.batch/{name} created"
    if verb == "logs":
        name = rest[0].removeprefix("job/")
        return state["logs"][state["jobs"][name]["cronjob"]]
    if verb == "delete" and rest[0] == "secret":
        state["secrets"].pop(rest[1], None)
        return "secret deleted"
    raise AssertionError(f"the fake does not know: kubectl {' '.join(argv)}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
