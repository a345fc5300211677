//! The `weir` binary; everything lives in the library's `cli` module.

fn main() {
    std::process::exit(weir::cli::main());
}
