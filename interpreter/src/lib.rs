//! slurp's interpreter: from a workflow file to a checked [`Program`].
//!
//! The stages, each a module: [`load`] reads files and follows includes and
//! defaults; [`lower`] types attributes, expands sweeps and loads nested
//! workflows; [`dag`] resolves dependencies and rejects cycles; a last pass
//! checks every request against what the instance (or, for nested
//! workflows, their slice) can ever have. TOML specs enter through
//! [`toml_spec`] and share everything after it; a GNU parallel command
//! line enters through [`parallel`], which builds its one template itself.
//! Tasks submitted to a live instance are lowered by [`Live::submit`] into
//! the running workflow, after its tasks (a jobspec first becomes its task
//! line, [`from_jobspec`]).
//!
//! Nothing here runs a process. Any mistake anywhere — a typo in a nested
//! file three levels down included — fails the whole load, with every
//! diagnostic found, so nothing ever half-runs.

mod attrs;
mod dag;
pub mod from_jobspec;
pub mod launchers;
mod load;
mod lower;
pub mod parallel;
mod report;
mod toml_spec;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use slurp_grammar::{Diagnostic, Span};
use slurp_runtime::{Capacity, Program, TemplateId, WorkflowId, amount};

pub use attrs::{KEYS as ATTRIBUTES, POLICIES, parse_duration, parse_size};
pub use lower::{MAX_DEPTH, Notes, SUBCOMMANDS};
pub use report::{Failure, Problem, SourceFile, Sources};

/// How to load: what the instance has and where relative paths start.
#[derive(Debug, Clone)]
pub struct Options {
    /// What requests are checked against.
    pub capacity: Capacity,
    /// The most tasks one program may expand to; at most `u32::MAX` (task
    /// ids are 32-bit), which is what a larger value means.
    pub max_tasks: u64,
    /// Where slurp was started: relative command-line paths and task
    /// working directories resolve against it.
    pub cwd: PathBuf,
}

impl Options {
    pub const DEFAULT_MAX_TASKS: u64 = 10_000_000;
}

/// A checked program with the sources it came from.
#[derive(Debug)]
pub struct Loaded {
    pub program: Program,
    pub sources: Sources,
    pub notes: Notes,
}

/// Loads, checks and lowers the workflow at `path` (`-` for stdin).
pub fn load(path: &Path, opts: &Options) -> Result<Loaded, Failure> {
    let mut sources = Sources::default();
    let mut lowerer = lower::Lowerer::new(&mut sources, opts);
    let root = lowerer.load_workflow(path, None);
    let mut diags = std::mem::take(&mut lowerer.diags);
    let mut program = std::mem::take(&mut lowerer.program);
    let notes = std::mem::take(&mut lowerer.notes);
    drop(lowerer);
    // Every mistake at once: what does not fit is found beside the
    // syntax errors (the tasks that were built are checked), and all of
    // them are told in file order, line by line.
    if let Some(root) = root {
        let mut seen = HashSet::new();
        let all = 0..program.workflow(root).tasks.len() as u32;
        check_capacity(
            &program,
            root,
            all,
            opts.capacity,
            None,
            &mut seen,
            &mut diags,
        );
    }
    diags.sort_by_key(|l| {
        (
            l.file.map_or(u32::MAX, |f| f.0),
            l.diagnostic.primary_span().map_or(0, |s| s.start),
        )
    });
    let what = format!(
        "`{}` is not a valid workflow",
        load::display_path(&load::normalize(&opts.cwd.join(path)), &opts.cwd)
    );
    if !diags.is_empty() || root.is_none() {
        return Err(Failure::new(what, diags, &sources));
    }
    program.files = sources.iter().map(|f| f.path.clone()).collect();
    Ok(Loaded {
        program,
        sources,
        notes,
    })
}

/// An instance with no tasks yet (`slurp start`): one empty top-level
/// workflow, to which tasks are then submitted.
pub fn empty(opts: &Options) -> Loaded {
    let mut sources = Sources::default();
    let path = opts.cwd.join("(instance)");
    let file = sources.add(path.clone(), "(instance)".to_owned(), "".into());
    let mut program = Program::default();
    program.workflows.push(slurp_runtime::Workflow::new(file));
    program.files = vec![path];
    Loaded {
        program,
        sources,
        notes: Notes::default(),
    }
}

