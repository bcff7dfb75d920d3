"""The front door: the ALB Ingress, CloudFront, the WAF and sign-in, shared by every workload."""
