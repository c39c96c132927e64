//! The `slurp` binary: parses the command line, runs it, exits with its code.

mod cli;
mod console;
mod live;
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
    // A panic anywhere — the main loop, a task's reader, a worker thread —
    // ends slurp: a bug must never leave it alive but deaf to signals with
    // its tasks running. Its tasks die with it (each rank's parent-death
    // signal), and the journal stays what it was, so `slurp resume` reruns
    // only what had not succeeded.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        eprintln!(
            "slurp: internal error (a bug in slurp; please report it with the lines above); its tasks are stopped, `slurp resume` reruns what had not succeeded"
        );
        std::process::exit(101);
    }));
    cli::run()
}
