//! Weir's integration tests, built as one binary (one link of wasmtime,
//! RocksDB, librdkafka and postgres). Each module is one area; services
//! (Kafka, PostgreSQL, an S3-compatible store, Chromium) are real, started
//! by the tests on 127.0.0.1 and stopped afterwards (`weir-test-support`).
//! Shared helpers are in [`common`].
//!
//! A test that needs a service or a toolchain the repo's scripts install
//! is marked `#[ignore = "needs …"]`: a plain `cargo test` needs nothing
//! installed and lists those tests as ignored with what each needs;
//! `scripts/test.sh` runs them too, once the services are ready, and there
//! a missing service fails. Its first run, of the others, sets
//! `WEIR_TEST_HERMETIC`, under which a helper that starts a service fails
//! the test that called it (`weir_test_support::needs`).

// Tests send signals to `weir` processes and ask who they run as: libc.
#![allow(unsafe_code)]

mod common;

mod admin_security;
mod avro;
mod bad_input;
mod batch_parity;
mod cli;
mod cluster;
mod crash;
mod delta;
mod demo;
mod event_time;
mod faults;
mod hot_swap;
mod kafka;
mod kafka_avro;
mod kafka_protobuf;
mod kafka_tls;
mod lake;
mod lookup;
mod model;
mod object_store;
mod observe;
mod outputs;
mod parallel;
mod polyglot;
mod postgres;
mod postgres_tls;
mod python_sdk;
mod realtime;
mod replay;
mod s3_source;
mod sandbox;
mod scaffold;
mod secrets;
mod state;
mod streaming;
mod types;
mod window_kinds;
mod windows;
mod workers;
