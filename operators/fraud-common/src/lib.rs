//! What the fraud operators share, as a library they depend on: the
//! configured rules and the columns they read (`fraud-rules` and every
//! operator built on it), the per-card velocity window over keyed state
//! (`fraud-velocity`, `fraud-model`), and the pieces of the windowed job
//! (`fraud-windows` and the benchmark's hand-buffered baseline). Nothing
//! here exports a component: each operator crate does that itself.

pub mod columns;
pub mod rules;
pub mod velocity;
pub mod window;
pub mod windows_job;
pub mod windows_payload;
