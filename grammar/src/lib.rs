//! The slurp task-file language: grammar, typed syntax tree, syntax errors.
//!
//! This crate turns text into an [`Ast`] in which every node carries its
//! byte span. It knows nothing of files, includes, jobspecs or running
//! anything; meaning is the interpreter's job. Parsing never fails and never
//! panics on user input: what cannot be understood becomes a [`Diagnostic`],
//! and parsing goes on, so a user sees every mistake of a file at once.

mod ast;
mod diagnostic;
mod parser;

pub use ast::{
    Ast, Attr, Command, Item, ItemKind, LegacyLine, ShellReason, Span, Spanned, SweepValues,
    SweepVar, TaskLine, Word,
};
pub use diagnostic::{Diagnostic, Label};
pub use parser::{parse, parse_command, parse_each, parse_with_grammar_only};

/// True for a sweep-variable or environment-variable style name.
pub fn is_identifier(s: &str) -> bool {
    parser::is_identifier(s)
}
