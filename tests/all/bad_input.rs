//! Malformed input under both policies, and bad configuration through the
//! real `weir` binary: every error names the file and line or the key.

use crate::common::{guest, pipeline_toml, sink_files, DEMO_RULES_INLINE};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use weir_host::WasmHost;

const GOOD: &str = r#"{"txn_id":"t1","card_id":"c1","merchant_id":"m-0666","amount":3000.5,"currency":"USD","country":"US","card_country":"US","ts":1,"device_id":null}"#;
const GOOD2: &str = r#"{"txn_id":"t4","card_id":"c1","merchant_id":"m-0777","amount":10.0,"currency":"USD","country":"US","card_country":"US","ts":4}"#;

fn write_mixed_input(dir: &Path) {
    let input = dir.join("input");
    std::fs::create_dir_all(&input).unwrap();
    let lines = [
        GOOD,
        r#"{"txn_id":"t2","card_id":"c1","merchant_id""#, // line 2: truncated
        r#"{"txn_id":"t3","card_id":"c1","amount":"lots","ts":3}"#, // line 3: wrong type, missing fields
        "",                                                         // blank lines are fine
        GOOD2,                                                      // line 5
        r#"[1, 2, 3]"#,                                             // line 6: not an object
    ];
    std::fs::write(input.join("mixed.jsonl"), lines.join("\n")).unwrap();
}

fn open_and_run(dir: &Path, extra_source: &str) -> anyhow::Result<()> {
    let host = WasmHost::new(None)?;
    let toml = pipeline_toml(
        dir,
        &guest("fraud_rules"),
        DEMO_RULES_INLINE,
        extra_source,
        "",
    );
    let mut p = crate::common::open_pipeline(dir, &toml, &host)?;
    p.run(&host, &AtomicBool::new(false), &mut |_| {})?;
    Ok(())
}

/// Runs the pipeline in `dir` with `on_malformed = "dead-letter"`; returns
/// its dead-letter directory.
fn run_setting_aside(dir: &Path) -> std::path::PathBuf {
    let dlq = dir.join("dlq");
    open_and_run(
        dir,
        &format!(
            "on_malformed = \"dead-letter\"\ndead_letter = \"{}\"",
            dlq.display()
        ),
    )
    .unwrap();
    dlq
}

#[test]
fn malformed_line_fails_the_epoch_naming_file_and_line_by_default() {
    let dir = tempfile::tempdir().unwrap();
    write_mixed_input(dir.path());
    let err = open_and_run(dir.path(), "").unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("mixed.jsonl line 2"), "{text}");
    assert!(
        text.contains("dead-letter"),
        "the error says how to set lines aside: {text}"
    );
    assert!(
        !dir.path().join("checkpoint/commits/0").exists(),
        "nothing committed"
    );
    assert!(
        sink_files(&dir.path().join("out")).is_empty(),
        "nothing written"
    );
}

#[test]
fn dead_letter_policy_sets_bad_lines_aside_and_keeps_the_good_ones() {
    let dir = tempfile::tempdir().unwrap();
    write_mixed_input(dir.path());
    let dlq = run_setting_aside(dir.path());

    let letters = std::fs::read_to_string(dlq.join("epoch-0000000000.jsonl")).unwrap();
    let letters: Vec<serde_json::Value> = letters
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let lines: Vec<u64> = letters
        .iter()
        .map(|l| l["line"].as_u64().unwrap())
        .collect();
    assert_eq!(lines, vec![2, 3, 6]);
    for l in &letters {
        assert!(l["origin"].as_str().unwrap().ends_with("mixed.jsonl"));
        assert!(!l["reason"].as_str().unwrap().is_empty());
    }
    assert!(letters[1]["raw"].as_str().unwrap().contains("lots"));

    // Both good lines reached the operator: both are high-risk merchants.
    let out = sink_files(&dir.path().join("out"));
    let text: String = out
        .iter()
        .map(|(_, b)| String::from_utf8(b.clone()).unwrap())
        .collect();
    assert!(text.contains("\"t1\"") && text.contains("\"t4\""), "{text}");
    let commit = std::fs::read_to_string(dir.path().join("checkpoint/commits/0")).unwrap();
    assert!(commit.contains("\"rows_in\": 2"), "{commit}");
}

