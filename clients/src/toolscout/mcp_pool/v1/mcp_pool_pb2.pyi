from toolscout.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ServerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SERVER_STATE_UNSPECIFIED: _ClassVar[ServerState]
    SERVER_STATE_STARTING: _ClassVar[ServerState]
    SERVER_STATE_READY: _ClassVar[ServerState]
    SERVER_STATE_RECONNECTING: _ClassVar[ServerState]
    SERVER_STATE_FAILED: _ClassVar[ServerState]
    SERVER_STATE_IDLE: _ClassVar[ServerState]
    SERVER_STATE_STOPPED: _ClassVar[ServerState]

class StructuredCopy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STRUCTURED_COPY_UNSPECIFIED: _ClassVar[StructuredCopy]
    STRUCTURED_COPY_TEXT: _ClassVar[StructuredCopy]
    STRUCTURED_COPY_STRUCTURED: _ClassVar[StructuredCopy]

class FeatureKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FEATURE_KIND_UNSPECIFIED: _ClassVar[FeatureKind]
    FEATURE_KIND_RESOURCE: _ClassVar[FeatureKind]
    FEATURE_KIND_RESOURCE_TEMPLATE: _ClassVar[FeatureKind]
    FEATURE_KIND_PROMPT: _ClassVar[FeatureKind]
SERVER_STATE_UNSPECIFIED: ServerState
SERVER_STATE_STARTING: ServerState
SERVER_STATE_READY: ServerState
SERVER_STATE_RECONNECTING: ServerState
SERVER_STATE_FAILED: ServerState
SERVER_STATE_IDLE: ServerState
SERVER_STATE_STOPPED: ServerState
STRUCTURED_COPY_UNSPECIFIED: StructuredCopy
STRUCTURED_COPY_TEXT: StructuredCopy
STRUCTURED_COPY_STRUCTURED: StructuredCopy
FEATURE_KIND_UNSPECIFIED: FeatureKind
FEATURE_KIND_RESOURCE: FeatureKind
FEATURE_KIND_RESOURCE_TEMPLATE: FeatureKind
FEATURE_KIND_PROMPT: FeatureKind

class ServerStatus(_message.Message):
    __slots__ = ("name", "transport", "state", "tool_count", "restarts", "last_error", "state_since_unix", "defer_loading", "health_service", "server_info", "next_retry_unix", "protocol_version", "shards", "placement", "tool_cache_ttl_seconds", "change_notifications", "serialize_writes", "serialized_tools", "unannotated_tools", "result_tokens_returned", "result_tokens_delivered", "results_kept")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TOOL_COUNT_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    STATE_SINCE_UNIX_FIELD_NUMBER: _ClassVar[int]
    DEFER_LOADING_FIELD_NUMBER: _ClassVar[int]
    HEALTH_SERVICE_FIELD_NUMBER: _ClassVar[int]
    SERVER_INFO_FIELD_NUMBER: _ClassVar[int]
    NEXT_RETRY_UNIX_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CACHE_TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CHANGE_NOTIFICATIONS_FIELD_NUMBER: _ClassVar[int]
    SERIALIZE_WRITES_FIELD_NUMBER: _ClassVar[int]
    SERIALIZED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    UNANNOTATED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    RESULT_TOKENS_RETURNED_FIELD_NUMBER: _ClassVar[int]
    RESULT_TOKENS_DELIVERED_FIELD_NUMBER: _ClassVar[int]
    RESULTS_KEPT_FIELD_NUMBER: _ClassVar[int]
    name: str
    transport: str
    state: ServerState
    tool_count: int
    restarts: int
    last_error: str
    state_since_unix: float
    defer_loading: bool
    health_service: str
    server_info: str
    next_retry_unix: float
    protocol_version: str
    shards: _containers.RepeatedScalarFieldContainer[int]
    placement: str
    tool_cache_ttl_seconds: float
    change_notifications: bool
    serialize_writes: bool
    serialized_tools: int
    unannotated_tools: int
    result_tokens_returned: int
    result_tokens_delivered: int
    results_kept: int
    def __init__(self, name: _Optional[str] = ..., transport: _Optional[str] = ..., state: _Optional[_Union[ServerState, str]] = ..., tool_count: _Optional[int] = ..., restarts: _Optional[int] = ..., last_error: _Optional[str] = ..., state_since_unix: _Optional[float] = ..., defer_loading: _Optional[bool] = ..., health_service: _Optional[str] = ..., server_info: _Optional[str] = ..., next_retry_unix: _Optional[float] = ..., protocol_version: _Optional[str] = ..., shards: _Optional[_Iterable[int]] = ..., placement: _Optional[str] = ..., tool_cache_ttl_seconds: _Optional[float] = ..., change_notifications: _Optional[bool] = ..., serialize_writes: _Optional[bool] = ..., serialized_tools: _Optional[int] = ..., unannotated_tools: _Optional[int] = ..., result_tokens_returned: _Optional[int] = ..., result_tokens_delivered: _Optional[int] = ..., results_kept: _Optional[int] = ...) -> None: ...

