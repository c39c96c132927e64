//! The workflow IR: what the interpreter hands the runtime.
//!
//! Plain data, checked and complete: every dependency resolved, every
//! resource request known to fit the instance, every nested workflow loaded.
//! The runtime never sees source text.
//!
//! It is compact by design. A sweep line becomes one [`Template`], and its
//! members one run of [`Tasks`] when they ask for the same (a billion
//! members are one entry); names, argv, environment and the jobspec are
//! rendered from the template on demand. Only tasks with dependencies have
//! a node in [`Workflow::graph`], so memory grows with the lines, the
//! members that differ and the explicit edges — not with the sweep.

use std::fmt::Write as _;
use std::path::PathBuf;

use petgraph::Direction;
use petgraph::graphmap::DiGraphMap;
use serde::Serialize;

/// A task of one workflow; also its node in [`Workflow::graph`].
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
#[derive(Debug, Clone)]
pub struct Workflow {
    pub file: FileId,
    pub templates: Vec<Template>,
    pub tasks: Tasks,
    /// Node `i` is task `i`, present only when the task has a dependency
    /// or a dependent; an edge `a → b` means `b` runs after `a` succeeded.
    /// Acyclic (the interpreter checks).
    pub graph: Graph,
}

/// The dependency graph of a workflow's tasks: sparse, so a task without
/// dependencies costs nothing in it.
pub type Graph = DiGraphMap<u32, ()>;

impl Workflow {
    pub fn new(file: FileId) -> Self {
        Workflow {
            file,
            templates: Vec::new(),
            tasks: Tasks::default(),
            graph: Graph::default(),
        }
    }

    pub fn task(&self, id: TaskId) -> Task {
        self.tasks.get(id)
    }

    pub fn template(&self, id: TemplateId) -> &Template {
        &self.templates[id.0 as usize]
    }

    /// Keeps the first `tasks` tasks and `templates` templates, and only
    /// the edges between kept tasks (what a failed submission undoes).
    pub fn truncate(&mut self, tasks: usize, templates: usize) {
        self.tasks.truncate(tasks);
        self.templates.truncate(templates);
        let gone: Vec<u32> = self
            .graph
            .nodes()
            .filter(|&t| t as usize >= tasks)
            .collect();
        for t in gone {
            self.graph.remove_node(t);
        }
    }

    pub fn task_ids(&self) -> impl ExactSizeIterator<Item = TaskId> + use<> {
        (0..self.tasks.len() as u32).map(TaskId)
    }

