#!/usr/bin/env bash
# Starts a local Kafka-compatible broker (tansu on 127.0.0.1:9092, its log in
# a SQLite file under a temp dir), creates the `payments` topic, feeds 100,000
# payments at 5,000/s and runs the pipeline until Ctrl-C. Needs
# scripts/install-tansu.sh once (the script runs it).
#
# Not tansu's in-memory storage: it reports a partition's high watermark a
# few records short of its log end, so a micro-batch run (which plans up to
# the watermark) would never score the last payments. The Kafka source warns
# when it finds records past a broker's reported end.
set -euo pipefail
cd "$(dirname "$0")"
root=../..
bash "$root/scripts/install-tansu.sh"
cargo build --release -q -p weir-cli --manifest-path "$root/Cargo.toml"
weir="$root/target/release/weir"
# The broker starts empty each time, so the last run's checkpoint (offsets
# into a topic that is gone) and alerts go too.
rm -rf checkpoint alerts broker.log
log_dir=$(mktemp -d)
# tansu takes the SQLite path relative to its working directory.
(cd "$log_dir" && exec tansu broker --listener-url tcp://127.0.0.1:9092 \
    --advertised-listener-url tcp://127.0.0.1:9092 --storage-engine sqlite://tansu.db) \
    >broker.log 2>&1 &
broker=$!
feeder=
trap 'kill $broker $feeder 2>/dev/null || true; wait $broker 2>/dev/null; rm -rf "$log_dir"' EXIT
for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/9092) 2>/dev/null && break
    sleep 0.1
done
tansu topic create payments --partitions 3 --broker tcp://127.0.0.1:9092
"$weir" feed --topic payments --payments 100000 --rate 5000 &
feeder=$!
"$weir" run pipeline.toml
