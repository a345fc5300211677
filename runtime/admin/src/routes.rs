//! Routes of the admin API. Every answer is JSON; every refusal is
//! `{"error": "..."}` with a status saying whose fault it was.
//!
//! Each request but `/v1/health` and the dashboard's page needs a token
//! (when the API has any) whose scope covers it ([`required_scope`]):
//! GET needs `read`; POST and DELETE need `deploy`, a rollback `admin`.
//! A missing or wrong token is 401, a token without the scope 403 naming
//! the scope, and a client that keeps failing is answered 429 for a while
//! ([`crate::backoff`]).
//!
//! | method | path | does |
//! |---|---|---|
//! | GET | `/v1/health` | liveness, no token needed |
//! | GET | `/v1/pipelines/{name}` | status: active version, shadow totals, last epoch |
//! | GET | `/v1/pipelines/{name}/versions` | every registered version |
//! | POST | `/v1/pipelines/{name}/versions?then=stage\|activate\|shadow&key=COL` | upload (multipart: `component`, optional `config`, `label`, `golden_input`, `golden_output`) |
//! | POST | `/v1/pipelines/{name}/versions/{n}/activate` | run version n from the next epoch |
//! | POST | `/v1/pipelines/{name}/rollback?to=N` | back to the previous (or given) version |
//! | GET | `/v1/pipelines/{name}/shadow?after=EPOCH` | per-epoch shadow reports |
//! | POST | `/v1/pipelines/{name}/shadow/promote` | make the shadow version active |
//! | DELETE | `/v1/pipelines/{name}/shadow` | stop the shadow run |
//! | GET | `/v1/pipelines/{name}/progress?after=EPOCH&limit=N` | per-epoch progress records, backlog verdict, source lag, recent errors |
//! | GET | `/v1/pipelines/{name}/history` | the audit trail: deploys, activations, rollbacks, shadows, promotions, lookup refresh failures, each with who, from where and the digests |
//! | GET | `/v1/pipelines` | the pipeline this API serves, as a one-name list |
//! | GET | `/v1/whoami` | the token's name and scope |
//! | GET | `/metrics` | Prometheus text format |
//! | GET | `/` (`/dashboard`) | the live dashboard (static page; it asks for the token, if one is set) |

use super::AdminSettings;
use crate::backoff::Backoff;
use crate::serve::ClientAddr;
use crate::tokens::{Caller, Refusal, Scope, Tokens};
use axum::extract::{DefaultBodyLimit, Multipart, Path, Query, Request, State};
use axum::http::Method;
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Extension;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use weir_engine::observe::Observe;
use weir_engine::versions::registry::{Actor, Origin};
use weir_engine::versions::validate::Golden;
use weir_engine::versions::{Control, DeployError, Then, Upload};
use weir_upload_form::{FormParts, UploadForm};

#[derive(Clone)]
struct App {
    control: Arc<Control>,
    telemetry: Arc<dyn Observe>,
    tokens: Arc<Tokens>,
    backoff: Arc<Backoff>,
    max_upload: usize,
    /// One permit per upload being read and validated (`admin.max_concurrent_uploads`).
    uploads: Arc<tokio::sync::Semaphore>,
    request_timeout: std::time::Duration,
}

/// An error answer: status plus `{"error": message}`.
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({ "error": self.1 }))).into_response()
    }
}

impl From<DeployError> for ApiError {
    fn from(e: DeployError) -> Self {
        let status = match &e {
            DeployError::Refused(_) => StatusCode::UNPROCESSABLE_ENTITY,
            DeployError::BadRequest(_) => StatusCode::BAD_REQUEST,
            DeployError::NotFound(_) => StatusCode::NOT_FOUND,
            DeployError::Conflict(_) => StatusCode::CONFLICT,
            DeployError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!("admin API: {e}");
        }
        ApiError(status, e.to_string())
    }
}

type ApiResult<T> = Result<T, ApiError>;

