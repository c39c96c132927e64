//! Entries → templates and tasks: the workflow IR.
//!
//! Per entry this stage applies defaults, compiles `{var}` placeholders once
//! into [`Text`], types every attribute (once when it is constant, per
//! instance when it uses a sweep variable), expands the sweep, recognises
//! nested entries and loads their workflows (recursively, each file once,
//! rejecting a file that nests itself). Dependencies are resolved by
//! [`crate::dag`] once every template of the workflow is known. A mistake
//! in a template is reported once, not once per instance.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use slurp_grammar::{Command, Diagnostic, Span, SweepValues, SweepVar};
use slurp_runtime::{
    Axis, CommandTemplate, Edit, Extras, FileId, LineKind, Piece, Program, Quote, Request, Slot,
    Source, Task, Template, TemplateId, Text, Values, Workflow, WorkflowId,
};

use crate::Options;
use crate::attrs::{self, KEYS};
use crate::dag::{self, DepSpec};
use crate::load::{
    Collector, Entry, EntryKind, EntrySink, SourcedAttr, display_path, normalize, read_file,
};
use crate::report::{Located, Sources};

/// Subcommands of slurp: `slurp check x` in a task is a plain command, not a
/// nested allocation.
///
/// The binary's tests check this list against its real subcommands.
pub const SUBCOMMANDS: &[&str] = &[
    "check",
    "cancel",
    "report",
    "sim",
    "policy",
    "jobspec",
    "run",
    "resume",
    "runs",
    "log",
    "status",
    "resources",
    "completions",
    "man",
    "help",
    "start",
    "submit",
    "wait",
    "watch",
    "close",
];

/// Nested workflows deeper than this are refused (the static recursion
/// check catches cycles; this bounds long acyclic chains).
pub const MAX_DEPTH: usize = 64;

/// What the lowering of one program produced besides the IR.
#[derive(Debug, Default)]
pub struct Notes {
    /// Lines that run through `/bin/sh -c`: file, line, why.
    pub shell_lines: Vec<(FileId, u32, String)>,
    /// Plain lines that start with a number, as a legacy line does, but are
    /// not one (`4 2 ./sim`): file, line, the program they run.
    pub almost_legacy: Vec<(FileId, u32, String)>,
}

pub(crate) struct Lowerer<'a> {
    pub sources: &'a mut Sources,
    pub diags: Vec<Located>,
    pub program: Program,
    pub notes: Notes,
    opts: &'a Options,
    /// Workflows already loaded, by absolute path.
    loaded: HashMap<PathBuf, WorkflowId>,
    /// The nesting chain being loaded: file and the line that nests the next.
    stack: Vec<(PathBuf, Option<(FileId, Span)>)>,
    total_tasks: u64,
    /// Past `--max-tasks` (said once): later entries are not lowered.
    over_limit: bool,
}

/// The workflow being lowered, fed entry by entry as its files are read.
struct Building<'b, 'a> {
    lowerer: &'b mut Lowerer<'a>,
    workflow: Workflow,
    deps: Vec<DepSpec>,
    nested: Vec<(TemplateId, Text, FileId, Span)>,
}

impl EntrySink for Building<'_, '_> {
    fn sources(&mut self) -> &mut Sources {
        self.lowerer.sources
    }

    fn diags(&mut self) -> &mut Vec<Located> {
        &mut self.lowerer.diags
    }

    fn cwd(&self) -> &Path {
        &self.lowerer.opts.cwd
    }

    fn entry(&mut self, entry: Entry) {
        self.lowerer
            .lower_entry(entry, &mut self.workflow, &mut self.deps, &mut self.nested);
    }

    fn full(&self) -> bool {
        self.lowerer.over_limit
    }
}

/// An attribute's value: known once, or per sweep instance.
enum Field<T> {
    Const(T),
    PerInstance {
        text: Text,
        file: FileId,
        span: Span,
        parse: fn(&str) -> Result<T, String>,
    },
}

/// A template's typed attributes.
struct Fields {
    ntasks: Field<u32>,
    cores: Field<u32>,
    gpus: Field<u32>,
    mem: Field<u64>,
    nodes: Field<u32>,
    time: Field<Option<u64>>,
    retries: Field<u32>,
}

impl<'a> Lowerer<'a> {
    pub fn new(sources: &'a mut Sources, opts: &'a Options) -> Self {
        Lowerer {
            sources,
            diags: Vec::new(),
            program: Program::default(),
            notes: Notes::default(),
            opts,
            loaded: HashMap::new(),
            stack: Vec::new(),
            total_tasks: 0,
            over_limit: false,
        }
    }

    fn error(&mut self, file: FileId, diagnostic: Diagnostic) {
        self.diags.push(Located {
            file: Some(file),
            diagnostic,
        });
    }

    /// Loads a workflow file and everything it nests. `origin` is the
    /// nested entry that names it (none for the top level).
    pub fn load_workflow(
        &mut self,
        path: &Path,
        origin: Option<(FileId, Span)>,
    ) -> Option<WorkflowId> {
        let absolute = if path == Path::new("-") {
            PathBuf::from("-")
        } else {
            normalize(&self.opts.cwd.join(path))
        };
        if let Some(pos) = self.stack.iter().position(|(p, _)| *p == absolute) {
            self.nested_recursion(pos, &absolute, origin);
            return None;
        }
        if let Some(&id) = self.loaded.get(&absolute) {
            return Some(id);
        }
        if self.stack.len() >= MAX_DEPTH {
            if let Some((file, span)) = origin {
                self.error(
                    file,
                    Diagnostic::new(
                        "slurp::nesting_too_deep",
                        format!("workflows nest more than {MAX_DEPTH} levels deep"),
                    )
                    .label(span, "this entry is too deep")
                    .help("flatten the workflow: every level is a child instance"),
                );
            }
            return None;
        }
        let file = read_file(
            &absolute,
            &self.opts.cwd,
            origin,
            self.sources,
            &mut self.diags,
        )?;
        let id = WorkflowId(self.program.workflows.len() as u32);
        self.program.workflows.push(Workflow::new(file));
        self.loaded.insert(absolute.clone(), id);
        self.stack.push((absolute.clone(), origin));

        let (mut workflow, deps) = self.read_entries(Workflow::new(file), file, &absolute);
        let mut diags = std::mem::take(&mut self.diags);
        dag::build(&mut workflow, deps, &mut diags);
        self.diags = diags;
        self.stack.pop();
        self.program.workflows[id.0 as usize] = workflow;
        Some(id)
    }

