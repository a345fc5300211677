//! The ground the workers stand on: Kafka's consumer-group protocol
//! (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), through librdkafka,
//! against tansu, the test broker. Workers take partition ownership from
//! it; this checks that members share a topic's partitions disjointly,
//! and that the partitions of a member that leaves or dies move to the
//! others.

use crate::common::broker::Broker;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

const TOPIC: &str = "payments";
const PARTITIONS: i32 = 6;

/// A member of `group` subscribed to [`TOPIC`]: a 6 s session timeout,
/// heartbeats every 500 ms, round-robin assignment.
fn subscribed(bootstrap: &str, group: &str) -> BaseConsumer {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .set("heartbeat.interval.ms", "500")
        .set("partition.assignment.strategy", "roundrobin")
        .create()
        .unwrap();
    c.subscribe(&[TOPIC]).unwrap();
    c
}

fn member(broker: &Broker, group: &str) -> BaseConsumer {
    subscribed(&broker.bootstrap(), group)
}

fn owned(c: &BaseConsumer) -> BTreeSet<i32> {
    c.assignment()
        .unwrap()
        .elements()
        .iter()
        .map(|e| e.partition())
        .collect()
}

/// Polls every member until `settled` holds for their assignments.
fn poll_until(
    members: &[&BaseConsumer],
    what: &str,
    settled: impl Fn(&[BTreeSet<i32>]) -> bool,
) -> Duration {
    let start = Instant::now();
    loop {
        for m in members {
            let _ = m.poll(Duration::from_millis(50));
        }
        let owned: Vec<_> = members.iter().map(|m| owned(m)).collect();
        if settled(&owned) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(90),
            "{what}: assignments still {owned:?}"
        );
    }
}

/// Every partition owned by exactly one member, and every member owns some.
fn disjoint_cover(owned: &[BTreeSet<i32>]) -> bool {
    let all: Vec<i32> = owned.iter().flatten().copied().collect();
    let distinct: BTreeSet<i32> = all.iter().copied().collect();
    owned.iter().all(|o| !o.is_empty())
        && all.len() == PARTITIONS as usize
        && distinct == (0..PARTITIONS).collect()
}

#[test]
#[ignore = "needs tansu"]
fn the_consumer_group_protocol_moves_partitions_between_members() {
    let broker = Broker::start();
    broker.create_topic(TOPIC, PARTITIONS as u32);
    let (a, b) = (member(&broker, "weir-g"), member(&broker, "weir-g"));
    let took = poll_until(&[&a, &b], "two members", disjoint_cover);
    eprintln!("two members share the partitions after {took:?}");
    let c = member(&broker, "weir-g");
    let took = poll_until(&[&a, &b, &c], "a third joins", disjoint_cover);
    eprintln!("three members after {took:?}");
    drop(c); // closes: LeaveGroup
    let took = poll_until(&[&a, &b], "the third left", disjoint_cover);
    eprintln!("the third's partitions moved after it left, in {took:?}");
}

/// Set in a child copy of this test binary: the bootstrap address it joins
/// the group through, as a member process that can be killed or stopped.
const MEMBER_ENV: &str = "WEIR_TEST_GROUP_MEMBER";

/// Not a test of its own: the body of a member process (see
/// [`member_process`]); returns at once unless [`MEMBER_ENV`] is set.
#[test]
#[ignore = "run as a child process by the tests below"]
fn group_member_process() {
    let Ok(bootstrap) = std::env::var(MEMBER_ENV) else {
        return;
    };
    let c = subscribed(&bootstrap, "weir-g");
    loop {
        let _ = c.poll(Duration::from_millis(50));
    }
}

/// A member of group `weir-g` in a process of its own.
fn member_process(broker: &Broker) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "cluster::group_member_process",
            "--ignored",
            "--nocapture",
        ])
        .env(MEMBER_ENV, broker.bootstrap())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Polls `survivors` until they alone own every partition.
fn survivors_own_all(survivors: &[&BaseConsumer], what: &str) -> Duration {
    poll_until(survivors, what, |owned| {
        owned.iter().map(BTreeSet::len).sum::<usize>() == PARTITIONS as usize
            && disjoint_cover(owned)
    })
}

/// What workers need for failover: a member killed without LeaveGroup, or
/// stopped past its session timeout, loses its partitions to the others.
/// tansu 0.6.0 as published dropped the dead member but never rebalanced;
/// scripts/install-tansu.sh builds it with our fix
/// (scripts/tansu-0.6.0-group-expiry.patch). About 9 s here: the 6 s
/// session timeout, then a rebalance.
#[test]
#[ignore = "needs tansu"]
fn a_dead_or_stopped_member_loses_its_partitions_after_the_session_timeout() {
    let broker = Broker::start();
    broker.create_topic(TOPIC, PARTITIONS as u32);
    let (a, b) = (member(&broker, "weir-g"), member(&broker, "weir-g"));
    // A third member in its own process: the survivors see their share shrink.
    let mut child = member_process(&broker);
    poll_until(&[&a, &b], "the child joins", |owned| {
        owned.iter().map(BTreeSet::len).sum::<usize>() < PARTITIONS as usize
            && owned.iter().all(|o| !o.is_empty())
    });
    child.kill().unwrap(); // SIGKILL: no LeaveGroup
    child.wait().unwrap();
    let log = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        survivors_own_all(&[&a, &b], "after kill -9")
    }));
    let took = log.unwrap_or_else(|e| {
        eprintln!("broker log:\n{}", broker.log());
        std::panic::resume_unwind(e)
    });
    eprintln!("kill -9: the dead member's partitions moved after {took:?}");

    let child = member_process(&broker);
    poll_until(&[&a, &b], "a new child joins", |owned| {
        owned.iter().map(BTreeSet::len).sum::<usize>() < PARTITIONS as usize
            && owned.iter().all(|o| !o.is_empty())
    });
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGSTOP) };
    let took = survivors_own_all(&[&a, &b], "after SIGSTOP");
    eprintln!("SIGSTOP: the stopped member's partitions moved after {took:?}");
    let mut child = child;
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGCONT) };
    let _ = child.kill();
    child.wait().unwrap();
}
