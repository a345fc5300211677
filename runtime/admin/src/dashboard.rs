//! The live dashboard: one self-contained page (no scripts or fonts from
//! elsewhere, so it works on an air-gapped machine) that polls the admin
//! API every second and draws throughput and epoch durations against the
//! trigger interval, the backlog verdict, the operator version history and
//! the recent warnings and errors. The page holds no data itself, so it is
//! served without the token; its requests carry the token the user gives
//! it (`/dashboard#token=...`, kept in the tab's session storage).

use axum::http::header;
use axum::response::IntoResponse;

const PAGE: &str = include_str!("dashboard.html");

/// `GET /dashboard`.
pub async fn page() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            // Nothing but this page's own inline script and the API.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'",
            ),
        ],
        PAGE,
    )
}