fn weir_run(config: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pipeline.toml");
    std::fs::write(&file, config).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("run")
        .arg(&file)
        .env("WEIR_LOG", "error")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn config_errors_name_the_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("input")).unwrap();
    let good = pipeline_toml(dir.path(), &guest("fraud_rules"), DEMO_RULES_INLINE, "", "");

    let (ok, err) = weir_run(&good.replace("name = \"test\"\n", ""));
    assert!(!ok && err.contains("missing field `name`"), "{err}");

    let (ok, err) =
        weir_run(&good.replace("max_files_per_trigger = 1", "max_files_per_trigger = 0"));
    assert!(!ok && err.contains("source.max_files_per_trigger"), "{err}");

    let (ok, err) =
        weir_run(&good.replace("max_files_per_trigger = 1", "max_files_per_triger = 1"));
    assert!(!ok && err.contains("max_files_per_triger"), "{err}");

    let (ok, err) = weir_run(&good.replace("mode = \"available-now\"", "mode = \"sometimes\""));
    assert!(!ok && err.contains("sometimes"), "{err}");

    let (ok, err) = weir_run(&good.replace(
        &format!("path = \"{}\"", guest("fraud_rules").display()),
        "path = \"/nonexistent/op.wasm\"",
    ));
    assert!(!ok && err.contains("/nonexistent/op.wasm"), "{err}");

    let (ok, err) = weir_run("this is not toml");
    assert!(!ok && err.contains("pipeline.toml"), "{err}");

    // The source directory does not exist.
    std::fs::remove_dir(dir.path().join("input")).unwrap();
    let (ok, err) = weir_run(&good);
    assert!(!ok && err.contains("source directory"), "{err}");
}

/// Dead letters of a one-epoch run over `lines` (one file), as (line, raw).
fn dead_letters_of(lines: &[&str]) -> Vec<(u64, String)> {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("f.jsonl"), lines.join("\n")).unwrap();
    open_and_run(dir.path(), "on_malformed = \"dead-letter\"").unwrap();
    let path = dir
        .path()
        .join("checkpoint/dead-letter/epoch-0000000000.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["line"].as_u64().unwrap(),
                v["raw"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_record_is_judged_alone_whatever_its_neighbours_look_like() {
    // A pretty-printed object spans lines: each of its lines is a record of
    // its own in JSON lines, alone or next to a malformed line.
    let pretty =
        serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(GOOD2).unwrap())
            .unwrap();
    let pretty_lines: Vec<&str> = pretty.lines().collect();
    let alone = dead_letters_of(&[&[GOOD], pretty_lines.as_slice()].concat());
    let with_bad = dead_letters_of(&[&[GOOD, "{oops"], pretty_lines.as_slice()].concat());
    assert_eq!(alone.len(), pretty_lines.len(), "{alone:?}");
    assert_eq!(with_bad.len(), pretty_lines.len() + 1, "{with_bad:?}");
    // The same lines of the object, shifted by the one bad line.
    let shifted: Vec<(u64, String)> = with_bad[1..]
        .iter()
        .map(|(l, raw)| (l - 1, raw.clone()))
        .collect();
    assert_eq!(shifted, alone);
    // Two objects on one line are one malformed record, not two rows.
    let two = format!("{GOOD}{GOOD2}");
    assert_eq!(dead_letters_of(&[GOOD, &two]).len(), 1);
}

#[test]
fn lossy_numbers_are_malformed_not_truncated() {
    let base: serde_json::Value = serde_json::from_str(GOOD2).unwrap();
    let with = |key: &str, raw: &str| {
        let mut text = serde_json::to_string(&base).unwrap();
        let old = format!("\"{key}\":{}", base[key]);
        text = text.replace(&old, &format!("\"{key}\":{raw}"));
        assert_ne!(text, serde_json::to_string(&base).unwrap(), "{key}");
        text
    };
    for (key, raw) in [
        ("ts", "1700000000000.9"),
        ("ts", "1e3"),
        ("ts", "9223372036854775808"),
        ("amount", "-1e400"),
        ("amount", "1e999"),
    ] {
        let line = with(key, raw);
        let letters = dead_letters_of(&[GOOD, &line]);
        assert_eq!(letters.len(), 1, "{key} = {raw} was accepted: {letters:?}");
        assert_eq!(letters[0].0, 2);
    }
    // Exact values still pass.
    assert!(dead_letters_of(&[GOOD, &with("ts", "1700000000000")]).is_empty());
    assert!(dead_letters_of(&[GOOD, &with("amount", "1e3")]).is_empty());
}

#[test]
fn files_changed_after_planning_are_reported_and_settle_waits_for_writers() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    let toml = pipeline_toml(
        dir.path(),
        &guest("fraud_rules"),
        DEMO_RULES_INLINE,
        "settle = \"1s\"",
        "",
    );
    let host = WasmHost::new(None).unwrap();
    let epochs = |p: &mut weir_engine::pipeline::Pipeline| {
        let mut seen = Vec::new();
        p.run(&host, &AtomicBool::new(false), &mut |e| {
            seen.push(e.clone())
        })
        .unwrap();
        seen
    };
    let mut p = crate::common::open_pipeline(dir.path(), &toml, &host).unwrap();
    // Written after the pipeline opened (loading the operator can take a
    // second on a loaded machine): not settled, so not planned yet.
    std::fs::write(input.join("a.jsonl"), format!("{GOOD}\n")).unwrap();
    assert!(epochs(&mut p).is_empty());
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    let first = epochs(&mut p);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].rows_in, 1);
    // Appended after it was planned: never read, but counted and warned.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(input.join("a.jsonl"))
        .unwrap();
    std::io::Write::write_all(&mut f, format!("{GOOD2}\n").as_bytes()).unwrap();
    std::fs::write(input.join("b.jsonl"), format!("{GOOD2}\n")).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1_100));
    let second = epochs(&mut p);
    assert_eq!(second.len(), 1);
    let backlog = second[0].backlog.unwrap();
    assert_eq!(backlog.changed_files, Some(1), "{backlog:?}");
    assert_eq!(second[0].rows_in, 1, "only b.jsonl");
}

