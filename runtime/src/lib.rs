//! slurp's runtime: the workflow IR it executes and the resources it owns,
//! and everything that runs it.
//!
//! The data the interpreter produces — the [`Program`] of workflows,
//! templates and tasks, each task lowerable to a Flux [`Jobspec`] — and the
//! [`Capacity`] model requests are checked against; the scheduler
//! [`core`], the executor ([`exec`]), the real-time driver ([`run`]) with
//! the live instance's socket ([`listen`]) and [`protocol`], the
//! [`journal`], and the batch backends ([`backend`]). It never parses
//! workflow text: what is submitted to a live instance is lowered by the
//! caller's [`run::Submit`].

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
    Axis, CommandTemplate, Edit, Extras, FileId, Graph, LaunchWith, LineKind, Piece, Program,
    Quote, Request, Run, Slot, Source, Task, TaskId, Tasks, Template, TemplateId, Text, Values,
    Workflow, WorkflowId,
};
pub use jobspec::Jobspec;
pub use resources::{Capacity, Machine, Shortfall, amount, format_bytes};
