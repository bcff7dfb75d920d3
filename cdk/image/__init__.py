"""The image-generation workload (the service in app/): its Kubernetes objects, compile Job, async jobs, routes,
dashboard rows and alarms."""
