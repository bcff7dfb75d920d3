"""Models the project builds itself: random-weight Stable Diffusion pipelines of a given architecture."""
