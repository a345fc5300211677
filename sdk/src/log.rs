//! Logging through the host, which tags every line with pipeline, epoch and
//! operator digest. Guests have no stdout of their own worth reading.

use crate::bindings::weir::operator::host::{self, Level};

/// Logs at debug level.
pub fn debug(message: &str) {
    host::log(Level::Debug, message);
}

/// Logs at info level.
pub fn info(message: &str) {
    host::log(Level::Info, message);
}

/// Logs at warn level.
pub fn warn(message: &str) {
    host::log(Level::Warn, message);
}

/// Logs at error level.
pub fn error(message: &str) {
    host::log(Level::Error, message);
}
