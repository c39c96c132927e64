//! What a report draws: tasks, their attempts, and the lanes they held.
//!
//! A lane is one core or one GPU of one node, in the top-level instance's
//! ids, so the tasks of nested instances share their parent's lanes and a
//! nested entry's own attempt marks the slice its instance owned.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::Path;

use slurp_runtime::core::State;
use slurp_runtime::journal::{Damage, Record};

/// One core or GPU of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lane {
    pub node: u32,
    /// GPUs sort after cores.
    pub gpu: bool,
    pub id: u32,
}

impl Lane {
    pub fn label(&self) -> String {
        format!(
            "n{} {}{}",
            self.node,
            if self.gpu { "gpu" } else { "c" },
            self.id
        )
    }
}

/// How an attempt ended, for its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Succeeded,
    Failed,
    Timeout,
    Cancelled,
    /// Failed, and the task ran again.
    Retried,
    /// Still running when the journal ends.
    Running,
}

impl Outcome {
    pub fn class(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Timeout => "timeout",
            Outcome::Cancelled => "cancelled",
            Outcome::Retried => "retried",
            Outcome::Running => "running",
        }
    }
}

/// One attempt: when, and on which lanes (indices into
/// [`Timeline::lanes`], ascending).
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub start: u64,
    pub end: u64,
    pub lanes: Vec<u32>,
    pub outcome: Outcome,
}

/// One task as the report shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// With its instance's path: `sub/sim[3]`.
    pub id: String,
    /// The last state; `None` while it has none (journal cut short).
    pub state: Option<State>,
    /// When it reached that state (ms from the start).
    pub at: u64,
    /// How it ended, in words (`exit 3`, `signal 9`, `dependency a`).
    pub detail: String,
    /// `FILE:LINE` of its definition, when the journal has it.
    pub src: String,
    pub attempts: Vec<Attempt>,
    /// A nested entry: its attempts mark its instance's slice.
    pub group: bool,
}

/// A run (or simulated schedule) ready to draw.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    pub lanes: Vec<Lane>,
    pub tasks: Vec<Task>,
    /// The last instant on record; running attempts end there.
    pub horizon: u64,
    /// What one unit of time is: a run's clock counts milliseconds, a
    /// simulation's seconds.
    pub unit: TimeUnit,
    /// Sweep members the journal keeps only as ranges of successes (its
    /// rewrites drop their own records): counted, not drawn.
    pub summarised: Vec<Summarised>,
}

/// The members of one cohort counted but not drawn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summarised {
    /// The id of the cohort's first member, and its defining line.
    pub first: String,
    pub src: String,
    /// Members that succeeded with no record of their own left.
    pub succeeded: u64,
    /// Members never started (a run killed or interrupted mid-sweep).
    pub unstarted: u64,
    /// Members that never started and moved together to a state (a halt
    /// cancels them): counted in it, not drawn.
    pub stretched: Vec<(State, u64)>,
}

/// How the time axis is labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimeUnit {
    /// Times are milliseconds.
    #[default]
    Millis,
    /// Times are seconds (simulations).
    Seconds,
}

impl Timeline {
    /// Counts of tasks per final state, in `State::ALL` order (the
    /// summarised members among the succeeded).
    pub fn counts(&self) -> [usize; 9] {
        let mut counts = [0; 9];
        for task in &self.tasks {
            if let Some(state) = task.state {
                counts[state as usize] += 1;
            }
        }
        counts[State::Succeeded as usize] += self.summarised().0 as usize;
        for &(state, n) in self.summarised.iter().flat_map(|s| &s.stretched) {
            counts[state as usize] += n as usize;
        }
        counts
    }

    /// How many tasks it counts: those drawn, those summarised and the
    /// sweep members never started.
    pub fn total(&self) -> u64 {
        let unstarted: u64 = self.summarised.iter().map(|s| s.unstarted).sum();
        let stretched: u64 = self
            .summarised
            .iter()
            .flat_map(|s| &s.stretched)
            .map(|&(_, n)| n)
            .sum();
        self.tasks.len() as u64 + self.summarised().0 + unstarted + stretched
    }

