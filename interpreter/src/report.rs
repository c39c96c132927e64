//! Source files and the failure that carries every diagnostic of a load.
//!
//! Diagnostics come from several files (includes, nested workflows), so each
//! is stored with its file. [`Failure`] holds all of them: one value, all
//! mistakes, each rendered by miette with its own source, line and label.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use miette::{LabeledSpan, NamedSource, SourceSpan};
use slurp_grammar::{Diagnostic, Span};
use slurp_runtime::FileId;

/// A file slurp read, kept for diagnostics and for the run's copy.
#[derive(Debug)]
pub struct SourceFile {
    /// Absolute and normalised; the identity of the file.
    pub path: PathBuf,
    /// As the user will recognise it (relative to the working directory
    /// when below it).
    pub display: String,
    pub text: Arc<str>,
    /// Byte offsets where its lines start, found when first asked for
    /// (diagnostics are many only in files that are no workflow at all).
    lines: std::sync::OnceLock<Vec<u32>>,
}

/// Every file read so far, by [`FileId`].
#[derive(Debug, Default)]
pub struct Sources {
    files: Vec<SourceFile>,
}

impl Sources {
    pub fn add(&mut self, path: PathBuf, display: String, text: Arc<str>) -> FileId {
        self.files.push(SourceFile {
            path,
            display,
            text,
            lines: std::sync::OnceLock::new(),
        });
        FileId(self.files.len() as u32 - 1)
    }

    pub fn get(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    pub fn find(&self, path: &Path) -> Option<FileId> {
        self.files
            .iter()
            .position(|f| f.path == path)
            .map(|i| FileId(i as u32))
    }

    pub fn iter(&self) -> impl Iterator<Item = &SourceFile> {
        self.files.iter()
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The 1-based line of a byte offset.
    pub fn line_of(&self, file: FileId, offset: u32) -> u32 {
        let f = self.get(file);
        let starts = f.lines.get_or_init(|| {
            std::iter::once(0)
                .chain(
                    f.text
                        .bytes()
                        .enumerate()
                        .filter(|&(_, b)| b == b'\n')
                        .map(|(i, _)| i as u32 + 1),
                )
                .collect()
        });
        // Lines starting at or before the offset.
        starts.partition_point(|&s| s <= offset) as u32
    }
}

/// A diagnostic and the file it is about (`None`: not about any text, such
/// as a command-line file that does not exist).
#[derive(Debug, Clone)]
pub struct Located {
    pub file: Option<FileId>,
    pub diagnostic: Diagnostic,
}

/// Why a workflow could not be loaded: every diagnostic found, in order.
#[derive(Debug)]
pub struct Failure {
    pub what: String,
    pub problems: Vec<Problem>,
}

impl Failure {
    pub(crate) fn new(what: String, located: Vec<Located>, sources: &Sources) -> Self {
        let problems = located
            .into_iter()
            .map(|l| Problem::new(l, sources))
            .collect();
        Failure { what, problems }
    }

    /// The distinct codes, in order of first appearance (for tests and
    /// `--json` style consumers).
    pub fn codes(&self) -> Vec<&'static str> {
        let mut codes = Vec::new();
        for p in &self.problems {
            if !codes.contains(&p.code) {
                codes.push(p.code);
            }
        }
        codes
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "{}: {n} error{}",
            self.what,
            if n == 1 { "" } else { "s" }
        )
    }
}

impl std::error::Error for Failure {}

impl miette::Diagnostic for Failure {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new("slurp::invalid_workflow"))
    }

    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        Some(Box::new(
            self.problems.iter().map(|p| p as &dyn miette::Diagnostic),
        ))
    }
}

/// One diagnostic, ready for miette: with its file's name and text.
#[derive(Debug)]
pub struct Problem {
    pub code: &'static str,
    pub message: String,
    pub help: Option<String>,
    /// `file:line` of the first label, for plain-text consumers.
    pub location: Option<(String, u32)>,
    labels: Vec<LabeledSpan>,
    source: Option<NamedSource<Arc<str>>>,
}

impl Problem {
    fn new(located: Located, sources: &Sources) -> Self {
        let mut d = located.diagnostic;
        // Spans are byte offsets, found by scanning bytes: one may start or
        // end inside a character (`task cores=é`). Snap each outwards to
        // whole characters of its file, inside it, so it can be drawn.
        if let Some(file) = located.file {
            let text = &sources.get(file).text;
            for l in &mut d.labels {
                l.span = snap(text, l.span);
            }
        }
        // The first label is where the diagnostic points (the header's
        // FILE:LINE:COL), wherever the others are: a task defined twice is
        // reported at its second definition, the first only labelled.
        let labels = d
            .labels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let (text, span) = (Some(l.message.clone()), to_source_span(l.span));
                if i == 0 {
                    LabeledSpan::new_primary_with_span(text, span)
                } else {
                    LabeledSpan::new_with_span(text, span)
                }
            })
            .collect();
        let mut message = d.message.clone();
        let mut labels = labels;
        let (source, location) = match located.file {
            Some(file) => {
                let f = sources.get(file);
                let line = d
                    .primary_span()
                    .map_or(1, |s| sources.line_of(file, s.start));
                // A line too long to draw (miette's columns stop at 65,535,
                // and no terminal shows such a line): the place in words.
                let longest = d
                    .labels
                    .iter()
                    .map(|l| line_around(&f.text, l.span.start as usize))
                    .max_by_key(|r| r.len());
                match (longest, d.primary_span()) {
                    (Some(long), Some(at)) if long.len() > MAX_SHOWN_LINE => {
                        let start = line_around(&f.text, at.start as usize).start;
                        message = format!(
                            "{message} (at {}:{line}:{}; the line is {} bytes long, too long to show)",
                            f.display,
                            at.start as usize - start + 1,
                            long.len()
                        );
                        labels = Vec::new();
                        (None, Some((f.display.clone(), line)))
                    }
                    _ => (
                        Some(
                            NamedSource::new(f.display.clone(), f.text.clone())
                                .with_language("slurp"),
                        ),
                        Some((f.display.clone(), line)),
                    ),
                }
            }
            None => (None, None),
        };
        Problem {
            code: d.code,
            message,
            help: d.help,
            location,
            labels,
            source,
        }
    }
}

/// The longest line a diagnostic draws with its source.
const MAX_SHOWN_LINE: usize = 10_000;

/// `span` widened to whole characters of `text`, and inside it.
fn snap(text: &str, span: Span) -> Span {
    let mut start = (span.start as usize).min(text.len());
    let mut end = (span.end as usize).clamp(start, text.len());
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    while !text.is_char_boundary(end) {
        end += 1;
    }
    Span::new(start, end)
}

/// The byte range of the line holding `at` (without its newline).
fn line_around(text: &str, at: usize) -> std::ops::Range<usize> {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    start..end
}

fn to_source_span(span: Span) -> SourceSpan {
    SourceSpan::new((span.start as usize).into(), span.len())
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Problem {}

impl miette::Diagnostic for Problem {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(self.code))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }

    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        self.source.as_ref().map(|s| s as &dyn miette::SourceCode)
    }

    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        (!self.labels.is_empty())
            .then(|| Box::new(self.labels.iter().cloned()) as Box<dyn Iterator<Item = _>>)
    }
}
