"""The image service's metrics: what one request or batch adds (`aggregator`); recording and publishing
are in `common.metrics`."""
