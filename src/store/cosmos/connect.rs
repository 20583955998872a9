//! Building the Cosmos DB client from the settings, and connecting lazily.
//!
//! The SDK's `build()` and `container_client()` talk to the account (account metadata, container
//! properties), so nothing here runs at start-up: the first store call connects, and while that
//! fails every call answers `Unavailable` (HTTP 503) quickly, retrying the connection after a
//! short pause. Once connected, the SDK itself retries, fails over and refreshes its metadata.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use azure_data_cosmos::options::{
    BinaryEncodingOptions, ConnectionPoolOptions, Region, RoutingStrategy,
    ServerCertificateValidation,
};
use azure_data_cosmos::{
    AccountReference, ContainerClient, CosmosClient, CosmosClientBuilder, CosmosRuntimeBuilder,
};
use azure_identity::{
    DeveloperToolsCredential, ManagedIdentityCredential, ManagedIdentityCredentialOptions,
    UserAssignedId,
};
use tokio::sync::OnceCell;

use super::bootstrap;
use super::errors::Failure;
use crate::settings::{CosmosAuth, CosmosSettings};
use crate::store::{Container, StoreError, StoreResult};

/// How long one connection attempt may take before the calls waiting on it answer 503.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// After a failed attempt, calls fail fast for this long instead of each trying again.
const RETRY_PAUSE: Duration = Duration::from_secs(2);

/// Where the client comes from.
pub(super) enum Source {
    /// Build it from the settings on first use.
    Settings(CosmosSettings),
    /// A client built by the caller (tests build one on the SDK's in-memory emulator).
    Client {
        client: CosmosClient,
        database: String,
        create_containers: bool,
    },
}

/// A connected store: one container client per container of the data model.
pub(super) struct Connection {
    containers: [ContainerClient; Container::ALL.len()],
}

impl Connection {
    pub fn container(&self, c: Container) -> &ContainerClient {
        &self.containers[index(c)]
    }
}

/// The position of a container in per-container arrays.
pub(super) fn index(c: Container) -> usize {
    match c {
        Container::Users => 0,
        Container::Posts => 1,
        Container::Feed => 2,
        Container::Leases => 3,
        Container::Timelines => 4,
    }
}

/// The connection, made on first use and retried after failures.
pub(super) struct LazyConnection {
    source: Source,
    cell: OnceCell<Connection>,
    /// When the last attempt failed, and why: calls within [`RETRY_PAUSE`] fail at once.
    /// When the last attempt failed, why, and whether the account refused access.
    last_failure: Mutex<Option<(Instant, String, bool)>>,
}

impl LazyConnection {
    pub fn new(source: Source) -> Self {
        LazyConnection {
            source,
            cell: OnceCell::new(),
            last_failure: Mutex::new(None),
        }
    }

    pub async fn get(&self) -> StoreResult<&Connection> {
        if let Some(c) = self.cell.get() {
            return Ok(c);
        }
        if let Some(e) = self.recent_failure() {
            return Err(e);
        }
        // Concurrent first calls wait for the one attempt in flight rather than each starting
        // one; when it fails, the waiters see its failure instead of trying again at once.
        self.cell
            .get_or_try_init(|| async {
                if let Some(e) = self.recent_failure() {
                    return Err(e);
                }
                let result = match tokio::time::timeout(CONNECT_TIMEOUT, connect(&self.source)).await
                {
                    Ok(result) => result,
                    Err(_) => Err(StoreError::Unavailable(format!(
                        "connecting to Cosmos DB took longer than {CONNECT_TIMEOUT:?}"
                    ))),
                };
                result.map_err(|e| {
                    tracing::warn!(error = %e, "cannot connect to Cosmos DB; retrying on later calls");
                    // The account refusing access (401/403) stays what it is: a misconfiguration
                    // the HTTP layer answers with 500. Any other cause (no network, a missing
                    // container) may clear in a moment: 503 with Retry-After.
                    let e = match e {
                        StoreError::Unavailable(_)
                        | StoreError::Throttled { .. }
                        | StoreError::Forbidden(_) => e,
                        other => StoreError::Unavailable(other.to_string()),
                    };
                    let (why, forbidden) = match &e {
                        StoreError::Unavailable(why) => (why.clone(), false),
                        StoreError::Forbidden(why) => (why.clone(), true),
                        other => (other.to_string(), false),
                    };
                    *self.last_failure.lock().expect("lock") =
                        Some((Instant::now(), why, forbidden));
                    e
                })
            })
            .await
    }

