//! The search (`evolve.rs`) scores a network exactly as `slurp policy
//! judge` does, and its loss follows the stated formula.

use std::sync::Arc;

use slurp_fair::evolve::{self, Arena, Shape};
use slurp_fair::judge;
use slurp_sim::generate::{Family, generate};
use slurp_sim::window::Draw;
use slurp_sim::{Machine, Window, Workload};

fn workload(family: Family, seed: u64, jobs: usize) -> Workload {
    let trace = generate(&family.spec(jobs), seed);
    let machine = Machine::of(&trace).unwrap();
    Workload::new(&trace, machine)
}

fn windows(w: &Workload, count: usize) -> Vec<Window> {
    Draw {
        count,
        len: 256,
        seed: 3,
        within: None,
        min_bsld: 0.0,
    }
    .windows(w, |_| true)
    .unwrap()
}

/// A linear network that scores a slot by one feature (0-based).
fn by_feature(feature: usize, weight: f64) -> Vec<f64> {
    let shape = Shape { hidden: vec![] };
    let mut params = vec![0.0; shape.params()];
    params[feature] = weight;
    params
}

#[test]
fn the_arena_scores_a_network_as_the_judge_does() {
    let small = workload(Family::Small, 4, 3000);
    let mid = workload(Family::Mid, 5, 3000);
    let (ws, wm) = (windows(&small, 3), windows(&mid, 2));
    let arena = Arena::new(vec![
        ("small".into(), small.clone(), ws.clone()),
        ("mid".into(), mid.clone(), wm.clone()),
    ]);
    assert_eq!(arena.windows(), 5);
    // Prefer the user with the highest fair-share factor (feature 6).
    let shape = Shape { hidden: vec![] };
    let net = Arc::new(evolve::model(&shape, &by_feature(5, 1.0), &[]).unwrap());
    let got = arena.cells(&net, "net").unwrap();
    let mut want = judge::cells(&net, "net", "small", &small, &ws).unwrap();
    want.extend(judge::cells(&net, "net", "mid", &mid, &wm).unwrap());
    assert_eq!(got.len(), 8);
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(
            (&g.workload, g.model, g.backfill),
            (&w.workload, w.model, w.backfill)
        );
        assert_eq!(
            g.learned.worst_user_bounded_slowdown,
            w.learned.worst_user_bounded_slowdown
        );
        assert_eq!(
            g.learned.avg_bounded_slowdown,
            w.learned.avg_bounded_slowdown
        );
        let rivals = |c: &judge::Cell| {
            c.rivals
                .iter()
                .map(|r| (r.worst_user_bounded_slowdown, r.avg_bounded_slowdown))
                .collect::<Vec<_>>()
        };
        assert_eq!(rivals(g), rivals(w));
    }
}

#[test]
fn the_loss_is_the_log_ratio_with_trailing_and_a_dear_average_charged() {
    let small = workload(Family::Small, 4, 3000);
    let ws = windows(&small, 2);
    let arena = Arena::new(vec![("small".into(), small, ws)]);
    let shape = Shape { hidden: vec![] };
    let net = Arc::new(evolve::model(&shape, &by_feature(5, 1.0), &[]).unwrap());
    let cells = arena.cells(&net, "net").unwrap();
    let mut want = 0.0;
    for c in &cells {
        let best_worst = c
            .rivals
            .iter()
            .map(|r| r.worst_user_bounded_slowdown)
            .fold(f64::INFINITY, f64::min);
        let best_avg = c
            .rivals
            .iter()
            .map(|r| r.avg_bounded_slowdown)
            .fold(f64::INFINITY, f64::min);
        let w = (c.learned.worst_user_bounded_slowdown / best_worst).ln();
        let a = (c.learned.avg_bounded_slowdown / (1.1 * best_avg)).ln();
        want += w + 2.0 * w.max(0.0) + 3.0 * a.max(0.0);
    }
    want /= cells.len() as f64;
    let got = evolve::loss(&cells);
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    // A cell that matches the fairest heuristic exactly, average kept, costs 0.
    let mut even = cells[0].clone();
    even.learned.worst_user_bounded_slowdown = even
        .rivals
        .iter()
        .map(|r| r.worst_user_bounded_slowdown)
        .fold(f64::INFINITY, f64::min);
    even.learned.avg_bounded_slowdown = even
        .rivals
        .iter()
        .map(|r| r.avg_bounded_slowdown)
        .fold(f64::INFINITY, f64::min);
    assert_eq!(evolve::loss(&[even]), 0.0);
}

#[test]
fn a_search_reports_each_generation_and_returns_what_it_scored() {
    let w = workload(Family::Saturated, 2, 3000);
    let ws = windows(&w, 3);
    let arena = Arena::new(vec![("sat".into(), w, ws)]);
    let opts = evolve::Options {
        shape: Shape { hidden: vec![] },
        population: Some(8),
        start: None,
        sigma: 0.5,
        seed: 1,
        generations: 6,
        time: std::time::Duration::from_secs(600),
    };
    let mut seen = Vec::new();
    let found = evolve::evolve(&arena, &opts, |g| seen.push(*g)).unwrap();
    assert_eq!(seen.len(), 6, "one report a generation");
    assert!(
        seen.windows(2).all(|p| p[1].best <= p[0].best),
        "the best never worsens"
    );
    assert_eq!(found.loss, seen.last().unwrap().best);
    // The network found scores what the search says it scores.
    let net = Arc::new(evolve::model(&opts.shape, &found.params, &[]).unwrap());
    let again = evolve::loss(&arena.cells(&net, "found").unwrap());
    assert!(
        (again - found.loss).abs() < 1e-9,
        "{again} vs {}",
        found.loss
    );
}

#[test]
fn a_search_can_start_from_a_written_model() {
    let shape = Shape { hidden: vec![3] };
    let params: Vec<f64> = (0..shape.params())
        .map(|i| (i as f64 - 20.0) / 16.0)
        .collect();
    let model = evolve::model(&shape, &params, &[]).unwrap();
    let layers = model.layers().expect("an evolved model's layers read back");
    let (again, read) = Shape::of(&layers).unwrap();
    assert_eq!(again, shape);
    for (a, b) in read.iter().zip(&params) {
        assert!((a - b).abs() < 1e-6, "{a} vs {b}");
    }
}
