//! Opt-in (`BLOG_CREATE_CONTAINERS=true`) creation of the database and the containers, for
//! development against the emulator or a scratch account. Production containers come from infra
//! (`infra/modules/cosmos.bicep`); the SDK's control plane needs key authentication anyway.

use std::borrow::Cow;

use azure_data_cosmos::models::{
    ContainerProperties, FullTextPolicy, IndexingMode, IndexingPolicy, TimeToLive,
};
use azure_data_cosmos::CosmosClient;

use super::errors::Failure;
use crate::store::{Container, StoreError, StoreResult};

/// The language the posts' full-text paths are analyzed as (infra's `defaultLanguage` too).
pub(super) const FULL_TEXT_LANGUAGE: &str = "en-US";

/// The properties a container is created with: its partition key path and an indexing policy
/// that indexes only the paths the store's queries filter or sort on, so writes stay cheap.
pub(super) fn container_properties(c: Container) -> ContainerProperties {
    let paths: &[&str] = match c {
        // `refUserId` and `postId`: follow edges and timeline entries (`domain::follows`);
        // `userId`: the change feed reads a batch's authors with one query across partitions.
        Container::Users => &[
            "type",
            "userId",
            "creationDate",
            "userUsername",
            "deleted",
            "refUserId",
            "postId",
        ],
        Container::Posts => &["type", "creationDate", "userId", "userUsername", "deleted"],
        // The feed, the merged authors' posts, each tag's posts (newest first) and the tags'
        // counts (those in use, `postCount` above 0, the most used first).
        Container::Feed => &["type", "creationDate", "postCount"],
        // Timeline entries and merge markers: a reader's partition newest first, a post's
        // entries (`postId`) and an author's (`refUserId`, with their name for a rename) across
        // partitions, merge markers told apart by `merge`.
        Container::Timelines => &[
            "type",
            "creationDate",
            "refUserId",
            "postId",
            "userUsername",
            "merge",
            "deleted",
        ],
        // Checkpoints are only read by id; keep the default policy (every path).
        Container::Leases => &[],
    };
    let pk = format!("/{}", c.partition_key_field());
    // Time to live on, with no default expiry: only items that carry a `ttl` (deleted items'
    // marks) expire, as in infra.
    let props = ContainerProperties::new(Cow::Borrowed(c.name()), pk.into())
        .with_default_ttl(TimeToLive::NoDefault);
    if paths.is_empty() {
        return props;
    }
    let mut policy = IndexingPolicy::default()
        .with_indexing_mode(IndexingMode::Consistent)
        .with_excluded_path("/*")
        .with_excluded_path("/\"_etag\"/?");
    for p in paths {
        policy = policy.with_included_path(format!("/{p}/?"));
    }
    // `automatic: false` is legacy "manual" indexing; the service expects `true`.
    policy.automatic = true;
    if c == Container::Posts {
        // Search: the posts' title and content, analyzed as `en-US` (the default language), with
        // a full-text index each so that `FullTextContains` reads the index, not every post.
        let mut text = FullTextPolicy::new(FULL_TEXT_LANGUAGE);
        for field in crate::store::SEARCHABLE {
            text = text.with_full_text_path(format!("/{field}"));
            policy = policy.with_full_text_index(format!("/{field}"));
        }
        return props
            .with_full_text_policy(text)
            .with_indexing_policy(policy);
    }
    props.with_indexing_policy(policy)
}

/// Every container as the store defines it (its id, partition key, indexing and full-text
/// policies and time to live), in the service's JSON: what `infra/modules/cosmos.bicep` must
/// deploy (`infra/expected.json` keeps a copy for the template checks).
pub fn container_definitions() -> Vec<serde_json::Value> {
    Container::ALL
        .iter()
        .map(|&c| {
            serde_json::to_value(container_properties(c)).expect("container properties serialize")
        })
        .collect()
}

