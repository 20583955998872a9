//! Azure Web PubSub as a [`Publish`]er: the push service of live updates where the process
//! serves no stream (under the Functions host). Its data-plane REST API (api-version
//! [`API_VERSION`]) is called with a Microsoft Entra token of the app's identity for
//! [`SCOPE`]; no access key.
//!
//! - **One group per subject.** An event goes to the group of its [`Subject`]
//!   ([`group_of`]): `post:<id>`, `user:<id>`, `author:<id>` (a post of that author: whoever
//!   follows them has joined it) or `follows:<id>` (that user's following edges). So a post is
//!   one send, whoever follows its author.
//! - **Best effort, off the caller's path.** [`WebPubSub::publish`] only queues (at most
//!   [`QUEUE`] messages; beyond, a message is dropped and counted); one task sends them in
//!   order, each send within [`SEND_TIMEOUT`], token included, and never again: a failure is
//!   counted and logged (never the token), and the next message goes on.
//! - **Client access.** [`WebPubSub::client_url`] asks the service for a client token
//!   (`:generateToken`) that joins the connection to the groups a page listens to, and answers
//!   the URL a browser opens its WebSocket with.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use super::{stream, Batch, Cursor, Event, Publish, Subject};
use crate::settings::{Identity, WebPubSubSettings};

