from toolscout.common.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ToolSurface(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOOL_SURFACE_UNSPECIFIED: _ClassVar[ToolSurface]
    TOOL_SURFACE_APPEND: _ClassVar[ToolSurface]
    TOOL_SURFACE_STABLE: _ClassVar[ToolSurface]

class ManifestPlacement(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MANIFEST_PLACEMENT_UNSPECIFIED: _ClassVar[ManifestPlacement]
    MANIFEST_PLACEMENT_TOOL_DESCRIPTION: _ClassVar[ManifestPlacement]
    MANIFEST_PLACEMENT_SYSTEM_MESSAGE: _ClassVar[ManifestPlacement]

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_TOOL_NAMES: _ClassVar[SearchMode]
    SEARCH_MODE_SERVER: _ClassVar[SearchMode]
    SEARCH_MODE_SERVER_QUERY: _ClassVar[SearchMode]
    SEARCH_MODE_QUERY: _ClassVar[SearchMode]
TOOL_SURFACE_UNSPECIFIED: ToolSurface
TOOL_SURFACE_APPEND: ToolSurface
TOOL_SURFACE_STABLE: ToolSurface
MANIFEST_PLACEMENT_UNSPECIFIED: ManifestPlacement
MANIFEST_PLACEMENT_TOOL_DESCRIPTION: ManifestPlacement
MANIFEST_PLACEMENT_SYSTEM_MESSAGE: ManifestPlacement
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_TOOL_NAMES: SearchMode
SEARCH_MODE_SERVER: SearchMode
SEARCH_MODE_SERVER_QUERY: SearchMode
SEARCH_MODE_QUERY: SearchMode

class PlanToolsRequest(_message.Message):
    __slots__ = ("toolset", "discovered_tools", "provider", "include_deferred_names", "include_deferred_tools", "toolset_json", "surface", "principal")
    TOOLSET_FIELD_NUMBER: _ClassVar[int]
    DISCOVERED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DEFERRED_NAMES_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DEFERRED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOLSET_JSON_FIELD_NUMBER: _ClassVar[int]
    SURFACE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    toolset: str
    discovered_tools: _containers.RepeatedScalarFieldContainer[str]
    provider: str
    include_deferred_names: bool
    include_deferred_tools: bool
    toolset_json: str
    surface: ToolSurface
    principal: str
    def __init__(self, toolset: _Optional[str] = ..., discovered_tools: _Optional[_Iterable[str]] = ..., provider: _Optional[str] = ..., include_deferred_names: _Optional[bool] = ..., include_deferred_tools: _Optional[bool] = ..., toolset_json: _Optional[str] = ..., surface: _Optional[_Union[ToolSurface, str]] = ..., principal: _Optional[str] = ...) -> None: ...

class PlanToolsResponse(_message.Message):
    __slots__ = ("loaded_tools", "has_search_tool", "search_tool", "manifest", "manifest_placement", "manifest_system_message", "total_tools", "loaded_count", "deferred_count", "catalog_version", "tokens", "deferred_tool_names", "dropped_tools", "discovered_tools", "deferred_tools", "call_tool", "surface", "read_result_tool", "read_result_tokens", "found_tools")
    LOADED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    HAS_SEARCH_TOOL_FIELD_NUMBER: _ClassVar[int]
    SEARCH_TOOL_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_SYSTEM_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOOLS_FIELD_NUMBER: _ClassVar[int]
    LOADED_COUNT_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_COUNT_FIELD_NUMBER: _ClassVar[int]
    CATALOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_TOOL_NAMES_FIELD_NUMBER: _ClassVar[int]
    DROPPED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    DISCOVERED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    CALL_TOOL_FIELD_NUMBER: _ClassVar[int]
    SURFACE_FIELD_NUMBER: _ClassVar[int]
    READ_RESULT_TOOL_FIELD_NUMBER: _ClassVar[int]
    READ_RESULT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    FOUND_TOOLS_FIELD_NUMBER: _ClassVar[int]
    loaded_tools: _containers.RepeatedCompositeFieldContainer[_common_pb2.Tool]
    has_search_tool: bool
    search_tool: _common_pb2.Tool
    manifest: str
    manifest_placement: ManifestPlacement
    manifest_system_message: str
    total_tools: int
    loaded_count: int
    deferred_count: int
    catalog_version: str
    tokens: _common_pb2.TokenAccounting
    deferred_tool_names: _containers.RepeatedScalarFieldContainer[str]
    dropped_tools: _containers.RepeatedScalarFieldContainer[str]
    discovered_tools: _containers.RepeatedScalarFieldContainer[str]
    deferred_tools: _containers.RepeatedCompositeFieldContainer[_common_pb2.Tool]
    call_tool: _common_pb2.Tool
    surface: ToolSurface
    read_result_tool: _common_pb2.Tool
    read_result_tokens: int
    found_tools: _containers.RepeatedCompositeFieldContainer[_common_pb2.Tool]
    def __init__(self, loaded_tools: _Optional[_Iterable[_Union[_common_pb2.Tool, _Mapping]]] = ..., has_search_tool: _Optional[bool] = ..., search_tool: _Optional[_Union[_common_pb2.Tool, _Mapping]] = ..., manifest: _Optional[str] = ..., manifest_placement: _Optional[_Union[ManifestPlacement, str]] = ..., manifest_system_message: _Optional[str] = ..., total_tools: _Optional[int] = ..., loaded_count: _Optional[int] = ..., deferred_count: _Optional[int] = ..., catalog_version: _Optional[str] = ..., tokens: _Optional[_Union[_common_pb2.TokenAccounting, _Mapping]] = ..., deferred_tool_names: _Optional[_Iterable[str]] = ..., dropped_tools: _Optional[_Iterable[str]] = ..., discovered_tools: _Optional[_Iterable[str]] = ..., deferred_tools: _Optional[_Iterable[_Union[_common_pb2.Tool, _Mapping]]] = ..., call_tool: _Optional[_Union[_common_pb2.Tool, _Mapping]] = ..., surface: _Optional[_Union[ToolSurface, str]] = ..., read_result_tool: _Optional[_Union[_common_pb2.Tool, _Mapping]] = ..., read_result_tokens: _Optional[int] = ..., found_tools: _Optional[_Iterable[_Union[_common_pb2.Tool, _Mapping]]] = ...) -> None: ...

class SearchToolsRequest(_message.Message):
    __slots__ = ("toolset", "query", "server_name", "tool_names", "arguments_json", "loaded_tools", "max_results", "offset", "include_plan", "discovered_tools", "provider", "compact_text", "toolset_json", "surface", "principal")
    TOOLSET_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAMES_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    LOADED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    MAX_RESULTS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PLAN_FIELD_NUMBER: _ClassVar[int]
    DISCOVERED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    COMPACT_TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOLSET_JSON_FIELD_NUMBER: _ClassVar[int]
    SURFACE_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    toolset: str
    query: str
    server_name: str
    tool_names: _containers.RepeatedScalarFieldContainer[str]
    arguments_json: str
    loaded_tools: _containers.RepeatedScalarFieldContainer[str]
    max_results: int
    offset: int
    include_plan: bool
    discovered_tools: _containers.RepeatedScalarFieldContainer[str]
    provider: str
    compact_text: bool
    toolset_json: str
    surface: ToolSurface
    principal: str
    def __init__(self, toolset: _Optional[str] = ..., query: _Optional[str] = ..., server_name: _Optional[str] = ..., tool_names: _Optional[_Iterable[str]] = ..., arguments_json: _Optional[str] = ..., loaded_tools: _Optional[_Iterable[str]] = ..., max_results: _Optional[int] = ..., offset: _Optional[int] = ..., include_plan: _Optional[bool] = ..., discovered_tools: _Optional[_Iterable[str]] = ..., provider: _Optional[str] = ..., compact_text: _Optional[bool] = ..., toolset_json: _Optional[str] = ..., surface: _Optional[_Union[ToolSurface, str]] = ..., principal: _Optional[str] = ...) -> None: ...

class ToolMatch(_message.Message):
    __slots__ = ("tool", "already_loaded", "score", "bm25_score", "similarity", "exact_name")
    TOOL_FIELD_NUMBER: _ClassVar[int]
    ALREADY_LOADED_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    BM25_SCORE_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_FIELD_NUMBER: _ClassVar[int]
    EXACT_NAME_FIELD_NUMBER: _ClassVar[int]
    tool: _common_pb2.Tool
    already_loaded: bool
    score: float
    bm25_score: float
    similarity: float
    exact_name: bool
    def __init__(self, tool: _Optional[_Union[_common_pb2.Tool, _Mapping]] = ..., already_loaded: _Optional[bool] = ..., score: _Optional[float] = ..., bm25_score: _Optional[float] = ..., similarity: _Optional[float] = ..., exact_name: _Optional[bool] = ...) -> None: ...

class SearchToolsResponse(_message.Message):
    __slots__ = ("mode", "matches", "newly_loaded", "result_text", "not_found", "total_matches", "plan", "catalog_version", "structured_content_json", "ranking")
    MODE_FIELD_NUMBER: _ClassVar[int]
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    NEWLY_LOADED_FIELD_NUMBER: _ClassVar[int]
    RESULT_TEXT_FIELD_NUMBER: _ClassVar[int]
    NOT_FOUND_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MATCHES_FIELD_NUMBER: _ClassVar[int]
    PLAN_FIELD_NUMBER: _ClassVar[int]
    CATALOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_CONTENT_JSON_FIELD_NUMBER: _ClassVar[int]
    RANKING_FIELD_NUMBER: _ClassVar[int]
    mode: SearchMode
    matches: _containers.RepeatedCompositeFieldContainer[ToolMatch]
    newly_loaded: _containers.RepeatedCompositeFieldContainer[_common_pb2.Tool]
    result_text: str
    not_found: _containers.RepeatedCompositeFieldContainer[NameSuggestion]
    total_matches: int
    plan: PlanToolsResponse
    catalog_version: str
    structured_content_json: str
    ranking: str
    def __init__(self, mode: _Optional[_Union[SearchMode, str]] = ..., matches: _Optional[_Iterable[_Union[ToolMatch, _Mapping]]] = ..., newly_loaded: _Optional[_Iterable[_Union[_common_pb2.Tool, _Mapping]]] = ..., result_text: _Optional[str] = ..., not_found: _Optional[_Iterable[_Union[NameSuggestion, _Mapping]]] = ..., total_matches: _Optional[int] = ..., plan: _Optional[_Union[PlanToolsResponse, _Mapping]] = ..., catalog_version: _Optional[str] = ..., structured_content_json: _Optional[str] = ..., ranking: _Optional[str] = ...) -> None: ...

class NameSuggestion(_message.Message):
    __slots__ = ("name", "closest")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CLOSEST_FIELD_NUMBER: _ClassVar[int]
    name: str
    closest: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., closest: _Optional[_Iterable[str]] = ...) -> None: ...

class GetManifestRequest(_message.Message):
    __slots__ = ("toolset", "provider", "toolset_json")
    TOOLSET_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    TOOLSET_JSON_FIELD_NUMBER: _ClassVar[int]
    toolset: str
    provider: str
    toolset_json: str
    def __init__(self, toolset: _Optional[str] = ..., provider: _Optional[str] = ..., toolset_json: _Optional[str] = ...) -> None: ...

class GetManifestResponse(_message.Message):
    __slots__ = ("manifest", "tokens", "budget_tokens", "deferred_servers", "deferred_tools", "catalog_version", "servers", "encoding", "estimate")
    MANIFEST_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_SERVERS_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    CATALOG_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    manifest: str
    tokens: int
    budget_tokens: int
    deferred_servers: int
    deferred_tools: int
    catalog_version: str
    servers: _containers.RepeatedCompositeFieldContainer[ServerTokens]
    encoding: str
    estimate: bool
    def __init__(self, manifest: _Optional[str] = ..., tokens: _Optional[int] = ..., budget_tokens: _Optional[int] = ..., deferred_servers: _Optional[int] = ..., deferred_tools: _Optional[int] = ..., catalog_version: _Optional[str] = ..., servers: _Optional[_Iterable[_Union[ServerTokens, _Mapping]]] = ..., encoding: _Optional[str] = ..., estimate: _Optional[bool] = ...) -> None: ...

class WatchPlanRequest(_message.Message):
    __slots__ = ("plan", "known_version")
    PLAN_FIELD_NUMBER: _ClassVar[int]
    KNOWN_VERSION_FIELD_NUMBER: _ClassVar[int]
    plan: PlanToolsRequest
    known_version: str
    def __init__(self, plan: _Optional[_Union[PlanToolsRequest, _Mapping]] = ..., known_version: _Optional[str] = ...) -> None: ...

class WatchPlanResponse(_message.Message):
    __slots__ = ("plan",)
    PLAN_FIELD_NUMBER: _ClassVar[int]
    plan: PlanToolsResponse
    def __init__(self, plan: _Optional[_Union[PlanToolsResponse, _Mapping]] = ...) -> None: ...

class ServerTokens(_message.Message):
    __slots__ = ("server", "tools", "deferred_tools", "all_tokens", "loaded_tokens")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    ALL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LOADED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    server: str
    tools: int
    deferred_tools: int
    all_tokens: int
    loaded_tokens: int
    def __init__(self, server: _Optional[str] = ..., tools: _Optional[int] = ..., deferred_tools: _Optional[int] = ..., all_tokens: _Optional[int] = ..., loaded_tokens: _Optional[int] = ...) -> None: ...
