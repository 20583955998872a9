//! A Cosmos store on the SDK's in-memory emulator (dev-dependency only: the emulator never ships
//! in the `handler` binary). Each call makes a fresh emulated account, so tests are independent.
//!
//! The store creates its database and containers itself (`create_containers`), which exercises
//! the bootstrap path; the emulator gives each container 4 physical partitions, so the
//! cross-partition query and the full-container change feed really span several ranges.

#![allow(dead_code)]

use std::sync::Arc;

use azure_data_cosmos::options::Region;
use azure_data_cosmos::{
    AccountEndpoint, AccountReference, CosmosClientBuilder, CosmosRuntimeBuilder, RoutingStrategy,
};
use azure_data_cosmos_driver::in_memory_emulator::{
    ConsistencyLevel, InMemoryEmulatorHttpClient, VirtualAccountConfig, VirtualRegion,
};
use blog::store::cosmos::CosmosStore;

const GATEWAY: &str = "https://eastus.emulator.local";
/// Any base64 string: the emulator does not check signatures.
const KEY: &str = "dGVzdGtleQ==";

pub async fn cosmos_store() -> CosmosStore {
    let region = VirtualRegion::new("East US", GATEWAY.parse().expect("url"));
    let config = VirtualAccountConfig::new(vec![region])
        .expect("emulator config")
        .with_consistency(ConsistencyLevel::Session);
    let emulator = Arc::new(InMemoryEmulatorHttpClient::new(config));
    let runtime = CosmosRuntimeBuilder::from(emulator.runtime_builder())
        .build()
        .await
        .expect("emulator runtime");
    let account = AccountReference::with_authentication_key(
        GATEWAY.parse::<AccountEndpoint>().expect("endpoint"),
        KEY.to_string(),
    );
    let client = CosmosClientBuilder::new()
        .with_runtime(runtime)
        .build(account, RoutingStrategy::ProximityTo(Region::EAST_US))
        .await
        .expect("client on the in-memory emulator");
    CosmosStore::with_client(client, "blog", true)
}
