//! A deterministic synthetic payment stream with planted fraud, for the demo,
//! the tests and the benchmarks. Same seed, same payments, byte for byte.

use arrow_schema::TimeUnit;
use serde::{Deserialize, Serialize};
use weir_core::schema::{ColumnConfig, ColumnType};

/// One payment, in the demo's input schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Payment {
    pub txn_id: String,
    pub card_id: String,
    pub merchant_id: String,
    pub amount: f64,
    pub currency: String,
    pub country: String,
    pub card_country: String,
    pub ts: i64,
    /// The device's id, as a top-level string: what an operator reading
    /// only the basic column types (and [`columns`]) sees.
    pub device_id: Option<String>,
    /// The same device with its address and fingerprint: the nested
    /// `device` struct of [`typed_columns`].
    pub device: Option<Device>,
}

impl Payment {
    /// The amount in cents, exactly: every generated amount has at most
    /// two fraction digits, so the float is within far less than half a
    /// cent of it.
    pub fn amount_cents(&self) -> i64 {
        (self.amount * 100.0).round() as i64
    }
}

/// The device a payment came from, as the typed schema's nested `device`
/// column holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub id: String,
    /// A private IPv4 address, fixed per device.
    pub ip: String,
    /// 16 hex digits, fixed per device.
    pub fingerprint: String,
}

impl Device {
    /// Device number `n`: its id (`d-000042`), address and fingerprint all
    /// follow from the number, so the other fields of a payment are drawn
    /// exactly as before devices had them.
    fn numbered(n: u64) -> Device {
        Device {
            id: format!("d-{n:06}"),
            ip: format!("10.{}.{}.{}", (n >> 16) & 255, (n >> 8) & 255, n & 255),
            fingerprint: format!("{:016x}", Rng::new(n ^ 0xF1A6_E4B1_D3C5_9A07).next_u64()),
        }
    }
}

/// Which kind of fraud was planted in a payment, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Planted {
    /// Large amount spent abroad.
    LargeAbroad,
    /// A known-bad merchant.
    BadMerchant,
    /// One of a burst of payments on one card within a fraction of a second
    /// (card testing), past the fifth: what a velocity rule of "more than 5
    /// in 60 s" flags.
    Burst,
    /// A taken-over card: a mid-sized payment (600 to 2,500) abroad from a
    /// device the card never registered. No single rule of the demo's
    /// flags it (the amount is below `amount_above`, a foreign country
    /// alone scores 0.4, and 1 in 100 honest payments come from a new
    /// device too); a model that weighs the three together does.
    Takeover,
}

impl Planted {
    /// The kind's name, as reports and the training data spell it.
    pub fn name(self) -> &'static str {
        match self {
            Planted::LargeAbroad => "large_abroad",
            Planted::BadMerchant => "bad_merchant",
            Planted::Burst => "burst",
            Planted::Takeover => "takeover",
        }
    }

    /// Whether the demo's rules (`fraud-rules`, `fraud-velocity`) are
    /// built to catch this kind; only a model catches the others.
    pub fn rules_catch(self) -> bool {
        !matches!(self, Planted::Takeover)
    }
}

/// Every `BURST_EVERY` payments start a burst of `BURST_LEN` consecutive
/// payments (37 ms apart) on one card.
pub const BURST_EVERY: u64 = 2_500;
/// Payments in a burst.
pub const BURST_LEN: u64 = 8;
/// Burst payments from this position on are planted fraud (the sixth on).
const BURST_FLAGGED_FROM: u64 = 5;

/// splitmix64: tiny, fast, and the same on every platform.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const COUNTRIES: &[(&str, &str)] = &[
    ("US", "USD"),
    ("US", "USD"),
    ("US", "USD"),
    ("GB", "GBP"),
    ("DE", "EUR"),
    ("FR", "EUR"),
    ("NL", "EUR"),
    ("BR", "BRL"),
    ("SG", "SGD"),
    ("NG", "NGN"),
];

/// Merchants the demo's rules list as high-risk.
pub const BAD_MERCHANTS: &[&str] = &["m-0666", "m-0777", "m-0999"];

/// Cards in the generated population.
pub const CARDS: u64 = 5_000;

/// Epoch milliseconds of the first payment (2026-01-01T00:00:00Z).
pub const START_MS: i64 = 1_767_225_600_000;

