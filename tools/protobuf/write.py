"""Compiles .proto files and encodes Protobuf messages with Google's own
implementation (protoc from grpcio-tools, the protobuf runtime), which is
independent of the one Weir reads with (prost-reflect), for the tests.

    write.py desc PROTO_DIR PROTO OUT            a descriptor set, imports
                                                 included (protoc
                                                 --descriptor_set_out)
    write.py encode DESC MESSAGE RECORDS_JSONL   one hex line per record: the
                                                 record (protobuf's JSON
                                                 mapping) as MESSAGE's bytes
"""

import json
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory
from grpc_tools import protoc
import grpc_tools


def descriptor_set(proto_dir, proto, out):
    include = grpc_tools.__path__[0] + "/_proto"
    status = protoc.main(
        [
            "protoc",
            f"-I{proto_dir}",
            f"-I{include}",
            "--include_imports",
            f"--descriptor_set_out={out}",
            proto,
        ]
    )
    if status != 0:
        sys.exit(f"protoc failed with status {status}")


def encode(desc_path, message, records_path):
    files = descriptor_pb2.FileDescriptorSet()
    with open(desc_path, "rb") as f:
        files.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(message))
    with open(records_path) as f:
        for line in f:
            if line.strip():
                msg = json_format.ParseDict(json.loads(line), cls())
                print(msg.SerializeToString().hex())


def main():
    if sys.argv[1] == "desc":
        descriptor_set(*sys.argv[2:5])
    elif sys.argv[1] == "encode":
        encode(*sys.argv[2:5])
    else:
        sys.exit(f"unknown command {sys.argv[1]}")


main()
