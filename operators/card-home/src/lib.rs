//! `card-home`: each payment with its card's home country, looked up in the
//! pipeline's `cards` table (`[[lookup]] name = "cards" key = "card_id"`,
//! a `home_country` column), whether the payment was made away from it, the
//! version of the table it read, and the size and digest of its artifact
//! `notes` (0 and "" without one): the artifact helpers' test in every
//! language. The smallest use of `weir_sdk::lookup`, and the lookup tests'
//! operator.
//!
//! With config `{"cards": {"c-00001": "US", …}}` it reads the home
//! countries from its config instead (version `config`): the way a table
//! was smuggled in before lookups, kept to measure the difference
//! (`cargo bench --bench model`).

use std::collections::HashMap;
use weir_sdk::{
    artifacts, lookup, Batch, BoolBuilder, EpochContext, Error, Int64Builder, Operator, Output,
    Utf8Builder, Utf8Column,
};

/// The operator: where the home countries come from.
pub struct CardHome {
    /// Card → home country from the config; `None`: the `cards` table.
    from_config: Option<HashMap<String, String>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    cards: Option<HashMap<String, String>>,
}

impl Operator for CardHome {
    fn init(config: &str) -> Result<Self, Error> {
        let c: Config = serde_json::from_str(config)
            .map_err(|e| Error::config(format!("card-home config: {e}")))?;
        Ok(CardHome {
            from_config: c.cards,
        })
    }

    fn process(&mut self, _ctx: &EpochContext, batch: &Batch) -> Result<Output, Error> {
        let card_id = batch.utf8("card_id")?;
        let (home, version) = self.homes(&card_id)?;
        let home = Homes(home);
        let (txn_id, country) = (batch.utf8("txn_id")?, batch.utf8("country")?);
        let (mut o_txn, mut o_card, mut o_home, mut o_version) = (
            Utf8Builder::new(),
            Utf8Builder::new(),
            Utf8Builder::new(),
            Utf8Builder::new(),
        );
        let mut o_away = BoolBuilder::new();
        let notes_bytes = artifacts::get("notes").map_or(0, |b| b.len() as i64);
        let notes_digest = artifacts::digest("notes").unwrap_or_default();
        let (mut o_notes_bytes, mut o_notes_digest) = (Int64Builder::new(), Utf8Builder::new());
        for row in 0..batch.num_rows() {
            o_txn.push_option(txn_id.get(row));
            o_card.push_option(card_id.get(row));
            o_home.push_option(home.get(row));
            o_away.push(home.get(row).is_some_and(|h| Some(h) != country.get(row)));
            o_version.push(&version);
            o_notes_bytes.push(notes_bytes);
            o_notes_digest.push(&notes_digest);
        }
        Output::new()
            .with("txn_id", o_txn)
            .with("card_id", o_card)
            .with("home_country", o_home)
            .with("away", o_away)
            .with("cards_version", o_version)
            .with("notes_bytes", o_notes_bytes)
            .with("notes_digest", o_notes_digest)
            .build()
    }
}

impl CardHome {
    /// Each row's home country (as owned text), and the version read.
    fn homes(&self, card_id: &Utf8Column) -> Result<(Vec<Option<String>>, String), Error> {
        if let Some(map) = &self.from_config {
            let homes = (0..card_id.len())
                .map(|r| card_id.get(r).and_then(|c| map.get(c)).cloned())
                .collect();
            return Ok((homes, "config".into()));
        }
        let cards = lookup::table("cards");
        let column = cards.utf8(card_id, "home_country")?;
        let homes = (0..card_id.len())
            .map(|r| column.get(r).map(str::to_string))
            .collect();
        Ok((homes, cards.version().unwrap_or_default()))
    }
}

/// Home countries by row.
struct Homes(Vec<Option<String>>);

impl Homes {
    fn get(&self, row: usize) -> Option<&str> {
        self.0.get(row).and_then(|h| h.as_deref())
    }
}

weir_sdk::export_operator!(CardHome);
