//! The `slurp` binary: parses the command line, runs it, exits with its code.

mod cli;

fn main() -> std::process::ExitCode {
    cli::run()
}
