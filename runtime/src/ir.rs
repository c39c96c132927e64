//! The workflow IR: what the interpreter hands the runtime.
//!
//! Plain data, checked and complete: every dependency resolved, every
//! resource request known to fit the instance, every nested workflow loaded.
//! The runtime never sees source text.
//!
//! It is compact by design. A sweep line becomes one [`Template`] plus one
//! small [`Task`] per instance (template, sweep index, concrete request);
//! names, argv, environment and the jobspec are rendered from the template
//! on demand. A million tasks so cost tens of megabytes, not the gigabyte
//! that a million stored jobspecs would.

use std::fmt::Write as _;
use std::path::PathBuf;

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

/// A task of one workflow; also its node index in [`Workflow::graph`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TaskId(pub u32);

/// A template (one source line) of one workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TemplateId(pub u32);

/// A workflow of a [`Program`]; 0 is the top level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct WorkflowId(pub u32);

/// A source file the program read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct FileId(pub u32);

/// A whole checked program: the top-level workflow and every workflow it
/// nests, each loaded once however many entries refer to it.
#[derive(Debug, Default)]
pub struct Program {
    pub workflows: Vec<Workflow>,
    /// Every file read (workflows and includes), absolute, in reading order.
    pub files: Vec<PathBuf>,
}

impl Program {
    pub fn root(&self) -> &Workflow {
        &self.workflows[0]
    }

    pub fn workflow(&self, id: WorkflowId) -> &Workflow {
        &self.workflows[id.0 as usize]
    }

    pub fn file(&self, id: FileId) -> &PathBuf {
        &self.files[id.0 as usize]
    }

    /// Nesting depth below `id`: 0 for a workflow without nested entries.
    pub fn depth(&self, id: WorkflowId) -> u32 {
        self.workflow(id)
            .children()
            .map(|child| 1 + self.depth(child))
            .max()
            .unwrap_or(0)
    }
}

/// The tasks of one file and the dependencies between them.
#[derive(Debug)]
pub struct Workflow {
    pub file: FileId,
    pub templates: Vec<Template>,
    pub tasks: Vec<Task>,
    /// Node `i` is task `i`; an edge `a → b` means `b` runs after `a`
    /// succeeded. Acyclic (the interpreter checks).
    pub graph: DiGraph<(), (), u32>,
}

impl Workflow {
    pub fn new(file: FileId) -> Self {
        Workflow {
            file,
            templates: Vec::new(),
            tasks: Vec::new(),
            graph: DiGraph::default(),
        }
    }

    pub fn task(&self, id: TaskId) -> &Task {
        &self.tasks[id.0 as usize]
    }

    pub fn template(&self, id: TemplateId) -> &Template {
        &self.templates[id.0 as usize]
    }

    pub fn task_ids(&self) -> impl ExactSizeIterator<Item = TaskId> + use<> {
        (0..self.tasks.len() as u32).map(TaskId)
    }

