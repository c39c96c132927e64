//! What becomes of an attempt's output in group mode: shown whole when the
//! attempt ends — as it is, each line tagged with the task's values
//! (`--tag`, GNU parallel's), in the order of the tasks instead of the
//! order they end (`--keep-order`) — and kept per task under a results
//! directory (`--results DIR`: `DIR/1/VALUE/2/VALUE/{stdout,stderr,seq}`
//! for a command line's values, `DIR/TASK/…` for a file's tasks).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::ir::{LineKind, TaskId, Workflow};
use crate::run::Observer;

/// How output is shown and kept.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Show each task's output in task order (the top level's).
    pub keep_order: bool,
    /// Prefix each line with the task's values and a tab.
    pub tag: bool,
    /// Keep each task's stdout and stderr in files below this directory.
    pub results: Option<PathBuf>,
}

/// Output waiting for its turn (`keep_order`), and where it is kept.
#[derive(Debug)]
pub(crate) struct Shown {
    opts: Options,
    /// Per top-level task, its attempts' output (stderr?, bytes).
    pending: BTreeMap<u32, Vec<(bool, Vec<u8>)>>,
    /// The first top-level task whose output is not yet shown.
    next: u32,
    /// A results file could not be written (said once).
    results_error: bool,
}

impl Shown {
    pub fn new(opts: Options) -> Self {
        Shown {
            opts,
            pending: BTreeMap::new(),
            next: 0,
            results_error: false,
        }
    }

    /// One attempt of `task` ended with this output. `top`: the task is of
    /// the top-level instance (the only one kept in order).
    #[allow(clippy::too_many_arguments)]
    pub fn attempt(
        &mut self,
        workflow: &Workflow,
        task: TaskId,
        name: &str,
        top: bool,
        stdout: &[u8],
        stderr: &[u8],
        observer: &mut dyn Observer,
    ) {
        if let Some(dir) = &self.opts.results {
            let dir = dir.join(results_path(workflow, task, name));
            if let Err(e) = write_results(&dir, task, stdout, stderr)
                && !std::mem::replace(&mut self.results_error, true)
            {
                eprintln!("slurp: cannot keep results in {}: {e}", dir.display());
            }
        }
        let tagged = |bytes: &[u8]| match self.opts.tag {
            true => tag_lines(&tag_of(workflow, task), bytes),
            false => bytes.to_vec(),
        };
        let parts = [(false, stdout), (true, stderr)]
            .into_iter()
            .filter(|(_, b)| !b.is_empty())
            .map(|(stderr, b)| (stderr, tagged(b)));
        if self.opts.keep_order && top && task.0 >= self.next {
            self.pending.entry(task.0).or_default().extend(parts);
            return;
        }
        for (stderr, bytes) in parts {
            observer.output(name, stderr, &bytes);
        }
    }

    /// Shows, in order, the output of every task up to the first that has
    /// not ended for good.
    pub fn flush_ended(
        &mut self,
        tasks: u32,
        ended: impl Fn(TaskId) -> bool,
        name: impl Fn(TaskId) -> String,
        observer: &mut dyn Observer,
    ) {
        if !self.opts.keep_order {
            return;
        }
        while self.next < tasks && ended(TaskId(self.next)) {
            if let Some(parts) = self.pending.remove(&self.next) {
                let name = name(TaskId(self.next));
                for (stderr, bytes) in parts {
                    observer.output(&name, stderr, &bytes);
                }
            }
            self.next += 1;
        }
    }

    /// Shows whatever still waits, in order (the run is over).
    pub fn flush_all(&mut self, name: impl Fn(TaskId) -> String, observer: &mut dyn Observer) {
        for (task, parts) in std::mem::take(&mut self.pending) {
            let name = name(TaskId(task));
            for (stderr, bytes) in parts {
                observer.output(&name, stderr, &bytes);
            }
        }
    }
}

/// What `--tag` puts before each line: the task's values separated by
/// spaces (its id when it has none).
fn tag_of(workflow: &Workflow, task: TaskId) -> String {
    let t = workflow.task(task);
    let template = workflow.template(t.template);
    if template.sweep.is_empty() {
        workflow.task_name(task)
    } else {
        template.cells(t.index).join(" ")
    }
}

fn tag_lines(tag: &str, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len() + tag.len() + 1);
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        out.extend_from_slice(tag.as_bytes());
        out.push(b'\t');
        out.extend_from_slice(line);
    }
    if !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    out
}

/// Where one task's results go, below the results directory: for a
/// command line, `1/VALUE/2/VALUE…` (GNU parallel's layout); for a file's
/// task, its id with its instance's path (`sub/x` → `sub\_x`). Each part
/// is one path component whatever it holds.
fn results_path(workflow: &Workflow, task: TaskId, name: &str) -> PathBuf {
    let t = workflow.task(task);
    let template = workflow.template(t.template);
    let mut path = PathBuf::new();
    if template.kind == LineKind::Command {
        for (column, value) in template.cells(t.index).iter().enumerate() {
            path.push((column + 1).to_string());
            path.push(component(value));
        }
    } else {
        path.push(component(name));
    }
    path
}

/// `value` as one safe path component: `\` → `\\` and `/` → `\_` (as
/// GNU parallel writes them); an empty value, `.` and `..` — which
/// parallel lets climb out of the directory — escaped too.
fn component(value: &str) -> String {
    match value {
        "" => "\\0".to_owned(),
        "." => "\\.".to_owned(),
        ".." => "\\.\\.".to_owned(),
        _ => value.replace('\\', "\\\\").replace('/', "\\_"),
    }
}

fn write_results(dir: &Path, task: TaskId, stdout: &[u8], stderr: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("stdout"), stdout)?;
    std::fs::write(dir.join("stderr"), stderr)?;
    std::fs::write(dir.join("seq"), (task.0 + 1).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_is_one_component_that_stays_inside_the_directory() {
        assert_eq!(component("a/b"), "a\\_b");
        assert_eq!(component("a\\b"), "a\\\\b");
        for v in ["", ".", "..", "../..", "/"] {
            let c = component(v);
            assert!(
                !c.is_empty() && c != "." && c != ".." && !c.contains('/'),
                "{v} → {c}"
            );
        }
    }

    #[test]
    fn a_tag_starts_every_line_and_a_last_line_is_ended() {
        assert_eq!(tag_lines("a b", b"x\ny"), b"a b\tx\na b\ty\n");
        assert_eq!(tag_lines("v", b"one\n"), b"v\tone\n");
    }
}
