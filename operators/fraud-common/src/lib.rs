//! What the fraud operators share, as a library they depend on: the
//! configured rules and the columns they read (`fraud-rules` and every
//! operator built on it), the per-card velocity window over keyed state
//! (`fraud-velocity`, `fraud-model`), and the pieces of the windowed job
//! (`fraud-windows` and the benchmark's hand-buffered baseline). Nothing
//! here exports a component: each operator crate does that itself.
//!
//! An operator crate that uses this library should be `crate-type =
//! ["cdylib"]` alone: the guest profile's LTO then inlines this crate's
//! functions into the component. A crate that is also an `rlib` (for
//! native use, as `fraud-model`) is built without LTO, and only this
//! crate's `#[inline]` functions cross into it (measured: `fraud-rules`
//! as cdylib + rlib ran `process` 1.4x slower than with its rules in the
//! same crate; as cdylib alone, with LTO, it is as fast or faster).

pub mod columns;
pub mod rules;
pub mod velocity;
pub mod window;
pub mod windows_job;
pub mod windows_payload;
