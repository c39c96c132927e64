//! slurp's runtime: the workflow IR it executes and the resources it owns.
//!
//! For now this crate holds the data the interpreter produces — the
//! [`Program`] of workflows, templates and tasks, each task lowerable to a
//! Flux [`Jobspec`] — and the [`Capacity`] model requests are checked
//! against. It never parses text.

pub mod backend;
pub mod core;
pub mod exec;
pub mod halt;
mod ir;
pub mod jobspec;
pub mod journal;
pub mod listen;
pub mod protocol;
mod resources;
pub mod run;
pub mod show;

pub use ir::{
    Axis, CommandTemplate, Edit, Extras, FileId, LaunchWith, LineKind, Piece, Program, Quote,
    Request, Slot, Source, Task, TaskId, Template, TemplateId, Text, Values, Workflow, WorkflowId,
};
pub use jobspec::Jobspec;
pub use resources::{Capacity, Machine, Shortfall, amount, format_bytes};
