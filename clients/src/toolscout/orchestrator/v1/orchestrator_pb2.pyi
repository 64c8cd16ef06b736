from toolscout.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StopReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STOP_REASON_UNSPECIFIED: _ClassVar[StopReason]
    STOP_REASON_COMPLETED: _ClassVar[StopReason]
    STOP_REASON_ITERATION_LIMIT: _ClassVar[StopReason]
STOP_REASON_UNSPECIFIED: StopReason
STOP_REASON_COMPLETED: StopReason
STOP_REASON_ITERATION_LIMIT: StopReason

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "arguments_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    arguments_json: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning", "attachments", "is_error", "loaded_tools", "native_items_json", "not_loaded", "result_handle", "handle_expires_unix")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    LOADED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    NATIVE_ITEMS_JSON_FIELD_NUMBER: _ClassVar[int]
    NOT_LOADED_FIELD_NUMBER: _ClassVar[int]
    RESULT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    HANDLE_EXPIRES_UNIX_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    tool_call_id: str
    name: str
    reasoning: str
    attachments: _containers.RepeatedCompositeFieldContainer[_common_pb2.ContentBlock]
    is_error: bool
    loaded_tools: LoadedTools
    native_items_json: _containers.RepeatedScalarFieldContainer[str]
    not_loaded: bool
    result_handle: str
    handle_expires_unix: float
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., reasoning: _Optional[str] = ..., attachments: _Optional[_Iterable[_Union[_common_pb2.ContentBlock, _Mapping]]] = ..., is_error: _Optional[bool] = ..., loaded_tools: _Optional[_Union[LoadedTools, _Mapping]] = ..., native_items_json: _Optional[_Iterable[str]] = ..., not_loaded: _Optional[bool] = ..., result_handle: _Optional[str] = ..., handle_expires_unix: _Optional[float] = ...) -> None: ...

class LoadedTools(_message.Message):
    __slots__ = ("names",)
    NAMES_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, names: _Optional[_Iterable[str]] = ...) -> None: ...

class ChatRequest(_message.Message):
    __slots__ = ("messages", "model", "system", "toolset", "meta_json", "discovered_tools", "max_iterations", "tool_result_format", "toolset_json", "conversation_id")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    TOOLSET_FIELD_NUMBER: _ClassVar[int]
    META_JSON_FIELD_NUMBER: _ClassVar[int]
    DISCOVERED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    MAX_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    TOOLSET_JSON_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_ID_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    model: str
    system: str
    toolset: str
    meta_json: str
    discovered_tools: _containers.RepeatedScalarFieldContainer[str]
    max_iterations: int
    tool_result_format: str
    toolset_json: str
    conversation_id: str
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., model: _Optional[str] = ..., system: _Optional[str] = ..., toolset: _Optional[str] = ..., meta_json: _Optional[str] = ..., discovered_tools: _Optional[_Iterable[str]] = ..., max_iterations: _Optional[int] = ..., tool_result_format: _Optional[str] = ..., toolset_json: _Optional[str] = ..., conversation_id: _Optional[str] = ...) -> None: ...

class TokenUsage(_message.Message):
    __slots__ = ("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_input_tokens")
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cache_write_input_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cached_input_tokens: _Optional[int] = ..., cache_write_input_tokens: _Optional[int] = ...) -> None: ...

class ToolCallCount(_message.Message):
    __slots__ = ("tool", "server", "calls", "errors")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    tool: str
    server: str
    calls: int
    errors: int
    def __init__(self, tool: _Optional[str] = ..., server: _Optional[str] = ..., calls: _Optional[int] = ..., errors: _Optional[int] = ...) -> None: ...

