//! The live view of a run: bars on a terminal, plain lines elsewhere.
//!
//! Bars are drawn only when stdout and stderr are both terminals: with
//! either redirected, a display drawn with cursor moves would end up in a
//! file or interleave with a pipe's reader (`slurp f | tee log`). There,
//! `--progress` prints a plain status line to stderr now and then instead.
//!
//! Counts are of leaf tasks — a nested entry counts as the tasks of its
//! workflow, however deep — so `done/total`, throughput and ETA mean
//! commands run. A ticker thread redraws from shared counts; task output is
//! written while the bars are lifted ([`Progress::write_above`]), so a line
//! of output is never cut by the display.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{self, IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use slurp_runtime::Program;
use slurp_runtime::WorkflowId;
use slurp_runtime::core::{Event, State};

/// Running tasks listed one by one under the bar.
const RUNNING_SHOWN: usize = 5;
/// Nested instances listed one by one; more are summed up in one line.
const INSTANCES_SHOWN: usize = 6;

/// How to show progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Bars,
    /// A plain line to stderr every so often.
    Lines(Duration),
    Off,
}

impl Mode {
    /// What the terminal and the flags allow. `ungrouped`: the tasks
    /// write to the terminal themselves, and would tear the bars apart.
    pub fn choose(quiet: bool, ungrouped: bool, progress: Option<Duration>) -> Mode {
        let terminal = io::stdout().is_terminal() && io::stderr().is_terminal();
        match (quiet, terminal, progress) {
            (true, _, _) => Mode::Off,
            (false, true, _) if ungrouped => Mode::Off,
            (false, true, _) => Mode::Bars,
            (false, false, Some(every)) => Mode::Lines(every),
            (false, false, None) => Mode::Off,
        }
    }
}

/// A nested instance: its leaf tasks.
#[derive(Debug, Default, Clone)]
struct Instance {
    total: u64,
    done: u64,
    running: u64,
}

#[derive(Debug)]
struct Counts {
    started: Instant,
    total: u64,
    /// Leaf tasks in each final state, in `State::ALL` order.
    finals: [u64; 9],
    /// Leaf tasks that will not run because their nested entry ended.
    dropped: u64,
    running: HashMap<String, Instant>,
    /// Running nested entries by path (`sub/`).
    instances: BTreeMap<String, Instance>,
    /// Leaf tasks per workflow, counted once.
    leaves: HashMap<WorkflowId, u64>,
}

impl Counts {
    fn done(&self) -> u64 {
        self.finals.iter().sum::<u64>() + self.dropped
    }

    /// `812/1000 done (2 failed, 1 skipped), 8 running, 67.2 tasks/s, ETA 3 s`
    fn line(&self) -> String {
        let done = self.done();
        let mut out = format!("{done}/{} done", self.total);
        let bad: Vec<String> = [
            State::Failed,
            State::Timeout,
            State::OutOfMemory,
            State::Cancelled,
            State::Skipped,
        ]
        .iter()
        .filter(|s| self.finals[**s as usize] > 0)
        .map(|s| format!("{} {}", self.finals[*s as usize], s.name()))
        .collect();
        if !bad.is_empty() {
            let _ = write!(out, " ({})", bad.join(", "));
        }
        let _ = write!(out, ", {} running", self.running.len());
        let secs = self.started.elapsed().as_secs_f64();
        if done > 0 && secs > 0.0 {
            let rate = done as f64 / secs;
            let _ = write!(out, ", {rate:.1} tasks/s");
            if done < self.total {
                let eta = (self.total - done) as f64 / rate;
                let _ = write!(out, ", ETA {}", short(eta));
            }
        }
        out
    }

