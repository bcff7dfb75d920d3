"""Service metrics: aggregated in memory on the request path, published in the background."""
