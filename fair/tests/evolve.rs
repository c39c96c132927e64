//! The search (`evolve.rs`) scores a network exactly as `slurp policy
//! judge` does, and its loss follows the stated formula.

use std::ops::ControlFlow;
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

/// A search for one backfilling mode (`--backfill easy`) scores only that
/// mode's cells, each exactly the cell the whole arena gives.
#[test]
fn an_arena_of_some_kinds_scores_only_their_cells_as_the_whole_one_does() {
    let small = workload(Family::Small, 4, 3000);
    let ws = windows(&small, 3);
    let whole = Arena::new(vec![("small".into(), small.clone(), ws.clone())]);
    let easy: Vec<_> = judge::KINDS.into_iter().filter(|&(_, easy)| easy).collect();
    let some = Arena::of_kinds(vec![("small".into(), small, ws)], &easy);
    let shape = Shape { hidden: vec![] };
    let net = Arc::new(evolve::model(&shape, &by_feature(5, 1.0), &[]).unwrap());
    let all = whole.cells(&net, "net").unwrap();
    let got = some.cells(&net, "net").unwrap();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|c| c.backfill));
    for g in &got {
        let w = all
            .iter()
            .find(|c| c.model == g.model && c.backfill == g.backfill)
            .unwrap();
        assert_eq!(
            g.learned.worst_user_bounded_slowdown,
            w.learned.worst_user_bounded_slowdown
        );
        let rivals = |c: &judge::Cell| {
            c.rivals
                .iter()
                .map(|r| (r.policy.clone(), r.worst_user_bounded_slowdown))
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
    assert_eq!(evolve::loss(&[even.clone()]), 0.0);
    // An average 5% above the best: free under the judge's 1.1×, charged
    // three times its log ratio under a bound of 1.0×; the worst user's
    // term is the same under both.
    even.learned.avg_bounded_slowdown *= 1.05;
    assert_eq!(evolve::loss(&[even.clone()]), 0.0);
    let tight = evolve::Loss {
        gain: None,
        average_within: 1.0,
    };
    let got = tight.of(&[even]);
    assert!((got - 3.0 * 1.05f64.ln()).abs() < 1e-12, "{got}");
}

#[test]
fn a_search_reports_each_generation_and_returns_what_it_scored() {
    let w = workload(Family::Saturated, 2, 3000);
    let ws = windows(&w, 3);
    let arena = Arena::new(vec![("sat".into(), w, ws)]);
    let opts = evolve::Options {
        shape: Shape { hidden: vec![] },
        sight: evolve::SIGHT,
        population: Some(8),
        start: None,
        sigma: 0.5,
        seed: 1,
        generations: 6,
        time: std::time::Duration::from_secs(600),
        loss: evolve::Loss::default(),
        redraw: None,
        validation: None,
        shortlist: None,
        horizon: None,
        backlog: None,
    };
    let mut seen = Vec::new();
    let found = evolve::evolve(&arena, &opts, |g| {
        seen.push(*g);
        ControlFlow::Continue(())
    })
    .unwrap();
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

    // Asked to stop (Ctrl-C in `slurp policy train`), the search ends after
    // that generation with what it had kept by then: the same search,
    // seeded alike, stopped at its third generation.
    let mut stopped_at = Vec::new();
    let stopped = evolve::evolve(&arena, &opts, |g| {
        stopped_at.push(*g);
        if g.generation == 3 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(
        stopped_at.len(),
        3,
        "no generation after the one that stopped it"
    );
    assert_eq!(stopped.curve.len(), 3);
    assert_eq!(
        stopped.loss, seen[2].best,
        "what the full search had kept by then"
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

#[test]
fn a_widened_network_scores_every_slot_as_the_narrow_one_did() {
    let narrow = Shape { hidden: vec![3] };
    let params: Vec<f64> = (0..narrow.params())
        .map(|i| ((i * 7 % 11) as f64 - 5.0) / 4.0)
        .collect();
    let wide = Shape { hidden: vec![5] };
    let widened = evolve::widen(&narrow, &params, &wide).expect("3 units fit in 5");
    assert_eq!(widened.len(), wide.params());
    // The same choices on the same queues, in both simulation models.
    let w = workload(Family::Mid, 6, 3000);
    let ws = windows(&w, 2);
    let arena = Arena::new(vec![("mid".into(), w, ws)]);
    let a = Arc::new(evolve::model(&narrow, &params, &[]).unwrap());
    let b = Arc::new(evolve::model(&wide, &widened, &[]).unwrap());
    let (ca, cb) = (arena.cells(&a, "n").unwrap(), arena.cells(&b, "n").unwrap());
    for (x, y) in ca.iter().zip(&cb) {
        assert_eq!(
            x.learned.worst_user_bounded_slowdown,
            y.learned.worst_user_bounded_slowdown
        );
        assert_eq!(
            x.learned.avg_bounded_slowdown,
            y.learned.avg_bounded_slowdown
        );
    }
    // Narrower, or another number of layers, cannot hold it.
    assert_eq!(
        evolve::widen(&narrow, &params, &Shape { hidden: vec![2] }),
        None
    );
    assert_eq!(
        evolve::widen(&narrow, &params, &Shape { hidden: vec![3, 3] }),
        None
    );
}

#[test]
fn redrawn_windows_are_a_seeded_subset_scored_against_the_rivals_on_the_same() {
    let w = workload(Family::Small, 4, 4000);
    let ws = windows(&w, 6);
    let arena = Arena::new(vec![("small".into(), w.clone(), ws.clone())]);
    let a = arena.draw(3, 9, 0);
    assert_eq!(a, arena.draw(3, 9, 0), "the same round, the same draw");
    assert_eq!(a[0].len(), 3);
    assert!(a[0].windows(2).all(|p| p[0] < p[1]), "no window twice");
    let rounds: Vec<_> = (0..8).map(|r| arena.draw(3, 9, r)).collect();
    assert!(rounds.iter().any(|d| *d != a), "rounds draw anew");
    assert_eq!(arena.draw(10, 9, 0)[0], (0..6).collect::<Vec<_>>());
    // A draw's cells are what the judge says of those windows alone.
    let shape = Shape { hidden: vec![] };
    let net = Arc::new(evolve::model(&shape, &by_feature(5, 1.0), &[]).unwrap());
    let got = arena.cells_on(&net, "net", &a).unwrap();
    let some: Vec<Window> = a[0].iter().map(|&i| ws[i]).collect();
    let want = judge::cells(&net, "net", "small", &w, &some).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(
            g.learned.worst_user_bounded_slowdown,
            w.learned.worst_user_bounded_slowdown
        );
        for (x, y) in g.rivals.iter().zip(&w.rivals) {
            assert_eq!(x.worst_user_bounded_slowdown, y.worst_user_bounded_slowdown);
            assert_eq!(x.avg_bounded_slowdown, y.avg_bounded_slowdown);
        }
    }
}

#[test]
fn a_capped_gain_saturates_wins_and_leaves_trailing_as_it_was() {
    let small = workload(Family::Small, 4, 3000);
    let ws = windows(&small, 2);
    let arena = Arena::new(vec![("small".into(), small, ws)]);
    let shape = Shape { hidden: vec![] };
    let net = Arc::new(evolve::model(&shape, &by_feature(5, 1.0), &[]).unwrap());
    let cell = arena.cells(&net, "net").unwrap().remove(0);
    let fairest = cell.fairest_rival().worst_user_bounded_slowdown;
    let best_avg = cell
        .rivals
        .iter()
        .map(|r| r.avg_bounded_slowdown)
        .fold(f64::INFINITY, f64::min);
    let at = |ratio: f64| {
        let mut c = cell.clone();
        c.learned.worst_user_bounded_slowdown = ratio * fairest;
        c.learned.avg_bounded_slowdown = best_avg;
        c
    };
    let g = 0.3;
    // A small win counts nearly fully, a huge one no more than G.
    let small_win = capped(&[at(0.99)], g);
    assert!((small_win - 0.99f64.ln()).abs() < 2e-4, "{small_win}");
    let huge = capped(&[at(0.01)], g);
    assert!(huge > -g && huge < -0.99 * g, "{huge}");
    assert_eq!(
        evolve::loss(&[at(0.01)]),
        0.01f64.ln(),
        "uncapped as before"
    );
    // Trailing costs what it did.
    let trail = capped(&[at(1.5)], g);
    assert!((trail - 3.0 * 1.5f64.ln()).abs() < 1e-12);
    assert_eq!(trail, evolve::loss(&[at(1.5)]));
}

/// Four generations of six linear networks, gains capped at 0.3.
fn short_search() -> evolve::Options {
    evolve::Options {
        shape: Shape { hidden: vec![] },
        sight: evolve::SIGHT,
        population: Some(6),
        start: None,
        sigma: 0.5,
        seed: 3,
        generations: 4,
        time: std::time::Duration::from_secs(600),
        loss: evolve::Loss {
            gain: Some(0.3),
            ..Default::default()
        },
        redraw: None,
        validation: None,
        shortlist: None,
        horizon: None,
        backlog: None,
    }
}

/// Runs `opts` (a [`short_search`]): every generation is reported, and
/// the best kept so far never gets worse.
fn kept_search(arena: &Arena, opts: &evolve::Options) -> evolve::Evolved {
    let mut seen = Vec::new();
    let found = evolve::evolve(arena, opts, |g| {
        seen.push(*g);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(seen.len(), 4);
    assert!(seen.windows(2).all(|p| p[1].best <= p[0].best));
    found
}

#[test]
fn a_redrawn_search_keeps_the_mean_that_scores_best_on_every_window() {
    let w = workload(Family::Saturated, 2, 3000);
    let ws = windows(&w, 4);
    let arena = Arena::new(vec![("sat".into(), w, ws)]);
    let opts = evolve::Options {
        redraw: Some(2),
        ..short_search()
    };
    let found = kept_search(&arena, &opts);
    // What it returns scores its loss on all four windows, not on a draw.
    let net = Arc::new(evolve::model(&opts.shape, &found.params, &[]).unwrap());
    let whole = capped(&arena.cells(&net, "found").unwrap(), 0.3);
    assert!(
        (whole - found.loss).abs() < 1e-9,
        "{whole} vs {}",
        found.loss
    );
    // The zero network (the start) is never beaten by a worse mean.
    let zero = Arc::new(evolve::model(&opts.shape, &[0.0; 10], &[]).unwrap());
    let start = capped(&arena.cells(&zero, "zero").unwrap(), 0.3);
    assert!(found.loss <= start + 1e-12);
}

#[test]
fn a_validated_search_keeps_the_mean_that_scores_best_on_the_validation_cells() {
    let train = workload(Family::Saturated, 2, 3000);
    let tw = windows(&train, 3);
    let arena = Arena::new(vec![("sat".into(), train, tw)]);
    let check = workload(Family::Mid, 5, 3000);
    let cw = windows(&check, 3);
    let validation = Arc::new(Arena::new(vec![("mid".into(), check, cw)]));
    let opts = evolve::Options {
        validation: Some(validation.clone()),
        ..short_search()
    };
    let found = kept_search(&arena, &opts);
    // Its loss is the one on the validation cells, not the training ones.
    let net = Arc::new(evolve::model(&opts.shape, &found.params, &[]).unwrap());
    let judged =
        |arena: &Arena, net: &Arc<slurp_fair::Model>| capped(&arena.cells(net, "n").unwrap(), 0.3);
    let on_validation = judged(&validation, &net);
    assert!(
        (on_validation - found.loss).abs() < 1e-9,
        "{on_validation} vs {}",
        found.loss
    );
    assert!((judged(&arena, &net) - found.loss).abs() > 1e-9);
    // The start (the zero network) is never given up for a mean that does
    // worse there.
    let zero = Arc::new(evolve::model(&opts.shape, &[0.0; 10], &[]).unwrap());
    assert!(found.loss <= judged(&validation, &zero) + 1e-12);
}

/// The search's loss with gains capped at `g`.
fn capped(cells: &[judge::Cell], g: f64) -> f64 {
    evolve::Loss {
        gain: Some(g),
        ..Default::default()
    }
    .of(cells)
}
