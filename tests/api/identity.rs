//! Identity (`BLOG_AUTH`): a local OpenID Connect issuer with real signing keys, Easy Auth
//! principals as the platform sets them, local accounts' tokens, and the real binary's logs.
//! The suites run on both stores (`identity::embedded::…`, `identity::cosmos::…`).

pub mod issuer;
pub mod local;
pub mod suite;

mod process;

mod embedded {
    crate::identity_suite!(crate::helpers::embedded_fixture);
    crate::identity_local_suite!(crate::helpers::embedded_fixture);
}

mod cosmos {
    crate::identity_suite!(crate::cosmos::cosmos_fixture);
    crate::identity_local_suite!(crate::cosmos::cosmos_fixture);
}
