//! The typed syntax tree of a slurp file.
//!
//! Every node carries the byte span it came from, so later stages can point
//! at the exact text. The tree holds what the user wrote, unquoted and split,
//! but not yet what it means: attribute values are still text, `{var}`
//! placeholders are still in the words, defaults are not applied.

use std::fmt;

/// A byte range in one source text. `u32` keeps the tree small; files over
/// 4 GiB are rejected before parsing.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Self {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    pub fn len(self) -> usize {
        (self.end - self.start) as usize
    }

    pub fn is_empty(self) -> bool {
        self.start == self.end
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }

    /// The sub-span `[from, to)` relative to this span's start.
    pub fn sub(self, from: usize, to: usize) -> Span {
        Span::new(self.start as usize + from, self.start as usize + to)
    }
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

/// A value and where it was written. Compares by value only, so tests and
/// later stages can compare trees without caring about positions.
#[derive(Clone, Debug)]
pub struct Spanned<T> {
    pub node: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(node: T, span: Span) -> Self {
        Spanned { node, span }
    }
}

impl<T: PartialEq> PartialEq for Spanned<T> {
    fn eq(&self, other: &Self) -> bool {
        self.node == other.node
    }
}

/// A parsed file: its statements in order. Blank and comment-only lines are
/// not kept.
#[derive(Debug, Default, PartialEq)]
pub struct Ast {
    pub items: Vec<Item>,
}

/// One logical line (physical lines joined by `\`).
#[derive(Debug, PartialEq)]
pub struct Item {
    /// 1-based line number where the statement starts.
    pub line: u32,
    pub span: Span,
    pub kind: ItemKind,
}

#[derive(Debug, PartialEq)]
pub enum ItemKind {
    /// `task NAME[SWEEP] ATTR=VALUE ...: COMMAND`
    Task(TaskLine),
    /// `NCORES SINGLENODE COMMAND [ARGS...]`
    Legacy(LegacyLine),
    /// A bare command: one task of one core.
    Plain(Command),
    /// `defaults ATTR=VALUE ...`
    Defaults(Vec<Attr>),
    /// `include PATH`
    Include(Spanned<String>),
}

#[derive(Debug, PartialEq)]
pub struct TaskLine {
    pub name: Spanned<String>,
    /// The variables of `NAME[...]`, in the order written (the first varies
    /// slowest in the cartesian product).
    pub sweep: Option<Spanned<Vec<SweepVar>>>,
    pub attrs: Vec<Attr>,
    pub command: Command,
}

#[derive(Debug, PartialEq)]
pub struct SweepVar {
    pub name: Spanned<String>,
    pub values: Spanned<SweepValues>,
}

/// The values one sweep variable takes.
#[derive(Debug, Clone, PartialEq)]
pub enum SweepValues {
    /// `start..end` or `start..end:step`, both ends inclusive.
    Range { start: i64, end: i64, step: i64 },
    /// `a,b,c`
    List(Vec<String>),
    /// `lines(FILE)`: one value per line of FILE (read by the interpreter).
    Lines(String),
    /// `glob(PATTERN)`: the paths that match, sorted (found by the
    /// interpreter).
    Glob(String),
}

impl SweepValues {
    /// How many values; `None` for `lines(…)` and `glob(…)`, known only
    /// once they are read.
    pub fn len(&self) -> Option<u64> {
        match self {
            SweepValues::Range { start, end, step } => Some(
                if (*step > 0 && start > end) || (*step < 0 && start < end) {
                    0
                } else {
                    (end.abs_diff(*start) / step.unsigned_abs()) + 1
                },
            ),
            SweepValues::List(values) => Some(values.len() as u64),
            SweepValues::Lines(_) | SweepValues::Glob(_) => None,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }
}

/// `key=value` as written; the value is unquoted.
#[derive(Debug, Clone, PartialEq)]
pub struct Attr {
    pub key: Spanned<String>,
    pub value: Spanned<String>,
}

#[derive(Debug, PartialEq)]
pub struct LegacyLine {
    /// NCORES: how many copies (ranks) of the command, one core each.
    pub ncores: Spanned<u32>,
    /// SINGLENODE: all copies on one node.
    pub single_node: Spanned<bool>,
    pub command: Command,
}

/// A command as written: its argv words, and whether it needs `/bin/sh`.
#[derive(Debug, Clone, PartialEq)]
pub struct Command {
    pub words: Vec<Word>,
    /// Why the command runs through `/bin/sh -c` (the GNU make rule: only
    /// when it has unquoted shell syntax), or `None` to exec the words.
    pub shell: Option<ShellReason>,
    /// The command's text in the source, from its first word to its last.
    pub span: Span,
    /// The command's text when the source holds it escaped (a TOML string:
    /// `\"` in the file is `"` in the command).
    pub text: Option<String>,
}

impl Command {
    /// The text `/bin/sh -c` gets: the source text of the command with
    /// line continuations removed (sh would remove them too).
    pub fn shell_text(&self, src: &str) -> String {
        if let Some(text) = &self.text {
            return text.clone();
        }
        let raw = &src[self.span.range()];
        if raw.contains('\\') {
            raw.replace("\\\r\n", "").replace("\\\n", "")
        } else {
            raw.to_owned()
        }
    }
}

/// One argv word after quote removal.
#[derive(Debug, Clone, PartialEq)]
pub struct Word {
    pub text: String,
    pub span: Span,
}

/// What made a command a shell command, for `slurp check` and diagnostics.
#[derive(Debug, Clone, PartialEq)]
pub struct ShellReason {
    pub span: Span,
    pub what: String,
}
