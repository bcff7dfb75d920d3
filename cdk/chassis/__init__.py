"""The chassis: the `Workload` contract that every workload implements, and what the serving stack hands it."""
