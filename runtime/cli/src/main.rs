//! The `weir` binary; arguments are parsed and dispatched by `weir_cli::cli`.

fn main() {
    weir_core::memory::return_large_blocks_promptly();
    std::process::exit(weir_cli::cli::main());
}
