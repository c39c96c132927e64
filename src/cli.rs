//! Command line: what the user said (clap) and what it means (`Options`).
//!
//! Data goes to stdout, diagnostics and logs to stderr. Exit status: 0 when
//! everything is fine, 2 for usage errors and invalid input (a workflow
//! with any mistake), 1 reserved for runs in which tasks failed.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};

use clap::{Args, Parser, Subcommand};
use miette::{GraphicalReportHandler, GraphicalTheme};
use slurp_interpreter::{Failure, Loaded, Options};
use slurp_runtime::backend::allocation::Allocation;
use slurp_runtime::core::PolicyKind;
use slurp_runtime::exec::OutputMode;
use slurp_runtime::run::{Halt, Learned, RunOptions};
use slurp_runtime::{Capacity, Machine, Program, TaskId, WorkflowId, amount, format_bytes};

const ABOUT: &str =
    "Run task lists and workflow files on the resources you have, packed like an HPC scheduler";

const LONG_ABOUT: &str = "\
slurp reads a file of tasks — plain commands (the list `parallel` takes), legacy
`NCORES SINGLENODE COMMAND` lines, or `task` lines with resources, sweeps and
dependencies — works out what each needs, and schedules them on the cores, GPUs
and memory it has. A task whose command is `slurp other.slurp` becomes a nested
allocation: a child instance inside its own slice of resources.

Examples:
  slurp tasks.slurp                  run every task here (live progress on a terminal)
  slurp -j4 gzip -9 {} ::: *.csv     run a command once per value, as GNU parallel does
  find . -name '*.csv' | slurp gzip  … once per line of standard input
  slurp status; slurp report         what happened, as a table; as an HTML page (report.html)
  slurp start; slurp submit 'task a: ./sim 1'; slurp wait a; slurp close
                                     an open instance that takes tasks while it runs
  slurp check tasks.slurp            check a file and summarise what it asks for
  slurp check --cores 64 big.slurp   check it against a 64-core machine
  slurp jobspec tasks.slurp          print each task as a Flux jobspec (JSON lines)
  slurp resources                    show what this instance owns
  sbatch -N2 --wrap 'slurp tasks.slurp'
                                     run inside a Slurm job, every task a step of it
  slurp --backend slurm tasks.slurp  every task its own Slurm job (or --backend flux)
  slurp sim trace.swf --policy fcfs,easy,sjf+easy
                                     replay a workload trace and compare policies

The language is described in docs/language.md.";

#[derive(Parser, Debug)]
#[command(name = "slurp", version, about = ABOUT, long_about = LONG_ABOUT, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Run this workflow file (the same as `slurp run FILE`); or, followed
    /// by arguments and `:::` sources (or after `--`), a command to run once
    /// per input value, as GNU parallel does
    #[arg(value_name = "FILE | COMMAND")]
    file: Option<PathBuf>,
    /// The command's arguments and its input sources: `::: A B` (values),
    /// `:::: FILE` (one value per line; `-` is standard input), `:::+` and
    /// `::::+` (linked to the source before, row by row, instead of
    /// crossed); without a source, the lines of standard input. The
    /// replacement strings are `{}` (the value), `{.}` (without extension),
    /// `{/}` (base name), `{//}` (directory), `{/.}`, `{N}` and `{N.}` …
    /// (source N's), `{#}` (sequence number), `{%}` (job slot); a command
    /// without one gets ` {}` appended
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    args: Vec<std::ffi::OsString>,
    /// Read input values from FILE, one per line (the same as `:::: FILE`)
    #[arg(short = 'a', long = "arg-file", value_name = "FILE")]
    arg_file: Vec<PathBuf>,
    #[command(flatten)]
    run: RunArgs,
}

// How to run: policy, binding, output, failures. (A plain comment: a doc
// comment would become the about text of every subcommand flattening it.)
#[derive(Args, Debug, Clone)]
struct RunArgs {
    /// Queue policy: `easy` (FCFS with EASY backfilling), `conservative`, or
    /// an order `fcfs`, `sjf`, `f1`, `wfp3`, `unicep`, `fairshare` (the
    /// least-served line or sweep first, Slurm's fair-share factor) alone or
    /// with `+easy` or `+conservative`; or a learned policy choosing the next
    /// task: `fair-v15` (the newest built-in model: without backfilling its
    /// worst-off user, a line or sweep, fares better than under every
    /// heuristic on 146 of 150 fresh multi-user workloads; with `+easy`,
    /// `fairshare+easy` is fairer on a fifth of them; once ended tasks show
    /// that time limits are their true lengths it hands near-ties to `sjf`,
    /// which is still fairer on about half such workloads), `fair-v2` …
    /// `fair-v14` (its forerunners, stdlib/policies/MODEL_CARD.md), `fair`
    /// (fair-v1, the first model slurp shipped: trained on one site, it is
    /// less fair elsewhere than `fairshare+easy`) or `fair:MODEL.onnx` (`+easy` to
    /// backfill around its choice; `slurp policy train` makes one); a list such
    /// as `easy,fcfs` gives one per level of nesting (the last for all
    /// deeper levels); a nested entry's `policy=` wins
    #[arg(long, value_name = "POLICY[,POLICY...]", default_value = "easy")]
    policy: String,
    /// A learned policy draws each choice from its distribution (seeded by
    /// --seed) instead of taking its best slot
    #[arg(long)]
    sample: bool,
    /// Seed of --sample's draws
    #[arg(long, value_name = "S", default_value_t = 0, requires = "sample")]
    seed: u64,
    /// Do not bind tasks to their cores
    #[arg(long)]
    no_bind: bool,
    /// Task output: `group` (each task's output whole when it ends), `tag`
    /// (lines as they come, prefixed with the task id), `files` (under
    /// .slurp/runs/RUN/out/), `none`, `ungroup` (as the tasks write it,
    /// straight to slurp's stdout and stderr: lines of tasks running at
    /// once may mix; the fastest)
    #[arg(long, value_name = "MODE", default_value = "group", value_parser = ["group", "tag", "files", "none", "ungroup"])]
    output: String,
    /// `--output ungroup` (GNU parallel's `-u`)
    #[arg(short = 'u', long, conflicts_with_all = ["output", "tag", "keep_order"])]
    ungroup: bool,
    /// When to stop early: `never`; `soon` (start nothing more) or `now`
    /// (also stop running tasks) on the first task that fails for good; or
    /// as GNU parallel writes it, `soon|now,fail|success|done=N|P%` (after
    /// N tasks, or P% of the run's tasks, ended so)
    #[arg(long, value_name = "WHEN[,WHY=N]", default_value = "never", value_parser = parse_halt)]
    halt: Halt,
    /// Run at most N tasks at once, one core each (GNU parallel's `-j`):
    /// the instance is N slots of one node, not bound to CPUs; `N%` of this
    /// machine's cores, `+N` or `-N` more or fewer than it has
    #[arg(short = 'j', long = "jobs", value_name = "N", conflicts_with_all = ["cores", "nodes"])]
    jobs: Option<String>,
    /// Show each task's output in the order of the tasks instead of the
    /// order they end
    #[arg(short = 'k', long)]
    keep_order: bool,
    /// Print each task's command as it would run (shell-quoted, one per
    /// line) and run nothing
    #[arg(long)]
    dry_run: bool,
    /// Start each line of a task's output with its values and a tab (its id
    /// when it has no values), output grouped per task
    #[arg(long, conflicts_with = "output")]
    tag: bool,
    /// Also keep each task's stdout and stderr in files below DIR: for a
    /// command line DIR/1/VALUE/2/VALUE/{stdout,stderr,seq} (GNU
    /// parallel's layout), for a file DIR/TASK/…
    #[arg(long, value_name = "DIR")]
    results: Option<PathBuf>,
    /// Time limit of every task that sets none (`30s`, `10m`; a bare number
    /// is seconds)
    #[arg(long, value_name = "DURATION")]
    timeout: Option<String>,
    /// Try a task that fails up to N times in all (GNU parallel's meaning;
    /// a task's own `retries=` counts extra attempts and wins when larger)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    retries: Option<u32>,
    /// Time between SIGTERM and SIGKILL when a task is stopped (a slurp
    /// that is a task of another takes at most half its parent's)
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    grace: String,
    /// Keep no journal (.slurp/runs/RUN/events.jsonl): `slurp status` and
    /// `slurp runs` will not know this run
    #[arg(long)]
    no_journal: bool,
    /// With `--backend slurm`: the partition to submit to; with `--backend
    /// flux`: the queue
    #[arg(long, value_name = "PARTITION")]
    partition: Option<String>,
    /// Show no progress, and no summary when every task succeeded
    #[arg(short, long)]
    quiet: bool,
    /// Where output is not a terminal (no bars there), print a status line
    /// to stderr every DURATION (default 10s)
    #[arg(long, value_name = "DURATION", num_args = 0..=1, default_missing_value = "10s")]
    progress: Option<String>,
    /// Also log every finished attempt to FILE in GNU parallel's
    /// `--joblog` format (tab-separated: Seq, Host, Starttime, JobRuntime,
    /// Send, Receive, Exitval, Signal, Command)
    #[arg(long, value_name = "FILE")]
    joblog: Option<PathBuf>,
    /// Stay open when every task has ended: take tasks from `slurp submit`
    /// (and the Python client) until `slurp close`, Ctrl-C or --open-for
    #[arg(long)]
    open: bool,
    /// With --open: close by itself after DURATION (`8h`), as `slurp
    /// close` would (what is queued then still runs)
    #[arg(long, value_name = "DURATION", requires = "open")]
    open_for: Option<String>,
    /// Inside a Flux instance: keep N more ranks per core queued in Flux
    /// than the instance has cores (Flux starts the next the moment a core
    /// frees); 0 submits a rank only when its cores are free
    #[arg(long, value_name = "N", default_value_t = 1)]
    flux_ahead: u32,
    /// The run's id (set by `slurp start` for the instance it detaches)
    #[arg(long, hide = true)]
    run_id: Option<String>,
    #[command(flatten)]
    instance: InstanceArgs,
}

