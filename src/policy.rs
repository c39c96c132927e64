//! `slurp policy …`: tools for learned policies — `judge` (a model against
//! the heuristics), `generate` (synthetic multi-user workloads), `rollout`
//! (episodes for the trainer, `fair/trainer/`); `train` is `train.rs`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use slurp_fair::observe::Normalisers;
use slurp_fair::rollout::{self, Options, Player, Score};
use slurp_fair::{Model, Sight, model::sidecar};
use slurp_runtime::core::Order;
use slurp_sim::generate::Family;
use slurp_sim::{Window, Workload};

use crate::sim::plural;

#[derive(Subcommand, Debug)]
// Each subcommand's arguments are built only when it is the one invoked
// (or its help is shown): building all of them took a quarter of a start.
#[command(defer = true)]
pub enum PolicyCommand {
    /// Play episodes of a trace with a policy network and write every
    /// decision (observations, masks, actions, log-probabilities, rewards)
    /// as NumPy arrays for training
    Rollout(RolloutArgs),
    /// Write a synthetic multi-user workload as SWF (Lublin–Feitelson job
    /// sizes and run times, users of different habits, a daily cycle): the
    /// same trace any TRACE argument `gen:FAMILY:SEED` names
    Generate(GenerateArgs),
    /// Judge a learned policy on workloads: the same random windows
    /// replayed in both simulation models, without and with EASY, by
    /// FCFS, SJF, F1, fairshare and the model; a table of worst-user and
    /// average bounded slowdowns per cell, and how many cells it wins
    Judge(JudgeArgs),
    /// Train a learned policy on a site's own traces with the PyTorch
    /// trainer (CUDA when present, CPU otherwise), keeping the last quarter
    /// of each out; write the best model and judge it there
    Train(crate::train::TrainArgs),
    /// Give each of a model's networks a shortlist, or take it away: of the
    /// jobs whose logit is within MARGIN of the network's choice, ORDER's
    /// first starts; and a horizon and a backlog rule for the choices it
    /// keeps until they start (judge the result before using it)
    Shortlist(ShortlistArgs),
}

#[derive(Args, Debug)]
pub struct ShortlistArgs {
    /// The model: a file, or a built-in model's name (`fair-v5`)
    #[arg(value_name = "MODEL")]
    model: String,
    /// Where to write the model with its new shortlists
    #[arg(short, long, value_name = "OUT.onnx")]
    output: PathBuf,
    /// Take away every shortlist the model has, its horizons and backlog
    /// rules, first
    #[arg(long)]
    clear: bool,
    /// The model's own network (slurp's model and real runs without
    /// backfilling, and every mode it has no other network for):
    /// ORDER:MARGIN (fcfs, sjf, f1, wfp3, unicep, or fairshare for a
    /// network seeing v5 or later; such as f1:32), or `none`;
    /// ORDER:MARGIN:WIDE leaves jobs of at least that share of the machine
    /// to the network (f1:32:0.5)
    #[arg(long = "slurp", value_name = "ORDER:MARGIN[:WIDE]", value_parser = crate::train::shortlist_arg)]
    own: Option<crate::train::Rule>,
    /// Its network for slurp's model and real runs under EASY
    #[arg(long, value_name = "ORDER:MARGIN[:WIDE]", value_parser = crate::train::shortlist_arg)]
    slurp_easy: Option<crate::train::Rule>,
    /// Its network for the reference model's committed choices (without
    /// backfilling, and with EASY unless it has one for that)
    #[arg(long, value_name = "ORDER:MARGIN[:WIDE]", value_parser = crate::train::shortlist_arg)]
    committed: Option<crate::train::Rule>,
    /// Its network for the reference model's committed choices under EASY
    #[arg(long, value_name = "ORDER:MARGIN[:WIDE]", value_parser = crate::train::shortlist_arg)]
    committed_easy: Option<crate::train::Rule>,
    /// The model's own network's shortlist once the jobs that ended show
    /// exact estimates (nine in ten ran what they asked for: a trace
    /// without requested times; fair-v14: sjf:32), in place of --slurp's,
    /// or `none`; the networks seeing v2 or later may carry one
    #[arg(long, value_name = "ORDER:MARGIN[:WIDE]", value_parser = crate::train::shortlist_arg)]
    slurp_exact: Option<crate::train::Rule>,
    /// The same for its network for slurp's model and real runs under EASY
    #[arg(long, value_name = "ORDER:MARGIN[:WIDE]", value_parser = crate::train::shortlist_arg)]
    slurp_easy_exact: Option<crate::train::Rule>,
    /// The same for its network for the reference model's committed choices
    #[arg(long, value_name = "ORDER:MARGIN[:WIDE]", value_parser = crate::train::shortlist_arg)]
    committed_exact: Option<crate::train::Rule>,
    /// The same for its network for the reference model's committed choices
    /// under EASY
    #[arg(long, value_name = "ORDER:MARGIN[:WIDE]", value_parser = crate::train::shortlist_arg)]
    committed_easy_exact: Option<crate::train::Rule>,
    /// For its network for the reference model's committed choices under
    /// EASY: pass over a job it would wait for whose reservation begins
    /// more than SHARE × the longest estimate among the running and
    /// waiting jobs away, for its best that begins sooner (fair-v11 and fair-v12: 0.5),
    /// or `none`
    #[arg(long, value_name = "SHARE", value_parser = horizon_arg)]
    horizon: Option<HorizonArg>,
    /// The same for its network for the reference model's committed
    /// choices (without backfilling, where a job it waits for idles the
    /// whole machine until it starts, and with EASY unless it has one for
    /// that), or `none`
    #[arg(long, value_name = "SHARE", value_parser = horizon_arg)]
    committed_horizon: Option<HorizonArg>,
    /// For its network for the reference model's committed choices under
    /// EASY: while more than JOBS jobs wait, widen its shortlist's margin
    /// to MARGIN (such as 512:256), or `none`
    #[arg(long, value_name = "JOBS:MARGIN", value_parser = backlog_arg)]
    backlog: Option<BacklogArg>,
    /// The same for its network for the reference model's committed
    /// choices (without backfilling, where a job it waits for idles the
    /// machine while every other job waits, and with EASY unless it has one
    /// for that; fair-v13: 1024:256), or `none`
    #[arg(long, value_name = "JOBS:MARGIN", value_parser = backlog_arg)]
    committed_backlog: Option<BacklogArg>,
}