pub(super) fn router(
    control: Arc<Control>,
    telemetry: Arc<dyn Observe>,
    tokens: Arc<Tokens>,
    settings: &AdminSettings,
) -> Router {
    let app = App {
        control,
        telemetry,
        tokens,
        backoff: Arc::new(Backoff::new(settings.backoff)),
        max_upload: settings.max_upload,
        uploads: Arc::new(tokio::sync::Semaphore::new(settings.max_concurrent_uploads)),
        request_timeout: settings.connections.request_timeout,
    };
    let pipeline = Router::new()
        .route("/", get(status))
        .route(
            "/versions",
            get(versions)
                .post(upload)
                .layer(DefaultBodyLimit::max(settings.max_upload)),
        )
        .route("/versions/{n}/activate", post(activate))
        .route("/rollback", post(rollback))
        .route("/shadow", get(shadow_reports).delete(unshadow))
        .route("/shadow/promote", post(promote))
        .route("/progress", get(progress))
        .route("/history", get(history))
        .layer(middleware::from_fn_with_state(app.clone(), authorise))
        .with_state(app.clone());
    let metrics = Router::new()
        .route("/metrics", get(metrics))
        .route("/v1/pipelines", get(pipelines))
        .route("/v1/whoami", get(whoami))
        .layer(middleware::from_fn_with_state(app.clone(), authorise_token))
        .with_state(app.clone());
    Router::new()
        .route(
            "/v1/health",
            get(|| async { Json(serde_json::json!({"status": "ok"})) }),
        )
        .route(
            "/",
            get(|| async { axum::response::Redirect::to("/dashboard") }),
        )
        .route("/dashboard", get(super::dashboard::page))
        .merge(metrics)
        .nest("/v1/pipelines/{name}", pipeline)
        .fallback(|| async {
            ApiError(
                StatusCode::NOT_FOUND,
                "no such endpoint; see `weir --help` or docs/deploy.md, \"The admin API\"".into(),
            )
        })
        .layer(middleware::from_fn_with_state(app, time_limit))
}

/// Answers 408 when a request (reading its body included) takes longer
/// than `admin.request_timeout`.
async fn time_limit(State(app): State<App>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(app.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request took longer than `admin.request_timeout` = {}",
                humantime::format_duration(app.request_timeout)
            ),
        )
        .into_response(),
    }
}

/// Checks the token, its scope and the pipeline name.
async fn authorise(
    State(app): State<App>,
    Path(params): Path<Vec<(String, String)>>,
    mut request: Request,
    next: Next,
) -> Response {
    let checked = check_caller(&app, &request).and_then(|caller| {
        check_pipeline(&app, &params).map_err(Denied::Refused)?;
        Ok(caller)
    });
    match checked {
        Ok(caller) => {
            let client = request.extensions().get::<ClientAddr>().map(|c| c.0);
            let actor = Actor {
                name: caller.name,
                client: client.map(|c| c.to_string()),
            };
            request.extensions_mut().insert(actor);
            next.run(request).await
        }
        Err(denied) => denied.response(),
    }
}

/// Checks the token and its scope, for routes outside a pipeline's path.
async fn authorise_token(State(app): State<App>, mut request: Request, next: Next) -> Response {
    match check_caller(&app, &request) {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(denied) => denied.response(),
    }
}

/// The token's name and scope (any valid token may ask).
async fn whoami(Extension(caller): Extension<Caller>) -> impl IntoResponse {
    Json(serde_json::json!({"name": caller.name, "scope": caller.scope.as_str()}))
}

/// A refused request is answered from its headers alone and its
/// connection closed: its body is never read, so a client without the
/// token cannot hold a connection (one of `admin.max_connections`) by
/// sending a body slowly.
fn refused(refusal: ApiError) -> Response {
    let mut response = refusal.into_response();
    response.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    response
}

