//! Ranks as Flux jobs, through one long-lived client per run.
//!
//! Inside a Flux instance every rank is the job `flux run` would submit
//! ([`Allocation::flux_job`]). Rather than a Flux command per rank, slurp
//! starts one `flux python` client for the whole run (`flux_client.py`,
//! embedded, written to the run directory) and speaks JSON lines with it:
//! a jobspec in, the job's id, start, exceptions and wait status out; a
//! cancel in when slurp stops a task (Ctrl-C, a cancel, its time limit —
//! which Flux also enforces, from the jobspec's duration). The job's output
//! goes to files the jobspec names (the shell's `output` option), read when
//! it ends: whole in group mode, line by line after the end with `--output
//! tag`, left in place with `--output files`. When slurp ends, however it
//! ends, the client sees its input close and cancels what still runs.
//!
//! Where the client cannot start, ranks fall back to `flux job submit` +
//! `flux job attach` per rank ([`Allocation::flux_start`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::{Finished, Launch, Output, OutputMode, Stop, sleep_until, tail};
use crate::backend::allocation::{Allocation, Step};
use crate::core::Outcome;

const CLIENT: &str = include_str!("flux_client.py");

/// What the client says of one request's job.
#[derive(Debug, Clone, PartialEq)]
enum News {
    Submitted,
    Refused(String),
    Started,
    Exception {
        kind: String,
        note: String,
        severity: i64,
    },
    Finished(i32),
    End,
}

type Route = (mpsc::UnboundedSender<(usize, News)>, usize);

/// The run's Flux client.
#[derive(Debug)]
pub struct Client {
    child: Mutex<std::process::Child>,
    requests: mpsc::UnboundedSender<String>,
    /// Where each request's news goes: its attempt's channel, with the
    /// rank it is for.
    routes: Arc<Mutex<HashMap<u64, Route>>>,
    next: std::sync::atomic::AtomicU64,
}

static SHARED: OnceLock<Option<Arc<Client>>> = OnceLock::new();

/// The run's client, started on first use (inside the tokio runtime);
/// `None` where it cannot start (then ranks use the Flux commands).
pub fn client(job: &Allocation, run_dir: &Path) -> Option<Arc<Client>> {
    SHARED
        .get_or_init(|| match Client::start(job, run_dir) {
            Ok(client) => Some(Arc::new(client)),
            Err(why) => {
                eprintln!(
                    "slurp: cannot start a Flux client ({why}); each rank starts with `flux job submit` and `flux job attach`"
                );
                None
            }
        })
        .clone()
}

impl Client {
    fn start(job: &Allocation, run_dir: &Path) -> Result<Client, String> {
        // One process for the run, not one per rank: `std::process`'s
        // fork is no cost here (`spawn` is for the ranks' hot path).
        use std::process::{Command, Stdio};
        std::fs::create_dir_all(run_dir).map_err(|e| e.to_string())?;
        let script = run_dir.join("flux-client.py");
        std::fs::write(&script, CLIENT).map_err(|e| format!("{}: {e}", script.display()))?;
        let mut child = Command::new(&job.srun)
            .arg("python")
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("{} python: {e}", job.srun.display()))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let to = tokio::net::unix::pipe::Sender::from_owned_fd(stdin.into())
            .map_err(|e| e.to_string())?;
        let from = tokio::net::unix::pipe::Receiver::from_owned_fd(stdout.into())
            .map_err(|e| e.to_string())?;
        let (requests, mut pending) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            let mut to = to;
            while let Some(line) = pending.recv().await {
                let mut batch = line;
                while let Ok(more) = pending.try_recv() {
                    batch.push_str(&more);
                }
                if to.write_all(batch.as_bytes()).await.is_err() {
                    break;
                }
            }
        });
        let routes: Arc<Mutex<HashMap<u64, Route>>> = Default::default();
        let routed = routes.clone();
        tokio::spawn(async move {
            let mut from = BufReader::new(from).lines();
            while let Ok(Some(line)) = from.next_line().await {
                let Ok(v) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                let Some(id) = v["id"].as_u64() else { continue };
                let news = if v.get("jobid").is_some() {
                    News::Submitted
                } else if let Some(e) = v["error"].as_str() {
                    News::Refused(e.to_owned())
                } else if v.get("start").is_some() {
                    News::Started
                } else if let Some(kind) = v["exception"].as_str() {
                    News::Exception {
                        kind: kind.to_owned(),
                        note: v["note"].as_str().unwrap_or_default().to_owned(),
                        severity: v["severity"].as_i64().unwrap_or(0),
                    }
                } else if let Some(status) = v["status"].as_i64() {
                    News::Finished(status as i32)
                } else {
                    News::End
                };
                let routes = routed.lock().unwrap_or_else(|e| e.into_inner());
                if let Some((route, rank)) = routes.get(&id) {
                    let _ = route.send((*rank, news));
                }
            }
            // The client is gone: every job it followed is lost to us.
            let mut routes = routed.lock().unwrap_or_else(|e| e.into_inner());
            for (_, (route, rank)) in routes.drain() {
                let _ = route.send((rank, News::Refused("the Flux client ended".to_owned())));
            }
        });
        Ok(Client {
            child: Mutex::new(child),
            requests,
            routes,
            next: std::sync::atomic::AtomicU64::new(1),
        })
    }

    /// Submits `spec`; what befalls its job comes to `news` as `(rank, …)`.
    fn submit(
        &self,
        spec: &Value,
        news: &mpsc::UnboundedSender<(usize, News)>,
        rank: usize,
    ) -> u64 {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (news.clone(), rank));
        let mut line = json!({ "id": id, "spec": spec }).to_string();
        line.push('\n');
        let _ = self.requests.send(line);
        id
    }

    fn cancel(&self, id: u64) {
        let _ = self.requests.send(format!("{{\"cancel\":{id}}}\n"));
    }

    fn forget(&self, id: u64) {
        self.routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }
}

