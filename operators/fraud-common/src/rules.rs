//! The scoring logic, free of any Wasm or Arrow types so that the very same
//! code runs inside the sandbox and natively (the benchmark's baseline).

use serde::Deserialize;
use weir_sdk::{same_bytes, ByteSet, Decimal};

/// A payment's amount as its batch holds it: an exact decimal (a
/// `decimal(P,S)` column) or a float (a `float64` column, from schemas that
/// predate exact money).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    Exact(Decimal),
    Float(f64),
}

/// An amount limit from the config, held exactly and as the nearest float,
/// so a decimal amount is compared with it exactly and a float amount as
/// before.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    exact: Decimal,
    float: f64,
}

/// A limit as the config spells it: a number (`2500`, `2500.5`: the digits
/// written, which a float's shortest form keeps) or a string
/// (`"2500.005"`, for more digits than a float keeps).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum LimitValue {
    Text(String),
    Number(f64),
}

impl Limit {
    /// The limit `value` spells, or why it is not an amount.
    pub fn new(value: &LimitValue) -> Result<Limit, String> {
        let text = match value {
            LimitValue::Text(t) => t.clone(),
            LimitValue::Number(f) => format!("{f}"),
        };
        let exact: Decimal = text
            .parse()
            .map_err(|e| format!("`threshold` {text:?} is not a decimal amount: {e}"))?;
        Ok(Limit {
            exact,
            float: exact.to_f64(),
        })
    }

    /// Whether `amount` is strictly above the limit.
    #[inline]
    pub fn exceeded_by(&self, amount: Amount) -> bool {
        match amount {
            Amount::Exact(d) => d > self.exact,
            Amount::Float(f) => f > self.float,
        }
    }
}

/// Read access to a batch of payments, by row. Strings are compared as
/// UTF-8 bytes, which is all the rules need. Implemented over the SDK's
/// column readers in the guest and over Arrow arrays natively.
pub trait Payments {
    /// Rows in the batch.
    fn len(&self) -> usize;
    /// Whether the batch has no rows.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Payment amount, or `None` if null.
    fn amount(&self, row: usize) -> Option<Amount>;
    /// ISO currency code.
    fn currency(&self, row: usize) -> Option<&[u8]>;
    /// Country the payment was made in.
    fn country(&self, row: usize) -> Option<&[u8]>;
    /// Home country of the card.
    fn card_country(&self, row: usize) -> Option<&[u8]>;
    /// Merchant identifier.
    fn merchant_id(&self, row: usize) -> Option<&[u8]>;
}

/// One configurable rule. Each fired rule adds its weight to the score.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case", deny_unknown_fields)]
pub enum Rule {
    /// Fires when the amount is strictly above `threshold` (compared
    /// exactly with a decimal amount).
    AmountAbove { threshold: LimitValue, weight: f64 },
    /// Fires when the payment country differs from the card's home country.
    CountryMismatch { weight: f64 },
    /// Fires when the merchant is on the list.
    MerchantIn { merchants: Vec<String>, weight: f64 },
    /// Fires when the currency is not on the list.
    CurrencyNotIn {
        currencies: Vec<String>,
        weight: f64,
    },
}

impl Rule {
    fn name(&self) -> &'static str {
        match self {
            Rule::AmountAbove { .. } => "amount_above",
            Rule::CountryMismatch { .. } => "country_mismatch",
            Rule::MerchantIn { .. } => "merchant_in",
            Rule::CurrencyNotIn { .. } => "currency_not_in",
        }
    }

    fn weight(&self) -> f64 {
        match self {
            Rule::AmountAbove { weight, .. }
            | Rule::CountryMismatch { weight }
            | Rule::MerchantIn { weight, .. }
            | Rule::CurrencyNotIn { weight, .. } => *weight,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    alert_threshold: f64,
    rules: Vec<Rule>,
}

/// A rule compiled for fast evaluation.
#[derive(Debug, Clone)]
enum Compiled {
    AmountAbove(Limit),
    CountryMismatch,
    MerchantIn(ByteSet),
    CurrencyNotIn(ByteSet),
}

/// A payment whose score reached the alert threshold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Row in the input batch.
    pub row: usize,
    /// Sum of the weights of the fired rules.
    pub score: f64,
    /// Bit `i` set when rule `i` fired.
    pub fired: u64,
}

