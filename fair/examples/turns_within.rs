//! Hand-written rules against the judge's heuristics, in the reference
//! model: is the learned policy's edge something a two-line rule has?
//!
//! ```text
//! cargo build --release -p slurp-fair --example turns_within
//! cd ../shared/traces && $REPO/target/release/examples/turns_within \
//!     [--rules PREFIX,...] [--model M.onnx] \
//!     gen:mid:4 gen:quiet:40 RICC-2010-2.swf.xz,..75%,3
//! ```
//!
//! A workload is `gen:FAMILY:SEED[:JOBS]` or `PATH[,SPAN[,MIN_BSLD]]`
//! (`slurp policy judge`'s `--within` and `--min-bsld`). Each is replayed
//! on the judge's windows (50 of 1,024 jobs, seed 12345), without and with
//! EASY, by FCFS, SJF, F1 and `fairshare`, and by five families of rules:
//!
//! - **fair-share turns, another order inside a user** (`turns+f1`,
//!   `turns+sjf`, `turns+area`, `turns+narrow`, `turns+xfactor`): the user
//!   `fairshare` serves first, as it does, but of that user's queued jobs
//!   the first by F1's score, the shortest estimate, the least
//!   cores × estimate, the narrowest, or the largest slowdown so far —
//!   where `fairshare` itself starts the earliest;
//! - **the largest slowdown so far, held back by turns** (`xfactor+turnsK`):
//!   the job with the least `K·p/U − log10(x)`, `x = (w + r)/max(r, 10)`
//!   its bounded slowdown if it started now, `p` its user's place in turns
//!   among the `U` users queued (K = 0: largest slowdown first);
//! - **the worst user first** (`worst-user`): the user whose mean bounded
//!   slowdown would be highest if every queued job started now (running
//!   jobs counted at their estimate), that user's job first by F1;
//! - **a rescue** (`rescue>X`, `rescue>Kmean`): `turns+f1`, unless a queued
//!   job's slowdown so far is above X (or K times the queued jobs' mean):
//!   then the one furthest behind. With `--model M`, M's network for
//!   committed choices (`model`) and the same rescue on top of it
//!   (`model+rescue>X`);
//! - **Smith's rule for the users' mean slowdowns** (`smith`,
//!   `smith+worstB`, each also `+rescue>100`): a queued job's bounded
//!   slowdown grows by `1/max(r, 10)` a second and counts `1/k` in its
//!   user's mean (`k` the user's jobs in the window so far), and starting
//!   it takes `n·r` core-seconds, so the sum of the users' means is
//!   lowest, as far as a ratio rule can make it, with the least
//!   `k·max(r, 10)·n·r` first; `worstB` divides that by the user's mean
//!   slowdown so far (ended jobs at their own, running ones at their
//!   estimate, queued ones as if they started now) to the power B.
//!
//! `--rules` keeps the rules whose names start with one of the prefixes.
//!
//! It prints each heuristic's and rule's worst user's mean bounded
//! slowdown ÷ the fairest heuristic's (its average ÷ the best heuristic
//! average in brackets) per cell, the heuristics replayed as the judge
//! replays them; then, per rule and backfilling, the judge's counts: cells
//! won (at least 1% below every heuristic), held (at most 1% above the
//! best), averages within 1.1× the best, the geometric mean of the ratio
//! and the worst cell (stdlib/policies/MODEL_CARD.md, v13).

use std::collections::{BTreeMap, HashMap};

use slurp_fair::Model as Network;
use slurp_fair::judge;
use slurp_fair::rollout::{Eyes, pick};
use slurp_runtime::core::{FairShare, Order, Time, float_key};
use slurp_sim::metrics::bounded_slowdown;
use slurp_sim::reference::{self, Decision};
use slurp_sim::window::Draw;
use slurp_sim::{Metrics, Model, Schedule, SimJob, Window, Workload};

/// How a rule orders the first user's jobs.
#[derive(Debug, Clone, Copy)]
enum Inside {
    F1,
    Sjf,
    Area,
    Narrow,
    Xfactor,
}

#[derive(Debug, Clone, Copy)]
enum Rule {
    Turns(Inside),
    XfactorTurns(f64),
    WorstUser,
    /// `turns+f1`, unless a queued job's slowdown so far is above this
    /// bound: then the largest.
    RescueAbove(f64),
    /// The same, the bound this many times the queued jobs' mean.
    RescueTimesMean(f64),
    /// `--model`'s network for committed choices, rescued above the bound
    /// (infinite: never).
    Network(f64),
    /// Smith's rule for the sum of the users' mean bounded slowdowns, its
    /// users weighted by their standing to the power of the first figure,
    /// rescued above the second (infinite: never).
    Smith(f64, f64),
}

