"""The LLM gateway: a thin OpenAI-compatible front of ours for one vLLM server on the same pod.

vLLM serves; the gateway verifies the caller (the image service's Cognito tokens), bounds concurrency,
passes streams through as they come, cancels the generation when the client goes away, drains open
streams on SIGTERM, counts tokens per request and answers every error as OpenAI-shaped JSON. It imports
no vLLM and nothing of the Stable Diffusion service: it has its own requirements (llm_gateway/requirements.txt).
"""