    /// Reads the entries of `file` (at `path`: a TOML spec or lines of the
    /// language) into `workflow`, after what it holds, and loads the
    /// workflows its nested entries name; the dependency specs of the new
    /// templates are for [`dag`].
    fn read_entries(
        &mut self,
        workflow: Workflow,
        file: FileId,
        path: &Path,
    ) -> (Workflow, Vec<DepSpec>) {
        let mut building = Building {
            lowerer: self,
            workflow,
            deps: Vec::new(),
            nested: Vec::new(),
        };
        if path.extension().is_some_and(|e| e == "toml") {
            let mut diags = std::mem::take(&mut building.lowerer.diags);
            let entries = crate::toml_spec::entries(file, building.lowerer.sources, &mut diags);
            building.lowerer.diags = diags;
            entries.into_iter().for_each(|entry| building.entry(entry));
        } else {
            Collector::default().collect(file, &mut building);
        }
        let Building {
            mut workflow,
            deps,
            nested,
            ..
        } = building;
        for (template, path_text, file, span) in nested {
            self.load_children(&mut workflow, template, &path_text, file, span);
        }
        (workflow, deps)
    }

    /// Lowers the entries of `file` into workflow `id`, after its tasks
    /// (a submission to a live instance): their `after=` may name the
    /// workflow's tasks; tasks that set no `cwd=` run in the options' cwd.
    /// Returns the new tasks, or `None` with the workflow as it was.
    pub fn extend_workflow(
        &mut self,
        id: WorkflowId,
        file: FileId,
        names: &HashMap<Box<str>, TemplateId>,
    ) -> Option<std::ops::Range<u32>> {
        let index = id.0 as usize;
        let workflow = std::mem::replace(&mut self.program.workflows[index], Workflow::new(file));
        let (tasks, templates) = (workflow.tasks.len(), workflow.templates.len());
        let errors = self.diags.len();
        let path = self.sources.get(file).path.clone();
        self.stack.push((path.clone(), None));
        let (mut workflow, deps) = self.read_entries(workflow, file, &path);
        if self.diags.len() == errors {
            let mut diags = std::mem::take(&mut self.diags);
            dag::extend(&mut workflow, tasks as u32, names, deps, &mut diags);
            self.diags = diags;
        }
        self.stack.pop();
        let ok = self.diags.len() == errors;
        if ok {
            // Where the submitter is, not where the instance started.
            let cwd = self.opts.cwd.to_string_lossy().into_owned();
            for template in &mut workflow.templates[templates..] {
                let extras = template.extras.get_or_insert_with(Default::default);
                extras.cwd = Some(match extras.cwd.take() {
                    None => Text::literal(&cwd),
                    Some(Text(mut pieces)) => {
                        let absolute =
                            matches!(pieces.first(), Some(Piece::Lit(l)) if l.starts_with('/'));
                        if !absolute {
                            pieces.insert(0, Piece::Lit(format!("{cwd}/").into()));
                        }
                        Text(pieces)
                    }
                });
            }
        } else {
            workflow.truncate(tasks, templates);
        }
        let end = workflow.tasks.len() as u32;
        self.program.workflows[index] = workflow;
        ok.then_some(tasks as u32..end)
    }

    fn nested_recursion(&mut self, pos: usize, absolute: &Path, origin: Option<(FileId, Span)>) {
        let cwd = &self.opts.cwd;
        let chain: Vec<String> = self.stack[pos..]
            .iter()
            .map(|(p, _)| display_path(p, cwd))
            .chain(std::iter::once(display_path(absolute, cwd)))
            .collect();
        if let Some((file, span)) = origin {
            self.error(
                file,
                Diagnostic::new(
                    "slurp::nested_recursion",
                    format!("nested workflows never end: {}", chain.join(" → ")),
                )
                .label(span, "nests a workflow that is already being nested")
                .help("a workflow may not nest itself, directly or through others"),
            );
        }
    }

