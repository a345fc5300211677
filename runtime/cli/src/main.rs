//! The `weir` binary; arguments are parsed and dispatched by `weir_cli::cli`.

fn main() {
    std::process::exit(weir_cli::cli::main());
}
