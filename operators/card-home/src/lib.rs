//! `card-home`: each payment with its card's home country, looked up in the
//! pipeline's `cards` table (`[[lookup]] name = "cards" key = "card_id"`,
//! a `home_country` column), whether the payment was made away from it, and
//! the version of the table it read. The smallest use of
//! `weir_sdk::lookup`, and the lookup tests' operator.

use weir_sdk::{lookup, Batch, BoolBuilder, EpochContext, Error, Operator, Output, Utf8Builder};

/// The operator; it has no settings.
pub struct CardHome;

impl Operator for CardHome {
    fn init(_config: &str) -> Result<Self, Error> {
        Ok(CardHome)
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        let cards = lookup::table("cards");
        let card_id = batch.utf8("card_id")?;
        let home = cards.utf8(&card_id, "home_country")?;
        let (txn_id, country) = (batch.utf8("txn_id")?, batch.utf8("country")?);
        let version = cards.version().unwrap_or_default();
        let (mut o_txn, mut o_card, mut o_home, mut o_version) = (
            Utf8Builder::new(),
            Utf8Builder::new(),
            Utf8Builder::new(),
            Utf8Builder::new(),
        );
        let mut o_away = BoolBuilder::new();
        for row in 0..batch.num_rows() {
            o_txn.push_option(txn_id.get(row));
            o_card.push_option(card_id.get(row));
            o_home.push_option(home.get(row));
            o_away.push(home.get(row).is_some_and(|h| Some(h) != country.get(row)));
            o_version.push(&version);
        }
        Output::new()
            .with("txn_id", o_txn)
            .with("card_id", o_card)
            .with("home_country", o_home)
            .with("away", o_away)
            .with("cards_version", o_version)
            .build()
    }
}

weir_sdk::export_operator!(CardHome);