    /// The lines under the bar: the longest-running tasks, then instances.
    fn details(&self) -> String {
        let mut out = String::new();
        let now = Instant::now();
        let mut running: Vec<(&String, Duration)> = self
            .running
            .iter()
            .map(|(name, since)| (name, now - *since))
            .collect();
        running.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        for (name, took) in running.iter().take(RUNNING_SHOWN) {
            let _ = write!(out, "\n  {name}  {}", short(took.as_secs_f64()));
        }
        if running.len() > RUNNING_SHOWN {
            let _ = write!(
                out,
                "\n  … and {} more running",
                running.len() - RUNNING_SHOWN
            );
        }
        if self.instances.len() <= INSTANCES_SHOWN {
            for (path, i) in &self.instances {
                let _ = write!(
                    out,
                    "\n  {path}  {}/{} done, {} running",
                    i.done, i.total, i.running
                );
            }
        } else {
            let sum = self
                .instances
                .values()
                .fold(Instance::default(), |a, i| Instance {
                    total: a.total + i.total,
                    done: a.done + i.done,
                    running: a.running + i.running,
                });
            let _ = write!(
                out,
                "\n  {} nested instances  {}/{} done, {} running",
                self.instances.len(),
                sum.done,
                sum.total,
                sum.running
            );
        }
        out
    }
}

/// `3.2s`, `4m05s`, `1h02m`.
fn short(secs: f64) -> String {
    let s = secs.max(0.0);
    if s < 60.0 {
        format!("{s:.1}s")
    } else if s < 3600.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!("{}h{:02}m", (s / 3600.0) as u64, (s % 3600.0 / 60.0) as u64)
    }
}

fn leaves(program: &Program, workflow: WorkflowId, memo: &mut HashMap<WorkflowId, u64>) -> u64 {
    if let Some(&n) = memo.get(&workflow) {
        return n;
    }
    let wf = program.workflow(workflow);
    let n = wf
        .tasks
        .runs()
        .iter()
        .map(|r| {
            u64::from(r.len)
                * match r.first.nested {
                    Some(child) => leaves(program, child, memo),
                    None => 1,
                }
        })
        .sum();
    memo.insert(workflow, n);
    n
}

