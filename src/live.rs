//! The live instance from the shell: `slurp submit`, `wait`, `watch`,
//! `close`, `cancel RUN TASK…` are clients of a running slurp's socket
//! (docs/protocol.md); `slurp start` starts an empty instance that stays
//! open. Also the [`Submitter`] a run lowers what it is sent with.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Value, json};
use slurp_interpreter::Options;
use slurp_runtime::protocol::Refusal;
use slurp_runtime::run::{Submission, Submit};
use slurp_runtime::{Capacity, Program, WorkflowId};

/// Lowers submissions with the interpreter, as a file's lines would be.
#[derive(Debug)]
pub struct Submitter {
    pub live: slurp_interpreter::Live,
    pub opts: Options,
}

impl Submit for Submitter {
    fn submit(
        &mut self,
        program: &mut Program,
        workflow: WorkflowId,
        scope: &str,
        capacity: Capacity,
        submission: &Submission,
    ) -> Result<std::ops::Range<u32>, Refusal> {
        let opts = Options {
            cwd: submission.cwd.clone(),
            ..self.opts.clone()
        };
        let to = slurp_interpreter::Instance {
            workflow,
            scope,
            capacity,
        };
        self.live
            .submit(program, to, &submission.text, &submission.source, &opts)
            .map_err(|failure| Refusal {
                code: "invalid_workflow",
                message: failure.to_string(),
                diagnostic: Some(crate::cli::render(&failure, false)),
                index: None,
            })
    }

    fn jobspec_line(&mut self, jobspec: &Value, name: &str) -> Result<String, Refusal> {
        slurp_interpreter::from_jobspec::task_line(jobspec, name)
            .map_err(|why| Refusal::new("bad_jobspec", why))
    }
}

/// One connection to a live instance.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next: u64,
}

/// Why no instance could be reached: the message and a hint.
pub struct Unreachable(pub String, pub String);

impl Unreachable {
    pub fn exit(&self) -> ExitCode {
        eprintln!("error: {}", self.0);
        eprintln!("hint: {}", self.1);
        ExitCode::from(2)
    }
}

/// The socket to use: `--run RUN` (an id or prefix in `.slurp/runs` here,
/// or a run directory), else the instance this process runs in
/// (`SLURP_SOCKET`, set for every task), else the latest live run here.
pub fn find_socket(run: Option<&str>) -> Result<PathBuf, Unreachable> {
    let live_hint =
        || "`slurp start` starts an open instance; `slurp runs` lists the runs here".to_owned();
    if let Some(run) = run {
        let dir = Path::new(run);
        if dir.join(slurp_runtime::listen::SOCKET).exists() {
            return Ok(dir.join(slurp_runtime::listen::SOCKET));
        }
        let store = match crate::console::open_store() {
            Ok(Ok(store)) => store,
            Ok(Err(why)) => return Err(Unreachable(why, live_hint())),
            Err(e) => return Err(Unreachable(e.to_string(), live_hint())),
        };
        let dir = match crate::console::find_run(&store, Some(run)) {
            Ok(Ok(dir)) => dir,
            Ok(Err(why)) => return Err(Unreachable(why, live_hint())),
            Err(e) => return Err(Unreachable(e.to_string(), live_hint())),
        };
        let socket = dir.join(slurp_runtime::listen::SOCKET);
        if !socket.exists() {
            return Err(Unreachable(
                format!("run {run} is not live: it has no socket"),
                "only a running slurp takes requests; `slurp resume` reruns what did not succeed"
                    .to_owned(),
            ));
        }
        return Ok(socket);
    }
    if let Some(socket) = std::env::var_os("SLURP_SOCKET") {
        return Ok(PathBuf::from(socket));
    }
    let store = match crate::console::open_store() {
        Ok(Ok(store)) => store,
        Ok(Err(why)) => return Err(Unreachable(why, live_hint())),
        Err(e) => return Err(Unreachable(e.to_string(), live_hint())),
    };
    let runs = slurp_runtime::journal::runs(&store).unwrap_or_default();
    for dir in runs.iter().rev() {
        let socket = dir.join(slurp_runtime::listen::SOCKET);
        if socket.exists() && slurp_runtime::journal::held(&dir.join("events.jsonl")) {
            return Ok(socket);
        }
    }
    Err(Unreachable(
        "no live run here to send to".to_owned(),
        live_hint(),
    ))
}

