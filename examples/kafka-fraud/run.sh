#!/usr/bin/env bash
# Starts a local Kafka-compatible broker (tansu, in memory, 127.0.0.1:9092),
# creates the `payments` topic, feeds 100,000 payments at 5,000/s and runs the
# pipeline until Ctrl-C. Needs scripts/install-tansu.sh once.
set -euo pipefail
cd "$(dirname "$0")"
root=../..
bash "$root/scripts/install-tansu.sh"
cargo build --release -q -p weir-cli --manifest-path "$root/Cargo.toml"
weir="$root/target/release/weir"
tansu broker --listener-url tcp://127.0.0.1:9092 --advertised-listener-url tcp://127.0.0.1:9092 \
    --storage-engine memory://tansu/ > broker.log 2>&1 &
broker=$!
trap 'kill $broker $feeder 2>/dev/null || true' EXIT
sleep 1
tansu topic create payments --partitions 3 --broker tcp://127.0.0.1:9092
"$weir" feed --topic payments --payments 100000 --rate 5000 &
feeder=$!
"$weir" run pipeline.toml
