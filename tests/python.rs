//! The Python client (python/): its pytest suite, against this build's
//! slurp. Skipped, saying so, where pytest is not installed
//! (scripts/test-deps.sh installs it).

mod common;

use std::process::Command;

#[test]
fn the_python_client_passes_its_tests() {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let has_pytest = Command::new(&python)
        .args(["-c", "import pytest"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_pytest {
        eprintln!("skipped: {python} has no pytest (scripts/test-deps.sh installs it)");
        return;
    }
    let output = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(common::repo().join("python"))
        .env("SLURP", common::binary())
        .env_remove("SLURP_SOCKET")
        .env_remove("SLURP_SCOPE")
        .env_remove("SLURP_RUN_DIR")
        .env_remove("SLURP_DEPTH")
        .output()
        .expect("run pytest");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "pytest failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Every test ran: none skipped for want of something.
    assert!(
        stdout.contains(" passed") && !stdout.contains("skipped"),
        "{stdout}"
    );
}