/// `--backlog`: JOBS:MARGIN, or `none`.
#[derive(Debug, Clone, Copy)]
pub struct BacklogArg(Option<slurp_fair::backlog::Backlog>);

fn backlog_arg(text: &str) -> Result<BacklogArg, String> {
    if text == "none" {
        Ok(BacklogArg(None))
    } else {
        slurp_fair::backlog::Backlog::parse(text).map(|b| BacklogArg(Some(b)))
    }
}

/// `--horizon`: a share, or `none`.
#[derive(Debug, Clone, Copy)]
pub struct HorizonArg(Option<slurp_fair::horizon::Horizon>);

fn horizon_arg(text: &str) -> Result<HorizonArg, String> {
    if text == "none" {
        Ok(HorizonArg(None))
    } else {
        slurp_fair::horizon::Horizon::parse(text).map(|h| HorizonArg(Some(h)))
    }
}

#[derive(Args, Debug)]
pub struct JudgeArgs {
    /// The model: `fair` (the one slurp ships, fair-v1), `fair-v2` …
    /// `fair-v15` or MODEL.onnx
    #[arg(value_name = "MODEL")]
    model: String,
    /// Workloads: SWF traces or `gen:FAMILY:SEED`; judge on ones the model
    /// was not trained on
    #[arg(value_name = "TRACE", required = true)]
    traces: Vec<PathBuf>,
    /// Windows per workload (a close verdict can change with the draw:
    /// judge on several --draws or more windows before choosing)
    #[arg(long, value_name = "K", default_value_t = slurp_fair::judge::SAMPLES)]
    samples: usize,
    /// Jobs per window
    #[arg(long, value_name = "L", default_value_t = slurp_fair::judge::LEN)]
    len: usize,
    /// Seed of the windows
    #[arg(long, value_name = "S", default_value_t = slurp_fair::judge::SEED)]
    seed: u64,
    /// Judge on N draws of windows, seeds S, S+1, …: each cell's verdict
    /// in every draw, and how many draws pass (--check: every one)
    #[arg(long, value_name = "N", default_value_t = 1)]
    draws: usize,
    /// Draw windows inside jobs FROM..TO only (the span a model was not
    /// trained on, such as `320000..` or `75%..` of RICC; `..75%` is the
    /// span it was trained on)
    #[arg(long, value_name = "[FROM]..[TO]")]
    within: Option<String>,
    /// Keep only windows where FCFS (reference model, no backfilling)
    /// reaches this average bounded slowdown
    #[arg(long, value_name = "X", default_value_t = 0.0)]
    min_bsld: f64,
    /// Print JSON instead of tables
    #[arg(long)]
    json: bool,
    /// For every cell the model trails by more than 1%: the windows that
    /// make most of its excess over the fairest heuristic, the user it
    /// leaves worst off in each and what that user's jobs are like
    #[arg(long)]
    why: bool,
    /// Exit 1 unless the model wins at least 3 of every 4 cells, never
    /// trails the fairest heuristic by more than 1%, and keeps its average
    /// within 1.1× the best (in every draw)
    #[arg(long)]
    check: bool,
    /// Instead of random windows, replay each workload (or --within's
    /// span) whole, cut into N consecutive stretches (1: in one piece):
    /// months of a trace, where a backlog can last weeks, as a site replays
    /// its own (RICC's first 320,000 jobs in 4 stretches: about a minute)
    #[arg(long, value_name = "N", conflicts_with_all = ["samples", "len", "seed", "draws", "min_bsld"])]
    stretches: Option<usize>,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// `small` (64 processors, 16 users, load 0.7, bursty), `mid` (512, 48,
    /// 0.7), `large` (4,096, 128, 0.7, many wide jobs), `saturated` (256,
    /// 32, load 1), `quiet` (1,024, 64, 0.4), `deep` (8,192, 176, 0.8 in
    /// surges of days; RICC's serial share and estimates of days: for
    /// long replays)
    #[arg(value_name = "FAMILY")]
    family: String,
    /// Seed: the same family and seed give the same trace
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Jobs to generate
    #[arg(long, value_name = "N", default_value_t = slurp_sim::generate::NAMED_JOBS)]
    jobs: usize,
    /// Override the family's load (work offered over what the machine gives)
    #[arg(long, value_name = "X")]
    load: Option<f64>,
    /// Override the family's node count: a machine like your site's, with
    /// the family's habits (judge a model on machines it never saw)
    #[arg(long, value_name = "N")]
    nodes: Option<u32>,
    /// Override the family's processors per node (as `slurp sim --cores`)
    #[arg(long, value_name = "N")]
    cores: Option<u32>,
    /// Override the family's number of users
    #[arg(long, value_name = "U")]
    users: Option<u32>,
    /// Override the family's share of users whose jobs are wide (0 to 1)
    #[arg(long, value_name = "X")]
    wide: Option<f64>,
    /// Write no requested times (-1), as archive traces without estimates
    /// do: replays take each run time as its estimate, so estimates are exact
    #[arg(long)]
    no_estimates: bool,
    /// Write here instead of standard output
    #[arg(short, long, value_name = "FILE.swf")]
    output: Option<PathBuf>,
}

