//! Links the `slurp` binary so that the dynamic loader has almost nothing
//! to relocate at start: as a position-dependent executable (`-no-pie`)
//! where this machine's toolchain makes one, else with packed relative
//! relocations (DT_RELR) where the C library reads them.
//!
//! slurp is an executable of some 30 MB. Linked position-independent, its
//! 770 KB of pointer tables (`.data.rel.ro`: vtables, string tables) carry
//! about 60,000 relative relocations, and applying them writes every one of
//! those ~190 pages: a copy-on-write page fault each, about 40% of the page
//! faults of `slurp --version` and most of a start-up measured in
//! milliseconds (BENCHMARKS.md). Linked at a fixed address the pointers are
//! final in the file and the pages are only read, when used. The cost is
//! that the executable's own image is not placed at a random address (its
//! libraries, heap and stack still are); `SLURP_PIE=1` (any value but `0`)
//! at build time keeps the position-independent link. A binary with
//! DT_RELR does not start on a glibc older than 2.36, so that flag is used
//! only when a small program linked with it (and holding relative
//! relocations of its own) runs here.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Whether `cc` links `src` with `flags` into a program that runs here.
fn runs(cc: &str, flags: &[&str], src: &Path, exe: &Path) -> bool {
    let quiet = |c: &mut Command| {
        c.stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    quiet(Command::new(cc).args(flags).arg("-o").arg(exe).arg(src)) && quiet(&mut Command::new(exe))
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-env-changed=SLURP_PIE");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    // Only a program built for this machine can be tried on it.
    if var("TARGET") != var("HOST") || var("CARGO_CFG_TARGET_OS") != "linux" {
        return;
    }
    let out = PathBuf::from(var("OUT_DIR"));
    let (src, exe) = (out.join("reloc.c"), out.join("reloc"));
    // Pointers in data: relocations, as slurp's tables have.
    let program = "static int x; int *p[] = {&x, &x, &x};\nint main(void) { return p[2] != &x; }\n";
    if std::fs::write(&src, program).is_err() {
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    // Any value but `0` asks for the position-independent link.
    let pie = !matches!(var("SLURP_PIE").as_str(), "" | "0");
    if !pie && runs(&cc, &["-no-pie"], &src, &exe) {
        println!("cargo:rustc-link-arg-bin=slurp=-no-pie");
    } else if runs(
        &cc,
        &["-fPIE", "-pie", "-Wl,-z,pack-relative-relocs"],
        &src,
        &exe,
    ) {
        println!("cargo:rustc-link-arg-bin=slurp=-Wl,-z,pack-relative-relocs");
    }
}