    /// Tasks `id` waits for.
    pub fn dependencies(&self, id: TaskId) -> impl Iterator<Item = TaskId> + '_ {
        self.graph
            .neighbors_directed(NodeIndex::new(id.0 as usize), Direction::Incoming)
            .map(|n| TaskId(n.index() as u32))
    }

    /// Tasks that wait for `id`.
    pub fn dependents(&self, id: TaskId) -> impl Iterator<Item = TaskId> + '_ {
        self.graph
            .neighbors_directed(NodeIndex::new(id.0 as usize), Direction::Outgoing)
            .map(|n| TaskId(n.index() as u32))
    }

    /// The distinct workflows this one nests.
    pub fn children(&self) -> impl Iterator<Item = WorkflowId> + '_ {
        let mut seen = Vec::new();
        self.tasks.iter().filter_map(move |t| {
            let child = t.nested?;
            (!seen.contains(&child)).then(|| {
                seen.push(child);
                child
            })
        })
    }

    /// The task's id as users see it: `sim[17]`, `fit[2,x]`, `prep`, `@7`.
    pub fn task_name(&self, id: TaskId) -> String {
        let task = self.task(id);
        let template = self.template(task.template);
        let mut name = template.name();
        if !template.sweep.is_empty() {
            name.push('[');
            for (i, (axis, position)) in template
                .sweep
                .iter()
                .zip(template.positions(task.index))
                .enumerate()
            {
                if i > 0 {
                    name.push(',');
                }
                axis.values.value(position, &mut name);
            }
            name.push(']');
        }
        name
    }

    /// The argv the task runs (for shell commands: `/bin/sh -c TEXT`).
    pub fn argv(&self, id: TaskId) -> Vec<String> {
        let task = self.task(id);
        let template = self.template(task.template);
        let mut argv = Vec::new();
        if template.command.shell {
            argv.extend(["/bin/sh".to_owned(), "-c".to_owned()]);
        }
        template.command.render(template, task.index, &mut argv);
        argv
    }

    /// What defines the task, hashed: its instance's path, argv, own
    /// environment, working directory, resources, limits, nested file.
    /// Stable across slurp versions (FNV-1a over a fixed layout), so a
    /// resumed run knows a task it ran before even if lines moved, and
    /// reruns one whose line changed.
    pub fn key(&self, id: TaskId, scope: &str) -> u64 {
        use std::hash::Hasher as _;
        let task = self.task(id);
        let mut h = fnv::FnvHasher::default();
        let mut put = |bytes: &[u8]| {
            h.write(&(bytes.len() as u64).to_le_bytes());
            h.write(bytes);
        };
        put(scope.as_bytes());
        for word in self.argv(id) {
            put(word.as_bytes());
        }
        put(b"\0env");
        let mut env = self.environment(id);
        env.sort();
        for (k, v) in env {
            put(k.as_bytes());
            put(v.as_bytes());
        }
        put(self.cwd(id).unwrap_or_default().as_bytes());
        let r = task.request;
        for n in [
            r.ntasks as u64,
            r.cores as u64,
            r.gpus as u64,
            r.mem,
            r.nodes as u64,
            task.time_limit.map_or(0, |t| t.get()),
            task.retries as u64,
        ] {
            put(&n.to_le_bytes());
        }
        put(self.output(id).unwrap_or_default().as_bytes());
        h.finish()
    }

    /// The task's own environment variables (added to the inherited ones).
    pub fn environment(&self, id: TaskId) -> Vec<(String, String)> {
        let task = self.task(id);
        let template = self.template(task.template);
        template
            .extras
            .iter()
            .flat_map(|x| &x.env)
            .map(|(name, value)| (name.to_string(), template.render(value, task.index)))
            .collect()
    }

    pub fn cwd(&self, id: TaskId) -> Option<String> {
        let task = self.task(id);
        let template = self.template(task.template);
        let cwd = template.extras.as_ref()?.cwd.as_ref()?;
        Some(template.render(cwd, task.index))
    }

    pub fn output(&self, id: TaskId) -> Option<String> {
        let task = self.task(id);
        let template = self.template(task.template);
        let output = template.extras.as_ref()?.output.as_ref()?;
        Some(template.render(output, task.index))
    }
}

/// One source line: everything its tasks share, with `{var}` placeholders.
#[derive(Debug)]
pub struct Template {
    /// The task name (`sim`); for an unnamed line of an included file
    /// `FILE@LINE`; `None` for an unnamed line of the workflow's own file,
    /// whose name `@LINE` is made when asked (there may be millions).
    pub name: Option<Box<str>>,
    pub kind: LineKind,
    pub source: Source,
    /// The sweep's axes, first varying slowest; empty for a single task.
    pub sweep: Vec<Axis>,
    pub command: CommandTemplate,
    /// What few lines set; boxed so the many lines that set none of it
    /// cost one pointer.
    pub extras: Option<Box<Extras>>,
}

/// The rarely set parts of a template.
#[derive(Debug, Default, PartialEq)]
pub struct Extras {
    pub env: Vec<(Box<str>, Text)>,
    pub cwd: Option<Text>,
    pub output: Option<Text>,
    /// Queue policy for a nested entry's child instance.
    pub policy: Option<Box<str>>,
}

impl Extras {
    /// `None` when nothing is set.
    pub fn boxed(self) -> Option<Box<Extras>> {
        (self != Extras::default()).then(|| Box::new(self))
    }
}

impl Template {
    /// The name without sweep values: `sim`, `@7`, `common.slurp@3`.
    pub fn name(&self) -> String {
        match &self.name {
            Some(name) => name.to_string(),
            None => format!("@{}", self.source.line),
        }
    }

    /// How many tasks the template expands to.
    pub fn len(&self) -> u64 {
        self.sweep.iter().map(|a| a.values.len()).product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The position of each axis for the sweep instance `index`.
    pub fn positions(&self, index: u32) -> impl Iterator<Item = u64> + '_ {
        let mut rest = index as u64;
        let mut positions = [0u64; 16];
        for (slot, axis) in positions.iter_mut().zip(&self.sweep).rev() {
            let len = axis.values.len();
            *slot = rest % len;
            rest /= len;
        }
        positions.into_iter().take(self.sweep.len())
    }

