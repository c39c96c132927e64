//! The site-independent observations (`v2` … `v10`): what a learned
//! policy trained for any machine sees. Nine features a slot, every one a
//! ratio — to the instance's cores, to the other shown jobs, to the other
//! users — so no trace's maxima, ids or units reach the network, and a
//! workload on twice the cores with jobs twice as wide is seen exactly as
//! the original.
//!
//! For a shown job of `n` cores, estimate `r` and wait so far `w` (seconds)
//! on an instance of `C` cores, its user `u`:
//!
//! 1. v2, v3: `n / C`. v4: `1 + log10(n / C) / 6` clipped to [0, 1] (1 for
//!    the whole instance, 0 for a millionth of it): on thousands of cores
//!    `n / C` is near 0 for every job that is not wide, and a network
//!    cannot tell a one-core job from a 64-core one, which F1's `n·log r`
//!    ranks far apart ([`Widths`]). v5: `1 / (1 + i)`, `i` the number of
//!    distinct decayed usages among the shown jobs' users below `u`'s — 1
//!    for the users `fairshare` serves first, ½ for the next, … (feature 6
//!    alone, near 1 for every user of a site of many, leaves its choice
//!    out of a network's reach; with feature 4, the longest wait, this
//!    one makes it: the first user's earliest job). v4's feature 1 goes:
//!    feature 8 orders the shown jobs' widths as it did;
//! 2. `log10(r / R) / 2` clipped to ±1, `R` the geometric mean estimate of
//!    the shown jobs;
//! 3. `log10(s) / 3` clipped to [0, 1], `s = max(1, (w + r) / max(r, 10))`:
//!    the bounded slowdown the job would have if it started now and ran to
//!    its estimate. v9 and v10: with `r` the run its user's history
//!    predicts, the mean of the user's last two ended jobs' run times (the
//!    one, if one has ended) at most the estimate, or the estimate if none
//!    has (`User::predicted`, read once a user; Tsafrir, Etsion and
//!    Feitelson's prediction for backfilling, 2007): a job asking for
//!    hours whose user's jobs run for seconds is seen at the slowdown it
//!    will be scored at;
//! 4. `(log10(1 + w) − W) / 3` clipped to ±1, `W` the mean of
//!    `log10(1 + w)` over the shown jobs;
//! 5. `m_u / max_v m_v` (0 when `u` has no job counted or every mean is 0).
//!    v2: `m_u` the mean over `u`'s started jobs of their bounded slowdown
//!    at start (wait then, estimate as run time: what is known when a job
//!    starts, in a replay as in a real run). v3, v4: the mean over its
//!    started jobs and its waiting ones at their slowdown so far, `(w + r)
//!    / max(r, 10)` ([`Waiting`]), the max over every user with a job
//!    started or waiting — a user whose jobs all still wait is not seen as
//!    served;
//! 6. `u`'s fair-share factor now, `2^(−U/S)` (`fairshare`'s: U its share
//!    of all users' core-seconds, each decayed with a 7-day half-life, S =
//!    1/N for the N users seen; 1 for a user who used nothing). v7: the
//!    job's urgency to its user, `1 + log10(g / G) / 4` clipped to [0, 1],
//!    `g = 1 / (max(r, 10)·n_u)` — how fast its wait raises `u`'s mean of
//!    feature 5, `n_u` the started and waiting jobs of `u` (at least 1) —
//!    and `G` the largest `g` of the shown jobs: 1 for the job whose wait
//!    costs its user most, 0 for a ten-thousandth of that. The factor is
//!    near 1 for every user of a site of many; `n_u` is what no other
//!    feature shows, and what decides whose mean a start lowers most;
//! 7. cores `u`'s running jobs hold `/ C`, at most 1;
//! 8. v2, v3: the share of the shown jobs that are `u`'s. v4: `log10(n /
//!    N) / 2` clipped to ±1, `N` the geometric mean width of the shown
//!    jobs (feature 2's counterpart for the width). v8: the queue's cost
//!    of the job, `log10(1 + D) / 4` clipped to [0, 1], `D = n/C · max(r,
//!    10) · Q`, `Q = Σ 1/max(r_i, 10)` over every waiting job (the rate at
//!    which the queue's summed bounded slowdown grows): how much that sum
//!    grows while the job holds its share of the machine for its estimate.
//!    The other features are relative to the shown jobs and to the users,
//!    so only this one tells a busy queue from a quiet one;
//! 9. 1 if the job fits in the free cores now, else 0.
//!
//! The slots: v2 shows v1's (`observe.rs`: all jobs when at most 128 wait,
//! else the shortest and the narrowest in turn); v3 … v10 a wider choice
//! when more wait ([`wide_slots`]: the oldest and each user's earliest
//! too). Padding rows are v1's (`observe::PADDING`), mask 0.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;
use slurp_runtime::core::{FairShare, HALF_LIFE, Snapshot, Time, float_key};
use slurp_sim::reference::Decision;