impl Rule {
    const ALL: [Rule; 23] = [
        Rule::Turns(Inside::F1),
        Rule::Turns(Inside::Sjf),
        Rule::Turns(Inside::Area),
        Rule::Turns(Inside::Narrow),
        Rule::Turns(Inside::Xfactor),
        Rule::XfactorTurns(0.0),
        Rule::XfactorTurns(1.0),
        Rule::XfactorTurns(2.0),
        Rule::XfactorTurns(4.0),
        Rule::XfactorTurns(8.0),
        Rule::WorstUser,
        Rule::RescueAbove(30.0),
        Rule::RescueAbove(100.0),
        Rule::RescueAbove(300.0),
        Rule::RescueAbove(1000.0),
        Rule::RescueTimesMean(10.0),
        Rule::RescueTimesMean(100.0),
        Rule::Smith(0.0, f64::INFINITY),
        Rule::Smith(1.0, f64::INFINITY),
        Rule::Smith(2.0, f64::INFINITY),
        Rule::Smith(0.0, 100.0),
        Rule::Smith(1.0, 100.0),
        Rule::Smith(2.0, 100.0),
    ];

    fn name(self) -> String {
        match self {
            Rule::Turns(inside) => format!("turns+{}", format!("{inside:?}").to_lowercase()),
            Rule::XfactorTurns(k) => format!("xfactor+turns{k}"),
            Rule::WorstUser => "worst-user".into(),
            Rule::RescueAbove(x) => format!("rescue>{x}"),
            Rule::RescueTimesMean(k) => format!("rescue>{k}mean"),
            Rule::Network(x) if x.is_finite() => format!("model+rescue>{x}"),
            Rule::Network(_) => "model".into(),
            Rule::Smith(b, x) => {
                let mut name = "smith".to_string();
                if b > 0.0 {
                    name += &format!("+worst{b}");
                }
                if x.is_finite() {
                    name += &format!("+rescue>{x}");
                }
                name
            }
        }
    }
}

/// F1's score (lower first), as the reference ranks by it.
fn f1(job: &SimJob) -> u64 {
    reference::key(Order::F1, job, 0).0
}

/// The bounded slowdown `job` would have if it started at `now` and ran
/// to its estimate.
fn xfactor(job: &SimJob, now: u64) -> f64 {
    bounded_slowdown(now.saturating_sub(job.submit), job.estimate)
}

/// Each queued user's place in fair-share turns (0 first; users of equal
/// usage share a place), and how many users are queued.
fn turns(d: &Decision<'_>, shares: &FairShare) -> (HashMap<u32, usize>, usize) {
    let snapshot = shares.at(Time(d.now.saturating_mul(1000)));
    let mut users: Vec<(f64, u32)> = d
        .queue
        .iter()
        .map(|&j| d.jobs[j as usize].account())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|a| (snapshot.rank(a), a))
        .collect();
    users.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut places = HashMap::new();
    let mut place = 0;
    for (i, &(usage, a)) in users.iter().enumerate() {
        if i > 0 && usage > users[i - 1].0 {
            place = i;
        }
        places.insert(a, place);
    }
    (places, users.len())
}

/// The queued job with the least `key` (ties: the earliest); `float_key`
/// orders numbers.
fn least(d: &Decision<'_>, only: impl Fn(u32) -> bool, key: impl Fn(&SimJob) -> u64) -> u32 {
    d.queue
        .iter()
        .copied()
        .filter(|&j| only(j))
        .min_by_key(|&j| (key(&d.jobs[j as usize]), j))
        .unwrap_or(d.queue[0])
}

/// The job furthest behind, if its slowdown so far is above `bound`.
fn rescue(d: &Decision<'_>, bound: f64) -> Option<u32> {
    let now = d.now;
    let slowest = least(d, |_| true, |job| float_key(-xfactor(job, now)));
    (xfactor(&d.jobs[slowest as usize], now) > bound).then_some(slowest)
}

/// `net`'s greedy committed choices in the reference model (as the judge
/// replays them), but the job furthest behind when [`rescue`] names one.
fn network(
    net: &Network,
    workload: &Workload,
    window: Window,
    backfill: bool,
    bound: f64,
) -> Result<Schedule, String> {
    let net = net.committed(backfill);
    let mut eyes = Eyes::new(net.sight, &net.normalisers);
    let mut failure = None;
    let schedule = reference::run_choosing(workload, window, backfill, |d| {
        if let [only] = d.queue[..] {
            return only;
        }
        if let Some(j) = rescue(d, bound) {
            return j;
        }
        let obs = eyes.observe(d);
        match net.logits(&obs) {
            Ok(logits) => {
                let slot = pick(&logits, None);
                obs.jobs.get(slot).copied().unwrap_or(obs.jobs[0])
            }
            Err(e) => {
                failure.get_or_insert(e.to_string());
                d.queue[0]
            }
        }
    });
    failure.map_or(Ok(schedule), Err)
}

