//! `fairshare`: the classic fair-share priority of Slurm's multifactor
//! plugin (its fair-share factor alone) and of batch services' fair-share
//! queues.
//!
//! Each user's **usage** is the core-seconds its tasks held, every second
//! decayed by its age: a second used `a` seconds ago counts `2^(−a/H)`, `H`
//! the half-life ([`HALF_LIFE`], Slurm's `PriorityDecayHalfLife` default of
//! 7 days). Running tasks count what they have used so far. With `U` the
//! user's share of all users' usage and `S = 1/N` its share of the machine
//! (equal shares among the `N` users the instance has seen), its factor is
//!
//! ```text
//! F = 2^(−U / S)
//! ```
//!
//! 1 for a user who used nothing, ½ for one who used exactly its share. The
//! head of the queue is the earliest queued task of the user with the
//! highest factor; ties (users who used nothing) go to the earliest queued
//! task. Since shares are equal and `U` divides by the same total for
//! everyone, the order by `F` is the order by decayed usage, and that is
//! what is kept.
//!
//! Usage is kept scaled by `2^(t/H)` (so nothing decays between events:
//! one multiplication when read) and rebased before the scale could
//! overflow. Users with nothing running have a fixed scaled usage and sit
//! in an ordered set; only users with tasks running are re-reckoned at a
//! decision, and there are at most as many of those as running tasks.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use rustc_hash::FxHashMap;

use super::float_key;

/// Slurm's default `PriorityDecayHalfLife`: 7 days, in seconds.
pub const HALF_LIFE: f64 = 7.0 * 24.0 * 3600.0;

/// Rebase once the scale passes 2^this (f64 holds up to 2^1023).
const REBASE: f64 = 256.0;

#[derive(Debug, Default, Clone)]
struct Account {
    /// Scaled usage of ended tasks: Σ n·∫ 2^(τ/H) dτ over their runs.
    done: f64,
    /// Cores of running tasks, and Σ n·2^(start/H) over them.
    run_cores: f64,
    run_base: f64,
    /// Queued tasks, earliest first.
    queued: BTreeSet<u32>,
    /// Its key in `idle`, when it is there.
    idle_key: Option<(u64, u32)>,
}

/// Decayed usage per user and the queue split by user.
#[derive(Debug)]
pub struct FairShare {
    half_life: f64,
    /// Seconds the scale counts from: scale(t) = 2^((t − origin)/H).
    origin: f64,
    accounts: Vec<Account>,
    /// All users together (its queue unused): the total a share is of.
    total: Account,
    index: FxHashMap<u32, u32>,
    /// Users with queued tasks and nothing running, by (scaled usage,
    /// earliest queued task).
    idle: BTreeSet<(u64, u32, u32)>,
    /// Users with queued tasks and tasks running.
    active: BTreeSet<u32>,
}

fn secs(t: super::Time) -> f64 {
    t.0 as f64 / 1000.0
}

impl FairShare {
    pub fn new(half_life: f64) -> FairShare {
        FairShare {
            half_life,
            origin: 0.0,
            accounts: Vec::new(),
            total: Account::default(),
            index: FxHashMap::default(),
            idle: BTreeSet::new(),
            active: BTreeSet::new(),
        }
    }

    fn account(&mut self, user: u32) -> u32 {
        let next = self.accounts.len() as u32;
        let a = *self.index.entry(user).or_insert(next);
        if a == next {
            self.accounts.push(Account::default());
        }
        a
    }

    fn scale(&self, t: f64) -> f64 {
        ((t - self.origin) / self.half_life).exp2()
    }

    /// `H / ln 2`: ∫ 2^(τ/H) dτ = that × 2^(τ/H).
    fn integral(&self) -> f64 {
        self.half_life / std::f64::consts::LN_2
    }

    fn scaled_usage(&self, a: u32, t: f64) -> f64 {
        self.scaled(&self.accounts[a as usize], t)
    }

    fn scaled(&self, acc: &Account, t: f64) -> f64 {
        self.scaled_at(acc, self.scale(t))
    }