impl Client {
    pub fn connect(run: Option<&str>) -> Result<Client, Unreachable> {
        let socket = find_socket(run)?;
        let stream =
            UnixStream::connect(slurp_runtime::listen::socket_path(&socket)).map_err(|e| {
                Unreachable(
                    format!("cannot reach the instance at {}: {e}", socket.display()),
                    "its slurp may have ended; `slurp runs` says how each run ended".to_owned(),
                )
            })?;
        let writer = stream
            .try_clone()
            .map_err(|e| Unreachable(e.to_string(), String::new()))?;
        Ok(Client {
            reader: BufReader::new(stream),
            writer,
            next: 1,
        })
    }

    /// Sends one request and reads until its reply; `None` when the
    /// instance closed the connection first (its run ended).
    pub fn call(&mut self, mut request: Value) -> io::Result<Option<Value>> {
        let id = self.next;
        self.next += 1;
        request["id"] = json!(id);
        let mut line = request.to_string();
        line.push('\n');
        if let Err(e) = self.writer.write_all(line.as_bytes()) {
            return if closed(&e) { Ok(None) } else { Err(e) };
        }
        loop {
            let Some(message) = self.read()? else {
                return Ok(None);
            };
            // Events (after a `watch`) are read by `read`, not here: a
            // `watch` is answered before its first event.
            if message.get("event").is_none() && message["id"] == json!(id) {
                return Ok(Some(message));
            }
        }
    }

    /// [`Client::call`] for a command: the reply when the instance
    /// accepted the request; else what was wrong is told (the diagnostic of
    /// a refusal, or that the instance hung up) and the exit status given.
    pub fn ask(&mut self, request: Value) -> io::Result<Result<Value, ExitCode>> {
        Ok(match self.call(request)? {
            None => Err(ended()),
            Some(reply) if reply["ok"] != json!(true) => Err(refused(&reply)),
            Some(reply) => Ok(reply),
        })
    }

    /// The next message, `None` at the end of the connection.
    pub fn read(&mut self) -> io::Result<Option<Value>> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(e) if closed(&e) => return Ok(None),
            Err(e) => return Err(e),
        }
        serde_json::from_str(&line)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("bad reply: {e}")))
    }
}

/// The instance hung up (ended, or refused this user).
fn closed(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    )
}

/// An error reply, told as the CLI tells errors: its diagnostic whole (as a
/// file's would be), or its message. Exit 2.
fn refused(reply: &Value) -> ExitCode {
    let error = &reply["error"];
    match error["diagnostic"].as_str() {
        Some(diagnostic) => eprint!("{diagnostic}"),
        None => eprintln!(
            "error: {}",
            error["message"]
                .as_str()
                .unwrap_or("the instance refused the request")
        ),
    }
    ExitCode::from(2)
}

fn ended() -> ExitCode {
    eprintln!(
        "error: the instance closed the connection without an answer: its run ended, or it takes no requests from this user"
    );
    ExitCode::from(2)
}

