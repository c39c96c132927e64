//! Synthetic multi-user workloads: Lublin and Feitelson's model of job
//! sizes and run times (JPDC 2003) with users of different habits, a daily
//! arrival cycle and a chosen load, on a machine of a chosen size. Seeded:
//! the same spec and seed give the same trace (ChaCha8 draws; the floating-point
//! functions are the platform's, so another libm could move a rounding).
//!
//! - **Sizes**: a serial job with probability 0.24 (the spec's `serial`);
//!   otherwise log2 of the size is drawn from a two-stage uniform (0.86 of
//!   it, the spec's `narrow`, between 0.8 and log2(N) − 2.5, the rest up
//!   to log2(N)), rounded to a power of two with probability 0.75. A
//!   *wide* user's jobs take the upper stage only.
//! - **Run times**: ln(run) follows Lublin's hyper-Gamma — Gamma(4.2, 0.94)
//!   with probability p = −0.0054·log2(n) + 0.78, else Gamma(312, 0.03) —
//!   scaled by the user's own factor (log-normal), at most 48 h.
//! - **Estimates**: the run time times the user's over-estimation (exact
//!   for some users, up to 20× for others), rounded up to the limits people
//!   type (5 min, 15 min, 1 h, 4 h, …); most users (the spec's `lazy`
//!   share, 0.6) also have a habitual limit of 8 hours or more (from the
//!   spec's `habitual_from`) they give many of their jobs whatever their
//!   length (Tsafrir et al.: estimates are modal, often the queue's
//!   maximum); a job that reaches its estimate is killed there.
//! - **Users**: activity follows Zipf (a few heavy users, many light ones);
//!   each submits in sessions of similar jobs a few seconds to minutes
//!   apart, bursty users in long ones.
//! - **Arrivals**: sessions come at a rate that follows the hour of the day
//!   (peak at 14:00, trough at 02:00) and is lower at weekends, scaled so
//!   that the offered load (Σ run × size over cores × span) is the one
//!   asked for. With a `surge`, each day's activity is also scaled by a
//!   log-normal factor of that spread, correlated from day to day (AR(1),
//!   0.6), so that some days offer several times what the machine can do
//!   and a backlog outlives them, as on RICC (its daily load: median 0.72,
//!   one day in ten 1.75 or more, its worst 4.3). The factors come from
//!   their own stream: a spec without a surge draws as before.
//!
//! [`Family`] names the presets the trainer and its judge draw from, from
//! tens to thousands of cores and from quiet to saturated.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Gamma, LogNormal};
use slurp_trace::{Job, Trace};

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub nodes: u32,
    pub procs_per_node: u32,
    pub jobs: usize,
    pub users: u32,
    /// Offered load: work asked for over what the machine gives in the
    /// trace's span (1 = exactly full).
    pub load: f64,
    /// Share of users whose jobs are wide.
    pub wide: f64,
    /// Share of users who submit in long bursts.
    pub bursty: f64,
    /// Share of jobs (of users who are not wide) on one processor.
    pub serial: f64,
    /// Spread (log-normal σ) of each day's activity; 0: every day alike
    /// but for the daily and weekly cycle.
    pub surge: f64,
    /// Share of the parallel jobs of users who are not wide drawn from
    /// the lower stage of sizes (the rest reach the whole machine).
    pub narrow: f64,
    /// Share of users with a habitual limit they give many of their jobs.
    pub lazy: f64,
    /// The shortest habitual limit (an index into the limits people type:
    /// 8 is 8 hours, 12 a day).
    pub habitual_from: usize,
    /// Whether jobs carry their users' requested times. Without, each is
    /// written −1, as archive traces without estimates are, and a replay
    /// takes the run time as the estimate. The same jobs are drawn either way.
    pub estimates: bool,
}