/// `--observation`'s values: the names of [`Sight::ALL`] from `oldest`
/// on, read as the observation itself, so that every observation slurp
/// knows is offered and no name can slip through unread.
pub(crate) fn observations(oldest: Sight) -> impl TypedValueParser<Value = Sight> {
    let names: Vec<&'static str> = Sight::ALL
        .into_iter()
        .skip_while(|&s| s != oldest)
        .map(Sight::name)
        .collect();
    PossibleValuesParser::new(names)
        .map(|name| Sight::from_name(&name).expect("a name from Sight::ALL"))
}

#[derive(Args, Debug)]
pub struct RolloutArgs {
    /// The policy network (ONNX; inputs obs f32[1,128,9], mask f32[1,128];
    /// output logits f32[1,128]); its normalisers are read from MODEL.json
    #[arg(long, value_name = "MODEL.onnx", required_unless_present = "teacher")]
    model: Option<PathBuf>,
    /// Play a heuristic instead (`fcfs`, `sjf`, `f1`, `wfp3`, `unicep`; and
    /// `fairshare` with `--sim slurp` or an observation v2 … v10) and
    /// record its choices as the actions: examples for the trainer to clone
    #[arg(long, value_name = "ORDER", conflicts_with = "model")]
    teacher: Option<String>,
    /// Workload trace (SWF, also .gz/.xz); repeat it to play episodes of
    /// several in turn (each draws its own windows)
    #[arg(long, value_name = "TRACE", required = true)]
    trace: Vec<PathBuf>,
    /// Which simulation model plays the episodes: `reference` (RL-SPEC's,
    /// whole nodes, one decision a start) or `slurp` (the runtime core, as
    /// `slurp FILE` schedules)
    #[arg(long, value_name = "MODEL", default_value = "reference", value_parser = ["reference", "slurp"])]
    sim: String,
    /// What a teacher's episodes are observed with: `v1` (scaled by the
    /// trace's maxima), `v2` (site-independent ratios), `v3` (v2 over
    /// wider slots, waiting jobs in each user's standing), `v4` (v3 with
    /// widths on a log scale), `v5` (v4 with each user's place in
    /// fair-share turns), `v7` (v5 with each job's urgency to its user),
    /// `v8` (v5 with each job's cost to the whole queue), `v9` (v5 with
    /// each job's slowdown reckoned with its user's recent runs) or `v10`
    /// (v9 with how little of each user's record is checked); a network
    /// sees what it was trained on
    #[arg(long, value_name = "V", default_value = "v1", value_parser = observations(Sight::V1))]
    observation: Sight,
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
    /// Backfill while the chosen job waits (the reference's rule in the
    /// reference model, EASY in slurp's)
    #[arg(long)]
    backfill: bool,
    /// Every other episode backfills: one policy trained for both uses
    #[arg(long, conflicts_with = "backfill")]
    mixed_backfill: bool,
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
    match command {
        PolicyCommand::Rollout(args) => rollout(args),
        PolicyCommand::Generate(args) => generate(args),
        PolicyCommand::Judge(args) => judge(args),
        PolicyCommand::Train(args) => crate::train::train(args),
        PolicyCommand::Shortlist(args) => shortlist(args),
    }
}