fn replay(
    rule: Rule,
    net: Option<&Network>,
    workload: &Workload,
    window: Window,
    backfill: bool,
) -> Result<Schedule, String> {
    Ok(match rule {
        Rule::Turns(inside) => reference::run_with_shares(workload, window, backfill, |d, s| {
            let (places, _) = turns(d, s);
            let place = |j: u32| places[&d.jobs[j as usize].account()];
            let first = d.queue.iter().map(|&j| place(j)).min().unwrap_or(0);
            let now = d.now;
            least(
                d,
                |j| place(j) == first,
                |job| match inside {
                    Inside::F1 => f1(job),
                    Inside::Sjf => job.estimate,
                    Inside::Area => job.procs as u64 * job.estimate,
                    Inside::Narrow => job.procs as u64,
                    Inside::Xfactor => float_key(-xfactor(job, now)),
                },
            )
        }),
        Rule::RescueAbove(_) | Rule::RescueTimesMean(_) => {
            reference::run_with_shares(workload, window, backfill, |d, s| {
                let now = d.now;
                let bound = match rule {
                    Rule::RescueTimesMean(k) => {
                        let sum: f64 = d
                            .queue
                            .iter()
                            .map(|&j| xfactor(&d.jobs[j as usize], now))
                            .sum();
                        k * sum / d.queue.len().max(1) as f64
                    }
                    Rule::RescueAbove(x) => x,
                    _ => unreachable!("a rescue rule"),
                };
                if let Some(j) = rescue(d, bound) {
                    return j;
                }
                let (places, _) = turns(d, s);
                let place = |j: u32| places[&d.jobs[j as usize].account()];
                let first = d.queue.iter().map(|&j| place(j)).min().unwrap_or(0);
                least(d, |j| place(j) == first, f1)
            })
        }
        Rule::Network(bound) => {
            let net = net.ok_or("the model rules need --model")?;
            network(net, workload, window, backfill, bound)?
        }
        Rule::XfactorTurns(k) => reference::run_with_shares(workload, window, backfill, |d, s| {
            let (places, users) = turns(d, s);
            let now = d.now;
            least(
                d,
                |_| true,
                |job| {
                    float_key(
                        k * places[&job.account()] as f64 / users.max(1) as f64
                            - xfactor(job, now).log10(),
                    )
                },
            )
        }),
        Rule::WorstUser => reference::run_choosing(workload, window, backfill, |d| {
            let users = standing(d);
            let mean = |u: i64| users.get(&u).map_or(0.0, |&(s, n)| s / n as f64);
            let worst = d
                .queue
                .iter()
                .map(|&j| d.jobs[j as usize].user)
                .max_by(|a, b| mean(*a).total_cmp(&mean(*b)))
                .unwrap_or(-1);
            least(d, |j| d.jobs[j as usize].user == worst, f1)
        }),
        Rule::Smith(b, x) => reference::run_choosing(workload, window, backfill, |d| {
            if let Some(j) = rescue(d, x) {
                return j;
            }
            let users = standing(d);
            least(
                d,
                |_| true,
                |job| {
                    let (sum, n) = users.get(&job.user).copied().unwrap_or((1.0, 1));
                    let r = job.estimate.max(1) as f64;
                    float_key(
                        (n as f64).ln()
                            + r.max(10.0).ln()
                            + r.ln()
                            + (job.procs.max(1) as f64).ln()
                            - b * (sum / n as f64).ln(),
                    )
                },
            )
        }),
    })
}

/// Each user's bounded slowdowns summed over its jobs in the window so far
/// and how many: ended jobs at their own, running ones as if they ran to
/// their estimate, queued ones as if they started now.
fn standing(d: &Decision<'_>) -> HashMap<i64, (f64, u32)> {
    let now = d.now;
    let mut users: HashMap<i64, (f64, u32)> = HashMap::new();
    let mut count = |user: i64, b: f64| {
        let u = users.entry(user).or_default();
        u.0 += b;
        u.1 += 1;
    };
    for &j in d.started {
        let job = &d.jobs[j as usize];
        let start = d.starts[j as usize];
        let wait = start.saturating_sub(job.submit);
        let ran = if start + job.run <= now {
            job.run
        } else {
            job.estimate
        };
        count(job.user, bounded_slowdown(wait, ran));
    }
    for &j in d.queue.iter() {
        let job = &d.jobs[j as usize];
        count(job.user, xfactor(job, now));
    }
    users
}