    fn lower_entry(
        &mut self,
        entry: Entry,
        workflow: &mut Workflow,
        deps: &mut Vec<DepSpec>,
        nested: &mut Vec<(TemplateId, Text, FileId, Span)>,
    ) {
        let file = entry.file;
        let legacy = match entry.kind {
            EntryKind::Legacy {
                ncores,
                single_node,
            } => Some((ncores, single_node)),
            _ => None,
        };
        let (name, sweep, kind, substitute, toml_workflow) = match entry.kind {
            EntryKind::Task {
                name,
                name_span,
                sweep,
            } => (Some((name, name_span)), sweep, LineKind::Task, true, None),
            EntryKind::Toml {
                name,
                name_span,
                sweep,
                workflow,
            } => (
                Some((name, name_span)),
                sweep,
                LineKind::Toml,
                true,
                workflow,
            ),
            EntryKind::Legacy { .. } => (None, Vec::new(), LineKind::Legacy, false, None),
            EntryKind::Plain => {
                let first = entry.command.words.first().map_or("", |w| w.text.as_str());
                let digits = first.trim_start_matches(['+', '-']);
                if !digits.is_empty()
                    && digits.bytes().all(|b| b.is_ascii_digit())
                    && entry.command.words.len() > 1
                {
                    self.notes
                        .almost_legacy
                        .push((file, entry.line, first.to_owned()));
                }
                (None, Vec::new(), LineKind::Plain, false, None)
            }
        };
        let mut axes: Vec<Axis> = Vec::with_capacity(sweep.len());
        for var in &sweep {
            match self.axis(var, file) {
                Some(axis) => axes.push(axis),
                None => return,
            }
        }
        let var_names: Vec<&str> = axes.iter().map(|a| &*a.name).collect();
        let count = axes.iter().fold(1u128, |n, a| n * a.values.len() as u128);
        if self.over_limit {
            return;
        }
        let limit = self.opts.max_tasks.min(u64::from(u32::MAX));
        if count <= limit as u128 && self.total_tasks as u128 + count > limit as u128 {
            // Line by line, the workflow grew past the limit: said once,
            // and nothing after this is lowered.
            self.over_limit = true;
            self.error(
                file,
                Diagnostic::new(
                    "slurp::sweep_too_large",
                    format!(
                        "the workflow expands past the limit of {} tasks here ({} before this line)",
                        limit, self.total_tasks
                    ),
                )
                .label(entry.span, format!("{count} more"))
                .help("split the work into fewer, larger tasks, or raise the limit with `--max-tasks`"),
            );
            return;
        }
        if count > limit as u128 {
            let sweep_span = sweep_span(&sweep).unwrap_or(entry.span);
            self.error(
                file,
                Diagnostic::new(
                    "slurp::sweep_too_large",
                    format!("this sweep expands to {count} tasks, over the limit of {limit}"),
                )
                .label(sweep_span, format!("{} = {count} tasks", sweep_product(&axes)))
                .help("split the work into fewer, larger tasks, or raise the limit with `--max-tasks`"),
            );
            return;
        }
        let mut errors = false;

        // Attributes: defaults first, the line's own win; a key twice on
        // one line is a mistake, not an override.
        let mut by_key: Vec<(&str, &SourcedAttr)> = Vec::new();
        for sourced in &entry.attrs {
            let key = sourced.attr.key.node.as_str();
            if !KEYS.contains(&key) {
                let mut d = Diagnostic::new(
                    "slurp::unknown_attribute",
                    format!("unknown attribute `{key}`"),
                )
                .label(sourced.attr.key.span, "not an attribute slurp knows");
                d = match attrs::did_you_mean(key, KEYS.iter().copied()) {
                    Some(near) => d.help(format!("did you mean `{near}`?")),
                    None => d.help(format!("attributes are: {}", KEYS.join(", "))),
                };
                self.error(sourced.file, d);
                errors = true;
                continue;
            }
            if let Some((_, first)) = by_key
                .iter()
                .find(|(k, a)| *k == key && !a.from_defaults && key != "env")
                && !sourced.from_defaults
            {
                self.error(
                    sourced.file,
                    Diagnostic::new(
                        "slurp::duplicate_attribute",
                        format!("`{key}` is given twice"),
                    )
                    .label(sourced.attr.key.span, "given again here")
                    .label(first.attr.key.span, "first given here"),
                );
                errors = true;
                continue;
            }
            if key != "env" {
                by_key.retain(|(k, _)| *k != key);
            }
            by_key.push((key, sourced));
        }
        // A legacy line's shape is its own: NCORES copies of one core.
        if kind == LineKind::Legacy {
            by_key.retain(|(k, _)| !matches!(*k, "ntasks" | "cores" | "nodes"));
        }
        let get = |key: &str| {
            by_key
                .iter()
                .rev()
                .find(|(k, _)| *k == key)
                .map(|(_, a)| *a)
        };

        // Text fields.
        let compile = |this: &mut Self, attr: &SourcedAttr| -> Option<Text> {
            match compile_text(
                &attr.attr.value.node,
                attr.attr.value.span,
                &var_names,
                substitute,
            ) {
                Ok(text) => Some(text),
                Err(d) => {
                    this.error(attr.file, d);
                    None
                }
            }
        };
        let mut env = Vec::new();
        for (_, attr) in by_key.iter().filter(|(k, _)| *k == "env") {
            match attrs::parse_env(&attr.attr.value.node) {
                Ok(vars) => {
                    for (name, value) in vars {
                        let span = attr.attr.value.span;
                        match compile_text(value, span, &var_names, substitute) {
                            Ok(text) => {
                                env.retain(|(n, _): &(Box<str>, Text)| &**n != name);
                                env.push((name.into(), text));
                            }
                            Err(d) => {
                                self.error(attr.file, d);
                                errors = true;
                            }
                        }
                    }
                }
                Err(message) => {
                    self.error(
                        attr.file,
                        Diagnostic::new("slurp::bad_attribute", format!("bad `env`: {message}"))
                            .label(
                                attr.attr.value.span,
                                "expected `NAME=value[,NAME=value...]`",
                            )
                            .help("for example `env=OMP_NUM_THREADS=4,MODE=fast`"),
                    );
                    errors = true;
                }
            }
        }
        let cwd = get("cwd").and_then(|a| compile(self, a));
        let output = get("output").and_then(|a| compile(self, a));
        let policy = get("policy").and_then(|a| match attrs::parse_policy(&a.attr.value.node) {
            Ok(()) => Some(Box::<str>::from(a.attr.value.node.as_str())),
            Err(message) => {
                self.error(
                    a.file,
                    Diagnostic::new("slurp::bad_attribute", message)
                        .label(a.attr.value.span, "not a policy")
                        .help(format!(
                            "policies are: {}, or `fair:MODEL.onnx`",
                            attrs::POLICIES.join(", ")
                        )),
                );
                None
            }
        });

        // Typed fields.
        let fields = {
            let field =
                |this: &mut Self, key: &str, default, parse: fn(&str) -> Result<_, String>| {
                    this.field(get(key), key, default, parse, &var_names, substitute)
                };
            let ntasks = match legacy {
                Some((ncores, _)) => Some(Field::Const(ncores)),
                None => field(self, "ntasks", 1, |t| attrs::parse_count(t, 1)),
            };
            let nodes = match legacy {
                Some((_, single_node)) => Some(Field::Const(u32::from(single_node))),
                None => field(self, "nodes", 0, |t| attrs::parse_count(t, 1)),
            };
            let cores = field(self, "cores", 1, |t| attrs::parse_count(t, 1));
            let gpus = field(self, "gpus", 0, |t| attrs::parse_count(t, 0));
            let retries = field(self, "retries", 0, |t| attrs::parse_count(t, 0));
            let mem = self.field(
                get("mem"),
                "mem",
                0,
                attrs::parse_mem,
                &var_names,
                substitute,
            );
            let time = self.field(
                get("time"),
                "time",
                None,
                attrs::parse_duration,
                &var_names,
                substitute,
            );
            match (ntasks, cores, gpus, mem, nodes, time, retries) {
                (
                    Some(ntasks),
                    Some(cores),
                    Some(gpus),
                    Some(mem),
                    Some(nodes),
                    Some(time),
                    Some(retries),
                ) => Some(Fields {
                    ntasks,
                    cores,
                    gpus,
                    mem,
                    nodes,
                    time,
                    retries,
                }),
                _ => None,
            }
        };

        // The command, and whether it is a nested entry.
        let command = match self.command_template(&entry.command, file, &var_names, substitute) {
            Some(c) => c,
            None => return,
        };
        let nested_path = match &toml_workflow {
            Some((path, span)) => match compile_text(path, *span, &var_names, substitute) {
                Ok(text) => Some((text, *span)),
                Err(d) => {
                    self.error(file, d);
                    return;
                }
            },
            None => nested_file(&entry.command, &command),
        };
        if policy.is_some()
            && nested_path.is_none()
            && let Some(a) = get("policy").filter(|a| !a.from_defaults)
        {
            self.error(
                a.file,
                Diagnostic::new("slurp::bad_attribute", "`policy` only applies to nested entries")
                    .label(a.attr.key.span, "this task is not a nested workflow")
                    .help("set the policy of the whole run with `--policy`; `policy=` chooses a nested instance's"),
            );
            errors = true;
        }
        if let Some(reason) = &entry.command.shell {
            let mut why = reason.what.clone();
            // What `slurp check` says of the line's placeholders.
            let words = command.words();
            let pieces = || words.iter().flat_map(|w| &w.0);
            if pieces().any(|p| matches!(p, Piece::Quoted(..))) {
                why.push_str("; values quoted for the shell");
            }
            if pieces().any(|p| matches!(p, Piece::Var(_))) {
                why.push_str("; `{var:raw}` pasted as shell text");
            }
            self.notes.shell_lines.push((file, entry.line, why));
        }
        // `pmi=`: PMI-1 for the copies (the default when there are
        // several), or none.
        let pmi = match get("pmi") {
            None => None,
            Some(a) => match a.attr.value.node.as_str() {
                "simple" => Some(true),
                "none" => Some(false),
                other => {
                    self.error(
                        a.file,
                        Diagnostic::new("slurp::bad_attribute", format!("unknown PMI `{other}`"))
                            .label(a.attr.value.span, "not `simple` or `none`")
                            .help("`pmi=simple` (the default for a task of several copies) serves PMI-1 to its copies; `pmi=none` serves none"),
                    );
                    errors = true;
                    None
                }
            },
        };
        if let (
            Some(a),
            Some(Fields {
                ntasks: Field::Const(1),
                ..
            }),
        ) = (get("pmi"), &fields)
            && !a.from_defaults
        {
            self.error(
                a.file,
                Diagnostic::new("slurp::bad_attribute", "`pmi` applies to a task of several copies")
                    .label(a.attr.key.span, "this task runs one copy")
                    .help("give it `ntasks=N` for N ranks that find each other through PMI, or drop `pmi=`"),
            );
            errors = true;
        }
        // `launcher=NAME`: from the user's, the site's or slurp's files.
        let launcher = match get("launcher") {
            None => None,
            Some(a) => match crate::launchers::find(&a.attr.value.node) {
                Ok(launcher) => Some(Box::new(launcher)),
                Err(why) => {
                    let name = &a.attr.value.node;
                    let known = crate::launchers::names();
                    let help = match attrs::did_you_mean(name, known.iter().map(String::as_str)) {
                        Some(near) => format!("did you mean `{near}`?"),
                        None => format!(
                            "launchers are {}; a file NAME.toml in $SLURP_LAUNCHERS, ~/.config/slurp/launchers or /etc/slurp/launchers adds one",
                            known.join(", ")
                        ),
                    };
                    self.error(
                        a.file,
                        Diagnostic::new("slurp::unknown_launcher", why)
                            .label(a.attr.value.span, "not a launcher found here")
                            .help(help),
                    );
                    errors = true;
                    None
                }
            },
        };
        if launcher.is_some()
            && let Some(a) = get("pmi").filter(|a| a.attr.value.node == "simple")
        {
            self.error(
                a.file,
                Diagnostic::new(
                    "slurp::bad_attribute",
                    "a launcher serves PMI to the copies it starts",
                )
                .label(a.attr.value.span, "slurp would serve it too")
                .help(
                    "drop `pmi=simple`: the launcher (mpirun, srun, flux run) wires the ranks up",
                ),
            );
            errors = true;
        }
        let (Some(fields), false) = (fields, errors) else {
            return;
        };

        let template_id = TemplateId(workflow.templates.len() as u32);
        let name_text: Option<Box<str>> = match &name {
            Some((name, _)) => Some(name.as_str().into()),
            None if file == workflow.file => None,
            None => Some({
                let stem = self
                    .sources
                    .get(file)
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned());
                format!("{}@{}", stem.unwrap_or_default(), entry.line).into()
            }),
        };
        let name_span = name.as_ref().map_or(entry.span, |(_, span)| *span);
        let template = Template {
            name: name_text,
            kind,
            source: Source {
                file,
                line: entry.line,
                start: entry.span.start,
                end: entry.span.end,
            },
            sweep: axes,
            command,
            extras: Extras {
                env,
                cwd,
                output,
                policy,
                pmi,
                launcher,
            }
            .boxed(),
        };
        let first_task = workflow.tasks.len();
        if !self.expand(&template, template_id, &fields, workflow) {
            workflow.tasks.truncate(first_task);
            return;
        }
        self.total_tasks += template.len();
        deps.push(DepSpec {
            template: template_id,
            file,
            name_span,
            named: matches!(kind, LineKind::Task | LineKind::Toml),
            after: get("after").map(|a| dag::After {
                file: a.file,
                text: a.attr.value.node.clone(),
                span: a.attr.value.span,
                substitute,
            }),
        });
        if let Some((path, span)) = nested_path {
            nested.push((template_id, path, file, span));
        }
        workflow.templates.push(template);
    }

    /// A sweep variable's values; `lines(FILE)` read (FILE relative to the
    /// file that names it, as an include) and `glob(PATTERN)` matched (from
    /// where slurp runs, where the tasks run, the paths as matched).
    fn axis(&mut self, var: &SweepVar, file: FileId) -> Option<Axis> {
        let span = var.values.span;
        let values = match &var.values.node {
            SweepValues::Range { start, end, step } => Values::Range {
                start: *start,
                end: *end,
                step: *step,
            },
            SweepValues::List(values) => {
                Values::List(values.iter().map(|v| v.as_str().into()).collect())
            }
            SweepValues::Lines(path) => {
                let base = self
                    .sources
                    .get(file)
                    .path
                    .parent()
                    .filter(|p| !p.as_os_str().is_empty())
                    .map_or_else(|| self.opts.cwd.clone(), Path::to_path_buf);
                match crate::parallel::read_lines(Path::new(path), &base) {
                    Ok(values) if values.is_empty() => {
                        self.error(
                            file,
                            Diagnostic::new("slurp::bad_sweep", format!("`{path}` has no lines"))
                                .label(span, "this sweep has no values")
                                .help("give the file one value per line"),
                        );
                        return None;
                    }
                    Ok(values) => Values::List(values),
                    Err(d) => {
                        self.error(file, d.label(span, "read here"));
                        return None;
                    }
                }
            }
            SweepValues::Glob(pattern) => match glob_values(pattern, &self.opts.cwd) {
                Ok(values) => Values::List(values),
                Err((message, help)) => {
                    self.error(
                        file,
                        Diagnostic::new("slurp::bad_sweep", message)
                            .label(span, "matched from where slurp runs")
                            .help(help),
                    );
                    return None;
                }
            },
        };
        Some(Axis {
            name: var.name.node.as_str().into(),
            values,
        })
    }

    /// Types one attribute: parsed once when constant, per instance when it
    /// uses a sweep variable. `None` after reporting a mistake.
    fn field<T>(
        &mut self,
        attr: Option<&SourcedAttr>,
        key: &str,
        default: T,
        parse: fn(&str) -> Result<T, String>,
        vars: &[&str],
        substitute: bool,
    ) -> Option<Field<T>> {
        let Some(attr) = attr else {
            return Some(Field::Const(default));
        };
        let text = match compile_text(
            &attr.attr.value.node,
            attr.attr.value.span,
            vars,
            substitute,
        ) {
            Ok(text) => text,
            Err(d) => {
                self.error(attr.file, d);
                return None;
            }
        };
        if !text.is_constant() {
            return Some(Field::PerInstance {
                text,
                file: attr.file,
                span: attr.attr.value.span,
                parse,
            });
        }
        match parse(&attr.attr.value.node) {
            Ok(value) => Some(Field::Const(value)),
            Err(message) => {
                self.error(attr.file, bad_value(key, &message, attr.attr.value.span));
                None
            }
        }
    }

    /// Appends the template's tasks; false after reporting a bad value.
    fn expand(
        &mut self,
        template: &Template,
        id: TemplateId,
        f: &Fields,
        workflow: &mut Workflow,
    ) -> bool {
        let all_const = [&f.ntasks, &f.cores, &f.gpus, &f.nodes, &f.retries]
            .iter()
            .all(|x| matches!(x, Field::Const(_)))
            && matches!(f.mem, Field::Const(_))
            && matches!(f.time, Field::Const(_));
        let len = template.len() as u32;
        if all_const {
            let task = Task {
                template: id,
                index: 0,
                request: Request {
                    ntasks: constant(&f.ntasks),
                    cores: constant(&f.cores),
                    gpus: constant(&f.gpus),
                    mem: constant(&f.mem),
                    nodes: constant(&f.nodes),
                },
                time_limit: constant(&f.time).and_then(std::num::NonZeroU64::new),
                retries: constant(&f.retries),
                nested: None,
            };
            workflow.tasks.push_members(task, len);
            return true;
        }
        for index in 0..len {
            let task = (|| {
                Some(Task {
                    template: id,
                    index,
                    request: Request {
                        ntasks: self.value(&f.ntasks, "ntasks", template, index)?,
                        cores: self.value(&f.cores, "cores", template, index)?,
                        gpus: self.value(&f.gpus, "gpus", template, index)?,
                        mem: self.value(&f.mem, "mem", template, index)?,
                        nodes: self.value(&f.nodes, "nodes", template, index)?,
                    },
                    time_limit: self
                        .value(&f.time, "time", template, index)?
                        .and_then(std::num::NonZeroU64::new),
                    retries: self.value(&f.retries, "retries", template, index)?,
                    nested: None,
                })
            })();
            match task {
                Some(task) => workflow.tasks.push(task),
                None => return false,
            }
        }
        true
    }

    fn value<T: Clone>(
        &mut self,
        field: &Field<T>,
        key: &str,
        template: &Template,
        index: u32,
    ) -> Option<T> {
        match field {
            Field::Const(v) => Some(v.clone()),
            Field::PerInstance {
                text,
                file,
                span,
                parse,
            } => {
                let rendered = template.render(text, index);
                match parse(&rendered) {
                    Ok(v) => Some(v),
                    Err(message) => {
                        let mut name = template.name();
                        name.push('[');
                        for (i, (axis, p)) in template
                            .sweep
                            .iter()
                            .zip(template.positions(index))
                            .enumerate()
                        {
                            if i > 0 {
                                name.push(',');
                            }
                            axis.values.value(p, &mut name);
                        }
                        name.push(']');
                        let d = bad_value(key, &message, *span);
                        let d = Diagnostic {
                            message: format!(
                                "{} (in task `{name}`, where it is `{rendered}`)",
                                d.message
                            ),
                            ..d
                        };
                        self.error(*file, d);
                        None
                    }
                }
            }
        }
    }

    fn command_template(
        &mut self,
        command: &Command,
        file: FileId,
        vars: &[&str],
        substitute: bool,
    ) -> Option<CommandTemplate> {
        if !substitute {
            // Plain and legacy lines mean their words literally.
            return Some(match &command.shell {
                Some(_) => CommandTemplate::literal(
                    [command.shell_text(&self.sources.get(file).text).as_str()],
                    true,
                ),
                None => {
                    CommandTemplate::literal(command.words.iter().map(|w| w.text.as_str()), false)
                }
            });
        }
        let mut words = Vec::new();
        let mut ok = true;
        if command.shell.is_some() {
            let text = command.shell_text(&self.sources.get(file).text);
            match compile_shell(&text, command.span, vars) {
                Ok(t) => words.push(t),
                Err(d) => {
                    self.error(file, d);
                    ok = false;
                }
            }
        } else {
            for word in &command.words {
                match compile_text(&word.text, word.span, vars, substitute) {
                    Ok(t) => words.push(t),
                    Err(d) => {
                        self.error(file, d);
                        ok = false;
                    }
                }
            }
        }
        ok.then(|| CommandTemplate::new(words, command.shell.is_some()))
    }

    /// Loads the child workflow(s) of a nested template and points its
    /// tasks at them. The file argument is made absolute, so the command
    /// works from any directory (a backend's job runs elsewhere).
    fn load_children(
        &mut self,
        workflow: &mut Workflow,
        template: TemplateId,
        path: &Text,
        file: FileId,
        span: Span,
    ) {
        let base = self
            .sources
            .get(file)
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| self.opts.cwd.clone());
        let t = &workflow.templates[template.0 as usize];
        let mut by_path: HashMap<String, Option<WorkflowId>> = HashMap::new();
        let ids = workflow.tasks.of_template(template);
        workflow.tasks.update(ids, |task| {
            let rendered = t.render(path, task.index);
            let child = match by_path.get(&rendered) {
                Some(child) => *child,
                None => {
                    let child = self.load_workflow(&base.join(&rendered), Some((file, span)));
                    by_path.insert(rendered, child);
                    child
                }
            };
            Task {
                nested: child,
                ..task
            }
        });
        // Rewrite the file word to the absolute path(s) loaded.
        let t = &mut workflow.templates[template.0 as usize];
        let mut words = t.command.words();
        if let Some(word) = words.iter_mut().find(|w| **w == *path) {
            let mut pieces = vec![Piece::Lit(format!("{}/", base.display()).into())];
            if path_is_absolute(path) {
                pieces.clear();
            }
            pieces.extend(path.0.iter().cloned());
            *word = Text(pieces);
        }
        // `flux slurp FILE` (the proof of concept's spelling) is `slurp FILE`.
        if words.len() > 1
            && words[0] == Text::literal("flux")
            && words[1] == Text::literal("slurp")
        {
            words.remove(0);
        }
        t.command = CommandTemplate::new(words, t.command.shell);
    }
}