/// `slurp policy shortlist`: the model's bytes with its shortlists
/// rewritten, checked by loading them before they are written.
fn shortlist(args: &ShortlistArgs) -> std::io::Result<ExitCode> {
    use slurp_fair::model::{
        COMMITTED_BACKLOG, COMMITTED_EASY_BACKLOG, COMMITTED_EASY_EXACT_SHORTLIST,
        COMMITTED_EASY_HORIZON, COMMITTED_EASY_SHORTLIST, COMMITTED_EXACT_SHORTLIST,
        COMMITTED_HORIZON, COMMITTED_SHORTLIST, EXACT_SHORTLIST, SHORTLIST,
        SLURP_EASY_EXACT_SHORTLIST, SLURP_EASY_SHORTLIST,
    };
    let file = match slurp_fair::spec::Source::of(&args.model).read() {
        Ok(file) => file,
        Err(e) => return Ok(usage(e)),
    };
    let name = file.name.display().to_string();
    let load = |bytes: &[u8]| file.load_bytes(bytes);
    let model = match load(&file.bytes) {
        Ok(m) => m,
        Err(e) => return Ok(usage(e)),
    };
    // A rule for a network the model does not carry would be read by
    // nothing: that mode is the model's own network's (`--slurp`).
    let carried = [
        (
            "--slurp-easy",
            &args.slurp_easy,
            model.slurp_easy().is_some(),
            "slurp's model under EASY",
        ),
        (
            "--slurp-easy-exact",
            &args.slurp_easy_exact,
            model.slurp_easy().is_some(),
            "slurp's model under EASY",
        ),
        (
            "--committed",
            &args.committed,
            model.carries(false),
            "committed choices",
        ),
        (
            "--committed-exact",
            &args.committed_exact,
            model.carries(false),
            "committed choices",
        ),
        (
            "--committed-easy",
            &args.committed_easy,
            model.carries(true),
            "committed choices under EASY",
        ),
        (
            "--committed-easy-exact",
            &args.committed_easy_exact,
            model.carries(true),
            "committed choices under EASY",
        ),
    ];
    // Horizons and backlog rules are read only by a network for committed
    // choices; the EASY flag points to the other where that one serves both.
    for (rule, easy_asked, committed_asked, easy_flag, committed_flag) in [
        (
            "a horizon",
            args.horizon.is_some(),
            args.committed_horizon.is_some(),
            "--horizon",
            "--committed-horizon",
        ),
        (
            "a backlog rule",
            args.backlog.is_some(),
            args.committed_backlog.is_some(),
            "--backlog",
            "--committed-backlog",
        ),
    ] {
        if easy_asked && !model.carries(true) {
            let instead = if model.carries(false) {
                format!(
                    "; {committed_flag} gives one to its network for committed choices, which serves EASY too"
                )
            } else {
                format!(", nor any for committed choices: {rule} applies only to such choices")
            };
            return Ok(usage(format!(
                "{easy_flag}: {name} carries no network of its own for committed choices under EASY{instead}"
            )));
        }
        if committed_asked && !model.carries(false) {
            return Ok(usage(format!(
                "{committed_flag}: {name} carries no network of its own for committed choices, the only choices {rule} applies to"
            )));
        }
    }
    for (flag, asked, has, what) in carried {
        if asked.is_some() && !has {
            return Ok(usage(format!(
                "{flag}: {name} carries no network of its own for {what}; its own network chooses there, and `--slurp` (`--slurp-exact`) gives it its shortlist"
            )));
        }
    }
    // A rule a network cannot read (`fairshare` without fair-share turns)
    // is refused naming its flag, not the metadata key it would be under.
    let seeing = [
        ("--slurp", &args.own, Some(&model), false),
        ("--slurp-exact", &args.slurp_exact, Some(&model), true),
        ("--slurp-easy", &args.slurp_easy, model.slurp_easy(), false),
        (
            "--slurp-easy-exact",
            &args.slurp_easy_exact,
            model.slurp_easy(),
            true,
        ),
        (
            "--committed",
            &args.committed,
            Some(model.committed(false)),
            false,
        ),
        (
            "--committed-exact",
            &args.committed_exact,
            Some(model.committed(false)),
            true,
        ),
        (
            "--committed-easy",
            &args.committed_easy,
            Some(model.committed(true)),
            false,
        ),
        (
            "--committed-easy-exact",
            &args.committed_easy_exact,
            Some(model.committed(true)),
            true,
        ),
    ];
    for (flag, asked, net, exact) in seeing {
        let (Some(rule), Some(net)) = (asked.and_then(|r| r.0), net) else {
            continue;
        };
        if let Some(reason) = rule.unreadable_by(net.sight) {
            return Ok(usage(format!("{flag}: {reason}")));
        }
        // The count of ended jobs is kept by v2's standing and later.
        if exact && net.sight == Sight::V1 {
            return Ok(usage(format!(
                "{flag}: the network sees observation v1, which keeps no account of the jobs that ended; a v2 … v10 model can have a shortlist for exact estimates"
            )));
        }
    }
    // A backlog rule widens its network's shortlist: one left without a
    // shortlist (`--committed none`, `--clear`, or a rule given to a
    // network that has none) is refused naming the flags that mend it,
    // rather than by the loader naming metadata keys.
    for (flag, asked, backlog_flag, backlog_asked, easy) in [
        (
            "--committed",
            &args.committed,
            "--committed-backlog",
            &args.committed_backlog,
            false,
        ),
        (
            "--committed-easy",
            &args.committed_easy,
            "--backlog",
            &args.backlog,
            true,
        ),
    ] {
        if !model.carries(easy) {
            continue;
        }
        let net = model.committed(easy);
        let list = match asked {
            Some(rule) => rule.0,
            None if args.clear => None,
            None => net.shortlist(),
        };
        let backlog = match backlog_asked {
            Some(BacklogArg(b)) => *b,
            None if args.clear => None,
            None => net.backlog(),
        };
        if let (Some(b), None) = (backlog, list) {
            return Ok(usage(format!(
                "{name}'s network for committed choices{} would keep its backlog rule {b} with no shortlist for it to widen: give it one ({flag} ORDER:MARGIN), or take the rule away ({backlog_flag} none)",
                if easy { " under EASY" } else { "" }
            )));
        }
    }
    let mut set: Vec<(&str, Option<String>)> = Vec::new();
    for (key, asked) in [
        (SHORTLIST, &args.own),
        (SLURP_EASY_SHORTLIST, &args.slurp_easy),
        (COMMITTED_SHORTLIST, &args.committed),
        (COMMITTED_EASY_SHORTLIST, &args.committed_easy),
        (EXACT_SHORTLIST, &args.slurp_exact),
        (SLURP_EASY_EXACT_SHORTLIST, &args.slurp_easy_exact),
        (COMMITTED_EXACT_SHORTLIST, &args.committed_exact),
        (COMMITTED_EASY_EXACT_SHORTLIST, &args.committed_easy_exact),
    ] {
        match asked {
            Some(rule) => set.push((key, rule.0.map(|r| r.to_string()))),
            None if args.clear => set.push((key, None)),
            None => {}
        }
    }
    let horizons = [
        (
            COMMITTED_EASY_HORIZON,
            args.horizon.map(|h| h.0.map(|h| h.to_string())),
        ),
        (
            COMMITTED_HORIZON,
            args.committed_horizon.map(|h| h.0.map(|h| h.to_string())),
        ),
        (
            COMMITTED_EASY_BACKLOG,
            args.backlog.map(|b| b.0.map(|b| b.to_string())),
        ),
        (
            COMMITTED_BACKLOG,
            args.committed_backlog.map(|b| b.0.map(|b| b.to_string())),
        ),
    ];
    for (key, asked) in horizons {
        match asked {
            Some(value) => set.push((key, value)),
            None if args.clear => set.push((key, None)),
            None => {}
        }
    }
    if set.is_empty() {
        return Ok(usage(
            "nothing to change: give --slurp, --slurp-easy, --committed or --committed-easy (ORDER:MARGIN[:WIDE] or none), their -exact kin, --horizon or --committed-horizon (SHARE or none), --backlog or --committed-backlog (JOBS:MARGIN or none), or --clear",
        ));
    }
    let written = match slurp_fair::export::renoted(&file.bytes, &set) {
        Ok(b) => b,
        Err(e) => return Ok(usage(format!("{name}: {e}"))),
    };
    let model = match load(&written) {
        Ok(m) => m,
        Err(e) => return Ok(usage(e)),
    };
    std::fs::write(&args.output, &written)?;
    if let Some(json) = &file.normalisers {
        std::fs::write(sidecar(&args.output), json.as_bytes())?;
    }
    eprintln!("wrote {}: {}", args.output.display(), shortlists(&model));
    Ok(ExitCode::SUCCESS)
}

