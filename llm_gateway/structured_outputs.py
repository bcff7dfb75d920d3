"""Which requests need vLLM's structured outputs (guided decoding), for engines that cannot apply them.

vLLM constrains the tokens it samples to a grammar for: `response_format` of type json_object, json_schema or
structural_tag, its own `structured_outputs` field, and a `tool_choice` of "required" or a named function (both
turned into a JSON schema of the tools' parameters: `ToolParser.adjust_request`, get_json_schema_from_tools);
the Responses API asks through `text.format` and the same tool choices. Read in PyPI's vllm-0.13.0 wheel
(vllm/entrypoints/openai/protocol.py ChatCompletionRequest.to_sampling_params, CompletionRequest;
vllm/tool_parsers/abstract_tool_parser.py).

vllm-neuron 0.4.1 (the inf2 image's plugin) samples on the device and drops the grammar: "Grammar bitmask
provided but on-device sampling is enabled. Structured outputs are not supported with on-device sampling. The
grammar bitmask will be ignored." (vllm-project/vllm-neuron#19), so the answer would look valid and match no
schema. Where the engine cannot (STRUCTURED_OUTPUTS=false), the gateway refuses these requests with a 400 that
says so instead. `tool_choice: "auto"` needs no grammar (the tool-call parser reads the model's own text) and
passes everywhere.
"""

from __future__ import annotations

from typing import Any

from llm_gateway.request_checks import Refusal

_GRAMMAR_FORMATS = frozenset({"json_object", "json_schema", "structural_tag"})
_WHY = (
    "this engine cannot constrain its output ({what} needs vLLM's structured outputs, which the Neuron plugin "
    'ignores while it samples on the device); send it to a pool on NVIDIA, or use tool_choice "auto" or none'
)


def _needs_grammar(request: dict[str, Any]) -> tuple[str, str] | None:
    """(the field, what in it asks for a grammar), or None."""
    response_format = request.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") in _GRAMMAR_FORMATS:
        return "response_format", f"response_format {response_format['type']}"
    text = request.get("text")
    text_format = text.get("format") if isinstance(text, dict) else None
    if isinstance(text_format, dict) and text_format.get("type") in _GRAMMAR_FORMATS:
        return "text.format", f"text.format {text_format['type']}"
    if request.get("structured_outputs") is not None:
        return "structured_outputs", "structured_outputs"
    tool_choice = request.get("tool_choice")
    if request.get("tools") and (tool_choice == "required" or isinstance(tool_choice, dict)):
        what = "tool_choice required" if tool_choice == "required" else "a named tool_choice"
        return "tool_choice", what
    return None


def check_structured_outputs(request: dict[str, Any], served: bool) -> Refusal | None:
    """A 400 naming the field when the request needs structured outputs and the engine does not apply them."""
    if served:
        return None
    needs = _needs_grammar(request)
    if needs is None:
        return None
    param, what = needs
    return Refusal(400, _WHY.format(what=what), param)