    /// The members that succeeded, counted but not drawn, and a line that
    /// says so (empty when there are none).
    pub fn summarised(&self) -> (u64, String) {
        let n: u64 = self.summarised.iter().map(|s| s.succeeded).sum();
        let of: Vec<String> = self
            .summarised
            .iter()
            .filter(|s| s.succeeded > 0)
            .map(|s| format!("{} of {} ({})", s.succeeded, s.first, s.src))
            .collect();
        (n, of.join(", "))
    }

    /// Average busy fraction of the core lanes over `[0, horizon]`
    /// (nested entries' slices not counted twice: only their tasks).
    pub fn utilisation(&self) -> f64 {
        let cores = self.lanes.iter().filter(|l| !l.gpu).count();
        if cores == 0 || self.horizon == 0 {
            return 0.0;
        }
        let busy: u128 = self
            .tasks
            .iter()
            .filter(|t| !t.group)
            .flat_map(|t| &t.attempts)
            .map(|a| {
                let n = a
                    .lanes
                    .iter()
                    .filter(|&&l| !self.lanes[l as usize].gpu)
                    .count();
                n as u128 * u128::from(a.end - a.start)
            })
            .sum();
        busy as f64 / (cores as f64 * self.horizon as f64)
    }

    /// Reads a run's `events.jsonl` under the journal's one damage policy
    /// (`slurp_runtime::journal::read`: unreadable lines skipped and
    /// counted, a torn last line a run being written or killed); what was
    /// wrong comes back beside the timeline.
    pub fn from_journal(path: &Path) -> io::Result<(Timeline, Header, Damage)> {
        let mut header = Header::default();
        let mut builder = Builder::default();
        // Each cohort's first member and defining line, which its members'
        // records leave out, and its members with records, by number.
        let mut cohorts: HashMap<u32, (String, String)> = HashMap::new();
        let mut counts: BTreeMap<u32, u64> = BTreeMap::new();
        let mut members: HashMap<u32, BTreeMap<u32, String>> = HashMap::new();
        let mut summarised: BTreeMap<u32, u64> = BTreeMap::new();
        let mut drawn_done: BTreeMap<u32, u64> = BTreeMap::new();
        let mut stretched: BTreeMap<u32, Vec<(State, u64)>> = BTreeMap::new();
        let damage = slurp_runtime::journal::read(path, |_, record| match record {
            Record::Header {
                run,
                workflow,
                started,
                ..
            } => {
                header = Header {
                    run,
                    workflow,
                    started,
                    ended: None,
                }
            }
            Record::State {
                t,
                task,
                to,
                reason,
                src,
                cohort,
                ..
            } => {
                let src = src.or_else(|| {
                    let (_, src) = cohorts.get(&cohort?.0)?;
                    to.is_final().then(|| src.clone())
                });
                if let Some((c, m)) = cohort {
                    members.entry(c).or_default().insert(m, task.clone());
                }
                builder.state(t, &task, to, &reason, src)
            }
            Record::Cohort {
                id,
                first,
                src,
                count,
                ..
            } => {
                cohorts.insert(id, (first, src));
                counts.insert(id, u64::from(count));
            }
            Record::Start {
                t,
                task,
                nodes,
                cores,
                gpus,
                cohort,
                ..
            } => {
                if let Some((c, m)) = cohort {
                    members.entry(c).or_default().insert(m, task.clone());
                }
                builder.start(t, &task, &nodes, &cores, &gpus)
            }
            Record::Done {
                t, cohort, ranges, ..
            } => {
                // Members drawn so far end here; the others' records were
                // dropped by a rewrite of the journal.
                let src = cohorts.get(&cohort).map(|(_, s)| s.clone());
                let named = members.entry(cohort).or_default();
                let mut drawn = 0;
                for &(from, to) in &ranges {
                    let ended: Vec<u32> = named.range(from..to).map(|(&m, _)| m).collect();
                    for m in ended {
                        if let Some(task) = named.remove(&m) {
                            let reason = serde_json::json!({ "ended": "success" });
                            builder.state(t, &task, State::Succeeded, &reason, src.clone());
                            drawn += 1;
                        }
                    }
                }
                let all: u64 = ranges
                    .iter()
                    .map(|&(a, b)| u64::from(b.saturating_sub(a)))
                    .sum();
                *summarised.entry(cohort).or_default() += all.saturating_sub(drawn);
                *drawn_done.entry(cohort).or_default() += drawn;
            }
            Record::Stretch {
                cohort, count, to, ..
            } => stretched
                .entry(cohort)
                .or_default()
                .push((to, u64::from(count))),
            Record::Group { .. } | Record::Submit { .. } => {}
            Record::End { t, interrupted } => {
                builder.horizon = builder.horizon.max(t);
                header.ended = Some(interrupted);
            }
        })?;
        let mut timeline = builder.finish(TimeUnit::Millis);
        // Per cohort: members drawn (those with records still), those that
        // succeeded as ranges only, and the rest never started.
        timeline.summarised = counts
            .into_iter()
            .filter_map(|(c, count)| {
                let (first, src) = cohorts.remove(&c).unwrap_or_default();
                let drawn = members.get(&c).map_or(0, |m| m.len() as u64)
                    + drawn_done.get(&c).copied().unwrap_or(0);
                let succeeded = summarised.get(&c).copied().unwrap_or(0);
                let stretched = stretched.remove(&c).unwrap_or_default();
                let moved: u64 = stretched.iter().map(|&(_, n)| n).sum();
                let unstarted = count.saturating_sub(drawn + succeeded + moved);
                (succeeded + unstarted + moved > 0).then_some(Summarised {
                    first,
                    src,
                    succeeded,
                    unstarted,
                    stretched,
                })
            })
            .collect();
        Ok((timeline, header, damage))
    }
}