fn path_is_absolute(path: &Text) -> bool {
    matches!(path.0.first(), Some(Piece::Lit(s)) if s.starts_with('/'))
}

fn constant<T: Clone>(field: &Field<T>) -> T {
    match field {
        Field::Const(v) => v.clone(),
        Field::PerInstance { .. } => unreachable!("checked constant before"),
    }
}

fn bad_value(key: &str, message: &str, span: Span) -> Diagnostic {
    let (code, expected, help) = match key {
        "mem" => (
            "slurp::bad_size",
            "expected a size such as `512M` or `2G`",
            "sizes take a unit: K, M, G or T (binary, so 1G = 1024M)",
        ),
        "time" => (
            "slurp::bad_duration",
            "expected a duration such as `90s`, `10m`, `1h30m` or `1:30:00`",
            "durations take a unit (s, m, h, d) or are written H:MM:SS; `0` means no limit",
        ),
        "ntasks" | "cores" | "nodes" => (
            "slurp::bad_number",
            "expected a whole number, 1 or more",
            "counts are whole numbers such as `4`",
        ),
        _ => (
            "slurp::bad_number",
            "expected a whole number",
            "counts are whole numbers such as `2`",
        ),
    };
    Diagnostic::new(code, format!("bad `{key}`: {message}"))
        .label(span, expected)
        .help(help)
}