use crate::exact::Estimates;
use crate::observe::{FEATURES, Observation, SLOTS, first_by, interleave_all, slots};

/// How a job's width is shown: v2's and v3's linear share of the
/// instance (features 1 and 8 as v2 defines them), or v4's logarithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Widths {
    #[default]
    Shares,
    Logs,
}

/// One shown job, as the observation needs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shown {
    /// Cores over all its ranks.
    pub cores: u64,
    /// Seconds.
    pub estimate: u64,
    /// Seconds waited so far.
    pub wait: u64,
    pub user: i64,
    pub fits: bool,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct User {
    sum: f64,
    jobs: u32,
    mean: f64,
    pub(crate) running: u64,
    /// The run times (seconds) of its last two ended jobs, the latest
    /// first (v9's history; those not yet ended are 0).
    last: [u64; 2],
    /// How many of its jobs have ended: v9 reads at most two runs, v10's
    /// feature 7 the count.
    done: u32,
}

impl User {
    /// v9's run time of a job of this user's that asks for `estimate`
    /// seconds: the mean of the user's last two ended jobs' run times (its
    /// one, if one has ended), at most the estimate; the estimate if none
    /// has.
    pub(crate) fn predicted(&self, estimate: u64) -> u64 {
        match self.done {
            0 => estimate,
            1 => self.last[0].min(estimate),
            _ => ((self.last[0] + self.last[1]) / 2).min(estimate),
        }
    }
}

/// Each user's standing: mean bounded slowdown at start of its started
/// jobs, cores its running jobs hold, and its decayed usage. Told of starts
/// and ends.
#[derive(Debug)]
pub struct Standing {
    users: FxHashMap<i64, User>,
    /// The largest per-user mean, kept with the means.
    largest: f64,
    pub(crate) shares: FairShare,
    /// Whether the ended jobs ran their estimates (`exact.rs`).
    estimates: Estimates,
}

impl Default for Standing {
    fn default() -> Standing {
        Standing {
            users: FxHashMap::default(),
            largest: 0.0,
            shares: FairShare::new(HALF_LIFE),
            estimates: Estimates::default(),
        }
    }
}

/// `fairshare`'s account of a user id (an unknown user, −1, is one).
fn account(user: i64) -> u32 {
    u32::try_from(user).unwrap_or(u32::MAX)
}

/// Where `user` stands in fair-share turns (less usage first): its usage
/// in `shares`' scaled units, which stay put for a user with nothing
/// running (`kept::Turns` keeps the idle users ordered by it).
pub(crate) fn rank(shares: &Snapshot<'_>, user: i64) -> u64 {
    float_key(shares.rank(account(user)))
}

/// `max(1, (wait + estimate) / max(estimate, 10))`.
pub fn slowdown(wait: u64, estimate: u64) -> f64 {
    ((wait + estimate) as f64 / estimate.max(10) as f64).max(1.0)
}

impl Standing {
    /// A job of `user` holding `cores` started `at`, after waiting `wait`
    /// seconds, with estimate `estimate`.
    pub fn started(&mut self, user: i64, wait: u64, estimate: u64, cores: u64, at: Time) {
        self.shares
            .started(account(user), u32::try_from(cores).unwrap_or(u32::MAX), at);
        let u = self.users.entry(user).or_default();
        let before = (u.jobs > 0).then_some(u.mean);
        u.sum += slowdown(wait, estimate);
        u.jobs += 1;
        u.mean = u.sum / u.jobs as f64;
        u.running += cores;
        let after = u.mean;
        if after >= self.largest {
            self.largest = after;
        } else if before == Some(self.largest) {
            // The largest mean fell: find the new one.
            self.largest = self.users.values().map(|u| u.mean).fold(0.0, f64::max);
        }
    }

