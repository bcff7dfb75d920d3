"""`python -m llm_bench`: an llmperf-style benchmark of an OpenAI-compatible LLM server and the gateway's overhead."""
