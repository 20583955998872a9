//! The HTTP API under `/api` (`docs/api.md`), plus the readiness answer and the browser
//! client at `/` ([`crate::web`]) and the Functions host's trigger invocations at `/<FunctionName>`.

mod answer;
mod bookmarks;
mod comments;
mod conditional;
pub mod conduit;
pub mod cors;
pub mod counts_cache;
mod deletion;
pub mod events;
mod examples;
mod extract;
mod feed;
pub mod feed_cache;
mod follows;
mod identity;
mod items;
mod likes;
pub mod middleware;
mod mutes;
pub mod openapi;
mod posts;
mod schema;
mod search;
pub mod search_limit;
mod state;
mod stored;
mod tags;
mod timeline;
mod users;
pub mod views;
pub mod write_limit;

use std::time::Duration;

use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use extract::{JsonBody, Paging, PathId, PathIds};
pub use state::{AppState, Shared};

use crate::error::ApiError;
use answer::{encode, json_response};
use conditional::no_cache;

/// Request bodies over this size answer 413.
pub const BODY_LIMIT: usize = 1024 * 1024;

/// Every operation under `/api`: the one table both the router ([`api_router`]) and the OpenAPI
/// document ([`api_routes`]) are built from, and from which the Functions app's HTTP functions
/// are checked ([`operations`]). Each handler's `#[utoipa::path]` gives its method and path
/// (handlers sharing a path are merged into one route).
macro_rules! api_table {
    ($build:ident) => {
        $build![
            users::create_user,
            users::get_user,
            users::rename_user,
            users::list_user_posts,
            posts::create_post,
            posts::get_post,
            posts::update_post,
            comments::read_comments,
            comments::create_comment,
            likes::list_likes,
            likes::create_like,
            likes::get_like,
            users::delete_user,
            posts::delete_post,
            comments::delete_comment,
            likes::delete_like,
            feed::get_feed,
            search::search_posts,
            follows::follow,
            follows::get_following,
            follows::unfollow,
            follows::list_following,
            follows::list_followers,
            timeline::read_timeline,
            identity::get_me,
            identity::get_config,
            events::negotiate,
            openapi::get_api_description,
            bookmarks::bookmark,
            bookmarks::unbookmark,
            bookmarks::list_bookmarks,
            mutes::mute,
            mutes::unmute,
            mutes::list_mutes,
            tags::list_tag_posts,
            tags::list_tags,
        ]
    };
}

/// The table with each operation's description: utoipa-axum's router, which builds the OpenAPI
/// document alongside the routes.
macro_rules! documented_routes {
    ($($handler:path),+ $(,)?) => {
        OpenApiRouter::with_openapi(openapi::base())$(.routes(routes!($handler)))+
    };
}

/// The table as plain axum routes, each at the path and methods its `#[utoipa::path]` states
/// (read from `__path_<handler>`, the type that attribute generates, as utoipa-axum's `routes!`
/// does) without building any description: describing the operations is most of what building
/// the routes would cost at start-up, and the document is built only when first asked for.
macro_rules! served_routes {
    ($($module:ident :: $handler:ident),+ $(,)?) => {{
        use utoipa::Path as _;
        use utoipa_axum::PathItemExt as _;
        let router = Router::new();
        $(
            let router = utoipa_axum::paste! {{
                let methods = $module::[<__path_ $handler>]::methods()
                    .iter()
                    .fold(axum::routing::MethodRouter::new(), |methods, method| {
                        methods.on(method.to_method_filter(), $module::$handler)
                    });
                router.route(&$module::[<__path_ $handler>]::path(), methods)
            }};
        )+
        router
    }};
}

/// The API's routes with the OpenAPI document they describe (`split_for_parts` gives both).
pub fn api_routes() -> OpenApiRouter<AppState> {
    api_table!(documented_routes)
}

/// The whole OpenAPI document as generated from the route table: writes need a bearer token.
/// (`docs/openapi.json` holds it; [`openapi`] serves it.)
pub fn openapi_document() -> serde_json::Value {
    let (_, doc) = api_routes().split_for_parts();
    openapi::completed(doc)
}

/// The API's routes, to serve.
fn api_router() -> Router<AppState> {
    api_table!(served_routes)
}

/// One operation of the API: `method` (upper case) on `route` (relative to `/api`, as the
/// Functions host's `route` is), named `operation_id` (the handler's name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Operation {
    pub route: String,
    pub method: String,
    pub operation_id: String,
}

/// Every operation of the API, from the route table.
pub fn operations() -> Vec<Operation> {
    let (_, doc) = api_routes().split_for_parts();
    let doc = serde_json::to_value(doc).expect("the document serializes");
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            if let Some(id) = op["operationId"].as_str() {
                out.push(Operation {
                    route: path.strip_prefix("/api/").unwrap_or(path).to_string(),
                    method: method.to_uppercase(),
                    operation_id: id.to_string(),
                });
            }
        }
    }
    out.sort();
    out
}

/// The API's routes as served: [`api_router`], each request answered within `request_timeout`
/// (else 503 with `Retry-After`). `crate::app` puts them together with the rest.
pub fn timed_routes(request_timeout: Duration) -> Router<AppState> {
    api_router().route_layer(middleware::TimeLimit(request_timeout))
}

/// `GET /api`: where a client starts, the links to the OpenAPI document, its rendered reference,
/// the web client and the first reads. Not an operation of the document (it describes the document).
pub async fn index() -> Response {
    let link = |href: &str, title: &str| serde_json::json!({ "href": href, "title": title });
    let body = serde_json::json!({
        "title": "blog API",
        "links": {
            "openapi": link("/api/openapi.json", "The OpenAPI 3.1 document of this API"),
            "reference": link("/api/docs", "The API reference, rendered from that document"),
            "web": link("/api/web/", "The web client"),
            "feed": link("/api/feed", "The newest posts"),
            "config": link("/api/config", "How clients sign in"),
        },
    });
    no_cache(json_response(encode(&body)))
}

/// Answer an unknown route: 404 problem+json.
pub async fn not_found(method: Method, uri: Uri, headers: HeaderMap) -> ApiError {
    cors::hint_when_refused(&method, uri.path(), &headers);
    ApiError::NotFound("no such resource".into())
}

/// Answer a known route asked with a method it does not take: 405 problem+json.
pub async fn method_not_allowed(method: Method, uri: Uri, headers: HeaderMap) -> ApiError {
    cors::hint_when_refused(&method, uri.path(), &headers);
    ApiError::MethodNotAllowed
}

/// A handler that panicked answers 500 problem+json (the panic's message is logged, never
/// returned) instead of closing the connection without an answer.
pub fn panicked(payload: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into());
    ApiError::internal(format!("the request's handler panicked: {message}")).into_response()
}
