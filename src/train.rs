//! `slurp policy train TRACE... -o site.onnx`: a site's own learned policy
//! in one command. The PyTorch trainer (`fair/trainer/`, built into the
//! binary) runs with Python — CUDA when present, CPU otherwise — on the
//! first part of every trace (the last quarter is kept out), with the
//! recipe of fair-v2 (`stdlib/policies/MODEL_CARD.md`): the
//! site-independent observation, slurp's own model, every other episode
//! backfilled, `fairshare`'s choices cloned as a warm start, and the worst
//! user's bounded slowdown against `fairshare`'s as the reward. Then the kept
//! models are ranked on busy training-side windows, the best is written,
//! and it is judged on the held-out quarter (`slurp policy judge`'s
//! table).

use std::io::{self, BufRead, BufReader};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use slurp_fair::backlog::Backlog;
use slurp_fair::horizon::Horizon;
use slurp_fair::judge;
use slurp_fair::model;
use slurp_fair::shortlist::Shortlist;
use slurp_fair::{Model, Sight};
use slurp_sim::window::Draw;
use slurp_sim::{Model as SimModel, Window};

/// The trainer's files, as the repository has them.
const TRAINER: [(&str, &str); 3] = [
    ("train.py", include_str!("../fair/trainer/train.py")),
    (
        "onnx_actor.py",
        include_str!("../fair/trainer/onnx_actor.py"),
    ),
    (
        "requirements.txt",
        include_str!("../fair/trainer/requirements.txt"),
    ),
];

/// How a model is trained.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// CMA-ES over the network, scored on the judge's own cells (built in)
    Evolve,
    /// PPO with the PyTorch trainer (needs Python with PyTorch)
    Ppo,
}

/// Which simulation model a search's cells replay.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Models {
    /// slurp's own and RLScheduler's reference model
    Both,
    /// slurp's own model only (what real runs schedule with)
    Slurp,
    /// RLScheduler's reference model only (a choice is kept until it starts)
    Reference,
}

/// A network of a model file and the observation it sees.
type Net = (Vec<slurp_fair::export::Dense>, Sight, Option<Shortlist>);

/// Which of a model's networks a search trains: the model's own (slurp's
/// model, real runs), its own for slurp's model under EASY alone, or one
/// for the reference model's committed choices, for both backfilling modes
/// or for EASY alone.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Main,
    SlurpEasy,
    Committed,
    Easy,
}

/// What a search keeps of the model it starts from, beside the network it
/// trains: the others, each as it was, so that a search for one kind of
/// cell leaves every other kind's choices unchanged.
#[derive(Default)]
struct Keep {
    main: Option<Net>,
    committed: Option<Net>,
    easy: Option<Net>,
    slurp_easy: Option<Net>,
    /// The horizon of the start's network for committed choices under
    /// EASY: the network written there keeps it, and a search of that
    /// network plays under it.
    easy_horizon: Option<Horizon>,
    /// The same for its network for committed choices (without
    /// backfilling, and under EASY where it serves there too).
    committed_horizon: Option<Horizon>,
    /// The backlog rules (`backlog.rs`) of the same two networks, kept as
    /// their horizons are while the network keeps a shortlist to widen.
    easy_backlog: Option<Backlog>,
    committed_backlog: Option<Backlog>,
    /// The start's shortlists for exact estimates (`exact.rs`) of its own
    /// network, for slurp's model under EASY, and for committed choices
    /// without and with EASY: each written back with its network, the
    /// searched one's too (the search itself plays that network under its
    /// own shortlist only). Filled by the caller of [`keeps`].
    exact: [Option<Shortlist>; 4],
}