/// The REST API's version.
pub const API_VERSION: &str = "2024-01-01";
/// The scope of the Microsoft Entra token the service takes.
pub const SCOPE: &str = "https://webpubsub.azure.com/.default";
/// Messages waiting to be sent; a message beyond is dropped (and counted).
pub const QUEUE: usize = 1024;
/// The longest one send may take, its token included.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest asking for a client token may take.
pub const NEGOTIATE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client token lets a connection be opened (an open connection is not cut when it
/// expires; a client negotiates again to reconnect).
pub const CLIENT_TOKEN_MINUTES: u32 = 60;

/// Where the bearer token of a call comes from: the app's identity, or a fake in tests.
#[async_trait::async_trait]
pub trait Credential: Send + Sync {
    /// A token for [`SCOPE`]. An error's text never holds a token.
    async fn token(&self) -> Result<String, String>;
}

/// The managed identity (or the developer's sign-in), through the Azure SDK, which caches its
/// tokens until they are about to expire.
struct Entra(Arc<dyn azure_core::credentials::TokenCredential>);

#[async_trait::async_trait]
impl Credential for Entra {
    async fn token(&self) -> Result<String, String> {
        self.0
            .get_token(&[SCOPE], None)
            .await
            .map(|t| t.token.secret().to_string())
            .map_err(|e| format!("no Microsoft Entra token for Web PubSub: {e}"))
    }
}

/// The credential of `identity`, as the Cosmos DB client builds its own.
pub fn credential(identity: &Identity) -> Result<Arc<dyn Credential>, String> {
    use azure_identity::{
        DeveloperToolsCredential, ManagedIdentityCredential, ManagedIdentityCredentialOptions,
        UserAssignedId,
    };
    let why = |e: azure_core::Error| format!("cannot create the Web PubSub credential: {e}");
    let inner: Arc<dyn azure_core::credentials::TokenCredential> = match identity {
        Identity::ManagedIdentity { client_id } => {
            let options = ManagedIdentityCredentialOptions {
                user_assigned_id: client_id.clone().map(UserAssignedId::ClientId),
                ..Default::default()
            };
            ManagedIdentityCredential::new(Some(options)).map_err(why)?
        }
        Identity::DeveloperTools => DeveloperToolsCredential::new(None).map_err(why)?,
    };
    Ok(Arc::new(Entra(inner)))
}

/// The group of the connections a subject's events go to.
pub fn group_of(subject: &Subject) -> String {
    match subject {
        Subject::Post(id) => format!("post:{id}"),
        Subject::User(id) => format!("user:{id}"),
        Subject::Author(id) => format!("author:{id}"),
        Subject::Follows(id) => format!("follows:{id}"),
    }
}

/// What a group's connections receive for `e`: what the stream sends as an event's data
/// (`topic`, here the group, and the ids), its `kind` (the stream's event name) and the
/// `cursor` after its batch when the batch has one.
pub fn message(e: &Event, group: &str, cursor: &Cursor) -> Value {
    let mut m = stream::data(e, group);
    m.insert("kind".into(), e.kind.into());
    if cursor.0.iter().any(Option::is_some) {
        m.insert("cursor".into(), cursor.encode().into());
    }
    Value::Object(m)
}

/// What became of the messages handed over.
#[derive(Debug, Default)]
pub struct Counts {
    pub sent: AtomicU64,
    /// Not queued: the queue was full.
    pub dropped: AtomicU64,
    /// Sent and refused, or not answered within [`SEND_TIMEOUT`].
    pub failed: AtomicU64,
    /// Messages the sending task is done with (sent or failed), for whoever waits on them.
    done: tokio::sync::watch::Sender<u64>,
}

impl Counts {
    /// Once the sending task is done with `n` messages in all (sent or failed).
    pub async fn done(&self, n: u64) {
        let _ = self.done.subscribe().wait_for(|done| *done >= n).await;
    }
}

/// One message on its way to a group.
struct Outgoing {
    group: String,
    body: Vec<u8>,
}

/// Why a client URL could not be had.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// The push service: its endpoint and hub, the credential, and the queue of the sending task.
pub struct WebPubSub {
    endpoint: String,
    hub: String,
    http: reqwest::Client,
    credential: Arc<dyn Credential>,
    queue: mpsc::Sender<Outgoing>,
    counts: Arc<Counts>,
    /// Whether the last message handed over was dropped: a run of drops is logged once.
    dropping: AtomicBool,
}

impl WebPubSub {
    /// The publisher of `settings`, with the app's identity. Starts the sending task (on the
    /// current Tokio runtime), which ends once the publisher is dropped.
    pub fn from_settings(settings: &WebPubSubSettings) -> Result<Arc<WebPubSub>, String> {
        let credential = credential(&settings.identity)?;
        Ok(WebPubSub::new(
            &settings.endpoint,
            &settings.hub,
            credential,
        ))
    }

    /// The publisher for the service at `endpoint` (`https://host`, no trailing `/`) and `hub`.
    pub fn new(endpoint: &str, hub: &str, credential: Arc<dyn Credential>) -> Arc<WebPubSub> {
        crate::tls::install();
        let http = reqwest::Client::new();
        let (queue, receiver) = mpsc::channel(QUEUE);
        let counts = Arc::new(Counts::default());
        let me = Arc::new(WebPubSub {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            hub: hub.to_string(),
            http,
            credential,
            queue,
            counts,
            dropping: AtomicBool::new(false),
        });
        tokio::spawn(drain(
            receiver,
            me.http.clone(),
            me.credential.clone(),
            me.counts.clone(),
            format!("{}/api/hubs/{}", me.endpoint, me.hub),
        ));
        me
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Where clients connect: `wss://host[:port]` (`ws://` for a plain `http` endpoint on this
    /// machine), the origin a page's `connect-src` must allow.
    pub fn client_origin(&self) -> String {
        match self.endpoint.strip_prefix("https://") {
            Some(rest) => format!("wss://{rest}"),
            None => format!("ws://{}", self.endpoint.trim_start_matches("http://")),
        }
    }

    /// The `wss://…/client/hubs/<hub>?access_token=…` URL of a connection that joins `groups`,
    /// as `user_id` when given; the token is valid [`CLIENT_TOKEN_MINUTES`] for connecting.
    pub async fn client_url(
        &self,
        user_id: Option<&str>,
        groups: &[String],
    ) -> Result<String, Unavailable> {
        let call = async {
            let token = self.credential.token().await.map_err(Unavailable)?;
            let mut url = reqwest::Url::parse(&format!(
                "{}/api/hubs/{}/:generateToken",
                self.endpoint, self.hub
            ))
            .map_err(|e| Unavailable(format!("the Web PubSub endpoint is no URL: {e}")))?;
            {
                let mut query = url.query_pairs_mut();
                query.append_pair("api-version", API_VERSION);
                query.append_pair("minutesToExpire", &CLIENT_TOKEN_MINUTES.to_string());
                if let Some(u) = user_id {
                    query.append_pair("userId", u);
                }
                for g in groups {
                    query.append_pair("group", g);
                }
            }
            let answer = self
                .http
                .post(url)
                .bearer_auth(token)
                .header(reqwest::header::CONTENT_LENGTH, "0")
                .send()
                .await
                .map_err(|e| Unavailable(format!("Web PubSub not reached: {}", e.without_url())))?;
            let status = answer.status();
            if !status.is_success() {
                return Err(Unavailable(format!(
                    "Web PubSub refused a client token: {status}"
                )));
            }
            let body: Value = answer
                .json()
                .await
                .map_err(|e| Unavailable(format!("Web PubSub's answer is not JSON: {e}")))?;
            let token = body
                .get("token")
                .and_then(Value::as_str)
                .ok_or_else(|| Unavailable("Web PubSub's answer has no `token`".into()))?;
            Ok(format!(
                "{}/client/hubs/{}?access_token={token}",
                self.client_origin(),
                self.hub
            ))
        };
        tokio::time::timeout(NEGOTIATE_TIMEOUT, call)
            .await
            .unwrap_or_else(|_| {
                Err(Unavailable(format!(
                    "Web PubSub did not answer within {} s",
                    NEGOTIATE_TIMEOUT.as_secs()
                )))
            })
    }
}

impl Publish for WebPubSub {
    fn publish(&self, batch: Arc<Batch>) {
        for e in &batch.events {
            let group = group_of(&e.subject);
            let body = message(e, &group, &batch.cursor).to_string().into_bytes();
            match self.queue.try_send(Outgoing { group, body }) {
                Ok(()) => {
                    if self.dropping.swap(false, Ordering::Relaxed) {
                        tracing::info!(
                            dropped = self.counts.dropped.load(Ordering::Relaxed),
                            "Web PubSub: messages are queued again"
                        );
                    }
                }
                Err(_) => {
                    let dropped = self.counts.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                    if !self.dropping.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            dropped,
                            queue = QUEUE,
                            "Web PubSub: the queue is full; messages are dropped (and counted) until it has room"
                        );
                    }
                }
            }
        }
    }
}

/// Send what is queued, one message at a time, each once, until the publisher is dropped.
async fn drain(
    mut queue: mpsc::Receiver<Outgoing>,
    http: reqwest::Client,
    credential: Arc<dyn Credential>,
    counts: Arc<Counts>,
    hub_url: String,
) {
    let mut failing = false;
    while let Some(m) = queue.recv().await {
        let url = format!(
            "{hub_url}/groups/{}/:send?api-version={API_VERSION}",
            m.group
        );
        let send = async {
            let token = credential.token().await?;
            let answer = http
                .post(&url)
                .bearer_auth(token)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(m.body)
                .send()
                .await
                .map_err(|e| format!("not reached: {}", e.without_url()))?;
            let status = answer.status();
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("refused: {status}"))
            }
        };
        let result = tokio::time::timeout(SEND_TIMEOUT, send)
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {SEND_TIMEOUT:?}")));
        match result {
            Ok(()) => {
                counts.sent.fetch_add(1, Ordering::Relaxed);
                if failing {
                    failing = false;
                    tracing::info!(
                        failed = counts.failed.load(Ordering::Relaxed),
                        "Web PubSub: sends succeed again"
                    );
                }
            }
            Err(why) => {
                let failed = counts.failed.fetch_add(1, Ordering::Relaxed) + 1;
                if !failing {
                    failing = true;
                    tracing::warn!(
                        group = %m.group,
                        error = %why,
                        failed,
                        "Web PubSub: a message was not sent (not retried); later failures are counted until a send succeeds"
                    );
                } else {
                    tracing::debug!(group = %m.group, error = %why, failed, "Web PubSub: a message was not sent");
                }
            }
        }
        counts.done.send_modify(|done| *done += 1);
    }
}
