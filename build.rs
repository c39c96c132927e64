//! Links the `slurp` binary with packed relative relocations (DT_RELR)
//! where the linker makes them and this machine's C library reads them.
//!
//! slurp is a position-independent executable of some 37 MB: about 60,000
//! relative relocations, a 1.4 MB table the dynamic loader reads and applies
//! at every start, a sizeable part of a start-up measured in milliseconds.
//! Packed, the table is 13 KB. A binary with DT_RELR does not start on a
//! glibc older than 2.36, so the flag is used only when a small program
//! linked with it (and holding relative relocations of its own) runs here.

use std::path::PathBuf;
use std::process::{Command, Stdio};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    // Only a program built for this machine can be tried on it.
    if var("TARGET") != var("HOST") || var("CARGO_CFG_TARGET_OS") != "linux" {
        return;
    }
    let out = PathBuf::from(var("OUT_DIR"));
    let src = out.join("relr.c");
    let exe = out.join("relr");
    // Pointers in data: relative relocations, so the probe gets DT_RELR
    // (and the C library's version check) as slurp would.
    let program = "static int x; int *p[] = {&x, &x, &x};\nint main(void) { return p[2] != &x; }\n";
    if std::fs::write(&src, program).is_err() {
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let quiet = |c: &mut Command| {
        c.stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let linked = quiet(
        Command::new(&cc)
            .args(["-fPIE", "-pie", "-Wl,-z,pack-relative-relocs", "-o"])
            .arg(&exe)
            .arg(&src),
    );
    if linked && quiet(&mut Command::new(&exe)) {
        println!("cargo:rustc-link-arg-bin=slurp=-Wl,-z,pack-relative-relocs");
    }
}
