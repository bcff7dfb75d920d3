"""The routing controller: keeps the ALB's forward weights at cost while capacity allows, and moves
weight to the accelerators that have ready pods when one runs short.

`decision` is the pure policy; `annotation` the load balancer controller's weighted forward action;
`cluster` reads Deployments, Pods and NodeClaims; `loop` applies decisions (Ingress patch, Event,
log line, CloudWatch metric); `simulate` compares the routing modes offline.
"""
