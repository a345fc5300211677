"""Writes and reads Avro with fastavro, an implementation independent of
the one Weir reads and writes with (arrow-avro), for the tests.

    write.py ocf SCHEMA_JSON RECORDS_JSONL OUT     an object container file
    write.py framed SCHEMA_JSON ID RECORDS_JSONL   one hex line per record:
                                                   0x00, the 4-byte big-endian
                                                   schema id, the body
    write.py read SCHEMA_JSON FRAMED_HEX           each framed value (one hex
                                                   line each) as a JSON line:
                                                   {"id": ID, "record": …}

Numbers with a fraction in the records are read as ``Decimal`` (for
decimal fields); timestamps are given as counts of their unit. Read back,
decimals are strings, timestamps Unix milliseconds, dates ISO strings and
bytes hex.
"""

import datetime
import io
import json
import sys
from decimal import Decimal

import fastavro

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def plain(value):
    """A value fastavro decoded, as JSON can hold it."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime.datetime):
        return (value - EPOCH) // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"cannot show {type(value)}")


def read(schema, path):
    with open(path) as f:
        for line in f:
            value = bytes.fromhex(line.strip())
            if value[0] != 0:
                sys.exit(f"not framed: {line}")
            frame_id = int.from_bytes(value[1:5], "big")
            record = fastavro.schemaless_reader(io.BytesIO(value[5:]), schema, None)
            print(json.dumps({"id": frame_id, "record": record}, default=plain))


def records(path):
    with open(path) as f:
        return [json.loads(line, parse_float=Decimal) for line in f if line.strip()]


def main():
    kind = sys.argv[1]
    schema = fastavro.parse_schema(json.loads(sys.argv[2]))
    if kind == "ocf":
        with open(sys.argv[4], "wb") as out:
            fastavro.writer(out, schema, records(sys.argv[3]))
    elif kind == "framed":
        frame_id = int(sys.argv[3])
        for record in records(sys.argv[4]):
            body = io.BytesIO()
            fastavro.schemaless_writer(body, schema, record)
            print((b"\x00" + frame_id.to_bytes(4, "big") + body.getvalue()).hex())
    elif kind == "read":
        read(schema, sys.argv[3])
    else:
        sys.exit(f"unknown kind {kind}")


main()