/// The paths matching `pattern`, sorted, relative to `cwd` when the
/// pattern is; an error (message, help) when none match.
fn glob_values(pattern: &str, cwd: &Path) -> Result<Vec<Box<str>>, (String, String)> {
    let relative = !pattern.starts_with('/');
    let full = if relative {
        format!(
            "{}/{pattern}",
            glob::Pattern::escape(&cwd.to_string_lossy())
        )
    } else {
        pattern.to_owned()
    };
    let paths = glob::glob(&full).map_err(|e| {
        (
            format!("`{pattern}` is not a glob pattern: {}", e.msg),
            "patterns use `*`, `?`, `[abc]` and `**` for any depth".to_owned(),
        )
    })?;
    let mut values = Vec::new();
    for path in paths.flatten() {
        let shown = if relative {
            path.strip_prefix(cwd).unwrap_or(&path).to_path_buf()
        } else {
            path
        };
        match shown.to_str() {
            Some(text) => values.push(Box::from(text)),
            None => {
                return Err((
                    format!(
                        "`{}` (matched by `{pattern}`) is not UTF-8 text",
                        shown.display()
                    ),
                    "slurp's values are text; rename the file".to_owned(),
                ));
            }
        }
    }
    if values.is_empty() {
        return Err((
            format!("`{pattern}` matches no path"),
            format!("it is matched from {}, where slurp runs", cwd.display()),
        ));
    }
    values.sort();
    Ok(values)
}