/// A request not let through.
enum Denied {
    /// Refused for what it is (no token, a wrong one, too little scope,
    /// another pipeline).
    Refused(ApiError),
    /// Its client must wait this long after too many wrong tokens.
    Throttled(std::time::Duration),
}

impl Denied {
    /// The answer: the refusal, or 429 with `Retry-After`.
    fn response(self) -> Response {
        match self {
            Denied::Refused(e) => refused(e),
            Denied::Throttled(wait) => {
                let seconds = wait.as_secs() + 1;
                let mut response = refused(ApiError(
                    StatusCode::TOO_MANY_REQUESTS,
                    format!("too many wrong tokens from this address; try again in {seconds} s"),
                ));
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, header::HeaderValue::from(seconds));
                response
            }
        }
    }
}

fn check_pipeline(app: &App, params: &[(String, String)]) -> ApiResult<()> {
    let name = params
        .iter()
        .find(|(k, _)| k == "name")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    if name != app.control.pipeline() {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            format!(
                "this admin API serves pipeline `{}`, not `{name}`",
                app.control.pipeline()
            ),
        ));
    }
    Ok(())
}

/// The scope a request needs: reading needs `read`; changing what runs
/// needs `deploy`, except a rollback, which needs `admin`.
pub(crate) fn required_scope(method: &Method, path: &str) -> Scope {
    if method == Method::GET || method == Method::HEAD {
        Scope::Read
    } else if path.trim_end_matches('/').ends_with("/rollback") {
        Scope::Admin
    } else {
        Scope::Deploy
    }
}

/// Who sent `request`, if their token is accepted and its scope covers
/// the request; failures count towards the client's backoff.
fn check_caller(app: &App, request: &Request) -> Result<Caller, Denied> {
    let client = request.extensions().get::<ClientAddr>().map(|c| c.0);
    let ip = client.map(|c| c.ip());
    if let Some(wait) = ip.and_then(|ip| app.backoff.waiting(ip)) {
        return Err(Denied::Throttled(wait));
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    let caller = match app.tokens.check(given) {
        Ok(caller) => caller,
        Err(refusal) => {
            // A request without a token is not a guess (a dashboard
            // opened without one).
            if let (Some(ip), Refusal::Wrong) = (ip, refusal) {
                app.backoff.failed(ip);
            }
            return Err(Denied::Refused(unauthorised(refusal)));
        }
    };
    if !app.tokens.required() {
        check_same_origin(request).map_err(Denied::Refused)?;
    }
    let needed = required_scope(request.method(), &full_path(request));
    check_scope(&caller, needed, request).map_err(Denied::Refused)?;
    Ok(caller)
}

/// The request's path as the client sent it (routes nested under
/// `/v1/pipelines/{name}` see only the rest).
fn full_path(request: &Request) -> String {
    request
        .extensions()
        .get::<axum::extract::OriginalUri>()
        .map_or(request.uri().path(), |u| u.0.path())
        .to_string()
}

/// Without a token the API trusts whoever reaches the loopback address
/// it listens on; a web page the user visits reaches it too. Refused: a
/// request a browser marks as coming from another site (`Origin`), and
/// one addressed to a name other than an IP address or `localhost` (a
/// DNS-rebinding page's own name).
fn check_same_origin(request: &Request) -> ApiResult<()> {
    let header = |name| request.headers().get(name).and_then(|v| v.to_str().ok());
    let host = header(header::HOST).unwrap_or("");
    let name = host
        .rsplit_once(':')
        .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
        .map_or(host, |(name, _)| name)
        .trim_start_matches('[')
        .trim_end_matches(']');
    if !name.is_empty() && name != "localhost" && name.parse::<std::net::IpAddr>().is_err() {
        return Err(ApiError(
            StatusCode::FORBIDDEN,
            format!(
                "this admin API has no token, so it answers only requests addressed to an IP \
                 address or localhost, not `{host}`; set tokens to reach it by name"
            ),
        ));
    }
    if let Some(origin) = header(header::ORIGIN) {
        let same = ["http://", "https://"]
            .iter()
            .any(|scheme| origin.strip_prefix(scheme) == Some(host));
        if !same {
            return Err(ApiError(
                StatusCode::FORBIDDEN,
                format!("a request from the web page at {origin} is refused (cross-origin)"),
            ));
        }
    }
    Ok(())
}

fn unauthorised(refusal: Refusal) -> ApiError {
    let message = match refusal {
        Refusal::Missing => {
            "missing bearer token: send `Authorization: Bearer <token>` (weir's commands read \
             it from WEIR_ADMIN_TOKEN or --token)"
        }
        Refusal::Wrong => "wrong bearer token",
    };
    ApiError(StatusCode::UNAUTHORIZED, message.into())
}

fn check_scope(caller: &Caller, needed: Scope, request: &Request) -> ApiResult<()> {
    if caller.scope >= needed {
        return Ok(());
    }
    Err(ApiError(
        StatusCode::FORBIDDEN,
        format!(
            "token `{}` has scope `{}`; {} {} needs scope `{}`",
            caller.name,
            caller.scope.as_str(),
            request.method(),
            full_path(request),
            needed.as_str()
        ),
    ))
}

/// The token of an `Authorization: Bearer <token>` value; the scheme is
/// case-insensitive (RFC 9110 §11.1).
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(token)
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, DeployError> + Send + 'static,
) -> ApiResult<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(ApiError::from),
        Err(e) => Err(ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("request handler failed: {e}"),
        )),
    }
}

