//! The `slurp` binary: parses the command line, runs it, exits with its code.

mod cli;
mod console;
mod live;
mod policy;
mod progress;
mod report;
mod sim;
mod train;

use std::ffi::c_int;

/// Loading a large workflow makes millions of small, short-lived
/// allocations; mimalloc does them in about half the time glibc's malloc
/// takes (BENCHMARKS.md, front end).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ! {
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
    exit_now(cli::run())
}

/// Ends slurp with `code` at once, without the C library's exit handlers.
/// By the time `cli::run` returns, everything slurp keeps is written and
/// closed (journal, logs, sockets); what remains at `exit` is mimalloc
/// handing every page it used back to the kernel one `madvise` at a time,
/// about 80 system calls on a one-task run, for an address space the
/// kernel is about to drop whole (BENCHMARKS.md, start-up).
fn exit_now(code: std::process::ExitCode) -> ! {
    use std::io::Write as _;
    // Rust flushes its standard streams only when `main` returns.
    let _ = std::io::stdout().lock().flush();
    let _ = std::io::stderr().lock().flush();
    // `ExitCode` does not say its number; it compares.
    let status = (0..=u8::MAX)
        .find(|&n| std::process::ExitCode::from(n) == code)
        .unwrap_or(1);
    // SAFETY: `_exit` ends the process; nothing of slurp's runs after it.
    #[allow(unsafe_code)]
    unsafe {
        libc::_exit(c_int::from(status))
    }
}
