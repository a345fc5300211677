//! `weir generate`.

use anyhow::Result;

/// The arguments of `weir generate` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to write.
    what: GenerateWhat,
    /// Number of payments.
    #[arg(long, default_value_t = 100_000)]
    payments: u64,
    /// Seed of the generated stream.
    #[arg(long, default_value_t = 0x5EED)]
    seed: u64,
    /// Add each payment's planted fraud kind (`planted`, null if none).
    #[arg(long)]
    labels: bool,
}

/// What `weir generate` writes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum GenerateWhat {
    Payments,
    Cards,
}

/// `weir generate`: the demo's data as JSON lines on stdout; a reader
/// that stops early (`| head`) ends it quietly.
pub fn run(args: Args) -> Result<()> {
    let broken_pipe = |e: &anyhow::Error| {
        let kind = e
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            .or_else(|| e.downcast_ref::<serde_json::Error>()?.io_error_kind());
        kind == Some(std::io::ErrorKind::BrokenPipe)
    };
    match write_generated(&args) {
        Err(e) if broken_pipe(&e) => Ok(()),
        other => other,
    }
}

/// The JSON lines themselves.
fn write_generated(args: &Args) -> Result<()> {
    use std::io::Write;
    use weir_connectors::generator::payments;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    match args.what {
        GenerateWhat::Cards => out.write_all(&payments::cards_json_lines())?,
        GenerateWhat::Payments => {
            for i in 0..args.payments {
                let (p, planted) = payments::payment(args.seed, i);
                let mut row = serde_json::to_value(&p)?;
                if args.labels {
                    row["planted"] = planted.map(|k| k.name()).into();
                }
                serde_json::to_writer(&mut out, &row)?;
                out.write_all(b"\n")?;
            }
        }
    }
    Ok(out.flush()?)
}