class DiscoveryStats(_message.Message):
    __slots__ = ("search_calls", "tools_discovered", "definition_tokens_sent", "definition_tokens_all", "tokens_saved", "encoding", "estimate", "deferred_call_rejections", "deferral", "native_fallback_reason")
    SEARCH_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_DISCOVERED_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_TOKENS_SENT_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_TOKENS_ALL_FIELD_NUMBER: _ClassVar[int]
    TOKENS_SAVED_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_CALL_REJECTIONS_FIELD_NUMBER: _ClassVar[int]
    DEFERRAL_FIELD_NUMBER: _ClassVar[int]
    NATIVE_FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    search_calls: int
    tools_discovered: int
    definition_tokens_sent: int
    definition_tokens_all: int
    tokens_saved: int
    encoding: str
    estimate: bool
    deferred_call_rejections: int
    deferral: str
    native_fallback_reason: str
    def __init__(self, search_calls: _Optional[int] = ..., tools_discovered: _Optional[int] = ..., definition_tokens_sent: _Optional[int] = ..., definition_tokens_all: _Optional[int] = ..., tokens_saved: _Optional[int] = ..., encoding: _Optional[str] = ..., estimate: _Optional[bool] = ..., deferred_call_rejections: _Optional[int] = ..., deferral: _Optional[str] = ..., native_fallback_reason: _Optional[str] = ...) -> None: ...

class ChatStats(_message.Message):
    __slots__ = ("usage", "llm_calls", "tool_calls", "discovery", "iterations", "duration_seconds", "result_tokens")
    USAGE_FIELD_NUMBER: _ClassVar[int]
    LLM_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    DISCOVERY_FIELD_NUMBER: _ClassVar[int]
    ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RESULT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    usage: TokenUsage
    llm_calls: int
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCallCount]
    discovery: DiscoveryStats
    iterations: int
    duration_seconds: float
    result_tokens: _containers.RepeatedCompositeFieldContainer[ResultTokens]
    def __init__(self, usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., llm_calls: _Optional[int] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCallCount, _Mapping]]] = ..., discovery: _Optional[_Union[DiscoveryStats, _Mapping]] = ..., iterations: _Optional[int] = ..., duration_seconds: _Optional[float] = ..., result_tokens: _Optional[_Iterable[_Union[ResultTokens, _Mapping]]] = ...) -> None: ...

class ResultTokens(_message.Message):
    __slots__ = ("server", "tokens_returned", "tokens_delivered", "tokens_saved", "results_kept", "reads", "estimated", "read_tokens")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TOKENS_RETURNED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_DELIVERED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_SAVED_FIELD_NUMBER: _ClassVar[int]
    RESULTS_KEPT_FIELD_NUMBER: _ClassVar[int]
    READS_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_FIELD_NUMBER: _ClassVar[int]
    READ_TOKENS_FIELD_NUMBER: _ClassVar[int]
    server: str
    tokens_returned: int
    tokens_delivered: int
    tokens_saved: int
    results_kept: int
    reads: int
    estimated: bool
    read_tokens: int
    def __init__(self, server: _Optional[str] = ..., tokens_returned: _Optional[int] = ..., tokens_delivered: _Optional[int] = ..., tokens_saved: _Optional[int] = ..., results_kept: _Optional[int] = ..., reads: _Optional[int] = ..., estimated: _Optional[bool] = ..., read_tokens: _Optional[int] = ...) -> None: ...

class ChatResponse(_message.Message):
    __slots__ = ("messages", "loaded_tools", "stats", "stop_reason", "error", "tools_disabled_fallback", "model")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    LOADED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TOOLS_DISABLED_FALLBACK_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    loaded_tools: _containers.RepeatedScalarFieldContainer[str]
    stats: ChatStats
    stop_reason: StopReason
    error: str
    tools_disabled_fallback: bool
    model: str
    def __init__(self, messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., loaded_tools: _Optional[_Iterable[str]] = ..., stats: _Optional[_Union[ChatStats, _Mapping]] = ..., stop_reason: _Optional[_Union[StopReason, str]] = ..., error: _Optional[str] = ..., tools_disabled_fallback: _Optional[bool] = ..., model: _Optional[str] = ...) -> None: ...