/// Which backfilling a search's cells replay.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backfilling {
    /// Without and with EASY
    Both,
    /// Without backfilling only
    None,
    /// With EASY only
    Easy,
}

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// The site's traces (SWF, also .gz/.xz), or `gen:FAMILY:SEED`
    #[arg(value_name = "TRACE", required = true)]
    traces: Vec<PathBuf>,
    /// Where to write the model (its learning curve and kept models go to
    /// MODEL.train/)
    #[arg(short, long, value_name = "MODEL.onnx")]
    output: PathBuf,
    /// `evolve` searches the network's weights directly on the judged
    /// objective (no Python needed); `ppo` runs the PyTorch trainer
    #[arg(long, value_enum, default_value_t = Method::Evolve)]
    method: Method,
    /// Stop training after the generation (epoch) that passes this many
    /// seconds. evolve: Ctrl-C (or SIGTERM) also ends the search after the
    /// generation running, and the network kept so far is written and
    /// judged; a second one ends slurp at once
    #[arg(long, value_name = "SECONDS", default_value_t = 3600)]
    seconds: u64,
    /// evolve: widths of the hidden layers, e.g. `8` or `8,4` (`0`: a
    /// linear score; default 8); with --init, wider layers than the model's
    /// widen it (the new units start at zero)
    #[arg(long, value_name = "W,..", value_delimiter = ',')]
    hidden: Option<Vec<usize>>,
    /// evolve: what the network sees: `v4` (v3 with job widths on a log
    /// scale), `v5` (v4 with places in fair-share turns), `v7` (v5 with
    /// each job's urgency to its user), `v8` (v5 with each job's cost to
    /// the whole queue), `v9` (v5 with each job's slowdown reckoned with
    /// the run time its user's last ended jobs predict), `v10` (v9 with how
    /// little of each user's record is checked: 1 while none of its jobs
    /// has ended) or `v3` (default: what --init's searched network sees,
    /// if v3 or later; else v4)
    #[arg(long, value_name = "V", value_parser = crate::policy::observations(Sight::V3))]
    observation: Option<Sight>,
    /// evolve: keep the generation mean that scores best on these traces'
    /// windows (drawn as the training ones; never searched on): a network
    /// that only fits the training windows is not the one kept
    #[arg(long, value_name = "TRACE", num_args = 1..)]
    validate: Vec<PathBuf>,
    /// evolve: also replay these traces whole, each cut into --stretches
    /// consecutive stretches, as cells of their own beside the windows: long
    /// replays, where a backlog builds for weeks and an idle machine costs
    /// days (windows of 1,024 jobs never show it). TRACE@SPAN replays jobs
    /// SPAN only (`RICC-2010-2.swf.xz@..160000`; FROM..TO, FROM.. or ..TO,
    /// shares such as `..50%` too); TRACE alone, its training span. With
    /// --validate they count in keeping and confirming as well. Costly: an
    /// 80,000-job stretch is a second or more a network
    #[arg(long, value_name = "TRACE[@SPAN]", num_args = 1..)]
    long: Vec<String>,
    /// evolve, with --long: stretches each long trace is cut into
    #[arg(long, value_name = "N", default_value_t = 4, requires = "long")]
    stretches: usize,
    /// evolve, with --init and --validate: judge the network found and the
    /// start on N more draws of the validation traces' windows (other
    /// seeds); unless the one found has the lower mean loss there, the
    /// network the search started from is written (the one found goes to
    /// MODEL.train/searched.onnx): a network kept because it scored best on
    /// one draw may only be lucky on it (default 8; 0: no confirmation)
    #[arg(long, value_name = "N")]
    confirm: Option<usize>,
    /// evolve: the searched network chooses through this shortlist, and is
    /// written with it: of the jobs whose logit is within MARGIN of its
    /// choice's, ORDER's first starts (fcfs, sjf, f1, wfp3, unicep, or
    /// fairshare for a network seeing v5 or later; such as f1:32;
    /// ORDER:MARGIN:WIDE leaves jobs of at least that share of the
    /// machine to the network). `none`: without one. Default: the --init
    /// network's own
    #[arg(long, value_name = "ORDER:MARGIN[:WIDE]", value_parser = shortlist_arg)]
    shortlist: Option<Rule>,
    /// evolve: stop after this many generations at most
    #[arg(long, value_name = "N", default_value_t = 400)]
    generations: usize,
    /// evolve: start from this model's network (its layers, which --hidden
    /// may only widen): to go on training one, or adapt it to a site; a
    /// file, or a built-in model's name (`fair-v5`)
    #[arg(long, value_name = "MODEL")]
    init: Option<PathBuf>,
    /// evolve: the search's initial step size (default: 0.5, or 0.1 from
    /// --init)
    #[arg(long, value_name = "S")]
    sigma: Option<f64>,
    /// evolve: proposals a generation (default: CMA-ES's for the size)
    #[arg(long, value_name = "N")]
    population: Option<usize>,
    /// evolve: training windows (1,024 jobs) a trace
    #[arg(long, value_name = "K", default_value_t = 16)]
    windows: usize,
    /// evolve, with --validate: windows (1,024 jobs) a validation trace,
    /// for keeping and for each confirmation draw (default: --windows).
    /// Each generation mean is judged on them once, a small part of a
    /// generation's cost; more of them tell close networks apart where one
    /// draw of a few keeps a lucky one
    #[arg(long, value_name = "K")]
    validate_windows: Option<usize>,
    /// evolve: score each generation on K of each trace's --windows, drawn
    /// anew every generation (default: all of them, every generation); the
    /// model kept is the generation mean that scores best on all of them
    /// (or on the --validate traces)
    #[arg(long, value_name = "K")]
    redraw: Option<usize>,
    /// evolve: count a win over the fairest heuristic up to this log ratio
    /// (the loss saturates: `-G(1 - e^(w/G))`), so the search does not trade
    /// a cell it trails for a deeper win elsewhere (default: uncapped)
    #[arg(long, value_name = "G")]
    gain: Option<f64>,
    /// evolve: pay for an average bounded slowdown beyond X times the best
    /// heuristic's (the judge's bound, 1.1, by default; a tighter one, such
    /// as 1.0, leaves a margin for workloads the search never saw)
    #[arg(long, value_name = "X", default_value_t = slurp_fair::evolve::AVERAGE_BOUND)]
    average_within: f64,
    /// evolve: train on the cells of one backfilling mode only (a model
    /// for `fair:M.onnx+easy`, say), or both. With --init and one
    /// --sim-model, that model's network for that mode alone (`slurp` and
    /// `easy`: the one real `+easy` runs use): the model keeps the other
    /// mode's as it was
    #[arg(long, value_enum, value_name = "MODE", default_value_t = Backfilling::Both)]
    backfill: Backfilling,
    /// evolve: train on the cells of one simulation model only, or both.
    /// From an --init model, `reference` trains its network for committed
    /// choices (the reference model keeps a choice until it starts) and
    /// keeps its network for slurp's model as it is; `slurp` keeps its
    /// network for committed choices, if it has one
    #[arg(long, value_enum, value_name = "MODEL", default_value_t = Models::Both)]
    sim_model: Models,
    /// evolve: keep training windows where FCFS reaches this average
    /// bounded slowdown (all windows when a trace has too few)
    #[arg(long, value_name = "X", default_value_t = 2.0)]
    min_bsld: f64,
    /// ppo: stop after this many epochs at most
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    epochs: u64,
    /// ppo: `auto` (CUDA when PyTorch sees a GPU), `cpu` or `cuda`
    #[arg(long, value_name = "DEVICE", default_value = "auto", value_parser = ["auto", "cpu", "cuda"])]
    device: String,
    /// ppo: CPU threads for PyTorch (default: all)
    #[arg(long, value_name = "N")]
    threads: Option<u32>,
    /// Keep this share of each trace's last jobs out of training, to judge
    /// the model on
    #[arg(long, value_name = "PERCENT", default_value_t = 25)]
    hold_out: u8,
    /// Seed of the windows, of the search (evolve), of the episodes and
    /// PyTorch (ppo)
    #[arg(long, value_name = "S", default_value_t = 5)]
    seed: u64,
    /// ppo: iterations of the warm start (cloning `fairshare`'s choices)
    #[arg(long, value_name = "N", default_value_t = 1500)]
    clone_iters: u32,
    /// Windows a trace to judge the model on, afterwards
    #[arg(long, value_name = "K", default_value_t = 50)]
    judge_samples: usize,
    /// ppo: the Python that has PyTorch
    #[arg(long, value_name = "PYTHON", default_value = "python3")]
    python: PathBuf,
}

