//! `weir token`: admin API tokens.

use anyhow::Result;
use std::path::PathBuf;

/// The arguments of `weir token` (its help text is the command's).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

/// What `weir token` does.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Generate a random token with a name and a scope.
    ///
    /// Scopes nest: `read` (status, versions, progress, audit, metrics,
    /// the dashboard) < `deploy` (upload, activate, shadow, promote) <
    /// `admin` (rollback). The token is printed once on stdout; with
    /// --file its entry (name, scope, sha256 digest) is added to that
    /// tokens file, which a running admin API reads again within a second.
    /// Rotate by adding a new token and removing the old one's entry.
    New {
        /// The token's name, shown in the audit trail (letters, digits, - _ . @).
        #[arg(long)]
        name: String,
        /// read, deploy or admin.
        #[arg(long)]
        scope: weir_admin::tokens::Scope,
        /// The tokens file to add it to (`admin.tokens_file`).
        #[arg(long)]
        file: Option<PathBuf>,
    },
}

/// `weir token`.
pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::New { name, scope, file } => {
            crate::security::new_token(&name, scope, file.as_deref())
        }
    }
}
