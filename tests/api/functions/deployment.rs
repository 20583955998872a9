//! What the deployment (`infra/`) must give the code, kept in `infra/expected.json` from the code's
//! own definitions: the Cosmos DB containers as the store defines them, the app settings the
//! handler needs under the Functions host on Cosmos DB (with what each holds), and every setting
//! name it reads there. `.ci/infra_check.py` checks the templates against that file without
//! building the code; this test keeps the file in step with the code.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use blog::settings::{AccountEndpoint, CosmosAuth, CosmosConnection, Settings, StoreKind};
use serde_json::{json, Value};

use super::common::repo;

/// What a deployed setting holds: a fixed value, or one of the deployment's own (named as
/// `.ci/infra_check.py` finds it in `infra/modules/functionapp.bicep`).
enum Holds {
    Value(&'static str),
    From(&'static str),
}

const ENDPOINT: &str = "https://cosmos-blog-x.documents.azure.com:443/";
const CLIENT_ID: &str = "11111111-2222-3333-4444-555555555555";
const DATABASE: &str = "blogdb";

/// The settings the deployed app must carry for the handler to run on the account with the app's
/// user-assigned identity.
fn deployed() -> Vec<(&'static str, Holds)> {
    vec![
        ("BLOG_STORE", Holds::Value(StoreKind::Cosmos.as_str())),
        ("COSMOS__accountEndpoint", Holds::From("cosmosEndpoint")),
        ("COSMOS__credential", Holds::Value("managedidentity")),
        ("COSMOS__clientId", Holds::From("identityClientId")),
        ("COSMOS_DATABASE", Holds::From("cosmosDatabaseName")),
    ]
}

fn sample(holds: &Holds) -> &'static str {
    match holds {
        Holds::Value(v) => v,
        Holds::From("cosmosEndpoint") => ENDPOINT,
        Holds::From("identityClientId") => CLIENT_ID,
        Holds::From("cosmosDatabaseName") => DATABASE,
        Holds::From(other) => panic!("no sample for {other}"),
    }
}

/// The settings parsed from exactly these variables, and every name the code looked up.
fn parse(vars: &BTreeMap<&str, &str>) -> (Settings, BTreeSet<String>) {
    let asked = RefCell::new(BTreeSet::new());
    let settings = Settings::from_lookup(|k| {
        asked.borrow_mut().insert(k.to_string());
        vars.get(k).map(|v| v.to_string())
    })
    .unwrap_or_else(|e| panic!("the deployed settings do not parse: {e}"));
    (settings, asked.into_inner())
}

fn expected() -> Value {
    let mut base: BTreeMap<&str, &str> = deployed()
        .iter()
        .map(|(name, holds)| (*name, sample(holds)))
        .collect();
    // Set by the Functions host itself.
    base.insert("FUNCTIONS_CUSTOMHANDLER_PORT", "40000");

    let mut easyauth = base.clone();
    easyauth.insert("BLOG_AUTH", "easyauth");
    let (settings, mut reads) = parse(&easyauth);
    assert!(settings.hosted);
    assert_eq!(settings.store, StoreKind::Cosmos);
    assert_eq!(
        settings.cosmos.connection,
        Some(CosmosConnection {
            endpoint: ENDPOINT.parse::<AccountEndpoint>().unwrap(),
            auth: CosmosAuth::ManagedIdentity {
                client_id: Some(CLIENT_ID.into())
            },
        }),
        "the app reaches the account with its user-assigned identity"
    );
    assert_eq!(settings.cosmos.database, DATABASE);
    for (name, _) in deployed() {
        assert!(reads.contains(name), "the code does not read {name}");
    }

    let mut jwt = base.clone();
    for (k, v) in [
        ("BLOG_AUTH", "jwt"),
        (
            "BLOG_AUTH_ISSUER",
            "https://login.microsoftonline.com/t/v2.0",
        ),
        ("BLOG_AUTH_AUDIENCE", CLIENT_ID),
        ("BLOG_AUTH_CLIENT_ID", CLIENT_ID),
        ("BLOG_AUTH_SCOPES", "api://x/Blog.Write"),
        ("BLOG_AUTH_WRITE_SCOPE", "Blog.Write"),
    ] {
        jwt.insert(k, v);
    }
    let (settings, jwt_reads) = parse(&jwt);
    assert_eq!(settings.auth.write_scope.as_deref(), Some("Blog.Write"));
    reads.extend(jwt_reads);

    let settings: Vec<Value> = deployed()
        .into_iter()
        .map(|(name, holds)| match holds {
            Holds::Value(v) => json!({ "name": name, "value": v }),
            Holds::From(p) => json!({ "name": name, "from": p }),
        })
        .collect();
    json!({
        "$comment": "Generated from the code by tests/api/functions/deployment.rs \
                     (UPDATE_INFRA_EXPECTED=1 cargo test --test api deployment); \
                     .ci/infra_check.py checks infra/ against it. Do not edit.",
        "containers": blog::store::cosmos::container_definitions(),
        "appSettings": settings,
        "reads": reads,
    })
}

/// `infra/expected.json` is what the code defines.
/// `UPDATE_INFRA_EXPECTED=1 cargo test --test api deployment` rewrites it.
#[test]
fn the_kept_deployment_expectations_are_the_codes() {
    let path = repo().join("infra/expected.json");
    let generated = serde_json::to_string_pretty(&expected()).unwrap() + "\n";
    if std::env::var_os("UPDATE_INFRA_EXPECTED").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let kept = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        kept == generated,
        "infra/expected.json is not what the code defines; rewrite it with \
         `UPDATE_INFRA_EXPECTED=1 cargo test --test api deployment` and commit it"
    );
}