fn sweep_span(sweep: &[SweepVar]) -> Option<Span> {
    let first = sweep.first()?;
    let last = sweep.last()?;
    Some(Span {
        start: first.name.span.start,
        end: last.values.span.end,
    })
}

fn sweep_product(axes: &[Axis]) -> String {
    axes.iter()
        .map(|a| a.values.len().to_string())
        .collect::<Vec<_>>()
        .join(" × ")
}

/// The file of a nested entry: `slurp FILE [ARGS]` or `flux slurp FILE`,
/// exec'd (not through the shell), with FILE the first non-option word.
fn nested_file(command: &Command, template: &CommandTemplate) -> Option<(Text, Span)> {
    let texts = template.words();
    if command.shell.is_some() {
        return None;
    }
    let words = &command.words;
    let start = match words.first().map(|w| w.text.as_str()) {
        Some(first) if Path::new(first).file_name().is_some_and(|n| n == "slurp") => 1,
        Some("flux") if words.get(1).is_some_and(|w| w.text == "slurp") => 2,
        _ => return None,
    };
    // `slurp -- CMD ::: …` (a command line, not a file) runs as a process
    // of its own, a slurp inside the task's slice.
    if words[start..]
        .iter()
        .any(|w| w.text == "--" || w.text.starts_with(":::"))
    {
        return None;
    }
    let (offset, word) = words
        .iter()
        .enumerate()
        .skip(start)
        .find(|(_, w)| !w.text.starts_with('-'))?;
    if SUBCOMMANDS.contains(&word.text.as_str()) {
        return None;
    }
    Some((texts[offset].clone(), word.span))
}