/// `slurp submit [--run RUN] [--scope S] [--jobspec] TASKS...`: each
/// argument is a file of tasks (`-`: standard input) or, when no such file
/// exists, task lines themselves (with `--jobspec`, jobspecs as JSON
/// lines); prints the new tasks' ids.
pub fn submit(
    run: Option<&str>,
    scope: Option<&str>,
    jobspecs: bool,
    items: &[String],
) -> io::Result<ExitCode> {
    let mut client = match Client::connect(run) {
        Ok(client) => client,
        Err(unreachable) => return Ok(unreachable.exit()),
    };
    let cwd = std::env::current_dir()?;
    let scope = scope
        .map(str::to_owned)
        .or_else(|| std::env::var("SLURP_SCOPE").ok())
        .unwrap_or_default();
    let mut out = io::stdout().lock();
    for item in items {
        let (text, source) = if item == "-" {
            let mut text = String::new();
            io::stdin().read_to_string(&mut text)?;
            (text, None)
        } else if Path::new(item).is_file() {
            (std::fs::read_to_string(item)?, Some(item.clone()))
        } else {
            (item.clone(), None)
        };
        let mut request = json!({ "op": "submit", "scope": scope, "cwd": cwd });
        let name = source.clone().unwrap_or_else(|| "<jobspecs>".to_owned());
        // With `--jobspec`, the byte range of each jobspec's line.
        let mut lines = Vec::new();
        if jobspecs {
            // JSON lines, as `slurp jobspec` prints them, sent as one list:
            // all are taken, or none.
            let mut list = Vec::new();
            let mut at = 0;
            for line in text.split_inclusive('\n') {
                let (start, body) = (at, line.trim_end_matches(['\n', '\r']));
                at += line.len();
                if body.trim().is_empty() {
                    continue;
                }
                match serde_json::from_str::<Value>(body) {
                    Ok(jobspec) => {
                        list.push(jobspec);
                        lines.push(start..start + body.len());
                    }
                    Err(e) => {
                        let column = start + e.column().saturating_sub(1).min(body.len());
                        let span = column..(column + 1).min(start + body.len()).max(column);
                        return Ok(jobspec_error(
                            &name,
                            &text,
                            "slurp::bad_json",
                            &format!("not a JSON jobspec: {e}"),
                            (span, "here"),
                            "one JSON object per line, as `slurp jobspec FILE` prints them",
                        ));
                    }
                }
            }
            request["jobspec"] = Value::Array(list);
        } else {
            request["text"] = json!(text);
            if let Some(source) = &source {
                request["source"] = json!(source);
            }
        }
        let reply = match client.call(request)? {
            None => return Ok(ended()),
            Some(reply) if reply["ok"] != json!(true) => {
                let error = &reply["error"];
                if let Some(k) = error["index"].as_u64()
                    && let Some(line) = lines.get(k as usize)
                {
                    return Ok(jobspec_error(
                        &name,
                        &text,
                        "slurp::bad_jobspec",
                        error["message"].as_str().unwrap_or_default(),
                        (line.clone(), "this jobspec"),
                        "slurp reads node, slot, core and gpu resources, one task, and attributes.system duration, cwd, environment and job.name",
                    ));
                }
                return Ok(refused(&reply));
            }
            Some(reply) => reply,
        };
        for task in reply["tasks"].as_array().into_iter().flatten() {
            writeln!(out, "{}", task.as_str().unwrap_or_default())?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// A jobspec file's mistake, told as a workflow's are: file, line, the
/// span, a code and a hint. Exit 2; nothing was submitted.
fn jobspec_error(
    name: &str,
    text: &str,
    code: &'static str,
    message: &str,
    (span, label): (std::ops::Range<usize>, &str),
    help: &str,
) -> ExitCode {
    let line = text[..span.start].matches('\n').count() + 1;
    let diagnostic = miette::MietteDiagnostic::new(message.to_owned())
        .with_code(code)
        .with_label(miette::LabeledSpan::at(span, label))
        .with_help(help);
    let report = miette::Report::new(diagnostic)
        .with_source_code(miette::NamedSource::new(name, text.to_owned()));
    eprintln!("{report:?}");
    eprintln!("error: {name}:{line}: nothing was submitted");
    ExitCode::from(2)
}

/// `slurp wait [--run RUN] TASK...`: until every task named has ended; the
/// exit status of the first that did not succeed (0 if all did).
pub fn wait(run: Option<&str>, tasks: &[String]) -> io::Result<ExitCode> {
    let mut client = match Client::connect(run) {
        Ok(client) => client,
        Err(unreachable) => return Ok(unreachable.exit()),
    };
    let reply = match client.ask(json!({ "op": "wait", "tasks": tasks }))? {
        Ok(reply) => reply,
        Err(code) => return Ok(code),
    };
    for task in reply["tasks"].as_array().into_iter().flatten() {
        if task["state"] != json!("succeeded") {
            eprintln!(
                "{}: {} (exit status {})",
                task["task"].as_str().unwrap_or_default(),
                task["state"].as_str().unwrap_or_default(),
                task["exit"]
            );
        }
    }
    let exit = reply["exit"].as_i64().unwrap_or(1).clamp(0, 255) as u8;
    Ok(ExitCode::from(exit))
}

/// `slurp watch [--run RUN]`: every event from now on, a JSON line each,
/// until the run ends.
pub fn watch(run: Option<&str>) -> io::Result<ExitCode> {
    let mut client = match Client::connect(run) {
        Ok(client) => client,
        Err(unreachable) => return Ok(unreachable.exit()),
    };
    if let Err(code) = client.ask(json!({ "op": "watch" }))? {
        return Ok(code);
    }
    let mut out = io::stdout().lock();
    while let Some(event) = client.read()? {
        // A closed reader (`| head`) ends the watch, not with a panic.
        if writeln!(out, "{event}").and_then(|_| out.flush()).is_err() {
            break;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `slurp close [--run RUN] [--wait]`: no more submissions; the run ends
/// when its tasks have (with `--wait`, this returns then, with the run's
/// exit status: 0 if every task succeeded).
pub fn close(run: Option<&str>, wait: bool) -> io::Result<ExitCode> {
    let mut client = match Client::connect(run) {
        Ok(client) => client,
        Err(unreachable) => return Ok(unreachable.exit()),
    };
    let hello = match client.ask(json!({ "op": "hello" }))? {
        Ok(hello) => hello,
        Err(code) => return Ok(code),
    };
    if let Err(code) = client.ask(json!({ "op": "close" }))? {
        return Ok(code);
    }
    if !wait {
        return Ok(ExitCode::SUCCESS);
    }
    // The run closes the connection when it ends; its journal then says
    // how every task ended.
    while client.read()?.is_some() {}
    let journal = Path::new(hello["run_dir"].as_str().unwrap_or_default()).join("events.jsonl");
    let replay = slurp_runtime::journal::replay(&journal)?;
    let counts = replay.counts();
    let succeeded = counts[slurp_runtime::core::State::Succeeded as usize];
    Ok(if succeeded == counts.iter().sum::<usize>() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `slurp cancel RUN TASK...`: cancels tasks of a live run.
pub fn cancel_tasks(run: Option<&str>, tasks: &[String]) -> io::Result<ExitCode> {
    let mut client = match Client::connect(run) {
        Ok(client) => client,
        Err(unreachable) => return Ok(unreachable.exit()),
    };
    let reply = match client.ask(json!({ "op": "cancel", "tasks": tasks }))? {
        Ok(reply) => reply,
        Err(code) => return Ok(code),
    };
    for task in reply["tasks"].as_array().into_iter().flatten() {
        let name = task["task"].as_str().unwrap_or_default();
        match task["now"].as_str() {
            Some("cancelled") => eprintln!("{name}: cancelled"),
            Some("stopping") => eprintln!("{name}: stopping"),
            _ => eprintln!(
                "{name}: already ended ({})",
                task["was"].as_str().unwrap_or_default()
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `slurp start` without `--foreground`: the instance runs detached (its
/// own session, output in its run directory) and this returns once it
/// answers, printing its run id.
pub fn start_detached(run_dir: &Path, run: &str) -> io::Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    std::fs::create_dir_all(run_dir)?;
    let log = std::fs::File::create(run_dir.join("slurp.log"))?;
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    let at = args.iter().position(|a| a == "start").map_or(0, |i| i + 1);
    // Nobody reads a detached instance's terminal: output goes to files
    // (`slurp log TASK`) unless the user chose otherwise.
    let chosen = args
        .iter()
        .any(|a| a.to_string_lossy().starts_with("--output") || a == "--tag");
    let mut extra: Vec<std::ffi::OsString> =
        vec!["--foreground".into(), "--run-id".into(), run.into()];
    if !chosen {
        extra.extend(["--output".into(), "files".into()]);
    }
    args.splice(at..at, extra);
    let mut child = Command::new(std::env::current_exe()?);
    child
        .args(&args)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0);
    let mut child = child.spawn()?;
    let socket = run_dir.join(slurp_runtime::listen::SOCKET);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait()? {
            let log = std::fs::read_to_string(run_dir.join("slurp.log")).unwrap_or_default();
            eprint!("{log}");
            eprintln!("error: the instance ended at once ({status})");
            return Ok(ExitCode::from(2));
        }
        if socket.exists()
            && UnixStream::connect(slurp_runtime::listen::socket_path(&socket)).is_ok()
        {
            println!("{run}");
            return Ok(ExitCode::SUCCESS);
        }
        if std::time::Instant::now() > deadline {
            eprintln!(
                "error: the instance did not answer within 30 s (its log: {})",
                run_dir.join("slurp.log").display()
            );
            return Ok(ExitCode::from(2));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
