//! The per-caller write rate limit (`BLOG_WRITES_PER_MINUTE`): a token bucket per caller that
//! holds that many writes and refills evenly over a minute, so one account (or, with
//! `BLOG_AUTH=none`, one client address) cannot flood the store while others write as usual.
//!
//! - **Who a caller is**: the signed-in user; with `BLOG_AUTH=none` the client's address (an IPv6
//!   address by its /64 network, which one subscriber usually holds whole).
//! - **Over the limit**: 429 problem+json with `Retry-After` (when the next write is allowed),
//!   decided before the body is read, so nothing is written.
//! - **Per process**: each instance counts its own callers; behind several instances a caller
//!   gets that many writes per instance.
//! - **Bounded memory**: one entry per caller that wrote in about the last minute. Entries whose
//!   bucket has refilled are indistinguishable from a new caller and are dropped by a sweep once
//!   a minute, or at once (at most once a second) when more than [`SWEEP_ABOVE`] callers are held.
//!
//! The same buckets hold the Conduit API's sign-in attempts, per account and per client address
//! ([`Accounts`]).

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

pub use crate::settings::DEFAULT_WRITES_PER_MINUTE;

/// How often idle callers are dropped.
const SWEEP_INTERVAL: Duration = Duration::from_secs(60);
/// Above this many callers held, idle ones are dropped at once (at most once a second).
pub const SWEEP_ABOVE: usize = 100_000;
const SOONEST_SWEEP: Duration = Duration::from_secs(1);

/// Who a write is counted against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Writer {
    /// A signed-in caller's user id.
    User(String),
    /// The client's address (`BLOG_AUTH=none`), IPv6 by its /64 network.
    Address(IpAddr),
}

impl Writer {
    /// The writer behind a client address: an IPv4 address as it is (IPv4-mapped IPv6 included),
    /// an IPv6 address by its /64 network.
    pub fn address(addr: IpAddr) -> Writer {
        Writer::Address(crate::server::client_of(addr))
    }

    /// The writer for a request from `peer` (unknown: every such request counts as one writer).
    pub fn peer(peer: Option<SocketAddr>) -> Writer {
        Writer::address(peer.map_or(IpAddr::from([0, 0, 0, 0]), |p| p.ip()))
    }
}

/// The limit and each caller's bucket; off when the limit is 0.
pub struct WriteLimit {
    per_minute: u32,
    limiter: Option<DefaultKeyedRateLimiter<Writer>>,
    last_sweep: Mutex<Instant>,
}

impl WriteLimit {
    /// `per_minute` writes per caller, refilled evenly over the minute; 0: no limit.
    pub fn new(per_minute: u32) -> Self {
        WriteLimit {
            per_minute,
            limiter: NonZeroU32::new(per_minute)
                .map(|n| DefaultKeyedRateLimiter::dashmap(Quota::per_minute(n))),
            last_sweep: Mutex::new(Instant::now()),
        }
    }

    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Take one write from `who`'s bucket: `Err` with how long until the next one is allowed
    /// when it is empty.
    pub fn check(&self, who: &Writer) -> Result<(), Duration> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        self.sweep(limiter);
        limiter
            .check_key(who)
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }

    /// How many callers are held.
    pub fn tracked(&self) -> usize {
        self.limiter.as_ref().map_or(0, |l| l.len())
    }

    /// Drop the callers whose bucket is full again, when a sweep is due.
    fn sweep(&self, limiter: &DefaultKeyedRateLimiter<Writer>) {
        let Ok(mut last) = self.last_sweep.try_lock() else {
            return; // another request is sweeping
        };
        let since = last.elapsed();
        let due =
            since >= SWEEP_INTERVAL || (since >= SOONEST_SWEEP && limiter.len() > SWEEP_ABOVE);
        if due {
            limiter.retain_recent();
            limiter.shrink_to_fit();
            *last = Instant::now();
        }
    }

    /// Sweep now, whatever the time (tests).
    pub fn sweep_now(&self) {
        if let Some(limiter) = &self.limiter {
            limiter.retain_recent();
            limiter.shrink_to_fit();
        }
    }
}

/// Sign-in attempts allowed per account (its email) and per client address, a minute each.
pub const LOGINS_PER_ACCOUNT_PER_MINUTE: u32 = 10;
pub const LOGINS_PER_ADDRESS_PER_MINUTE: u32 = 60;

/// Local accounts' sign-in attempts' budgets (their tokens' key is [`crate::auth::Auth`]'s).
pub struct Accounts {
    pub(super) per_account: WriteLimit,
    pub(super) per_address: WriteLimit,
}

impl Default for Accounts {
    fn default() -> Accounts {
        Accounts {
            per_account: WriteLimit::new(LOGINS_PER_ACCOUNT_PER_MINUTE),
            per_address: WriteLimit::new(LOGINS_PER_ADDRESS_PER_MINUTE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_gets_the_bucket_then_waits_and_others_are_unaffected() {
        let limit = WriteLimit::new(3);
        let ana = Writer::User("ana".into());
        for _ in 0..3 {
            assert!(limit.check(&ana).is_ok());
        }
        let wait = limit.check(&ana).unwrap_err();
        // One write comes back every 20 s (a minute over 3).
        assert!(
            wait > Duration::from_secs(15) && wait <= Duration::from_secs(20),
            "{wait:?}"
        );
        assert!(limit.check(&Writer::User("bea".into())).is_ok());
        assert!(limit
            .check(&Writer::address("127.0.0.1".parse().unwrap()))
            .is_ok());
    }

    #[test]
    fn zero_is_no_limit() {
        let limit = WriteLimit::new(0);
        let ana = Writer::User("ana".into());
        for _ in 0..10_000 {
            assert!(limit.check(&ana).is_ok());
        }
        assert_eq!(limit.tracked(), 0);
    }

    #[test]
    fn callers_whose_bucket_refilled_are_dropped() {
        // A bucket of 60,000 a minute refills one write per millisecond.
        let limit = WriteLimit::new(60_000);
        for i in 0..1000u32 {
            limit.check(&Writer::User(format!("u{i}"))).unwrap();
        }
        assert_eq!(limit.tracked(), 1000);
        std::thread::sleep(Duration::from_millis(20));
        limit.sweep_now();
        assert_eq!(limit.tracked(), 0);
    }

    #[test]
    fn an_ipv6_caller_is_its_64_network() {
        let a = Writer::address("2001:db8:1:2:aaaa::1".parse().unwrap());
        let b = Writer::address("2001:db8:1:2:bbbb::9".parse().unwrap());
        let c = Writer::address("2001:db8:1:3::1".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(
            Writer::address("::ffff:192.0.2.1".parse().unwrap()),
            Writer::address("192.0.2.1".parse().unwrap())
        );
    }
}
