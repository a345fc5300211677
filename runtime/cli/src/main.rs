//! The `weir` binary; arguments are parsed and dispatched by `weir_cli::cli`.

fn main() {
    weir_core::memory::tune_allocator();
    std::process::exit(weir_cli::cli::main());
}
