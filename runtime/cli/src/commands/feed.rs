//! `weir feed`.

use anyhow::Result;

/// The arguments of `weir feed` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kafka bootstrap servers.
    #[arg(long, default_value = "127.0.0.1:9092")]
    bootstrap_servers: String,
    /// Topic to produce to.
    #[arg(long, default_value = "payments")]
    topic: String,
    /// Number of payments.
    #[arg(long, default_value_t = 100_000)]
    payments: u64,
    /// Payments per second (default: as fast as possible).
    #[arg(long)]
    rate: Option<u64>,
    /// Seed of the generated stream.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// Index of the first payment, to continue an earlier feed.
    #[arg(long, default_value_t = 0)]
    start: u64,
}

/// `weir feed`: produces generated payments to a Kafka topic.
pub fn run(args: Args) -> Result<()> {
    let Args {
        bootstrap_servers,
        topic,
        payments,
        rate,
        seed,
        start,
    } = args;
    let started = std::time::Instant::now();
    let sent = crate::feed::feed(&crate::feed::FeedOptions {
        bootstrap_servers,
        topic: topic.clone(),
        payments,
        rate,
        seed,
        start,
    })?;
    println!(
        "produced {sent} payments to `{topic}` in {:.2?}",
        started.elapsed()
    );
    Ok(())
}
