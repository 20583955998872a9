//! What the server answers while the store is still opening: the readiness answer at once (`/`
//! for anything but a browser, which gets the web client's page once the store is open), and
//! every other request once the application is ready, by the application itself. A request that
//! would wait longer than the request timeout is answered 503 with `Retry-After`, as one that
//! arrives after the store failed to open (the process then stops).

use std::time::Duration;

use axum::extract::Request;
use axum::response::{IntoResponse as _, Response};
use axum::Router;
use tokio::sync::watch;
use tower::ServiceExt as _;

use crate::error::ApiError;

/// The application's router once the store is open; `None` until then. Its sender dropped with
/// `None` in it means the store could not be opened.
pub type Ready = watch::Receiver<Option<Router>>;

/// The router that answers while the store opens (see the module documentation).
pub fn router(ready: Ready, request_timeout: Duration) -> Router {
    Router::new().fallback(move |req: Request| answer(ready.clone(), request_timeout, req))
}

async fn answer(mut ready: Ready, request_timeout: Duration, req: Request) -> Response {
    let probe = req.uri().path() == "/" && !crate::web::wants_page(req.method(), req.headers());
    if probe && ready.borrow().is_none() {
        return crate::web::readiness();
    }
    let unavailable = ApiError::Unavailable {
        retry_after: Duration::from_secs(1),
    };
    let app = match tokio::time::timeout(request_timeout, ready.wait_for(Option::is_some)).await {
        Ok(Ok(app)) => app.clone().expect("waited for it"),
        Ok(Err(_)) => return unavailable.into_response(),
        Err(_) => return ApiError::TimedOut(request_timeout).into_response(),
    };
    match app.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}
