//! What a schedule means for the people who wait: waits, slowdowns,
//! turnaround, how full the machine was, and how evenly users fared.
//!
//! Per job: wait w = start − submit; bounded slowdown
//! max(1, (w + run) / max(run, 10 s)); turnaround w + run. Per user: the
//! mean bounded slowdown of their jobs; the worst user is the one with the
//! largest; Jain's index (Σx)² / (n·Σx²) over those per-user means is 1
//! when every user fares the same and 1/n when one user takes all the
//! slowdown. Sums run in start order (as the reference sums its scores),
//! so figures agree with it to the last digits.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::{Model, Schedule, Workload};

/// Slowdowns of jobs shorter than this are computed as if they ran this
/// long (the usual 10 s bound).
pub const BOUND_SECS: u64 = 10;

/// One job's bounded slowdown.
pub fn bounded_slowdown(wait: u64, run: u64) -> f64 {
    ((wait + run) as f64 / run.max(BOUND_SECS) as f64).max(1.0)
}

/// One user's share.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UserMetrics {
    /// The trace's user id (`-1`: unknown, counted as one user).
    pub user: i64,
    pub jobs: usize,
    pub avg_bounded_slowdown: f64,
}

/// The figures of one schedule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    pub jobs: usize,
    /// Seconds.
    pub avg_wait: f64,
    pub avg_bounded_slowdown: f64,
    /// Seconds.
    pub avg_turnaround: f64,
    /// Processor-seconds used ÷ processor-seconds available over the span:
    /// first submit to last end (slurp's model) or to last start (the
    /// reference model's definition).
    pub utilisation: f64,
    /// Seconds from the first submit to the last end.
    pub makespan: u64,
    pub users: usize,
    /// The user with the largest mean bounded slowdown.
    pub worst_user: i64,
    pub worst_user_bounded_slowdown: f64,
    /// Jain's fairness index over the users' mean bounded slowdowns.
    pub jain: f64,
    /// Every user, by id.
    pub per_user: Vec<UserMetrics>,
}

impl Metrics {
    pub fn of(workload: &Workload, schedule: &Schedule, model: Model) -> Metrics {
        let jobs = &workload.jobs[schedule.window.range()];
        let n = jobs.len().max(1) as f64;
        let first_submit = jobs.iter().map(|j| j.submit).min().unwrap_or(0);
        let (mut wait, mut bsld, mut turnaround, mut work) = (0.0, 0.0, 0.0, 0.0);
        let (mut last_start, mut last_end) = (first_submit, first_submit);
        let mut users: BTreeMap<i64, (usize, f64)> = BTreeMap::new();
        for &j in &schedule.order {
            let job = &jobs[j as usize];
            let start = schedule.starts[j as usize];
            let w = start - job.submit.min(start);
            let b = bounded_slowdown(w, job.run);
            wait += w as f64;
            bsld += b;
            turnaround += (w + job.run) as f64;
            work += job.run as f64 * job.procs as f64;
            last_start = last_start.max(start);
            last_end = last_end.max(start + job.run);
            let user = users.entry(job.user).or_default();
            user.0 += 1;
            user.1 += b;
        }
        let span_end = match model {
            Model::Slurp => last_end,
            Model::Reference => last_start,
        };
        let span = (span_end - first_submit) as f64 * workload.machine.procs() as f64;
        let per_user: Vec<UserMetrics> = users
            .into_iter()
            .map(|(user, (count, sum))| UserMetrics {
                user,
                jobs: count,
                avg_bounded_slowdown: sum / count as f64,
            })
            .collect();
        let worst = per_user
            .iter()
            .max_by(|a, b| a.avg_bounded_slowdown.total_cmp(&b.avg_bounded_slowdown));
        let sum: f64 = per_user.iter().map(|u| u.avg_bounded_slowdown).sum();
        let squares: f64 = per_user
            .iter()
            .map(|u| u.avg_bounded_slowdown.powi(2))
            .sum();
        Metrics {
            jobs: jobs.len(),
            avg_wait: wait / n,
            avg_bounded_slowdown: bsld / n,
            avg_turnaround: turnaround / n,
            utilisation: if span > 0.0 { work / span } else { 0.0 },
            makespan: last_end - first_submit,
            users: per_user.len(),
            worst_user: worst.map_or(-1, |u| u.user),
            worst_user_bounded_slowdown: worst.map_or(0.0, |u| u.avg_bounded_slowdown),
            jain: if squares > 0.0 {
                sum * sum / (per_user.len() as f64 * squares)
            } else {
                1.0
            },
            per_user,
        }
    }
}

/// Metrics of one policy averaged over several windows (each window
/// weighs the same, as in the published table).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub windows: usize,
    pub avg_wait: f64,
    pub avg_bounded_slowdown: f64,
    pub avg_turnaround: f64,
    pub utilisation: f64,
    pub makespan: f64,
    pub worst_user_bounded_slowdown: f64,
    pub jain: f64,
}

impl Summary {
    pub fn of(runs: &[Metrics]) -> Summary {
        let n = runs.len().max(1) as f64;
        let mean = |f: fn(&Metrics) -> f64| runs.iter().map(f).sum::<f64>() / n;
        Summary {
            windows: runs.len(),
            avg_wait: mean(|m| m.avg_wait),
            avg_bounded_slowdown: mean(|m| m.avg_bounded_slowdown),
            avg_turnaround: mean(|m| m.avg_turnaround),
            utilisation: mean(|m| m.utilisation),
            makespan: mean(|m| m.makespan as f64),
            worst_user_bounded_slowdown: mean(|m| m.worst_user_bounded_slowdown),
            jain: mean(|m| m.jain),
        }
    }
}
