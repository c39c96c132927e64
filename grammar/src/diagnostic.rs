//! Diagnostics: what went wrong in the user's text, where, and what to do.
//!
//! A [`Diagnostic`] knows spans but not files: the grammar sees one text at a
//! time. The interpreter attaches the file when it gathers the diagnostics of
//! a whole workflow (includes and nested files) into one report.

use std::fmt;

use crate::Span;

/// One mistake in the user's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// A stable code such as `slurp::unbalanced_quote`, listed in the
    /// language reference.
    pub code: &'static str,
    /// What is wrong, lower-case, no trailing period.
    pub message: String,
    /// Spans in the text, each with what is there.
    pub labels: Vec<Label>,
    /// What the user can do about it.
    pub help: Option<String>,
}

/// A span of the text and what it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub span: Span,
    pub message: String,
}

impl Diagnostic {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Diagnostic {
            code,
            message: message.into(),
            labels: Vec::new(),
            help: None,
        }
    }

    #[must_use]
    pub fn label(mut self, span: Span, message: impl Into<String>) -> Self {
        self.labels.push(Label {
            span,
            message: message.into(),
        });
        self
    }

    #[must_use]
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// The first label's span: where the diagnostic points.
    pub fn primary_span(&self) -> Option<Span> {
        self.labels.first().map(|l| l.span)
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}
