//! `slurp sim TRACE`: replay a workload trace under several policies and
//! print one comparison (a table, `--json`, `--plot FILE.svg`).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use slurp_runtime::core::PolicyKind;
use slurp_sim::window::Draw;
use slurp_sim::{Machine, Model, PolicyResult, Window, Workload};

/// Every order, without and with EASY backfilling.
const DEFAULT_POLICIES: &str =
    "fcfs,sjf,f1,wfp3,unicep,easy,sjf+easy,f1+easy,wfp3+easy,unicep+easy";

#[derive(Args, Debug)]
pub struct SimArgs {
    /// Workload trace in the Standard Workload Format (`.swf`, `.swf.gz`,
    /// `.swf.xz`), or a generated one, `gen:FAMILY[:SEED[:JOBS]]` (`slurp
    /// policy generate --help`)
    trace: PathBuf,
    /// Policies to compare: `fcfs`, `sjf`, `f1`, `wfp3`, `unicep`,
    /// `fairshare`, each alone (no backfilling) or with `+easy` or
    /// `+conservative`; `easy` is `fcfs+easy`; learned ones, built in
    /// (`fair`, `fair-v2` … `fair-v15`) or `fair:MODEL.onnx`, each with an
    /// optional `+easy`
    #[arg(long, value_name = "POLICY[,POLICY...]", default_value = DEFAULT_POLICIES)]
    policy: String,
    /// `slurp`: the runtime's scheduler core, core-granular, until every job
    /// ended; `reference`: RLScheduler's model (whole nodes, stops when the
    /// last job started), comparable with its published figures
    #[arg(long, value_name = "MODEL", default_value = "slurp", value_parser = ["slurp", "reference"])]
    model: String,
    /// Replay only jobs START..START+LEN (0-based, after loading)
    #[arg(long, value_name = "START:LEN", conflicts_with = "samples")]
    window: Option<String>,
    /// Replay K random windows (of --len jobs, from --seed) and average them
    #[arg(long, value_name = "K")]
    samples: Option<usize>,
    /// Jobs per random window (default: 1024, as `slurp policy judge`)
    #[arg(long, value_name = "L", requires = "samples")]
    len: Option<usize>,
    /// Draw the random windows inside jobs FROM..TO only (`320000..`: from
    /// job 320000 to the end; `..75%`: the first three quarters), such as
    /// the months a model was not trained on
    #[arg(long, value_name = "[FROM]..[TO]", requires = "samples")]
    within: Option<String>,
    /// Keep only random windows where FCFS (reference model, no
    /// backfilling) reaches this average bounded slowdown: most windows of
    /// a real trace never queue, and every policy ties there
    #[arg(long, value_name = "X", requires = "samples")]
    min_bsld: Option<f64>,
    /// Seed of the random windows, and of `--sample`'s draws
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Learned policies draw each choice from their distribution (seeded by
    /// --seed) instead of taking their best slot
    #[arg(long)]
    sample: bool,
    /// Print JSON (every window's figures and each user's) instead of a table
    #[arg(long)]
    json: bool,
    /// Also draw the comparison as an SVG chart
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Also write an HTML report: the figures per policy and each policy's
    /// schedule of the first window (Gantt chart, utilisation, job table)
    #[arg(long, value_name = "FILE.html")]
    report: Option<PathBuf>,
    /// Nodes of the machine (default: the trace's `MaxNodes`)
    #[arg(long, value_name = "N")]
    nodes: Option<u32>,
    /// Processors per node (default: `MaxProcs / MaxNodes` of the trace)
    #[arg(long, value_name = "N")]
    cores: Option<u32>,
}

fn usage(message: impl std::fmt::Display) -> io::Result<ExitCode> {
    eprintln!("error: {message}");
    Ok(ExitCode::from(2))
}

pub fn sim(args: &SimArgs) -> io::Result<ExitCode> {
    // `fair:MODEL.onnx[+easy]`: a learned policy, judged greedily in the
    // reference model; the rest are the core's policies.
    let (learned, heuristics): (Vec<&str>, Vec<&str>) = args
        .policy
        .split(',')
        .partition(|p| slurp_fair::spec::Spec::parse(p).is_some());
    let policies: Vec<PolicyKind> = match heuristics.iter().map(|p| p.parse()).collect() {
        Ok(p) => p,
        Err(e) => return usage(slurp_fair::spec::naming_learned(e)),
    };
    let model: Model = match args.model.parse() {
        Ok(m) => m,
        Err(e) => return usage(e),
    };
    if let Some(e) = policies.iter().find_map(|&p| model.check(p).err()) {
        return usage(e);
    }
    let trace = match slurp_sim::workload::read_trace(&args.trace) {
        Ok(t) => t,
        Err(e) => return usage(e),
    };
    let name = args.trace.display();
    for bad in trace.malformed.iter().take(5) {
        eprintln!("warning: {name}:{}: {}", bad.line, bad.reason);
    }
    if trace.malformed.len() > 5 {
        eprintln!(
            "warning: {name}: {} more lines are not jobs",
            trace.malformed.len() - 5
        );
    }
    let machine = match (Machine::of(&trace), args.nodes, args.cores) {
        (_, Some(nodes), Some(cores)) => Machine {
            nodes,
            procs_per_node: cores,
        },
        (Some(m), nodes, cores) => Machine {
            nodes: nodes.unwrap_or(m.nodes),
            procs_per_node: cores.unwrap_or(m.procs_per_node),
        },
        (None, nodes, cores) => Machine {
            nodes: nodes.unwrap_or(1),
            procs_per_node: match cores {
                Some(c) => c,
                None => {
                    eprintln!(
                        "error: {name}: the header gives no `; MaxProcs:` or `; MaxNodes:`, so the machine is unknown"
                    );
                    eprintln!("hint: say it: --nodes N --cores PROCS_PER_NODE");
                    return Ok(ExitCode::from(2));
                }
            },
        },
    };
    if machine.nodes == 0 || machine.procs_per_node == 0 {
        return usage("the machine needs at least one node of one processor");
    }
    let workload = Workload::new(&trace, machine);
    if workload.jobs.is_empty() {
        return usage(format!(
            "{name}: no job can be replayed ({} lines read)",
            trace.jobs.len()
        ));
    }
    for caveat in workload.caveats() {
        eprintln!("warning: {name}: {caveat}");
    }
    let windows = match windows(args, &workload) {
        Ok(w) => w,
        Err(e) => return usage(e),
    };
    let mut results = slurp_sim::compare(&workload, &windows, &policies, model);
    // The first window's schedule under each policy, for the report.
    let mut schedules: Vec<slurp_sim::Schedule> = match &args.report {
        Some(_) => policies
            .iter()
            .map(|&p| slurp_sim::simulate(&workload, windows[0], p, model))
            .collect(),
        None => Vec::new(),
    };
    for name in learned {
        let sample = args.sample.then_some(args.seed);
        match fair(name, &workload, &windows, model, sample) {
            Ok((result, first)) => {
                results.push(result);
                schedules.push(first);
            }
            Err(e) => return usage(e),
        }
    }
    if let Some(path) = &args.report {
        let title = format!(
            "slurp sim {} — {}",
            file_name(&args.trace),
            describe_windows(&windows)
        );
        let page = crate::report::sim_page(title, &workload, model, &results, &schedules);
        if let Err(e) = crate::report::write_page(path, &page) {
            eprintln!("error: {}: {e}", path.display());
            return Ok(ExitCode::from(1));
        }
    }
    if let Some(plot) = &args.plot {
        let title = format!(
            "{} — {}",
            file_name(&args.trace),
            describe_windows(&windows)
        );
        let written = slurp_sim::plot::svg(&title, &results)
            .and_then(|svg| std::fs::write(plot, svg).map_err(|e| e.to_string()));
        if let Err(e) = written {
            eprintln!("error: {}: {e}", plot.display());
            return Ok(ExitCode::from(1));
        }
    }
    let mut out = io::stdout().lock();
    if args.json {
        let doc = serde_json::json!({
            "trace": args.trace,
            "machine": { "nodes": machine.nodes, "procs_per_node": machine.procs_per_node },
            "model": model,
            "jobs": workload.jobs.len(),
            "dropped": {
                "zero_run": workload.dropped.zero_run,
                "no_procs": workload.dropped.no_procs,
                "too_wide": workload.dropped.too_wide,
            },
            "malformed_lines": trace.malformed.len(),
            "windows": windows,
            "seed": args.samples.map(|_| args.seed),
            "policies": results,
        });
        serde_json::to_writer_pretty(&mut out, &doc).map_err(io::Error::other)?;
        writeln!(out)?;
    } else {
        table(&mut out, args, &trace, &workload, model, &windows, &results)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A learned policy on every window: `fair` or `fair:MODEL.onnx`, `+easy` to
/// backfill while its choice waits (the reference's rule in the reference
/// model, the core's EASY in slurp's).
fn fair(
    name: &str,
    workload: &Workload,
    windows: &[Window],
    model: Model,
    sample: Option<u64>,
) -> Result<(PolicyResult, slurp_sim::Schedule), String> {
    let spec = slurp_fair::spec::Spec::parse(name)
        .unwrap_or_else(|| Err(format!("policy `{name}` is not a learned one")))?;
    let backfill = spec.backfill;
    let net = spec.load()?;
    let schedules = windows
        .iter()
        .map(|&w| match model {
            Model::Reference => slurp_fair::rollout::replay(&net, workload, w, backfill, sample)
                .map_err(|e| e.to_string()),
            Model::Slurp => slurp_fair::chooser::replay(net.clone(), workload, w, backfill, sample)
                .map_err(|e| e.to_string()),
        })
        .collect::<Result<Vec<_>, String>>()?;
    let runs = schedules
        .iter()
        .map(|s| slurp_sim::Metrics::of(workload, s, model))
        .collect();
    let first = schedules.into_iter().next().ok_or("no window")?;
    Ok((PolicyResult::new(name.to_string(), runs), first))
}

fn windows(args: &SimArgs, workload: &Workload) -> Result<Vec<Window>, String> {
    let jobs = workload.jobs.len();
    if let Some(text) = &args.window {
        let w = Window::parse(text).map_err(|e| format!("--window: {e}"))?;
        w.check(jobs).map_err(|e| format!("--window: {e}"))?;
        return Ok(vec![w]);
    }
    if let Some(count) = args.samples {
        let len = args.len.unwrap_or(slurp_fair::judge::LEN);
        if count == 0 {
            return Err("--samples: at least one window".into());
        }
        if len == 0 {
            return Err("--len: at least one job a window".into());
        }
        let within = args
            .within
            .as_deref()
            .map(|text| Window::parse_span(text, jobs).map_err(|e| format!("--within {e}")))
            .transpose()?;
        let min_bsld = args.min_bsld.unwrap_or(0.0);
        if !min_bsld.is_finite() {
            return Err(format!("--min-bsld {min_bsld}: give a number, such as 3"));
        }
        let draw = Draw {
            count,
            len,
            seed: args.seed,
            within,
            min_bsld,
        };
        return draw
            .windows(workload, |_| true)
            .map_err(|e| format!("--samples: {e}"));
    }
    Ok(vec![Window {
        start: 0,
        len: jobs,
    }])
}

pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn describe_windows(windows: &[Window]) -> String {
    match windows {
        [w] => format!("jobs {w}"),
        ws => format!("mean of {} windows of {} jobs", ws.len(), ws[0].len),
    }
}

fn table(
    out: &mut impl Write,
    args: &SimArgs,
    trace: &slurp_trace::Trace,
    workload: &Workload,
    model: Model,
    windows: &[Window],
    results: &[PolicyResult],
) -> io::Result<()> {
    let d = workload.dropped;
    let users = results
        .first()
        .and_then(|r| r.windows.first())
        .map_or(0, |m| m.users);
    writeln!(
        out,
        "{}: {} on {}; {} model, {}{}",
        file_name(&args.trace),
        plural(workload.jobs.len(), "job"),
        workload.machine,
        model,
        describe_windows(windows),
        if windows.len() > 1 {
            format!(" (seed {})", args.seed)
        } else {
            format!(", {}", plural(users, "user"))
        },
    )?;
    if d.total() > 0 || !trace.malformed.is_empty() {
        writeln!(
            out,
            "left out: {} ran 0 s, {} asked no processors, {} asked more than the machine; {} not jobs",
            d.zero_run,
            d.no_procs,
            d.too_wide,
            plural(trace.malformed.len(), "line")
        )?;
    }
    writeln!(out)?;
    let (header, rows) = figures(results);
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].len())
                .chain([header[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                if c == 0 {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    writeln!(out, "{}", line(header.to_vec()))?;
    for row in &rows {
        writeln!(out, "{}", line(row.iter().map(String::as_str).collect()))?;
    }
    writeln!(
        out,
        "\nbsld: bounded slowdown (10 s bound); worst user: the largest per-user mean; jain: Jain's index over per-user means (1 = even)"
    )?;
    Ok(())
}

/// The comparison's columns and one row per policy (the table and the
/// HTML report show the same figures).
pub fn figures(results: &[PolicyResult]) -> ([&'static str; 8], Vec<[String; 8]>) {
    let header = [
        "policy",
        "avg bsld",
        "worst user bsld",
        "jain",
        "avg wait s",
        "avg turnaround s",
        "utilisation",
        "makespan s",
    ];
    let rows: Vec<[String; 8]> = results
        .iter()
        .map(|r| {
            let s = &r.summary;
            [
                r.policy.clone(),
                format!("{:.2}", s.avg_bounded_slowdown),
                format!("{:.2}", s.worst_user_bounded_slowdown),
                format!("{:.3}", s.jain),
                format!("{:.0}", s.avg_wait),
                format!("{:.0}", s.avg_turnaround),
                format!("{:.3}", s.utilisation),
                format!("{:.0}", s.makespan),
            ]
        })
        .collect();
    (header, rows)
}
