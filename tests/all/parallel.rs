//! Parallel tasks (`parallelism`, `key`): the same pipeline at 1, 2 and 4
//! tasks gives the same output rows (as a multiset) and the same state;
//! changing the task count between runs carries the state on; a SIGKILLed
//! run with 2 tasks ends as an uninterrupted one; and an operator whose
//! state keys are not the routing key fails its epoch, naming the key.
//!
//! `sandbox-tests` in `count` mode keys its state by `card_id`, so routing
//! by `card_id` gives each task its own cards; the expected counts are
//! computed natively ([`crate::state::expected_counts`]).

use crate::common::{guest, pipeline_toml, sink_files, sorted_rows, write_input, VELOCITY_CONFIG};
use crate::state::{count_toml, expected_counts, output_counts, state_dump, write_files};
use std::path::Path;

/// The top-level keys that make the pipeline parallel, in front of the file
/// (TOML wants them before any table).
fn tasks(parallelism: u16, key: &str) -> String {
    format!("parallelism = {parallelism}\nkey = \"{key}\"\n")
}

fn run(dir: &Path, toml: &str) -> anyhow::Result<Vec<weir_core::progress::EpochProgress>> {
    crate::common::run_epochs(dir, toml)
}

#[test]
fn parallelism_1_2_and_4_give_the_same_rows_and_state() {
    let mut runs = Vec::new();
    for n in [1u16, 2, 4] {
        let dir = tempfile::tempdir().unwrap();
        write_files(dir.path(), 0, 6);
        let toml = tasks(n, "card_id") + &count_toml(dir.path(), "");
        let epochs = run(dir.path(), &toml).unwrap();
        assert_eq!(epochs.len(), 6);
        let e = &epochs[0];
        if n == 1 {
            assert!(e.tasks.is_empty(), "one task reports no split");
        } else {
            assert_eq!(e.tasks.len(), usize::from(n));
            assert_eq!(e.tasks.iter().map(|t| t.rows_in).sum::<u64>(), e.rows_in);
            assert!(e.tasks.iter().all(|t| t.rows_in > 0), "{:?}", e.tasks);
        }
        assert_eq!(output_counts(dir.path()), expected_counts(6), "{n} tasks");
        let files: Vec<String> = sink_files(&dir.path().join("out"))
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        for task in 1..n {
            let own = format!("epoch-0000000000-task-{task:03}.jsonl");
            assert!(files.contains(&own), "task {task} wrote {own}: {files:?}");
        }
        runs.push((n, sorted_rows(dir.path()), state_dump(dir.path()), dir));
    }
    let (_, rows, state, _) = &runs[0];
    assert!(!state.is_empty());
    for (n, r, s, _) in &runs[1..] {
        assert!(r == rows, "{n} tasks: other output rows");
        assert!(s == state, "{n} tasks: other state");
    }
}

#[test]
fn fraud_velocity_alerts_alike_at_every_parallelism() {
    let mut outputs = Vec::new();
    for n in [1u16, 2, 4] {
        let dir = tempfile::tempdir().unwrap();
        write_input(dir.path(), 7, 4, 3_000);
        let toml = tasks(n, "card_id")
            + &pipeline_toml(
                dir.path(),
                &guest("fraud_velocity"),
                VELOCITY_CONFIG,
                "",
                "",
            );
        run(dir.path(), &toml).unwrap();
        outputs.push(sorted_rows(dir.path()));
    }
    assert!(
        outputs[0].iter().any(|r| r.contains("velocity")),
        "velocity alerts raised"
    );
    assert!(outputs[1] == outputs[0], "2 tasks differ from 1");
    assert!(outputs[2] == outputs[0], "4 tasks differ from 1");
}

