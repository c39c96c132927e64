//! Front-end throughput: parse + expand + lower a 1,000,000-task workflow.
//!
//! The file mixes what users write: 200,000 legacy lines, 200,000 plain
//! lines, and two 300,000-instance sweeps, the second depending element-wise
//! on the first (300,000 dependency edges). Reports the best wall time of
//! several loads, the peak resident memory per task (whole process, so the
//! file text and the transient syntax tree count too), and separately the
//! time to render every jobspec to JSON (what `slurp jobspec` does).
//!
//!     cargo bench --bench lower
//!
//! Under `cargo test` (no `--bench` argument) it runs the same stages on a
//! workflow 100 times smaller, once each: CI's check that the bench still
//! builds and its assertions hold, not a figure.

use std::io::Write;
use std::time::Instant;

use slurp_interpreter::{Options, load};
use slurp_runtime::{Capacity, WorkflowId};

/// The allocator the `slurp` binary uses, so the figures are the binary's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Lines of each kind in the measured workflow; `cargo test` divides
/// them by [`SMOKE`].
const LEGACY: usize = 200_000;
const PLAIN: usize = 200_000;
const SWEEP: usize = 300_000;
const SMOKE: usize = 100;

fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test` does not.
    let measured = std::env::args().any(|a| a == "--bench");
    let scale = if measured { 1 } else { SMOKE };
    let (legacy, plain, sweep) = (LEGACY / scale, PLAIN / scale, SWEEP / scale);
    let loads = if measured { 5 } else { 1 };
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("million.slurp");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
    writeln!(file, "# legacy lines, plain lines, sweeps").unwrap();
    for i in 0..legacy {
        writeln!(file, "4 1 ./simulate --case {i} --out results/case{i}.dat").unwrap();
    }
    for i in 0..plain {
        writeln!(file, "gzip -9 data/part{i}.csv").unwrap();
    }
    writeln!(file, "task sim[seed=1..{sweep}] cores=2 mem=1G time=10m: ./sim --seed {{seed}} -o out/{{seed}}.h5").unwrap();
    writeln!(
        file,
        "task post[seed=1..{sweep}] after=sim[{{seed}}]: ./post out/{{seed}}.h5"
    )
    .unwrap();
    drop(file);
    let bytes = std::fs::metadata(&path).unwrap().len();

    let opts = Options {
        capacity: Capacity {
            nodes: 1,
            cores_per_node: 8,
            gpus_per_node: 0,
            mem_per_node: 16 << 30,
        },
        max_tasks: Options::DEFAULT_MAX_TASKS,
        cwd: dir.path().to_path_buf(),
    };
    let before = peak_rss_kib();
    let start = Instant::now();
    let loaded = load(&path, &opts).unwrap_or_else(|f| panic!("{:?}", f.problems));
    let first = start.elapsed();
    let peak = peak_rss_kib();
    let tasks = loaded.program.root().tasks.len();
    assert_eq!(tasks, legacy + plain + 2 * sweep);
    assert_eq!(loaded.program.root().graph.edge_count(), sweep);
    let per_task = (peak.saturating_sub(before)) as f64 * 1024.0 / tasks as f64;
    drop(loaded);

    let mut best = first;
    for _ in 1..loads {
        let start = Instant::now();
        let loaded = load(&path, &opts).unwrap_or_else(|f| panic!("{:?}", f.problems));
        best = best.min(start.elapsed());
        std::hint::black_box(&loaded);
    }

    let loaded = load(&path, &opts).unwrap_or_else(|f| panic!("{:?}", f.problems));
    let start = Instant::now();
    let mut sink = std::io::sink();
    let cwd = dir.path().display().to_string();
    for id in loaded.program.root().task_ids() {
        serde_json::to_writer(&mut sink, &loaded.program.jobspec(WorkflowId(0), id, &cwd)).unwrap();
    }
    let render = start.elapsed();

    // The scheduler core over the same million tasks, all queued.
    let loaded = load(&path, &opts).unwrap_or_else(|f| panic!("{:?}", f.problems));
    let before_core = peak_rss_kib();
    let mut core = slurp_runtime::core::Core::for_workflow(
        opts.capacity,
        slurp_runtime::core::PolicyKind::EASY,
        loaded.program.root(),
        slurp_runtime::core::Time(0),
    );
    core.schedule(slurp_runtime::core::Time(0));
    let queued = core.counts().iter().sum::<usize>() - core.running_count();
    let events = core.drain().count();
    let core_peak = peak_rss_kib();
    drop(core);

    println!(
        "file            {} lines, {:.1} MiB",
        legacy + plain + 3,
        bytes as f64 / (1 << 20) as f64
    );
    println!("tasks           {tasks}");
    println!(
        "load (best of {loads}) {:.3} s  ({:.0} ns per task)",
        best.as_secs_f64(),
        best.as_nanos() as f64 / tasks as f64
    );
    println!(
        "peak RSS growth {:.1} MiB  ({per_task:.0} bytes per task)",
        (peak - before) as f64 / 1024.0
    );
    println!(
        "core with {queued} queued: peak RSS {:.1} MiB for the whole process ({:.1} MiB more than the loaded IR; {events} events)",
        core_peak as f64 / 1024.0,
        core_peak.saturating_sub(before_core) as f64 / 1024.0
    );
    println!(
        "render all jobspecs to JSON {:.3} s  ({:.2} µs per task)",
        render.as_secs_f64(),
        render.as_secs_f64() * 1e6 / tasks as f64
    );
}
