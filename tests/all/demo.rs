//! `weir demo`'s alerts must equal those of an independent native reference
//! scorer over the same generated payments: the rules, and the velocity rule
//! kept in the host's state across epochs.

use std::collections::BTreeMap;
use weir_cli::demo::{self, DemoOperator, DemoOptions};
use weir_connectors::generator::payments as generator;
use weir_engine::config::PipelineConfig;

/// A row-at-a-time scorer written from the rule definitions, sharing no code
/// with the operator: (txn_id → (score, reasons)). Velocity: more than
/// `max_payments` payments of the card in `(ts - window_ms, ts]` or, with
/// `tumbling` (Spark's final-count semantics), in the payment's window
/// `[start, start + window_ms)` as a whole.
fn reference(
    payments: &[generator::Payment],
    rules: &serde_json::Value,
    tumbling: bool,
) -> BTreeMap<String, (f64, String)> {
    let velocity = &rules["velocity"];
    let window = velocity["window_ms"].as_i64().unwrap();
    let max = velocity["max_payments"].as_u64().unwrap() as usize;
    let mut by_card: std::collections::HashMap<&str, Vec<i64>> = Default::default();
    let threshold = rules["alert_threshold"].as_f64().unwrap();
    let list = |v: &serde_json::Value, key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let window_of = |p: &generator::Payment| (p.card_id.clone(), p.ts.div_euclid(window));
    let mut final_counts: std::collections::HashMap<(String, i64), usize> = Default::default();
    for p in payments {
        *final_counts.entry(window_of(p)).or_default() += 1;
    }
    // Windows the watermark (10 s behind the last payment) never closed
    // are never emitted.
    let final_mark = payments.iter().map(|p| p.ts).max().unwrap_or(0) - 10_000;
    let mut out = BTreeMap::new();
    for p in payments {
        if tumbling && (p.ts.div_euclid(window) + 1) * window > final_mark {
            continue;
        }
        let (mut score, mut reasons) = (0.0, Vec::new());
        for r in rules["rules"].as_array().unwrap() {
            let name = r["rule"].as_str().unwrap();
            let fires = match name {
                "amount_above" => p.amount_cents() > cents(&r["threshold"]),
                "country_mismatch" => p.country != p.card_country,
                "merchant_in" => list(r, "merchants").contains(&p.merchant_id),
                "currency_not_in" => !list(r, "currencies").contains(&p.currency),
                other => panic!("reference scorer does not know rule {other}"),
            };
            if fires {
                score += r["weight"].as_f64().unwrap();
                reasons.push(name);
            }
        }
        let times = by_card.entry(&p.card_id).or_default();
        times.push(p.ts);
        let count = if tumbling {
            final_counts[&window_of(p)]
        } else {
            times
                .iter()
                .filter(|&&t| t > p.ts - window && t <= p.ts)
                .count()
        };
        if count > max {
            score += velocity["weight"].as_f64().unwrap();
            reasons.push("velocity");
        }
        if !reasons.is_empty() && score >= threshold {
            out.insert(p.txn_id.clone(), (score, reasons.join(",")));
        }
    }
    out
}

/// A config amount (`2500.0`, `"2500.00"`) in cents.
fn cents(v: &serde_json::Value) -> i64 {
    let text = match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let fraction = format!("{fraction:0<2}");
    assert!(fraction.trim_end_matches('0').len() <= 2, "{text}");
    whole.parse::<i64>().unwrap() * 100 + fraction[..2].parse::<i64>().unwrap()
}

/// How the files sink writes a `timestamp(ms, UTC)` of the demo's first
/// day (2026-01-01): RFC 3339, the fraction only when non-zero.
fn rfc3339_ms(ms: i64) -> String {
    let of_day = ms - generator::START_MS;
    assert!(
        (0..86_400_000).contains(&of_day),
        "{ms} is not on 2026-01-01"
    );
    let (secs, millis) = (of_day / 1000, of_day % 1000);
    let fraction = match millis {
        0 => String::new(),
        m => format!(".{m:03}"),
    };
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    format!("2026-01-01T{h:02}:{m:02}:{s:02}{fraction}Z")
}

#[test]
fn demo_alerts_equal_the_native_reference() {
    demo_matches_the_reference(DemoOperator::Velocity, 3);
}

#[test]
fn demo_with_windows_scores_each_window_with_its_final_count() {
    // Three data epochs and the final no-data one that closes the last
    // windows.
    demo_matches_the_reference(DemoOperator::Windows, 4);
}

