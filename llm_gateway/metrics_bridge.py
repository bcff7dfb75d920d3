"""The metrics bridge: each request as the gateway saw it, and vLLM's own gauges, as the platform's metrics.

Per request (when it ends): Requests, Errors, Latency, PromptTokens, OutputTokens, and for a stream its
TimeToFirstToken and TimePerOutputToken as its client saw them. These are samples per request, so CloudWatch
can draw their p50 and p90; vLLM's latency histograms give only bucket counts. Per flush, sampled from
vLLM's /metrics: QueueDepth (requests waiting for the engine), RequestsRunning and KvCacheUsage, which
KEDA and the dashboards read, and what vLLM's prefix-cache counters grew by since the last flush
(PrefixCacheQueries, PrefixCacheHits: the dashboard's hit rate is their ratio). Names and units come from
common.metric_names, as for the image service.
"""

from __future__ import annotations

import asyncio
import logging

from common import metric_names as m
from common.metrics.recorder import MetricsRecorder
from llm_gateway.engine_client import AnswerTooLarge, EngineClient, EngineError, get_within
from llm_gateway.engine_metrics import EngineReading, counter_increase, read_engine_metrics
from llm_gateway.routes import UPSTREAM_METRICS_PATH
from llm_gateway.usage import RequestRecord

log = logging.getLogger(__name__)
SAMPLE_TIMEOUT_S = 2.0
MAX_METRICS_BYTES = 16 * 1024 * 1024
"""The most of vLLM's /metrics read (a few hundred KiB with its histograms)."""
# Outcomes that are the server's failure even when the status line said 200 (a stream ended by an error event).
FAILED_OUTCOMES = frozenset({"upstream_error", "cut", "timed_out"})
# Outcomes the client decided (it left, or read too slowly and was cut): their times say when, not how fast we were.
CLIENT_OUTCOMES = frozenset({"client_gone", "slow_client"})


class MetricsBridge:
    """Records into one MetricsRecorder; the flusher drains and publishes it."""

    def __init__(self, recorder: MetricsRecorder, http: EngineClient) -> None:
        self.recorder = recorder
        self._http = http
        self._engine_unreadable = False
        self._last_reading: EngineReading | None = None  # the counters' previous values

    def request_finished(self, record: RequestRecord) -> None:
        """Count one generation request that has ended (refused ones included: a 429 is a request too).

        A request whose client left, or was cut for reading too slowly, counts as a request, not as an error, and
        its times are left out: they measure the client, not the server.
        """
        failed = record.outcome in FAILED_OUTCOMES or (record.status or 500) >= 500
        self.recorder.record(m.REQUESTS, 1)
        self.recorder.record(m.ERRORS, 1 if failed else 0)
        if record.prompt_tokens is not None and record.completion_tokens is not None:
            self.recorder.record(m.PROMPT_TOKENS, record.prompt_tokens)
            self.recorder.record(m.OUTPUT_TOKENS, record.completion_tokens)
        if record.outcome in CLIENT_OUTCOMES or record.ended is None:
            return
        self.recorder.record(m.LATENCY, (record.ended - record.started) * 1000)
        if not (record.stream and record.outcome == "completed" and record.first_event_at is not None):
            return
        self.recorder.record(m.TIME_TO_FIRST_TOKEN, (record.first_event_at - record.started) * 1000)
        if record.completion_tokens is not None and record.completion_tokens > 1:
            per_token_s = (record.ended - record.first_event_at) / (record.completion_tokens - 1)
            self.recorder.record(m.TIME_PER_OUTPUT_TOKEN, per_token_s * 1000)

    async def sample_engine(self) -> None:
        """Record vLLM's queue, running and KV-cache gauges now.

        While vLLM cannot be read (it is still loading, say, which can take minutes) the gauges are left
        out; that is logged once when it starts and once when it ends, not at every flush.
        """
        try:
            async with asyncio.timeout(SAMPLE_TIMEOUT_S):
                status, _, content = await get_within(self._http, UPSTREAM_METRICS_PATH, MAX_METRICS_BYTES)
            problem = None if status == 200 else f"{UPSTREAM_METRICS_PATH} answered {status}"
        except (EngineError, AnswerTooLarge, TimeoutError) as exc:
            problem = str(exc) or type(exc).__name__
        if problem is not None:
            if not self._engine_unreadable:
                log.warning("vLLM's metrics cannot be read (%s); its gauges are left out until they can", problem)
            self._engine_unreadable = True
            return
        if self._engine_unreadable:
            log.info("vLLM's metrics can be read again")
            self._engine_unreadable = False
        reading = read_engine_metrics(content.decode("utf-8", "replace"))
        if reading.waiting is not None:
            self.recorder.record(m.QUEUE_DEPTH, reading.waiting)
        if reading.running is not None:
            self.recorder.record(m.REQUESTS_RUNNING, reading.running)
        if reading.kv_cache_usage is not None:
            self.recorder.record(m.KV_CACHE_USAGE, reading.kv_cache_usage * 100)  # vLLM's is a fraction
        self._record_prefix_cache(reading)

    def _record_prefix_cache(self, reading: EngineReading) -> None:
        """The prefix cache's lookups and hits since the previous reading (none at the first: no baseline yet)."""
        last, self._last_reading = self._last_reading, reading
        if last is None:
            return
        queries = counter_increase(last.prefix_cache_queries, reading.prefix_cache_queries)
        hits = counter_increase(last.prefix_cache_hits, reading.prefix_cache_hits)
        if queries is not None and hits is not None:
            self.recorder.record(m.PREFIX_CACHE_QUERIES, queries)
            self.recorder.record(m.PREFIX_CACHE_HITS, hits)