    /// Substitutes the values of instance `index` into `text`.
    pub fn render(&self, text: &Text, index: u32) -> String {
        let mut out = String::new();
        let mut positions = None;
        for piece in &text.0 {
            match piece {
                Piece::Lit(s) => out.push_str(s),
                Piece::Index => {
                    let _ = write!(out, "{}", index as u64 + 1);
                }
                Piece::Var(var) => {
                    let positions =
                        positions.get_or_insert_with(|| self.positions(index).collect::<Vec<_>>());
                    self.sweep[*var as usize]
                        .values
                        .value(positions[*var as usize], &mut out);
                }
                Piece::Quoted(var, quote) => {
                    let positions =
                        positions.get_or_insert_with(|| self.positions(index).collect::<Vec<_>>());
                    let mut value = String::new();
                    self.sweep[*var as usize]
                        .values
                        .value(positions[*var as usize], &mut value);
                    quote.write(&value, &mut out);
                }
            }
        }
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LineKind {
    /// `task NAME ...: COMMAND`
    Task,
    /// `NCORES SINGLENODE COMMAND`
    Legacy,
    /// A bare command.
    Plain,
    /// A `[[task]]` of a TOML spec.
    Toml,
}

/// Where a template was written, for messages at run time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    pub file: FileId,
    /// 1-based.
    pub line: u32,
    /// Byte range of the line in the file.
    pub start: u32,
    pub end: u32,
}

/// One sweep variable and its values.
#[derive(Debug)]
pub struct Axis {
    pub name: Box<str>,
    pub values: Values,
}

/// The values of a sweep variable.
#[derive(Debug, Clone, PartialEq)]
pub enum Values {
    /// Inclusive range: `start, start+step, …` up to `end`.
    Range {
        start: i64,
        end: i64,
        step: i64,
    },
    List(Vec<Box<str>>),
}

impl Values {
    pub fn len(&self) -> u64 {
        match self {
            Values::Range { start, end, step } => {
                if *step == 0 || (*step > 0 && start > end) || (*step < 0 && start < end) {
                    0
                } else {
                    end.abs_diff(*start) / step.unsigned_abs() + 1
                }
            }
            Values::List(values) => values.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the value at `position` (< `len()`).
    pub fn value(&self, position: u64, out: &mut String) {
        match self {
            Values::Range { start, step, .. } => {
                let _ = write!(out, "{}", *start as i128 + position as i128 * *step as i128);
            }
            Values::List(values) => out.push_str(&values[position as usize]),
        }
    }

    /// The position of the value written `text`, if it is one.
    pub fn position(&self, text: &str) -> Option<u64> {
        match self {
            Values::Range { start, step, .. } => {
                let offset = text.parse::<i64>().ok()? as i128 - *start as i128;
                let step = *step as i128;
                (offset % step == 0 && offset / step >= 0 && ((offset / step) as u64) < self.len())
                    .then_some((offset / step) as u64)
            }
            Values::List(values) => values.iter().position(|v| &**v == text).map(|p| p as u64),
        }
    }
}

/// Text with `{var}` and `{#}` placeholders, split once at lowering.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Text(pub Vec<Piece>);

impl Text {
    pub fn literal(s: &str) -> Self {
        Text(vec![Piece::Lit(s.into())])
    }

    /// True when the text is the same for every instance.
    pub fn is_constant(&self) -> bool {
        self.0.iter().all(|p| matches!(p, Piece::Lit(_)))
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Lit(Box<str>),
    /// The value of sweep axis `n`, as it is.
    Var(u16),
    /// The value of sweep axis `n` in a line for `/bin/sh`, quoted so the
    /// shell reads it as exactly the value, where it stands (`Quote`).
    Quoted(u16, Quote),
    /// `{#}`: the 1-based index of the instance within its sweep.
    Index,
}

/// Where a placeholder stands in a shell line: outside quotes, inside
/// `'...'` or inside `"..."`. Its value is written so that the shell reads
/// back exactly the value, as one word where it is a word of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quote {
    Bare,
    Single,
    Double,
}

impl Quote {
    /// Characters that mean nothing to the shell outside quotes.
    fn plain(c: char) -> bool {
        c.is_ascii_alphanumeric() || "_-./,:=+@%^".contains(c)
    }

    /// `value` as the shell must see it here.
    pub fn write(self, value: &str, out: &mut String) {
        match self {
            Quote::Bare if !value.is_empty() && value.chars().all(Quote::plain) => {
                out.push_str(value)
            }
            Quote::Bare => {
                out.push('\'');
                out.push_str(&value.replace('\'', "'\\''"));
                out.push('\'');
            }
            // Close the quote, an escaped quote, reopen.
            Quote::Single => out.push_str(&value.replace('\'', "'\\''")),
            Quote::Double => {
                for c in value.chars() {
                    if matches!(c, '$' | '`' | '"' | '\\') {
                        out.push('\\');
                    }
                    out.push(c);
                }
            }
        }
    }
}

/// A command with placeholders. For a shell command there is one word: the
/// text for `sh -c`.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandTemplate {
    words: Words,
    pub shell: bool,
}

/// Most commands (every plain and legacy line) have no placeholder: they are
/// kept as one allocation, words separated by NUL (which no argv word can
/// hold), instead of two allocations per word.
#[derive(Debug, Clone, PartialEq)]
enum Words {
    Constant(Box<str>),
    Template(Vec<Text>),
}

impl CommandTemplate {
    pub fn new(words: Vec<Text>, shell: bool) -> Self {
        let constant = words.iter().all(|w| match &w.0[..] {
            [] => true,
            [Piece::Lit(s)] => !s.contains('\0'),
            _ => false,
        });
        let words = if constant && !words.is_empty() {
            let joined: Vec<&str> = words
                .iter()
                .map(|w| match &w.0[..] {
                    [Piece::Lit(s)] => &**s,
                    _ => "",
                })
                .collect();
            Words::Constant(joined.join("\0").into())
        } else {
            Words::Template(words)
        };
        CommandTemplate { words, shell }
    }