    /// The last attempt's failure, while it is recent enough to answer with it.
    fn recent_failure(&self) -> Option<StoreError> {
        match &*self.last_failure.lock().expect("lock") {
            Some((at, why, true)) if at.elapsed() < RETRY_PAUSE => {
                Some(StoreError::Forbidden(why.clone()))
            }
            Some((at, why, false)) if at.elapsed() < RETRY_PAUSE => {
                Some(StoreError::Unavailable(why.clone()))
            }
            _ => None,
        }
    }
}

async fn connect(source: &Source) -> StoreResult<Connection> {
    // ring for the SDK's TLS (Cosmos DB, and Entra ID for a managed identity's tokens).
    crate::tls::install();
    let (client, database, create) = match source {
        Source::Settings(s) => (
            build_client(s).await?,
            s.database.as_str(),
            s.create_containers,
        ),
        Source::Client {
            client,
            database,
            create_containers,
        } => (client.clone(), database.as_str(), *create_containers),
    };
    if create {
        bootstrap::create_missing(&client, database).await?;
    }
    let db = client.database_client(database);
    let mut containers = Vec::with_capacity(Container::ALL.len());
    for c in Container::ALL {
        let container = db.container_client(c.name(), None).await.map_err(|e| {
            let mut f = Failure::of(&e);
            f.message = format!(
                "container `{}` of database `{database}`: {}",
                c.name(),
                f.message
            );
            f.into_store_error()
        })?;
        containers.push(container);
    }
    tracing::info!(database, "connected to Cosmos DB");
    Ok(Connection {
        containers: containers
            .try_into()
            .unwrap_or_else(|_| unreachable!("one client per container")),
    })
}

/// The client for the account in the settings.
async fn build_client(s: &CosmosSettings) -> StoreResult<CosmosClient> {
    let conn = s
        .connection
        .as_ref()
        .ok_or_else(|| StoreError::Other("no Cosmos DB connection is configured".into()))?;
    let endpoint = conn.endpoint.clone();
    let account = match &conn.auth {
        CosmosAuth::Key(key) => {
            AccountReference::with_authentication_key(endpoint, key.expose().to_string())
        }
        CosmosAuth::ManagedIdentity { client_id } => {
            let options = ManagedIdentityCredentialOptions {
                user_assigned_id: client_id.clone().map(UserAssignedId::ClientId),
                ..Default::default()
            };
            let credential =
                ManagedIdentityCredential::new(Some(options)).map_err(credential_error)?;
            AccountReference::with_credential(endpoint, credential)
        }
        CosmosAuth::DeveloperTools => {
            let credential = DeveloperToolsCredential::new(None).map_err(credential_error)?;
            AccountReference::with_credential(endpoint, credential)
        }
    };

    let mut builder = CosmosClientBuilder::new();
    if s.emulator {
        // The emulator serves a self-signed certificate; `RequiredUnlessEmulator` relaxes the
        // check only for an emulator host (localhost, or the host named by the SDK's
        // `AZURE_COSMOS_EMULATOR_HOST`), never for a real account.
        let pool = ConnectionPoolOptions::builder()
            .with_server_certificate_validation(ServerCertificateValidation::RequiredUnlessEmulator)
            .build()
            .map_err(|e| StoreError::Other(format!("Cosmos DB connection options: {e}")))?;
        let runtime = CosmosRuntimeBuilder::new()
            .with_connection_pool(pool)
            .build()
            .await
            .map_err(|e| Failure::of(&e).into_store_error())?;
        // The Linux (vNext) emulator does not speak the SDK's default binary JSON encoding.
        builder = builder
            .with_runtime(runtime)
            .with_binary_encoding_options(BinaryEncodingOptions::new().with_enabled(false));
    }
    let routing = match &s.region {
        Some(r) => RoutingStrategy::ProximityTo(Region::new(r.clone())),
        // No preference: the account's own region order.
        None => RoutingStrategy::PreferredRegions(Vec::new()),
    };
    builder
        .build(account, routing)
        .await
        .map_err(|e| Failure::of(&e).into_store_error())
}

fn credential_error(e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("cannot create the Cosmos DB credential: {e}"))
}
