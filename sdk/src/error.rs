use crate::bindings::weir::operator::types as wit;
use std::fmt;

/// Why an operator gave up. The host reports the message with the pipeline,
/// epoch and operator digest, so say what was wrong with which input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The configuration passed to `init` is unusable; the pipeline does not start.
    InvalidConfig(String),
    /// This batch could not be processed; the epoch fails and is retried on restart.
    Failed(String),
}

impl Error {
    /// A configuration error, returned from [`crate::Operator::init`].
    pub fn config(message: impl Into<String>) -> Self {
        Error::InvalidConfig(message.into())
    }

    /// A processing error, returned from [`crate::Operator::process`].
    pub fn failed(message: impl Into<String>) -> Self {
        Error::Failed(message.into())
    }

    pub(crate) fn into_wit(self) -> wit::OperatorError {
        match self {
            Error::InvalidConfig(m) => wit::OperatorError::InvalidConfig(m),
            Error::Failed(m) => wit::OperatorError::Failed(m),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InvalidConfig(m) => write!(f, "invalid config: {m}"),
            Error::Failed(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {}