/// Every task must fit its instance when it is idle; the tasks of a nested
/// workflow must fit the slice its entry asked for. Checked per distinct
/// (workflow, slice), reported once per template.
fn check_capacity(
    program: &Program,
    id: WorkflowId,
    tasks: std::ops::Range<u32>,
    capacity: Capacity,
    inside: Option<&str>,
    seen: &mut HashSet<(WorkflowId, Capacity)>,
    diags: &mut Vec<report::Located>,
) {
    if !seen.insert((id, capacity)) {
        return;
    }
    let workflow = program.workflow(id);
    let mut reported = HashSet::new();
    let mut slices = Vec::new();
    // A run of tasks asks for the same: one check per run.
    for run in workflow.tasks.runs_in(tasks) {
        let task = run.first;
        let task_id = slurp_runtime::TaskId(run.start);
        if let Err(short) = capacity.fits(&task.request) {
            if reported.insert(task.template) {
                let template = workflow.template(task.template);
                let count: u64 = workflow
                    .tasks
                    .runs_in(workflow.tasks.of_template(task.template))
                    .filter(|r| capacity.fits(&r.first.request).is_err())
                    .map(|r| u64::from(r.len))
                    .sum();
                let others = if count > 1 {
                    format!(" (and {} more of its sweep)", count - 1)
                } else {
                    String::new()
                };
                let instance = match inside {
                    Some(entry) => format!("the slice of nested entry `{entry}` ({capacity})"),
                    None => format!("this instance ({capacity})"),
                };
                let resource = short.resource;
                diags.push(report::Located {
                    file: Some(template.source.file),
                    diagnostic: Diagnostic::new(
                        "slurp::exceeds_resources",
                        format!("task `{}`{others} can never run: it {short}", workflow.task_name(task_id)),
                    )
                    .label(Span { start: template.source.start, end: template.source.end }, format!("needs more {resource} than {instance}"))
                    .help(match inside {
                        Some(_) => "give the nested entry more resources, or ask for less in the child".to_owned(),
                        None => format!(
                            "ask for at most {} {}, or declare a bigger instance (`--cores`, `--gpus`, `--mem`, `--nodes`)",
                            match resource {
                                "cores" => amount("cores", capacity.cores_per_node as u64),
                                "gpus" => amount("gpus", capacity.gpus_per_node as u64),
                                "mem" => amount("mem", capacity.mem_per_node),
                                _ => amount("nodes", capacity.nodes as u64),
                            },
                            if resource == "nodes" { "in all" } else { "per node" }
                        ),
                    }),
                });
            }
            continue;
        }
        // A run's members nest the same workflow on the same slice: the
        // first one's check stands for all.
        if let Some(child) = task.nested {
            slices.push((
                child,
                capacity.slice(&task.request),
                workflow.task_name(task_id),
            ));
        }
    }
    for (child, slice, name) in slices {
        let all = 0..program.workflow(child).tasks.len() as u32;
        check_capacity(program, child, all, slice, Some(&name), seen, diags);
    }
}

/// Where submitted tasks go: the workflow of the live instance at `scope`
/// (`""` for the top level, `sub/` for a nested entry's), which owns
/// `capacity`.
#[derive(Debug, Clone, Copy)]
pub struct Instance<'a> {
    pub workflow: WorkflowId,
    pub scope: &'a str,
    pub capacity: Capacity,
}

/// What lowering submissions keeps between them: the sources read (the
/// run's files, then each submission), and each workflow's task names, so a
/// submission's `after=` is resolved without a walk over every task before.
#[derive(Debug, Default)]
pub struct Live {
    pub sources: Sources,
    names: std::collections::HashMap<WorkflowId, std::collections::HashMap<Box<str>, TemplateId>>,
}

impl Live {
    pub fn new(sources: Sources) -> Self {
        Live {
            sources,
            names: Default::default(),
        }
    }

    /// Lowers `text`, tasks submitted to a live instance (`slurp submit`),
    /// into the instance's workflow in a running `program`, after the
    /// tasks it has: the same language, checks and diagnostics as a file
    /// (`source` names the text in them; a name ending `.toml` reads it as
    /// a TOML spec), its `after=` free to name the workflow's tasks, each
    /// task checked against the instance's capacity (for a nested
    /// instance, its entry's slice). Tasks run in `opts.cwd` (the
    /// submitter's directory) unless they say otherwise; relative paths in
    /// the text start there too. On any mistake nothing is added.
    pub fn submit(
        &mut self,
        program: &mut Program,
        to: Instance<'_>,
        text: &str,
        source: &str,
        opts: &Options,
    ) -> Result<std::ops::Range<u32>, Failure> {
        let Instance {
            workflow,
            scope,
            capacity,
        } = to;
        let names = self.names.entry(workflow).or_insert_with(|| {
            let w = program.workflow(workflow);
            w.templates
                .iter()
                .enumerate()
                .filter(|(_, t)| {
                    matches!(
                        t.kind,
                        slurp_runtime::LineKind::Task | slurp_runtime::LineKind::Toml
                    )
                })
                .filter_map(|(i, t)| Some((t.name.clone()?, TemplateId(i as u32))))
                .collect()
        });
        let sources = &mut self.sources;
        let path = load::normalize(&opts.cwd.join(source));
        let file = sources.add(path, source.to_owned(), text.into());
        let mut lowerer = lower::Lowerer::new(sources, opts);
        lowerer.program = std::mem::take(program);
        let range = lowerer.extend_workflow(workflow, file, names);
        let mut diags = std::mem::take(&mut lowerer.diags);
        *program = std::mem::take(&mut lowerer.program);
        drop(lowerer);
        if let Some(range) = &range {
            let mut seen = HashSet::new();
            // A nested instance is its entry's slice.
            let inside = scope.strip_suffix('/');
            check_capacity(
                program,
                workflow,
                range.clone(),
                capacity,
                inside,
                &mut seen,
                &mut diags,
            );
            let w = &mut program.workflows[workflow.0 as usize];
            let first_template = if (range.start as usize) < w.tasks.len() {
                w.task(slurp_runtime::TaskId(range.start)).template.0 as usize
            } else {
                w.templates.len()
            };
            if !diags.is_empty() && !range.is_empty() {
                // Nothing half-added: the tasks that do not fit take the
                // rest of the submission with them.
                w.truncate(range.start as usize, first_template);
            } else if diags.is_empty() {
                for (i, t) in w.templates.iter().enumerate().skip(first_template) {
                    if let (
                        Some(name),
                        slurp_runtime::LineKind::Task | slurp_runtime::LineKind::Toml,
                    ) = (&t.name, t.kind)
                    {
                        names.insert(name.clone(), TemplateId(i as u32));
                    }
                }
            }
        }
        let known = program.files.len();
        program
            .files
            .extend(sources.iter().skip(known).map(|f| f.path.clone()));
        match range {
            Some(range) if diags.is_empty() => Ok(range),
            _ => {
                diags.sort_by_key(|l| l.diagnostic.primary_span().map_or(0, |s| s.start));
                Err(Failure::new(
                    format!("the tasks submitted ({source}) are not valid"),
                    diags,
                    sources,
                ))
            }
        }
    }
}