/// A Parquet input file that cannot be read (here: a corrupt footer)
/// under `on_malformed = "dead-letter"` is one dead letter naming the file
/// and the reason; the epoch commits and later files are read.
#[test]
fn an_unreadable_parquet_file_is_a_dead_letter_and_later_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    let mut junk = b"PAR1 not really parquet".to_vec();
    junk.extend_from_slice(b"\x00\x00\x00\x10PAR1");
    std::fs::write(input.join("a-broken.parquet"), &junk).unwrap();
    crate::common::date_as_input(&input.join("a-broken.parquet"), 0);
    std::fs::write(input.join("b-good.jsonl"), GOOD).unwrap();
    crate::common::date_as_input(&input.join("b-good.jsonl"), 1);
    let dlq = run_setting_aside(dir.path());
    let letters = std::fs::read_to_string(dlq.join("epoch-0000000000.jsonl")).unwrap();
    let letter: serde_json::Value = serde_json::from_str(letters.trim()).unwrap();
    assert!(
        letter["origin"]
            .as_str()
            .unwrap()
            .ends_with("a-broken.parquet"),
        "{letter}"
    );
    assert!(
        letter["reason"].as_str().unwrap().contains("unreadable"),
        "{letter}"
    );
    let commits = dir.path().join("checkpoint/commits");
    assert!(commits.join("1").exists(), "the epoch after it ran");
    let text: String = sink_files(&dir.path().join("out"))
        .iter()
        .map(|(_, b)| String::from_utf8(b.clone()).unwrap())
        .collect();
    assert!(text.contains("\"t1\""), "the later file was scored: {text}");

    // Under the default policy the same file fails the epoch, by name.
    let strict = tempfile::tempdir().unwrap();
    let input = strict.path().join("input");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("a-broken.parquet"), &junk).unwrap();
    crate::common::date_as_input(&input.join("a-broken.parquet"), 0);
    let err = format!("{:#}", open_and_run(strict.path(), "").unwrap_err());
    assert!(err.contains("a-broken.parquet"), "{err}");
}