class ShardInfo(_message.Message):
    __slots__ = ("index", "count")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    index: int
    count: int
    def __init__(self, index: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class ListServersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListServersResponse(_message.Message):
    __slots__ = ("servers", "shard")
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedCompositeFieldContainer[ServerStatus]
    shard: ShardInfo
    def __init__(self, servers: _Optional[_Iterable[_Union[ServerStatus, _Mapping]]] = ..., shard: _Optional[_Union[ShardInfo, _Mapping]] = ...) -> None: ...

class ListToolsRequest(_message.Message):
    __slots__ = ("servers", "include_unavailable", "principal")
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedScalarFieldContainer[str]
    include_unavailable: bool
    principal: str
    def __init__(self, servers: _Optional[_Iterable[str]] = ..., include_unavailable: _Optional[bool] = ..., principal: _Optional[str] = ...) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ("tools", "catalog_version", "shard")
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    CATALOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    tools: _containers.RepeatedCompositeFieldContainer[_common_pb2.Tool]
    catalog_version: str
    shard: ShardInfo
    def __init__(self, tools: _Optional[_Iterable[_Union[_common_pb2.Tool, _Mapping]]] = ..., catalog_version: _Optional[str] = ..., shard: _Optional[_Union[ShardInfo, _Mapping]] = ...) -> None: ...

class CallToolRequest(_message.Message):
    __slots__ = ("server", "tool", "llm_name", "arguments_json", "meta_json", "timeout_seconds", "result_budget_tokens", "token_encoding", "structured_copy", "principal", "conversation", "preview_tokens", "accept_input_required", "input_responses_json", "request_state", "host_capabilities_json", "defer_token_counts")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    LLM_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    META_JSON_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    RESULT_BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ENCODING_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_COPY_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    PREVIEW_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_INPUT_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    INPUT_RESPONSES_JSON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_STATE_FIELD_NUMBER: _ClassVar[int]
    HOST_CAPABILITIES_JSON_FIELD_NUMBER: _ClassVar[int]
    DEFER_TOKEN_COUNTS_FIELD_NUMBER: _ClassVar[int]
    server: str
    tool: str
    llm_name: str
    arguments_json: str
    meta_json: str
    timeout_seconds: float
    result_budget_tokens: int
    token_encoding: str
    structured_copy: StructuredCopy
    principal: str
    conversation: str
    preview_tokens: int
    accept_input_required: bool
    input_responses_json: str
    request_state: str
    host_capabilities_json: str
    defer_token_counts: bool
    def __init__(self, server: _Optional[str] = ..., tool: _Optional[str] = ..., llm_name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., meta_json: _Optional[str] = ..., timeout_seconds: _Optional[float] = ..., result_budget_tokens: _Optional[int] = ..., token_encoding: _Optional[str] = ..., structured_copy: _Optional[_Union[StructuredCopy, str]] = ..., principal: _Optional[str] = ..., conversation: _Optional[str] = ..., preview_tokens: _Optional[int] = ..., accept_input_required: _Optional[bool] = ..., input_responses_json: _Optional[str] = ..., request_state: _Optional[str] = ..., host_capabilities_json: _Optional[str] = ..., defer_token_counts: _Optional[bool] = ...) -> None: ...

class CallToolResponse(_message.Message):
    __slots__ = ("content", "structured_content_json", "is_error", "truncated", "server", "tool", "duration_seconds", "tokens_returned", "tokens_delivered", "tokens_estimated", "result_handle", "handle_expires_unix", "meta_json", "jsonrpc_error_code", "input_required_json")
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_RETURNED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_DELIVERED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_ESTIMATED_FIELD_NUMBER: _ClassVar[int]
    RESULT_HANDLE_FIELD_NUMBER: _ClassVar[int]
    HANDLE_EXPIRES_UNIX_FIELD_NUMBER: _ClassVar[int]
    META_JSON_FIELD_NUMBER: _ClassVar[int]
    JSONRPC_ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    INPUT_REQUIRED_JSON_FIELD_NUMBER: _ClassVar[int]
    content: _containers.RepeatedCompositeFieldContainer[_common_pb2.ContentBlock]
    structured_content_json: str
    is_error: bool
    truncated: bool
    server: str
    tool: str
    duration_seconds: float
    tokens_returned: int
    tokens_delivered: int
    tokens_estimated: bool
    result_handle: str
    handle_expires_unix: float
    meta_json: str
    jsonrpc_error_code: int
    input_required_json: str
    def __init__(self, content: _Optional[_Iterable[_Union[_common_pb2.ContentBlock, _Mapping]]] = ..., structured_content_json: _Optional[str] = ..., is_error: _Optional[bool] = ..., truncated: _Optional[bool] = ..., server: _Optional[str] = ..., tool: _Optional[str] = ..., duration_seconds: _Optional[float] = ..., tokens_returned: _Optional[int] = ..., tokens_delivered: _Optional[int] = ..., tokens_estimated: _Optional[bool] = ..., result_handle: _Optional[str] = ..., handle_expires_unix: _Optional[float] = ..., meta_json: _Optional[str] = ..., jsonrpc_error_code: _Optional[int] = ..., input_required_json: _Optional[str] = ...) -> None: ...

class ReadResultRequest(_message.Message):
    __slots__ = ("handle", "principal", "conversation", "offset", "pattern", "context_lines", "path", "budget_tokens", "token_encoding")
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    PATTERN_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_LINES_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ENCODING_FIELD_NUMBER: _ClassVar[int]
    handle: str
    principal: str
    conversation: str
    offset: int
    pattern: str
    context_lines: int
    path: str
    budget_tokens: int
    token_encoding: str
    def __init__(self, handle: _Optional[str] = ..., principal: _Optional[str] = ..., conversation: _Optional[str] = ..., offset: _Optional[int] = ..., pattern: _Optional[str] = ..., context_lines: _Optional[int] = ..., path: _Optional[str] = ..., budget_tokens: _Optional[int] = ..., token_encoding: _Optional[str] = ...) -> None: ...

class ReadResultResponse(_message.Message):
    __slots__ = ("text", "tokens", "next_offset", "total_chars", "server", "tool")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_CHARS_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    text: str
    tokens: int
    next_offset: int
    total_chars: int
    server: str
    tool: str
    def __init__(self, text: _Optional[str] = ..., tokens: _Optional[int] = ..., next_offset: _Optional[int] = ..., total_chars: _Optional[int] = ..., server: _Optional[str] = ..., tool: _Optional[str] = ...) -> None: ...

class CallProgress(_message.Message):
    __slots__ = ("progress", "total", "has_total", "message")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    HAS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    progress: float
    total: float
    has_total: bool
    message: str
    def __init__(self, progress: _Optional[float] = ..., total: _Optional[float] = ..., has_total: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...

class CallToolEvent(_message.Message):
    __slots__ = ("progress", "result", "request", "log")
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    LOG_FIELD_NUMBER: _ClassVar[int]
    progress: CallProgress
    result: CallToolResponse
    request: RelayedRequest
    log: RelayedLog
    def __init__(self, progress: _Optional[_Union[CallProgress, _Mapping]] = ..., result: _Optional[_Union[CallToolResponse, _Mapping]] = ..., request: _Optional[_Union[RelayedRequest, _Mapping]] = ..., log: _Optional[_Union[RelayedLog, _Mapping]] = ...) -> None: ...

class CallToolRelayStart(_message.Message):
    __slots__ = ("call", "host_capabilities_json", "host_protocol_version")
    CALL_FIELD_NUMBER: _ClassVar[int]
    HOST_CAPABILITIES_JSON_FIELD_NUMBER: _ClassVar[int]
    HOST_PROTOCOL_VERSION_FIELD_NUMBER: _ClassVar[int]
    call: CallToolRequest
    host_capabilities_json: str
    host_protocol_version: str
    def __init__(self, call: _Optional[_Union[CallToolRequest, _Mapping]] = ..., host_capabilities_json: _Optional[str] = ..., host_protocol_version: _Optional[str] = ...) -> None: ...

class RelayedRequest(_message.Message):
    __slots__ = ("id", "method", "params_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    id: int
    method: str
    params_json: str
    def __init__(self, id: _Optional[int] = ..., method: _Optional[str] = ..., params_json: _Optional[str] = ...) -> None: ...

class RelayAnswer(_message.Message):
    __slots__ = ("id", "result_json", "error_code", "error_message")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    id: int
    result_json: str
    error_code: int
    error_message: str
    def __init__(self, id: _Optional[int] = ..., result_json: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class RelayedLog(_message.Message):
    __slots__ = ("level", "logger", "data_json")
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    LOGGER_FIELD_NUMBER: _ClassVar[int]
    DATA_JSON_FIELD_NUMBER: _ClassVar[int]
    level: str
    logger: str
    data_json: str
    def __init__(self, level: _Optional[str] = ..., logger: _Optional[str] = ..., data_json: _Optional[str] = ...) -> None: ...

class CallToolRelayRequest(_message.Message):
    __slots__ = ("start", "answer")
    START_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    start: CallToolRelayStart
    answer: RelayAnswer
    def __init__(self, start: _Optional[_Union[CallToolRelayStart, _Mapping]] = ..., answer: _Optional[_Union[RelayAnswer, _Mapping]] = ...) -> None: ...

class CallToolStreamRequest(_message.Message):
    __slots__ = ("id", "call", "deadline_seconds", "cancel")
    ID_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    id: int
    call: CallToolRequest
    deadline_seconds: float
    cancel: bool
    def __init__(self, id: _Optional[int] = ..., call: _Optional[_Union[CallToolRequest, _Mapping]] = ..., deadline_seconds: _Optional[float] = ..., cancel: _Optional[bool] = ...) -> None: ...

class CallToolStreamResponse(_message.Message):
    __slots__ = ("id", "result", "code", "details", "trailing_metadata")
    ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    TRAILING_METADATA_FIELD_NUMBER: _ClassVar[int]
    id: int
    result: CallToolResponse
    code: int
    details: str
    trailing_metadata: _containers.RepeatedCompositeFieldContainer[MetadataEntry]
    def __init__(self, id: _Optional[int] = ..., result: _Optional[_Union[CallToolResponse, _Mapping]] = ..., code: _Optional[int] = ..., details: _Optional[str] = ..., trailing_metadata: _Optional[_Iterable[_Union[MetadataEntry, _Mapping]]] = ...) -> None: ...

class MetadataEntry(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class WatchCatalogRequest(_message.Message):
    __slots__ = ("known_version",)
    KNOWN_VERSION_FIELD_NUMBER: _ClassVar[int]
    known_version: str
    def __init__(self, known_version: _Optional[str] = ...) -> None: ...

class WatchCatalogResponse(_message.Message):
    __slots__ = ("catalog_version", "tools", "changed_servers", "shard")
    CATALOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    CHANGED_SERVERS_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    catalog_version: str
    tools: _containers.RepeatedCompositeFieldContainer[_common_pb2.Tool]
    changed_servers: _containers.RepeatedScalarFieldContainer[str]
    shard: ShardInfo
    def __init__(self, catalog_version: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_common_pb2.Tool, _Mapping]]] = ..., changed_servers: _Optional[_Iterable[str]] = ..., shard: _Optional[_Union[ShardInfo, _Mapping]] = ...) -> None: ...

class ServerFeature(_message.Message):
    __slots__ = ("kind", "server", "own_name", "served_name", "definition_json", "qualified_name")
    KIND_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    OWN_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVED_NAME_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_JSON_FIELD_NUMBER: _ClassVar[int]
    QUALIFIED_NAME_FIELD_NUMBER: _ClassVar[int]
    kind: FeatureKind
    server: str
    own_name: str
    served_name: str
    definition_json: str
    qualified_name: str
    def __init__(self, kind: _Optional[_Union[FeatureKind, str]] = ..., server: _Optional[str] = ..., own_name: _Optional[str] = ..., served_name: _Optional[str] = ..., definition_json: _Optional[str] = ..., qualified_name: _Optional[str] = ...) -> None: ...

class ServerOffers(_message.Message):
    __slots__ = ("server", "resources", "subscribe", "prompts", "completions", "logging")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    COMPLETIONS_FIELD_NUMBER: _ClassVar[int]
    LOGGING_FIELD_NUMBER: _ClassVar[int]
    server: str
    resources: bool
    subscribe: bool
    prompts: bool
    completions: bool
    logging: bool
    def __init__(self, server: _Optional[str] = ..., resources: _Optional[bool] = ..., subscribe: _Optional[bool] = ..., prompts: _Optional[bool] = ..., completions: _Optional[bool] = ..., logging: _Optional[bool] = ...) -> None: ...

class ListFeaturesRequest(_message.Message):
    __slots__ = ("kind", "servers", "cursor", "page_size", "principal")
    KIND_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    kind: FeatureKind
    servers: _containers.RepeatedScalarFieldContainer[str]
    cursor: str
    page_size: int
    principal: str
    def __init__(self, kind: _Optional[_Union[FeatureKind, str]] = ..., servers: _Optional[_Iterable[str]] = ..., cursor: _Optional[str] = ..., page_size: _Optional[int] = ..., principal: _Optional[str] = ...) -> None: ...

class ListFeaturesResponse(_message.Message):
    __slots__ = ("features", "next_cursor", "features_version", "shard", "offers")
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    NEXT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    FEATURES_VERSION_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    OFFERS_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedCompositeFieldContainer[ServerFeature]
    next_cursor: str
    features_version: str
    shard: ShardInfo
    offers: _containers.RepeatedCompositeFieldContainer[ServerOffers]
    def __init__(self, features: _Optional[_Iterable[_Union[ServerFeature, _Mapping]]] = ..., next_cursor: _Optional[str] = ..., features_version: _Optional[str] = ..., shard: _Optional[_Union[ShardInfo, _Mapping]] = ..., offers: _Optional[_Iterable[_Union[ServerOffers, _Mapping]]] = ...) -> None: ...

class WatchFeaturesRequest(_message.Message):
    __slots__ = ("known_version",)
    KNOWN_VERSION_FIELD_NUMBER: _ClassVar[int]
    known_version: str
    def __init__(self, known_version: _Optional[str] = ...) -> None: ...

class WatchFeaturesResponse(_message.Message):
    __slots__ = ("features_version", "features", "offers", "changed_kinds", "shard")
    FEATURES_VERSION_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    OFFERS_FIELD_NUMBER: _ClassVar[int]
    CHANGED_KINDS_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    features_version: str
    features: _containers.RepeatedCompositeFieldContainer[ServerFeature]
    offers: _containers.RepeatedCompositeFieldContainer[ServerOffers]
    changed_kinds: _containers.RepeatedScalarFieldContainer[FeatureKind]
    shard: ShardInfo
    def __init__(self, features_version: _Optional[str] = ..., features: _Optional[_Iterable[_Union[ServerFeature, _Mapping]]] = ..., offers: _Optional[_Iterable[_Union[ServerOffers, _Mapping]]] = ..., changed_kinds: _Optional[_Iterable[_Union[FeatureKind, str]]] = ..., shard: _Optional[_Union[ShardInfo, _Mapping]] = ...) -> None: ...

class ReadResourceRequest(_message.Message):
    __slots__ = ("uri", "principal", "timeout_seconds", "accept_input_required", "input_responses_json", "request_state", "host_capabilities_json")
    URI_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_INPUT_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    INPUT_RESPONSES_JSON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_STATE_FIELD_NUMBER: _ClassVar[int]
    HOST_CAPABILITIES_JSON_FIELD_NUMBER: _ClassVar[int]
    uri: str
    principal: str
    timeout_seconds: float
    accept_input_required: bool
    input_responses_json: str
    request_state: str
    host_capabilities_json: str
    def __init__(self, uri: _Optional[str] = ..., principal: _Optional[str] = ..., timeout_seconds: _Optional[float] = ..., accept_input_required: _Optional[bool] = ..., input_responses_json: _Optional[str] = ..., request_state: _Optional[str] = ..., host_capabilities_json: _Optional[str] = ...) -> None: ...

class GetPromptRequest(_message.Message):
    __slots__ = ("name", "arguments_json", "principal", "timeout_seconds", "accept_input_required", "input_responses_json", "request_state", "host_capabilities_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ACCEPT_INPUT_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    INPUT_RESPONSES_JSON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_STATE_FIELD_NUMBER: _ClassVar[int]
    HOST_CAPABILITIES_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    arguments_json: str
    principal: str
    timeout_seconds: float
    accept_input_required: bool
    input_responses_json: str
    request_state: str
    host_capabilities_json: str
    def __init__(self, name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., principal: _Optional[str] = ..., timeout_seconds: _Optional[float] = ..., accept_input_required: _Optional[bool] = ..., input_responses_json: _Optional[str] = ..., request_state: _Optional[str] = ..., host_capabilities_json: _Optional[str] = ...) -> None: ...

class CompleteRequest(_message.Message):
    __slots__ = ("ref_kind", "ref", "argument_name", "argument_value", "context_arguments_json", "principal", "timeout_seconds")
    REF_KIND_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    ARGUMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENT_VALUE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ref_kind: FeatureKind
    ref: str
    argument_name: str
    argument_value: str
    context_arguments_json: str
    principal: str
    timeout_seconds: float
    def __init__(self, ref_kind: _Optional[_Union[FeatureKind, str]] = ..., ref: _Optional[str] = ..., argument_name: _Optional[str] = ..., argument_value: _Optional[str] = ..., context_arguments_json: _Optional[str] = ..., principal: _Optional[str] = ..., timeout_seconds: _Optional[float] = ...) -> None: ...

class FeatureReply(_message.Message):
    __slots__ = ("server", "result_json", "jsonrpc_error_code", "error_message", "input_required_json")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    JSONRPC_ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    INPUT_REQUIRED_JSON_FIELD_NUMBER: _ClassVar[int]
    server: str
    result_json: str
    jsonrpc_error_code: int
    error_message: str
    input_required_json: str
    def __init__(self, server: _Optional[str] = ..., result_json: _Optional[str] = ..., jsonrpc_error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., input_required_json: _Optional[str] = ...) -> None: ...

class SetLoggingLevelRequest(_message.Message):
    __slots__ = ("level", "servers")
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    level: str
    servers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, level: _Optional[str] = ..., servers: _Optional[_Iterable[str]] = ...) -> None: ...

class SetLoggingLevelResponse(_message.Message):
    __slots__ = ("servers",)
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, servers: _Optional[_Iterable[str]] = ...) -> None: ...

class WatchResourceRequest(_message.Message):
    __slots__ = ("uri", "principal")
    URI_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    uri: str
    principal: str
    def __init__(self, uri: _Optional[str] = ..., principal: _Optional[str] = ...) -> None: ...

class WatchResourceResponse(_message.Message):
    __slots__ = ("uri", "subscribed")
    URI_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_FIELD_NUMBER: _ClassVar[int]
    uri: str
    subscribed: bool
    def __init__(self, uri: _Optional[str] = ..., subscribed: _Optional[bool] = ...) -> None: ...
