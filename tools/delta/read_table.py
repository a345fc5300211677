"""Reads a Delta table with delta-rs (the `deltalake` package), not with
Weir, and prints what it sees as one JSON object: the table's version,
every row, and the newest txn version of each application id asked for.

    read_table.py TABLE_URI [APP_ID ...]

For an s3:// table, AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY come from the environment.
"""

import json
import os
import sys

from deltalake import DeltaTable


def storage_options():
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        return None
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": os.environ.get("AWS_REGION", "us-east-1"),
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true",
    }


def main():
    uri, apps = sys.argv[1], sys.argv[2:]
    table = DeltaTable(uri, storage_options=storage_options())
    rows = table.to_pyarrow_table().to_pylist()
    print(
        json.dumps(
            {
                "version": table.version(),
                "rows": rows,
                "txns": {app: table.transaction_version(app) for app in apps},
                "files": len(table.file_uris()),
            },
            # Decimals, timestamps and dates as their exact text.
            default=str,
        )
    )


if __name__ == "__main__":
    main()
    # deltalake's native threads can abort the interpreter's teardown
    # ("terminate called without an active exception") after all the work
    # is done and printed: leave without it.
    sys.stdout.flush()
    os._exit(0)