    /// `acc`'s scaled usage where the scale is `scale` (one `exp2` a
    /// decision, however many users are asked about).
    fn scaled_at(&self, acc: &Account, scale: f64) -> f64 {
        let running = acc.run_cores * scale - acc.run_base;
        acc.done + self.integral() * running.max(0.0)
    }

    /// Moves the origin to `t` before the scale grows past what f64 keeps
    /// exact enough; every scaled amount shrinks by the same factor.
    fn rebase(&mut self, t: f64) {
        if (t - self.origin) / self.half_life < REBASE {
            return;
        }
        let factor = self.scale(t).recip();
        for acc in self.accounts.iter_mut().chain([&mut self.total]) {
            acc.done *= factor;
            acc.run_base *= factor;
        }
        self.origin = t;
        let idle: Vec<u32> = self.idle.iter().map(|&(_, _, a)| a).collect();
        self.idle.clear();
        for a in idle {
            self.accounts[a as usize].idle_key = None;
            self.place(a);
        }
    }

    /// Puts `a` where it belongs: the idle set (with its key now), the
    /// active set, or neither (nothing queued).
    fn place(&mut self, a: u32) {
        let acc = &mut self.accounts[a as usize];
        if let Some((usage, first)) = acc.idle_key.take() {
            self.idle.remove(&(usage, first, a));
        }
        self.active.remove(&a);
        let Some(&first) = acc.queued.first() else {
            return;
        };
        if acc.run_cores > 0.0 {
            self.active.insert(a);
        } else {
            let key = (float_key(acc.done), first);
            acc.idle_key = Some(key);
            self.idle.insert((key.0, key.1, a));
        }
    }

    /// `task` of `user` joined the queue.
    pub fn queued(&mut self, task: u32, user: u32) {
        let a = self.account(user);
        self.accounts[a as usize].queued.insert(task);
        self.place(a);
    }

    /// `task` of `user` left the queue (it starts, or will not run).
    pub fn left(&mut self, task: u32, user: u32) {
        let a = self.account(user);
        if self.accounts[a as usize].queued.remove(&task) {
            self.place(a);
        }
    }

    /// Nothing is queued any more.
    pub fn clear_queues(&mut self) {
        for acc in &mut self.accounts {
            acc.queued.clear();
            acc.idle_key = None;
        }
        self.idle.clear();
        self.active.clear();
    }

    /// A task of `user` holding `cores` started at `now`.
    pub fn started(&mut self, user: u32, cores: u32, now: super::Time) {
        let t = secs(now);
        self.rebase(t);
        let a = self.account(user);
        let scale = self.scale(t);
        for acc in [&mut self.accounts[a as usize], &mut self.total] {
            acc.run_cores += cores as f64;
            acc.run_base += cores as f64 * scale;
        }
        self.place(a);
    }

    /// A task of `user` holding `cores` since `start` ended at `now`.
    pub fn ended(&mut self, user: u32, cores: u32, start: super::Time, now: super::Time) {
        let (s, t) = (secs(start), secs(now));
        self.rebase(t);
        let a = self.account(user);
        let (from, to, integral) = (self.scale(s), self.scale(t), self.integral());
        let n = cores as f64;
        for acc in [&mut self.accounts[a as usize], &mut self.total] {
            acc.run_cores -= n;
            acc.run_base -= n * from;
            if acc.run_cores <= 0.0 {
                // No drift left behind by the subtractions.
                acc.run_cores = 0.0;
                acc.run_base = 0.0;
            }
            acc.done += n * integral * (to - from).max(0.0);
        }
        self.place(a);
    }

