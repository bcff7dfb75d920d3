"""The local LLM stack: vLLM's CPU engine in its own cached environment, a tiny built-in model, the launcher.

Nothing here runs on the cluster (there vLLM comes from AWS's images); it exists so that the gateway
(llm_gateway/) is developed and tested against the real engine on a laptop, offline.
"""