#[test]
fn the_model_demo_catches_the_takeovers_the_rules_miss() {
    let run = |operator| {
        let dir = tempfile::tempdir().unwrap();
        let opts = DemoOptions {
            dir: Some(dir.path().to_path_buf()),
            payments: 60_000,
            files: 6,
            files_per_epoch: 2,
            operator,
            ..DemoOptions::default()
        };
        demo::run(&opts, &mut |_| {}).unwrap()
    };
    let kind = |r: &demo::DemoReport, name: &str| {
        let k = r.by_kind.iter().find(|k| k.kind == name).unwrap();
        (k.caught, k.planted)
    };
    let (rules, model) = (run(DemoOperator::Velocity), run(DemoOperator::Model));
    let (rules_caught, takeovers) = kind(&rules, "takeover");
    assert!(takeovers >= 100, "{takeovers} takeovers planted");
    assert_eq!(rules_caught, 0, "the rules see no takeover");
    let (caught, _) = kind(&model, "takeover");
    assert!(
        caught * 10 >= takeovers * 9,
        "the model: {caught} of {takeovers}"
    );
    // ...and still what the rules were written for, nearly all of it.
    for other in ["large_abroad", "bad_merchant", "burst"] {
        let (caught, planted) = kind(&model, other);
        assert!(
            caught * 100 >= planted * 95,
            "{other}: {caught} of {planted}"
        );
    }
    let false_alarms = |r: &demo::DemoReport| {
        r.alerts.len() as u64 - r.by_kind.iter().map(|k| k.caught).sum::<u64>()
    };
    assert!(
        false_alarms(&model) <= false_alarms(&rules),
        "the model raises no more false alarms than the rules ({} vs {})",
        false_alarms(&model),
        false_alarms(&rules)
    );
    assert_eq!(
        model.scored, 60_000,
        "every payment's score reaches the lake"
    );
}

fn demo_matches_the_reference(operator: DemoOperator, epochs_expected: u64) {
    let dir = tempfile::tempdir().unwrap();
    let opts = DemoOptions {
        dir: Some(dir.path().to_path_buf()),
        payments: 60_000,
        files: 6,
        files_per_epoch: 2,
        operator,
        ..DemoOptions::default()
    };
    let mut epochs = 0;
    let report = demo::run(&opts, &mut |_| epochs += 1).unwrap();
    assert_eq!(epochs, epochs_expected);
    assert_eq!(report.rows_in, 60_000);

    let cfg = PipelineConfig::load(&report.pipeline_file).unwrap();
    let rules: serde_json::Value = serde_json::from_str(&cfg.operator.config_json).unwrap();
    let payments: Vec<_> = (0..opts.payments)
        .map(|i| generator::payment(opts.seed, i).0)
        .collect();
    let expected = reference(&payments, &rules, operator == DemoOperator::Windows);

    let actual: BTreeMap<String, (f64, String)> = report
        .alerts
        .iter()
        .map(|a| (a.txn_id.clone(), (a.score, a.reasons.clone())))
        .collect();
    assert_eq!(actual.len(), report.alerts.len(), "no alert twice");
    assert!(
        expected.len() > 100,
        "the generator plants enough fraud: {}",
        expected.len()
    );
    assert_eq!(
        actual.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (id, (score, reasons)) in &expected {
        let (s, r) = &actual[id];
        assert_eq!(r, reasons, "{id}");
        assert!((s - score).abs() < 1e-9, "{id}: {s} vs {score}");
    }
    // Money and time reach the alerts exactly as typed: the decimal with
    // its two places, the instant in RFC 3339.
    let by_id: std::collections::HashMap<&str, &generator::Payment> =
        payments.iter().map(|p| (p.txn_id.as_str(), p)).collect();
    for a in &report.alerts {
        let p = by_id[a.txn_id.as_str()];
        let c = p.amount_cents();
        assert_eq!(
            a.amount,
            format!("{}.{:02}", c / 100, c % 100),
            "{}",
            a.txn_id
        );
        assert_eq!(a.ts, rfc3339_ms(p.ts), "{}", a.txn_id);
    }
    // Every planted fraud is caught (with windows, every one in a window
    // the watermark closed).
    let open_planted = (0..opts.payments)
        .map(|i| generator::payment(opts.seed, i))
        .filter(|(p, planted)| {
            planted.is_some_and(|k| k.rules_catch()) && !expected.contains_key(&p.txn_id)
        })
        .count() as u64;
    if operator == DemoOperator::Velocity {
        assert_eq!(open_planted, 0);
    }
    assert!(
        open_planted < 5,
        "{open_planted} planted in the last window"
    );
    assert_eq!(
        report.planted_caught,
        report.planted - open_planted,
        "every planted fraud is caught"
    );
    let bursts = report
        .alerts
        .iter()
        .filter(|a| a.reasons.contains("velocity"));
    assert!(bursts.count() >= 3 * 20, "the planted bursts are flagged");

    // The summary names where the alerts are.
    let text = demo::summary_text(&report);
    assert!(
        text.contains(&report.alerts_dir.display().to_string()),
        "{text}"
    );
}
