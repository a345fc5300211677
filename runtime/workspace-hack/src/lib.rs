//! No code: this crate exists for its `Cargo.toml`, which turns on the
//! features of weir-cli's dependencies that the rest of the workspace turns
//! on, so that building weir-cli alone and building the workspace share one
//! compile of each dependency. `scripts/check-features.sh` keeps it true.
