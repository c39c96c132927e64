//! When a run stops early: GNU parallel's `--halt WHEN,WHY=N|P%`.
//!
//! `never` (the default) runs everything that does not depend on a
//! failure. Otherwise, once enough tasks have ended for good — failed,
//! succeeded, or either (`done`), counted or as a share of every task of
//! the run — it starts nothing more (`soon`) or also stops what runs
//! (`now`). `soon` and `now` alone mean `…,fail=1`; parallel's numeric
//! forms (`0`, `1`, `2`, `-1`, `-2`, `N%`) are taken too.

use std::str::FromStr;

/// When to stop, and on what.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Halt {
    #[default]
    Never,
    /// Start nothing more; let running tasks finish.
    Soon(Condition),
    /// Start nothing more and stop running tasks.
    Now(Condition),
}

/// How many tasks must have ended, and how.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Condition {
    pub on: On,
    pub limit: Limit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum On {
    Fail,
    Success,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Limit {
    Count(u64),
    /// A share of every task of the run, in percent (0 < p ≤ 100).
    Percent(f64),
}

/// Tasks that ended for good so far, and how many the run has.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ended {
    pub failed: u64,
    pub succeeded: u64,
    pub total: u64,
}

impl Halt {
    /// The first failure stops the run: `soon` or `now`.
    pub fn on_first_failure(now: bool) -> Halt {
        let first = Condition {
            on: On::Fail,
            limit: Limit::Count(1),
        };
        if now {
            Halt::Now(first)
        } else {
            Halt::Soon(first)
        }
    }

    fn condition(&self) -> Option<&Condition> {
        match self {
            Halt::Never => None,
            Halt::Soon(c) | Halt::Now(c) => Some(c),
        }
    }

    /// Whether the run should stop, given what has ended.
    pub fn reached(&self, ended: Ended) -> bool {
        let Some(condition) = self.condition() else {
            return false;
        };
        let count = match condition.on {
            On::Fail => ended.failed,
            On::Success => ended.succeeded,
            On::Done => ended.failed + ended.succeeded,
        };
        match condition.limit {
            Limit::Count(n) => count >= n,
            // At least one, so `fail=1%` of 10 tasks is the first failure.
            Limit::Percent(p) => count > 0 && count as f64 * 100.0 >= p * ended.total as f64 - 1e-9,
        }
    }

    /// True when the condition is on successes: stopping is then what the
    /// user wanted, not a failure of the run.
    pub fn on_success(&self) -> bool {
        self.condition().is_some_and(|c| c.on == On::Success)
    }
}

impl FromStr for Halt {
    type Err = String;

    fn from_str(text: &str) -> Result<Halt, String> {
        let bad = || {
            format!(
                "`{text}` is not a halt rule: give `never`, `soon` or `now`, optionally with `,fail=N`, `,success=N` or `,done=N` (N a count or a percentage such as `10%`)"
            )
        };
        // parallel's old numeric forms.
        match text {
            "never" | "0" => return Ok(Halt::Never),
            "soon" | "1" => return Ok(Halt::on_first_failure(false)),
            "now" | "2" => return Ok(Halt::on_first_failure(true)),
            _ => {}
        }
        let success_first = Condition {
            on: On::Success,
            limit: Limit::Count(1),
        };
        match text {
            "-1" => return Ok(Halt::Soon(success_first)),
            "-2" => return Ok(Halt::Now(success_first)),
            _ => {}
        }
        if !text.contains(',')
            && let Some(p) = text.strip_suffix('%')
        {
            let limit = parse_limit(&format!("{p}%")).ok_or_else(bad)?;
            return Ok(Halt::Soon(Condition {
                on: On::Fail,
                limit,
            }));
        }
        let (when, why) = text.split_once(',').ok_or_else(bad)?;
        let (on, n) = why.split_once('=').ok_or_else(bad)?;
        let on = match on {
            "fail" => On::Fail,
            "success" => On::Success,
            "done" => On::Done,
            _ => return Err(bad()),
        };
        let condition = Condition {
            on,
            limit: parse_limit(n).ok_or_else(bad)?,
        };
        match when {
            "soon" => Ok(Halt::Soon(condition)),
            "now" => Ok(Halt::Now(condition)),
            _ => Err(bad()),
        }
    }
}

fn parse_limit(text: &str) -> Option<Limit> {
    match text.strip_suffix('%') {
        Some(p) => {
            let p: f64 = p.parse().ok()?;
            (p > 0.0 && p <= 100.0).then_some(Limit::Percent(p))
        }
        None => {
            let n: u64 = text.parse().ok()?;
            (n > 0).then_some(Limit::Count(n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(failed: u64, succeeded: u64, total: u64) -> Ended {
        Ended {
            failed,
            succeeded,
            total,
        }
    }

    #[test]
    fn parallels_forms_read_as_it_documents_them() {
        let fail = |limit| Condition {
            on: On::Fail,
            limit,
        };
        assert_eq!("never".parse(), Ok(Halt::Never));
        assert_eq!("2".parse(), Ok(Halt::Now(fail(Limit::Count(1)))));
        assert_eq!("soon,fail=3".parse(), Ok(Halt::Soon(fail(Limit::Count(3)))));
        assert_eq!(
            "now,fail=10%".parse(),
            Ok(Halt::Now(fail(Limit::Percent(10.0))))
        );
        assert_eq!("20%".parse(), Ok(Halt::Soon(fail(Limit::Percent(20.0)))));
        assert_eq!(
            "soon,fail=50%".parse(),
            Ok(Halt::Soon(fail(Limit::Percent(50.0))))
        );
        assert!(matches!(
            "now,success=1".parse(),
            Ok(Halt::Now(Condition {
                on: On::Success,
                ..
            }))
        ));
        for bad in [
            "later",
            "now,fail=0",
            "now,fail=x",
            "soon,oops=1",
            "now,fail=150%",
            "now,",
        ] {
            assert!(bad.parse::<Halt>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_limit_is_reached_by_count_or_by_share_of_every_task() {
        let h: Halt = "soon,fail=3".parse().unwrap();
        assert!(!h.reached(ended(2, 50, 100)));
        assert!(h.reached(ended(3, 0, 100)));
        let p: Halt = "now,fail=10%".parse().unwrap();
        assert!(!p.reached(ended(9, 80, 100)));
        assert!(p.reached(ended(10, 0, 100)));
        let done: Halt = "now,done=2".parse().unwrap();
        assert!(done.reached(ended(1, 1, 10)));
        assert!(!Halt::Never.reached(ended(100, 0, 100)));
    }
}