    /// A command without placeholders, from its words as written.
    pub fn literal<'w>(words: impl IntoIterator<Item = &'w str>, shell: bool) -> Self {
        let mut joined = String::new();
        let mut template = None;
        for (i, word) in words.into_iter().enumerate() {
            if word.contains('\0') {
                template = Some(());
            }
            if i > 0 {
                joined.push('\0');
            }
            joined.push_str(word);
        }
        match template {
            None => CommandTemplate {
                words: Words::Constant(joined.into()),
                shell,
            },
            Some(()) => {
                CommandTemplate::new(joined.split('\0').map(Text::literal).collect(), shell)
            }
        }
    }

    /// The words, each as text with placeholders.
    pub fn words(&self) -> Vec<Text> {
        match &self.words {
            Words::Constant(joined) => joined.split('\0').map(Text::literal).collect(),
            Words::Template(words) => words.clone(),
        }
    }

    fn render(&self, template: &Template, index: u32, out: &mut Vec<String>) {
        match &self.words {
            Words::Constant(joined) => out.extend(joined.split('\0').map(str::to_owned)),
            Words::Template(words) => out.extend(words.iter().map(|w| template.render(w, index))),
        }
    }
}

/// One task: small, because there may be millions.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub template: TemplateId,
    /// Instance index within the template's sweep (0 without a sweep).
    pub index: u32,
    pub request: Request,
    /// Time limit in seconds, also the runtime estimate backfilling uses;
    /// `None` is unlimited.
    pub time_limit: Option<std::num::NonZeroU64>,
    /// Extra attempts after a non-zero exit.
    pub retries: u32,
    /// For a nested entry: the child workflow its instance runs.
    pub nested: Option<WorkflowId>,
}

/// What one task asks for. Cores, GPUs and memory are per copy (rank), as in
/// Flux and Slurm (`-n ntasks -c cores -g gpus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Request {
    /// Copies (ranks) of the command.
    pub ntasks: u32,
    pub cores: u32,
    pub gpus: u32,
    /// Bytes; 0 reserves none.
    pub mem: u64,
    /// Exactly this many nodes; 0 lets the scheduler choose.
    pub nodes: u32,
}

impl Default for Request {
    fn default() -> Self {
        Request {
            ntasks: 1,
            cores: 1,
            gpus: 0,
            mem: 0,
            nodes: 0,
        }
    }
}

impl Request {
    /// `ntasks` copies of `cores` cores and `gpus` GPUs each, on exactly
    /// `nodes` nodes (0: any), no memory reserved.
    pub fn new(ntasks: u32, cores: u32, gpus: u32, nodes: u32) -> Self {
        Request {
            ntasks,
            cores,
            gpus,
            mem: 0,
            nodes,
        }
    }

    pub fn total_cores(&self) -> u64 {
        self.ntasks as u64 * self.cores as u64
    }

    pub fn total_gpus(&self) -> u64 {
        self.ntasks as u64 * self.gpus as u64
    }

    pub fn total_mem(&self) -> u64 {
        self.ntasks as u64 * self.mem
    }
}
