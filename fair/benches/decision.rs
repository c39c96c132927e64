//! One decision of the learned policy: build the observation, run the
//! network (the trainer's MLP, evaluated directly), pick the slot (the
//! best, as a real run does, without the probabilities only a trainer
//! records) — with 128 jobs queued (every slot real) and with 5,000 (the
//! slots chosen from a deep queue), for a v1, a v2 (site-independent),
//! fair-v3 (v2 over wider slots), fair-v4 (v3 with widths on log scales)
//! and fair-v5's network for EASY (v5: the users' places in fair-share
//! turns), and that network choosing through shortlists (F1 among the
//! slots within 32 logits of its best, and within 10⁹: every slot keyed),
//! and fair-v6's networks with and without EASY (each through F1's
//! shortlist), and fair-v9's network for committed choices under EASY
//! seeing v5 (fair-v9) and v9 (fair-v10: its users' predicted runs);
//! fair-v14's networks with and without EASY, through their own
//! shortlists and through those they switch to once estimates prove exact
//! (`sjf:32`, and `sjf` keying every slot); fair-v15's network for
//! `+easy` runs (fair-v14's searched again seeing v9); and the network
//! alone, directly and in tract's plan.
//!
//!     cargo bench -p slurp-fair --bench decision

use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use slurp_fair::Model;
use slurp_fair::observe::{Normalisers, Users, observe};
use slurp_fair::rollout::pick;
use slurp_sim::reference::Decision;
use slurp_sim::{Machine, SimJob};

