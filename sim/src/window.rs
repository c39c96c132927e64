//! Which jobs of a workload one simulation replays: all of them, a fixed
//! window, or random windows drawn as the reference draws its episodes.

use std::fmt;
use std::ops::Range;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

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
        let number = |s: &str, what: &str| {
            s.trim()
                .parse::<usize>()
                .map_err(|_| format!("{what} `{s}` in `{text}` is not a whole number"))
        };
        let window = Window {
            start: number(start, "START")?,
            len: number(len, "LEN")?,
        };
        if window.len == 0 {
            return Err(format!("`{text}`: a window needs at least one job"));
        }
        Ok(window)
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