/// The configured rules and the alert threshold.
#[derive(Debug, Clone)]
pub struct RuleSet {
    alert_threshold: f64,
    rules: Vec<(Compiled, f64, &'static str)>,
}

impl RuleSet {
    /// Parses the operator's JSON configuration.
    pub fn from_json(config: &str) -> Result<Self, String> {
        let raw: RawConfig =
            serde_json::from_str(config).map_err(|e| format!("fraud-rules config: {e}"))?;
        Self::new(raw.alert_threshold, raw.rules)
    }

    /// Compiles `rules` (at most 63, leaving a bit for a caller's own rule).
    pub fn new(alert_threshold: f64, rules: Vec<Rule>) -> Result<Self, String> {
        if rules.is_empty() {
            return Err("fraud-rules config: `rules` is empty".into());
        }
        if rules.len() > 63 {
            return Err("fraud-rules config: at most 63 rules".into());
        }
        if !alert_threshold.is_finite() {
            return Err("fraud-rules config: `alert_threshold` must be a finite number".into());
        }
        let rules = rules
            .into_iter()
            .map(|rule| {
                let (name, weight) = (rule.name(), rule.weight());
                let compiled = match rule {
                    Rule::AmountAbove { threshold, .. } => Compiled::AmountAbove(
                        Limit::new(&threshold).map_err(|e| format!("fraud-rules config: {e}"))?,
                    ),
                    Rule::CountryMismatch { .. } => Compiled::CountryMismatch,
                    Rule::MerchantIn { merchants, .. } => {
                        Compiled::MerchantIn(ByteSet::new(merchants))
                    }
                    Rule::CurrencyNotIn { currencies, .. } => {
                        Compiled::CurrencyNotIn(ByteSet::new(currencies))
                    }
                };
                Ok((compiled, weight, name))
            })
            .collect::<Result<_, String>>()?;
        Ok(RuleSet {
            alert_threshold,
            rules,
        })
    }

    /// Number of rules; bit `len()` of `fired` is free for a caller's rule.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are no rules (never, once constructed).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The score at which a payment is alerted.
    pub fn alert_threshold(&self) -> f64 {
        self.alert_threshold
    }

    /// Scores every row and appends the ones at or above the threshold.
    ///
    /// Evaluates rule by rule over the whole batch (column at a time), not
    /// row by row: each pass is a tight loop over one or two columns, which
    /// suits the columnar input and both native and Wasm code generation.
    pub fn score_all<P: Payments>(&self, payments: &P, hits: &mut Vec<Hit>) {
        let (scores, fired) = self.score_rows(payments);
        for (row, (&score, &fired)) in scores.iter().zip(&fired).enumerate() {
            if fired != 0 && score >= self.alert_threshold {
                hits.push(Hit { row, score, fired });
            }
        }
    }

    /// Every row's score and fired-rule bits, alerting or not (for callers
    /// that add rules of their own before comparing with the threshold).
    pub fn score_rows<P: Payments>(&self, payments: &P) -> (Vec<f64>, Vec<u64>) {
        let n = payments.len();
        let mut scores = vec![0.0f64; n];
        let mut fired = vec![0u64; n];
        for (i, (rule, weight, _)) in self.rules.iter().enumerate() {
            let bit = 1u64 << i;
            let mut mark = |row: usize, fires: bool| {
                if fires {
                    scores[row] += weight;
                    fired[row] |= bit;
                }
            };
            match rule {
                Compiled::AmountAbove(t) => {
                    for row in 0..n {
                        mark(row, payments.amount(row).is_some_and(|a| t.exceeded_by(a)));
                    }
                }
                Compiled::CountryMismatch => {
                    for row in 0..n {
                        let differs = match (payments.country(row), payments.card_country(row)) {
                            (Some(a), Some(b)) => !same_bytes(a, b),
                            _ => false,
                        };
                        mark(row, differs);
                    }
                }
                Compiled::MerchantIn(set) => {
                    for row in 0..n {
                        mark(
                            row,
                            payments.merchant_id(row).is_some_and(|m| set.contains(m)),
                        );
                    }
                }
                Compiled::CurrencyNotIn(set) => {
                    for row in 0..n {
                        mark(
                            row,
                            payments.currency(row).is_some_and(|c| !set.contains(c)),
                        );
                    }
                }
            }
        }
        (scores, fired)
    }