class TextDelta(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ReasoningDelta(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ToolCallStarted(_message.Message):
    __slots__ = ("call", "server")
    CALL_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    call: ToolCall
    server: str
    def __init__(self, call: _Optional[_Union[ToolCall, _Mapping]] = ..., server: _Optional[str] = ...) -> None: ...

class ToolCallFinished(_message.Message):
    __slots__ = ("call", "server", "duration_seconds", "is_error", "result_preview")
    CALL_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULT_PREVIEW_FIELD_NUMBER: _ClassVar[int]
    call: ToolCall
    server: str
    duration_seconds: float
    is_error: bool
    result_preview: str
    def __init__(self, call: _Optional[_Union[ToolCall, _Mapping]] = ..., server: _Optional[str] = ..., duration_seconds: _Optional[float] = ..., is_error: _Optional[bool] = ..., result_preview: _Optional[str] = ...) -> None: ...

class ToolsDiscovered(_message.Message):
    __slots__ = ("tools",)
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tools: _Optional[_Iterable[str]] = ...) -> None: ...

class ChatEvent(_message.Message):
    __slots__ = ("text_delta", "reasoning_delta", "assistant_message", "tool_call_started", "tool_call_finished", "tools_discovered", "usage", "final")
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    REASONING_DELTA_FIELD_NUMBER: _ClassVar[int]
    ASSISTANT_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_STARTED_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FINISHED_FIELD_NUMBER: _ClassVar[int]
    TOOLS_DISCOVERED_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    text_delta: TextDelta
    reasoning_delta: ReasoningDelta
    assistant_message: Message
    tool_call_started: ToolCallStarted
    tool_call_finished: ToolCallFinished
    tools_discovered: ToolsDiscovered
    usage: TokenUsage
    final: ChatResponse
    def __init__(self, text_delta: _Optional[_Union[TextDelta, _Mapping]] = ..., reasoning_delta: _Optional[_Union[ReasoningDelta, _Mapping]] = ..., assistant_message: _Optional[_Union[Message, _Mapping]] = ..., tool_call_started: _Optional[_Union[ToolCallStarted, _Mapping]] = ..., tool_call_finished: _Optional[_Union[ToolCallFinished, _Mapping]] = ..., tools_discovered: _Optional[_Union[ToolsDiscovered, _Mapping]] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., final: _Optional[_Union[ChatResponse, _Mapping]] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("name", "client", "provider", "model", "base_url", "template", "api", "deferral", "strict_tools")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    BASE_URL_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    API_FIELD_NUMBER: _ClassVar[int]
    DEFERRAL_FIELD_NUMBER: _ClassVar[int]
    STRICT_TOOLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    client: str
    provider: str
    model: str
    base_url: str
    template: str
    api: str
    deferral: str
    strict_tools: bool
    def __init__(self, name: _Optional[str] = ..., client: _Optional[str] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., base_url: _Optional[str] = ..., template: _Optional[str] = ..., api: _Optional[str] = ..., deferral: _Optional[str] = ..., strict_tools: _Optional[bool] = ...) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ...) -> None: ...

class ListToolsetsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ToolsetServer(_message.Message):
    __slots__ = ("server", "mode", "tools")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    server: str
    mode: str
    tools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, server: _Optional[str] = ..., mode: _Optional[str] = ..., tools: _Optional[_Iterable[str]] = ...) -> None: ...

class ToolsetInfo(_message.Message):
    __slots__ = ("name", "description", "servers")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    servers: _containers.RepeatedCompositeFieldContainer[ToolsetServer]
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., servers: _Optional[_Iterable[_Union[ToolsetServer, _Mapping]]] = ...) -> None: ...

class ListToolsetsResponse(_message.Message):
    __slots__ = ("toolsets",)
    TOOLSETS_FIELD_NUMBER: _ClassVar[int]
    toolsets: _containers.RepeatedCompositeFieldContainer[ToolsetInfo]
    def __init__(self, toolsets: _Optional[_Iterable[_Union[ToolsetInfo, _Mapping]]] = ...) -> None: ...