#[derive(Subcommand, Debug)]
// Each subcommand's arguments are built only when it is the one invoked
// (or its help is shown): building all of them took a quarter of a start.
#[command(defer = true)]
enum Command {
    /// Run a workflow: every task on this instance, packed by the policy
    Run {
        /// Workflow file (`.slurp`, `.txt` or `.toml`); `-` reads standard input
        file: PathBuf,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Parse, expand and check workflow files; summarise them or list every mistake
    Check {
        /// Workflow files (`.slurp`, `.txt` or `.toml`); `-` reads standard input
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        instance: InstanceArgs,
    },
    /// Print the Flux jobspec (RFC 25, version 1) of each task, one JSON object per line;
    /// tasks are checked against an instance only when one is declared
    /// (--cores, --gpus, --mem, --nodes, --backend slurm|flux)
    Jobspec {
        /// Workflow file; `-` reads standard input
        file: PathBuf,
        /// Print only this task (e.g. `sim[17]`, `prep`, `@3` for the unnamed line 3)
        #[arg(long, value_name = "ID")]
        task: Option<String>,
        #[command(flatten)]
        instance: InstanceArgs,
    },
    /// Start an empty instance that stays open: tasks come from `slurp
    /// submit` (or the Python client) until `slurp close`; prints its run id
    Start {
        /// Stay in the foreground (output as a run's) instead of detaching
        /// (output then under .slurp/runs/RUN/out/, slurp's own messages in
        /// .slurp/runs/RUN/slurp.log)
        #[arg(long)]
        foreground: bool,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Add tasks to a live run: each argument is a file of tasks (`-` reads
    /// standard input) or task lines themselves (`'task x cores=2: ./sim
    /// 3'`), checked as a file's lines are; prints the new tasks' ids
    Submit {
        /// The run (an id or prefix as `slurp runs` lists it, or a run
        /// directory); default: the instance this task runs in
        /// (`SLURP_SOCKET`), else the latest live run here
        #[arg(long, value_name = "RUN")]
        run: Option<String>,
        /// The instance to submit to: a nested entry's path (`sub/`), or
        /// empty for the top level; default: the task's own (`SLURP_SCOPE`)
        #[arg(long, value_name = "PATH")]
        scope: Option<String>,
        /// The arguments hold Flux jobspecs (RFC 25, version 1), one JSON
        /// object per line, as `slurp jobspec` prints them: each becomes
        /// the task line it means
        #[arg(long)]
        jobspec: bool,
        /// Files of tasks, or task lines
        #[arg(required = true, value_name = "TASKS")]
        tasks: Vec<String>,
    },
    /// Wait until tasks of a live run end; exit with the status of the
    /// first that did not succeed (its exit status, 124 for a time limit,
    /// 128+N for signal N; 0 when all succeeded)
    Wait {
        /// The run (default: this task's instance, else the latest live run here)
        #[arg(long, value_name = "RUN")]
        run: Option<String>,
        /// Task ids, as `slurp submit` prints them
        #[arg(required = true, value_name = "TASK")]
        tasks: Vec<String>,
    },
    /// Print a live run's events as JSON lines (state changes, starts) until it ends
    Watch {
        /// The run (default: this task's instance, else the latest live run here)
        #[arg(long, value_name = "RUN")]
        run: Option<String>,
    },
    /// Close a live run: it takes no more tasks and ends once its tasks have
    Close {
        /// The run (default: this task's instance, else the latest live run here)
        #[arg(long, value_name = "RUN")]
        run: Option<String>,
        /// Return only when the run has ended; exit 1 if a task did not succeed
        #[arg(long)]
        wait: bool,
    },
    /// Rerun what did not succeed in a run (default: the latest): tasks are
    /// known by what defines them, so a fixed line runs again and unchanged
    /// successes do not
    Resume {
        /// A run id as `slurp runs` lists it, or a unique prefix of one
        run: Option<String>,
    },
    /// List the runs recorded in .slurp/ here, oldest first
    Runs,
    /// Stop a live run (default: the latest) as Ctrl-C would: nothing more
    /// starts, running tasks are stopped, Slurm or Flux jobs are cancelled;
    /// for a run whose slurp died, stops the processes its tasks left and
    /// cancels the jobs it left; `slurp cancel RUN TASK...` cancels only
    /// those tasks, and the run goes on
    Cancel {
        /// A run id as `slurp runs` lists it, or a unique prefix of one
        run: Option<String>,
        /// Cancel only these tasks of the live run (those not started end
        /// `cancelled`, running ones are stopped); the run goes on
        #[arg(value_name = "TASK")]
        tasks: Vec<String>,
    },
    /// Show one task's events and, when the run kept it, its output
    Log {
        /// The task id, e.g. `sim[17]`, `@3`, `sub/prep`
        task: String,
        /// A run id as `slurp runs` lists it, or a unique prefix (default: the latest)
        run: Option<String>,
    },
    /// Show a run's tasks per state and what did not succeed (default: the latest run)
    Status {
        /// A run id as `slurp runs` lists it, or a unique prefix of one
        run: Option<String>,
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
    },
    /// Write a run's report (default: the latest run) as one self-contained
    /// HTML file: Gantt chart of every task on the cores and GPUs it held,
    /// utilisation over time, a sortable table of tasks, the summary
    Report {
        /// A run id as `slurp runs` lists it, or a unique prefix of one
        run: Option<String>,
        /// Where to write it
        #[arg(short, long, value_name = "FILE.html", default_value = "report.html")]
        output: PathBuf,
    },
    /// Replay a workload trace (SWF) under several policies on a virtual
    /// clock and compare waits, slowdowns, utilisation and fairness
    Sim(crate::sim::SimArgs),
    /// Learned policies: judge one against the heuristics, train one on a
    /// site's traces, generate workloads, play rollouts for the trainer
    #[command(subcommand)]
    Policy(crate::policy::PolicyCommand),
    /// Print a shell's completion script: `slurp completions bash >
    /// /etc/bash_completion.d/slurp` (or zsh, fish, elvish, powershell)
    Completions {
        /// The shell
        shell: clap_complete::Shell,
    },
    /// Print slurp's man page (roff): `slurp man > /usr/local/share/man/man1/slurp.1`
    Man,
    /// Show the resources this instance owns (detected, or as overridden)
    Resources {
        /// Print JSON instead of text
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        instance: InstanceArgs,
    },
}

// Overrides of the detected resources: check or plan as if on another machine.
#[derive(Args, Debug, Clone)]
struct InstanceArgs {
    /// Cores per node (default: what this process may use)
    #[arg(long, value_name = "N")]
    cores: Option<u32>,
    /// GPUs per node (default: visible NVIDIA GPUs)
    #[arg(long, value_name = "N")]
    gpus: Option<u32>,
    /// Memory per node, e.g. `64G` (default: total memory, bounded by the cgroup)
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    mem: Option<u64>,
    /// Number of nodes (default: 1)
    #[arg(long, value_name = "N")]
    nodes: Option<u32>,
    /// Where tasks run: `auto` starts them as job steps (`srun`) when slurp
    /// is the program of a Slurm job, here otherwise; `local` always here;
    /// `slurm` submits every task as a Slurm job (sbatch) and follows them;
    /// `flux` as a Flux job (flux job submit)
    #[arg(long, value_name = "BACKEND", default_value = "auto", value_parser = ["auto", "local", "slurm", "flux"])]
    backend: String,
    /// Inside a Slurm job: start `all` ranks as job steps (srun; each is
    /// accounted by Slurm), or only those on `remote` nodes, starting the
    /// ones on slurp's own node directly, bound to the job's CPUs there
    /// (far cheaper for many short tasks)
    #[arg(long, value_name = "WHICH", default_value = "all", value_parser = ["all", "remote"])]
    srun: String,
    /// Refuse workflows that expand to more tasks than this (at most
    /// 4294967295, the most one workflow can hold)
    #[arg(long, value_name = "N", default_value_t = Options::DEFAULT_MAX_TASKS,
          value_parser = clap::value_parser!(u64).range(1..=u64::from(u32::MAX)))]
    max_tasks: u64,
}

fn parse_halt(text: &str) -> Result<Halt, String> {
    text.parse()
}

fn parse_size(text: &str) -> Result<u64, String> {
    slurp_interpreter::parse_size(text).map_err(|e| format!("{e} (a size such as `64G`)"))
}

impl InstanceArgs {
    /// The Slurm job to run in: `auto` inside one, unless told `local`.
    fn allocation(&self) -> Result<Option<Arc<Allocation>>, String> {
        static DETECTED: OnceLock<Result<Option<Arc<Allocation>>, String>> = OnceLock::new();
        if self.backend != "auto" {
            return Ok(None);
        }
        DETECTED
            .get_or_init(|| {
                Allocation::detect()
                    .map(|a| {
                        a.map(|mut a| {
                            a.direct_here = self.srun == "remote";
                            Arc::new(a)
                        })
                    })
                    .map_err(|e| e.to_string())
            })
            .clone()
    }