/// The presets: machines from 64 to 8,192 processors, loads from quiet to
/// over-full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// 64 one-processor nodes, 16 users, load 0.7, many bursts.
    Small,
    /// 64 × 8 processors, 48 users, load 0.7.
    Mid,
    /// 512 × 8 processors, 128 users, load 0.7, many wide jobs.
    Large,
    /// 32 × 8 processors, 32 users, offered all it can do (load 1).
    Saturated,
    /// 128 × 8 processors, 64 users, load 0.4.
    Quiet,
    /// RICC's machine and habits: 1,024 × 8 processors, 176 users, 77% of
    /// sessions serial, one parallel job in a hundred from the upper stage
    /// of sizes (no wide users), every user giving many jobs a habitual
    /// limit of a day or more; load 0.8 in surges of days, so that a
    /// backlog outlives the days that built it. Meant for long replays
    /// (`gen:deep:SEED:60000`, weeks to months), not 1,024-job windows.
    Deep,
}

impl Family {
    pub const ALL: [Family; 6] = [
        Family::Small,
        Family::Mid,
        Family::Large,
        Family::Saturated,
        Family::Quiet,
        Family::Deep,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Family::Small => "small",
            Family::Mid => "mid",
            Family::Large => "large",
            Family::Saturated => "saturated",
            Family::Quiet => "quiet",
            Family::Deep => "deep",
        }
    }

    /// The family's spec, for `jobs` jobs.
    pub fn spec(self, jobs: usize) -> Spec {
        let (nodes, ppn, users, load, wide, bursty) = match self {
            Family::Small => (64, 1, 16, 0.7, 0.1, 0.3),
            Family::Mid => (64, 8, 48, 0.7, 0.1, 0.15),
            Family::Large => (512, 8, 128, 0.7, 0.25, 0.1),
            Family::Saturated => (32, 8, 32, 1.0, 0.1, 0.2),
            Family::Quiet => (128, 8, 64, 0.4, 0.1, 0.1),
            Family::Deep => (1024, 8, 176, 0.8, 0.0, 0.3),
        };
        let (serial, surge, narrow, lazy, habitual_from) = match self {
            Family::Deep => (0.77, 0.4, 0.99, 1.0, 12),
            _ => LUBLIN,
        };
        Spec {
            nodes,
            procs_per_node: ppn,
            jobs,
            users,
            load,
            wide,
            bursty,
            serial,
            surge,
            narrow,
            lazy,
            habitual_from,
            estimates: true,
        }
    }
}

impl std::str::FromStr for Family {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Family::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Family::ALL.iter().map(|f| f.name()).collect();
                format!("unknown workload family `{s}` ({})", names.join(", "))
            })
    }
}

/// The spec's `serial`, `surge`, `narrow`, `lazy` and `habitual_from` of
/// every family but `deep`: Lublin and Feitelson's sizes, Tsafrir's
/// estimate habits, no surges.
const LUBLIN: (f64, f64, f64, f64, usize) = (0.24, 0.0, 0.86, 0.6, 8);

/// The limits people type, seconds.
const LIMITS: [u64; 16] = [
    300, 600, 900, 1800, 3600, 7200, 10800, 14400, 21600, 28800, 43200, 57600, 86400, 129600,
    172800, 259200,
];
/// The longest run and estimate, seconds.
const MAX_RUN: f64 = 172_800.0;

#[derive(Debug, Clone, Copy)]
struct Habit {
    weight: f64,
    wide: bool,
    /// Mean jobs per session.
    session: f64,
    /// Run-time factor.
    scale: f64,
    /// Largest over-estimation (1: exact).
    over: f64,
    /// The limit this user gives by habit, and how often.
    habitual: u64,
    lazy: f64,
}

struct Draft {
    user: u32,
    procs: u32,
    run: u64,
    estimate: u64,
    /// Seconds after its session's start.
    offset: f64,
    session: usize,
}