/// The live display of one run.
#[derive(Debug)]
pub struct Progress {
    counts: Arc<Mutex<Counts>>,
    bar: Option<ProgressBar>,
    stop: Arc<Mutex<bool>>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    pub fn new(program: &Program, mode: Mode) -> Option<Progress> {
        if mode == Mode::Off {
            return None;
        }
        let mut memo = HashMap::new();
        // The top-level workflow is the first.
        let total = leaves(program, WorkflowId(0), &mut memo);
        let counts = Arc::new(Mutex::new(Counts {
            started: Instant::now(),
            total,
            finals: [0; 9],
            dropped: 0,
            running: HashMap::new(),
            instances: BTreeMap::new(),
            leaves: memo,
        }));
        let stop = Arc::new(Mutex::new(false));
        let bar = (mode == Mode::Bars).then(|| {
            let colour = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            let template = if colour {
                "{spinner:.green} [{elapsed_precise}] {bar:30.cyan/blue} {msg}"
            } else {
                "{spinner} [{elapsed_precise}] {bar:30} {msg}"
            };
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(template)
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("█▉▊▋▌▍▎▏ "),
            );
            bar
        });
        let ticker = {
            let (counts, bar, stop) = (counts.clone(), bar.clone(), stop.clone());
            std::thread::Builder::new()
                .name("slurp-progress".into())
                .spawn(move || tick(&counts, bar.as_ref(), &stop, mode))
                .ok()
        };
        Some(Progress {
            counts,
            bar,
            stop,
            ticker,
        })
    }

    /// `count` tasks were submitted to the instance at `scope`.
    pub fn submitted(&self, scope: &str, count: usize) {
        let Ok(mut counts) = self.counts.lock() else {
            return;
        };
        counts.total += count as u64;
        for (i, _) in scope.match_indices('/') {
            if let Some(instance) = counts.instances.get_mut(&scope[..=i]) {
                instance.total += count as u64;
            }
        }
        if let Some(bar) = &self.bar {
            bar.set_length(counts.total);
        }
    }

    /// A core event of the instance at `scope`.
    pub fn event(&self, program: &Program, workflow: WorkflowId, scope: &str, event: &Event) {
        if let Event::Stretch { count, to, .. } = event {
            let Ok(mut counts) = self.counts.lock() else {
                return;
            };
            counts.finals[*to as usize] += u64::from(*count);
            for (i, _) in scope.match_indices('/') {
                if let Some(instance) = counts.instances.get_mut(&scope[..=i]) {
                    instance.done += u64::from(*count);
                }
            }
            return;
        }
        let Event::Transition { task, to, .. } = event else {
            return;
        };
        let Ok(mut counts) = self.counts.lock() else {
            return;
        };
        let wf = program.workflow(workflow);
        let name = format!("{scope}{}", wf.task_name(*task));
        // Every instance this task lies in: `a/`, `a/b/`.
        let within: Vec<String> = scope
            .match_indices('/')
            .map(|(i, _)| scope[..=i].to_owned())
            .collect();
        if let Some(child) = wf.task(*task).nested {
            let path = format!("{name}/");
            match to {
                State::Running => {
                    let total = leaves(program, child, &mut counts.leaves);
                    counts.instances.insert(
                        path,
                        Instance {
                            total,
                            ..Instance::default()
                        },
                    );
                }
                s if s.is_final() => {
                    // Tasks of its workflow that never got to run.
                    let total = leaves(program, child, &mut counts.leaves);
                    let done = counts.instances.remove(&path).map_or(0, |i| i.done);
                    let left = total.saturating_sub(done);
                    counts.dropped += left;
                    for p in &within {
                        if let Some(i) = counts.instances.get_mut(p) {
                            i.done += left;
                        }
                    }
                }
                _ => {}
            }
            return;
        }
        let was_running = counts.running.remove(&name).is_some();
        let now_running = *to == State::Running;
        if now_running {
            counts.running.insert(name, Instant::now());
        }
        if to.is_final() {
            counts.finals[*to as usize] += 1;
        }
        for p in &within {
            if let Some(i) = counts.instances.get_mut(p) {
                i.running =
                    (i.running + u64::from(now_running)).saturating_sub(u64::from(was_running));
                i.done += u64::from(to.is_final());
            }
        }
    }

    /// Writes task output with the bars lifted.
    pub fn write_above(&self, write: impl FnOnce()) {
        match &self.bar {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }

    /// Clears the display (before the summary is printed).
    pub fn finish(mut self) {
        if let Ok(mut stop) = self.stop.lock() {
            *stop = true;
        }
        if let Some(ticker) = self.ticker.take() {
            ticker.thread().unpark();
            let _ = ticker.join();
        }
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Redraws the bar five times a second, or prints a line every `every`.
fn tick(counts: &Mutex<Counts>, bar: Option<&ProgressBar>, stop: &Mutex<bool>, mode: Mode) {
    let every = match mode {
        Mode::Lines(every) => every,
        _ => Duration::from_millis(200),
    };
    let mut next = Instant::now() + every;
    loop {
        std::thread::park_timeout(next.saturating_duration_since(Instant::now()));
        if stop.lock().map_or(true, |s| *s) {
            return;
        }
        if Instant::now() < next {
            continue;
        }
        next += every;
        let Ok(counts) = counts.lock() else { return };
        match bar {
            Some(bar) => {
                bar.set_position(counts.done());
                bar.set_message(format!("{}{}", counts.line(), counts.details()));
                bar.tick();
            }
            None => {
                let line = format!("slurp: {}\n", counts.line());
                drop(counts);
                let _ = io::stderr().lock().write_all(line.as_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_durations() {
        assert_eq!(short(3.24), "3.2s");
        assert_eq!(short(245.0), "4m05s");
        assert_eq!(short(3720.0), "1h02m");
    }
}
