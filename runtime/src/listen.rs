//! The instance's socket: where clients reach a running slurp.
//!
//! A UNIX socket `socket` in the run directory (0700, so the socket is
//! reachable by its user alone), and on each connection a check of the
//! peer's uid (`SO_PEERCRED`): a connection from anyone else is closed
//! unanswered. No TCP, ever. A run directory too deep for a socket path
//! (108 bytes) gets its socket in a private directory under `/tmp` and a
//! symbolic link to it in the run directory; clients follow the link
//! ([`socket_path`]).
//!
//! Each connection is read line by line (at most
//! [`protocol::MAX_REQUEST`] bytes a line); what cannot be parsed is
//! answered here, the rest goes to the driver as [`Incoming`] with the
//! connection's reply channel.

use std::io;
use std::path::{Path, PathBuf};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

use crate::protocol::{self, Refusal, Request};

/// The socket's name in a run directory.
pub const SOCKET: &str = "socket";

/// The most a UNIX socket path may hold here (`sun_path`, less its NUL).
const SUN_PATH: usize = 107;

/// A request and where its reply goes.
#[derive(Debug)]
pub struct Incoming {
    pub request: Request,
    pub reply: mpsc::UnboundedSender<String>,
}

/// The socket a run listens on: removed (with its link) when dropped.
#[derive(Debug)]
pub struct Socket {
    pub listener: UnixListener,
    /// Where clients connect (`run_dir/socket`, maybe a link).
    pub path: PathBuf,
    /// The socket itself when `path` is a link to it.
    target: Option<PathBuf>,
}

impl Drop for Socket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        if let Some(target) = &self.target {
            let _ = std::fs::remove_file(target);
        }
    }
}

/// Binds the run's socket in `run_dir`. Call inside a tokio runtime.
pub fn bind(run_dir: &Path) -> io::Result<Socket> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(run_dir)?;
    let path = run_dir.join(SOCKET);
    let _ = std::fs::remove_file(&path);
    let (listener, target) = if path.as_os_str().len() <= SUN_PATH {
        (UnixListener::bind(&path)?, None)
    } else {
        let uid = nix::unistd::getuid();
        let dir = std::env::temp_dir().join(format!("slurp-{uid}"));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        // A directory made by someone else is not a place for ours.
        let meta = std::fs::metadata(&dir)?;
        if std::os::unix::fs::MetadataExt::uid(&meta) != uid.as_raw()
            || meta.permissions().mode() & 0o077 != 0
        {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{} is not private to this user", dir.display()),
            ));
        }
        let target = dir.join(format!(
            "{}-{}.sock",
            std::process::id(),
            run_dir
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ));
        let _ = std::fs::remove_file(&target);
        let listener = UnixListener::bind(&target)?;
        std::os::unix::fs::symlink(&target, &path)?;
        (listener, Some(target))
    };
    let socket_file = target.as_deref().unwrap_or(&path);
    std::fs::set_permissions(socket_file, std::fs::Permissions::from_mode(0o600))?;
    Ok(Socket {
        listener,
        path,
        target,
    })
}

/// Where to connect for the socket at `path` (a link is followed: the
/// target may be the only path short enough).
pub fn socket_path(path: &Path) -> PathBuf {
    match std::fs::read_link(path) {
        Ok(target) => target,
        Err(_) => path.to_path_buf(),
    }
}

/// The next connection from this user's processes (others are closed
/// unanswered); `None` after a failed accept, which is retried later.
pub async fn accept(socket: &Socket) -> Option<UnixStream> {
    let Ok((stream, _)) = socket.listener.accept().await else {
        // Out of descriptors and the like: a pause before trying again.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        return None;
    };
    let uid = nix::unistd::getuid().as_raw();
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == uid => Some(stream),
        // Someone else's process: not a word.
        _ => None,
    }
}

/// Serves one connection: its requests go to `to_driver`, each with the
/// channel its reply (and, after `watch`, its events) are written from.
///
/// When `ended` turns true (the run is over) it stops reading, writes what
/// replies are still due, and closes.
pub async fn connection(
    stream: UnixStream,
    to_driver: mpsc::UnboundedSender<Incoming>,
    mut ended: tokio::sync::watch::Receiver<bool>,
) {
    let (read, mut write) = stream.into_split();
    let (reply, mut replies) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        while let Some(line) = replies.recv().await {
            if write.write_all(line.as_bytes()).await.is_err() {
                break;
            }
            // Replies already waiting go out in the same write.
            let mut more = String::new();
            while let Ok(line) = replies.try_recv() {
                more.push_str(&line);
                if more.len() > 1 << 16 {
                    break;
                }
            }
            if !more.is_empty() && write.write_all(more.as_bytes()).await.is_err() {
                break;
            }
        }
    });
    let mut read = BufReader::with_capacity(1 << 16, read);
    let mut line = Vec::new();
    loop {
        line.clear();
        let next = tokio::select! {
            next = read_line(&mut read, &mut line) => next,
            _ = ended.wait_for(|&ended| ended) => break,
        };
        match next {
            Ok(Line::End) | Err(_) => break,
            Ok(Line::TooLong) => {
                let refusal = Refusal::new(
                    "request_too_large",
                    format!(
                        "a request line may hold at most {} bytes",
                        protocol::MAX_REQUEST
                    ),
                );
                let _ = reply.send(protocol::refuse(&serde_json::Value::Null, &refusal));
            }
            Ok(Line::Complete) => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match protocol::parse(&line) {
                    Ok(request) => {
                        let incoming = Incoming {
                            request,
                            reply: reply.clone(),
                        };
                        if to_driver.send(incoming).is_err() {
                            break;
                        }
                    }
                    Err((id, refusal)) => {
                        let _ = reply.send(protocol::refuse(&id, &refusal));
                    }
                }
            }
        }
    }
    drop(reply);
    let _ = writer.await;
}

enum Line {
    Complete,
    TooLong,
    End,
}

/// One line into `out` (without its newline), or `TooLong` after skipping
/// past the newline of a line longer than the limit.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    read: &mut R,
    out: &mut Vec<u8>,
) -> io::Result<Line> {
    let mut too_long = false;
    loop {
        let buf = read.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if out.is_empty() && !too_long {
                Line::End
            } else if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
        let (chunk, found) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long {
            if out.len() + chunk.len() > protocol::MAX_REQUEST {
                too_long = true;
                out.clear();
            } else {
                out.extend_from_slice(chunk);
            }
        }
        let used = found.unwrap_or(buf.len());
        read.consume(used);
        if found.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
    }
}