/// Generates payment `i` of the stream seeded with `seed`.
pub fn payment(seed: u64, i: u64) -> (Payment, Option<Planted>) {
    let mut rng = Rng::new(seed ^ i.wrapping_mul(0xA24B_AED4_963E_E407));
    let burst = (i % BURST_EVERY < BURST_LEN).then_some(i % BURST_EVERY);
    let drawn_card = rng.below(CARDS);
    let card = match burst {
        Some(_) => (i / BURST_EVERY).wrapping_mul(7_919).wrapping_add(13) % CARDS,
        None => drawn_card,
    };
    let home = COUNTRIES[(card % COUNTRIES.len() as u64) as usize].0;
    let drawn = rng.below(1000);
    let planted = match (burst, drawn) {
        (Some(pos), _) if pos >= BURST_FLAGGED_FROM => Some(Planted::Burst),
        (Some(_), _) => None,
        (None, 0..=3) => Some(Planted::LargeAbroad),
        (None, 4..=5) => Some(Planted::BadMerchant),
        (None, 6..=8) => Some(Planted::Takeover),
        _ => None,
    };
    let abroad = match planted {
        Some(Planted::LargeAbroad | Planted::Takeover) => true,
        Some(Planted::BadMerchant) => rng.below(2) == 0,
        Some(Planted::Burst) => false,
        None if burst.is_some() => false,
        None => rng.below(100) < 6,
    };
    let (country, currency) = if abroad {
        loop {
            let c = COUNTRIES[rng.below(COUNTRIES.len() as u64) as usize];
            if c.0 != home {
                break c;
            }
        }
    } else {
        *COUNTRIES
            .iter()
            .find(|c| c.0 == home)
            .unwrap_or(&COUNTRIES[0])
    };
    // Drawn in whole cents: the float is then the nearest to that decimal,
    // which JSON prints with its two places (`3970.78`, never
    // `3970.7799999999997`), so a decimal(18,2) column reads it exactly.
    let cents = match planted {
        Some(Planted::LargeAbroad) => 300_000 + rng.below(600_000),
        Some(Planted::Takeover) => 60_000 + rng.below(190_000),
        _ if rng.below(500) == 0 => 260_000 + rng.below(200_000),
        _ => {
            // Mostly small, a long tail up to ~1,500.
            let u = rng.unit();
            ((5.0 + 1_500.0 * u * u * u) * 100.0).round() as u64
        }
    };
    let amount = cents as f64 / 100.0;
    let merchant_id = match planted {
        Some(Planted::BadMerchant) => {
            BAD_MERCHANTS[rng.below(BAD_MERCHANTS.len() as u64) as usize].to_string()
        }
        _ => loop {
            let m = format!("m-{:04}", rng.below(2_000));
            if !BAD_MERCHANTS.contains(&m.as_str()) {
                break m;
            }
        },
    };
    let device = (rng.below(10) != 0).then(|| {
        // One of the card's three registered devices; 1 in 100 honest
        // payments, and every takeover, from a new one.
        let k = rng.below(300);
        Device::numbered(if k >= 297 || planted == Some(Planted::Takeover) {
            fresh_device(i)
        } else {
            registered_device(card, k % 3)
        })
    });
    let p = Payment {
        txn_id: format!("t-{seed:x}-{i:09}"),
        card_id: format!("c-{card:05}"),
        merchant_id,
        amount,
        currency: currency.to_string(),
        country: country.to_string(),
        card_country: home.to_string(),
        ts: START_MS + i as i64 * 37,
        device_id: device.as_ref().map(|d| d.id.clone()),
        device,
    };
    (p, planted)
}

/// The number of device `k` (0 to 2) of those card `card` registered.
fn registered_device(card: u64, k: u64) -> u64 {
    card * 3 + k
}

/// A device no card registered (numbers past every card's three).
fn fresh_device(i: u64) -> u64 {
    CARDS * 3 + i
}

/// One card of the population, as the `cards` reference table holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Card {
    pub card_id: String,
    pub home_country: String,
    /// The card's registered devices, separated by spaces.
    pub devices: String,
}

