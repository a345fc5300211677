"""Writes Avro with fastavro, an implementation independent of the one
Weir reads with (arrow-avro), for the tests.

    write.py ocf SCHEMA_JSON RECORDS_JSONL OUT     an object container file
    write.py framed SCHEMA_JSON ID RECORDS_JSONL   one hex line per record:
                                                   0x00, the 4-byte big-endian
                                                   schema id, the body

Numbers with a fraction in the records are read as ``Decimal`` (for
decimal fields); timestamps are given as counts of their unit.
"""

import io
import json
import sys
from decimal import Decimal

import fastavro


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
    else:
        sys.exit(f"unknown kind {kind}")


main()