    /// The names of the rules in `fired`, comma-separated, in config order.
    pub fn reasons(&self, fired: u64) -> String {
        let mut out = String::new();
        for (i, (_, _, name)) in self.rules.iter().enumerate() {
            if fired & (1 << i) != 0 {
                if !out.is_empty() {
                    out.push(',');
                }
                out.push_str(name);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Rows(
        Vec<(
            Amount,
            &'static str,
            &'static str,
            &'static str,
            &'static str,
        )>,
    );

    impl Payments for Rows {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn amount(&self, row: usize) -> Option<Amount> {
            Some(self.0[row].0)
        }
        fn currency(&self, row: usize) -> Option<&[u8]> {
            Some(self.0[row].1.as_bytes())
        }
        fn country(&self, row: usize) -> Option<&[u8]> {
            Some(self.0[row].2.as_bytes())
        }
        fn card_country(&self, row: usize) -> Option<&[u8]> {
            Some(self.0[row].3.as_bytes())
        }
        fn merchant_id(&self, row: usize) -> Option<&[u8]> {
            Some(self.0[row].4.as_bytes())
        }
    }

    const CONFIG: &str = r#"{"alert_threshold": 0.7, "rules": [
        {"rule": "amount_above", "threshold": 1000, "weight": 0.5},
        {"rule": "country_mismatch", "weight": 0.4},
        {"rule": "merchant_in", "merchants": ["bad"], "weight": 0.7},
        {"rule": "currency_not_in", "currencies": ["USD"], "weight": 0.2}]}"#;

    #[test]
    fn scores_and_reasons() {
        let rules = RuleSet::from_json(CONFIG).unwrap();
        let f = Amount::Float;
        let rows = Rows(vec![
            (f(5.0), "USD", "US", "US", "ok"),    // nothing fires
            (f(5000.0), "USD", "FR", "US", "ok"), // 0.9
            (f(5000.0), "USD", "US", "US", "ok"), // 0.5: below threshold
            (f(5.0), "USD", "US", "US", "bad"),   // 0.7: exactly the threshold
            (f(5000.0), "EUR", "US", "US", "ok"), // 0.7
        ]);
        let mut hits = Vec::new();
        rules.score_all(&rows, &mut hits);
        let got: Vec<(usize, String)> = hits
            .iter()
            .map(|h| (h.row, rules.reasons(h.fired)))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, "amount_above,country_mismatch".into()),
                (3, "merchant_in".into()),
                (4, "amount_above,currency_not_in".into()),
            ]
        );
        assert!((hits[0].score - 0.9).abs() < 1e-12);
    }

    #[test]
    fn decimal_amounts_are_compared_exactly() {
        let config = r#"{"alert_threshold": 0.5, "rules": [
            {"rule": "amount_above", "threshold": "1000.005", "weight": 0.5}]}"#;
        let rules = RuleSet::from_json(config).unwrap();
        let d = |s: &str| Amount::Exact(s.parse().unwrap());
        let rows = Rows(vec![
            (d("1000.00"), "USD", "US", "US", "ok"),
            (d("1000.01"), "USD", "US", "US", "ok"),
            (d("1000.005"), "USD", "US", "US", "ok"),
            (d("1000.0051"), "USD", "US", "US", "ok"),
        ]);
        let mut hits = Vec::new();
        rules.score_all(&rows, &mut hits);
        let rows: Vec<usize> = hits.iter().map(|h| h.row).collect();
        assert_eq!(rows, vec![1, 3]);
        let err = RuleSet::from_json(
            r#"{"alert_threshold": 1, "rules": [{"rule": "amount_above", "threshold": "1e3", "weight": 1}]}"#,
        )
        .unwrap_err();
        assert!(err.contains("not a decimal amount"), "{err}");
    }

    #[test]
    fn bad_configs_say_what_is_wrong() {
        let err = RuleSet::from_json(r#"{"alert_threshold": 1, "rules": []}"#).unwrap_err();
        assert!(err.contains("`rules` is empty"), "{err}");
        let err = RuleSet::from_json(
            r#"{"alert_threshold": 1, "rules": [{"rule": "nope", "weight": 1}]}"#,
        )
        .unwrap_err();
        assert!(err.contains("nope"), "{err}");
        let err = RuleSet::from_json(r#"{"rules": [{"rule": "country_mismatch", "weight": 1}]}"#)
            .unwrap_err();
        assert!(err.contains("alert_threshold"), "{err}");
    }
}
