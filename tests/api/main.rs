//! The integration tests: one binary. `helpers` starts the app on port 0 over a fresh store;
//! `store_suite` and `api_suite` are written once against the `Store` trait / the HTTP API and
//! instantiated per store implementation (`embedded` here; a second store adds its own module).

mod helpers;

mod api_suite;
mod store_suite;

mod cosmos;
mod embedded;
mod process;
