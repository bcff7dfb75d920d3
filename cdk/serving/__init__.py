"""The shared serving kit: what every workload builds its pods, Jobs, policies and identities from."""
