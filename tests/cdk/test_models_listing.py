"""One `/v1/models` at the front door lists both workloads' models: with the LLM on, the Ingress sends /v1/models and
/v1/models/{id} to the LLM gateway, and the synthesized gateway is told the image model under the very name every
image pod serves it as (MODEL_NAME; each pod's MODEL_ID differs per accelerator). The gateway's side, through its
real HTTP stack: tests/llm/test_model_listing.py."""

from __future__ import annotations

import json
from typing import Any

from cdk.image.workload import APP_LABEL
from cdk.llm.routes import LLM_ACTION_NAME
from cdk.llm.workload import GATEWAY_CONTAINER
from llm_gateway.settings import load_settings
from tests.cdk.conftest import service_deployments


def env_of(deployment: dict[str, Any], container: str | None = None) -> dict[str, Any]:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    (chosen,) = [c for c in containers if container is None or c["name"] == container][:1]
    return {e["name"]: e.get("value") for e in chosen["env"]}


def test_the_ingress_sends_the_model_list_and_retrieve_to_the_llm_gateway(serving):
    (ingress,) = [m for m in serving.manifests if m["kind"] == "Ingress"]
    paths = {p["path"]: p for p in ingress["spec"]["rules"][0]["http"]["paths"]}
    for path, kind in (("/v1/models", "Exact"), ("/v1/models/", "Prefix")):
        assert paths[path]["pathType"] == kind
        assert paths[path]["backend"]["service"]["name"] == LLM_ACTION_NAME


def test_the_gateway_lists_the_image_model_under_the_name_every_image_pod_serves(serving, monkeypatch):
    image_pods = service_deployments(serving.manifests)
    names = {env_of(d)["MODEL_NAME"] for d in image_pods}
    assert len(image_pods) == 2 and names == {serving.config.model_id}  # a Hub id: one name on both accelerators
    assert len({env_of(d)["MODEL_ID"] for d in image_pods}) == 2  # while the weights' places differ
    gateways = [
        d
        for d in serving.manifests
        if d["kind"] == "Deployment"
        and not APP_LABEL.items() <= d["metadata"].get("labels", {}).items()
        and any(c["name"] == GATEWAY_CONTAINER for c in d["spec"]["template"]["spec"]["containers"])
    ]
    assert len(gateways) == 2
    for gateway in gateways:
        told = env_of(gateway, GATEWAY_CONTAINER)["IMAGE_MODELS"]
        assert json.loads(told) == {serving.config.model_id: serving.config.family}
        # The gateway's settings read the value as the pod's environment gives it.
        monkeypatch.setenv("IMAGE_MODELS", told)
        assert load_settings().image_models == {serving.config.model_id: "sd"}
