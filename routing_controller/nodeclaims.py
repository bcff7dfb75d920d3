"""Karpenter NodeClaim coordinates, free of client imports so the CDK app can name them in RBAC.

Verified in kubernetes-sigs/karpenter v1.14.1: pkg/apis/crds/karpenter.sh_nodeclaims.yaml (group
karpenter.sh, version v1, plural nodeclaims, scope Cluster), pkg/apis/v1/labels.go
(NodePoolLabelKey = karpenter.sh/nodepool) and pkg/apis/v1/nodeclaim_status.go (conditions
Launched, Registered, Initialized).
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "karpenter.sh"
VERSION: Final = "v1"
PLURAL: Final = "nodeclaims"
NODEPOOL_LABEL: Final = "karpenter.sh/nodepool"
CONDITION_LAUNCHED: Final = "Launched"
CONDITION_INITIALIZED: Final = "Initialized"