/// Card `card` (0 to [`CARDS`] − 1): its home country and devices.
pub fn card(card: u64) -> Card {
    Card {
        card_id: format!("c-{card:05}"),
        home_country: COUNTRIES[(card % COUNTRIES.len() as u64) as usize]
            .0
            .to_string(),
        devices: (0..3)
            .map(|k| Device::numbered(registered_device(card, k)).id)
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// Every card of the population as JSON lines: the `cards` table a model
/// pipeline looks up (home country, registered devices).
pub fn cards_json_lines() -> Vec<u8> {
    let mut out = Vec::with_capacity(CARDS as usize * 60);
    for c in 0..CARDS {
        if serde_json::to_writer(&mut out, &card(c)).is_ok() {
            out.push(b'\n');
        }
    }
    out
}

/// Payments `start..start + count` as JSON lines.
pub fn json_lines(seed: u64, start: u64, count: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(count as usize * 200);
    for i in start..start + count {
        // Serialising a plain struct of strings and numbers cannot fail.
        if serde_json::to_writer(&mut out, &payment(seed, i).0).is_ok() {
            out.push(b'\n');
        }
    }
    out
}

/// The demo's input schema, as the `generator` source declares it.
pub fn columns() -> Vec<ColumnConfig> {
    let column = ColumnConfig::new;
    vec![
        column("txn_id", ColumnType::Utf8, false),
        column("card_id", ColumnType::Utf8, false),
        column("merchant_id", ColumnType::Utf8, false),
        column("amount", ColumnType::Float64, false),
        column("currency", ColumnType::Utf8, false),
        column("country", ColumnType::Utf8, false),
        column("card_country", ColumnType::Utf8, false),
        column("ts", ColumnType::Int64, false),
        column("device_id", ColumnType::Utf8, true),
    ]
}

/// The payments with money, time and the device typed: `amount`
/// `decimal(18,2)`, `ts` `timestamp(ms, UTC)` and `device` a struct of
/// `id`, `ip` and `fingerprint` (null when the payment names no device).
/// The same JSON lines read into either schema.
pub fn typed_columns() -> Vec<ColumnConfig> {
    let column = ColumnConfig::new;
    let mut device = column("device", ColumnType::Struct, true);
    device.fields = vec![
        column("id", ColumnType::Utf8, false),
        column("ip", ColumnType::Utf8, false),
        column("fingerprint", ColumnType::Utf8, false),
    ];
    vec![
        column("txn_id", ColumnType::Utf8, false),
        column("card_id", ColumnType::Utf8, false),
        column("merchant_id", ColumnType::Utf8, false),
        column(
            "amount",
            ColumnType::Decimal {
                precision: 18,
                scale: 2,
            },
            false,
        ),
        column("currency", ColumnType::Utf8, false),
        column("country", ColumnType::Utf8, false),
        column("card_country", ColumnType::Utf8, false),
        column(
            "ts",
            ColumnType::Timestamp {
                unit: TimeUnit::Millisecond,
                timezone: Some("UTC".into()),
            },
            false,
        ),
        device,
    ]
}

/// [`typed_columns`] as pipeline-file TOML.
pub const TYPED_SCHEMA_TOML: &str = r#"schema = [
  { name = "txn_id", type = "utf8" },
  { name = "card_id", type = "utf8" },
  { name = "merchant_id", type = "utf8" },
  { name = "amount", type = "decimal(18,2)" },
  { name = "currency", type = "utf8" },
  { name = "country", type = "utf8" },
  { name = "card_country", type = "utf8" },
  { name = "ts", type = "timestamp(ms, UTC)" },
  { name = "device", type = "struct", nullable = true, fields = [
      { name = "id", type = "utf8" },
      { name = "ip", type = "utf8" },
      { name = "fingerprint", type = "utf8" } ] },
]"#;

/// The demo's input schema, as pipeline-file TOML.
pub const SCHEMA_TOML: &str = r#"schema = [
  { name = "txn_id", type = "utf8" },
  { name = "card_id", type = "utf8" },
  { name = "merchant_id", type = "utf8" },
  { name = "amount", type = "float64" },
  { name = "currency", type = "utf8" },
  { name = "country", type = "utf8" },
  { name = "card_country", type = "utf8" },
  { name = "ts", type = "int64" },
  { name = "device_id", type = "utf8", nullable = true },
]"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_toml_schema_and_the_columns_agree() {
        #[derive(Deserialize)]
        struct Doc {
            schema: Vec<ColumnConfig>,
        }
        let doc: Doc = toml::from_str(SCHEMA_TOML).unwrap();
        assert_eq!(doc.schema, columns());
        let doc: Doc = toml::from_str(TYPED_SCHEMA_TOML).unwrap();
        assert_eq!(doc.schema, typed_columns());
    }

    #[test]
    fn amounts_print_as_their_cents() {
        for i in 0..100_000 {
            let p = payment(7, i).0;
            let c = p.amount_cents();
            let text = serde_json::to_string(&p.amount).unwrap();
            let exact = format!("{}.{:02}", c / 100, c % 100);
            let exact = exact.trim_end_matches('0').trim_end_matches('.');
            assert_eq!(text.trim_end_matches(".0"), exact, "payment {i}");
        }
    }
}