    /// A job of `user` holding `cores` since `start`, which asked for
    /// `estimate` seconds (`None`: a task without a time limit, whose
    /// estimate says nothing of how well limits are set), ended `at`.
    pub fn ended(&mut self, user: i64, cores: u64, estimate: Option<u64>, start: Time, at: Time) {
        self.shares.ended(
            account(user),
            u32::try_from(cores).unwrap_or(u32::MAX),
            start,
            at,
        );
        let run = at.0.saturating_sub(start.0).div_ceil(1000);
        if let Some(estimate) = estimate {
            self.estimates.ended(run, estimate);
        }
        if let Some(u) = self.users.get_mut(&user) {
            u.running = u.running.saturating_sub(cores);
            u.last = [run, u.last[0]];
            u.done = u.done.saturating_add(1);
        }
    }

    pub(crate) fn user(&self, user: i64) -> User {
        self.users.get(&user).copied().unwrap_or_default()
    }

    /// Whether the jobs that ended so far show exact estimates: a trace
    /// without requested times (`exact.rs`).
    pub fn exact(&self) -> bool {
        self.estimates.exact()
    }

    /// `user`'s decayed usage at `now` (what `fairshare` ranks by).
    pub fn usage(&self, user: i64, now: Time) -> f64 {
        self.shares.usage(account(user), now)
    }
}

/// v3's account of the jobs still waiting: per user, how many and the sum
/// of their slowdowns so far, `(w + r) / max(r, 10)` with `w = now − submit`
/// — kept as `now·Σ 1/max(r, 10) + Σ (r − submit)/max(r, 10)`, so that a
/// queue is told of arrivals and departures and read at any time in O(1) a
/// user.
#[derive(Debug, Default, Clone)]
pub struct Waiting {
    users: FxHashMap<i64, Sums>,
    /// Every user's together: v8's `Q`, the queue's summed rate of
    /// slowdown (`Σ 1/max(r, 10)`), and how many wait.
    all: Sums,
}

#[derive(Debug, Default, Clone, Copy)]
struct Sums {
    count: u32,
    per_second: f64,
    base: f64,
}

impl Sums {
    /// One job with terms `a`, `b` left; whether none is left.
    fn leave(&mut self, a: f64, b: f64) -> bool {
        self.count = self.count.saturating_sub(1);
        if self.count == 0 {
            // Exactly nothing: no rounding left behind.
            *self = Sums::default();
            true
        } else {
            self.per_second -= a;
            self.base -= b;
            false
        }
    }
}

impl Waiting {
    /// The waiting account of `jobs`.
    pub fn of<'a>(jobs: impl ExactSizeIterator<Item = &'a slurp_sim::SimJob>) -> Waiting {
        let mut waiting = Waiting {
            users: FxHashMap::with_capacity_and_hasher(jobs.len().min(1024), Default::default()),
            all: Sums::default(),
        };
        for j in jobs {
            waiting.queued(j.user, j.submit, j.estimate);
        }
        waiting
    }

    fn terms(submit: u64, estimate: u64) -> (f64, f64) {
        let d = estimate.max(10) as f64;
        (1.0 / d, (estimate as f64 - submit as f64) / d)
    }

    /// A job of `user` submitted at `submit` (seconds) with `estimate`
    /// began to wait.
    pub fn queued(&mut self, user: i64, submit: u64, estimate: u64) {
        let (a, b) = Waiting::terms(submit, estimate);
        for s in [self.users.entry(user).or_default(), &mut self.all] {
            s.count += 1;
            s.per_second += a;
            s.base += b;
        }
    }

    /// The same job stopped waiting (started, or left the queue).
    pub fn left(&mut self, user: i64, submit: u64, estimate: u64) {
        let (a, b) = Waiting::terms(submit, estimate);
        if let Some(s) = self.users.get_mut(&user) {
            if s.leave(a, b) {
                self.users.remove(&user);
            }
            self.all.leave(a, b);
        }
    }

    /// v8's `Q`: the waiting jobs' summed rate of bounded slowdown,
    /// `Σ 1/max(r, 10)` (how fast the queue's total slowdown grows).
    pub(crate) fn rate(&self) -> f64 {
        self.all.per_second
    }

    /// `user`'s waiting jobs at `now` (seconds): the sum of their slowdowns
    /// so far, and how many.
    pub(crate) fn at(&self, user: i64, now: u64) -> (f64, u32) {
        self.users
            .get(&user)
            .map_or((0.0, 0), |s| (now as f64 * s.per_second + s.base, s.count))
    }
}