/// Splits text into literal pieces and placeholders: `{var}` for a sweep
/// variable (`{var.}`, `{var/}`, `{var//}`, `{var/.}` edit it as a path),
/// `{#}` for the instance's 1-based index, `{{`/`}}` for literal braces.
/// Any other brace text (`{}`, `${HOME}`, `{print $1}`) is literal.
/// Without `substitute` (plain and legacy lines) the text is kept as is.
pub(crate) fn compile_text(
    text: &str,
    span: Span,
    vars: &[&str],
    substitute: bool,
) -> Result<Text, Diagnostic> {
    if !substitute {
        return Ok(Text::literal(text));
    }
    compile(text, span, Dialect::Sweep(vars), None)
}

/// A shell line's text: its placeholders are quoted for `/bin/sh` where
/// they stand (`{x:raw}` is pasted as it is).
fn compile_shell(text: &str, span: Span, vars: &[&str]) -> Result<Text, Diagnostic> {
    compile(
        text,
        span,
        Dialect::Sweep(vars),
        Some(&mut ShellQuotes::default()),
    )
}

/// Where the shell is in a line, read as far as it has been: inside which
/// quotes, and inside which command substitutions (`$(...)`, backquotes),
/// each of which starts unquoted again.
#[derive(Debug, Default)]
pub(crate) struct ShellQuotes {
    /// The quote of each open level; the last is the current one.
    levels: Vec<(Quote, Option<u8>)>,
    escaped: bool,
    dollar: bool,
}

impl ShellQuotes {
    fn now(&self) -> Quote {
        self.levels.last().map_or(Quote::Bare, |l| l.0)
    }

    fn set(&mut self, quote: Quote) {
        match self.levels.last_mut() {
            Some(level) => level.0 = quote,
            None => self.levels.push((quote, None)),
        }
    }

    fn feed(&mut self, text: &str) {
        for b in text.bytes() {
            let dollar = std::mem::take(&mut self.dollar);
            if std::mem::take(&mut self.escaped) {
                continue;
            }
            let closes = self.levels.last().and_then(|l| l.1);
            match (self.now(), b) {
                (Quote::Single, b'\'') => self.set(Quote::Bare),
                (Quote::Single, _) => {}
                (_, b'\\') => self.escaped = true,
                (Quote::Bare, b'\'') => self.set(Quote::Single),
                (Quote::Bare, b'"') => self.set(Quote::Double),
                (Quote::Double, b'"') => self.set(Quote::Bare),
                (_, b'$') => self.dollar = true,
                (_, b'(') if dollar => self.levels.push((Quote::Bare, Some(b')'))),
                (Quote::Bare, b')') if closes == Some(b')') => {
                    self.levels.pop();
                }
                (Quote::Bare, b'`') if closes == Some(b'`') => {
                    self.levels.pop();
                }
                (_, b'`') => self.levels.push((Quote::Bare, Some(b'`'))),
                _ => {}
            }
        }
    }
}

/// Which placeholders a text has.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dialect<'v> {
    /// A task line's, naming its sweep variables.
    Sweep(&'v [&'v str]),
    /// GNU parallel's, over `columns` input sources: `{}` (every source's
    /// value), `{N}` (source N's), each with the path edits (`{.}`,
    /// `{2/.}`), `{#}` and `{%}`.
    Parallel { columns: u16 },
}

/// What one placeholder stands for.
enum Hole {
    Var {
        slot: Slot,
        raw: bool,
    },
    Index,
    JobSlot,
    /// Every column, each edited, separated by spaces.
    All(Edit),
}

