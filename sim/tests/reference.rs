//! The reference model reproduces the reference code's figures for one
//! window of `lublin_256.swf` to the digit (RL-SPEC.md's table). The window
//! (jobs 2001–3024 with the trace's header) is in `tests/data`.

use std::path::Path;

use slurp_runtime::core::{Backfill, Order, PolicyKind};
use slurp_sim::window::Draw;
use slurp_sim::{Machine, Metrics, Model, Window, Workload, simulate};

fn window() -> Workload {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/lublin256-2001-3024.swf");
    let trace = slurp_trace::read(&path).expect("the test trace reads");
    let machine = Machine::of(&trace).expect("the header names the machine");
    Workload::new(&trace, machine)
}

struct Expected {
    policy: &'static str,
    bsld: f64,
    wait: f64,
    utilisation: f64,
    sum_starts: u64,
    last_start: u64,
}

const TABLE: [Expected; 6] = [
    Expected {
        policy: "fcfs",
        bsld: 7239.016365567105,
        wait: 245246.76,
        utilisation: 0.659241,
        sum_starts: 2453709366,
        last_start: 2940846,
    },
    Expected {
        policy: "fcfs+easy",
        bsld: 170.48021333805517,
        wait: 19560.16,
        utilisation: 0.874950,
        sum_starts: 2222606288,
        last_start: 2656081,
    },
    Expected {
        policy: "sjf",
        bsld: 313.51263547894507,
        wait: 40924.01,
        utilisation: 0.770110,
        sum_starts: 2244482870,
        last_start: 2774559,
    },
    Expected {
        policy: "sjf+easy",
        bsld: 62.58645447872579,
        wait: 21929.05,
        utilisation: 0.827329,
        sum_starts: 2225032031,
        last_start: 2706175,
    },
    Expected {
        policy: "f1",
        bsld: 363.53456602211185,
        wait: 22440.15,
        utilisation: 0.800838,
        sum_starts: 2225555393,
        last_start: 2736620,
    },
    Expected {
        policy: "f1+easy",
        bsld: 33.67553378131307,
        wait: 10812.04,
        utilisation: 0.815454,
        sum_starts: 2213648209,
        last_start: 2719578,
    },
];

#[test]
fn the_reference_window_matches_the_reference_code_to_the_digit() {
    let workload = window();
    assert_eq!(workload.jobs.len(), 1024);
    assert_eq!(
        workload.machine,
        Machine {
            nodes: 256,
            procs_per_node: 1
        }
    );
    let all = Window {
        start: 0,
        len: 1024,
    };
    let mut failures = Vec::new();
    for e in &TABLE {
        let policy: PolicyKind = e.policy.parse().unwrap();
        let schedule = simulate(&workload, all, policy, Model::Reference);
        let m = Metrics::of(&workload, &schedule, Model::Reference);
        let sum: u64 = schedule.starts.iter().sum();
        let last = *schedule.starts.iter().max().unwrap();
        let got = format!(
            "{}: bsld {} wait {:.2} util {:.6} Σstart {sum} last {last}",
            e.policy, m.avg_bounded_slowdown, m.avg_wait, m.utilisation
        );
        let ok = ((m.avg_bounded_slowdown - e.bsld) / e.bsld).abs() < 1e-9
            && (m.avg_wait - e.wait).abs() < 0.01
            && (m.utilisation - e.utilisation).abs() < 1e-6
            && sum == e.sum_starts
            && last == e.last_start;
        if !ok {
            failures.push(format!(
                "{got}\n  expected bsld {} wait {} util {} Σstart {} last {}",
                e.bsld, e.wait, e.utilisation, e.sum_starts, e.last_start
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn fcfs_without_backfilling_diverges_where_the_reference_does() {
    // Jobs 2001–2016 start at submit; 2017 (256 procs, submitted 1789871)
    // starts at 1818447; 2018–2020 all start at 1847869.
    let workload = window();
    let s = simulate(
        &workload,
        Window {
            start: 0,
            len: 1024,
        },
        PolicyKind::new(Order::Fcfs, Backfill::None),
        Model::Reference,
    );
    for i in 0..16 {
        assert_eq!(
            s.starts[i], workload.jobs[i].submit,
            "job {}",
            workload.jobs[i].id
        );
    }
    assert_eq!(
        (
            workload.jobs[16].id,
            workload.jobs[16].procs,
            workload.jobs[16].submit
        ),
        (2017, 256, 1789871)
    );
    assert_eq!(s.starts[16], 1818447);
    assert_eq!(s.starts[17..20], [1847869; 3]);
}

fn fcfs_bsld(workload: &Workload, w: Window) -> f64 {
    let schedule = slurp_sim::reference::run(workload, w, Order::Fcfs, false);
    Metrics::of(workload, &schedule, Model::Reference).avg_bounded_slowdown
}

/// Random windows drawn inside a span stay inside it; with a floor on
/// FCFS's bounded slowdown only windows that reach it are kept; windows
/// the caller refuses (held-out jobs) are skipped; each draw is seeded.
#[test]
fn draws_stay_within_their_span_and_keep_only_busy_windows() {
    let workload = window();
    let draw = Draw {
        count: 20,
        len: 64,
        seed: 9,
        within: Some(Window {
            start: 500,
            len: 400,
        }),
        min_bsld: 0.0,
    };
    let plain = draw.windows(&workload, |_| true).unwrap();
    assert_eq!(plain.len(), 20);
    assert!(
        plain.iter().all(|w| w.start >= 500 && w.start + 64 <= 900),
        "{plain:?}"
    );
    assert_eq!(plain, draw.windows(&workload, |_| true).unwrap(), "seeded");
    assert_ne!(
        plain,
        Draw { seed: 10, ..draw }
            .windows(&workload, |_| true)
            .unwrap()
    );
    // Without a span, the plain draw is the reference's.
    assert_eq!(
        Draw {
            within: None,
            ..draw
        }
        .windows(&workload, |_| true)
        .unwrap(),
        Window::samples(workload.jobs.len(), 64, 20, 9).unwrap()
    );

    let floor = 100.0;
    assert!(
        plain.iter().any(|&w| fcfs_bsld(&workload, w) < floor),
        "some plain windows are calm, or the floor proves nothing"
    );
    let busy = Draw {
        min_bsld: floor,
        ..draw
    };
    let kept = busy.windows(&workload, |w| w.start % 2 == 1).unwrap();
    assert_eq!(kept.len(), 20);
    for &w in &kept {
        assert!(w.start % 2 == 1 && w.start >= 500 && w.start + 64 <= 900);
        assert!(fcfs_bsld(&workload, w) >= floor, "{w}");
    }

    let short = Draw {
        within: Some(Window { start: 0, len: 10 }),
        ..draw
    };
    assert!(
        short
            .windows(&workload, |_| true)
            .unwrap_err()
            .contains("do not fit")
    );
    // Every window refused: the draw gives up (after 100,000 windows) and
    // says what it looked for.
    assert!(
        busy.windows(&workload, |_| false)
            .unwrap_err()
            .contains("fewer than 20 windows of 64 jobs within jobs 500..900 reach an FCFS bounded slowdown of 100")
    );
}
