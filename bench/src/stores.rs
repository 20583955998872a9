//! The store a run measures, opened by its kind (`--store`).

use std::sync::Arc;

use anyhow::bail;
use blog::settings::{Settings, StoreKind};
use blog::store::Store;

use crate::args::StoreArg;
use crate::scratch::Scratch;

/// The store to measure, by kind: the one place that knows how each is opened. Both go through
/// `blog::startup::open_store`, so the bench opens exactly what `handler` would.
pub async fn open_store(kind: StoreArg) -> anyhow::Result<(Arc<dyn Store>, Option<Scratch>)> {
    match kind {
        StoreArg::Embedded => {
            let dir = Scratch::new("store")?;
            // Defaults, not the environment: `BLOG_*` settings are the handler's business.
            let mut settings = Settings::from_lookup(|_| None)?;
            settings.db_path = dir.0.join("blog.db");
            Ok((blog::startup::open_store(&settings).await?, Some(dir)))
        }
        StoreArg::Cosmos => {
            let mut settings = Settings::from_env()?;
            if settings.cosmos.connection.is_none() {
                bail!("--store cosmos needs `COSMOS` or `COSMOS__accountEndpoint` (see docs/performance.md)");
            }
            settings.store = StoreKind::Cosmos;
            Ok((blog::startup::open_store(&settings).await?, None))
        }
        // The product's Cosmos store over a client on the SDK's in-memory emulator (a fresh
        // account in this process; the store creates its database and containers on first use),
        // as the Cosmos store tests build it. Its request charges come from the emulator's RU
        // model (see docs/performance.md). Throttling is off, as by default.
        #[cfg(feature = "emulator")]
        StoreArg::Emulated => {
            use azure_data_cosmos::options::Region;
            use azure_data_cosmos::{
                AccountEndpoint, AccountReference, CosmosClientBuilder, CosmosRuntimeBuilder,
                RoutingStrategy,
            };
            use azure_data_cosmos_driver::in_memory_emulator::{
                ConsistencyLevel, InMemoryEmulatorHttpClient, VirtualAccountConfig, VirtualRegion,
            };
            const GATEWAY: &str = "https://eastus.emulator.local";
            // Any base64 string: the emulator checks no signatures.
            const KEY: &str = "ZW11bGF0ZWQ=";
            let region = VirtualRegion::new("East US", GATEWAY.parse()?);
            let config = VirtualAccountConfig::new(vec![region])?
                .with_consistency(ConsistencyLevel::Session);
            let emulator = Arc::new(InMemoryEmulatorHttpClient::new(config));
            let runtime = CosmosRuntimeBuilder::from(emulator.runtime_builder())
                .build()
                .await?;
            let account = AccountReference::with_authentication_key(
                GATEWAY.parse::<AccountEndpoint>()?,
                KEY.to_string(),
            );
            let client = CosmosClientBuilder::new()
                .with_runtime(runtime)
                .build(account, RoutingStrategy::ProximityTo(Region::EAST_US))
                .await?;
            // The emulator evaluates no full-text function: searches (S1, S2) run with its
            // substring test instead, as the Cosmos store's tests do.
            let store = blog::store::cosmos::CosmosStore::with_client(client, "blog", true)
                .with_emulated_full_text();
            Ok((Arc::new(store), None))
        }
        #[cfg(not(feature = "emulator"))]
        StoreArg::Emulated => bail!(
            "--store emulated needs the bench built with its `emulator` feature: \
             cargo run --release -p bench --features emulator -- --store emulated"
        ),
    }
}
