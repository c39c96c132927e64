//! `slurp policy …`: tools for the learned `fair` policy — rollouts that
//! feed its trainer (`fair/trainer/`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use slurp_fair::observe::Normalisers;
use slurp_fair::rollout::{self, Options, Player, Score};
use slurp_fair::{Model, model::sidecar};
use slurp_runtime::core::Order;
use slurp_sim::{Machine, Window, Workload};

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
    #[arg(long, value_name = "MODEL.onnx", required_unless_present = "teacher")]
    model: Option<PathBuf>,
    /// Play a heuristic instead (`fcfs`, `sjf`, `f1`, `wfp3`, `unicep`) and
    /// record its choices as the actions: examples for the trainer to clone
    #[arg(long, value_name = "ORDER", conflicts_with = "model")]
    teacher: Option<String>,
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
    /// Reward the improvement on this heuristic's score of the same window
    /// (`fcfs`, `sjf`, `f1`, …) instead of the score itself: a baseline
    /// that takes the spread between quiet and busy windows out of training
    #[arg(long, value_name = "ORDER")]
    baseline: Option<String>,
    /// Never play a job of the windows `slurp sim --samples COUNT --seed
    /// SEED` draws (same --len), or of jobs FROM..TO (`320000..`: from job
    /// 320000 to the end, in RICC its last four weeks): they are kept for
    /// judging the model; a list (`12345:300,777:300`) holds out several
    #[arg(long, value_name = "SEED:COUNT|FROM..[TO][,...]")]
    hold_out: Option<String>,
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
    let model = match &args.model {
        Some(path) => match Model::load(path, Some(own)) {
            Ok(m) => Some(m),
            Err(e) => return Ok(usage(e)),
        },
        None => None,
    };
    let order = |name: &str| {
        Order::ALL
            .into_iter()
            .find(|o| o.name() == name)
            .ok_or_else(|| format!("unknown heuristic `{name}` (fcfs, sjf, f1, wfp3, unicep)"))
    };
    let baseline = match args.baseline.as_deref().map(order).transpose() {
        Ok(b) => b,
        Err(e) => return Ok(usage(format!("--baseline: {e}"))),
    };
    // SEED:COUNT (the draws of `slurp sim --samples`) or FROM..[TO] (a
    // span of jobs, such as the last weeks of the trace), comma-separated.
    let mut hold_out = Vec::new();
    for text in args.hold_out.iter().flat_map(|h| h.split(',')) {
        if text.contains("..") {
            match Window::parse_span(text, workload.jobs.len()) {
                Ok(span) => hold_out.push(span),
                Err(e) => return Ok(usage(format!("--hold-out {e}"))),
            }
            continue;
        }
        let Some((seed, count)) = text
            .split_once(':')
            .and_then(|(s, c)| Some((s.parse::<u64>().ok()?, c.parse::<usize>().ok()?)))
        else {
            return Ok(usage(format!(
                "--hold-out `{text}`: give SEED:COUNT, such as 12345:300, or FROM..[TO], such as 320000.."
            )));
        };
        match Window::samples(workload.jobs.len(), args.len, count, seed) {
            Ok(windows) => hold_out.extend(windows),
            Err(e) => return Ok(usage(format!("--hold-out `{text}`: {e}"))),
        }
    }
    let (player, normalisers) = match (&model, &args.teacher) {
        (Some(m), _) => (Player::Network(m), m.normalisers),
        (None, Some(name)) => match order(name) {
            Ok(order) => (Player::Teacher(order), own),
            Err(e) => return Ok(usage(format!("--teacher: {e}"))),
        },
        (None, None) => unreachable!("clap requires --model or --teacher"),
    };
    let opts = Options {
        trajectories: args.trajectories,
        len: args.len,
        seed: args.seed,
        backfill: args.backfill,
        score,
        greedy: args.greedy,
        min_bsld: args.min_bsld,
        baseline,
        hold_out,
    };
    let started = std::time::Instant::now();
    let trajectories = match rollout::rollout(player, &normalisers, &workload, &opts) {
        Ok(t) => t,
        Err(e) => return Ok(usage(e)),
    };
    rollout::write(&args.out, &trajectories)?;
    let written = serde_json::to_string_pretty(&normalisers).map_err(std::io::Error::other)?;
    std::fs::write(args.out.join("normalisers.json"), written)?;
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
        match &args.model {
            Some(path) if sidecar(path).exists() => "",
            _ => " (normalisers from the trace)",
        }
    );
    Ok(ExitCode::SUCCESS)
}
