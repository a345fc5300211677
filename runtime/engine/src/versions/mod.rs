//! A version's life, in one place: an operator version is uploaded
//! ([`Control::upload`]), validated beside the pipeline ([`validate`]:
//! the world it implements, its imports, `init` with its config, golden
//! files), registered in the checkpoint's [`registry`] (or a cluster's
//! shared one) and then staged, run in shadow ([`shadow`]: fed the same
//! epochs, its output compared) or activated. Activation only changes what
//! the registry says new epochs run with; a version on probation that
//! fails an epoch its predecessor handles is rolled back automatically.
//! Compiled versions are kept once per process ([`cache`]) and every
//! version runs through the one [`runner`].
//!
//! The epoch loop sees all of it through [`Versions`] — what runs this
//! epoch, load and run a recorded version, epoch done, shadow done, fall
//! back and roll back, the audit trail — and takes up a swap only between
//! epochs, so `offsets/N` records the
//! version epoch N ran with and replay reads only that. The admin API and
//! `weir run --watch` drive the [`Control`] plane; how its errors become
//! HTTP responses is the admin API's business.

pub mod cache;
mod control;
pub mod registry;
pub mod runner;
mod running;
pub mod shadow;
mod start;
pub mod validate;

pub use control::{
    Control, DeployError, LastEpoch, Listed, Planned, ShadowStatus, Status, Then, Upload,
};
pub use running::{ActiveOperator, Loaded, Versions, VersionsSetup};
pub use start::ControlPlane;