/// The allocator the `slurp` binary uses, so the figures are the binary's
/// (tract allocates each op's output).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn decisions(c: &mut Criterion) {
    let norm = Normalisers {
        max_run: 100_000.0,
        max_procs: 256.0,
        max_mem: 0.0,
        max_user: 50.0,
        max_group: 10.0,
        max_exe: 0.0,
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/actor-test.onnx");
    let model = Model::load(&path, Some(norm)).expect("the test actor loads");
    // Jobs 0–199 started; the site-independent models' kept views take
    // the next ones as queued (jobs arrive in order and each arrived job
    // is queued or started), so their queues are jobs 200 onwards.
    let jobs: Vec<SimJob> = (0..5200u64)
        .map(|i| SimJob {
            id: i as i64,
            submit: i * 7,
            run: 60 + (i * 7919) % 20_000,
            estimate: 60 + (i * 7919) % 20_000,
            procs: 1 + (i * 31 % 64) as u32,
            user: (i % 50) as i64,
            group: (i % 10) as i64,
            exe: -1,
            mem: -1,
        })
        .collect();
    let started: Vec<u32> = (0..200).collect();
    let starts: Vec<u64> = (0..5200).map(|i| i * 7 + 30).collect();
    let mut group = c.benchmark_group("fair decision");
    for queued in [128usize, 5000] {
        let mut queue: Vec<u32> = (5000 - queued as u32..5000).collect();
        // As in an episode: users' scores are kept up to date incrementally.
        let mut users = Users::default();
        group.bench_function(format!("{queued} queued"), |b| {
            b.iter(|| {
                let d = Decision {
                    now: 40_000,
                    jobs: &jobs,
                    machine: Machine {
                        nodes: 256,
                        procs_per_node: 1,
                    },
                    free_nodes: 17,
                    queue: &mut queue,
                    started: &started,
                    starts: &starts,
                    running: &[],
                };
                let obs = observe(&d, &model.normalisers, &mut users);
                let logits = model.logits(&obs).expect("runs");
                std::hint::black_box(pick(&logits, None))
            })
        });
    }
    // The same with a v2 model: ratios against the shown jobs and the
    // users' standing, no normalisers.
    let v2 = Model::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/actor-v2.onnx"),
        None,
    )
    .expect("the v2 actor loads");
    // A whole decision through each site-independent model, at 128 queued
    // (every slot real) and where asked at 5,000 (slots chosen from a deep
    // queue): fair-v2 as shipped (9→4→1: the observation is most of a
    // decision); fair-v3, v2's features over the wider slots, which a deep
    // queue makes dearer (four orders, each user's earliest jobs); fair-v4,
    // v3's slots with widths on log scales (a third logarithm a slot; the
    // network real runs use, not the committed one); the same network
    // seeing v5 (the users' places in fair-share turns: a sort of the
    // shown users' usages more); fair-v5's network for EASY, which `+easy`
    // runs use (v5, 8 hidden units), and it seeing v7 and v8; the v2 test
    // actor.
    let built = |name: &str| slurp_fair::built_in(name).expect("a built-in model loads");
    let fair_v4_as_v5 = {
        let layers = built("fair-v4").layers().expect("a per-slot MLP");
        let bytes = slurp_fair::export::actor(&layers, "v5", &[]);
        Model::from_bytes(Path::new("fair-v4 as v5"), &bytes, None, None).expect("it loads")
    };
    let fair_v5_easy = std::sync::Arc::new(built("fair-v5")).in_slurp(true);
    // The same network seeing v7 (feature 6 each job's urgency to its
    // user: a user's job count more, no logarithm more a slot) and v8
    // (feature 8 each job's cost to the whole queue: the queue's rate, kept
    // as jobs come and go, and one logarithm a slot for the width's).
    // A network rewritten to see `sight` and choose through `rule` (none:
    // its own choice), as a model of its own.
    let rewritten = |net: &Model, sight: &str, rule: Option<String>, name: &str| {
        let layers = net.layers().expect("a per-slot MLP");
        let notes: Vec<_> = rule
            .into_iter()
            .map(|rule| (slurp_fair::model::SHORTLIST, rule))
            .collect();
        let bytes = slurp_fair::export::actor(&layers, sight, &notes);
        let model = Model::from_bytes(Path::new(name), &bytes, None, None).expect("it loads");
        std::sync::Arc::new(model)
    };
    let fair_v5_easy_as = |sight: &str| {
        rewritten(
            &fair_v5_easy,
            sight,
            None,
            &format!("fair-v5+easy as {sight}"),
        )
    };
    let (as_v7, as_v8) = (fair_v5_easy_as("v7"), fair_v5_easy_as("v8"));
    // The same network choosing through a shortlist (`shortlist.rs`).
    let fair_v5_easy_listed = |rule: &str| {
        let name = format!("fair-v5+easy, shortlist {rule}");
        rewritten(&fair_v5_easy, "v5", Some(rule.to_owned()), &name)
    };
    // fair-v6's networks, each choosing through F1 among its near-ties:
    // the one for `+easy` runs and the one for runs without backfilling.
    let fair_v6 = std::sync::Arc::new(built("fair-v6"));
    let fair_v6_easy = fair_v6.clone().in_slurp(true);
    let (near, all) = (fair_v5_easy_listed("f1:32"), fair_v5_easy_listed("f1:1e9"));
    // fair-v9's and fair-v10's network for committed choices under EASY:
    // one network, seeing v5 and v9 (a user's predicted run, read once a
    // user), through their shortlist.
    let committed_easy = |name: &str| {
        let model = built(name);
        let own = model.committed(true);
        let rule = own.shortlist().expect("a shortlist").to_string();
        rewritten(
            own,
            own.sight.name(),
            Some(rule),
            &format!("{name}+easy, committed"),
        )
    };
    // fair-v14's networks: its own (without backfilling) and slurp's
    // model's under EASY, each through the shortlist it plays on users'
    // estimates and through the one it switches to once they prove exact
    // (`exact.rs`), made its own here.
    let fair_v14 = std::sync::Arc::new(built("fair-v14"));
    let fair_v14_easy = fair_v14.clone().in_slurp(true);
    let exact = |net: &Model, name: &str| {
        let rule = net.exact().expect("a shortlist for exact estimates");
        rewritten(net, net.sight.name(), Some(rule.to_string()), name)
    };
    let (fair_v14_exact, fair_v14_easy_exact) = (
        exact(&fair_v14, "fair-v14, exact"),
        exact(&fair_v14_easy, "fair-v14+easy, exact"),
    );
    // fair-v15's network for `+easy` runs: it sees v9, its users'
    // predicted runs, through fair-v14's `f1:32`.
    let fair_v15_easy = std::sync::Arc::new(built("fair-v15")).in_slurp(true);
    let models: [(&str, std::sync::Arc<Model>, &[usize]); 19] = [
        ("fair-v2", built("fair-v2").into(), &[128]),
        ("fair-v3", built("fair-v3").into(), &[128, 5000]),
        ("fair-v4", built("fair-v4").into(), &[128, 5000]),
        ("fair-v4 as v5", fair_v4_as_v5.into(), &[128, 5000]),
        ("fair-v5+easy", fair_v5_easy, &[128, 5000]),
        ("fair-v5+easy as v7", as_v7, &[128, 5000]),
        ("fair-v5+easy as v8", as_v8, &[128, 5000]),
        ("fair-v5+easy, shortlist f1:32", near, &[128]),
        ("fair-v5+easy, shortlist f1:1e9", all, &[128]),
        ("fair-v6", fair_v6, &[128, 5000]),
        ("fair-v6+easy", fair_v6_easy, &[128, 5000]),
        (
            "fair-v9+easy, committed",
            committed_easy("fair-v9"),
            &[128, 5000],
        ),
        (
            "fair-v10+easy, committed",
            committed_easy("fair-v10"),
            &[128, 5000],
        ),
        ("v2", v2.into(), &[128, 5000]),
        ("fair-v14", fair_v14, &[128, 5000]),
        ("fair-v14, exact", fair_v14_exact, &[128, 5000]),
        ("fair-v14+easy", fair_v14_easy, &[128, 5000]),
        ("fair-v14+easy, exact", fair_v14_easy_exact, &[128, 5000]),
        ("fair-v15+easy", fair_v15_easy, &[128, 5000]),
    ];
    for (name, net, depths) in &models {
        for &queued in *depths {
            let mut queue: Vec<u32> = (200..200 + queued as u32).collect();
            let mut follow = slurp_fair::observe_v2::Follow::new(net.sight);
            group.bench_function(format!("{queued} queued, {name}"), |b| {
                b.iter(|| {
                    let d = decision(&jobs, &mut queue, &started, &starts);
                    let obs = follow.observe(&d);
                    let logits = net.logits(&obs).expect("runs");
                    let slot = pick(&logits, None);
                    std::hint::black_box(match net.shortlist() {
                        Some(list) => {
                            list.pick(&logits, slot, &obs, &jobs, d.now, d.machine.procs())
                        }
                        None => slot,
                    })
                })
            });
        }
    }
    // The two halves of a decision at 128 queued, apart.
    let mut queue: Vec<u32> = (5000 - 128..5000).collect();
    let mut users = Users::default();
    let obs = observe(
        &decision(&jobs, &mut queue, &started, &starts),
        &model.normalisers,
        &mut users,
    );
    group.bench_function("128 queued: observation only", |b| {
        b.iter(|| {
            std::hint::black_box(observe(
                &decision(&jobs, &mut queue, &started, &starts),
                &model.normalisers,
                &mut users,
            ))
        })
    });
    assert_eq!(model.evaluator(), "direct");
    group.bench_function("128 queued: network only", |b| {
        b.iter(|| std::hint::black_box(model.logits(&obs).expect("runs")))
    });
    // The same network in tract's plan, for the ratio.
    group.bench_function("128 queued: network only, tract", |b| {
        b.iter(|| std::hint::black_box(model.tract_logits(&obs).expect("runs")))
    });
    group.finish();
}

/// A decision with 17 nodes free at time 40,000.
fn decision<'a>(
    jobs: &'a [SimJob],
    queue: &'a mut Vec<u32>,
    started: &'a [u32],
    starts: &'a [u64],
) -> Decision<'a> {
    Decision {
        now: 40_000,
        jobs,
        machine: Machine {
            nodes: 256,
            procs_per_node: 1,
        },
        free_nodes: 17,
        queue,
        started,
        starts,
        running: &[],
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30);
    targets = decisions
}
criterion_main!(benches);
