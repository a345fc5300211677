//! The model's features, computed from a payment, its card's row of the
//! `cards` table and the card's recent payments. Free of SDK types so that
//! the trainer's copy (`tools/model/train.py`) can be checked against it
//! and the tests can use it natively. Changing a feature means training a
//! new model: the names are checked against the model's input width.

/// Feature names, in the model's input order; the `scores` output carries
/// each as a column `f_<name>`.
pub const NAMES: [&str; 6] = [
    "amount",
    "abroad",
    "new_device",
    "no_device",
    "payments_60s",
    "risky_merchant",
];

/// How many features a row has.
pub const WIDTH: usize = NAMES.len();

/// One payment as the features see it.
pub struct Payment<'a> {
    pub amount: f64,
    pub country: &'a str,
    pub merchant_id: &'a str,
    pub device_id: Option<&'a str>,
}

/// What the host knows of the card: its `cards` row (`None` if the card is
/// not in the table) and its payments in the velocity window, this one
/// included.
pub struct CardFacts<'a> {
    pub home_country: Option<&'a str>,
    /// Registered devices, separated by spaces.
    pub devices: Option<&'a str>,
    pub payments_in_window: usize,
}

/// The feature row of one payment, in [`NAMES`] order.
pub fn row(p: &Payment<'_>, card: &CardFacts<'_>, risky_merchants: &[String]) -> [f32; WIDTH] {
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    let abroad = card.home_country.is_some_and(|h| h != p.country);
    let new_device = match p.device_id {
        Some(d) => !card
            .devices
            .is_some_and(|known| known.split(' ').any(|k| k == d)),
        None => false,
    };
    [
        p.amount as f32,
        flag(abroad),
        flag(new_device),
        flag(p.device_id.is_none()),
        card.payments_in_window as f32,
        flag(risky_merchants.iter().any(|m| m == p.merchant_id)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payment_abroad_from_an_unknown_device_sets_those_features() {
        let p = Payment {
            amount: 1200.5,
            country: "FR",
            merchant_id: "m-0001",
            device_id: Some("d-999999"),
        };
        let card = CardFacts {
            home_country: Some("US"),
            devices: Some("d-000003 d-000004 d-000005"),
            payments_in_window: 2,
        };
        assert_eq!(row(&p, &card, &[]), [1200.5, 1.0, 1.0, 0.0, 2.0, 0.0]);
        let home = Payment {
            country: "US",
            device_id: Some("d-000004"),
            merchant_id: "m-0666",
            ..p
        };
        let risky = vec!["m-0666".to_string()];
        assert_eq!(row(&home, &card, &risky), [1200.5, 0.0, 0.0, 0.0, 2.0, 1.0]);
    }
}