    /// Tasks `id` waits for.
    pub fn dependencies(&self, id: TaskId) -> impl Iterator<Item = TaskId> + '_ {
        self.graph
            .neighbors_directed(id.0, Direction::Incoming)
            .map(TaskId)
    }

    /// Tasks that wait for `id`.
    pub fn dependents(&self, id: TaskId) -> impl Iterator<Item = TaskId> + '_ {
        self.graph
            .neighbors_directed(id.0, Direction::Outgoing)
            .map(TaskId)
    }

    /// The distinct workflows this one nests.
    pub fn children(&self) -> impl Iterator<Item = WorkflowId> + '_ {
        let mut seen = Vec::new();
        self.tasks.runs().iter().filter_map(move |r| {
            let child = r.first.nested?;
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

    /// The argv the task runs (for shell commands: `/bin/sh -c TEXT`),
    /// with `{%}` left as it is written.
    pub fn argv(&self, id: TaskId) -> Vec<String> {
        self.argv_in_slot(id, None)
    }

    /// The argv the task runs in job slot `slot` (`{%}`).
    pub fn argv_in_slot(&self, id: TaskId, slot: Option<u32>) -> Vec<String> {
        let task = self.task(id);
        let template = self.template(task.template);
        let mut argv = match self.launcher(id) {
            Some(launcher) => launcher.words(&task.request),
            None => Vec::new(),
        };
        if template.command.shell {
            argv.extend(["/bin/sh".to_owned(), "-c".to_owned()]);
        }
        template
            .command
            .render(template, task.index, slot, &mut argv);
        argv
    }

    /// The command as a shell would take it back: a shell line's text, or
    /// each word quoted (GNU parallel's `--dry-run` and joblog `Command`).
    pub fn command_line(&self, id: TaskId, slot: Option<u32>) -> String {
        let argv = self.argv_in_slot(id, slot);
        if self.template(self.task(id).template).command.shell && self.launcher(id).is_none() {
            return argv.last().cloned().unwrap_or_default();
        }
        let mut line = String::new();
        for (i, word) in argv.iter().enumerate() {
            if i > 0 {
                line.push(' ');
            }
            Quote::Bare.write(word, &mut line);
        }
        line
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

    /// Whether slurp serves PMI-1 to the task's copies: when it has more
    /// than one, no launcher starts them, and its line does not say
    /// `pmi=none`.
    pub fn pmi(&self, id: TaskId) -> bool {
        let task = self.task(id);
        task.request.ntasks > 1
            && self.launcher(id).is_none()
            && self
                .template(task.template)
                .extras
                .as_ref()
                .is_none_or(|x| x.pmi != Some(false))
    }

    /// The launcher that starts the task's copies, if its line names one.
    pub fn launcher(&self, id: TaskId) -> Option<&LaunchWith> {
        let template = self.template(self.task(id).template);
        template.extras.as_ref()?.launcher.as_deref()
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
#[derive(Debug, Clone)]
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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extras {
    pub env: Vec<(Box<str>, Text)>,
    pub cwd: Option<Text>,
    pub output: Option<Text>,
    /// Queue policy for a nested entry's child instance.
    pub policy: Option<Box<str>>,
    /// `pmi=simple` (`Some(true)`) or `pmi=none` (`Some(false)`); by
    /// default PMI is served to a task of several copies.
    pub pmi: Option<bool>,
    /// `launcher=NAME`: the words that start the task's copies.
    pub launcher: Option<Box<LaunchWith>>,
}

/// An outside launcher a task's command runs under (`launcher=mpirun`):
/// slurp starts it once, on all the task's cores, and it starts the copies.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchWith {
    pub name: Box<str>,
    /// Words before the task's command, with `{ntasks}`-style placeholders.
    pub command: Vec<Box<str>>,
    /// Words added when the task sets `nodes`, `gpus` or `mem`.
    pub when: Vec<(Box<str>, Vec<Box<str>>)>,
}

impl LaunchWith {
    /// The launcher's words for a task asking `r`.
    pub fn words(&self, r: &Request) -> Vec<String> {
        let value = |key: &str| -> String {
            match key {
                "ntasks" => r.ntasks.to_string(),
                "cores" => r.cores.to_string(),
                "gpus" => r.gpus.to_string(),
                "nodes" => r.nodes.to_string(),
                "mem_k" => r.mem.div_ceil(1024).to_string(),
                "mem_per_core_k" => (r.mem / u64::from(r.cores.max(1)))
                    .div_ceil(1024)
                    .to_string(),
                _ => String::new(),
            }
        };
        let render = |word: &str| {
            let mut out = String::new();
            let mut rest = word;
            while let Some(open) = rest.find('{') {
                let Some(close) = rest[open..].find('}') else {
                    break;
                };
                out.push_str(&rest[..open]);
                out.push_str(&value(&rest[open + 1..open + close]));
                rest = &rest[open + close + 1..];
            }
            out.push_str(rest);
            out
        };
        let set = |key: &str| match key {
            "nodes" => r.nodes > 0,
            "gpus" => r.gpus > 0,
            "mem" => r.mem > 0,
            _ => false,
        };
        let mut words: Vec<String> = self.command.iter().map(|w| render(w)).collect();
        for (key, extra) in &self.when {
            if set(key) {
                words.extend(extra.iter().map(|w| render(w)));
            }
        }
        words
    }
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
        self.render_into(text, index, None, &mut out);
        out
    }

    /// The axis and the column within it of sweep column `column`.
    fn column(&self, column: u16) -> (usize, u16) {
        let mut rest = column;
        for (i, axis) in self.sweep.iter().enumerate() {
            let width = axis.values.width();
            if rest < width {
                return (i, rest);
            }
            rest -= width;
        }
        unreachable!("the interpreter checks every column exists")
    }

    /// [`Template::render`], with `{%}` as `job_slot` when it is known.
    pub fn render_into(&self, text: &Text, index: u32, job_slot: Option<u32>, out: &mut String) {
        let mut positions = None;
        let mut value = String::new();
        for piece in &text.0 {
            match piece {
                Piece::Lit(s) => out.push_str(s),
                Piece::Index => {
                    let _ = write!(out, "{}", index as u64 + 1);
                }
                Piece::JobSlot => match job_slot {
                    Some(slot) => {
                        let _ = write!(out, "{slot}");
                    }
                    None => out.push_str("{%}"),
                },
                Piece::Var(slot) | Piece::Quoted(slot, _) => {
                    let positions =
                        positions.get_or_insert_with(|| self.positions(index).collect::<Vec<_>>());
                    let (axis, column) = self.column(slot.column);
                    value.clear();
                    self.sweep[axis]
                        .values
                        .cell(positions[axis], column, &mut value);
                    let edited = slot.edit.apply(&value);
                    match piece {
                        Piece::Quoted(_, quote) => quote.write(&edited, out),
                        _ => out.push_str(&edited),
                    }
                }
            }
        }
    }

    /// The values sweep column `column` takes, in order (a linked
    /// column's rows, not crossed with the other axes).
    pub fn column_values(&self, column: u16) -> Vec<String> {
        let (axis, column) = self.column(column);
        let values = &self.sweep[axis].values;
        (0..values.len())
            .map(|position| {
                let mut cell = String::new();
                values.cell(position, column, &mut cell);
                cell
            })
            .collect()
    }

    /// Every column's value of instance `index`, in order.
    pub fn cells(&self, index: u32) -> Vec<String> {
        let mut cells = Vec::new();
        for (axis, position) in self.sweep.iter().zip(self.positions(index)) {
            for column in 0..axis.values.width() {
                let mut cell = String::new();
                axis.values.cell(position, column, &mut cell);
                cells.push(cell);
            }
        }
        cells
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
    /// The command of a GNU parallel-style command line
    /// (`slurp -- CMD ::: A B`).
    Command,
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
#[derive(Debug, Clone)]
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
    /// Linked values (GNU parallel's `:::+`): rows of `width` columns that
    /// vary together, row after row in `cells`.
    Table {
        width: u16,
        cells: Vec<Box<str>>,
    },
}

impl Values {
    /// Columns per value: 1 except for a table.
    pub fn width(&self) -> u16 {
        match self {
            Values::Table { width, .. } => *width,
            _ => 1,
        }
    }

    /// Appends column `column` of the value at `position`.
    pub fn cell(&self, position: u64, column: u16, out: &mut String) {
        match self {
            Values::Table { width, cells } => {
                out.push_str(&cells[position as usize * *width as usize + column as usize])
            }
            _ => self.value(position, out),
        }
    }

    pub fn len(&self) -> u64 {
        match self {
            Values::Table { width, cells } => (cells.len() / (*width).max(1) as usize) as u64,
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
            // A row is named by its cells, as several axes would be.
            Values::Table { width, cells } => {
                let row = position as usize * *width as usize;
                out.push_str(&cells[row..row + *width as usize].join(","));
            }
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
            Values::Table { .. } => (0..self.len()).find(|&p| {
                let mut row = String::new();
                self.value(p, &mut row);
                row == text
            }),
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
    /// The value of a sweep column, as it is.
    Var(Slot),
    /// The value of a sweep column in a line for `/bin/sh`, quoted so the
    /// shell reads it as exactly the value, where it stands (`Quote`).
    Quoted(Slot, Quote),
    /// `{#}`: the 1-based index of the instance within its sweep.
    Index,
    /// `{%}` (GNU parallel's job slot): 1 + the first core the task holds,
    /// so among the tasks running at once no two one-core tasks share it.
    /// Known only at launch; elsewhere it reads `{%}`.
    JobSlot,
}

/// Which value a placeholder takes: the sweep's column `column` (counted
/// over every axis, an axis of linked values having several), edited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    pub column: u16,
    pub edit: Edit,
}

impl Slot {
    pub fn plain(column: u16) -> Self {
        Slot {
            column,
            edit: Edit::None,
        }
    }
}

/// The path edits of GNU parallel's replacement strings, as `{x.}` …
/// `{x/.}` in a task line and `{.}` … `{2/.}` on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    None,
    /// `.`: without its extension (`dir/a.tar.gz` → `dir/a.tar`).
    Stem,
    /// `/`: the part after the last `/`.
    Base,
    /// `//`: the directory, as `dirname` writes it (`.` for a bare name).
    Dir,
    /// `/.`: the part after the last `/`, without its extension.
    BaseStem,
}

impl Edit {
    /// The edit a suffix names: `.`, `/`, `//`, `/.`; `None` for any other.
    pub fn from_suffix(suffix: &str) -> Option<Edit> {
        Some(match suffix {
            "" => Edit::None,
            "." => Edit::Stem,
            "/" => Edit::Base,
            "//" => Edit::Dir,
            "/." => Edit::BaseStem,
            _ => return None,
        })
    }

    /// The suffixes, longest first, as a parser should try them.
    pub const SUFFIXES: [&'static str; 4] = ["/.", "//", "/", "."];

    /// `value` edited. The rules are GNU parallel's: the extension is a
    /// last `.` with neither `/` nor `.` after it (`.bashrc` → ``); the
    /// base is what follows the last `/` (`a/` → ``); the directory is
    /// POSIX dirname's (`a/` → `.`, `/x` → `/`).
    pub fn apply(self, value: &str) -> std::borrow::Cow<'_, str> {
        fn stem(v: &str) -> &str {
            match v.rfind('.') {
                Some(dot) if dot + 1 < v.len() && !v[dot + 1..].contains('/') => &v[..dot],
                _ => v,
            }
        }
        fn base(v: &str) -> &str {
            v.rfind('/').map_or(v, |slash| &v[slash + 1..])
        }
        fn dir(v: &str) -> &str {
            let trimmed = v.trim_end_matches('/');
            if trimmed.is_empty() {
                return if v.is_empty() { "." } else { "/" };
            }
            match trimmed.rfind('/') {
                None => ".",
                Some(slash) => match trimmed[..slash].trim_end_matches('/') {
                    "" => "/",
                    parent => parent,
                },
            }
        }
        std::borrow::Cow::Borrowed(match self {
            Edit::None => value,
            Edit::Stem => stem(value),
            Edit::Base => base(value),
            Edit::Dir => dir(value),
            Edit::BaseStem => stem(base(value)),
        })
    }
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

    fn render(&self, template: &Template, index: u32, slot: Option<u32>, out: &mut Vec<String>) {
        match &self.words {
            Words::Constant(joined) => out.extend(joined.split('\0').map(str::to_owned)),
            Words::Template(words) => out.extend(words.iter().map(|w| {
                let mut word = String::new();
                template.render_into(w, index, slot, &mut word);
                word
            })),
        }
    }

    /// Whether the command takes `{%}`, known only at launch.
    pub fn uses_job_slot(&self) -> bool {
        match &self.words {
            Words::Constant(_) => false,
            Words::Template(words) => words.iter().any(|w| w.0.contains(&Piece::JobSlot)),
        }
    }
}

/// One task: small, because there may be millions; built on demand from
/// its run of [`Tasks`].
#[derive(Debug, Clone, Copy, PartialEq)]
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

/// A workflow's tasks as runs: consecutive tasks that ask for the same
/// (request, limit, retries, nested workflow) and follow each other — the
/// members of one sweep (index + 1), or one-task lines in a row (template
/// + 1) — are one entry. Task `i` is found by bisection over the runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tasks {
    runs: Vec<Run>,
    len: u32,
}

/// Consecutive tasks that differ only in their sweep index or template.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Run {
    /// Its first task's id.
    pub start: u32,
    pub len: u32,
    /// Its first task; task `start + k` is this one with `k` added to its
    /// index (a sweep's members) or to its template (lines).
    pub first: Task,
    step: Step,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Index,
    Template,
}

impl Run {
    /// Its tasks' ids.
    pub fn ids(&self) -> std::ops::Range<u32> {
        self.start..self.start + self.len
    }

    /// Whether its tasks are one template's sweep members (not lines).
    pub fn is_sweep(&self) -> bool {
        self.step == Step::Index
    }

    /// Its `k`-th task.
    pub fn at(&self, k: u32) -> Task {
        let mut task = self.first;
        match self.step {
            Step::Index => task.index += k,
            Step::Template => task.template.0 += k,
        }
        task
    }

    /// How `next` would continue the run, if it does.
    fn continued_by(&self, next: &Task) -> Option<Step> {
        let last = self.at(self.len - 1);
        let same = Task {
            template: last.template,
            index: last.index,
            ..*next
        } == last;
        if !same {
            return None;
        }
        let by_index = next.template == last.template && next.index == last.index + 1;
        let by_template =
            next.template.0 == last.template.0 + 1 && next.index == 0 && last.index == 0;
        match (self.len, self.step) {
            (1, _) if by_index => Some(Step::Index),
            (1, _) if by_template => Some(Step::Template),
            (_, Step::Index) if by_index => Some(Step::Index),
            (_, Step::Template) if by_template => Some(Step::Template),
            _ => None,
        }
    }
}

impl Tasks {
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Task `id`; panics past the end, as indexing does.
    pub fn get(&self, id: TaskId) -> Task {
        let run = self.run_of(id.0);
        run.at(id.0 - run.start)
    }

    fn run_of(&self, id: u32) -> &Run {
        assert!(id < self.len, "task {id} of {}", self.len);
        let i = self.runs.partition_point(|r| r.start <= id) - 1;
        &self.runs[i]
    }

    pub fn push(&mut self, task: Task) {
        self.push_members(task, 1);
    }

    /// Appends `count` tasks: `task` with sweep indices `task.index`,
    /// `task.index + 1`, ….
    pub fn push_members(&mut self, task: Task, count: u32) {
        if count == 0 {
            return;
        }
        let start = self.len;
        self.len = start
            .checked_add(count)
            .unwrap_or_else(|| panic!("more than {} tasks in one workflow", u32::MAX));
        if let Some(last) = self.runs.last_mut()
            && let Some(step) = last.continued_by(&task)
            && (count == 1 || step == Step::Index)
        {
            last.step = step;
            last.len += count;
            return;
        }
        let step = Step::Index;
        self.runs.push(Run {
            start,
            len: count,
            first: task,
            step,
        });
    }

    /// Keeps the first `len` tasks.
    pub fn truncate(&mut self, len: usize) {
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        if len >= self.len {
            return;
        }
        self.runs.retain(|r| r.start < len);
        if let Some(last) = self.runs.last_mut() {
            last.len = last.len.min(len - last.start);
        }
        self.len = len;
    }

    /// Each task of `ids` made what `f` makes of it; runs split and merge
    /// as the new tasks ask.
    pub fn update(&mut self, ids: std::ops::Range<u32>, mut f: impl FnMut(Task) -> Task) {
        let tail = self.split_off(ids.end);
        let middle = self.split_off(ids.start);
        for task in middle.iter() {
            self.push(f(task));
        }
        for run in tail.runs {
            self.push_run(run);
        }
    }

    /// The tasks from `at` on, numbered from 0; this keeps those before.
    fn split_off(&mut self, at: u32) -> Tasks {
        let mut rest = Tasks::default();
        if at >= self.len {
            return rest;
        }
        let i = self.runs.partition_point(|r| r.start <= at) - 1;
        let run = self.runs[i];
        let k = at - run.start;
        let mut after = self.runs.split_off(i + 1);
        if k == 0 {
            after.insert(0, self.runs.pop().unwrap_or(run));
        } else {
            self.runs[i].len = k;
            after.insert(
                0,
                Run {
                    start: at,
                    len: run.len - k,
                    first: run.at(k),
                    step: run.step,
                },
            );
        }
        for run in after {
            rest.push_run(Run {
                start: run.start - at,
                ..run
            });
        }
        self.len = at;
        rest
    }

    /// Appends `run`'s tasks (its own `start` is ignored).
    fn push_run(&mut self, run: Run) {
        match run.step {
            Step::Index => self.push_members(run.first, run.len),
            Step::Template => (0..run.len).for_each(|k| self.push(run.at(k))),
        }
    }

    /// The runs, in task order: each a stretch of tasks that ask for the
    /// same, so a check of what tasks ask costs one look per run.
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// The runs of tasks `ids`, the first and last cut to them.
    pub fn runs_in(&self, ids: std::ops::Range<u32>) -> impl Iterator<Item = Run> + '_ {
        let end = ids.end.min(self.len);
        let from = if ids.start < end {
            self.runs.partition_point(|r| r.start <= ids.start) - 1
        } else {
            self.runs.len()
        };
        self.runs[from..]
            .iter()
            .take_while(move |r| r.start < end)
            .map(move |r| {
                let skip = ids.start.saturating_sub(r.start);
                Run {
                    start: r.start + skip,
                    len: (r.start + r.len).min(end) - r.start - skip,
                    first: r.at(skip),
                    step: r.step,
                }
            })
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = Task> + '_ {
        Iter {
            tasks: self,
            run: 0,
            k: 0,
            left: self.len as usize,
        }
    }

    pub fn last(&self) -> Option<Task> {
        self.len.checked_sub(1).map(|i| self.get(TaskId(i)))
    }

    /// The tasks of `template`: contiguous, in sweep order (tasks are kept
    /// in template order), found by bisection over the runs.
    pub fn of_template(&self, template: TemplateId) -> std::ops::Range<u32> {
        self.first_of(template.0)..self.first_of(template.0.saturating_add(1))
    }

    /// The first task whose template is `template` or later.
    fn first_of(&self, template: u32) -> u32 {
        let i = self
            .runs
            .partition_point(|r| r.at(r.len - 1).template.0 < template);
        match self.runs.get(i) {
            None => self.len,
            // Only lines advance the template inside a run.
            Some(r) => r.start + template.saturating_sub(r.first.template.0),
        }
    }

    /// Each run's first task made what `f` makes of it: `f` must change only
    /// what a run's tasks share (not their template or index), so a change
    /// to every task costs one call per run.
    pub fn update_shared(&mut self, mut f: impl FnMut(Task) -> Task) {
        for run in &mut self.runs {
            let new = f(run.first);
            debug_assert!(new.template == run.first.template && new.index == run.first.index);
            run.first = new;
        }
    }
}

