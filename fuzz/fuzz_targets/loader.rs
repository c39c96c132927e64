//! The loader: any text in, a program or diagnostics out (each rendered as
//! `slurp check` renders it), never a panic. The text is a `.slurp` file in
//! a fresh directory, so `include`s of it resolve there.
#![no_main]

use libfuzzer_sys::fuzz_target;
use miette::{GraphicalReportHandler, GraphicalTheme};
use slurp_interpreter::Options;
use slurp_runtime::Capacity;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("w.slurp");
    std::fs::write(&path, data).expect("write the input");
    let opts = Options {
        capacity: Capacity {
            nodes: 2,
            cores_per_node: 8,
            gpus_per_node: 1,
            mem_per_node: 1 << 34,
        },
        // Bounded, so an input's expansion stays small.
        max_tasks: 100_000,
        cwd: dir.path().to_path_buf(),
    };
    if let Err(failure) = slurp_interpreter::load(&path, &opts) {
        let handler =
            GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_width(100);
        let mut out = String::new();
        for problem in failure.problems.iter().take(50) {
            let _ = handler.render_report(&mut out, problem);
        }
    }
});
