from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PayloadType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMPRESSABLE: _ClassVar[PayloadType]
COMPRESSABLE: PayloadType

class BoolValue(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: bool
    def __init__(self, value: _Optional[bool] = ...) -> None: ...

class Payload(_message.Message):
    __slots__ = ("type", "body")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    type: PayloadType
    body: bytes
    def __init__(self, type: _Optional[_Union[PayloadType, str]] = ..., body: _Optional[bytes] = ...) -> None: ...

class EchoStatus(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class SimpleRequest(_message.Message):
    __slots__ = ("response_type", "response_size", "payload", "fill_username", "fill_oauth_scope", "response_compressed", "response_status", "expect_compressed", "fill_server_id", "fill_grpclb_route_type")
    RESPONSE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    FILL_USERNAME_FIELD_NUMBER: _ClassVar[int]
    FILL_OAUTH_SCOPE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_COMPRESSED_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_STATUS_FIELD_NUMBER: _ClassVar[int]
    EXPECT_COMPRESSED_FIELD_NUMBER: _ClassVar[int]
    FILL_SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    FILL_GRPCLB_ROUTE_TYPE_FIELD_NUMBER: _ClassVar[int]
    response_type: PayloadType
    response_size: int
    payload: Payload
    fill_username: bool
    fill_oauth_scope: bool
    response_compressed: BoolValue
    response_status: EchoStatus
    expect_compressed: BoolValue
    fill_server_id: bool
    fill_grpclb_route_type: bool
    def __init__(self, response_type: _Optional[_Union[PayloadType, str]] = ..., response_size: _Optional[int] = ..., payload: _Optional[_Union[Payload, _Mapping]] = ..., fill_username: _Optional[bool] = ..., fill_oauth_scope: _Optional[bool] = ..., response_compressed: _Optional[_Union[BoolValue, _Mapping]] = ..., response_status: _Optional[_Union[EchoStatus, _Mapping]] = ..., expect_compressed: _Optional[_Union[BoolValue, _Mapping]] = ..., fill_server_id: _Optional[bool] = ..., fill_grpclb_route_type: _Optional[bool] = ...) -> None: ...

class SimpleResponse(_message.Message):
    __slots__ = ("payload", "username", "oauth_scope", "server_id", "hostname")
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    OAUTH_SCOPE_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    payload: Payload
    username: str
    oauth_scope: str
    server_id: str
    hostname: str
    def __init__(self, payload: _Optional[_Union[Payload, _Mapping]] = ..., username: _Optional[str] = ..., oauth_scope: _Optional[str] = ..., server_id: _Optional[str] = ..., hostname: _Optional[str] = ...) -> None: ...

class StreamingInputCallRequest(_message.Message):
    __slots__ = ("payload", "expect_compressed")
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    EXPECT_COMPRESSED_FIELD_NUMBER: _ClassVar[int]
    payload: Payload
    expect_compressed: BoolValue
    def __init__(self, payload: _Optional[_Union[Payload, _Mapping]] = ..., expect_compressed: _Optional[_Union[BoolValue, _Mapping]] = ...) -> None: ...

class StreamingInputCallResponse(_message.Message):
    __slots__ = ("aggregated_payload_size",)
    AGGREGATED_PAYLOAD_SIZE_FIELD_NUMBER: _ClassVar[int]
    aggregated_payload_size: int
    def __init__(self, aggregated_payload_size: _Optional[int] = ...) -> None: ...

class ResponseParameters(_message.Message):
    __slots__ = ("size", "interval_us", "compressed")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_US_FIELD_NUMBER: _ClassVar[int]
    COMPRESSED_FIELD_NUMBER: _ClassVar[int]
    size: int
    interval_us: int
    compressed: BoolValue
    def __init__(self, size: _Optional[int] = ..., interval_us: _Optional[int] = ..., compressed: _Optional[_Union[BoolValue, _Mapping]] = ...) -> None: ...

class StreamingOutputCallRequest(_message.Message):
    __slots__ = ("response_type", "response_parameters", "payload", "response_status")
    RESPONSE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_STATUS_FIELD_NUMBER: _ClassVar[int]
    response_type: PayloadType
    response_parameters: _containers.RepeatedCompositeFieldContainer[ResponseParameters]
    payload: Payload
    response_status: EchoStatus
    def __init__(self, response_type: _Optional[_Union[PayloadType, str]] = ..., response_parameters: _Optional[_Iterable[_Union[ResponseParameters, _Mapping]]] = ..., payload: _Optional[_Union[Payload, _Mapping]] = ..., response_status: _Optional[_Union[EchoStatus, _Mapping]] = ...) -> None: ...

class StreamingOutputCallResponse(_message.Message):
    __slots__ = ("payload",)
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    payload: Payload
    def __init__(self, payload: _Optional[_Union[Payload, _Mapping]] = ...) -> None: ...