fn size(rng: &mut ChaCha8Rng, procs: u32, wide: bool, serial: f64, narrow: f64) -> u32 {
    let top = (procs as f64).log2();
    if !wide && rng.random::<f64>() < serial || top < 1.0 {
        return 1;
    }
    let med = (top - 2.5).max(0.8);
    let x = if !wide && rng.random::<f64>() < narrow {
        rng.random_range(0.8..=med.max(0.8 + 1e-9))
    } else {
        rng.random_range(med..=top)
    };
    let x = if rng.random::<f64>() < 0.75 {
        x.round()
    } else {
        x
    };
    (x.exp2().round() as u32).clamp(1, procs)
}

fn run_time(rng: &mut ChaCha8Rng, procs: u32, scale: f64) -> u64 {
    let p = (-0.0054 * (procs as f64).log2() + 0.78).clamp(0.0, 1.0);
    // Shape and scale (Lublin's alpha and beta).
    let (alpha, beta) = if rng.random::<f64>() < p {
        (4.2, 0.94)
    } else {
        (312.0, 0.03)
    };
    let ln: f64 = Gamma::new(alpha, beta).map_or(alpha * beta, |g| g.sample(rng));
    (ln.exp() * scale).clamp(1.0, MAX_RUN).round() as u64
}

fn estimate(rng: &mut ChaCha8Rng, run: u64, over: f64) -> u64 {
    let factor = if over <= 1.0 {
        1.0
    } else {
        over.powf(rng.random::<f64>())
    };
    let want = (run as f64 * factor).ceil() as u64;
    if over <= 1.0 {
        return want.max(1);
    }
    LIMITS
        .iter()
        .copied()
        .find(|&l| l >= want)
        .unwrap_or(MAX_RUN as u64)
}

/// Seconds into a week at which activity is `rate(t)` of its peak.
fn activity(t: f64) -> f64 {
    let hour = (t / 3600.0) % 24.0;
    let day = ((t / 86_400.0) as u64) % 7;
    let daily = 0.6 + 0.4 * (std::f64::consts::TAU * (hour - 14.0) / 24.0).cos();
    daily * if day >= 5 { 0.6 } else { 1.0 }
}

/// Each day's activity factor over `span` seconds: log-normal of spread
/// `surge`, correlated from one day to the next (AR(1), 0.6), from a
/// stream of its own (`seed`'s), so that the main draws are those of a
/// spec without a surge. Empty without a surge (every day 1).
fn surges(surge: f64, span: f64, seed: u64) -> Vec<f64> {
    if surge <= 0.0 {
        return Vec::new();
    }
    const RHO: f64 = 0.6;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5375_7267_6573_0000);
    let normal = rand_distr::StandardNormal;
    let mut z: f64 = normal.sample(&mut rng);
    (0..=(span / 86_400.0) as usize)
        .map(|_| {
            let day = (surge * z).exp();
            let e: f64 = normal.sample(&mut rng);
            z = RHO * z + (1.0 - RHO * RHO).sqrt() * e;
            day
        })
        .collect()
}

/// Jobs a generated workload has unless its name says (`gen:FAMILY:SEED:JOBS`).
pub const NAMED_JOBS: usize = 10_000;

/// The workload a name `gen:FAMILY[:SEED[:JOBS]]` stands for (`None` for
/// any other name: a trace file's), such as `gen:mid:7`; the commands that
/// take workloads and the trainer's tools read names through this.
pub fn named(name: &str) -> Option<Result<Trace, String>> {
    let rest = name.strip_prefix("gen:")?;
    let mut parts = rest.split(':');
    let family: Family = match parts.next().unwrap_or_default().parse() {
        Ok(f) => f,
        Err(e) => return Some(Err(e)),
    };
    let number = |what: &str, text: Option<&str>, default: u64| match text {
        None => Ok(default),
        Some(t) => t
            .parse::<u64>()
            .map_err(|_| format!("`{name}`: the {what} `{t}` is not a whole number")),
    };
    let mut read = || {
        let seed = number("seed", parts.next(), 0)?;
        let jobs = number("job count", parts.next(), NAMED_JOBS as u64)?;
        if parts.next().is_some() || jobs == 0 || jobs > 10_000_000 {
            return Err(format!(
                "`{name}`: give gen:FAMILY[:SEED[:JOBS]] with 1 to 10,000,000 jobs, such as gen:mid:7"
            ));
        }
        Ok(generate(&family.spec(jobs as usize), seed))
    };
    Some(read())
}

