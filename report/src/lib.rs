//! Reports of runs: one self-contained HTML file per run or simulation.
//!
//! The pipeline reads off the file list: [`timeline`] turns a journal (or a
//! simulated schedule) into a [`Timeline`] — tasks, the lanes (cores and
//! GPUs) their attempts held and when; [`gantt`] draws it as SVG (bars one
//! by one, or aggregated into occupancy strips when there are too many to
//! draw); [`page`] wraps charts, summary and a sortable task table into one
//! HTML file that fetches nothing.

pub mod gantt;
pub mod page;
pub mod timeline;

pub use page::{Page, Section};
pub use timeline::{Attempt, Lane, Outcome, Task, Timeline};
