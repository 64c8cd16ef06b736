"""How the gateway turns a request the pool relays into the SDK request it puts to the host."""

from __future__ import annotations

import mcp_types as types
import pytest
from pydantic import ValidationError

from mcp_gateway_svc.relay import _typed

_MESSAGE = {"role": "user", "content": {"type": "text", "text": "hi"}}


def test_each_relayed_method_becomes_its_sdk_request_with_the_result_type_the_host_answers_with() -> None:
    request, result = _typed("sampling/createMessage", {"messages": [_MESSAGE], "maxTokens": 5})
    assert isinstance(request, types.CreateMessageRequest)
    assert request.params.max_tokens == 5
    assert result is types.CreateMessageResult
    tool = {"name": "t", "inputSchema": {"type": "object"}}
    _, with_tools = _typed(
        "sampling/createMessage", {"messages": [_MESSAGE], "maxTokens": 5, "tools": [tool]}
    )
    assert with_tools is types.CreateMessageResultWithTools
    form = {"mode": "form", "message": "name?", "requestedSchema": {"type": "object", "properties": {}}}
    request, result = _typed("elicitation/create", form)
    assert isinstance(request, types.ElicitRequest)
    assert isinstance(request.params, types.ElicitRequestFormParams)
    assert result is types.ElicitResult
    url = {"mode": "url", "message": "go", "url": "https://example.com/", "elicitationId": "e"}
    request, _ = _typed("elicitation/create", url)
    assert isinstance(request, types.ElicitRequest)
    assert isinstance(request.params, types.ElicitRequestURLParams)
    request, result = _typed("roots/list", {})
    assert isinstance(request, types.ListRootsRequest)
    assert result is types.ListRootsResult


def test_an_unknown_method_is_not_relayed_and_bad_params_are_refused() -> None:
    assert _typed("tools/list", {}) == (None, None)
    with pytest.raises(ValidationError):
        _typed("sampling/createMessage", {"messages": "not a list"})