/// Create the database and the containers that do not exist yet (409 means it exists). A new
/// database (its `users` container created here) records that it holds everything where this
/// release keeps it (`crate::store::LAYOUT_ID`): an existing one moves its timeline items first.
pub(super) async fn create_missing(client: &CosmosClient, database: &str) -> StoreResult<()> {
    let exists = |e: &azure_data_cosmos::CosmosError| e.status().is_conflict();
    match client.create_database(database, None).await {
        Ok(_) => tracing::info!(database, "created the Cosmos DB database"),
        Err(e) if exists(&e) => {}
        Err(e) => return Err(bootstrap_error("database", database, &e)),
    }
    let db = client.database_client(database);
    let mut new_store = false;
    for c in Container::ALL {
        match db.create_container(container_properties(c), None).await {
            Ok(_) => {
                tracing::info!(
                    database,
                    container = c.name(),
                    "created a Cosmos DB container"
                );
                new_store |= c == Container::Users;
            }
            Err(e) if exists(&e) => {}
            Err(e) => return Err(bootstrap_error("container", c.name(), &e)),
        }
    }
    if new_store {
        let leases = db
            .container_client(Container::Leases.name(), None)
            .await
            .map_err(|e| bootstrap_error("container", Container::Leases.name(), &e))?;
        let layout = crate::store::layout::new_store_layout();
        let key =
            azure_data_cosmos::models::PartitionKey::from(crate::store::LAYOUT_ID.to_string());
        leases
            .upsert_item(key, crate::store::LAYOUT_ID, &layout, None)
            .await
            .map_err(|e| bootstrap_error("item", crate::store::LAYOUT_ID, &e))?;
    }
    Ok(())
}

fn bootstrap_error(what: &str, name: &str, e: &azure_data_cosmos::CosmosError) -> StoreError {
    let mut f = Failure::of(e);
    f.message = format!(
        "cannot create the {what} `{name}` (BLOG_CREATE_CONTAINERS): {}",
        f.message
    );
    f.into_store_error()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosmos_containers_index_only_the_queried_paths() {
        let json = |c| serde_json::to_value(container_properties(c)).unwrap();
        let posts = json(Container::Posts);
        assert_eq!(posts["id"], "posts");
        assert_eq!(
            posts["partitionKey"]["paths"],
            serde_json::json!(["/postId"])
        );
        let policy = &posts["indexingPolicy"];
        assert_eq!(policy["automatic"], true);
        assert_eq!(policy["indexingMode"], "consistent");
        let included: Vec<&str> = policy["includedPaths"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            included,
            [
                "/type/?",
                "/creationDate/?",
                "/userId/?",
                "/userUsername/?",
                "/deleted/?"
            ]
        );
        // Items expire only when they carry a `ttl` (deleted items' marks).
        assert_eq!(posts["defaultTtl"], -1);
        assert_eq!(policy["excludedPaths"][0]["path"], "/*");
        assert_eq!(
            json(Container::Feed)["partitionKey"]["paths"],
            serde_json::json!(["/type"])
        );
        let leases = json(Container::Leases);
        assert_eq!(leases["partitionKey"]["paths"], serde_json::json!(["/id"]));
        let timelines = json(Container::Timelines);
        assert_eq!(
            timelines["partitionKey"]["paths"],
            serde_json::json!(["/userId"])
        );
        // A reader's newest first, a post's entries, an author's (with their name, for a rename).
        let included = timelines["indexingPolicy"]["includedPaths"].to_string();
        for path in [
            "/type/?",
            "/creationDate/?",
            "/postId/?",
            "/refUserId/?",
            "/userUsername/?",
        ] {
            assert!(included.contains(path), "{path} in {included}");
        }
        assert!(leases.get("indexingPolicy").is_none());
    }

    /// Search needs the posts' full-text policy and index on title, content and tags, and nothing
    /// else has one.
    #[test]
    fn cosmos_posts_have_a_full_text_policy_and_index() {
        let json = |c| serde_json::to_value(container_properties(c)).unwrap();
        let posts = json(Container::Posts);
        assert_eq!(
            posts["fullTextPolicy"],
            serde_json::json!({
                "defaultLanguage": "en-US",
                "fullTextPaths": [{ "path": "/title" }, { "path": "/content" }, { "path": "/tags" }]
            })
        );
        assert_eq!(
            posts["indexingPolicy"]["fullTextIndexes"],
            serde_json::json!([{ "path": "/title" }, { "path": "/content" }, { "path": "/tags" }])
        );
        for c in [
            Container::Users,
            Container::Feed,
            Container::Timelines,
            Container::Leases,
        ] {
            let props = json(c);
            assert!(props.get("fullTextPolicy").is_none(), "{c:?}");
            assert!(
                props["indexingPolicy"].get("fullTextIndexes").is_none(),
                "{c:?}"
            );
        }
    }
}
