//! Empty: present so that the `[build-dependencies]` in `Cargo.toml`
//! (features for what build scripts and proc-macros link) take part in
//! feature resolution.
fn main() {}
