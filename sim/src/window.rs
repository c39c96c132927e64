//! Which jobs of a workload one simulation replays: all of them, a fixed
//! window, or random windows drawn as the reference draws its episodes —
//! from the whole trace or a span of it, and only busy ones if asked.

use std::fmt;
use std::ops::Range;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::metrics::Metrics;
use crate::workload::Workload;
use crate::{Model, reference};

/// Consecutive jobs `start..start + len` of a workload (after loading).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Window {
    pub start: usize,
    pub len: usize,
}

impl Window {
    pub fn range(&self) -> Range<usize> {
        self.start..self.start + self.len
    }

    /// `START:LEN`.
    pub fn parse(text: &str) -> Result<Window, String> {
        let (start, len) = text
            .split_once(':')
            .ok_or_else(|| format!("`{text}` is not START:LEN"))?;
        let window = Window {
            start: job_number(start, "START", text)?,
            len: job_number(len, "LEN", text)?,
        };
        if window.len == 0 {
            return Err(format!("`{text}`: a window needs at least one job"));
        }
        Ok(window)
    }

    /// `FROM..TO`, `FROM..` (to the last job) or `..TO` (from the first):
    /// the jobs of a workload of `jobs` jobs from `FROM` up to, not
    /// including, `TO`. Either may be a share of the jobs, `75%..` (the last
    /// quarter of any trace).
    pub fn parse_span(text: &str, jobs: usize) -> Result<Window, String> {
        let (from, to) = text
            .split_once("..")
            .ok_or_else(|| format!("`{text}` is not FROM..TO, FROM.. or ..TO"))?;
        let from = match from.trim() {
            "" => 0,
            from => span_end(from, "FROM", text, jobs)?,
        };
        let to = match to.trim() {
            "" => jobs,
            to => span_end(to, "TO", text, jobs)?,
        };
        if from >= jobs {
            return Err(format!(
                "`{text}`: the workload has {jobs} jobs (0-based, after dropping jobs that cannot run)"
            ));
        }
        if to <= from {
            return Err(format!("`{text}` holds no job (TO must be past FROM)"));
        }
        let window = Window {
            start: from,
            len: to - from,
        };
        window.check(jobs)?;
        Ok(window)
    }

    /// This window cut into `n` consecutive stretches of (nearly) equal
    /// length, in order, covering every job once.
    pub fn stretches(&self, n: usize) -> Result<Vec<Window>, String> {
        if n == 0 || n > self.len {
            return Err(format!(
                "{self} cannot be cut into {n} stretches (1 to {} of its jobs)",
                self.len
            ));
        }
        let edge = |i: usize| self.start + i * self.len / n;
        Ok((0..n)
            .map(|i| Window {
                start: edge(i),
                len: edge(i + 1) - edge(i),
            })
            .collect())
    }

    /// Whether the two share a job.
    pub fn overlaps(&self, other: &Window) -> bool {
        self.start < other.start + other.len && other.start < self.start + self.len
    }

    /// Checks the window lies inside a workload of `jobs` jobs.
    pub fn check(&self, jobs: usize) -> Result<(), String> {
        if self.start + self.len > jobs {
            Err(format!(
                "window {self} ends past the workload's {jobs} jobs (0-based, after dropping \
                 jobs that cannot run)"
            ))
        } else {
            Ok(())
        }
    }