/// Answers a read of the registry or status after [`Control::catch_up`],
/// off the async threads (it may read the object store).
async fn caught_up<T: Serialize + Send + 'static>(
    app: &App,
    read: fn(&Control) -> T,
) -> ApiResult<Json<T>> {
    let control = app.control.clone();
    blocking(move || {
        control.catch_up();
        Ok(Json(read(&control)))
    })
    .await
}

async fn status(State(app): State<App>) -> ApiResult<impl IntoResponse> {
    caught_up(&app, Control::status).await
}

async fn versions(State(app): State<App>) -> ApiResult<impl IntoResponse> {
    caught_up(&app, Control::versions).await
}

#[derive(Deserialize)]
struct ProgressQuery {
    #[serde(default)]
    after: Option<u64>,
    #[serde(default)]
    limit: Option<usize>,
}

async fn progress(State(app): State<App>, Query(q): Query<ProgressQuery>) -> impl IntoResponse {
    Json(
        app.telemetry.report(
            q.after,
            q.limit
                .unwrap_or(weir_engine::config::ProgressConfig::DEFAULT_RETAIN),
        ),
    )
}

async fn pipelines(State(app): State<App>) -> impl IntoResponse {
    Json([app.control.pipeline().to_string()])
}

async fn history(State(app): State<App>) -> ApiResult<impl IntoResponse> {
    caught_up(&app, Control::events).await
}

async fn metrics(State(app): State<App>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        with_auth_counters(app.telemetry.metrics_text(), &app),
    )
}

/// The pipeline's metrics with the admin API's failed token checks,
/// throttled requests and tokens-file state, merged into one exposition.
fn with_auth_counters(text: String, app: &App) -> String {
    use prometheus_client::metrics::counter::ConstCounter;
    use prometheus_client::metrics::gauge::ConstGauge;
    use std::sync::atomic::Ordering::Relaxed;
    let mut registry = prometheus_client::registry::Registry::default();
    let r = registry
        .sub_registry_with_prefix("weir")
        .sub_registry_with_label(("pipeline".into(), app.control.pipeline().to_string().into()));
    r.register(
        "admin_auth_failures",
        "Requests to the admin API with a wrong token",
        ConstCounter::new(app.backoff.failures.load(Relaxed)),
    );
    r.register(
        "admin_auth_throttled",
        "Requests answered 429 because their client sent too many wrong tokens",
        ConstCounter::new(app.backoff.throttled.load(Relaxed)),
    );
    r.register(
        "admin_tokens_file_ok",
        "1 if the tokens file read last was valid; 0: an edit is refused (the tokens before it \
         stay) or the file is gone (every token revoked)",
        ConstGauge::new(i64::from(app.tokens.file_ok.load(Relaxed))),
    );
    let mut admin = String::new();
    if let Err(e) = prometheus_client::encoding::text::encode(&mut admin, &registry) {
        tracing::warn!("encoding the admin API's metrics failed: {e}");
    }
    weir_engine::observe::metrics::merge(&[text, admin])
}