fn usage(message: impl std::fmt::Display) -> io::Result<ExitCode> {
    eprintln!("error: {message}");
    Ok(ExitCode::from(2))
}

/// Whether `python` can import what the trainer needs; the missing names.
fn missing_modules(python: &Path) -> Result<Vec<String>, String> {
    let probe = "import importlib.util as u\nfor m in ('torch', 'numpy', 'onnx'):\n    print(m if u.find_spec(m) is None else '')";
    let out = Command::new(python)
        .args(["-c", probe])
        .output()
        .map_err(|e| format!("cannot run `{}`: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`{}` failed: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect())
}

pub fn train(args: &TrainArgs) -> io::Result<ExitCode> {
    if !(1..100).contains(&args.hold_out) {
        return usage(format!(
            "--hold-out {}: give a share from 1 to 99 (the model is judged on it)",
            args.hold_out
        ));
    }
    let mut workloads = Vec::new();
    for path in &args.traces {
        match slurp_sim::Workload::read(path) {
            Ok(w) => workloads.push(w),
            Err(e) => return usage(e),
        }
    }
    let work = {
        let mut name = args.output.as_os_str().to_owned();
        name.push(".train");
        PathBuf::from(name)
    };
    std::fs::create_dir_all(&work)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", work.display())))?;
    // The training side of every trace; the rest is judged afterwards.
    let split = format!("{}%", 100 - u32::from(args.hold_out));
    let trained = match args.method {
        Method::Evolve => evolve(args, workloads, &work, &split)?,
        Method::Ppo => ppo(args, &workloads, &work, &split)?,
    };
    if let Some(code) = trained {
        return Ok(code);
    }
    // Judged on the held-out quarter.
    let judge = crate::policy::JudgeArgs::new(
        args.output.to_string_lossy().into_owned(),
        args.traces.clone(),
        args.judge_samples,
        format!("{split}.."),
    );
    crate::policy::judge(&judge)
}

/// A learning curve's points as a picture beside its CSV.
fn draw_curve(work: &Path, title: &str, points: &[(f64, f64)], smooth: usize) -> io::Result<()> {
    if let Ok(svg) = slurp_sim::plot::curve(title, points, smooth) {
        std::fs::write(work.join("curve.svg"), svg)?;
        eprintln!("learning curve: {}", work.join("curve.svg").display());
    }
    Ok(())
}

/// `--method evolve`: CMA-ES on the training windows (`slurp_fair::evolve`),
/// the best network written to `args.output`. `Some(code)` when it failed.
fn evolve(
    args: &TrainArgs,
    workloads: Vec<slurp_sim::Workload>,
    work: &Path,
    split: &str,
) -> io::Result<Option<ExitCode>> {
    use slurp_fair::evolve::{self, Arena, Options, Shape};
    let asked: Option<Vec<usize>> = args
        .hidden
        .as_ref()
        .map(|h| h.iter().copied().filter(|&w| w > 0).collect());
    let hidden = asked.clone().unwrap_or_else(|| vec![8]);
    if hidden.iter().any(|&w| w > 256) {
        return usage("--hidden: layers of at most 256").map(Some);
    }
    if args.windows == 0 {
        return usage("--windows: at least 1").map(Some);
    }
    if args.redraw == Some(0) {
        return usage("--redraw: at least 1 window a trace").map(Some);
    }
    if let Some(g) = args.gain
        && !(g.is_finite() && g > 0.0)
    {
        return usage("--gain: a positive log ratio, e.g. 0.3").map(Some);
    }
    if !(args.average_within.is_finite() && args.average_within > 0.0) {
        return usage("--average-within: a positive multiple of the best average, e.g. 1.0")
            .map(Some);
    }
    let stages = match windows_of(
        args,
        workloads,
        &args.traces,
        split,
        args.seed,
        args.windows,
    ) {
        Ok(stages) => stages,
        Err(e) => return usage(e).map(Some),
    };
    let long = match long_stages(args, split) {
        Ok(long) => long,
        Err(e) => return usage(e).map(Some),
    };
    // Counted apart from the windows in what is said and written.
    let stretches: usize = long.iter().map(|(_, _, parts)| parts.len()).sum();
    let stages = stages.into_iter().chain(long.iter().cloned()).collect();
    // Validation traces: drawn as the training ones are, never searched on.
    let mut checks = Vec::new();
    for path in &args.validate {
        match slurp_sim::Workload::read(path) {
            Ok(w) => checks.push(w),
            Err(e) => return usage(e).map(Some),
        }
    }
    // Kept for the confirmation's other draws, when there is a start to
    // confirm against.
    let confirm = match args.confirm {
        // Asked for where there is nothing to confirm against: said, not
        // silently skipped.
        Some(n) if n > 0 && (args.init.is_none() || args.validate.is_empty()) => {
            return usage(
                "--confirm: a search is confirmed against its start on the --validate traces, so it needs --init and --validate",
            )
            .map(Some);
        }
        Some(n) => n,
        None => CONFIRM_DRAWS,
    };
    let checking = match args.validate_windows {
        Some(_) if args.validate.is_empty() => {
            return usage("--validate-windows: give the validation traces with --validate")
                .map(Some);
        }
        Some(0) => return usage("--validate-windows: at least 1 window a trace").map(Some),
        Some(k) => k,
        None => args.windows,
    };
    let confirming = (confirm > 0 && args.init.is_some()).then(|| checks.clone());
    // The long stretches are kept by as well: a network that loses them
    // must not be kept for its windows.
    let checks: Vec<_> = match windows_of(args, checks, &args.validate, split, args.seed, checking)
    {
        Ok(checks) if !checks.is_empty() => checks.into_iter().chain(long.clone()).collect(),
        Ok(checks) => checks,
        Err(e) => return usage(e).map(Some),
    };
    let kinds: Vec<_> = judge::KINDS
        .into_iter()
        .filter(|&(_, easy)| match args.backfill {
            Backfilling::Both => true,
            Backfilling::None => !easy,
            Backfilling::Easy => easy,
        })
        .filter(|&(model, _)| match args.sim_model {
            Models::Both => true,
            Models::Slurp => model == SimModel::Slurp,
            Models::Reference => model == SimModel::Reference,
        })
        .collect();
    let arena = Arena::of_kinds(stages, &kinds);
    let validation = (!checks.is_empty()).then(|| Arc::new(Arena::of_kinds(checks, &kinds)));
    // A search on the reference model's cells alone, from a model, trains
    // that model's network for committed choices: the model written keeps
    // the other network as it was (and a search on slurp's model keeps the
    // committed one).
    let init = match &args.init {
        None => None,
        // A built-in model by its name (`fair-v5`), as `--policy` and the
        // judge take it: an installed slurp has no copy of the file.
        Some(path) => match slurp_fair::spec::Source::of(&path.to_string_lossy()).load() {
            Ok(m) => Some((path.display(), m)),
            Err(e) => return usage(e).map(Some),
        },
    };
    // The network searched: from a model, a search on the reference
    // model's cells alone trains one for its committed choices (for EASY
    // alone with `--backfill easy`), one on slurp's model with EASY alone
    // its network for that; any other search, the model's own.
    let slot = match (&init, args.sim_model, args.backfill) {
        (Some(_), Models::Slurp, Backfilling::Easy) => Slot::SlurpEasy,
        (Some(_), Models::Reference, Backfilling::Easy) => Slot::Easy,
        (Some(_), Models::Reference, _) => Slot::Committed,
        _ => Slot::Main,
    };
    let keep = match &init {
        None => Keep::default(),
        Some((path, m)) => match keeps(m, slot, args) {
            Ok(keep) => Keep {
                exact: [
                    m.exact(),
                    m.slurp_easy().and_then(Model::exact),
                    m.carries(false)
                        .then(|| m.committed(false).exact())
                        .flatten(),
                    m.carries(true).then(|| m.committed(true).exact()).flatten(),
                ],
                ..keep
            },
            Err(why) => return usage(format!("{path}: {why}")).map(Some),
        },
    };
    // clap admits v3 and later. Each network of a model sees its own
    // observation (the model file says which), so the one searched may see
    // another than the one kept beside it.
    let sight = match (args.observation, &init) {
        (Some(asked), _) => asked,
        (None, Some((_, m))) => {
            let searched = searched(m, slot).sight;
            if searched.wide() {
                searched
            } else {
                evolve::SIGHT
            }
        }
        (None, None) => evolve::SIGHT,
    };
    let (shape, start) = match &init {
        Some((path, m)) => {
            let from = searched(m, slot).sight;
            let layers = searched(m, slot)
                .layers()
                .map(|mut layers| {
                    // An input that means another thing in the observation
                    // searched: the start stops reading it, scoring as it
                    // did at the value folded in.
                    for (input, at) in sight.refolded(from) {
                        evolve::fold_input(&mut layers, input, at);
                    }
                    layers
                })
                .ok_or_else(|| format!("{path}: not a per-slot MLP a search can start from"));
            match layers.as_deref().map(Shape::of) {
                Ok(Some((shape, params))) => match asked {
                    Some(hidden) if hidden != shape.hidden => {
                        let wide = Shape { hidden };
                        match evolve::widen(&shape, &params, &wide) {
                            Some(params) => (wide, Some(params)),
                            None => {
                                return usage(format!(
                                    "--hidden {:?}: {path} has hidden layers {:?}; a search from it can only widen them",
                                    wide.hidden,
                                    shape.hidden
                                ))
                                .map(Some);
                            }
                        }
                    }
                    _ => (shape, Some(params)),
                },
                Ok(None) => {
                    return usage(format!("{path}: its layers do not chain")).map(Some);
                }
                Err(e) => return usage(e).map(Some),
            }
        }
        None => (Shape { hidden }, None),
    };
    let sigma = args
        .sigma
        .unwrap_or(if start.is_some() { 0.1 } else { 0.5 });
    if !(sigma.is_finite() && sigma > 0.0) {
        return usage("--sigma: a positive step size").map(Some);
    }
    eprintln!(
        "evolving a network of {} weights (hidden {:?}, observation {}) on {} windows of the first {split} of {} trace{}, for up to {} s",
        shape.params(),
        shape.hidden,
        sight.name(),
        arena.windows() - stretches,
        args.traces.len(),
        if args.traces.len() == 1 { "" } else { "s" },
        args.seconds,
    );
    if !long.is_empty() {
        eprintln!(
            "and on {} whole in {} consecutive stretches each (long replays)",
            long.iter()
                .map(|(name, _, _)| name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            args.stretches
        );
    }
    if let Some(check) = &validation {
        eprintln!(
            "keeping the generation mean with the lowest loss on {} windows of {} validation trace{} (never searched on){}",
            check.windows() - stretches,
            args.validate.len(),
            if args.validate.len() == 1 { "" } else { "s" },
            if long.is_empty() {
                ""
            } else {
                " and the long replays"
            },
        );
    }
    // A search from a shortlisted network goes on under its rule.
    let shortlist = args.shortlist.map(|r| r.0).unwrap_or_else(|| {
        init.as_ref()
            .and_then(|(_, m)| searched(m, slot).shortlist())
    });
    // A rule the searched network cannot read (`fairshare` without
    // fair-share turns) is refused before the search, naming the flag.
    if let Some(reason) = shortlist.and_then(|l| l.unreadable_by(sight)) {
        let from = if args.shortlist.is_some() {
            "--shortlist"
        } else {
            "--init's shortlist"
        };
        return usage(format!(
            "{from}: {reason}; give --shortlist ORDER:MARGIN or none"
        ))
        .map(Some);
    }
    let opts = Options {
        shape: shape.clone(),
        sight,
        population: args.population,
        start,
        sigma,
        seed: args.seed,
        generations: args.generations,
        time: std::time::Duration::from_secs(args.seconds),
        loss: evolve::Loss {
            gain: args.gain,
            average_within: args.average_within,
        },
        redraw: args.redraw,
        validation,
        shortlist,
        horizon: match slot {
            Slot::Easy => keep.easy_horizon,
            Slot::Committed => keep.committed_horizon,
            Slot::Main | Slot::SlurpEasy => None,
        },
        backlog: match slot {
            Slot::Easy => keep.easy_backlog,
            Slot::Committed => keep.committed_backlog,
            Slot::Main | Slot::SlurpEasy => None,
        },
    };
    let mut csv = String::from("generation,best_loss,generation_loss,evaluations,seconds\n");
    let interrupted = on_interrupt()?;
    let mut told = false;
    let found = evolve::evolve(&arena, &opts, |g| {
        eprintln!(
            "generation {}: loss {:.4} (best {:.4}), {} evaluations, {:.0} s",
            g.generation,
            g.this,
            g.best,
            g.evaluations,
            g.elapsed.as_secs_f64()
        );
        csv.push_str(&format!(
            "{},{},{},{},{:.1}\n",
            g.generation,
            g.best,
            g.this,
            g.evaluations,
            g.elapsed.as_secs_f64()
        ));
        if interrupted.load(Ordering::Relaxed) {
            if !told {
                eprintln!(
                    "interrupted: ending the search after generation {} with the network kept so far (a second interrupt ends slurp at once, writing nothing)",
                    g.generation
                );
                told = true;
            }
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    });
    std::fs::write(work.join("curve.csv"), &csv)?;
    let found = match found {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: the search failed: {e}");
            return Ok(Some(ExitCode::from(1)));
        }
    };
    let points: Vec<(f64, f64)> = found
        .curve
        .iter()
        .map(|g| (g.generation as f64, -g.this))
        .collect();
    draw_curve(
        work,
        if args.redraw.is_some() {
            "minus the loss of each generation's best network on its draw"
        } else {
            "minus the loss of each generation's best network"
        },
        &points,
        10,
    )?;
    // The confirmation: the network found against its start on other
    // draws of the validation windows.
    let confirmed = match (&opts.start, confirming, opts.validation.is_some()) {
        (Some(start), Some(_), true) if *start == found.params => {
            eprintln!(
                "no generation scored better than the start on the validation windows: the network the search started from is written"
            );
            None
        }
        (Some(start), Some(raw), true) => {
            eprintln!(
                "confirming on {} more draws of the validation traces' windows (seeds {}..={})",
                confirm,
                args.seed.wrapping_add(1),
                args.seed.wrapping_add(confirm as u64)
            );
            let mut draws = Vec::with_capacity(confirm);
            for i in 1..=confirm as u64 {
                let seed = args.seed.wrapping_add(i);
                match windows_of(args, raw.clone(), &args.validate, split, seed, checking) {
                    Ok(stages) => draws.push(Arena::of_kinds(
                        stages.into_iter().chain(long.clone()).collect(),
                        &kinds,
                    )),
                    Err(e) => return usage(e).map(Some),
                }
            }
            match evolve::confirm(&draws, &opts, start, &found.params) {
                Ok(c) => {
                    eprintln!(
                        "the network found: mean loss {:.4} against the start's {:.4}, lower on {} of {} draws: {}",
                        c.found_mean(),
                        c.start_mean(),
                        c.wins(),
                        c.found.len(),
                        if c.better() {
                            "it is written"
                        } else {
                            "no better than its start: the network the search started from is written (the one found: searched.onnx beside the curve)"
                        }
                    );
                    Some((c, start.clone()))
                }
                Err(e) => {
                    eprintln!("error: the confirmation failed: {e}");
                    return Ok(Some(ExitCode::from(1)));
                }
            }
        }
        _ => None,
    };
    let how = format!(
        "evolved by slurp policy train (CMA-ES, hidden {:?}, seed {}{}{}{}{}{}{}{}{}) on {} windows of the first {split} of: {}; training loss {:.4} after {} generations{}",
        shape.hidden,
        args.seed,
        if long.is_empty() {
            String::new()
        } else {
            format!(
                ", with long replays of {} in {} stretches each",
                args.long.join(", "),
                args.stretches
            )
        },
        opts.shortlist.map_or(String::new(), |l| format!(
            ", choosing through shortlist {l}"
        )),
        args.redraw.map_or(String::new(), |k| format!(
            ", {k} windows a trace redrawn each generation"
        )),
        args.gain
            .map_or(String::new(), |g| format!(", gains capped at {g}")),
        if args.average_within == evolve::AVERAGE_BOUND {
            String::new()
        } else {
            format!(", averages paid for beyond {}×", args.average_within)
        },
        if args.validate.is_empty() {
            String::new()
        } else {
            format!(
                ", kept by its loss on {}",
                args.validate
                    .iter()
                    .map(|t| t.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
        match args.backfill {
            Backfilling::Both => "",
            Backfilling::None => ", without backfilling only",
            Backfilling::Easy => ", with EASY only",
        },
        match args.sim_model {
            Models::Both => "",
            Models::Slurp => ", slurp's model only",
            Models::Reference => ", the reference model only",
        },
        arena.windows() - stretches,
        args.traces
            .iter()
            .map(|t| t.to_string_lossy())
            .collect::<Vec<_>>()
            .join(", "),
        found.loss,
        found.curve.len(),
        if told {
            " (stopped by an interrupt)"
        } else {
            ""
        }
    );
    let confirmation = |c: &evolve::Confirmed| {
        format!(
            "mean loss {:.4} against the start's {:.4} on {} other draws of the validation windows",
            c.found_mean(),
            c.start_mean(),
            c.found.len()
        )
    };
    let (params, how) = match &confirmed {
        Some((c, start)) if !c.better() => {
            // What was found is not lost: written beside the curve.
            let searched = work.join("searched.onnx");
            let note = format!("{how}; not written as the model: {}", confirmation(c));
            write_searched(
                &searched,
                &shape.layers(&found.params),
                sight,
                &keep,
                slot,
                opts.shortlist,
                note,
            )?;
            (
                start.clone(),
                format!(
                    "{how}; the search's network was not confirmed ({}), so this is the network it started from",
                    confirmation(c)
                ),
            )
        }
        Some((c, _)) => (
            found.params.clone(),
            format!("{how}; confirmed: {}", confirmation(c)),
        ),
        None => (found.params.clone(), how),
    };
    write_searched(
        &args.output,
        &shape.layers(&params),
        sight,
        &keep,
        slot,
        opts.shortlist,
        how,
    )?;
    let model = match Model::load(&args.output, None) {
        Ok(m) => Arc::new(m),
        Err(e) => return usage(e).map(Some),
    };
    let cells = match arena.cells(&model, "model") {
        Ok(c) => c,
        Err(e) => return usage(e).map(Some),
    };
    let (won, ratio) = judge::rank(&cells);
    eprintln!(
        "wrote {} (on its training windows: {won} of {} cells won with the average kept, worst user {ratio:.3}× the fairest heuristic's)",
        args.output.display(),
        cells.len()
    );
    Ok(None)
}

/// A `--shortlist` as given: a rule, or `none` (a type of its own: clap
/// reads `Option<Option<_>>` as a flag whose value may be left out).
#[derive(Debug, Clone, Copy)]
pub struct Rule(pub Option<Shortlist>);

/// `--shortlist`: a rule, or `none`.
pub fn shortlist_arg(text: &str) -> Result<Rule, String> {
    if text == "none" {
        Ok(Rule(None))
    } else {
        Shortlist::parse(text).map(|s| Rule(Some(s)))
    }
}

/// Writes to `path` the model with `trained` (seeing `sight`) as its
/// network for `slot`, and the other networks `keep` has, noted as `how`.
fn write_searched(
    path: &Path,
    trained: &[slurp_fair::export::Dense],
    sight: Sight,
    keep: &Keep,
    slot: Slot,
    shortlist: Option<Shortlist>,
    how: String,
) -> io::Result<()> {
    let mut notes = vec![("slurp.trained", how)];
    let trained = Some((trained.to_vec(), sight, shortlist));
    let [main, slurp_easy, committed, easy] =
        [Slot::Main, Slot::SlurpEasy, Slot::Committed, Slot::Easy].map(|at| {
            if at == slot {
                trained.clone()
            } else {
                match at {
                    Slot::Main => keep.main.clone(),
                    Slot::SlurpEasy => keep.slurp_easy.clone(),
                    Slot::Committed => keep.committed.clone(),
                    Slot::Easy => keep.easy.clone(),
                }
            }
        });
    let listed = |key: &'static str, list: Option<Shortlist>| list.map(|l| (key, l.to_string()));
    let easy_written = easy.is_some();
    let [main_exact, slurp_easy_exact, committed_exact, easy_exact] = keep.exact;
    for (written, key, list) in [
        (
            slurp_easy.is_some(),
            model::SLURP_EASY_EXACT_SHORTLIST,
            slurp_easy_exact,
        ),
        (
            committed.is_some(),
            model::COMMITTED_EXACT_SHORTLIST,
            committed_exact,
        ),
        (
            easy_written,
            model::COMMITTED_EASY_EXACT_SHORTLIST,
            easy_exact,
        ),
        (true, model::EXACT_SHORTLIST, main_exact),
    ] {
        if written {
            notes.extend(listed(key, list));
        }
    }
    if committed.is_some() {
        notes.extend(
            keep.committed_horizon
                .map(|h| (model::COMMITTED_HORIZON, h.to_string())),
        );
    }
    for (net, easy) in [(committed, false), (easy, true)] {
        if let Some((layers, seeing, list)) = net {
            notes.extend(slurp_fair::export::committed_notes(&layers, seeing, easy));
            let (key, backlog, backlog_key) = if easy {
                (
                    model::COMMITTED_EASY_SHORTLIST,
                    keep.easy_backlog,
                    model::COMMITTED_EASY_BACKLOG,
                )
            } else {
                (
                    model::COMMITTED_SHORTLIST,
                    keep.committed_backlog,
                    model::COMMITTED_BACKLOG,
                )
            };
            notes.extend(listed(key, list));
            // A backlog rule widens the network's shortlist, so it is
            // written only with one (a search under `--shortlist none`
            // writes neither, and says so).
            match (list, backlog) {
                (Some(_), Some(b)) => notes.push((backlog_key, b.to_string())),
                (None, Some(b)) => eprintln!(
                    "note: its backlog rule {b} for committed choices{} is not kept: the network has no shortlist for it to widen",
                    if easy { " under EASY" } else { "" }
                ),
                _ => {}
            }
        }
    }
    if let Some((layers, seeing, list)) = slurp_easy {
        notes.extend(slurp_fair::export::slurp_easy_notes(&layers, seeing));
        notes.extend(listed(model::SLURP_EASY_SHORTLIST, list));
    }
    if easy_written {
        notes.extend(
            keep.easy_horizon
                .map(|h| (model::COMMITTED_EASY_HORIZON, h.to_string())),
        );
    }
    let (main, main_sight, list) = main.expect("the searched network or the start's own");
    notes.extend(listed(model::SHORTLIST, list));
    let bytes = slurp_fair::export::actor(&main, main_sight.name(), &notes);
    std::fs::write(path, bytes)
}

/// Draws of the validation windows a search from `--init` is confirmed on
/// unless `--confirm` says otherwise.
const CONFIRM_DRAWS: usize = 8;

/// A flag the first SIGINT or SIGTERM raises, so that a search the user
/// stops still writes (and judges) the network it kept: an hour's search
/// is not lost to a Ctrl-C. A second one, with the flag up, ends slurp at
/// once (exit status 130), as an impatient user expects.
fn on_interrupt() -> io::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use signal_hook::flag;
    let raised = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        // The shutdown is registered first: on the first signal it sees
        // the flag still down and does nothing; the second finds it up.
        flag::register_conditional_shutdown(signal, 130, Arc::clone(&raised))?;
        flag::register(signal, Arc::clone(&raised))?;
    }
    Ok(raised)
}

/// Each trace's windows for a search: `args.windows` of 1,024 jobs inside
/// its first `split`, busy ones (`args.min_bsld`) where it has enough,
/// drawn with `seed`.
#[allow(clippy::type_complexity)]
fn windows_of(
    args: &TrainArgs,
    workloads: Vec<slurp_sim::Workload>,
    names: &[PathBuf],
    split: &str,
    seed: u64,
    count: usize,
) -> Result<Vec<(String, slurp_sim::Workload, Vec<Window>)>, String> {
    let mut stages = Vec::new();
    for (workload, name) in workloads.into_iter().zip(names) {
        let name = name.to_string_lossy().into_owned();
        let within = Window::parse_span(&format!("0..{split}"), workload.jobs.len()).ok();
        let draw = |min_bsld: f64| Draw {
            count,
            len: 1024.min(within.map_or(workload.jobs.len(), |w| w.len)),
            seed,
            within,
            min_bsld,
        };
        let windows = match draw(args.min_bsld).windows(&workload, |_| true) {
            Ok(w) => w,
            Err(busy) => {
                eprintln!("{name}: {busy}; using any of its windows");
                draw(0.0)
                    .windows(&workload, |_| true)
                    .map_err(|e| format!("{name}: {e}"))?
            }
        };
        stages.push((name, workload, windows));
    }
    Ok(stages)
}

/// `--long`'s traces, each a stage of its own (named `TRACE@FROM..TO`)
/// whose windows are its span cut into `args.stretches` consecutive
/// stretches; without `@SPAN`, the training span (`0..split`).
#[allow(clippy::type_complexity)]
fn long_stages(
    args: &TrainArgs,
    split: &str,
) -> Result<Vec<(String, slurp_sim::Workload, Vec<Window>)>, String> {
    if !args.long.is_empty() && args.stretches == 0 {
        return Err("--stretches: at least 1 stretch a long trace".to_owned());
    }
    let mut stages = Vec::new();
    for text in &args.long {
        // A file whose own name holds `@` is that file, over its
        // training span.
        let (path, span) = match text.rsplit_once('@') {
            Some((path, span)) if !Path::new(text).exists() => (path, span.to_owned()),
            _ => (text.as_str(), format!("0..{split}")),
        };
        let workload = slurp_sim::Workload::read(Path::new(path))
            .map_err(|e| format!("--long {text}: {e}"))?;
        let span = Window::parse_span(&span, workload.jobs.len())
            .map_err(|e| format!("--long {text}: {e}"))?;
        let windows = span
            .stretches(args.stretches)
            .map_err(|e| format!("--long {text}: --stretches {}: {e}", args.stretches))?;
        let name = format!("{path}@{}..{}", span.start, span.start + span.len);
        stages.push((name, workload, windows));
    }
    Ok(stages)
}

/// The network of `m` a search for `slot` starts from.
fn searched(m: &Model, slot: Slot) -> &Model {
    match slot {
        Slot::Main => m,
        Slot::SlurpEasy => m.slurp_easy().unwrap_or(m),
        Slot::Committed => m.committed(false),
        Slot::Easy => m.committed(true),
    }
}

/// What a search for `slot` from `m` keeps of it; why it cannot start
/// from it.
fn keeps(m: &Model, slot: Slot, args: &TrainArgs) -> Result<Keep, String> {
    let easy_horizon = m.committed(true).horizon();
    let committed_horizon = m.committed(false).horizon();
    let easy_backlog = m.committed(true).backlog();
    let committed_backlog = m.committed(false).backlog();
    let own = |easy: bool| {
        m.committed_layers(easy).map(|layers| {
            (
                layers,
                m.committed(easy).sight,
                m.committed(easy).shortlist(),
            )
        })
    };
    // Its network for slurp's model under EASY, as it is.
    let slurp_easy = m.slurp_easy().and_then(|net| {
        net.layers()
            .map(|layers| (layers, net.sight, net.shortlist()))
    });
    if slot == Slot::Main {
        if args.sim_model == Models::Slurp {
            // Each mode's network for committed choices stays as it was,
            // and EASY's own in slurp's model when only the other mode is
            // searched.
            if slurp_easy.is_some() && args.backfill == Backfilling::Both {
                eprintln!(
                    "note: its network for slurp's model under EASY is not kept: a search on both backfilling modes trains one network for both"
                );
            }
            return Ok(Keep {
                main: None,
                committed: own(false),
                easy: if m.carries(true) { own(true) } else { None },
                slurp_easy: slurp_easy.filter(|_| args.backfill == Backfilling::None),
                easy_horizon,
                committed_horizon,
                easy_backlog,
                committed_backlog,
                ..Keep::default()
            });
        }
        if m.has_committed() || slurp_easy.is_some() {
            eprintln!(
                "note: its other networks (for committed choices, for slurp's model under EASY) are not kept: a search on both models trains one network for both"
            );
        }
        return Ok(Keep::default());
    }
    // The network searched is carried beside the model's own.
    let carried = if slot == Slot::SlurpEasy {
        "a network for slurp's model under EASY"
    } else {
        "a network for committed choices"
    };
    if m.sight == Sight::V1 {
        return Err(format!(
            "sees observation v1 (scaled by one trace), which cannot carry {carried}; start from a v2 … v10 model"
        ));
    }
    let Some(main) = m.layers() else {
        return Err(format!("not a per-slot MLP, so it cannot carry {carried}"));
    };
    let main = Some((main, m.sight, m.shortlist()));
    Ok(match (slot, args.backfill) {
        // Every other network stays as it was: the model's own (without
        // backfilling), and those for committed choices.
        (Slot::SlurpEasy, _) => Keep {
            main,
            committed: own(false),
            easy: if m.carries(true) { own(true) } else { None },
            slurp_easy: None,
            easy_horizon,
            committed_horizon,
            easy_backlog,
            committed_backlog,
            ..Keep::default()
        },
        // The network for no backfilling keeps serving it; EASY's is searched.
        (Slot::Easy, _) => Keep {
            committed: own(false),
            main: main.clone(),
            easy: None,
            slurp_easy,
            easy_horizon,
            committed_horizon,
            easy_backlog,
            committed_backlog,
            ..Keep::default()
        },
        // EASY keeps the network it had: its own, the shared one, or the
        // model's.
        (_, Backfilling::None) => Keep {
            easy: own(true).or_else(|| main.clone()),
            main,
            committed: None,
            slurp_easy,
            easy_horizon,
            committed_horizon,
            easy_backlog,
            committed_backlog,
            ..Keep::default()
        },
        // One network searched for both modes.
        _ => {
            if m.carries(true) {
                eprintln!(
                    "note: its network for committed choices with EASY is not kept: a search on both backfilling modes trains one network for both"
                );
            }
            Keep {
                main,
                committed: None,
                easy: None,
                slurp_easy,
                easy_horizon,
                committed_horizon,
                easy_backlog,
                committed_backlog,
                ..Keep::default()
            }
        }
    })
}

/// `--method ppo`: the PyTorch trainer, then the best kept model (ranked on
/// busy training-side windows) copied to `args.output`. `Some(code)` when
/// it failed.
fn ppo(
    args: &TrainArgs,
    workloads: &[slurp_sim::Workload],
    work: &Path,
    split: &str,
) -> io::Result<Option<ExitCode>> {
    for (name, text) in TRAINER {
        std::fs::write(work.join(name), text)?;
    }
    match missing_modules(&args.python) {
        Ok(missing) if missing.is_empty() => {}
        Ok(missing) => {
            eprintln!(
                "error: `{}` lacks {} (the trainer is PyTorch)",
                args.python.display(),
                missing.join(", ")
            );
            eprintln!(
                "hint: pip install -r {} (CUDA is used when present, the CPU otherwise), or train with --method evolve",
                work.join("requirements.txt").display()
            );
            return Ok(Some(ExitCode::from(2)));
        }
        Err(e) => return usage(e).map(Some),
    }
    let slurp = std::env::current_exe()?;
    let mut cmd = Command::new(&args.python);
    cmd.arg(work.join("train.py"))
        .arg("--slurp")
        .arg(&slurp)
        .arg("--out")
        .arg(work.join("run"));
    for trace in &args.traces {
        cmd.arg("--trace").arg(trace);
    }
    cmd.args([
        "--observation",
        "v2",
        "--sim",
        "slurp",
        "--mixed-backfill",
        "--min-bsld",
        "3",
        "--clone",
        "fairshare",
        "--baseline",
        "fairshare",
        "--pi-iters",
        "20",
        "--v-iters",
        "20",
        "--keep-every",
        "5",
    ]);
    cmd.args(["--seed", &args.seed.to_string()])
        .args(["--clone-iters", &args.clone_iters.to_string()])
        .args(["--max-seconds", &args.seconds.to_string()])
        .args(["--epochs", &args.epochs.to_string()])
        .args(["--device", &args.device])
        .args(["--hold-out", &format!("{split}..")]);
    if let Some(threads) = args.threads {
        cmd.args(["--threads", &threads.to_string()]);
    }
    eprintln!(
        "training on {} trace{} (the last {}% of each kept out) for up to {} s; curve in {}",
        args.traces.len(),
        if args.traces.len() == 1 { "" } else { "s" },
        args.hold_out,
        args.seconds,
        work.join("run/curve.csv").display()
    );
    // The trainer's lines are the progress: epochs, rewards, times.
    let mut child = cmd.stdout(Stdio::piped()).spawn()?;
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let line = line?;
            if line.starts_with("epoch ") || line.starts_with("clone ") {
                eprintln!("{line}");
            }
        }
    }
    let status = child.wait()?;
    if !status.success() {
        eprintln!(
            "error: the trainer failed ({status}); its run is in {}",
            work.display()
        );
        return Ok(Some(ExitCode::from(1)));
    }
    // The learning curve as a picture beside its CSV.
    let csv = std::fs::read_to_string(work.join("run/curve.csv")).unwrap_or_default();
    let points: Vec<(f64, f64)> = csv
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut cells = line.split(',');
            Some((cells.next()?.parse().ok()?, cells.next()?.parse().ok()?))
        })
        .collect();
    draw_curve(
        work,
        "reward: fairshare's worst user minus the policy's",
        &points,
        25,
    )?;
    // Rank the kept models on busy training-side windows.
    let mut kept: Vec<PathBuf> = std::fs::read_dir(work.join("run"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "onnx")
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("model-"))
        })
        .collect();
    kept.sort();
    let choose_on: Vec<Vec<Window>> = workloads
        .iter()
        .map(|w| {
            let within = Window::parse_span(&format!("0..{split}"), w.jobs.len()).ok();
            Draw {
                count: 20,
                len: 256.min(w.jobs.len()),
                seed: 4242,
                within,
                min_bsld: 3.0,
            }
            .windows(w, |_| true)
            .unwrap_or_default()
        })
        .collect();
    // The rule `fair/trainer/choose_v2.py` applies to runs made by hand
    // (`slurp_fair::judge::rank`): most cells won with the average kept,
    // then the lowest worst user against the fairest heuristic.
    let mut best: Option<((usize, f64), PathBuf)> = None;
    for path in &kept {
        let Ok(model) = Model::load(path, None) else {
            continue;
        };
        let model = Arc::new(model);
        let mut cells = Vec::new();
        for ((w, windows), name) in workloads.iter().zip(&choose_on).zip(&args.traces) {
            if windows.is_empty() {
                continue;
            }
            match judge::cells(&model, "model", &name.to_string_lossy(), w, windows) {
                Ok(c) => cells.extend(c),
                Err(e) => return usage(format!("{}: {e}", path.display())).map(Some),
            }
        }
        let score = judge::rank(&cells);
        let better = best
            .as_ref()
            .is_none_or(|(b, _)| score.0 > b.0 || (score.0 == b.0 && score.1 < b.1));
        if better {
            best = Some((score, path.clone()));
        }
    }
    let Some(((won, ratio), chosen)) = best else {
        eprintln!(
            "error: the trainer kept no model in {}",
            work.join("run").display()
        );
        return Ok(Some(ExitCode::from(1)));
    };
    std::fs::copy(&chosen, &args.output)?;
    eprintln!(
        "chose {} (on busy training windows: {won} cells won with the average kept, worst user {ratio:.3}× the fairest heuristic's); wrote {}",
        chosen.display(),
        args.output.display()
    );
    Ok(None)
}
