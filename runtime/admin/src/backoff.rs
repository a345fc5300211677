//! Slowing down a client that keeps sending wrong tokens: after
//! `free_failures` wrong tokens, each further one makes the client's
//! address wait (1s, 2s, 4s… up to `max_wait`) before any request of it
//! is looked at again; its requests meanwhile are answered 429 with
//! `Retry-After` without checking the token (so guessing goes no faster
//! than the waits allow). A request without a token is not a guess and
//! is not counted. An accepted token does not clear the count (else one
//! good token would buy unlimited guesses at another); a client quiet for
//! twice the longest wait starts afresh. Clients are told apart by IPv4
//! address or IPv6 /64 (one host usually holds a whole /64); the table is
//! bounded, the oldest entries giving way, so addresses sprayed by an
//! attacker cannot exhaust memory.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};
use weir_engine::config::admin::AuthBackoff;

/// Clients remembered at most.
const MAX_CLIENTS: usize = 10_000;

/// A client's failed checks.
struct Failures {
    count: u32,
    last: Instant,
    until: Option<Instant>,
}

/// The failed token checks of every client.
pub struct Backoff {
    cfg: AuthBackoff,
    clients: Mutex<HashMap<IpAddr, Failures>>,
    /// Failed checks, ever (for `/metrics`).
    pub failures: AtomicU64,
    /// Requests answered 429 without a check, ever.
    pub throttled: AtomicU64,
}

impl Backoff {
    pub fn new(cfg: AuthBackoff) -> Self {
        Backoff {
            cfg,
            clients: Mutex::new(HashMap::new()),
            failures: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
        }
    }

    /// How long `client` must still wait, if it must.
    pub fn waiting(&self, client: IpAddr) -> Option<Duration> {
        let client = group(client);
        let now = Instant::now();
        let wait = self
            .lock()
            .get(&client)
            .and_then(|f| f.until)
            .and_then(|until| until.checked_duration_since(now))
            .filter(|d| !d.is_zero());
        if wait.is_some() {
            self.throttled.fetch_add(1, Ordering::Relaxed);
        }
        wait
    }

    /// Counts a failed check of `client`.
    pub fn failed(&self, client: IpAddr) {
        let client = group(client);
        self.failures.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let mut clients = self.lock();
        if clients.len() >= MAX_CLIENTS && !clients.contains_key(&client) {
            // Those that need not wait go first, then the one quiet longest.
            clients.retain(|_, f| f.until.is_some_and(|u| u > now));
            if clients.len() >= MAX_CLIENTS {
                let oldest = clients
                    .iter()
                    .min_by_key(|(_, f)| f.last)
                    .map(|(ip, _)| *ip);
                if let Some(ip) = oldest {
                    clients.remove(&ip);
                }
            }
        }
        let f = clients.entry(client).or_insert(Failures {
            count: 0,
            last: now,
            until: None,
        });
        // A client quiet for longer than the longest wait starts afresh.
        if now.duration_since(f.last) > self.cfg.max_wait * 2 {
            f.count = 0;
        }
        f.count = f.count.saturating_add(1);
        f.last = now;
        if let Some(over) = f
            .count
            .checked_sub(self.cfg.free_failures.saturating_add(1))
        {
            let wait = Duration::from_secs(1)
                .saturating_mul(1u32 << over.min(20))
                .min(self.cfg.max_wait);
            f.until = Some(now + wait);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Failures>> {
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The key a client is counted under: its IPv4 address, or its IPv6 /64.
fn group(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(prefix.into())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_waits_after_its_free_failures_and_others_do_not() {
        let b = Backoff::new(AuthBackoff {
            free_failures: 2,
            max_wait: Duration::from_secs(4),
        });
        let (bad, good): (IpAddr, IpAddr) =
            ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        b.failed(bad);
        b.failed(bad);
        assert!(b.waiting(bad).is_none(), "two free failures");
        b.failed(bad);
        let first = b.waiting(bad).unwrap();
        assert!(first <= Duration::from_secs(1));
        for _ in 0..10 {
            b.failed(bad);
        }
        assert!(
            b.waiting(bad).unwrap() > Duration::from_secs(3),
            "capped at 4s"
        );
        assert!(b.waiting(good).is_none());
        assert_eq!(b.failures.load(Ordering::Relaxed), 13);
        // One host's IPv6 /64 is one client.
        let (one, other): (IpAddr, IpAddr) = (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::ffff:2".parse().unwrap(),
        );
        for _ in 0..3 {
            b.failed(one);
        }
        assert!(b.waiting(other).is_some());
    }
}