/// A workload of `spec`, from `seed`, as an SWF trace.
pub fn generate(spec: &Spec, seed: u64) -> Trace {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let procs = spec.nodes.max(1) * spec.procs_per_node.max(1);
    let users = spec.users.max(1);
    let spread = LogNormal::new(0.0, 0.7).ok();
    let habits: Vec<Habit> = (0..users)
        .map(|rank| {
            let bursty = rng.random::<f64>() < spec.bursty;
            Habit {
                weight: 1.0 / ((rank + 1) as f64).powf(1.2),
                wide: rng.random::<f64>() < spec.wide,
                session: if bursty {
                    rng.random_range(10.0..40.0)
                } else {
                    rng.random_range(1.0..4.0)
                },
                scale: spread.map_or(1.0, |d| d.sample(&mut rng)),
                over: if rng.random::<f64>() < 0.2 {
                    1.0
                } else {
                    rng.random_range(2.0..20.0)
                },
                habitual: LIMITS
                    [rng.random_range(spec.habitual_from.min(LIMITS.len() - 1)..LIMITS.len())],
                lazy: if rng.random::<f64>() < 1.0 - spec.lazy {
                    0.0
                } else {
                    rng.random_range(0.3..0.9)
                },
            }
        })
        .collect();
    let total: f64 = habits.iter().map(|h| h.weight).sum();
    // Sessions of similar jobs, each of one user drawn by activity.
    let mut drafts: Vec<Draft> = Vec::with_capacity(spec.jobs);
    let mut session = 0;
    while drafts.len() < spec.jobs {
        let mut pick = rng.random::<f64>() * total;
        let user = habits
            .iter()
            .position(|h| {
                pick -= h.weight;
                pick <= 0.0
            })
            .unwrap_or(habits.len() - 1);
        let habit = habits[user];
        let count = Exp::new(1.0 / habit.session)
            .map_or(1.0, |d| d.sample(&mut rng))
            .ceil()
            .max(1.0) as usize;
        let procs_of = size(&mut rng, procs, habit.wide, spec.serial, spec.narrow);
        let base = run_time(&mut rng, procs_of, habit.scale);
        let mut offset = 0.0;
        for _ in 0..count.min(spec.jobs - drafts.len()) {
            let run = ((base as f64) * rng.random_range(0.5..1.5)).clamp(1.0, MAX_RUN) as u64;
            let estimate = if rng.random::<f64>() < habit.lazy {
                // The habitual limit, or the next one a job too long for
                // it needs.
                let at_least = run.max(habit.habitual);
                LIMITS
                    .iter()
                    .copied()
                    .find(|&l| l >= at_least)
                    .unwrap_or(MAX_RUN as u64)
            } else {
                estimate(&mut rng, run, habit.over)
            };
            drafts.push(Draft {
                user: user as u32,
                procs: procs_of,
                run: run.min(estimate),
                estimate,
                offset,
                session,
            });
            offset += rng.random_range(1.0..120.0);
        }
        session += 1;
    }
    // The span that gives the load asked for, and session starts spread
    // over it by the daily cycle (rejection: a start is kept with the
    // activity at its time).
    let work: f64 = drafts.iter().map(|d| d.run as f64 * d.procs as f64).sum();
    let span = work / (spec.load.max(0.01) * procs as f64);
    let days = surges(spec.surge, span, seed);
    let top = days.iter().copied().fold(1.0, f64::max);
    let mut starts: Vec<f64> = (0..session)
        .map(|_| {
            loop {
                let t = rng.random::<f64>() * span;
                let day = days.get((t / 86_400.0) as usize).map_or(1.0, |f| f / top);
                if rng.random::<f64>() < activity(t) * day {
                    break t;
                }
            }
        })
        .collect();
    starts.sort_by(f64::total_cmp);
    let mut jobs: Vec<(u64, Draft)> = drafts
        .into_iter()
        .map(|d| ((starts[d.session] + d.offset) as u64, d))
        .collect();
    jobs.sort_by_key(|(submit, _)| *submit);
    let jobs = jobs
        .into_iter()
        .enumerate()
        .map(|(i, (submit, d))| Job {
            id: i as i64 + 1,
            submit: submit as i64,
            wait: -1,
            run: d.run as i64,
            procs: d.procs as i64,
            cpu: -1.0,
            mem: -1.0,
            req_procs: d.procs as i64,
            req_time: if spec.estimates {
                d.estimate as i64
            } else {
                -1
            },
            req_mem: -1,
            status: 1,
            user: d.user as i64 + 1,
            group: -1,
            exe: -1,
            queue: -1,
            partition: -1,
            preceding: -1,
            think: -1,
        })
        .collect();
    let header = vec![
        (
            "Note".to_owned(),
            format!(
                "generated by slurp (Lublin-Feitelson sizes and run times, multi-user): {} jobs, {} users, load {}, wide {}, bursty {}{}{}, seed {seed}",
                spec.jobs,
                users,
                spec.load,
                spec.wide,
                spec.bursty,
                // What differs from Lublin's settings, so that the file says
                // how it was made.
                if (
                    spec.serial,
                    spec.surge,
                    spec.narrow,
                    spec.lazy,
                    spec.habitual_from
                ) == LUBLIN
                {
                    String::new()
                } else {
                    format!(
                        ", serial {}, daily surges {}, lower size stage {}, habitual limits for {} of users from {} s",
                        spec.serial,
                        spec.surge,
                        spec.narrow,
                        spec.lazy,
                        LIMITS[spec.habitual_from.min(LIMITS.len() - 1)]
                    )
                },
                if spec.estimates {
                    ""
                } else {
                    ", no requested times"
                }
            ),
        ),
        ("MaxNodes".to_owned(), spec.nodes.to_string()),
        ("MaxProcs".to_owned(), procs.to_string()),
    ];
    Trace {
        header,
        jobs,
        malformed: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Machine, Workload};

    /// Each day's offered work over what the machine gives in a day.
    fn daily_loads(trace: &Trace, procs: f64) -> Vec<f64> {
        let days = (trace.jobs.last().unwrap().submit / 86_400 + 1) as usize;
        let mut work = vec![0.0; days];
        for j in &trace.jobs {
            work[(j.submit / 86_400) as usize] += (j.run * j.procs) as f64 / (procs * 86_400.0);
        }
        work
    }

    /// Sessions begun each day (a job with no job of its user in the
    /// minutes before it starts one).
    fn daily_sessions(trace: &Trace) -> Vec<f64> {
        let days = (trace.jobs.last().unwrap().submit / 86_400 + 1) as usize;
        let mut count = vec![0.0; days];
        let mut last = std::collections::HashMap::new();
        for j in &trace.jobs {
            if last
                .insert(j.user, j.submit)
                .is_none_or(|t| j.submit - t > 600)
            {
                count[(j.submit / 86_400) as usize] += 1.0;
            }
        }
        count
    }

    #[test]
    fn surges_move_the_same_jobs_into_days_of_several_machines() {
        let deep = Family::Deep.spec(20_000);
        let flat = Spec {
            surge: 0.0,
            ..deep.clone()
        };
        let (surging, even) = (generate(&deep, 5), generate(&flat, 5));
        // The same jobs (the surges have a stream of their own), submitted
        // at other times.
        let what = |t: &Trace| {
            let mut jobs: Vec<_> = t.jobs.iter().map(|j| (j.user, j.procs, j.run)).collect();
            jobs.sort_unstable();
            jobs
        };
        assert_eq!(what(&surging), what(&even));
        assert_ne!(surging.jobs, even.jobs);
        let procs = 8192.0;
        let spread = |loads: &[f64]| {
            let mean = loads.iter().sum::<f64>() / loads.len() as f64;
            (loads.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / loads.len() as f64).sqrt()
                / mean
        };
        let (a, b) = (daily_sessions(&surging), daily_sessions(&even));
        assert!(
            spread(&a) > 1.3 * spread(&b),
            "day-to-day spread of sessions begun: {} with surges, {} without",
            spread(&a),
            spread(&b)
        );
        let a = daily_loads(&surging, procs);
        // Days that offer several machines' work, and the load asked for
        // over the whole span.
        assert!(a.iter().filter(|&&l| l > 2.0).count() * 20 > a.len());
        let span = surging.jobs.last().unwrap().submit as f64;
        let work: f64 = surging.jobs.iter().map(|j| (j.run * j.procs) as f64).sum();
        assert!((work / (span * procs) - 0.8).abs() < 0.1);
        // RICC's habits: most estimates a day or more, and few jobs from
        // the upper stage of sizes (past 2^(13 - 2.5), about 1,448).
        let mut estimates: Vec<i64> = surging.jobs.iter().map(|j| j.req_time).collect();
        estimates.sort_unstable();
        assert!(estimates[estimates.len() / 2] >= 86_400, "{estimates:?}");
        let wide = |t: &Trace| t.jobs.iter().filter(|j| j.procs > 1449).count();
        let lublin = generate(
            &Spec {
                narrow: 0.86,
                ..deep.clone()
            },
            5,
        );
        assert!(
            wide(&surging) * 3 < wide(&lublin),
            "{} jobs wider than 1,449, {} with Lublin's stages",
            wide(&surging),
            wide(&lublin)
        );
        // Most sessions are serial, far more than in the other families.
        let serial = |t: &Trace| t.jobs.iter().filter(|j| j.procs == 1).count() as f64;
        let mid = generate(&Family::Mid.spec(20_000), 5);
        assert!(
            serial(&surging) > 3.0 * serial(&mid),
            "{} {}",
            serial(&surging),
            serial(&mid)
        );
        // The file says how it was made where that is not Lublin's way.
        let note = |t: &Trace| {
            t.header
                .iter()
                .find(|(k, _)| k == "Note")
                .unwrap()
                .1
                .clone()
        };
        assert!(note(&surging).contains("serial 0.77, daily surges 0.4, lower size stage 0.99"));
        assert!(!note(&mid).contains("daily surges"), "{}", note(&mid));
    }

    #[test]
    fn seeded_sized_and_loaded_as_asked() {
        let spec = Family::Mid.spec(4000);
        let trace = generate(&spec, 3);
        assert_eq!(trace, generate(&spec, 3), "same seed, same trace");
        assert_ne!(trace.jobs, generate(&spec, 4).jobs);
        assert_eq!(trace.jobs.len(), 4000);
        let machine = Machine::of(&trace).unwrap();
        assert_eq!((machine.nodes, machine.procs_per_node), (64, 8));
        let workload = Workload::new(&trace, machine);
        assert_eq!(workload.jobs.len(), 4000, "every job can be replayed");
        let span = trace.jobs.last().unwrap().submit as f64;
        let work: f64 = trace.jobs.iter().map(|j| (j.run * j.procs) as f64).sum();
        let load = work / (span * 512.0);
        assert!((load - 0.7).abs() < 0.1, "offered load {load}");
        assert!(trace.jobs.iter().all(|j| j.run <= j.req_time));
        // A few users carry most jobs; many are light.
        let mut per_user = std::collections::BTreeMap::new();
        for j in &trace.jobs {
            *per_user.entry(j.user).or_insert(0usize) += 1;
        }
        let mut counts: Vec<usize> = per_user.values().copied().collect();
        counts.sort_unstable_by(|a, b| b.cmp(a));
        assert!(counts.len() > 30, "{} users", counts.len());
        assert!(counts[..5].iter().sum::<usize>() > 4000 / 3, "{counts:?}");
    }
}