#[derive(Deserialize)]
struct UploadQuery {
    #[serde(default)]
    then: Option<String>,
    #[serde(default)]
    key: Option<String>,
}

async fn upload(
    State(app): State<App>,
    Extension(actor): Extension<Actor>,
    Query(q): Query<UploadQuery>,
    request: Request,
) -> ApiResult<impl IntoResponse> {
    let then = match q.then.as_deref().unwrap_or("stage") {
        "stage" => Then::Stage,
        "activate" => Then::Activate,
        "shadow" => Then::Shadow { key: q.key },
        other => {
            return Err(ApiError(
                StatusCode::BAD_REQUEST,
                format!("`then` must be stage, activate or shadow, not `{other}`"),
            ))
        }
    };
    let too_big = |size: u64| {
        ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "upload of {size} bytes is larger than the limit of {} bytes (`admin.max_upload`)",
                app.max_upload
            ),
        )
    };
    // Uploads queue here: their bodies wait in the socket, unread, so at
    // most `max_concurrent_uploads` are in memory at once. A closed
    // semaphore cannot happen (it is never closed).
    let _permit = app.uploads.clone().acquire_owned().await.map_err(|_| {
        ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "the admin API is shutting down".into(),
        )
    })?;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(size) = declared.filter(|&s| s > app.max_upload as u64) {
        drain(
            request.into_body(),
            (app.max_upload as u64).saturating_mul(8).max(256 << 20),
        )
        .await;
        return Err(too_big(size));
    }
    let mut form = Multipart::from_request(request, &()).await.map_err(|e| {
        ApiError(
            StatusCode::BAD_REQUEST,
            format!("expected a multipart/form-data upload: {e}"),
        )
    })?;
    let mut parts = FormParts::default();
    loop {
        let field = match form.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                return Err(too_big(declared.unwrap_or(app.max_upload as u64 + 1)))
            }
            Err(e) => return Err(ApiError(e.status(), format!("reading the upload: {e}"))),
        };
        let name = field.name().unwrap_or("").to_string();
        let file_name = field.file_name().map(str::to_string);
        let bytes = match field.bytes().await {
            Ok(b) => b.to_vec(),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                return Err(too_big(declared.unwrap_or(app.max_upload as u64 + 1)))
            }
            Err(e) => return Err(ApiError(e.status(), format!("reading `{name}`: {e}"))),
        };
        parts
            .set(&name, bytes, file_name)
            .map_err(|m| ApiError(StatusCode::BAD_REQUEST, m))?;
    }
    let upload = into_upload(
        parts
            .finish()
            .map_err(|m| ApiError(StatusCode::BAD_REQUEST, m))?,
    );
    let control = app.control.clone();
    let listed = blocking(move || control.upload(upload, then, &actor)).await?;
    Ok((StatusCode::CREATED, Json(listed)))
}

use axum::extract::FromRequest;

/// Reads and drops a refused upload's body (up to a bound), so the client
/// has sent it all and reads the 413 instead of a reset connection.
async fn drain(body: axum::body::Body, bound: u64) {
    use futures_util::StreamExt;
    let mut stream = body.into_data_stream();
    let mut read = 0u64;
    while let Some(Ok(chunk)) = stream.next().await {
        read += chunk.len() as u64;
        if read > bound {
            break;
        }
    }
}