/// Ends the run's client, if one was started: told to close, then waited
/// for (two seconds at most), so it is not one of the run's strays.
pub async fn shutdown() {
    let Some(Some(client)) = SHARED.get() else {
        return;
    };
    let _ = client.requests.send("{\"close\":true}\n".to_owned());
    for _ in 0..200 {
        let done = client
            .child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .try_wait()
            .map_or(true, |s| s.is_some());
        if done {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// A wait status as an outcome.
fn outcome(status: i32) -> Outcome {
    if status & 0x7f == 0 {
        match (status >> 8) & 0xff {
            0 => Outcome::Success,
            code => Outcome::Exit(code),
        }
    } else {
        Outcome::Signal(status & 0x7f)
    }
}

/// One rank's job as it goes.
struct Rank {
    id: u64,
    /// Where its stdout and stderr go, and whether slurp reads them back.
    out: PathBuf,
    err: PathBuf,
    read_back: bool,
    status: Option<i32>,
    exception: Option<(String, String)>,
    ended: bool,
}

/// Runs one attempt whose ranks are all Flux jobs.
pub async fn run_attempt(
    client: Arc<Client>,
    job: &Allocation,
    launch: Launch,
    mut stop: watch::Receiver<Stop>,
    lines: mpsc::UnboundedSender<Output>,
    mut finished: Finished,
) -> Finished {
    let started = Instant::now();
    let dir = launch.run_dir.join("flux");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        finished.outcome = Outcome::SpawnError;
        finished.error = Some(format!("cannot make {}: {e}", dir.display()));
        return finished;
    }
    let env = match super::rank_environment(&launch) {
        Ok(env) => env,
        Err(error) => {
            finished.outcome = Outcome::SpawnError;
            finished.error = Some(error);
            return finished;
        }
    };
    let safe = launch.name.replace('/', "_");
    let mut ranks = Vec::with_capacity(launch.ranks.len());
    let (news_tx, mut news) = mpsc::unbounded_channel::<(usize, News)>();
    for (r, place) in launch.ranks.iter().enumerate() {
        let share = Step {
            node: place.node as usize,
            cores: place.cores.len(),
            gpus: place.gpus.len(),
            mem: launch.mem,
            time_limit: launch.time_limit,
        };
        let mut rank_env = env.clone();
        let rank_vars = [
            "SLURP_TASK_RANK",
            "SLURP_CORES",
            "SLURP_GPUS",
            "CUDA_VISIBLE_DEVICES",
        ];
        rank_env.retain(|(k, _)| !rank_vars.contains(&k.as_str()));
        rank_env.extend([
            ("SLURP_TASK_RANK".to_owned(), r.to_string()),
            ("SLURP_CORES".to_owned(), super::join(&place.cores)),
            ("SLURP_GPUS".to_owned(), place.gpus.join(",")),
            // The job's shell sets it to the GPUs Flux gave the job.
            ("CUDA_VISIBLE_DEVICES".to_owned(), place.gpus.join(",")),
        ]);
        let mut spec = job.flux_job(&share, &launch.name, &launch.argv, &launch.cwd, &rank_env);
        let (out, err, read_back) = match (&launch.files, launch.mode) {
            (Some((out, err)), _) => (out.clone(), err.clone(), launch.mode == OutputMode::Group),
            (None, OutputMode::None) => ("/dev/null".into(), "/dev/null".into(), false),
            (None, _) => (
                dir.join(format!("{safe}-{}-{r}.out", launch.attempt)),
                dir.join(format!("{safe}-{}-{r}.err", launch.attempt)),
                true,
            ),
        };
        spec["attributes"]["system"]["shell"] = json!({ "options": { "output": {
            "stdout": { "type": "file", "path": out },
            "stderr": { "type": "file", "path": err },
        }}});
        let id = client.submit(&spec, &news_tx, r);
        ranks.push(Rank {
            id,
            out,
            err,
            read_back,
            status: None,
            exception: None,
            ended: false,
        });
    }
    let deadline = launch
        .time_limit
        .map(|limit| tokio::time::Instant::now() + limit + launch.grace);
    let mut cancelled = false;
    let mut timed_out = false;
    let mut refused: Option<String> = None;
    loop {
        if ranks.iter().all(|r| r.ended) {
            break;
        }
        tokio::select! {
            // `news_tx` is held here: the channel never closes under us.
            Some((i, news)) = news.recv() => {
                let rank = &mut ranks[i];
                if rank.ended {
                    continue;
                }
                match news {
                    News::End => rank.ended = true,
                    News::Refused(why) => {
                        rank.ended = true;
                        refused.get_or_insert(why);
                    }
                    News::Submitted | News::Started => {}
                    News::Exception { kind, note, severity } => {
                        if kind == "timeout" {
                            timed_out = true;
                        }
                        if severity == 0 {
                            rank.exception.get_or_insert((kind, note));
                        }
                    }
                    // Done at `finish`: its shells have exited and written
                    // their output. Flux's own cleanup (`release`, `free`,
                    // `clean`) goes on while the next rank is submitted.
                    News::Finished(status) => {
                        rank.status = Some(status);
                        rank.ended = true;
                    }
                }
            }
            changed = stop.changed(), if !cancelled => {
                let request = if changed.is_ok() { *stop.borrow() } else { Stop::Kill };
                if request != Stop::Run {
                    cancelled = true;
                    for rank in &ranks {
                        client.cancel(rank.id);
                    }
                }
            }
            // Flux ends the job at its duration; this is for a Flux that
            // does not (or a job still pending past it).
            _ = sleep_until(deadline), if !timed_out && !cancelled => {
                timed_out = true;
                for rank in &ranks {
                    client.cancel(rank.id);
                }
            }
        }
    }
    for rank in &ranks {
        client.forget(rank.id);
    }
    // The first failure decides, as for ranks started here.
    let statuses = ranks
        .iter()
        .map(|r| r.status.map_or(Outcome::Cancelled, outcome))
        .find(|o| *o != Outcome::Success)
        .unwrap_or(Outcome::Success);
    let exception = ranks.iter().find_map(|r| r.exception.clone());
    finished.outcome = if let Some(why) = refused {
        finished.error = Some(format!("Flux refused the job: {why}"));
        Outcome::SpawnError
    } else if timed_out {
        Outcome::Timeout
    } else if cancelled {
        Outcome::Cancelled
    } else if ranks.iter().any(|r| r.status.is_none()) {
        // An exception before any shell ran (an unsatisfiable request).
        finished.error = exception
            .as_ref()
            .map(|(kind, note)| format!("Flux: {kind} exception: {note}"));
        Outcome::SpawnError
    } else {
        statuses
    };
    let mut stdout = Vec::new();
    let mut stderr = Vec::new();
    for rank in &ranks {
        if !rank.read_back {
            continue;
        }
        let out = std::fs::read(&rank.out).unwrap_or_default();
        let err = std::fs::read(&rank.err).unwrap_or_default();
        if launch.files.is_none() {
            let _ = std::fs::remove_file(&rank.out);
            let _ = std::fs::remove_file(&rank.err);
        }
        if launch.mode == OutputMode::Tag {
            for (bytes, is_err) in [(&out, false), (&err, true)] {
                for line in bytes.split_inclusive(|&b| b == b'\n') {
                    let _ = lines.send(Output::Line {
                        instance: launch.instance,
                        task: launch.task,
                        stderr: is_err,
                        line: line.to_vec(),
                    });
                }
            }
        }
        stdout.extend(out);
        stderr.extend(err);
    }
    if let Some((kind, note)) = &exception
        && finished.outcome != Outcome::Success
    {
        stderr.extend(format!("flux: job exception {kind}: {note}\n").into_bytes());
    }
    finished.stderr_tail = tail(&stderr);
    // A Flux job's output comes back from its files once it has ended, so
    // `ungroup` shows it whole too.
    if matches!(launch.mode, OutputMode::Group | OutputMode::Ungroup) {
        finished.stdout = stdout;
        finished.stderr = stderr;
    }
    finished.elapsed = started.elapsed();
    finished
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_statuses_read_as_outcomes() {
        assert_eq!(outcome(0), Outcome::Success);
        assert_eq!(outcome(3 << 8), Outcome::Exit(3));
        assert_eq!(outcome(9), Outcome::Signal(9));
    }
}