    fn capacity_of(&self, machine: &Machine) -> Capacity {
        let mut detected = machine.capacity();
        // Submitting to Slurm or Flux: the biggest node is the limit.
        let outside = match self.backend.as_str() {
            "slurm" => slurp_runtime::backend::slurm::cluster_capacity().ok(),
            "flux" => slurp_runtime::backend::flux::instance_capacity().ok(),
            _ => None,
        };
        if let Some(cluster) = outside {
            detected = cluster;
        }
        // Inside a Slurm job the instance is the job: its nodes, its CPUs
        // (the fewest any node has), its memory when it was given one.
        if let Ok(Some(job)) = self.allocation() {
            detected = Capacity {
                nodes: job.nodes.len() as u32,
                cores_per_node: job.cpus.iter().copied().min().unwrap_or(1),
                gpus_per_node: job.gpus_per_node,
                mem_per_node: job.mem_per_node.unwrap_or(detected.mem_per_node),
            };
        }
        Capacity {
            nodes: self.nodes.unwrap_or(detected.nodes).max(1),
            cores_per_node: self.cores.unwrap_or(detected.cores_per_node),
            gpus_per_node: self.gpus.unwrap_or(detected.gpus_per_node),
            mem_per_node: self.mem.unwrap_or(detected.mem_per_node),
        }
    }

    fn options(&self) -> io::Result<Options> {
        self.options_on(&Machine::detect())
    }