/// The upload as the control plane takes it.
fn into_upload(form: UploadForm) -> Upload {
    Upload {
        wasm: form.component,
        config_json: form.config_json,
        artifacts: form.artifacts,
        golden: form
            .golden
            .map(|(input, expected)| Golden { input, expected }),
        label: form.label,
        origin: Origin::Upload {
            file_name: form.file_name,
        },
    }
}

async fn activate(
    State(app): State<App>,
    Extension(actor): Extension<Actor>,
    Path((_, n)): Path<(String, u32)>,
) -> ApiResult<impl IntoResponse> {
    let control = app.control.clone();
    Ok(Json(blocking(move || control.activate(n, &actor)).await?))
}

#[derive(Deserialize)]
struct RollbackQuery {
    #[serde(default)]
    to: Option<u32>,
}

async fn rollback(
    State(app): State<App>,
    Extension(actor): Extension<Actor>,
    Query(q): Query<RollbackQuery>,
) -> ApiResult<impl IntoResponse> {
    let control = app.control.clone();
    Ok(Json(
        blocking(move || control.roll_back(q.to, &actor)).await?,
    ))
}

#[derive(Deserialize)]
struct ReportsQuery {
    #[serde(default)]
    after: Option<u64>,
}

async fn shadow_reports(
    State(app): State<App>,
    Query(q): Query<ReportsQuery>,
) -> impl IntoResponse {
    Json(app.control.shadow_reports(q.after))
}

async fn promote(
    State(app): State<App>,
    Extension(actor): Extension<Actor>,
) -> ApiResult<impl IntoResponse> {
    let control = app.control.clone();
    Ok(Json(blocking(move || control.promote(&actor)).await?))
}

async fn unshadow(
    State(app): State<App>,
    Extension(actor): Extension<Actor>,
) -> ApiResult<impl IntoResponse> {
    let control = app.control.clone();
    blocking(move || control.unshadow(&actor)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(host: &str, origin: Option<&str>) -> Request {
        let mut r = axum::http::Request::builder()
            .method(Method::POST)
            .uri("/v1/pipelines/p/rollback")
            .header(header::HOST, host);
        if let Some(o) = origin {
            r = r.header(header::ORIGIN, o);
        }
        r.body(axum::body::Body::empty()).unwrap()
    }

    #[test]
    fn without_a_token_only_requests_to_an_address_from_no_other_page_are_let_in() {
        for host in [
            "127.0.0.1:7878",
            "localhost:7878",
            "[::1]:7878",
            "localhost",
        ] {
            assert!(check_same_origin(&request(host, None)).is_ok(), "{host}");
        }
        let same = request("127.0.0.1:7878", Some("http://127.0.0.1:7878"));
        assert!(check_same_origin(&same).is_ok());
        let other_page = request("127.0.0.1:7878", Some("https://evil.example"));
        assert!(check_same_origin(&other_page).is_err());
        let rebound = request("evil.example:7878", Some("http://evil.example:7878"));
        assert!(check_same_origin(&rebound).is_err());
    }

    #[test]
    fn reading_needs_read_changing_needs_deploy_and_rollback_needs_admin() {
        let base = "/v1/pipelines/p";
        for (method, path, scope) in [
            (Method::GET, "/metrics", Scope::Read),
            (Method::GET, "/v1/pipelines/p/history", Scope::Read),
            (Method::POST, "/v1/pipelines/p/versions", Scope::Deploy),
            (
                Method::POST,
                "/v1/pipelines/p/versions/2/activate",
                Scope::Deploy,
            ),
            (
                Method::POST,
                "/v1/pipelines/p/shadow/promote",
                Scope::Deploy,
            ),
            (Method::DELETE, "/v1/pipelines/p/shadow", Scope::Deploy),
            (Method::POST, "/v1/pipelines/p/rollback", Scope::Admin),
        ] {
            assert_eq!(
                required_scope(&method, path),
                scope,
                "{method} {path} under {base}"
            );
        }
    }
}