/// `user`'s mean bounded slowdown over its started jobs and its `waiting`
/// ones at their slowdown so far, at `secs`; none without a job of either.
pub(crate) fn projected(
    standing: &Standing,
    waiting: &Waiting,
    user: i64,
    secs: u64,
) -> Option<f64> {
    projected_of(standing.user(user), waiting, user, secs).0
}

/// [`projected`], `u` being `user`'s standing (looked up already), and
/// the user's started and waiting jobs it is the mean of (v7's `n_u`).
fn projected_of(u: User, waiting: &Waiting, user: i64, secs: u64) -> (Option<f64>, u32) {
    let (sum, count) = waiting.at(user, secs);
    let n = u.jobs + count;
    ((n > 0).then(|| (u.sum + sum) / f64::from(n)), n)
}

/// The same mean as a line in time, `slope·t + intercept` (seconds), while
/// neither the user's started nor its waiting jobs change.
pub(crate) fn projected_line(
    standing: &Standing,
    waiting: &Waiting,
    user: i64,
) -> Option<(f64, f64)> {
    let u = standing.user(user);
    let s = waiting.users.get(&user).copied().unwrap_or_default();
    let n = f64::from(u.jobs + s.count);
    (n > 0.0).then(|| (s.per_second / n, (u.sum + s.base) / n))
}

/// What v3's feature 5 needs beyond the standing: the jobs still waiting,
/// and the largest of the users' [projected] means (each over its started
/// and waiting jobs) now.
#[derive(Debug, Clone, Copy)]
pub struct Projection<'a> {
    waiting: &'a Waiting,
    largest: f64,
}

