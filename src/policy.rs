//! `slurp policy …`: tools for the learned `fair` policy — rollouts that
//! feed its trainer (`fair/trainer/`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use slurp_fair::observe::Normalisers;
use slurp_fair::rollout::{self, Options, Score};
use slurp_fair::{Model, model::sidecar};
use slurp_sim::{Machine, Workload};

#[derive(Subcommand, Debug)]
pub enum PolicyCommand {
    /// Play episodes of a trace with a policy network and write every
    /// decision (observations, masks, actions, log-probabilities, rewards)
    /// as NumPy arrays for training
    Rollout(RolloutArgs),
}

#[derive(Args, Debug)]
pub struct RolloutArgs {
    /// The policy network (ONNX; inputs obs f32[1,128,9], mask f32[1,128];
    /// output logits f32[1,128]); its normalisers are read from MODEL.json
    #[arg(long, value_name = "MODEL.onnx")]
    model: PathBuf,
    /// Workload trace (SWF, also .gz/.xz)
    #[arg(long, value_name = "TRACE")]
    trace: PathBuf,
    /// Episodes to play
    #[arg(long, value_name = "N", default_value_t = 100)]
    trajectories: usize,
    /// Seed of the episodes' windows and of the sampling
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Where to write obs.npy, mask.npy, action.npy, logp.npy, reward.npy,
    /// episode.npy and episodes.json
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Jobs per episode
    #[arg(long, value_name = "L", default_value_t = 128)]
    len: usize,
    /// Backfill (the reference's rule) while the chosen job waits
    #[arg(long)]
    backfill: bool,
    /// How users' mean bounded slowdowns make the reward: `worst`, `mean`, `best`
    #[arg(long, value_name = "HOW", default_value = "worst")]
    score: String,
    /// Take the best slot instead of sampling
    #[arg(long)]
    greedy: bool,
    /// Only windows where FCFS reaches this average bounded slowdown
    /// (most windows of a real trace never queue)
    #[arg(long, value_name = "X", default_value_t = 0.0)]
    min_bsld: f64,
}

fn usage(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(2)
}

pub fn policy(command: &PolicyCommand) -> std::io::Result<ExitCode> {
    let PolicyCommand::Rollout(args) = command;
    let score: Score = match args.score.parse() {
        Ok(s) => s,
        Err(e) => return Ok(usage(e)),
    };
    let trace = match slurp_trace::read(&args.trace) {
        Ok(t) => t,
        Err(e) => return Ok(usage(format!("{}: {e}", args.trace.display()))),
    };
    let Some(machine) = Machine::of(&trace) else {
        return Ok(usage(format!(
            "{}: the header gives no `; MaxProcs:` or `; MaxNodes:`",
            args.trace.display()
        )));
    };
    let workload = Workload::new(&trace, machine);
    // A model without normalisers beside it (a trainer's first) takes the
    // trace's; they are written out so the trainer can keep them with it.
    let own = Normalisers::of(&workload);
    let model = match Model::load(&args.model, Some(own)) {
        Ok(m) => m,
        Err(e) => return Ok(usage(e)),
    };
    let opts = Options {
        trajectories: args.trajectories,
        len: args.len,
        seed: args.seed,
        backfill: args.backfill,
        score,
        greedy: args.greedy,
        min_bsld: args.min_bsld,
    };
    let started = std::time::Instant::now();
    let trajectories = match rollout::rollout(&model, &workload, &opts) {
        Ok(t) => t,
        Err(e) => return Ok(usage(e)),
    };
    rollout::write(&args.out, &trajectories)?;
    let normalisers =
        serde_json::to_string_pretty(&model.normalisers).map_err(std::io::Error::other)?;
    std::fs::write(args.out.join("normalisers.json"), normalisers)?;
    let steps: usize = trajectories.iter().map(|t| t.steps.len()).sum();
    let mean = |f: fn(&rollout::Trajectory) -> f64| {
        trajectories.iter().map(f).sum::<f64>() / trajectories.len().max(1) as f64
    };
    eprintln!(
        "{} episodes, {steps} decisions in {:.2} s; mean reward {:.3}, mean bsld {:.2}, mean worst-user bsld {:.2}{}",
        trajectories.len(),
        started.elapsed().as_secs_f64(),
        mean(|t| t.reward as f64),
        mean(|t| t.metrics.avg_bounded_slowdown),
        mean(|t| t.metrics.worst_user_bounded_slowdown),
        if sidecar(&args.model).exists() {
            String::new()
        } else {
            " (normalisers from the trace)".into()
        }
    );
    Ok(ExitCode::SUCCESS)
}
