//! Identity (`BLOG_AUTH`): a local OpenID Connect issuer with real signing keys, Easy Auth
//! principals as the platform sets them, and the real binary's logs. The suite runs on both
//! stores (`identity::embedded::…`, `identity::cosmos::…`).

pub mod issuer;
pub mod suite;

mod process;

mod embedded {
    crate::identity_suite!(crate::helpers::embedded_fixture);
}

mod cosmos {
    crate::identity_suite!(crate::cosmos::cosmos_fixture);
}