    /// `count` windows of `len` jobs, their starts drawn uniformly from
    /// `[len, jobs − len − 1)` as in the reference, from `seed`: the same
    /// seed gives the same windows on every machine (ChaCha8).
    pub fn samples(
        jobs: usize,
        len: usize,
        count: usize,
        seed: u64,
    ) -> Result<Vec<Window>, String> {
        if len == 0 || jobs < 3 * len + 2 {
            return Err(format!(
                "random windows of {len} jobs need a workload of at least {} jobs (this one has {jobs})",
                3 * len + 2
            ));
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Ok((0..count)
            .map(|_| Window {
                start: rng.random_range(len..jobs - len - 1),
                len,
            })
            .collect())
    }
}

/// `part` (`what` of `text`) as a number of jobs.
fn job_number(part: &str, what: &str, text: &str) -> Result<usize, String> {
    part.trim()
        .parse::<usize>()
        .map_err(|_| format!("{what} `{part}` in `{text}` is not a whole number"))
}

/// An end of a span: a job number, or `P%` of `jobs` (rounded down).
fn span_end(part: &str, what: &str, text: &str, jobs: usize) -> Result<usize, String> {
    let part = part.trim();
    match part.strip_suffix('%') {
        Some(share) => match share.parse::<f64>() {
            Ok(p) if (0.0..=100.0).contains(&p) => Ok((jobs as f64 * p / 100.0) as usize),
            _ => Err(format!(
                "{what} `{part}` in `{text}` is not a share from 0% to 100%"
            )),
        },
        None => job_number(part, what, text),
    }
}

/// How random windows are drawn: `count` windows of `len` jobs from
/// `seed`, their starts uniform over the reference's range of the whole
/// workload or, with `within`, over the starts that keep a window inside
/// that span; with `min_bsld` above 1, only windows where FCFS (reference
/// model, no backfilling) reaches that average bounded slowdown — most
/// windows of a real trace never queue, and no policy differs there.
#[derive(Debug, Clone, Copy)]
pub struct Draw {
    pub count: usize,
    pub len: usize,
    pub seed: u64,
    pub within: Option<Window>,
    pub min_bsld: f64,
}

impl Draw {
    /// The windows, also skipping those `keep` refuses (held-out jobs).
    /// Draws in rounds from a seed sequence (the first round is the plain
    /// draw of the seed) and gives up after 100 rounds and 100,000 windows
    /// (busy windows can be one in a hundred of a span); the same seed
    /// gives the same windows on every machine.
    pub fn windows(
        &self,
        workload: &Workload,
        keep: impl Fn(&Window) -> bool,
    ) -> Result<Vec<Window>, String> {
        let jobs = workload.jobs.len();
        if let Some(span) = self.within {
            span.check(jobs)?;
            if span.len < self.len {
                return Err(format!(
                    "windows of {} jobs do not fit in jobs {}..{}",
                    self.len,
                    span.start,
                    span.start + span.len
                ));
            }
        }
        let busy = |w: &Window| {
            self.min_bsld <= 1.0 || {
                let fcfs = reference::run(workload, *w, slurp_runtime::core::Order::Fcfs, false);
                Metrics::of(workload, &fcfs, Model::Reference).avg_bounded_slowdown >= self.min_bsld
            }
        };
        let mut kept = Vec::with_capacity(self.count);
        let rounds = (100_000 / self.count.max(1)).max(100) as u64;
        for round in 0..rounds {
            let seed = self
                .seed
                .wrapping_add(round.wrapping_mul(0xD1B5_4A32_D192_ED03));
            let drawn = match self.within {
                None => Window::samples(jobs, self.len, self.count, seed)?,
                Some(span) => {
                    let mut rng = ChaCha8Rng::seed_from_u64(seed);
                    let last = span.start + span.len - self.len;
                    (0..self.count)
                        .map(|_| Window {
                            start: rng.random_range(span.start..=last),
                            len: self.len,
                        })
                        .collect()
                }
            };
            for w in drawn {
                if keep(&w) && busy(&w) {
                    kept.push(w);
                    if kept.len() == self.count {
                        return Ok(kept);
                    }
                }
            }
        }
        let within = self.within.map_or(String::new(), |s| {
            format!(" within jobs {}..{}", s.start, s.start + s.len)
        });
        let busy = if self.min_bsld > 1.0 {
            format!(" reach an FCFS bounded slowdown of {} and", self.min_bsld)
        } else {
            String::new()
        };
        Err(format!(
            "fewer than {} windows of {} jobs{within}{busy} could be drawn (found {} in {} draws)",
            self.count,
            self.len,
            kept.len(),
            rounds * self.count as u64
        ))
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.start, self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_start_and_length() {
        assert_eq!(
            Window::parse("2000:1024"),
            Ok(Window {
                start: 2000,
                len: 1024
            })
        );
        assert!(Window::parse("2000").is_err());
        assert!(Window::parse("x:5").is_err());
        assert!(Window::parse("5:0").is_err());
        assert!(Window { start: 5, len: 5 }.check(10).is_ok());
        assert!(Window { start: 6, len: 5 }.check(10).is_err());
    }

    #[test]
    fn stretches_cover_a_window_in_order_once() {
        let w = Window {
            start: 100,
            len: 10,
        };
        let parts = w.stretches(3).unwrap();
        assert_eq!(
            parts.iter().map(|p| (p.start, p.len)).collect::<Vec<_>>(),
            [(100, 3), (103, 3), (106, 4)]
        );
        assert_eq!(w.stretches(1).unwrap(), [w]);
        assert_eq!(w.stretches(10).unwrap().len(), 10);
        assert!(w.stretches(0).is_err());
        assert!(w.stretches(11).unwrap_err().contains("100:10"));
    }

    #[test]
    fn spans_run_to_the_end_unless_bounded() {
        assert_eq!(
            Window::parse_span("300..", 1000),
            Ok(Window {
                start: 300,
                len: 700
            })
        );
        assert_eq!(
            Window::parse_span("0..10", 1000),
            Ok(Window { start: 0, len: 10 })
        );
        let w = |start, len| Window { start, len };
        assert!(w(0, 10).overlaps(&w(9, 5)) && w(9, 5).overlaps(&w(0, 10)));
        assert!(!w(0, 10).overlaps(&w(10, 5)) && !w(10, 5).overlaps(&w(0, 10)));
        assert!(w(0, 100).overlaps(&w(40, 2)));
        assert!(Window::parse_span("300", 1000).is_err());
        assert!(Window::parse_span("10..10", 1000).is_err());
        assert!(Window::parse_span("10..5", 1000).is_err());
        assert!(Window::parse_span("990..1001", 1000).is_err());
        assert!(Window::parse_span("1000..", 1000).is_err());
        assert!(Window::parse_span("a..", 1000).is_err());
        // Shares of the jobs: the last quarter, whatever the trace's size.
        assert_eq!(
            Window::parse_span("75%..", 1000),
            Ok(Window {
                start: 750,
                len: 250
            })
        );
        assert_eq!(
            Window::parse_span("0..50%", 7),
            Ok(Window { start: 0, len: 3 })
        );
        // From the first job: the training side of a split.
        assert_eq!(
            Window::parse_span("..75%", 1000),
            Window::parse_span("0..75%", 1000)
        );
        assert_eq!(
            Window::parse_span("..10", 1000),
            Ok(Window { start: 0, len: 10 })
        );
        assert!(Window::parse_span("..0", 1000).is_err());
        assert!(Window::parse_span("101%..", 1000).is_err());
        assert!(Window::parse_span("x%..", 1000).is_err());
    }

    #[test]
    fn samples_are_seeded_and_inside_the_reference_range() {
        let a = Window::samples(10_000, 1024, 50, 7).unwrap();
        assert_eq!(a, Window::samples(10_000, 1024, 50, 7).unwrap());
        assert_ne!(a, Window::samples(10_000, 1024, 50, 8).unwrap());
        assert!(
            a.iter()
                .all(|w| w.start >= 1024 && w.start < 10_000 - 1024 - 1 && w.len == 1024)
        );
        assert!(Window::samples(100, 64, 1, 0).is_err());
    }
}