    /// The options on `machine`, detected once by the caller.
    fn options_on(&self, machine: &Machine) -> io::Result<Options> {
        Ok(Options {
            capacity: self.capacity_of(machine),
            max_tasks: self.max_tasks,
            cwd: std::env::current_dir()?,
        })
    }
}

/// `text` on stdout; a reader that stopped early (`| head`) is no error.
fn print_all(text: &[u8]) -> io::Result<ExitCode> {
    use io::Write as _;
    match io::stdout().lock().write_all(text) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// The input-source separators of GNU parallel's command line.
const SEPARATORS: [&str; 4] = [":::", ":::+", "::::", "::::+"];

/// `slurp [OPTIONS] FIRST ARGS…` as a command line to run per input value
/// (`Some`), or as a workflow file (`None`). It is a command line when
/// `--` comes before FIRST, when the words have a `:::`-style source or
/// `-a FILE` is given, or when FIRST is no file but a program, and words
/// follow it or standard input is not a terminal.
fn command_line(
    first: &Path,
    args: &[std::ffi::OsString],
    arg_files: &[PathBuf],
    raw: &[std::ffi::OsString],
) -> Result<Option<slurp_interpreter::parallel::Invocation>, String> {
    use slurp_interpreter::parallel::{Input, InputValues, Invocation};
    let dashdash = raw
        .iter()
        .position(|w| w == "--")
        .is_some_and(|i| raw.get(i + 1).is_some_and(|w| w == first.as_os_str()));
    let separated = args.iter().any(|a| SEPARATORS.iter().any(|s| a == *s));
    let looks_like_a_workflow = first
        .extension()
        .is_some_and(|e| e == "slurp" || e == "toml" || e == "txt");
    // `slurp gzip {}`: words after a program, not after a mistyped
    // subcommand (`slurp complete bash`) or file.
    // `find … | slurp gzip`: a program alone, its values piped in.
    let words_after_a_program = (!args.is_empty() || !io::stdin().is_terminal())
        && !first.exists()
        && !looks_like_a_workflow
        && is_a_program(first);
    if !(dashdash || separated || words_after_a_program || !arg_files.is_empty()) {
        if let Some(extra) = args.first().filter(|_| first.exists()) {
            return Err(format!(
                "error: `{}` is read as a workflow file, and the words after it (`{}` …) mean nothing to it\nhint: to run `{} …` once per input value, put `--` before it and give the values after `:::` (`slurp -- {} … ::: A B`)\n",
                first.display(),
                extra.to_string_lossy(),
                first.display(),
                first.display(),
            ));
        }
        return Ok(None);
    }
    let text = |w: &std::ffi::OsString| {
        w.clone().into_string().map_err(|w| {
            format!(
                "error: `{}` on the command line is not UTF-8 text\nhint: slurp's commands and values are text\n",
                w.to_string_lossy()
            )
        })
    };
    let mut command = vec![text(&first.as_os_str().to_owned())?];
    let mut sources: Vec<Input> = arg_files
        .iter()
        .map(|f| Input {
            values: InputValues::Lines(f.clone()),
            linked: false,
        })
        .collect();
    // The separator being read, and whether it was the last word.
    let mut within: Option<&str> = None;
    for word in args {
        let word = text(word)?;
        if let Some(sep) = SEPARATORS.iter().find(|s| **s == word) {
            within = Some(sep);
            sources.push(match *sep {
                ":::" | ":::+" => Input {
                    values: InputValues::Given(Vec::new()),
                    linked: *sep == ":::+",
                },
                // Files follow, each its own source; the first takes the
                // link.
                _ => Input {
                    values: InputValues::Lines(PathBuf::new()),
                    linked: *sep == "::::+",
                },
            });
            continue;
        }
        match (within, sources.last_mut()) {
            (None, _) | (Some(_), None) => command.push(word),
            (Some(sep), Some(last)) if sep.starts_with("::::") => match &mut last.values {
                InputValues::Lines(p) if p.as_os_str().is_empty() => *p = PathBuf::from(word),
                _ => sources.push(Input {
                    values: InputValues::Lines(PathBuf::from(word)),
                    linked: false,
                }),
            },
            (Some(_), Some(last)) => match &mut last.values {
                InputValues::Given(values) => values.push(word),
                InputValues::Lines(_) => unreachable!("a `:::` source holds values"),
            },
        }
    }
    if let Some(empty) = sources
        .iter()
        .position(|s| matches!(&s.values, InputValues::Lines(p) if p.as_os_str().is_empty()))
    {
        return Err(format!(
            "error: `::::` (input source {}) names no file\nhint: `:::: FILE` reads one value per line of FILE; `:::: -` reads standard input\n",
            empty + 1
        ));
    }
    Ok(Some(Invocation { command, sources }))
}

/// A path with a `/`, or an executable file in a directory of `$PATH`.
fn is_a_program(word: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    if word.components().count() > 1 {
        return true;
    }
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| {
            std::fs::metadata(dir.join(word))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// `slurp WORD ...` where WORD is neither a subcommand nor a file here: what
/// the user most likely meant, instead of clap's complaint about the words
/// after it.
fn not_a_word_here(word: &str) -> Option<String> {
    if word.starts_with('-') || word.contains(['/', '.']) || Path::new(word).exists() {
        return None;
    }
    let cmd = <Cli as clap::CommandFactory>::command();
    let names: Vec<&str> = cmd
        .get_subcommands()
        .map(clap::Command::get_name)
        .filter(|n| *n != "help")
        .collect();
    if names.contains(&word) {
        return None;
    }
    let near = names
        .iter()
        .map(|n| (strsim::jaro_winkler(word, n), *n))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let mut text = format!("error: no such file `{word}`, and `{word}` is not a subcommand\n");
    match near {
        Some((_, name)) => text.push_str(&format!("hint: did you mean the subcommand `{name}`?\n")),
        None => text.push_str(&format!(
            "hint: the subcommands are {}; to run the command `{word}` once per line of standard input, as GNU parallel does: `slurp -- {word}`\n",
            names.join(", ")
        )),
    }
    Some(text)
}

pub fn run() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            let first = std::env::args().nth(1).unwrap_or_default();
            let plain = matches!(
                e.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            );
            if let Some(text) = (!plain).then(|| not_a_word_here(&first)).flatten() {
                eprint!("{text}");
                return ExitCode::from(2);
            }
            e.exit()
        }
    };
    let result = match cli.command {
        None => match cli.file {
            Some(file) => {
                let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
                match command_line(&file, &cli.args, &cli.arg_file, &raw) {
                    Err(why) => {
                        eprint!("{why}");
                        return ExitCode::from(2);
                    }
                    Ok(Some(invocation)) => {
                        run_workload(&Workload::command(invocation), &cli.run, Resume::fresh())
                    }
                    Ok(None) => {
                        if let Some(text) = not_a_word_here(&file.to_string_lossy()) {
                            eprint!("{text}");
                            return ExitCode::from(2);
                        }
                        run_file(&file, &cli.run, Resume::fresh())
                    }
                }
            }
            None => {
                let _ = <Cli as clap::CommandFactory>::command().print_help();
                return ExitCode::from(2);
            }
        },
        Some(Command::Run { file, run }) => run_file(&file, &run, Resume::fresh()),
        Some(Command::Check { files, instance }) => check(&files, &instance),
        Some(Command::Jobspec {
            file,
            task,
            instance,
        }) => jobspec(&file, task.as_deref(), &instance),
        Some(Command::Resources { json, instance }) => resources(json, &instance),
        Some(Command::Runs) => crate::console::runs(),
        Some(Command::Cancel { run, tasks }) if !tasks.is_empty() => {
            crate::live::cancel_tasks(run.as_deref(), &tasks)
        }
        Some(Command::Cancel { run, .. }) => crate::console::cancel(run.as_deref()),
        Some(Command::Start { foreground, run }) => start(foreground, run),
        Some(Command::Submit {
            run,
            scope,
            jobspec,
            tasks,
        }) => crate::live::submit(run.as_deref(), scope.as_deref(), jobspec, &tasks),
        Some(Command::Wait { run, tasks }) => crate::live::wait(run.as_deref(), &tasks),
        Some(Command::Watch { run }) => crate::live::watch(run.as_deref()),
        Some(Command::Close { run, wait }) => crate::live::close(run.as_deref(), wait),
        Some(Command::Log { task, run }) => crate::console::log(&task, run.as_deref()),
        Some(Command::Resume { run }) => resume(run.as_deref()),
        Some(Command::Status { run, json }) => crate::console::status(run.as_deref(), json),
        Some(Command::Report { run, output }) => crate::report::report(run.as_deref(), &output),
        Some(Command::Sim(args)) => crate::sim::sim(&args),
        Some(Command::Policy(command)) => crate::policy::policy(&command),
        Some(Command::Completions { shell }) => {
            // Into memory first: the generator panics on a closed pipe.
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut text = Vec::new();
            clap_complete::generate(shell, &mut cmd, "slurp", &mut text);
            print_all(&text)
        }
        Some(Command::Man) => {
            let mut text = Vec::new();
            clap_mangen::Man::new(<Cli as clap::CommandFactory>::command())
                .render(&mut text)
                .and_then(|()| print_all(&text))
        }
    };
    match result {
        Ok(code) => code,
        // A closed pipe (`slurp jobspec x | head`) is not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn load(file: &Path, opts: &Options) -> Result<Loaded, ExitCode> {
    slurp_interpreter::load(file, opts).map_err(|failure| {
        report(&failure);
        ExitCode::from(2)
    })
}

/// Diagnostics drawn in full; the rest of a file's are counted.
const SHOWN_DIAGNOSTICS: usize = 50;

/// Prints the first diagnostics (every one, up to [`SHOWN_DIAGNOSTICS`]),
/// then one line saying how many there are: a file that is no workflow at
/// all (a CSV checked by mistake) gets a page, not a flood.
fn report(failure: &Failure) {
    let color = io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let _ = io::stderr().write_all(render(failure, color).as_bytes());
}

/// A failure's diagnostics as `report` prints them.
pub(crate) fn render(failure: &Failure, color: bool) -> String {
    let theme = if color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme).with_width(100);
    let mut out = String::new();
    for problem in failure.problems.iter().take(SHOWN_DIAGNOSTICS) {
        let _ = handler.render_report(&mut out, problem);
        out.push('\n');
    }
    let hidden = failure.problems.len().saturating_sub(SHOWN_DIAGNOSTICS);
    if hidden > 0 {
        out.push_str(&format!(
            "… and {hidden} more (the first {SHOWN_DIAGNOSTICS} are above, in file order)\n"
        ));
    }
    out.push_str(&format!("error: {failure}\n"));
    out
}

fn check(files: &[PathBuf], instance: &InstanceArgs) -> io::Result<ExitCode> {
    let opts = instance.options()?;
    let mut code = ExitCode::SUCCESS;
    let mut out = io::stdout().lock();
    for file in files {
        match load(file, &opts) {
            Ok(loaded) => summarise(&mut out, &loaded, &opts)?,
            Err(failed) => code = failed,
        }
    }
    Ok(code)
}

fn summarise(out: &mut impl Write, loaded: &Loaded, opts: &Options) -> io::Result<()> {
    let program = &loaded.program;
    let root = program.root();
    let name = &loaded.sources.get(root.file).display;

    let tasks: usize = program.workflows.iter().map(|w| w.tasks.len()).sum();
    // Counted over runs of tasks that ask the same: one look per sweep.
    let runs = root.tasks.runs();
    let nested: usize = runs
        .iter()
        .filter(|r| r.first.nested.is_some())
        .map(|r| r.len as usize)
        .sum();
    let edges: usize = program.workflows.iter().map(|w| w.graph.edge_count()).sum();
    writeln!(out, "{name}: ok")?;
    writeln!(
        out,
        "  tasks         {} at the top level from {} lines; {} in all, across {} workflow{}",
        root.tasks.len(),
        root.templates.len(),
        tasks,
        program.workflows.len(),
        if program.workflows.len() == 1 {
            ""
        } else {
            "s"
        },
    )?;
    writeln!(
        out,
        "  nested        {nested} allocation{} at the top level, nesting depth {}",
        if nested == 1 { "" } else { "s" },
        program.depth(WorkflowId(0))
    )?;
    writeln!(
        out,
        "  dependencies  {edges} edge{}",
        if edges == 1 { "" } else { "s" }
    )?;
    let shell = &loaded.notes.shell_lines;
    if shell.is_empty() {
        writeln!(
            out,
            "  shell         no line runs through /bin/sh; every command is exec'd"
        )?;
    } else {
        writeln!(
            out,
            "  shell         {} line{} run through /bin/sh -c:",
            shell.len(),
            if shell.len() == 1 { "" } else { "s" }
        )?;
        for (file, line, why) in shell {
            writeln!(
                out,
                "                  {}:{line}  {why}",
                loaded.sources.get(*file).display
            )?;
        }
    }
    // What a launched task runs: its first instance, as a shell takes it.
    for (i, template) in root.templates.iter().enumerate() {
        if template
            .extras
            .as_ref()
            .is_none_or(|x| x.launcher.is_none())
        {
            continue;
        }
        // Tasks are in template order: the template's first is found by
        // bisection, not by a walk (a file of 10⁶ lines has 10⁶ templates).
        let ids = root.tasks.of_template(slurp_runtime::TemplateId(i as u32));
        if ids.is_empty() {
            continue;
        }
        let first = TaskId(ids.start);
        if let Some(launcher) = root.launcher(first) {
            writeln!(
                out,
                "  launcher      {}:{} runs under `{}`: {}",
                loaded.sources.get(template.source.file).display,
                template.source.line,
                launcher.name,
                root.command_line(first, None)
            )?;
        }
    }
    for (file, line, program) in &loaded.notes.almost_legacy {
        writeln!(
            out,
            "  note          {}:{line} starts with a number but is not `NCORES 0|1 COMMAND`: it runs the program `{program}`",
            loaded.sources.get(*file).display
        )?;
    }
    let (cores, gpus, mem, largest) =
        runs.iter()
            .fold((0u64, 0u64, 0u64, 0u64), |(c, g, m, l), run| {
                let (r, n) = (&run.first.request, u64::from(run.len));
                (
                    c + n * r.total_cores(),
                    g + n * r.total_gpus(),
                    m + n * r.total_mem(),
                    l.max(r.total_cores()),
                )
            });
    writeln!(
        out,
        "  demand        {}, {}, {} summed over top-level tasks; the largest takes {}",
        amount("cores", cores),
        amount("gpus", gpus),
        format_bytes(mem),
        amount("cores", largest),
    )?;
    writeln!(out, "  instance      {}", opts.capacity)?;
    if mem > 0 {
        let mechanism = slurp_runtime::exec::memory::Mechanism::get();
        writeln!(
            out,
            "  memory        `mem=` is a hard limit here: {}",
            mechanism.describe()
        )?;
        slurp_runtime::exec::memory::Mechanism::clean_up();
    }
    Ok(())
}

fn jobspec(file: &Path, only: Option<&str>, instance: &InstanceArgs) -> io::Result<ExitCode> {
    let mut opts = instance.options()?;
    // Jobspecs are for a cluster: tasks are checked against an instance
    // only when one is declared (--cores, --gpus, --mem, --nodes, or a
    // Slurm or Flux backend), not against this machine.
    let declared = instance.cores.is_some()
        || instance.gpus.is_some()
        || instance.mem.is_some()
        || instance.nodes.is_some()
        || instance.backend != "auto";
    if !declared {
        opts.capacity = Capacity {
            nodes: 1 << 16,
            cores_per_node: 1 << 16,
            gpus_per_node: 1 << 12,
            mem_per_node: 1 << 50,
        };
    }
    let loaded = match load(file, &opts) {
        Ok(loaded) => loaded,
        Err(code) => return Ok(code),
    };
    let program: &Program = &loaded.program;
    let root = program.root();
    let cwd = opts.cwd.display().to_string();
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut found = false;
    for id in root.task_ids() {
        if let Some(only) = only
            && root.task_name(id) != only
        {
            continue;
        }
        found = true;
        write_jobspec(&mut out, program, id, &cwd)?;
    }
    out.flush()?;
    if let (Some(only), false) = (only, found) {
        eprintln!(
            "error: no task `{only}` in `{}`",
            loaded.sources.get(root.file).display
        );
        eprintln!(
            "hint: `slurp check` lists the file's tasks; ids look like `sim[17]`, `prep` or `@3`"
        );
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}

fn write_jobspec(out: &mut impl Write, program: &Program, id: TaskId, cwd: &str) -> io::Result<()> {
    let spec = program.jobspec(WorkflowId(0), id, cwd);
    serde_json::to_writer(&mut *out, &spec)?;
    out.write_all(b"\n")
}

fn resources(json: bool, instance: &InstanceArgs) -> io::Result<ExitCode> {
    let machine = Machine::detect();
    let capacity = instance.capacity_of(&machine);
    // Found by making (and now removing) slurp's cgroup.
    let _clean = CleanUp;
    let job = match instance.allocation() {
        Ok(job) => job,
        Err(why) => {
            eprintln!("error: {why}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut out = io::stdout().lock();
    if json {
        let allocation = job.as_ref().map(|j| {
            serde_json::json!({
                "manager": format!("{:?}", j.manager).to_lowercase(),
                "job": j.job,
                "nodes": j.nodes,
                "cpus_per_node": j.cpus,
            })
        });
        let limits = slurp_runtime::exec::memory::Mechanism::get().name();
        let value = serde_json::json!({ "capacity": capacity, "machine": machine, "allocation": allocation, "memory_limits": limits });
        serde_json::to_writer_pretty(&mut out, &value)?;
        writeln!(out)?;
    } else {
        let list = |ids: Vec<String>| {
            if ids.is_empty() {
                "none".to_owned()
            } else {
                ids.join(",")
            }
        };
        if let Some(job) = &job {
            let (what, how) = match job.manager {
                slurp_runtime::backend::allocation::Manager::Slurm => {
                    ("slurm   job", "its steps, srun")
                }
                slurp_runtime::backend::allocation::Manager::Flux => {
                    ("flux    instance", "its jobs, flux run")
                }
            };
            writeln!(
                out,
                "{what} {} on {}  (tasks start as {how})",
                job.job,
                job.nodes.join(",")
            )?;
        }
        writeln!(out, "nodes   {}", capacity.nodes)?;
        writeln!(out, "cores   {} per node", capacity.cores_per_node)?;
        writeln!(out, "gpus    {} per node", capacity.gpus_per_node)?;
        writeln!(
            out,
            "memory  {} per node",
            format_bytes(capacity.mem_per_node)
        )?;
        writeln!(
            out,
            "limits  a task's mem= held by {}",
            slurp_runtime::exec::memory::Mechanism::get().describe()
        )?;
        writeln!(
            out,
            "cpus    {}  (this process's affinity mask, cut to its cgroup quota)",
            list(machine.cpus.iter().map(usize::to_string).collect())
        )?;
        writeln!(
            out,
            "devices {}  (visible GPUs)",
            list(machine.gpus.clone())
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Removes slurp's memory cgroup when dropped, if one was made.
struct CleanUp;

impl Drop for CleanUp {
    fn drop(&mut self) {
        slurp_runtime::exec::memory::Mechanism::clean_up();
    }
}

/// What a run continues, if anything.
struct Resume {
    /// What already succeeded.
    credits: slurp_runtime::journal::Credits,
    /// The run resumed, and the arguments it was first run with.
    from: Option<String>,
    args: Vec<String>,
    /// What was submitted to the run resumed, submitted again.
    submitted: Vec<(String, slurp_runtime::run::Submission)>,
}

impl Resume {
    fn fresh() -> Self {
        Resume {
            credits: Default::default(),
            from: None,
            args: std::env::args().skip(1).collect(),
            submitted: Vec::new(),
        }
    }
}

/// `slurp start`: an open instance with no tasks yet; detached (its run
/// id printed once it answers) unless `--foreground`.
fn start(foreground: bool, mut args: RunArgs) -> io::Result<ExitCode> {
    args.open = true;
    if args.no_journal {
        eprintln!(
            "error: an instance needs its run directory: `--no-journal` cannot be used with `slurp start`"
        );
        return Ok(ExitCode::from(2));
    }
    if foreground {
        return run_workload(&Workload::Open, &args, Resume::fresh());
    }
    let run = run_id();
    let dir = match std::env::var_os("SLURP_RUN_DIR") {
        Some(parent) => PathBuf::from(parent).join("nested").join(&run),
        None => match slurp_runtime::journal::open_store(&std::env::current_dir()?)? {
            Ok(store) => store.join("runs").join(&run),
            Err(mismatch) => {
                eprintln!("error: {mismatch}");
                return Ok(ExitCode::from(2));
            }
        },
    };
    crate::live::start_detached(&dir, &run)
}

/// `slurp resume [RUN]`: the same workflow file (as it is now) and the same
/// arguments, skipping every task whose key succeeded before.
fn resume(run: Option<&str>) -> io::Result<ExitCode> {
    let store = match crate::console::open_store()? {
        Ok(store) => store,
        Err(why) => {
            eprintln!("error: {why}");
            return Ok(ExitCode::from(2));
        }
    };
    let replay = match run {
        Some(prefix) => match crate::console::find_run(&store, Some(prefix))? {
            Ok(dir) => {
                let replay = slurp_runtime::journal::replay(&dir.join("events.jsonl"))?;
                if let Some(why) = replay.damage.fatal() {
                    eprintln!("error: {why}");
                    return Ok(ExitCode::from(2));
                }
                replay
            }
            Err(why) => {
                eprintln!("error: {why}");
                eprintln!("hint: `slurp runs` lists the runs of this directory");
                return Ok(ExitCode::from(2));
            }
        },
        // The latest run that got as far as its header (one killed before
        // that wrote nothing ran nothing). A damaged latest run is named,
        // never passed over for an older one of maybe another workflow.
        None => {
            let mut found = None;
            for dir in slurp_runtime::journal::runs(&store)?.iter().rev() {
                let replay = slurp_runtime::journal::replay(&dir.join("events.jsonl"))?;
                if let Some(why) = replay.damage.fatal() {
                    eprintln!("error: the latest run is damaged: {why}");
                    eprintln!(
                        "hint: `slurp runs` lists the runs; `slurp resume RUN` resumes an older one"
                    );
                    return Ok(ExitCode::from(2));
                }
                if !replay.run.is_empty() {
                    found = Some(replay);
                    break;
                }
            }
            match found {
                Some(replay) => replay,
                None => {
                    eprintln!("error: no run to resume here");
                    return Ok(ExitCode::from(2));
                }
            }
        }
    };
    if replay.live() {
        eprintln!(
            "error: run {} is still running (process {})",
            replay.run, replay.pid
        );
        return Ok(ExitCode::from(2));
    }
    let mut argv = vec!["slurp".to_owned()];
    argv.extend(replay.args.iter().cloned());
    let not_resumable = || {
        eprintln!(
            "error: run {} was not started by `slurp FILE` or a command line; nothing to resume",
            replay.run
        );
        Ok(ExitCode::from(2))
    };
    let submitted = replay.submitted.clone();
    let (mut args, mut file, invocation) = match Cli::try_parse_from(&argv) {
        Ok(Cli {
            command: Some(Command::Run { file, run }),
            ..
        }) => (run, file, None),
        Ok(Cli {
            command: Some(Command::Start { run, .. }),
            ..
        }) => {
            let mut run = run;
            run.run_id = None;
            eprintln!(
                "slurp: resuming open instance {} ({} submission{} to submit again)",
                replay.run,
                submitted.len(),
                if submitted.len() == 1 { "" } else { "s" }
            );
            let resume = Resume {
                credits: resume_credits(&store, &replay).0,
                from: Some(replay.run.clone()),
                args: replay.args.clone(),
                submitted,
            };
            return run_workload(&Workload::Open, &run, resume);
        }
        Ok(Cli {
            command: None,
            file: Some(file),
            run,
            args,
            arg_file,
        }) => {
            let raw: Vec<std::ffi::OsString> = argv.iter().map(Into::into).collect();
            match command_line(&file, &args, &arg_file, &raw) {
                Ok(invocation) => (run, file, invocation),
                Err(_) => return not_resumable(),
            }
        }
        _ => return not_resumable(),
    };
    // A fresh run of its own, not the id `slurp start` gave the first.
    args.run_id = None;
    // The file as the first run named it, from the directory that holds
    // `.slurp/` — a copied or moved project resumes its own file — and the
    // absolute path recorded only when that one is not there.
    let project = store.parent().map(Path::to_path_buf).unwrap_or_default();
    if file.is_relative() && file.as_os_str() != "-" && project.join(&file).is_file() {
        file = project.join(&file);
    } else if !replay.path.is_empty() && replay.path != "-" {
        file = PathBuf::from(&replay.path);
    }
    let (credits, done) = resume_credits(&store, &replay);
    eprintln!(
        "slurp: resuming run {} with {} ({done} task{} already succeeded)",
        replay.run,
        file.display(),
        if done == 1 { "" } else { "s" }
    );
    let resume = Resume {
        credits,
        from: Some(replay.run.clone()),
        args: replay.args,
        submitted,
    };
    match invocation {
        None => run_file(&file, &args, resume),
        Some(mut invocation) => {
            // Values read from standard input come from the run's copy.
            let copy = store.join("runs").join(&replay.run).join(STDIN_COPY);
            let stdin = stdin_source(&invocation);
            if copy.is_file() {
                use slurp_interpreter::parallel::{Input, InputValues};
                let stdin =
                    |s: &Input| matches!(&s.values, InputValues::Lines(p) if p.as_os_str() == "-");
                if invocation.sources.is_empty() {
                    invocation.sources.push(Input {
                        values: InputValues::Lines(copy),
                        linked: false,
                    });
                } else if let Some(source) = invocation.sources.iter_mut().find(|s| stdin(s)) {
                    source.values = InputValues::Lines(copy);
                }
            }
            run_workload(&Workload::Command { invocation, stdin }, &args, resume)
        }
    }
}

/// What succeeded anywhere along the chain of resumed runs: a resumed run
/// killed while it was still recording what it took over must not make
/// those tasks run again. Per key, and per chunk of a cohort, the most
/// successes any run saw; and how many tasks that is, as the run of the
/// chain with the most on record counts them (a run holds all it took
/// over, so adding the runs up would count a task once per run).
fn resume_credits(
    store: &Path,
    replay: &slurp_runtime::journal::Replay,
) -> (slurp_runtime::journal::Credits, u64) {
    let mut credits = replay.credits();
    let mut done = credits.total();
    let mut previous = replay.resumes.clone();
    let mut seen = std::collections::HashSet::new();
    while let Some(id) = previous.filter(|id| seen.insert(id.clone())) {
        let path = store.join("runs").join(&id).join("events.jsonl");
        let Ok(older) = slurp_runtime::journal::replay(&path) else {
            break;
        };
        let theirs = older.credits();
        done = done.max(theirs.total());
        credits.merge_older(theirs);
        previous = older.resumes;
    }
    (credits, done)
}

/// The copy a run keeps of the values it read from standard input, for
/// `slurp resume`.
const STDIN_COPY: &str = "stdin";

/// A learned policy as the runtime takes it: FCFS or EASY around the
/// choices of the model `spec` names, loaded now.
fn learned_policy(
    spec: &slurp_fair::spec::Spec,
    args: &RunArgs,
) -> Result<slurp_runtime::run::Own, String> {
    let model = spec.load()?;
    Ok(slurp_runtime::run::Own {
        policy: if spec.backfill {
            PolicyKind::EASY
        } else {
            PolicyKind::FCFS
        },
        learned: Some(Arc::new(slurp_fair::chooser::ForRuns {
            model,
            easy: spec.backfill,
            sample: args.sample.then_some(args.seed),
        })),
    })
}

/// What a run runs: a workflow file, or a GNU parallel-style command line.
enum Workload<'a> {
    File(&'a Path),
    /// `slurp start`: no tasks until they are submitted.
    Open,
    Command {
        invocation: slurp_interpreter::parallel::Invocation,
        /// The source (counted from 0) that came from standard input, now
        /// or (resumed) in the first run: the run keeps a copy of it.
        stdin: Option<usize>,
    },
}

impl Workload<'_> {
    fn load(&self, opts: &Options) -> Result<Loaded, ExitCode> {
        match self {
            Workload::File(file) => load(file, opts),
            Workload::Open => Ok(slurp_interpreter::empty(opts)),
            Workload::Command { invocation, .. } => {
                slurp_interpreter::parallel::command_line(invocation, opts).map_err(|failure| {
                    report(&failure);
                    ExitCode::from(2)
                })
            }
        }
    }

    /// A command line's run, reading standard input where it says so.
    fn command(invocation: slurp_interpreter::parallel::Invocation) -> Self {
        let stdin = stdin_source(&invocation);
        Workload::Command { invocation, stdin }
    }

    fn stdin_column(&self) -> Option<usize> {
        match self {
            Workload::File(_) | Workload::Open => None,
            Workload::Command { stdin, .. } => *stdin,
        }
    }

    /// Whether the values are still to be read from standard input.
    fn reads_stdin(&self) -> bool {
        match self {
            Workload::File(_) | Workload::Open => false,
            Workload::Command { invocation, .. } => stdin_source(invocation).is_some(),
        }
    }
}

/// The input source (counted from 0) read from standard input, if any.
fn stdin_source(invocation: &slurp_interpreter::parallel::Invocation) -> Option<usize> {
    use slurp_interpreter::parallel::InputValues;
    if invocation.sources.is_empty() {
        return Some(0);
    }
    invocation
        .sources
        .iter()
        .position(|s| matches!(&s.values, InputValues::Lines(p) if p.as_os_str() == "-"))
}

impl Workload<'_> {}

/// `-j N`: N, `N%` of `cores`, `+N` or `-N` beside it; at least 1.
fn jobs(text: &str, cores: u32) -> Result<u32, String> {
    let bad =
        || format!("`-j {text}`: give a number of tasks at once, such as `4`, `50%`, `+2` or `-1`");
    let n = if let Some(p) = text.strip_suffix('%') {
        let p: f64 = p.parse().map_err(|_| bad())?;
        (f64::from(cores) * p / 100.0).floor() as i64
    } else if let Some(more) = text.strip_prefix('+') {
        i64::from(cores) + more.parse::<i64>().map_err(|_| bad())?
    } else if text.starts_with('-') {
        i64::from(cores) + text.parse::<i64>().map_err(|_| bad())?
    } else {
        match text.parse::<i64>().map_err(|_| bad())? {
            0 => {
                return Err(format!(
                    "`-j 0`: slurp runs as many tasks as it has slots; give a number, such as `-j {}`",
                    cores.max(1) * 4
                ));
            }
            n => n,
        }
    };
    Ok(n.clamp(1, i64::from(u32::MAX)) as u32)
}

fn run_file(file: &Path, args: &RunArgs, resume: Resume) -> io::Result<ExitCode> {
    run_workload(&Workload::File(file), args, resume)
}

fn run_workload(workload: &Workload, args: &RunArgs, resume: Resume) -> io::Result<ExitCode> {
    let machine = Machine::detect();
    let mut opts = args.instance.options_on(&machine)?;
    let usage = |message: String| {
        eprintln!("error: {message}");
        Ok(ExitCode::from(2))
    };
    let mut bind = !args.no_bind;
    if let Some(text) = &args.jobs {
        match jobs(text, opts.capacity.cores_per_node) {
            Ok(n) => {
                opts.capacity.nodes = 1;
                // Slots, as parallel's: the kernel places them (one bound
                // core each costs a little per spawn, and more slots than
                // CPUs could not all be bound).
                bind = false;
                opts.capacity.cores_per_node = n;
            }
            Err(e) => return usage(e),
        }
    }
    let timeout = match args.timeout.as_deref() {
        None => None,
        Some(text) => {
            let seconds = match text.parse::<u64>() {
                Ok(n) => Ok(Some(n)),
                Err(_) => slurp_interpreter::parse_duration(text),
            };
            match seconds {
                Ok(Some(secs)) if secs > 0 => std::num::NonZeroU64::new(secs),
                _ => {
                    return usage(format!(
                        "`--timeout {text}`: give a duration such as `30s`, `10m` or `1h` (a bare number is seconds)"
                    ));
                }
            }
        }
    };
    // What needs each task's whole output, which only `group` captures.
    let output = if args.ungroup {
        "ungroup"
    } else {
        args.output.as_str()
    };
    let whole = [
        (
            "--keep-order",
            args.keep_order,
            "shows each task's whole output in task order",
        ),
        ("--tag", args.tag, "tags each line of a task's whole output"),
        (
            "--results",
            args.results.is_some(),
            "keeps each task's whole output in files",
        ),
    ];
    if output != "group"
        && let Some((option, _, what)) = whole.iter().find(|(_, given, _)| *given)
    {
        return usage(format!(
            "`{option}` {what}: it needs `--output group` (the default), not `--output {output}`"
        ));
    }
    if workload.reads_stdin() && io::stdin().is_terminal() {
        eprintln!(
            "error: no input values: the command reads them from standard input, which is a terminal"
        );
        eprintln!(
            "hint: give them after `:::` (`slurp -- gzip {{}} ::: *.csv`), from a file with `:::: FILE`, or pipe them in (`find . -name '*.csv' | slurp -- gzip {{}}`)"
        );
        return Ok(ExitCode::from(2));
    }

    // One policy per level of nesting; a learned one is a chooser on top
    // of FCFS or EASY.
    let mut policies: Vec<PolicyKind> = Vec::new();
    let mut learned: Vec<Option<Arc<dyn Learned>>> = Vec::new();
    for name in args.policy.split(',') {
        match slurp_fair::spec::Spec::parse(name) {
            Some(Ok(spec)) => match learned_policy(&spec, args) {
                Ok(own) => {
                    policies.push(own.policy);
                    learned.push(own.learned);
                }
                Err(e) => return usage(e),
            },
            Some(Err(e)) => return usage(e),
            None => match name.parse() {
                Ok(policy) => {
                    policies.push(policy);
                    learned.push(None);
                }
                Err(e) => return usage(slurp_fair::spec::naming_learned(e)),
            },
        }
    }
    let mut grace = match slurp_interpreter::parse_duration(&args.grace) {
        Ok(secs) => std::time::Duration::from_secs(secs.unwrap_or(0)),
        Err(e) => return usage(format!("`--grace {}`: {e}", args.grace)),
    };
    // A slurp that is itself a task finishes stopping its tasks (grace,
    // then at most as long again for strays) before its parent's grace ends
    // and the parent's SIGKILL lands: half the parent's grace at most.
    if let Some(parent) = std::env::var("SLURP_GRACE_MS")
        .ok()
        .and_then(|ms| ms.parse::<u64>().ok())
    {
        grace = grace.min(std::time::Duration::from_millis(parent / 2));
    }
    let every = match args
        .progress
        .as_deref()
        .map(slurp_interpreter::parse_duration)
    {
        None => None,
        Some(Ok(Some(secs))) if secs > 0 => Some(std::time::Duration::from_secs(secs)),
        _ => {
            return usage(format!(
                "`--progress {}`: give a duration of at least a second, such as 10s or 1m",
                args.progress.as_deref().unwrap_or_default()
            ));
        }
    };
    let open_for = match args.open_for.as_deref() {
        None => None,
        Some(text) => match slurp_interpreter::parse_duration(text) {
            Ok(Some(secs)) if secs > 0 => Some(std::time::Duration::from_secs(secs)),
            _ => {
                return usage(format!(
                    "`--open-for {text}`: give a duration such as `30m` or `8h`"
                ));
            }
        },
    };
    let mut loaded = match workload.load(&opts) {
        Ok(loaded) => loaded,
        Err(code) => return Ok(code),
    };
    // `--timeout` and `--retries` for the top-level tasks that set none.
    // What a run's tasks share: one change per run, not per task.
    loaded.program.workflows[0].tasks.update_shared(|mut task| {
        if task.time_limit.is_none() {
            task.time_limit = timeout;
        }
        if let Some(tries) = args.retries {
            task.retries = task.retries.max(tries - 1);
        }
        task
    });
    if matches!(args.instance.backend.as_str(), "slurm" | "flux")
        && let Some((error, hint)) = refused_by_backend(&loaded, args)
    {
        eprintln!("error: {error}");
        eprintln!("hint: {hint}");
        return Ok(ExitCode::from(2));
    }
    if args.dry_run {
        let root = loaded.program.root();
        let mut out = io::BufWriter::new(io::stdout().lock());
        for id in root.task_ids() {
            writeln!(out, "{}", root.command_line(id, None))?;
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    // Every policy a nested entry names must exist in this runtime, and
    // every model one names must load, before anything starts. A model's
    // path is taken from the file that names it.
    let mut named = std::collections::HashMap::new();
    for workflow in &loaded.program.workflows {
        for template in &workflow.templates {
            let Some(policy) = template.extras.as_ref().and_then(|x| x.policy.as_deref()) else {
                continue;
            };
            let key = (template.source.file, policy.to_owned());
            if policy.parse::<PolicyKind>().is_ok() || named.contains_key(&key) {
                continue;
            }
            let source = loaded.sources.get(template.source.file);
            let own = match slurp_fair::spec::Spec::parse(policy) {
                Some(Ok(mut spec)) => {
                    if let (slurp_fair::spec::Source::File(model), Some(dir)) =
                        (&spec.model, source.path.parent())
                    {
                        spec.model = slurp_fair::spec::Source::File(dir.join(model));
                    }
                    learned_policy(&spec, args)
                }
                Some(Err(e)) => Err(e),
                None => Err(
                    "not available in this runtime (the orders are fcfs, sjf, f1, wfp3, unicep, fairshare, alone or with +easy or +conservative)"
                        .to_owned(),
                ),
            };
            match own {
                Ok(own) => {
                    named.insert(key, own);
                }
                Err(why) => {
                    // Labelled at the value in its line, as the
                    // interpreter's diagnostics are.
                    let line = template.source.start as usize..template.source.end as usize;
                    let at = source.text[line.clone()]
                        .find(&format!("policy={policy}"))
                        .map_or(line.start, |i| line.start + i + "policy=".len());
                    let diagnostic = miette::MietteDiagnostic::new(format!(
                        "policy `{policy}` cannot be used: {why}"
                    ))
                    .with_code("slurp::bad_policy")
                    .with_label(miette::LabeledSpan::at(at..at + policy.len(), "this policy"))
                    .with_help(
                        "a learned policy is `fair` (the model slurp ships) or `fair:MODEL.onnx`, the path relative to this file, with the model's normalisers in MODEL.onnx.json",
                    );
                    let report = miette::Report::new(diagnostic).with_source_code(
                        miette::NamedSource::new(source.display.clone(), source.text.clone()),
                    );
                    eprintln!("{report:?}");
                    eprintln!(
                        "error: {}:{}: nothing was run",
                        source.display, template.source.line
                    );
                    return Ok(ExitCode::from(2));
                }
            }
        }
    }
    // Inside a task of another slurp, this run belongs to that run.
    // A slurp started inside a task of another slurp: how deep, and not
    // without end (a script that calls slurp on itself).
    let depth: u32 = std::env::var("SLURP_DEPTH")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    if depth as usize >= slurp_interpreter::MAX_DEPTH {
        eprintln!(
            "error: slurp is nested {depth} levels deep inside other slurps' tasks; the limit is {}",
            slurp_interpreter::MAX_DEPTH
        );
        eprintln!(
            "hint: a task that runs slurp on its own workflow nests without end; check the commands that start slurp"
        );
        return Ok(ExitCode::from(2));
    }
    // A nested entry's own Slurm job (`--backend slurm`) keeps its journal
    // in its parent run's, as a slurp inside a task does.
    let parent = std::env::var_os("SLURP_RUN_DIR").or_else(|| std::env::var_os("SLURP_PARENT_RUN"));
    let run_dir: PathBuf = match (parent, &args.run_id) {
        (Some(parent), Some(id)) => PathBuf::from(parent).join("nested").join(id),
        (None, Some(id)) => match slurp_runtime::journal::open_store(&opts.cwd)? {
            Ok(store) => store.join("runs").join(id),
            Err(mismatch) => return usage(format!("{mismatch}")),
        },
        (Some(parent), None) => PathBuf::from(parent).join("nested").join(format!(
            "{}-{}",
            std::env::var("SLURP_TASK_ID")
                .unwrap_or_default()
                .replace('/', "_"),
            std::process::id()
        )),
        // Without a journal nothing is made here unless a task's output
        // is kept (`--output files` makes `out/` when it writes).
        (None, None) if args.no_journal => opts.cwd.join(".slurp").join("runs").join(run_id()),
        (None, None) => match slurp_runtime::journal::open_store(&opts.cwd)? {
            Ok(store) => store.join("runs").join(run_id()),
            Err(mismatch) => return usage(format!("{mismatch}")),
        },
    };
    if !args.no_journal {
        std::fs::create_dir_all(&run_dir)?;
        if let Some(column) = workload.stdin_column() {
            // Standard input is read once: the run keeps what it read, so
            // that `slurp resume` has it.
            let template = loaded.program.root().template(slurp_runtime::TemplateId(0));
            let mut text = String::new();
            for value in template.column_values(column as u16) {
                text.push_str(&value);
                text.push('\n');
            }
            std::fs::write(run_dir.join(STDIN_COPY), text)?;
        }
    }
    let allocation = match args.instance.allocation() {
        Ok(allocation) => allocation,
        Err(why) => {
            eprintln!("error: {why}");
            eprintln!("hint: `--backend local` runs the tasks here, outside Slurm");
            return Ok(ExitCode::from(2));
        }
    };
    // Inside a Flux instance, Flux places each rank on its cores; slurp
    // keeps `--flux-ahead` more ranks per core queued in Flux than it has
    // cores, so a core that frees starts the next rank at once instead of
    // after Flux's own submit-to-start latency (tasks were checked against
    // the instance as it is).
    let mut capacity = opts.capacity;
    if let Some(job) = &allocation
        && job.manager == slurp_runtime::backend::allocation::Manager::Flux
    {
        capacity.cores_per_node = capacity
            .cores_per_node
            .saturating_mul(args.flux_ahead.saturating_add(1));
    }
    let options = RunOptions {
        allocation,
        capacity,
        machine,
        policies,
        learned,
        named,
        bind,
        output: match args.output.as_str() {
            _ if args.ungroup => OutputMode::Ungroup,
            "ungroup" => OutputMode::Ungroup,
            "tag" => OutputMode::Tag,
            "files" => OutputMode::Files,
            "none" => OutputMode::None,
            _ => OutputMode::Group,
        },
        halt: args.halt,
        show: slurp_runtime::show::Options {
            keep_order: args.keep_order,
            tag: args.tag,
            results: args.results.as_ref().map(|d| opts.cwd.join(d)),
        },
        grace,
        cwd: opts.cwd.clone(),
        run_dir,
        depth,
        resume: resume.credits.clone(),
        joblog: args.joblog.clone(),
        joblog_append: resume.from.is_some(),
        listen: !args.no_journal,
        open: args.open || matches!(workload, Workload::Open),
        open_for,
        resubmit: resume.submitted.clone(),
    };
    let files: Vec<(String, &str)> = loaded
        .sources
        .iter()
        .map(|f| (f.display.clone(), &*f.text))
        .collect();
    let root_name = loaded
        .sources
        .get(loaded.program.root().file)
        .display
        .clone();
    let run_name = options
        .run_dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let journal = if args.no_journal {
        None
    } else {
        {
            let header = slurp_runtime::journal::Header {
                workflow: root_name,
                path: loaded
                    .sources
                    .get(loaded.program.root().file)
                    .path
                    .display()
                    .to_string(),
                args: resume.args,
                resumes: resume.from,
            };
            Some(slurp_runtime::journal::Journal::create(
                &options.run_dir,
                &run_name,
                header,
                &files,
            )?)
        }
    };
    if matches!(args.instance.backend.as_str(), "slurm" | "flux") {
        return submit(&loaded, args, &options, journal, every);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // A slurp inside another's task leaves the display to the outer one.
    let nested = std::env::var_os("SLURP_RUN_DIR").is_some();
    let mode = if nested {
        crate::progress::Mode::Off
    } else {
        crate::progress::Mode::choose(args.quiet, options.output == OutputMode::Ungroup, every)
    };
    let progress = crate::progress::Progress::new(&loaded.program, mode);
    let mut console = crate::console::Console::new(options.output, progress);
    // A run with memory limits finds how they hold before any task starts:
    // under cgroup v2 slurp may have to be alone in its cgroup to hand the
    // memory controller down, which a task already running there (one
    // without `mem=`, started first) would prevent.
    if loaded
        .program
        .workflows
        .iter()
        .any(|w| w.tasks.runs().iter().any(|r| r.first.request.mem > 0))
    {
        slurp_runtime::exec::memory::Mechanism::get();
    }
    // What a task leaves running outside its process group comes back to
    // this process, to be ended with the run.
    slurp_runtime::exec::strays::adopt_orphans();
    let mut submitter = crate::live::Submitter {
        live: slurp_interpreter::Live::new(std::mem::take(&mut loaded.sources)),
        opts: opts.clone(),
    };
    let report = slurp_runtime::run::run(
        &runtime,
        &mut loaded.program,
        &options,
        &mut console,
        journal,
        Some(&mut submitter),
    );
    loaded.sources = submitter.live.sources;
    console.finish();
    let strays = slurp_runtime::exec::strays::end_strays(
        options.grace.min(std::time::Duration::from_secs(1)),
    );
    slurp_runtime::exec::memory::Mechanism::clean_up();
    if strays > 0 {
        eprintln!(
            "slurp: ended {strays} process{} that tasks left running outside their process groups",
            if strays == 1 { "" } else { "es" }
        );
    }
    let report = report?;
    // A nested instance that succeeded says nothing: its parent reports.
    if !((nested || args.quiet) && report.succeeded()) {
        crate::console::summary(&loaded, &report);
    }
    Ok(exit_status(&report))
}

/// 0 when every task succeeded, or when a `--halt …,success=` rule was met
/// (as GNU parallel: the failures before it were expected); 1 when some
/// task did not succeed; 130 when interrupted.
fn exit_status(report: &slurp_runtime::run::Report) -> ExitCode {
    if report.interrupted {
        ExitCode::from(130)
    } else if report.succeeded() || report.halted_on_success {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// What `--backend slurm|flux` cannot do, said before anything is
/// recorded or run: (error, hint).
fn refused_by_backend(loaded: &Loaded, args: &RunArgs) -> Option<(String, String)> {
    let backend = args.instance.backend.as_str();
    let local_only = [
        ("--keep-order", args.keep_order),
        ("--tag", args.tag),
        ("--results", args.results.is_some()),
        ("--jobs", args.jobs.is_some()),
    ];
    // The batch system starts a task's copies and wires them up itself.
    for template in &loaded.program.root().templates {
        let Some(extras) = &template.extras else {
            continue;
        };
        let what = match (&extras.launcher, extras.pmi) {
            (Some(l), _) => format!("`launcher={}`", l.name),
            (None, Some(true)) => "`pmi=simple`".to_owned(),
            _ => continue,
        };
        return Some((
            format!(
                "{}:{}: {what} cannot be used with `--backend {backend}`, which starts the copies and serves them PMI itself",
                loaded.sources.get(template.source.file).display,
                template.source.line
            ),
            format!("drop it: each task is a {backend} job of `ntasks` copies"),
        ));
    }
    let (option, _) = local_only.iter().find(|(_, given)| *given)?;
    Some((
        format!("{option} applies to runs here, not to `--backend {backend}`"),
        "the batch system keeps each job's output in the run directory (`slurp log TASK`); without `--backend`, slurp runs the tasks here".to_owned(),
    ))
}

/// `--backend slurm|flux`: every task a job, followed to the end.
fn submit(
    loaded: &Loaded,
    args: &RunArgs,
    options: &RunOptions,
    journal: Option<slurp_runtime::journal::Journal>,
    every: Option<std::time::Duration>,
) -> io::Result<ExitCode> {
    let backend = args.instance.backend.as_str();
    let reachable = match backend {
        "flux" => slurp_runtime::backend::flux::instance_capacity().map(|_| ()),
        _ => slurp_runtime::backend::slurm::cluster_capacity().map(|_| ()),
    };
    if let Err(why) = reachable {
        eprintln!("error: --backend {backend}: {why}");
        return Ok(ExitCode::from(2));
    }
    let opts = slurp_runtime::backend::batch::Options {
        queue: args.partition.clone(),
        poll: std::time::Duration::from_millis(500),
        cwd: options.cwd.clone(),
        run_dir: options.run_dir.clone(),
        slurp: std::env::current_exe()?,
        output: options.output,
        resume: options.resume.keys.clone(),
    };
    let root = loaded.program.root();
    let sources = |t: TaskId| {
        let template = root.template(root.task(t).template);
        format!(
            "{}:{}",
            loaded.sources.get(template.source.file).display,
            template.source.line
        )
    };
    let progress = crate::progress::Progress::new(
        &loaded.program,
        crate::progress::Mode::choose(args.quiet, options.output == OutputMode::Ungroup, every),
    );
    let mut console = crate::console::Console::new(options.output, progress);
    let mut slurm = slurp_runtime::backend::slurm::Slurm::default();
    let mut flux = slurp_runtime::backend::flux::Flux;
    let system: &mut dyn slurp_runtime::backend::batch::System = match backend {
        "flux" => &mut flux,
        _ => &mut slurm,
    };
    let result = slurp_runtime::backend::batch::run(
        system,
        &loaded.program,
        &opts,
        &mut console,
        journal,
        &sources,
    );
    console.finish();
    match result {
        Ok(report) => {
            if !(args.quiet && report.succeeded()) {
                crate::console::summary(loaded, &report);
            }
            Ok(exit_status(&report))
        }
        Err(why) => {
            eprintln!("error: {why}");
            eprintln!(
                "hint: {}",
                match backend {
                    "flux" =>
                        "the message is Flux's; `flux queue list` lists the queues and their limits",
                    _ =>
                        "the message is Slurm's; `sinfo -s` lists the partitions, `scontrol show partition` their limits",
                }
            );
            Ok(ExitCode::from(2))
        }
    }
}

/// The start time (seconds, then nanoseconds, fixed width) and the
/// process id: unique, and sorting as text sorts by start time.
fn run_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}-{:09}-{}",
        now.as_secs(),
        now.subsec_nanos(),
        std::process::id()
    )
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    /// `slurp WORD` in a task is a nested entry unless WORD is a
    /// subcommand: the interpreter's list must be exactly ours.
    #[test]
    fn the_interpreter_knows_every_subcommand() {
        let mut ours: Vec<String> = super::Cli::command()
            .get_subcommands()
            .map(|c| c.get_name().to_owned())
            .collect();
        ours.push("help".to_owned());
        ours.sort();
        let mut theirs: Vec<String> = slurp_interpreter::SUBCOMMANDS
            .iter()
            .map(|s| s.to_string())
            .collect();
        theirs.sort();
        assert_eq!(ours, theirs);
    }
}
