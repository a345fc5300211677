//! Recent warnings and errors, for the dashboard: a `tracing` layer that
//! keeps the last [`KEPT`] events at WARN or ERROR (message and fields) and
//! counts them for `/metrics`. The log itself still goes to stderr; this
//! only saves an on-call engineer from grepping it.

use super::metrics::{LevelLabel, LOG_EVENTS};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Mutex;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// Events kept.
pub const KEPT: usize = 100;

/// One logged warning or error.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogEvent {
    pub at_ms: i64,
    /// `warn` or `error`.
    pub level: String,
    pub target: String,
    /// The message, then `field=value` for each field.
    pub message: String,
}

static RECENT: Mutex<VecDeque<LogEvent>> = Mutex::new(VecDeque::new());

/// The kept events, oldest first.
pub fn events() -> Vec<LogEvent> {
    RECENT
        .lock()
        .map(|r| r.iter().cloned().collect())
        .unwrap_or_default()
}

/// The layer to add to the process's subscriber.
pub fn layer<S: Subscriber>() -> impl Layer<S> {
    RecentLayer
}

struct RecentLayer;

#[derive(Default)]
struct Text {
    message: String,
    fields: String,
}

impl Visit for Text {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.message, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

impl<S: Subscriber> Layer<S> for RecentLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warn",
            _ => return,
        };
        LOG_EVENTS.get_or_create(&LevelLabel { level }).inc();
        let mut text = Text::default();
        event.record(&mut text);
        let entry = LogEvent {
            at_ms: weir_core::clock::now_ms(),
            level: level.into(),
            target: event.metadata().target().to_string(),
            message: format!("{}{}", text.message, text.fields),
        };
        if let Ok(mut recent) = RECENT.lock() {
            recent.push_back(entry);
            while recent.len() > KEPT {
                recent.pop_front();
            }
        }
    }
}