impl<'a> Projection<'a> {
    /// Reckoned from every user (O(users); a chooser keeps the largest
    /// between decisions instead, `kept::Largest`).
    pub fn scan(standing: &Standing, waiting: &'a Waiting, now: Time) -> Projection<'a> {
        let secs = now.0 / 1000;
        // Users with jobs waiting, then the others (one lookup each).
        let largest = waiting
            .users
            .keys()
            .filter_map(|&user| projected(standing, waiting, user, secs))
            .chain(
                standing
                    .users
                    .iter()
                    .filter(|(user, u)| u.jobs > 0 && !waiting.users.contains_key(user))
                    .map(|(_, u)| u.mean),
            )
            .fold(0.0, f64::max);
        Projection { waiting, largest }
    }

    /// With the largest mean known.
    pub(crate) fn kept(waiting: &'a Waiting, largest: f64) -> Projection<'a> {
        Projection { waiting, largest }
    }

    /// The largest projected mean of any user.
    pub fn largest(&self) -> f64 {
        self.largest
    }
}

impl Shown {
    /// `job` at `now`, `fits` or not.
    pub fn of(job: &slurp_sim::SimJob, now: u64, fits: bool) -> Shown {
        Shown {
            cores: job.procs.into(),
            estimate: job.estimate,
            wait: now.saturating_sub(job.submit),
            user: job.user,
            fits,
        }
    }
}

/// The standing and the queue's views kept across the decisions of one
/// reference-model episode: told, at each decision, the jobs that arrived,
/// those started since the last one and those that ended by now (at
/// start + run).
#[derive(Debug)]
pub struct Follow {
    standing: Standing,
    /// The queue in the orders the slots are taken from: a whole trace
    /// queues tens of thousands of jobs, and selecting the slots from all
    /// of them at every decision was most of a replay's time.
    views: crate::kept::Views,
    /// v3 and later: the waiting jobs' slowdowns so far, told as the views.
    pending: Waiting,
    /// Jobs that arrived (window positions below it), and jobs started,
    /// by the last decision.
    seen: usize,
    told: usize,
    ends: BinaryHeap<Reverse<(u64, u32)>>,
    /// v3's slots ([`wide_slots`]) rather than v1's.
    wide: bool,
    /// Which observation: its slots, widths and feature 1.
    sight: crate::Sight,
}

impl Follow {
    /// For a model of `sight` (v2 … v10).
    pub fn new(sight: crate::Sight) -> Follow {
        Follow {
            standing: Standing::default(),
            views: crate::kept::Views::new(sight.wide()),
            pending: Waiting::default(),
            seen: 0,
            told: 0,
            ends: BinaryHeap::new(),
            wide: sight.wide(),
            sight,
        }
    }

    /// The standing so far (each user's usage, for a teacher that ranks
    /// users as `fairshare` does).
    pub fn standing(&self) -> &Standing {
        &self.standing
    }

    /// The observation of decision `d`.
    pub fn observe(&mut self, d: &Decision<'_>) -> Observation {
        let now = Time(d.now * 1000);
        // Jobs arrive in window order, and every one that arrived is queued
        // or started: the new ones are the positions up to that count. One
        // that also started since is queued first, then leaves.
        let arrived = d.queue.len() + d.started.len();
        for j in self.seen..arrived {
            let job = &d.jobs[j];
            self.views.queued(job, j as u32);
            if self.wide {
                self.pending.queued(job.user, job.submit, job.estimate);
            }
            self.views.place(&self.standing, job.user, now);
        }
        self.seen = self.seen.max(arrived);
        for &j in &d.started[self.told..] {
            let job = &d.jobs[j as usize];
            let start = d.starts[j as usize];
            if self.views.left(job, j) && self.wide {
                self.pending.left(job.user, job.submit, job.estimate);
            }
            self.standing.started(
                job.user,
                start.saturating_sub(job.submit),
                job.estimate,
                job.procs.into(),
                Time(start * 1000),
            );
            self.views.place(&self.standing, job.user, now);
            self.ends.push(Reverse((start + job.run, j)));
        }
        self.told = d.started.len();
        while let Some(&Reverse((end, j))) = self.ends.peek() {
            if end > d.now {
                break;
            }
            self.ends.pop();
            let job = &d.jobs[j as usize];
            let start = Time(d.starts[j as usize] * 1000);
            self.standing.ended(
                job.user,
                job.procs.into(),
                Some(job.estimate),
                start,
                Time(end * 1000),
            );
            self.views.place(&self.standing, job.user, now);
        }
        let jobs = self.views.slots(&self.standing, now);
        // Debug builds (the tests) check the kept views against the queue.
        debug_assert_eq!(self.views.len(), d.queue.len(), "the kept queue");
        debug_assert_eq!(
            jobs,
            if self.wide {
                wide_slots(d, &self.standing, now)
            } else {
                slots(d)
            },
            "slots from the kept views"
        );
        let projection = self
            .wide
            .then(|| Projection::scan(&self.standing, &self.pending, now));
        let shown: Vec<Shown> = jobs
            .iter()
            .map(|&j| Shown::of(&d.jobs[j as usize], d.now, d.fits(j)))
            .collect();
        observe(
            &shown,
            jobs,
            d.machine.procs(),
            &self.standing,
            projection,
            now,
            self.sight,
        )
    }
}

/// v3's slots: v1's when at most SLOTS jobs wait (all of them, in submit
/// order); else the first of four orders of the queue taken in turn — the
/// users' jobs in fair-share turns ([`in_turn`]), the oldest, the shortest
/// estimate, the fewest cores — so that the job every rival heuristic
/// would start next is among those shown however long the queue. (v1's
/// two orders, shortest and narrowest, hid a busy queue's oldest jobs and
/// its least-served users from the network.)
pub fn wide_slots(d: &Decision<'_>, standing: &Standing, now: Time) -> Vec<u32> {
    if d.queue.len() <= SLOTS {
        return slots(d);
    }
    let mut by_user: FxHashMap<i64, Vec<(u64, u32)>> = FxHashMap::default();
    for &j in d.queue.iter() {
        let job = &d.jobs[j as usize];
        by_user.entry(job.user).or_default().push((job.submit, j));
    }
    // Fair-share turns take at most SLOTS of any user's jobs: its earliest.
    for jobs in by_user.values_mut() {
        if jobs.len() > SLOTS {
            jobs.select_nth_unstable(SLOTS);
            jobs.truncate(SLOTS);
        }
        jobs.sort_unstable();
    }
    let turns = in_turn(
        standing,
        now,
        by_user
            .iter()
            .map(|(&user, jobs)| (user, jobs.iter().copied())),
    );
    let mut orders = [
        turns,
        first_by(d, |j| (j.submit, 0)),
        first_by(d, |j| (j.estimate, j.submit)),
        first_by(d, |j| (j.procs as u64, j.submit)),
    ]
    .map(Vec::into_iter);
    let [a, b, c, e] = &mut orders;
    interleave_all(&mut [a, b, c, e])
}

/// The first SLOTS of the queued jobs in fair-share turns: each user's
/// earliest job, the users ordered as `fairshare` orders them (least
/// decayed usage first, then earliest queued job), then each one's second,
/// and so on. `users` gives each user's queued jobs as (submit, job),
/// earliest first.
pub fn in_turn<I>(standing: &Standing, now: Time, users: impl Iterator<Item = (i64, I)>) -> Vec<u32>
where
    I: Iterator<Item = (u64, u32)>,
{
    let shares = standing.shares.at(now);
    let mut queues: Vec<_> = users
        .filter_map(|(user, jobs)| {
            let mut jobs = jobs.peekable();
            let first = *jobs.peek()?;
            Some(((rank(&shares, user), first), jobs))
        })
        .collect();
    queues.sort_unstable_by_key(|(key, _)| *key);
    round_robin(queues.into_iter().map(|(_, jobs)| jobs))
}

/// The first SLOTS jobs taken in turns from `queues` (each job's (submit,
/// job), earliest first): each queue's first, then each one's second, ...
pub(crate) fn round_robin<I>(queues: impl Iterator<Item = I>) -> Vec<u32>
where
    I: Iterator<Item = (u64, u32)>,
{
    let mut queues: Vec<I> = queues.collect();
    let mut out = Vec::with_capacity(SLOTS);
    while out.len() < SLOTS {
        let before = out.len();
        for jobs in &mut queues {
            if out.len() == SLOTS {
                break;
            }
            if let Some((_, j)) = jobs.next() {
                out.push(j);
            }
        }
        if out.len() == before {
            break;
        }
    }
    out
}

/// A shown job's logarithms (base 10): of its estimate, of one more than
/// its wait, of its width (v4; 0 otherwise) and of its slowdown so far.
#[derive(Debug, Clone, Copy)]
struct Logs {
    r: f64,
    w: f64,
    n: f64,
    slow: f64,
}

/// What a slot's features 5–8 read of its user, reckoned once for each
/// user among the shown jobs (a user's lookups and its fair-share factor's
/// `exp2` had been paid at every one of its slots).
#[derive(Debug, Clone, Copy)]
struct OfUser {
    /// What the user's standing says of it (v9 reads its ended runs).
    user: User,
    /// Feature 5.
    relative: f32,
    /// Feature 6.
    factor: f32,
    /// Feature 7.
    running: f32,
    /// The user's shown jobs (v2's and v3's feature 8).
    shown: usize,
    /// The user's decayed usage, ordered, and its place in fair-share
    /// turns (v5's feature 1).
    usage: u64,
    turn: f32,
    /// `log10 n_u`, the user's started and waiting jobs (at least 1; v7's
    /// feature 6).
    log_jobs: f64,
}

/// `log10(x)` through `log2`, which glibc computes directly, where its
/// `log10` goes through `ln` and corrects: an observation takes up to four
/// logarithms a slot, most of its time, and the two agree to an ulp or so,
/// far below the features' `f32`.
fn log10(x: f64) -> f64 {
    x.log2() * std::f64::consts::LOG10_2
}

fn clip(x: f64, lo: f64, hi: f64) -> f32 {
    x.clamp(lo, hi) as f32
}

/// The observation `sight` (v2 … v10) makes of `shown` (the slots' jobs, in
/// slot order; `jobs` names each) on an instance of `cores` cores, `now`:
/// feature 5 is v3's when the jobs still waiting are given (`projection`),
/// v2's otherwise.
pub fn observe(
    shown: &[Shown],
    jobs: Vec<u32>,
    cores: u64,
    standing: &Standing,
    projection: Option<Projection<'_>>,
    now: Time,
    sight: crate::Sight,
) -> Observation {
    debug_assert_eq!(shown.len(), jobs.len());
    let c = cores.max(1) as f64;
    // v3: each user's mean over its started jobs and its waiting ones at
    // their slowdown so far, against the largest such mean of any user.
    let secs = now.0 / 1000;
    let largest = projection.map_or(standing.largest, |p| p.largest);
    // v8's `Q` (v8 is shown the jobs still waiting: its slots are wide).
    let rate = projection.map_or(0.0, |p| p.waiting.rate().max(0.0));
    let shares = standing.shares.at(now);
    // The shown jobs' users, each once: the slots sorted by user, a run of
    // them one user (no hashing at every slot; v9's predicted runs are read
    // from here too).
    let mut by_user: Vec<(i64, usize)> = shown.iter().map(|s| s.user).zip(0..).collect();
    by_user.sort_unstable();
    let mut of_slot = vec![0; shown.len()];
    let mut users: Vec<OfUser> = Vec::new();
    for run in by_user.chunk_by(|a, b| a.0 == b.0) {
        let user = run[0].0;
        let u = standing.user(user);
        let (mean, jobs) = match projection {
            None => ((u.jobs > 0).then_some(u.mean), u.jobs),
            Some(p) => projected_of(u, p.waiting, user, secs),
        };
        for &(_, slot) in run {
            of_slot[slot] = users.len();
        }
        let (usage, factor) = shares.rank_and_factor(account(user));
        users.push(OfUser {
            user: u,
            relative: match mean {
                Some(m) if largest > 0.0 => (m / largest) as f32,
                _ => 0.0,
            },
            factor: factor as f32,
            running: clip(u.running as f64 / c, 0.0, 1.0),
            shown: run.len(),
            usage: float_key(usage),
            turn: 0.0,
            // Only v7 reads it: the others take no logarithm per user.
            log_jobs: if sight.urgency() {
                log10(f64::from(jobs.max(1)))
            } else {
                0.0
            },
        });
    }
    let widths = sight.widths();
    let k = shown.len().max(1) as f64;
    // Each slot's logarithms once (they are most of an observation's
    // time).
    let mut logs = Vec::with_capacity(shown.len());
    let (mut sum_r, mut sum_w, mut sum_n) = (0.0, 0.0, 0.0);
    // v8 reads no width's logarithm (feature 1 is a turn, 8 the queue's cost).
    let logs_of_widths = widths == Widths::Logs && !sight.queue_cost();
    // A slot like the one before it (in a real run, tasks of one line or
    // one time limit, queued together) reuses its logarithms.
    let mut before: Option<(&Shown, Logs)> = None;
    for (slot, s) in shown.iter().enumerate() {
        let same = |f: fn(&Shown) -> u64| before.filter(|(b, _)| f(b) == f(s)).map(|(_, l)| l);
        let r = same(|s| s.estimate).map_or_else(|| log10(s.estimate.max(1) as f64), |l| l.r);
        let w = same(|s| s.wait).map_or_else(|| log10(1.0 + s.wait as f64), |l| l.w);
        // Only v4 pays for a third logarithm a slot.
        let n = match same(|s| s.cores) {
            Some(l) => l.n,
            None if logs_of_widths => log10(s.cores.max(1) as f64),
            None => 0.0,
        };
        // v9 reckons with the run its user's history predicts.
        let run = |slot: usize, s: &Shown| {
            if sight.predicts() {
                users[of_slot[slot]].user.predicted(s.estimate)
            } else {
                s.estimate
            }
        };
        let slow = match before.filter(|(b, _)| {
            (b.wait, b.estimate) == (s.wait, s.estimate) && (!sight.predicts() || b.user == s.user)
        }) {
            Some((_, l)) => l.slow,
            None => log10(slowdown(s.wait, run(slot, s))),
        };
        let these = Logs { r, w, n, slow };
        before = Some((s, these));
        sum_r += r;
        sum_w += w;
        sum_n += n;
        logs.push(these);
    }
    let (log_r, log_w, log_n) = (sum_r / k, sum_w / k, sum_n / k);
    let log_c = log10(c);
    // v5's feature 1: a user's place in fair-share turns among the shown
    // jobs' users, `1 / (1 + distinct usages below its own)`.
    if sight.turns() {
        let mut usages: Vec<u64> = users.iter().map(|u| u.usage).collect();
        usages.sort_unstable();
        usages.dedup();
        for u in &mut users {
            u.turn = 1.0 / (1 + usages.partition_point(|&d| d < u.usage)) as f32;
        }
    }
    // v7's feature 6: `log10 g = −log10 max(r, 10) − log10 n_u` (no new
    // logarithm: `l.r` is `log10 max(r, 1)`), against the shown jobs'
    // largest.
    let urgency = |slot: usize, l: &Logs| -l.r.max(1.0) - users[of_slot[slot]].log_jobs;
    let most_urgent = if sight.urgency() {
        logs.iter()
            .enumerate()
            .map(|(slot, l)| urgency(slot, l))
            .fold(f64::NEG_INFINITY, f64::max)
    } else {
        0.0
    };
    let mut features = Vec::with_capacity(SLOTS * FEATURES);
    let mut mask = vec![0.0; SLOTS];
    for (slot, (s, l)) in shown.iter().zip(&logs).enumerate() {
        let u = &users[of_slot[slot]];
        let (width, eighth) = match widths {
            Widths::Shares => (
                clip(s.cores as f64 / c, 0.0, 1.0),
                (u.shown as f64 / k) as f32,
            ),
            Widths::Logs => (
                clip(1.0 + (l.n - log_c) / 6.0, 0.0, 1.0),
                clip((l.n - log_n) / 2.0, -1.0, 1.0),
            ),
        };
        // v8: `log10(1 + D) / 4` in [0, 1], `D = n/C · max(r, 10) · Q`.
        let eighth = if sight.queue_cost() {
            let d = s.cores as f64 / c * s.estimate.max(10) as f64 * rate;
            clip(log10(1.0 + d) / 4.0, 0.0, 1.0)
        } else {
            eighth
        };
        // v5: the user's place in turns instead of the width's share.
        let first = if sight.turns() { u.turn } else { width };
        let sixth = if sight.urgency() {
            clip(1.0 + (urgency(slot, l) - most_urgent) / 4.0, 0.0, 1.0)
        } else {
            u.factor
        };
        // v10: how little of the user's record is checked.
        let seventh = if sight.history() {
            1.0 / (1.0 + u.user.done as f32)
        } else {
            u.running
        };
        features.extend_from_slice(&[
            first,
            clip((l.r - log_r) / 2.0, -1.0, 1.0),
            clip(l.slow / 3.0, 0.0, 1.0),
            clip((l.w - log_w) / 3.0, -1.0, 1.0),
            u.relative,
            sixth,
            seventh,
            eighth,
            if s.fits { 1.0 } else { 0.0 },
        ]);
        mask[slot] = 1.0;
    }
    Observation::padded(features, mask, jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::PADDING;

    #[test]
    fn features_of_a_small_queue() {
        let mut standing = Standing::default();
        let t = |s: u64| Time(s * 1000);
        // User 1: two started jobs, slowdowns 1 and 3: mean 2; 4 cores
        // run since 0.
        standing.started(1, 0, 100, 2, t(0));
        standing.started(1, 200, 100, 2, t(0));
        // User 2: one, slowdown 4, the largest mean; it ran 0..30 on 1.
        standing.started(2, 30, 10, 1, t(0));
        standing.ended(2, 1, Some(60), t(0), t(30));
        let shown = [
            Shown {
                cores: 8,
                estimate: 1000,
                wait: 99,
                user: 1,
                fits: false,
            },
            Shown {
                cores: 2,
                estimate: 10,
                wait: 9,
                user: 3,
                fits: true,
            },
        ];
        let obs = observe(
            &shown,
            vec![5, 7],
            16,
            &standing,
            None,
            t(100),
            crate::Sight::V2,
        );
        // At 100 s user 1 used 400 core-seconds, user 2 30 (a 7-day
        // half-life decays them by 1e-4): F = 2^(−2 × 400/430); user 3
        // used nothing, F = 1.
        let factor = (-2.0 * 400.0 / 430.0f64).exp2();
        let row = |i: usize| &obs.features[i * FEATURES..(i + 1) * FEATURES];
        let close =
            |a: &[f32], b: &[f64]| a.iter().zip(b).all(|(x, y)| (*x as f64 - y).abs() < 1e-4);
        // Geometric mean estimate 100: job 0 is 10× it, job 1 a tenth.
        // Mean log10(1 + w): (2 + 1) / 2.
        assert!(
            close(
                row(0),
                &[
                    0.5,
                    0.5,
                    (1099.0f64 / 1000.0).log10() / 3.0,
                    0.5 / 3.0,
                    0.5,
                    factor,
                    0.25,
                    0.5,
                    0.0
                ]
            ),
            "{:?}",
            row(0)
        );
        assert!(
            close(
                row(1),
                &[
                    0.125,
                    -0.5,
                    (1.9f64).log10() / 3.0,
                    -0.5 / 3.0,
                    0.0,
                    1.0,
                    0.0,
                    0.5,
                    1.0
                ]
            ),
            "{:?}",
            row(1)
        );
        assert_eq!(&obs.mask[..3], &[1.0, 1.0, 0.0]);
        assert_eq!(&obs.features[2 * FEATURES..3 * FEATURES], &PADDING);
    }
}
