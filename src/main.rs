//! The `slurp` binary: parses the command line, runs it, exits with its code.

mod cli;
mod console;
mod policy;
mod progress;
mod report;
mod sim;
mod train;

/// Loading a large workflow makes millions of small, short-lived
/// allocations; mimalloc does them in about half the time glibc's malloc
/// takes (BENCHMARKS.md, front end).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::run()
}