/// A network's shortlists as every report names them: its own (`none`
/// without one), then the one it plays once estimates prove exact
/// (`exact.rs`); `None` when it has neither.
fn shortlist_named(m: &Model) -> Option<String> {
    match (m.shortlist(), m.exact()) {
        (None, None) => None,
        (Some(own), None) => Some(own.to_string()),
        (own, Some(exact)) => Some(format!(
            "{} ({exact} once estimates prove exact)",
            own.map_or("none".to_owned(), |l| l.to_string())
        )),
    }
}

/// Each network's shortlist, as `policy shortlist` reports them.
fn shortlists(m: &Model) -> String {
    let rule = |m: &Model| shortlist_named(m).unwrap_or_else(|| "none".to_owned());
    let mut parts = vec![format!("its own network {}", rule(m))];
    if let Some(easy) = m.slurp_easy() {
        parts.push(format!("slurp's model under EASY {}", rule(easy)));
    }
    if m.carries(false) {
        parts.push(format!("committed choices {}", rule(m.committed(false))));
    }
    if m.carries(true) {
        parts.push(format!(
            "committed choices under EASY {}",
            rule(m.committed(true))
        ));
    }
    let mut horizon = String::new();
    if let Some(h) = m
        .carries(false)
        .then(|| m.committed(false).horizon())
        .flatten()
    {
        horizon += &format!("; horizon {h}× the longest estimate for committed choices");
    }
    if let Some(h) = m
        .carries(true)
        .then(|| m.committed(true).horizon())
        .flatten()
    {
        horizon += &format!("; horizon {h}× the longest estimate for choices kept under EASY");
    }
    if let Some(b) = m
        .carries(false)
        .then(|| m.committed(false).backlog())
        .flatten()
    {
        horizon += &format!(
            "; margin {} for committed choices while more than {} jobs wait",
            b.margin, b.jobs
        );
    }
    if let Some(b) = m
        .carries(true)
        .then(|| m.committed(true).backlog())
        .flatten()
    {
        horizon += &format!(
            "; margin {} for choices kept under EASY while more than {} jobs wait",
            b.margin, b.jobs
        );
    }
    format!("shortlists: {}{horizon}", parts.join("; "))
}

impl JudgeArgs {
    /// `slurp policy judge MODEL TRACES --samples K --within SPAN` with
    /// the other options at their defaults.
    pub fn new(model: String, traces: Vec<PathBuf>, samples: usize, within: String) -> JudgeArgs {
        JudgeArgs {
            model,
            traces,
            samples,
            len: slurp_fair::judge::LEN,
            seed: slurp_fair::judge::SEED,
            draws: 1,
            within: Some(within),
            min_bsld: 0.0,
            json: false,
            why: false,
            check: false,
            stretches: None,
        }
    }
}

