//! Running on a resource manager's resources, the two ways:
//!
//! - **inside** an allocation ([`allocation`]): slurp is the program of a
//!   Slurm job or of a Flux instance, the job is its instance, and each
//!   rank of each task starts as a job step (`srun`) or a Flux job (`flux
//!   run`) on the node the scheduler core chose — the local runtime
//!   (`run.rs`, `exec/`) does the rest;
//! - **from outside** ([`batch`]): every task is a job of its own,
//!   submitted and followed; [`slurm`] and [`flux`] are each system's
//!   commands for it (sbatch/squeue/scancel, flux job submit/jobs/cancel)
//!   and what its cluster or instance holds.

pub mod allocation;
pub mod batch;
pub mod flux;
pub mod slurm;