#[test]
fn rescaling_2_to_1_to_3_carries_the_counts_on() {
    let dir = tempfile::tempdir().unwrap();
    let base = count_toml(dir.path(), "");
    for (step, n) in [2u16, 1, 3].into_iter().enumerate() {
        write_files(dir.path(), step as u64 * 2, 2);
        let epochs = run(dir.path(), &(tasks(n, "card_id") + &base)).unwrap();
        assert_eq!(epochs.len(), 2, "step {step}");
        assert!(epochs.iter().all(|e| !e.replay));
    }
    let counts = output_counts(dir.path());
    assert_eq!(counts, expected_counts(6));
    assert!(counts.values().any(|&n| n > 2), "counts span the runs");
    // The same input at one task, in one run, ends with the same state.
    let single = tempfile::tempdir().unwrap();
    write_files(single.path(), 0, 6);
    run(single.path(), &count_toml(single.path(), "")).unwrap();
    assert!(state_dump(dir.path()) == state_dump(single.path()));
}

#[test]
fn a_replay_divides_its_epoch_as_offsets_recorded_whatever_the_new_parallelism() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), 0, 3);
    let base = count_toml(dir.path(), "");
    run(dir.path(), &(tasks(2, "card_id") + &base)).unwrap();
    let before = sink_files(&dir.path().join("out"));
    let names: Vec<&str> = before.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.contains(&"epoch-0000000002-task-001.jsonl"),
        "{names:?}"
    );
    let offsets: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("checkpoint/offsets/2")).unwrap())
            .unwrap();
    assert_eq!(
        offsets["tasks"],
        serde_json::json!({ "count": 2, "key": "card_id" })
    );

    // A crash after every task's share of epoch 2 was written, before
    // commits/2; the restart asks for 3 tasks.
    std::fs::remove_file(dir.path().join("checkpoint/commits/2")).unwrap();
    let epochs = run(dir.path(), &(tasks(3, "card_id") + &base)).unwrap();
    assert_eq!((epochs[0].epoch, epochs[0].replay), (2, true));
    assert_eq!(epochs[0].tasks.len(), 2, "the replay ran as offsets/2 says");
    assert!(
        sink_files(&dir.path().join("out")) == before,
        "each task's file rewritten with its own rows, no third share"
    );
    assert_eq!(output_counts(dir.path()), expected_counts(3));

    // New epochs take up the new parallelism.
    write_files(dir.path(), 3, 1);
    let epochs = run(dir.path(), &(tasks(3, "card_id") + &base)).unwrap();
    assert_eq!((epochs[0].epoch, epochs[0].tasks.len()), (3, 3));
    assert_eq!(output_counts(dir.path()), expected_counts(4));
}

#[test]
fn sigkill_with_two_tasks_leaves_the_state_and_output_of_an_uninterrupted_run() {
    crate::state::killed_runs_end_as_an_uninterrupted_one("parallelism = 2\nkey = \"card_id\"\n");
}

#[test]
fn a_state_key_another_task_owns_fails_the_epoch_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), 0, 1);
    // Rows routed by merchant, state keyed by card: a task meets cards
    // whose key group another task owns.
    let toml = tasks(2, "merchant_id") + &count_toml(dir.path(), "");
    let err = format!("{:#}", run(dir.path(), &toml).unwrap_err());
    for part in [
        "used keyed state another task owns",
        "state key \"",
        "is in key group",
        "which task",
        "of 2 owns",
        "the rows whose `merchant_id` is in key groups",
        "key the operator's state by `merchant_id`",
    ] {
        assert!(err.contains(part), "missing {part:?} in: {err}");
    }
    assert!(!dir.path().join("checkpoint/commits/0").exists());
    assert!(state_dump(dir.path()).is_empty(), "nothing committed");
    assert!(sink_files(&dir.path().join("out")).is_empty() || !dir.path().join("out").exists());
}

#[test]
fn a_bad_parallelism_or_key_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path(), 0, 1);
    let base = count_toml(dir.path(), "");
    let err = |toml: String| format!("{:#}", run(dir.path(), &toml).unwrap_err());
    let e = err(format!("parallelism = 0\n{base}"));
    assert!(e.contains("`parallelism` must be between 1 and 128"), "{e}");
    let e = err(tasks(2, "no_such_column") + &base);
    assert!(
        e.contains("`key` = \"no_such_column\" is not an input column"),
        "{e}"
    );
    assert!(e.contains("card_id"), "lists the columns: {e}");
    let e = err(tasks(2, "amount") + &base);
    assert!(e.contains("must be text (utf8) or int64"), "{e}");
}
