"""Service metrics: recorded in memory on the request path, published in the background (names in
`common.metric_names`)."""