impl Dialect<'_> {
    /// What `{inner}` is: a placeholder, literal text (`None`), or a
    /// mistake, told at `at`.
    fn hole(self, inner: &str, shell: bool, at: Span) -> Result<Option<Hole>, Diagnostic> {
        if inner == "#" {
            return Ok(Some(Hole::Index));
        }
        match self {
            Dialect::Sweep(vars) => {
                let (name, raw) = match inner.strip_suffix(":raw") {
                    Some(name) if shell => (name, true),
                    _ => (inner, false),
                };
                let var = |name: &str| vars.iter().position(|v| *v == name);
                let at_var = |edit: Edit, column: usize| {
                    Ok(Some(Hole::Var {
                        slot: Slot {
                            column: column as u16,
                            edit,
                        },
                        raw,
                    }))
                };
                if let Some(column) = var(name) {
                    return at_var(Edit::None, column);
                }
                for suffix in Edit::SUFFIXES {
                    if let Some(base) = name.strip_suffix(suffix)
                        && slurp_grammar::is_identifier(base)
                    {
                        let edit = Edit::from_suffix(suffix).unwrap_or(Edit::None);
                        return match var(base) {
                            Some(column) => at_var(edit, column),
                            None => Err(unknown_variable(base, at, vars)),
                        };
                    }
                }
                if slurp_grammar::is_identifier(name) {
                    return Err(unknown_variable(name, at, vars));
                }
                Ok(None)
            }
            Dialect::Parallel { columns } => {
                if inner == "%" {
                    return Ok(Some(Hole::JobSlot));
                }
                if let Some(edit) = Edit::from_suffix(inner) {
                    return Ok(Some(Hole::All(edit)));
                }
                let digits =
                    inner.len() - inner.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                let (number, suffix) = inner.split_at(digits);
                let (Ok(n), Some(edit)) = (number.parse::<u32>(), Edit::from_suffix(suffix)) else {
                    return Ok(None);
                };
                if n == 0 || n > columns as u32 {
                    let sources = match columns {
                        1 => "1 input source".to_owned(),
                        n => format!("{n} input sources"),
                    };
                    return Err(Diagnostic::new(
                        "slurp::unknown_variable",
                        format!("`{{{inner}}}` names input source {n}, but there {} {sources}", if columns == 1 { "is" } else { "are" }),
                    )
                    .label(at, format!("sources are numbered 1 to {columns}"))
                    .help("each `:::`, `::::` or `-a FILE` on the command line is one input source, counted from 1"));
                }
                Ok(Some(Hole::Var {
                    slot: Slot {
                        column: (n - 1) as u16,
                        edit,
                    },
                    raw: false,
                }))
            }
        }
    }

    fn columns(self) -> u16 {
        match self {
            Dialect::Sweep(vars) => vars.len() as u16,
            Dialect::Parallel { columns } => columns,
        }
    }
}

pub(crate) fn compile(
    text: &str,
    span: Span,
    dialect: Dialect,
    mut shell: Option<&mut ShellQuotes>,
) -> Result<Text, Diagnostic> {
    let sweep = matches!(dialect, Dialect::Sweep(_));
    if !text.contains(['{', '}']) {
        return Ok(Text::literal(text));
    }
    let mut pieces = Vec::new();
    let mut lit = String::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' if sweep && bytes.get(i + 1) == Some(&b'{') => {
                lit.push('{');
                i += 2;
            }
            b'}' if sweep && bytes.get(i + 1) == Some(&b'}') => {
                lit.push('}');
                i += 2;
            }
            b'{' if i == 0 || bytes[i - 1] != b'$' => {
                let close = text[i + 1..].find('}').map(|c| i + 1 + c);
                let hole = match close {
                    Some(close) => {
                        // The placeholder's own span when the text is the
                        // source text; else the whole value.
                        let at = if span.len() == text.len() {
                            span.sub(i, close + 1)
                        } else {
                            span
                        };
                        dialect.hole(&text[i + 1..close], shell.is_some(), at)?
                    }
                    None => None,
                };
                let (Some(hole), Some(close)) = (hole, close) else {
                    lit.push('{');
                    if let Some(quotes) = shell.as_deref_mut() {
                        quotes.feed("{");
                    }
                    i += 1;
                    continue;
                };
                flush(&mut lit, &mut pieces);
                let quote = shell.as_deref().map(ShellQuotes::now);
                let value = |slot: Slot, raw: bool| match quote {
                    Some(quote) if !raw => Piece::Quoted(slot, quote),
                    _ => Piece::Var(slot),
                };
                match hole {
                    Hole::Index => pieces.push(Piece::Index),
                    Hole::JobSlot => pieces.push(Piece::JobSlot),
                    Hole::Var { slot, raw } => pieces.push(value(slot, raw)),
                    Hole::All(edit) => {
                        for column in 0..dialect.columns() {
                            if column > 0 {
                                pieces.push(Piece::Lit(" ".into()));
                            }
                            pieces.push(value(Slot { column, edit }, false));
                        }
                    }
                }
                i = close + 1;
            }
            _ => {
                // Past the whole character at `i` (it may be several
                // bytes: `é}`), then to the next brace.
                let after = i + text[i..].chars().next().map_or(1, char::len_utf8);
                let next = text[after..]
                    .find(['{', '}'])
                    .map_or(text.len(), |n| after + n);
                lit.push_str(&text[i..next]);
                if let Some(quotes) = shell.as_deref_mut() {
                    quotes.feed(&text[i..next]);
                }
                i = next;
            }
        }
    }
    flush(&mut lit, &mut pieces);
    Ok(Text(pieces))
}

fn unknown_variable(name: &str, at: Span, vars: &[&str]) -> Diagnostic {
    let d = Diagnostic::new(
        "slurp::unknown_variable",
        format!("unknown variable `{{{name}}}`"),
    )
    .label(
        at,
        if vars.is_empty() {
            "this line has no sweep".to_owned()
        } else {
            format!("not one of {}", vars.join(", "))
        },
    );
    match attrs::did_you_mean(name, vars.iter().copied()) {
        Some(near) => d.help(format!(
            "did you mean `{{{near}}}`? (write `{{{{{name}}}}}` for literal braces)"
        )),
        None => d.help(format!(
            "placeholders name sweep variables, as `task t[{name}=1..3]: echo {{{name}}}`; write `{{{{{name}}}}}` for literal braces"
        )),
    }
}

fn flush(lit: &mut String, pieces: &mut Vec<Piece>) {
    if !lit.is_empty() {
        pieces.push(Piece::Lit(std::mem::take(lit).into()));
    }
}

/// The tasks of one template: contiguous, in sweep order.
pub(crate) fn tasks_of(workflow: &Workflow, template: TemplateId) -> std::ops::Range<u32> {
    workflow.tasks.of_template(template)
}
