"""LLM serving on the cluster (llmEnabled): vLLM behind the LLM gateway on each enabled accelerator."""
