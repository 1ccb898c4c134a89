from trio_h2t.interop.protos import empty_pb2 as _empty_pb2
from trio_h2t.interop.protos import messages_pb2 as _messages_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