/// A workload and the judge's windows of it.
fn load(spec: &str) -> Result<(Workload, Vec<Window>), String> {
    let mut parts = spec.split(',');
    let head = parts.next().unwrap_or_default();
    let workload = Workload::read(std::path::Path::new(head))?;
    let mut draw = Draw {
        count: judge::SAMPLES,
        len: judge::LEN,
        seed: judge::SEED,
        within: None,
        min_bsld: 0.0,
    };
    if let Some(span) = parts.next() {
        draw.within = Some(Window::parse_span(span, workload.jobs.len())?);
    }
    if let Some(min) = parts.next() {
        draw.min_bsld = min
            .parse()
            .map_err(|_| format!("`{spec}`: `{min}` is not a number"))?;
    }
    let windows = draw.windows(&workload, |_| true)?;
    Ok((workload, windows))
}

/// `--NAME VALUE` taken out of `args`.
fn option(args: &mut Vec<String>, name: &str) -> Option<String> {
    let at = args.iter().position(|a| a == name)?;
    let value = args.get(at + 1).cloned();
    args.drain(at..(at + 2).min(args.len()));
    value
}

fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("error: {message}");
    std::process::exit(2);
}

fn main() {
    let mut specs: Vec<String> = std::env::args().skip(1).collect();
    let only: Vec<String> = option(&mut specs, "--rules")
        .map(|r| r.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let net = option(&mut specs, "--model").map(|path| {
        Network::load(std::path::Path::new(&path), None)
            .unwrap_or_else(|e| fail(format!("{path}: {e}")))
    });
    if specs.is_empty() {
        fail(
            "usage: turns_within [--rules PREFIX,...] [--model M.onnx] WORKLOAD... (gen:FAMILY:SEED[:JOBS] or PATH[,SPAN[,MIN_BSLD]])",
        );
    }
    let mut rules: Vec<Rule> = Rule::ALL.to_vec();
    if net.is_some() {
        rules.extend([f64::INFINITY, 100.0, 300.0, 1000.0].map(Rule::Network));
    }
    rules
        .retain(|rule| only.is_empty() || only.iter().any(|o| rule.name().starts_with(o.as_str())));
    if rules.is_empty() {
        fail(format!(
            "--rules {}: no rule's name starts so (the model rules need --model)",
            only.join(",")
        ));
    }
    // (rule, backfill) -> its cells.
    let mut tally: BTreeMap<(String, bool), Vec<judge::Cell>> = BTreeMap::new();
    for spec in &specs {
        let (workload, windows) = load(spec).unwrap_or_else(|e| fail(e));
        for backfill in [false, true] {
            // The judge's own replays of its heuristics.
            let rivals = judge::rivals(&workload, &windows, Model::Reference, backfill);
            let fairest = rivals
                .iter()
                .map(|s| s.worst_user_bounded_slowdown)
                .fold(f64::INFINITY, f64::min)
                .max(f64::MIN_POSITIVE);
            let best_average = rivals
                .iter()
                .map(|s| s.avg_bounded_slowdown)
                .fold(f64::INFINITY, f64::min)
                .max(f64::MIN_POSITIVE);
            let ratios = |s: &judge::Score| {
                (
                    s.worst_user_bounded_slowdown / fairest,
                    s.avg_bounded_slowdown / best_average,
                )
            };
            let mut line = format!("{spec} {}", if backfill { "easy" } else { "none" });
            for (order, s) in judge::RIVALS.iter().zip(&rivals) {
                let (w, a) = ratios(s);
                line += &format!(" | {} {w:.3} ({a:.2})", order.name());
            }
            for &rule in &rules {
                let runs: Vec<Metrics> = windows
                    .iter()
                    .map(|&w| {
                        let schedule = replay(rule, net.as_ref(), &workload, w, backfill)
                            .unwrap_or_else(|e| fail(e));
                        Metrics::of(&workload, &schedule, Model::Reference)
                    })
                    .collect();
                // Judged as the judge judges a model: its cell's verdicts.
                let cell = judge::Cell {
                    workload: spec.clone(),
                    model: Model::Reference,
                    backfill,
                    rivals: rivals.clone(),
                    learned: judge::score(rule.name(), &runs),
                };
                let (w, a) = ratios(&cell.learned);
                line += &format!(" | {} {w:.3} ({a:.2})", rule.name());
                tally.entry((rule.name(), backfill)).or_default().push(cell);
            }
            println!("{line}");
        }
    }
    println!(
        "\nrule, backfilling: won / held / averages within 1.1x of {} cells, geometric mean, worst",
        specs.len()
    );
    for ((rule, backfill), cells) in &tally {
        let t = judge::Tally::of(cells);
        println!(
            "{rule:18} {:4} {:2} / {:2} / {:2}  {:.3}  {:.2}",
            if *backfill { "easy" } else { "none" },
            t.wins,
            t.holds,
            t.averages,
            t.geometric,
            t.worst
        );
    }
}