pub fn judge(args: &JudgeArgs) -> std::io::Result<ExitCode> {
    use slurp_fair::judge::{self, Cell};
    let source = slurp_fair::spec::Source::of(&args.model);
    let builtin = matches!(source, slurp_fair::spec::Source::BuiltIn(_));
    let net = match source.load().map(std::sync::Arc::new) {
        Ok(m) => m,
        Err(e) => return Ok(usage(e)),
    };
    let label = if builtin {
        args.model.clone()
    } else {
        std::path::Path::new(&args.model)
            .file_name()
            .map_or(args.model.clone(), |n| n.to_string_lossy().into_owned())
    };
    if args.samples == 0 || args.len == 0 || args.draws == 0 || args.stretches == Some(0) {
        return Ok(usage(
            "--samples, --len, --draws and --stretches: at least 1",
        ));
    }
    if !args.min_bsld.is_finite() {
        return Ok(usage(format!(
            "--min-bsld {}: give a number, such as 3",
            args.min_bsld
        )));
    }
    // Each workload is read once, whatever the number of draws.
    let mut workloads = Vec::new();
    for path in &args.traces {
        let workload = match Workload::read(path) {
            Ok(w) => w,
            Err(e) => return Ok(usage(e)),
        };
        let within = match args
            .within
            .as_deref()
            .map(|t| Window::parse_span(t, workload.jobs.len()))
            .transpose()
        {
            Ok(w) => w,
            Err(e) => return Ok(usage(format!("--within {e}"))),
        };
        for caveat in workload.caveats() {
            eprintln!("warning: {}: {caveat}", path.display());
        }
        workloads.push((path, workload, within));
    }
    let mut draws: Vec<JudgedDraw> = Vec::new();
    for seed in (0..args.draws as u64).map(|i| args.seed.wrapping_add(i)) {
        let mut cells: Vec<(Cell, Option<judge::Why>)> = Vec::new();
        for (path, workload, within) in &workloads {
            let room = within.map_or(workload.jobs.len(), |w| w.len);
            let windows = match args.stretches {
                Some(n) => {
                    let span = within.unwrap_or(Window {
                        start: 0,
                        len: workload.jobs.len(),
                    });
                    span.stretches(n)
                }
                None => slurp_sim::window::Draw {
                    count: args.samples,
                    len: args.len.min(room),
                    seed,
                    within: *within,
                    min_bsld: args.min_bsld,
                }
                .windows(workload, |_| true),
            };
            let windows = match windows {
                Ok(w) => w,
                Err(e) => return Ok(usage(format!("{}: {e}", path.display()))),
            };
            let name = path.to_string_lossy();
            let name = name.rsplit('/').next().unwrap_or(&name);
            match judge::explained(&net, &label, name, workload, &windows, args.why) {
                Ok(c) => cells.extend(c),
                Err(e) => return Ok(usage(e)),
            }
        }
        draws.push(JudgedDraw::of(seed, cells));
    }
    let passed = draws.iter().all(|d| d.tally.passes());
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if args.json {
        let rule = |m: Option<&Model>| m.and_then(Model::shortlist).map(|l| l.to_string());
        let mut doc = serde_json::json!({
            "model": args.model,
            "observation": net.sight.name(),
            "committed_network": net.carries(false),
            "committed_observation": net.carries(false).then(|| net.committed(false).sight.name()),
            "committed_easy_network": net.carries(true),
            "committed_easy_observation": net.carries(true).then(|| net.committed(true).sight.name()),
            "slurp_easy_network": net.slurp_easy().is_some(),
            "slurp_easy_observation": net.slurp_easy().map(|m| m.sight.name()),
            // Each network's shortlist (`ORDER:MARGIN[:WIDE]`), null where it has none.
            "shortlist": rule(Some(&net)),
            "slurp_easy_shortlist": rule(net.slurp_easy()),
            "committed_shortlist": rule(net.carries(false).then(|| net.committed(false))),
            "committed_easy_shortlist": rule(net.carries(true).then(|| net.committed(true))),
            // The horizon of its choices kept until they start (a share
            // of the longest estimate in sight), without backfilling and
            // under EASY; null where it has none.
            "committed_horizon": net.committed(false).horizon().map(|h| h.share),
            "committed_easy_horizon": net.committed(true).horizon().map(|h| h.share),
            // The backlog rule of each network for committed choices
            // (`JOBS:MARGIN`), null where it has none.
            "committed_backlog": net.committed(false).backlog().map(|b| b.to_string()),
            "committed_easy_backlog": net.committed(true).backlog().map(|b| b.to_string()),
            // Consecutive stretches of each workload (`--stretches`) in
            // place of random windows; null for windows.
            "stretches": args.stretches,
            // The random windows' draw; null for stretches, which have none.
            "samples": args.stretches.is_none().then_some(args.samples),
            "len": args.stretches.is_none().then_some(args.len),
            "seed": args.stretches.is_none().then_some(args.seed),
            "passed": passed,
        });
        let fields = |d: &JudgedDraw| {
            let cells: Vec<serde_json::Value> = d
                .cells
                .iter()
                .zip(&d.whys)
                .map(|(c, why)| {
                    let mut cell = serde_json::json!(c.judged());
                    if let Some(why) = why {
                        cell["why"] = serde_json::json!(why);
                    }
                    cell
                })
                .collect();
            serde_json::json!({
                "seed": d.seed,
                "cells": cells,
                "wins": d.tally.wins,
                "holds": d.tally.holds,
                "averages_within": d.tally.averages,
                "passed": d.tally.passes(),
            })
        };
        // One draw: its figures at the top level, as before `--draws`.
        match &draws[..] {
            [one] => {
                if let (Some(doc), serde_json::Value::Object(one)) =
                    (doc.as_object_mut(), fields(one))
                {
                    doc.extend(one.into_iter().filter(|(k, _)| k != "seed"));
                }
            }
            _ => doc["draws"] = draws.iter().map(fields).collect(),
        }
        serde_json::to_writer_pretty(&mut out, &doc).map_err(std::io::Error::other)?;
        writeln!(out)?;
    } else {
        if let [one] = &draws[..] {
            write_table(&mut out, &net, &label, args, one)?;
        } else {
            write_draws(&mut out, &net, &label, args, &draws, passed)?;
        }
        if args.why {
            write_why(&mut out, &label, &draws)?;
        }
    }
    Ok(if args.check && !passed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// One draw of windows judged: its cells, where each trails (when it
/// does), and the check's counts.
struct JudgedDraw {
    seed: u64,
    cells: Vec<slurp_fair::judge::Cell>,
    whys: Vec<Option<slurp_fair::judge::Why>>,
    tally: slurp_fair::judge::Tally,
}

impl JudgedDraw {
    fn of(
        seed: u64,
        explained: Vec<(slurp_fair::judge::Cell, Option<slurp_fair::judge::Why>)>,
    ) -> JudgedDraw {
        let (cells, whys): (Vec<_>, Vec<_>) = explained.into_iter().unzip();
        let tally = slurp_fair::judge::Tally::of(&cells);
        JudgedDraw {
            seed,
            cells,
            whys,
            tally,
        }
    }

    fn summary(&self) -> String {
        let t = &self.tally;
        format!(
            "wins {} of {} cells (≥ 1% below every heuristic's worst user), holds {} (≤ 1% above the fairest), average within 1.1× the best in {}: {}",
            t.wins,
            t.cells,
            t.holds,
            t.averages,
            if t.passes() {
                "passes"
            } else {
                "does not pass"
            }
        )
    }
}

/// What each workload was replayed as: random windows, or consecutive
/// stretches.
fn replays(args: &JudgeArgs, seed: u64) -> String {
    let span = args
        .within
        .as_deref()
        .map_or(String::new(), |w| format!(" (jobs {w})"));
    match args.stretches {
        Some(1) => format!("each workload{span} whole, in one replay"),
        Some(n) => format!("each workload{span} whole, in {n} consecutive stretches"),
        None => format!(
            "{} of {} jobs a workload (seed {seed})",
            plural(args.samples, "window"),
            args.len
        ),
    }
}

/// One draw's table: every policy's figures per cell, and the verdict.
fn write_table(
    out: &mut impl std::io::Write,
    net: &Model,
    label: &str,
    args: &JudgeArgs,
    draw: &JudgedDraw,
) -> std::io::Result<()> {
    use slurp_fair::judge;
    writeln!(
        out,
        "{label} (observation {}{}) on {}; worst user's mean bounded slowdown, average in brackets\n",
        net.sight.name(),
        networks_header(net),
        replays(args, draw.seed),
    )?;
    let rivals: Vec<&str> = judge::RIVALS.iter().map(|o| o.name()).collect();
    writeln!(
        out,
        "| workload | model | backfill | {} | {label} | fairest heuristic | verdict |",
        rivals.join(" | ")
    )?;
    writeln!(out, "|{}", "---|".repeat(rivals.len() + 6))?;
    let fmt = |s: &judge::Score| {
        format!(
            "{:.2} ({:.2})",
            s.worst_user_bounded_slowdown, s.avg_bounded_slowdown
        )
    };
    for c in &draw.cells {
        writeln!(
            out,
            "| {} | {} | {} | {} | **{}** | {} | {} |",
            c.workload,
            c.model,
            if c.backfill { "easy" } else { "none" },
            c.rivals.iter().map(fmt).collect::<Vec<_>>().join(" | "),
            fmt(&c.learned),
            c.fairest_rival().policy,
            verdict(c),
        )?;
    }
    writeln!(out, "\n{}", draw.summary())
}

/// `--why`: for each cell the model does not hold, in each draw, the
/// windows that make most of its excess and the user worst off in each.
fn write_why(
    out: &mut impl std::io::Write,
    label: &str,
    draws: &[JudgedDraw],
) -> std::io::Result<()> {
    let trailing = draws.iter().flat_map(|d| d.whys.iter()).flatten().count();
    writeln!(
        out,
        "\nWhy {label} trails: {trailing} cell{} more than 1% above the fairest heuristic",
        if trailing == 1 { "" } else { "s" }
    )?;
    for d in draws {
        for (c, why) in d.cells.iter().zip(&d.whys) {
            let Some(why) = why else { continue };
            let seed = if draws.len() > 1 {
                format!(" (seed {})", d.seed)
            } else {
                String::new()
            };
            writeln!(
                out,
                "\n{}, {}, {}{seed}: {:.2} against {}'s {:.2} ({:.3}×); {:.0}% of the excess in windows where the user worst off runs jobs of at least half the machine",
                c.workload,
                c.model,
                if c.backfill { "easy" } else { "none" },
                c.learned.worst_user_bounded_slowdown,
                why.against,
                c.fairest_rival().worst_user_bounded_slowdown,
                c.ratios().0,
                100.0 * why.wide,
            )?;
            for w in &why.windows {
                writeln!(
                    out,
                    "  jobs {}..{} ({:.0}% of the excess): user {}, {:.1} against {:.1} under {}; {} job{}, median {:.1}% of the machine, {} run of {} asked",
                    w.start,
                    w.start + w.len,
                    100.0 * w.share,
                    w.user,
                    w.learned,
                    w.heuristic,
                    why.against,
                    w.jobs,
                    if w.jobs == 1 { "" } else { "s" },
                    100.0 * w.width,
                    slurp_report::gantt::duration(w.run),
                    slurp_report::gantt::duration(w.estimate),
                )?;
            }
        }
    }
    Ok(())
}

/// A cell's verdict as the tables write it.
fn verdict(c: &slurp_fair::judge::Cell) -> String {
    let verdict = if c.wins() {
        "wins"
    } else if c.holds() {
        "holds"
    } else {
        "loses"
    };
    if c.average_ok() {
        verdict.to_owned()
    } else {
        format!("{verdict}, average > 1.1× best")
    }
}

/// Several draws: per cell, the model's worst user against the fairest
/// heuristic's in each draw, their geometric mean and the worst, and how
/// many draws give each verdict; then each draw's counts.
fn write_draws(
    out: &mut impl std::io::Write,
    net: &Model,
    label: &str,
    args: &JudgeArgs,
    draws: &[JudgedDraw],
    passed: bool,
) -> std::io::Result<()> {
    let n = draws.len();
    writeln!(
        out,
        "{label} (observation {}{}) on {n} draws of {} of {} jobs a workload (seeds {}–{}); worst user's mean bounded slowdown ÷ the fairest heuristic's in each draw, average ÷ the best heuristic's in brackets\n",
        net.sight.name(),
        networks_header(net),
        plural(args.samples, "window"),
        args.len,
        draws[0].seed,
        draws[n - 1].seed,
    )?;
    writeln!(
        out,
        "| workload | model | backfill | each draw | geometric mean, worst | wins | holds | average within 1.1× |"
    )?;
    writeln!(out, "|---|---|---|---|---|---|---|---|")?;
    for (i, c) in draws[0].cells.iter().enumerate() {
        let all: Vec<&slurp_fair::judge::Cell> = draws.iter().map(|d| &d.cells[i]).collect();
        let ratios: Vec<String> = all
            .iter()
            .map(|c| {
                let (worst, average) = c.ratios();
                format!("{worst:.3} ({average:.2})")
            })
            .collect();
        // Over many draws, the typical ratio and the worst one say more
        // than a count of verdicts that flip at 1%.
        let t = slurp_fair::judge::Tally::of(all.iter().copied());
        writeln!(
            out,
            "| {} | {} | {} | {} | {:.3}, {:.3} | {} of {n} | {} of {n} | {} of {n} |",
            c.workload,
            c.model,
            if c.backfill { "easy" } else { "none" },
            ratios.join(", "),
            t.geometric,
            t.worst,
            t.wins,
            t.holds,
            t.averages,
        )?;
    }
    writeln!(out)?;
    for d in draws {
        writeln!(out, "seed {}: {}", d.seed, d.summary())?;
    }
    writeln!(
        out,
        "\npasses on {} of {n} draws{}",
        draws.iter().filter(|d| d.tally.passes()).count(),
        if passed { "" } else { ": does not pass" }
    )
}

fn generate(args: &GenerateArgs) -> std::io::Result<ExitCode> {
    let family: Family = match args.family.parse() {
        Ok(f) => f,
        Err(e) => return Ok(usage(e)),
    };
    if args.jobs == 0 || args.jobs > 10_000_000 {
        return Ok(usage(format!("--jobs {}: give 1 to 10,000,000", args.jobs)));
    }
    let mut spec = family.spec(args.jobs);
    if let Some(load) = args.load {
        if !(load > 0.0 && load <= 10.0) {
            return Ok(usage(format!(
                "--load {load}: give a number above 0 and at most 10, such as 0.9"
            )));
        }
        spec.load = load;
    }
    // Bounds that keep a trace generable: the machine's processors fit
    // SWF's and the simulator's u32, and Zipf's users are at least one.
    for (flag, value, max, slot) in [
        ("--nodes", args.nodes, 1_000_000, &mut spec.nodes),
        ("--cores", args.cores, 4_096, &mut spec.procs_per_node),
        ("--users", args.users, 100_000, &mut spec.users),
    ] {
        if let Some(v) = value {
            if v == 0 || v > max {
                return Ok(usage(format!("{flag} {v}: give 1 to {max}")));
            }
            *slot = v;
        }
    }
    if spec.nodes as u64 * spec.procs_per_node as u64 > 4_000_000 {
        return Ok(usage(format!(
            "--nodes {} × --cores {}: at most 4,000,000 processors",
            spec.nodes, spec.procs_per_node
        )));
    }
    if let Some(wide) = args.wide {
        if !(0.0..=1.0).contains(&wide) {
            return Ok(usage(format!("--wide {wide}: give a share from 0 to 1")));
        }
        spec.wide = wide;
    }
    spec.estimates = !args.no_estimates;
    let text = slurp_sim::generate::generate(&spec, args.seed).to_swf();
    match &args.output {
        Some(path) => std::fs::write(path, text)
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?,
        None => {
            use std::io::Write;
            std::io::stdout().lock().write_all(text.as_bytes())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn rollout(args: &RolloutArgs) -> std::io::Result<ExitCode> {
    let score: Score = match args.score.parse() {
        Ok(s) => s,
        Err(e) => return Ok(usage(e)),
    };
    let mut workloads = Vec::new();
    for path in &args.trace {
        match Workload::read(path) {
            Ok(w) => workloads.push(w),
            Err(e) => return Ok(usage(e)),
        }
    }
    let workload = &workloads[0];
    // A model without normalisers beside it (a trainer's first) takes the
    // first trace's; they are written out so the trainer can keep them
    // with it.
    let own = Normalisers::of(workload);
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
            .ok_or_else(|| {
                format!("unknown heuristic `{name}` (fcfs, sjf, f1, wfp3, unicep, fairshare)")
            })
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
            // Its order is the users' usage, kept by slurp's model and, in
            // the reference model, by the v2 … v10 observations.
            Ok(Order::Fairshare) if args.sim != "slurp" && args.observation == Sight::V1 => {
                return Ok(usage(
                    "--teacher fairshare: ranks users by their usage, which the v1 observation does not keep (add --observation v2 … v10, or --sim slurp)",
                ));
            }
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
        model: if args.sim == "slurp" {
            slurp_sim::Model::Slurp
        } else {
            slurp_sim::Model::Reference
        },
        sight: args.observation,
        mixed: args.mixed_backfill,
    };
    let sight = match &model {
        Some(m) => m.sight,
        None => opts.sight,
    };
    let started = std::time::Instant::now();
    let trajectories = match rollout::rollout(player, &workloads, &opts) {
        Ok(t) => t,
        Err(e) => return Ok(usage(e)),
    };
    rollout::write(&args.out, &trajectories)?;
    // What a model trained on these episodes must see: v2's name, or v1's
    // scales.
    let written = match sight {
        Sight::V1 => serde_json::to_string_pretty(&normalisers),
        _ => serde_json::to_string_pretty(&serde_json::json!({ "observation": sight.name() })),
    }
    .map_err(std::io::Error::other)?;
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
        match (&args.model, sight) {
            (Some(path), Sight::V1) if sidecar(path).exists() => "",
            (_, Sight::V1) => " (normalisers from the trace)",
            _ => "",
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// What a judge's table says of a model's other networks: for slurp's
/// model under EASY, and for the reference model's committed choices; ""
/// when it has none.
fn networks_header(net: &Model) -> String {
    let listed = |m: &Model| {
        shortlist_named(m).map_or(String::new(), |l| format!(", shortlist {l}"))
            + &m.horizon().map_or(String::new(), |h| {
                format!(", reservations within {h}× the longest estimate")
            })
            + &m.backlog().map_or(String::new(), |b| {
                format!(", margin {} while more than {} jobs wait", b.margin, b.jobs)
            })
    };
    let seeing = |m: &Model| {
        let sees = if m.sight == net.sight {
            String::new()
        } else {
            format!(", seeing {}", m.sight.name())
        };
        sees + &listed(m)
    };
    let easy = listed(net)
        + &net.slurp_easy().map_or(String::new(), |m| {
            format!("; its own network for slurp's model with EASY{}", seeing(m))
        });
    easy + &match (net.carries(false), net.carries(true)) {
        (false, false) => String::new(),
        (true, false) => format!(
            "; its own network for the reference model's committed choices{}",
            seeing(net.committed(false))
        ),
        (false, true) => format!(
            "; its own network for the reference model's committed choices with EASY{}",
            seeing(net.committed(true))
        ),
        (true, true) => format!(
            "; its own network for the reference model's committed choices without backfilling{}, and another with EASY{}",
            seeing(net.committed(false)),
            seeing(net.committed(true))
        ),
    }
}