impl Extend<Task> for Tasks {
    fn extend<I: IntoIterator<Item = Task>>(&mut self, iter: I) {
        for task in iter {
            self.push(task);
        }
    }
}

impl FromIterator<Task> for Tasks {
    fn from_iter<I: IntoIterator<Item = Task>>(iter: I) -> Tasks {
        let mut tasks = Tasks::default();
        for task in iter {
            tasks.push(task);
        }
        tasks
    }
}

struct Iter<'a> {
    tasks: &'a Tasks,
    run: usize,
    k: u32,
    left: usize,
}

impl Iterator for Iter<'_> {
    type Item = Task;

    fn next(&mut self) -> Option<Task> {
        let run = self.tasks.runs.get(self.run)?;
        let task = run.at(self.k);
        self.k += 1;
        if self.k == run.len {
            self.run += 1;
            self.k = 0;
        }
        self.left -= 1;
        Some(task)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn task(template: u32, index: u32, cores: u32) -> Task {
        Task {
            template: TemplateId(template),
            index,
            request: Request {
                cores,
                ..Request::default()
            },
            time_limit: None,
            retries: 0,
            nested: None,
        }
    }

    #[test]
    fn a_sweep_and_lines_in_a_row_are_one_run_each() {
        let mut tasks = Tasks::default();
        tasks.push_members(task(0, 0, 1), 1_000_000_000);
        // Lines: templates 1, 2, 3 with one task each, asking the same.
        for t in 1..4 {
            tasks.push(task(t, 0, 2));
        }
        // A member that asks for more breaks its run.
        tasks.push(task(4, 0, 1));
        tasks.push(task(4, 1, 8));
        tasks.push(task(4, 2, 1));
        assert_eq!(tasks.len(), 1_000_000_006);
        assert_eq!(tasks.runs().len(), 5);
        assert_eq!(tasks.get(TaskId(999_999_999)), task(0, 999_999_999, 1));
        assert_eq!(tasks.get(TaskId(1_000_000_001)), task(2, 0, 2));
        assert_eq!(
            tasks.of_template(TemplateId(4)),
            1_000_000_003..1_000_000_006
        );
        assert_eq!(tasks.of_template(TemplateId(0)), 0..1_000_000_000);
        let cut: Vec<(u32, u32)> = tasks
            .runs_in(999_999_998..1_000_000_002)
            .map(|r| (r.start, r.len))
            .collect();
        assert_eq!(cut, [(999_999_998, 2), (1_000_000_000, 2)]);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u32, u32, u32),
        Members(u32, u32),
        Truncate(usize),
        Double(u32, u32),
        /// Every task's time limit set, through the runs.
        Limit(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..3u32, 0..3u32, 1..3u32).prop_map(|(t, i, c)| Op::Push(t, i, c)),
            (1..3u32, 0..5u32).prop_map(|(c, n)| Op::Members(c, n)),
            (0..40usize).prop_map(Op::Truncate),
            (0..40u32, 0..10u32).prop_map(|(a, n)| Op::Double(a, n)),
            (1..4u64).prop_map(Op::Limit),
        ]
    }

    proptest! {
        /// Whatever is pushed, cut and rewritten, the runs hold exactly
        /// the tasks a plain list would.
        #[test]
        fn runs_hold_what_a_list_holds(ops in proptest::collection::vec(op(), 0..60)) {
            let (mut tasks, mut list) = (Tasks::default(), Vec::<Task>::new());
            for op in ops {
                match op {
                    Op::Push(dt, di, cores) => {
                        // Tasks stay in template order, as lowering keeps them.
                        let last = list.last().copied().unwrap_or(task(0, 0, 1));
                        let t = task(last.template.0 + dt, if dt == 0 { last.index + di } else { di }, cores);
                        tasks.push(t);
                        list.push(t);
                    }
                    Op::Members(cores, n) => {
                        let next = list.last().map_or(0, |t| t.template.0 + 1);
                        tasks.push_members(task(next, 0, cores), n);
                        list.extend((0..n).map(|i| task(next, i, cores)));
                    }
                    Op::Truncate(n) => {
                        tasks.truncate(n);
                        list.truncate(n);
                    }
                    Op::Double(from, n) => {
                        let from = from.min(list.len() as u32);
                        let to = (from + n).min(list.len() as u32);
                        let double = |mut t: Task| {
                            t.request.cores *= 2;
                            t
                        };
                        tasks.update(from..to, double);
                        for t in &mut list[from as usize..to as usize] {
                            *t = double(*t);
                        }
                    }
                    Op::Limit(secs) => {
                        let limit = |t: Task| Task {
                            time_limit: std::num::NonZeroU64::new(secs),
                            ..t
                        };
                        tasks.update_shared(limit);
                        list.iter_mut().for_each(|t| *t = limit(*t));
                    }
                }
                prop_assert_eq!(tasks.len(), list.len());
                prop_assert_eq!(tasks.iter().collect::<Vec<_>>(), list.clone());
                for (i, t) in list.iter().enumerate() {
                    prop_assert_eq!(tasks.get(TaskId(i as u32)), *t);
                }
                let lens: u32 = tasks.runs().iter().map(|r| r.len).sum();
                prop_assert_eq!(lens as usize, list.len());
                for w in tasks.runs().windows(2) {
                    prop_assert_eq!(w[0].start + w[0].len, w[1].start);
                }
                if let Some(t) = list.last() {
                    let ids = tasks.of_template(t.template);
                    let want = list.iter().filter(|x| x.template == t.template).count();
                    prop_assert_eq!(ids.len(), want);
                    prop_assert!(ids.clone().all(|i| list[i as usize].template == t.template));
                }
            }
        }
    }
}
