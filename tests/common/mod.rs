//! One builder for end-to-end tests, read like a terminal session: write
//! files into a fresh directory, run `slurp` there, check what it printed.

// Each test binary uses a part of the builder.
#![allow(dead_code)]

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct Test {
    dir: tempfile::TempDir,
    args: Vec<String>,
    stdin: Option<Vec<u8>>,
    env: Vec<(String, String)>,
}

pub struct Run {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Test {
    pub fn new() -> Self {
        Test {
            dir: tempfile::tempdir().expect("temp dir"),
            args: Vec::new(),
            stdin: None,
            env: Vec::new(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The lines of `name` in the test's directory (such as the `order`
    /// file tasks append their names to when they start).
    pub fn lines_of(&self, name: &str) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .lines()
            .map(str::to_owned)
            .collect()
    }

    pub fn file(self, name: &str, contents: impl AsRef<[u8]>) -> Self {
        let path = self.dir.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(path, contents).expect("write");
        self
    }

    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn stdin(mut self, input: &str) -> Self {
        self.stdin = Some(input.as_bytes().to_vec());
        self
    }

    pub fn run(&self) -> Run {
        let mut child = Command::new(binary())
            .args(&self.args)
            .current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env_remove("CUDA_VISIBLE_DEVICES")
            .env_remove("SLURP_GPUS")
            .env_remove("SLURP_MEM")
            .env_remove("SLURP_DEPTH")
            .env_remove("SLURP_RUN_DIR")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run slurp");
        if let Some(input) = &self.stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(input)
                .expect("write stdin");
        }
        let Output {
            status,
            stdout,
            stderr,
        } = child.wait_with_output().expect("wait");
        Run {
            status: status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }
}

impl Run {
    #[track_caller]
    pub fn success(self) -> Self {
        assert_eq!(
            self.status, 0,
            "expected success\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// Invalid input: exit 2, and nothing on stdout.
    #[track_caller]
    pub fn invalid(self) -> Self {
        assert_eq!(
            self.status, 2,
            "expected exit 2\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        assert!(
            self.stdout.is_empty(),
            "invalid input printed data:\n{}",
            self.stdout
        );
        self
    }

    /// Every fragment appears in stderr.
    #[track_caller]
    pub fn stderr_has(self, fragments: &[&str]) -> Self {
        for f in fragments {
            assert!(
                self.stderr.contains(f),
                "stderr lacks {f:?}:\n{}",
                self.stderr
            );
        }
        self
    }

    #[track_caller]
    pub fn stdout_has(self, fragments: &[&str]) -> Self {
        for f in fragments {
            assert!(
                self.stdout.contains(f),
                "stdout lacks {f:?}:\n{}",
                self.stdout
            );
        }
        self
    }

    /// The jobspecs printed, one JSON value per line.
    pub fn jobspecs(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).expect("a jobspec per line"))
            .collect()
    }
}

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_slurp"))
}

/// The repository root, where examples/ and stdlib/ live.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files under `dir` that `keep` wants, in path order, without going
/// into the folders `skip` names.
pub fn files_under(
    dir: &Path,
    skip: &dyn Fn(&Path) -> bool,
    keep: &dyn Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if !skip(&path) {
                out.extend(files_under(&path, skip, keep));
            }
        } else if keep(&path) {
            out.push(path);
        }
    }
    out
}

// Running slurp as a live process: for signals and crashes.

/// Writes `files` into a fresh directory, starts slurp there with `args`,
/// and waits until the tasks wrote the `pid_files` (their shell's pid).
pub fn start_run(
    files: &[(&str, &str)],
    args: &[&str],
    pid_files: &[&str],
) -> (tempfile::TempDir, std::process::Child, Vec<i32>) {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let child = Command::new(binary())
        .args(args)
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let paths: Vec<_> = pid_files.iter().map(|p| dir.path().join(p)).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !paths
        .iter()
        .all(|p| std::fs::read_to_string(p).is_ok_and(|s| s.ends_with('\n')))
    {
        assert!(Instant::now() < deadline, "tasks did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids = paths
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap().trim().parse().unwrap())
        .collect();
    (dir, child, pids)
}

pub fn signal(child: &std::process::Child, signal: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
}

/// Whether process `pid` is alive (not gone, not a zombie).
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, r)| !r.trim_start().starts_with('Z'))
    })
}

/// The run directories under `dir/.slurp/runs`, oldest first.
pub fn run_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(dir.join(".slurp/runs"))
        .expect("a run store")
        .flatten()
        .map(|e| e.path())
        .collect();
    runs.sort();
    runs
}

/// Whether any live (non-zombie) process is in process group `pgid`.
pub fn alive_in_group(pgid: i32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // Fields after the command name: state, ppid, pgrp, …
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            return false;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        fields.len() > 2 && fields[0] != "Z" && fields[2] == pgid.to_string()
    })
}

// Running slurp on a terminal: for what only a terminal shows.

/// Runs slurp with stdin, stdout and stderr on a fresh 120×40 terminal;
/// returns everything the terminal received and the exit status.
pub fn on_terminal(t: &Test, args: &[&str], env: &[(&str, &str)]) -> (String, i32) {
    let size = nix::pty::Winsize {
        ws_row: 40,
        ws_col: 120,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).expect("a pseudo-terminal");
    let side = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
    let mut command = Command::new(binary());
    command
        .args(args)
        .current_dir(t.path())
        .env_remove("NO_COLOR")
        .stdin(side(&pty.slave))
        .stdout(side(&pty.slave))
        .stderr(side(&pty.slave));
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command.spawn().expect("start slurp");
    // Only slurp and its tasks may hold the terminal now, so that reading
    // ends when they are gone.
    drop(command);
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    // The read fails (EIO) once the last writer has gone.
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    let status = child.wait().unwrap().code().unwrap_or(-1);
    (String::from_utf8_lossy(&out).into_owned(), status)
}
