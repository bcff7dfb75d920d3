"""A stand-in for `kubectl` against a tiny cluster held in a JSON file (FAKE_KUBE_STATE): the few verbs the LLM
benchmark command uses, answering as kubectl does (JSON for `get -o json`, an error and exit 1 for a missing
object), and recording every call with its standard input.

The cluster: CronJobs (as the stack applies them), ScaledObjects' annotations (KEDA takes a pause at once:
status.pausedReplicaCount), each Deployment's replicas (one when its ScaledObject is paused at one, unless
`stuck`, else `replicas`), Jobs that finish after `polls` looks with the outcome the state names for their
CronJob (the first `flaky_gets` looks at a Job fail, as on a network blip), their logs, and Secrets.

A state with `resources` is a cluster of plain objects instead (what `make verify` reads, tests/verify/):
`resources[namespace][kind]` lists the objects `get` answers (by name, or all, filtered by `--selector k=v`),
`container_logs["namespace/deployment/name"]` the logs, `exec["namespace/deployment/name"]` what a command run
in it prints, `admission[user]` the message the API server denies that
user's server-side dry run with (admitted when absent), and `unreachable` makes every call fail as kubectl does
without a cluster.
"""

from __future__ import annotations

import base64
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
    except (ConnectionError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        path.write_text(json.dumps(state))
    print(out)
    return 0


def answer(state: dict[str, Any], argv: list[str], stdin: str | None) -> str:
    if "resources" in state:
        return answer_objects(state, argv)
    assert argv[:2] == ["--namespace", state["namespace"]], argv
    verb, *rest = argv[2:]
    if verb == "get" and rest[0] == "cronjobs":
        return json.dumps({"items": state["cronjobs"]})
    if verb == "get" and rest[0] == "scaledobject":
        notes = state["annotations"].get(rest[1], {})
        paused = notes.get("autoscaling.keda.sh/paused-replicas")
        status = {"pausedReplicaCount": int(paused)} if paused else {}
        return json.dumps({"metadata": {"name": rest[1], "annotations": notes}, "status": status})
    if verb == "get" and rest[0] == "deployment":
        name = rest[1]
        held = state["annotations"].get(name, {}).get("autoscaling.keda.sh/paused-replicas") == "1"
        replicas = 1 if held and not state.get("stuck") else state["replicas"]
        return json.dumps({"status": {"replicas": replicas, "readyReplicas": replicas}})
    if verb == "get" and rest[0] == "job":
        if state.get("flaky_gets", 0) > 0:
            state["flaky_gets"] -= 1
            raise ConnectionError("Unable to connect to the server: net/http: TLS handshake timeout")
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
            if key in notes and "--overwrite" not in rest:
                raise ValueError(f"'{key}' already has a value ({notes[key]}), and --overwrite is false")
            notes[key] = value
        return f"scaledobject.keda.sh/{name} annotated"
    if verb == "apply":
        assert "--server-side" in rest, "a client-side apply keeps the whole object in an annotation"
        secret = json.loads(stdin or "{}")
        data = {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}
        state["secrets"][secret["metadata"]["name"]] = data
        return "secret/llm-bench-token serverside-applied"
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
    if verb == "delete" and rest[0] == "job":
        state["jobs"].pop(rest[1], None)
        state.setdefault("deleted_jobs", []).append(rest[1])
        return "job deleted"
    raise AssertionError(f"the fake does not know: kubectl {' '.join(argv)}")


# kubectl's singular names for the kinds the state lists by their plural.
SINGULAR = {
    "configmap": "configmaps",
    "deployment": "deployments",
    "ingress": "ingresses",
    "namespace": "namespaces",
    "pod": "pods",
}


def option(rest: list[str], name: str) -> str | None:
    """The value of `--name value` or `--name=value`, None when absent."""
    for i, arg in enumerate(rest):
        if arg == name and i + 1 < len(rest):
            return rest[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def answer_objects(state: dict[str, Any], argv: list[str]) -> str:
    """`make verify`'s verbs against `resources`: get (-o json), logs, exec, and a server-side dry-run annotate."""
    if state.get("unreachable"):
        raise ConnectionError("Unable to connect to the server: dial tcp 10.0.0.1:443: i/o timeout")
    assert argv[0] == "--namespace", argv
    namespace, verb, rest = argv[1], argv[2], argv[3:]
    objects = state["resources"].get(namespace, {})
    if verb == "get":
        assert option(rest, "--output") == "json", argv
        kind = SINGULAR.get(rest[0], rest[0])
        items = objects.get(kind, [])
        if len(rest) > 1 and not rest[1].startswith("--"):
            for item in items:
                if item["metadata"]["name"] == rest[1]:
                    return json.dumps(item)
            raise LookupError(f'{kind} "{rest[1]}"')
        if selector := option(rest, "--selector"):
            key, value = selector.split("=", 1)
            items = [i for i in items if i["metadata"].get("labels", {}).get(key) == value]
        return json.dumps({"kind": "List", "items": items})
    if verb == "logs":
        kind, _, name = rest[0].partition("/")
        key = f"{namespace}/{kind}/{name}"
        if key not in state.get("container_logs", {}):
            raise LookupError(f'{kind}s.apps "{name}"')
        return str(state["container_logs"][key])
    if verb == "exec":
        key = f"{namespace}/{rest[0]}"
        if key not in state.get("exec", {}):
            raise LookupError(f'{rest[0].partition("/")[0]}s.apps "{rest[0].partition("/")[2]}"')
        return str(state["exec"][key])
    if verb == "annotate":
        assert "--dry-run=server" in rest, "make verify changes nothing"
        user = option(rest, "--as")
        denial = state.get("admission", {}).get(user)
        if denial:
            raise ValueError(f"admission webhook denied the request: {denial}")
        return f"ingress.networking.k8s.io/{rest[1]} annotated (server dry run)"
    raise AssertionError(f"the fake does not know: kubectl {' '.join(argv)}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
