#!/usr/bin/env bash
# The lake example in one script: starts an S3-compatible server (s3s-fs)
# and PostgreSQL on 127.0.0.1, puts a day of payments into the bucket as
# hourly Parquet objects, runs S3 -> fraud-velocity -> PostgreSQL alerts +
# Delta scores, and reads both back (the scores with delta-rs, not Weir).
# Everything it starts is stopped when it ends; its files are in ./run/.
#
#   bash examples/lake/run.sh            # 24 hours x 2,000 payments
#   PAYMENTS=240000 bash examples/lake/run.sh
#   WEIR=target/debug/weir bash examples/lake/run.sh   # a weir already built
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
payments=${PAYMENTS:-48000}

bash "$root/scripts/install.sh" >/dev/null              # PostgreSQL server binaries
bash "$root/scripts/install-s3s.sh" >/dev/null          # s3s-fs
bash "$root/scripts/install-delta-reader.sh" >/dev/null # delta-rs's reader, pyarrow
if [ -n "${WEIR:-}" ]; then
    weir=$(cd "$(dirname "$WEIR")" && pwd)/$(basename "$WEIR")
else
    cargo build --release -q -p weir-cli --manifest-path "$root/Cargo.toml"
    weir="$root/target/release/weir"
fi
python="$root/target/tools/delta/bin/python"

run=${RUN_DIR:-$here/run}
rm -rf "$run" && mkdir -p "$run/s3/lake"
free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# --- the services -----------------------------------------------------------
export AWS_ACCESS_KEY_ID=lake-example AWS_SECRET_ACCESS_KEY=lake-example-secret AWS_REGION=us-east-1
s3_port=$(free_port)
"${CARGO_HOME:-$HOME/.cargo}/bin/s3s-fs" --host 127.0.0.1 --port "$s3_port" \
    --access-key "$AWS_ACCESS_KEY_ID" --secret-key "$AWS_SECRET_ACCESS_KEY" "$run/s3" \
    >"$run/s3s.log" 2>&1 &
s3_pid=$!
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$pg_bin/initdb" ] || pg_bin=$(dirname "$(command -v initdb)")
pg_port=$(free_port)
as_pg=()
if [ "$(id -u)" -eq 0 ]; then as_pg=(runuser -u postgres --); chown postgres "$run"; fi
mkdir -p "$run/pg" && [ ${#as_pg[@]} -eq 0 ] || chown postgres "$run/pg"
export PGPASSWORD=lake-example
echo "$PGPASSWORD" >"$run/pg/pwfile"
"${as_pg[@]}" "$pg_bin/initdb" -D "$run/pg/data" -U weir --pwfile "$run/pg/pwfile" \
    --auth-host=scram-sha-256 --auth-local=trust -E UTF8 --no-sync >/dev/null
"${as_pg[@]}" "$pg_bin/pg_ctl" -D "$run/pg/data" -l "$run/pg/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $pg_port -c unix_socket_directories=$run/pg" start >/dev/null
stop() {
    "${as_pg[@]}" "$pg_bin/pg_ctl" -D "$run/pg/data" -m fast stop >/dev/null 2>&1 || true
    kill "$s3_pid" 2>/dev/null || true
}
trap stop EXIT
echo "s3s-fs on 127.0.0.1:$s3_port, PostgreSQL on 127.0.0.1:$pg_port"

# --- a day of payments, as the batch job's input -----------------------------
# `weir demo` generates them (with planted fraud) as 24 JSON-lines files;
# pyarrow turns each into an hourly Parquet object in the bucket.
WEIR_LOG=warn "$weir" demo --payments "$payments" --files 24 --dir "$run/day" >/dev/null
S3="http://127.0.0.1:$s3_port" DAY="$run/day/input" "$python" - <<'PY'
import os, sys
import pyarrow.json as pj, pyarrow.parquet as pq, pyarrow.fs as fs
s3 = fs.S3FileSystem(endpoint_override=os.environ["S3"], scheme="http",
                     access_key=os.environ["AWS_ACCESS_KEY_ID"],
                     secret_key=os.environ["AWS_SECRET_ACCESS_KEY"], region="us-east-1")
day = os.environ["DAY"]
for hour, name in enumerate(sorted(os.listdir(day))):
    table = pj.read_json(os.path.join(day, name))
    key = f"lake/payments/day=2026-12-01/hour={hour:02}/part-0.parquet"
    pq.write_table(table, key, filesystem=s3)
s3.create_dir("lake/_SUCCESS_markers_are_ignored")
print(f"{hour + 1} hourly Parquet objects in s3://lake/payments/day=2026-12-01/")
sys.stdout.flush(); os._exit(0)
PY

# --- the pipeline --------------------------------------------------------------
# The bundled operator, as `weir demo` wrote it beside the payments.
cp "$run/day/fraud_velocity.wasm" "$run/"
export WEIR_POSTGRES_URL="postgresql://weir:$PGPASSWORD@127.0.0.1:$pg_port/postgres"
sed -e "s|@S3@|http://127.0.0.1:$s3_port|g" "$here/pipeline.toml" >"$run/pipeline.toml"
(cd "$run" && WEIR_LOG=${WEIR_LOG:-warn} "$weir" run pipeline.toml)

# --- what landed ---------------------------------------------------------------
alerts=$("$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U weir -d postgres -Atc \
    "SELECT count(*) || ' alerts (' || count(DISTINCT txn_id) || ' distinct) in PostgreSQL table alerts' FROM alerts")
echo "$alerts"
AWS_ENDPOINT_URL="http://127.0.0.1:$s3_port" "$python" "$root/tools/delta/read_table.py" s3://lake/scores \
    >"$run/scores.json"
"$python" - "$run/scores.json" <<'PY'
import json, sys
table = json.load(open(sys.argv[1]))
rows = table["rows"]
distinct = len({r["txn_id"] for r in rows})
alerts = sum(1 for r in rows if r["alert"])
print(f"{len(rows)} scores ({distinct} distinct, {alerts} marked as alerts) in Delta table "
      f"s3://lake/scores, version {table['version']}, read with delta-rs")
PY
