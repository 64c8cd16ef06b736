from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class Tool(_message.Message):
    __slots__ = ("server", "name", "llm_name", "title", "description", "input_schema_json", "output_schema_json", "annotations_json", "available", "extra_json")
    SERVER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LLM_NAME_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_JSON_FIELD_NUMBER: _ClassVar[int]
    server: str
    name: str
    llm_name: str
    title: str
    description: str
    input_schema_json: str
    output_schema_json: str
    annotations_json: str
    available: bool
    extra_json: str
    def __init__(self, server: _Optional[str] = ..., name: _Optional[str] = ..., llm_name: _Optional[str] = ..., title: _Optional[str] = ..., description: _Optional[str] = ..., input_schema_json: _Optional[str] = ..., output_schema_json: _Optional[str] = ..., annotations_json: _Optional[str] = ..., available: _Optional[bool] = ..., extra_json: _Optional[str] = ...) -> None: ...

class ContentBlock(_message.Message):
    __slots__ = ("type", "text", "data", "mime_type", "uri", "name", "raw_json")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RAW_JSON_FIELD_NUMBER: _ClassVar[int]
    type: str
    text: str
    data: bytes
    mime_type: str
    uri: str
    name: str
    raw_json: str
    def __init__(self, type: _Optional[str] = ..., text: _Optional[str] = ..., data: _Optional[bytes] = ..., mime_type: _Optional[str] = ..., uri: _Optional[str] = ..., name: _Optional[str] = ..., raw_json: _Optional[str] = ...) -> None: ...

class TokenAccounting(_message.Message):
    __slots__ = ("all_definitions_tokens", "sent_tokens", "saved_tokens", "encoding", "estimate")
    ALL_DEFINITIONS_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SAVED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    all_definitions_tokens: int
    sent_tokens: int
    saved_tokens: int
    encoding: str
    estimate: bool
    def __init__(self, all_definitions_tokens: _Optional[int] = ..., sent_tokens: _Optional[int] = ..., saved_tokens: _Optional[int] = ..., encoding: _Optional[str] = ..., estimate: _Optional[bool] = ...) -> None: ...