/// What the journal's first and last lines say about the run.
#[derive(Debug, Clone, Default)]
pub struct Header {
    pub run: String,
    pub workflow: String,
    /// Seconds since the epoch.
    pub started: u64,
    /// `Some(interrupted)` once the run ended.
    pub ended: Option<bool>,
}

/// Collects attempts by task while records arrive; lanes are numbered
/// once every start is known.
#[derive(Debug, Default)]
pub struct Builder {
    tasks: Vec<Task>,
    index: HashMap<String, usize>,
    /// Per attempt: its task and the lanes it held, as lanes.
    held: Vec<Vec<Lane>>,
    /// Per task: its open attempt (index into its attempts).
    open: HashMap<usize, usize>,
    /// Per attempt, in `tasks[..].attempts` order: the index into `held`.
    attempt_lanes: Vec<(usize, usize, usize)>,
    horizon: u64,
}

impl Builder {
    fn task(&mut self, id: &str) -> usize {
        if let Some(&i) = self.index.get(id) {
            return i;
        }
        let i = self.tasks.len();
        self.tasks.push(Task {
            id: id.to_owned(),
            state: None,
            at: 0,
            detail: String::new(),
            src: String::new(),
            attempts: Vec::new(),
            group: false,
        });
        self.index.insert(id.to_owned(), i);
        // A nested instance's tasks make its entry a group.
        if let Some(cut) = id.rfind('/')
            && let Some(&parent) = self.index.get(&id[..cut])
        {
            self.tasks[parent].group = true;
        }
        i
    }