    /// The queued task that ranks first at `now`.
    pub fn head(&self, now: super::Time) -> Option<u32> {
        let t = secs(now);
        let idle = self
            .idle
            .first()
            .map(|&(_, first, a)| (self.accounts[a as usize].done, first));
        let active = self.active.iter().map(|&a| {
            let first = *self.accounts[a as usize]
                .queued
                .first()
                .unwrap_or(&u32::MAX);
            (self.scaled_usage(a, t), first)
        });
        idle.into_iter()
            .chain(active)
            .min_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)))
            .map(|(_, task)| task)
    }

    /// The first `k` queued tasks in fair-share order at `now`: users by
    /// usage, each user's tasks in queue order, ties by task.
    pub fn ranked(&self, now: super::Time, k: usize) -> Vec<u32> {
        let t = secs(now);
        let users = self
            .idle
            .iter()
            .map(|&(_, _, a)| a)
            .chain(self.active.iter().copied());
        // (usage, task, account, position in the account's queue)
        let mut heap: BinaryHeap<Reverse<(u64, u32, u32)>> = users
            .filter_map(|a| {
                let first = *self.accounts[a as usize].queued.first()?;
                Some(Reverse((float_key(self.scaled_usage(a, t)), first, a)))
            })
            .collect();
        let mut out = Vec::with_capacity(k);
        while out.len() < k
            && let Some(Reverse((usage, task, a))) = heap.pop()
        {
            out.push(task);
            let next = self.accounts[a as usize]
                .queued
                .range(task + 1..)
                .next()
                .copied();
            if let Some(next) = next {
                heap.push(Reverse((usage, next, a)));
            }
        }
        out
    }

    /// Where the scale counts from (seconds): it moves, and every scaled
    /// amount ([`Snapshot::rank`]) shrinks with it, about every 5 years of
    /// simulated time.
    pub fn origin(&self) -> f64 {
        self.origin
    }

    /// Users seen so far (the `N` of the shares).
    pub fn users(&self) -> usize {
        self.accounts.len()
    }

    /// `user`'s decayed usage at `now`, core-seconds.
    pub fn usage(&self, user: u32, now: super::Time) -> f64 {
        self.at(now).usage(user)
    }

    /// `user`'s fair-share factor at `now`: 2^(−U/S), U its share of all
    /// users' decayed usage, S = 1/N (1 when nobody used anything).
    pub fn factor(&self, user: u32, now: super::Time) -> f64 {
        self.at(now).factor(user)
    }

    /// The users' usage at `now`, to ask about many users at once.
    pub fn at(&self, now: super::Time) -> Snapshot<'_> {
        let scale = self.scale(secs(now));
        Snapshot {
            shares: self,
            scale,
            total: self.scaled_at(&self.total, scale),
        }
    }
}

/// [`FairShare`] at one instant: the scale and the total reckoned once.
#[derive(Debug, Clone, Copy)]
pub struct Snapshot<'a> {
    shares: &'a FairShare,
    scale: f64,
    total: f64,
}

impl Snapshot<'_> {
    /// `user`'s decayed usage, core-seconds.
    pub fn usage(&self, user: u32) -> f64 {
        self.scaled(user) / self.scale
    }

    /// `user`'s fair-share factor, 2^(−U/S).
    pub fn factor(&self, user: u32) -> f64 {
        self.factor_of(self.scaled(user))
    }

    /// `user`'s [rank](Self::rank) and [factor](Self::factor), its usage
    /// looked up once.
    pub fn rank_and_factor(&self, user: u32) -> (f64, f64) {
        let scaled = self.scaled(user);
        (scaled, self.factor_of(scaled))
    }

    fn factor_of(&self, scaled: f64) -> f64 {
        if self.total <= 0.0 {
            return 1.0;
        }
        let share = 1.0 / self.shares.users().max(1) as f64;
        (-(scaled / self.total) / share).exp2()
    }

    /// `user`'s usage in the scaled units the order is kept in: it orders
    /// users as [`usage`](Self::usage) does, and for a user with nothing
    /// running it is the same at every instant until the
    /// [origin](FairShare::origin) moves (so an ordered set of idle users
    /// stays ordered between their events).
    pub fn rank(&self, user: u32) -> f64 {
        self.scaled(user)
    }

    fn scaled(&self, user: u32) -> f64 {
        match self.shares.index.get(&user) {
            Some(&a) => self
                .shares
                .scaled_at(&self.shares.accounts[a as usize], self.scale),
            None => 0.0,
        }
    }
}