    /// An attempt of `id` started at `t` on these slices.
    pub fn start(
        &mut self,
        t: u64,
        id: &str,
        nodes: &[u32],
        cores: &[Vec<u32>],
        gpus: &[Vec<u32>],
    ) {
        let i = self.task(id);
        let mut lanes = Vec::new();
        for (s, slice) in cores.iter().enumerate() {
            let node = nodes.get(s).copied().unwrap_or(s as u32);
            lanes.extend(slice.iter().map(|&id| Lane {
                node,
                gpu: false,
                id,
            }));
            if let Some(g) = gpus.get(s) {
                lanes.extend(g.iter().map(|&id| Lane {
                    node,
                    gpu: true,
                    id,
                }));
            }
        }
        let task = &mut self.tasks[i];
        // An attempt still open failed without a word (older journals).
        if let Some(&a) = self.open.get(&i) {
            task.attempts[a].end = t;
            task.attempts[a].outcome = Outcome::Retried;
        }
        // A start is the attempt's `running` (the journal writes no such
        // transition beside it).
        task.state = Some(State::Running);
        task.at = t;
        self.open.insert(i, task.attempts.len());
        self.attempt_lanes
            .push((i, task.attempts.len(), self.held.len()));
        task.attempts.push(Attempt {
            start: t,
            end: t,
            lanes: Vec::new(),
            outcome: Outcome::Running,
        });
        self.held.push(lanes);
        self.horizon = self.horizon.max(t);
    }

    /// `id` moved to `to` at `t`.
    pub fn state(
        &mut self,
        t: u64,
        id: &str,
        to: State,
        reason: &serde_json::Value,
        src: Option<String>,
    ) {
        let i = self.task(id);
        self.horizon = self.horizon.max(t);
        let task = &mut self.tasks[i];
        task.state = Some(to);
        task.at = t;
        if let Some(src) = src {
            task.src = src;
        }
        let ended = match to {
            State::Succeeded => Some(Outcome::Succeeded),
            State::Failed => Some(Outcome::Failed),
            State::Timeout => Some(Outcome::Timeout),
            // Stopped by its limit, as a time limit stops a task.
            State::OutOfMemory => Some(Outcome::Timeout),
            State::Cancelled => Some(Outcome::Cancelled),
            // Runnable again after running: a retry.
            State::Runnable | State::Pending => Some(Outcome::Retried),
            State::Running | State::Skipped => None,
        };
        if to.is_final() || to == State::Runnable {
            task.detail = describe(reason);
        }
        if let Some(outcome) = ended
            && let Some(a) = self.open.remove(&i)
        {
            task.attempts[a].end = t;
            task.attempts[a].outcome = outcome;
        }
    }

    /// Numbers the lanes (sorted: node, cores, GPUs) and closes attempts
    /// still running at the horizon.
    pub fn finish(mut self, unit: TimeUnit) -> Timeline {
        for (&task, &a) in &self.open {
            self.tasks[task].attempts[a].end = self.horizon;
        }
        let mut all: Vec<Lane> = self.held.iter().flatten().copied().collect();
        all.sort_unstable();
        all.dedup();
        let number: BTreeMap<Lane, u32> = all
            .iter()
            .enumerate()
            .map(|(n, l)| (*l, n as u32))
            .collect();
        for (task, a, h) in self.attempt_lanes {
            let mut lanes: Vec<u32> = self.held[h].iter().map(|l| number[l]).collect();
            lanes.sort_unstable();
            self.tasks[task].attempts[a].lanes = lanes;
        }
        Timeline {
            lanes: all,
            tasks: self.tasks,
            horizon: self.horizon,
            unit,
            summarised: Vec::new(),
        }
    }
}

/// A journaled reason in a few words.
fn describe(reason: &serde_json::Value) -> String {
    use serde_json::Value;
    match reason {
        Value::String(s) => s.clone(),
        Value::Object(map) => match map.iter().next() {
            Some((k, Value::Object(inner))) if k == "ended" => match inner.iter().next() {
                Some((how, v)) => format!("{how} {v}"),
                None => k.clone(),
            },
            Some((k, Value::String(v))) if k == "ended" => v.clone(),
            Some((k, Value::String(v))) => format!("{k} {v}"),
            Some((k, v)) => format!("{k} {v}"),
            None => String::new(),
        },
        _ => String::new(),
    }
}
