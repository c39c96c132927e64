//! PMI-1, the simple wire protocol (Flux RFC 13), served to a task's ranks
//! so that an MPI program started by slurp with `ntasks=N` finds its peers
//! on this node, as under Flux's job shell or Slurm's `srun`.
//!
//! Each rank gets one end of a socket pair as descriptor 3, and
//! `PMI_FD=3`, `PMI_RANK`, `PMI_SIZE` in its environment; slurp keeps the
//! other ends and answers requests there, one line each
//! (`cmd=NAME key=value …`): `init`, `get_maxes`, `get_appnum`,
//! `get_universe_size`, `get_my_kvsname`, `put`, `get`, `barrier_in`
//! (answered once every rank has entered — the fence that makes puts
//! visible), `finalize`, `abort`. The key-value space starts with
//! `PMI_process_mapping`, which tells MPICH that every rank shares this
//! node (so it uses shared memory between them). Spawning is refused.

use std::collections::HashMap;
use std::os::fd::OwnedFd;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

/// The descriptor each rank finds its end on.
pub const FD: i32 = 3;

/// Limits told to clients (`get_maxes`) and held to.
const KVSNAME_MAX: usize = 256;
const KEYLEN_MAX: usize = 256;
const VALLEN_MAX: usize = 1024;

/// The server's ends, before it runs.
#[derive(Debug)]
pub struct Server {
    kvsname: String,
    ends: Vec<OwnedFd>,
}

/// A socket pair per rank: the ranks' ends (to become descriptor 3), and
/// the server holding the others.
pub fn wire(ranks: usize, kvsname: &str) -> Result<(Vec<OwnedFd>, Server), String> {
    let mut children = Vec::with_capacity(ranks);
    let mut ends = Vec::with_capacity(ranks);
    for _ in 0..ranks {
        // Close-on-exec both: the child's end becomes descriptor 3 by dup2.
        let (ours, theirs) = std::os::unix::net::UnixStream::pair()
            .map_err(|e| format!("cannot make the PMI socket: {e}"))?;
        ends.push(OwnedFd::from(ours));
        children.push(OwnedFd::from(theirs));
    }
    let kvsname: String = kvsname
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(KVSNAME_MAX - 1)
        .collect();
    Ok((children, Server { kvsname, ends }))
}

/// What a rank asked that ends the task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abort {
    pub rank: usize,
    /// The exit code it gave (`MPI_Abort`'s errorcode), if any.
    pub code: Option<i32>,
    pub message: String,
}

impl Server {
    /// Answers the ranks until every one has closed its end; an `abort`
    /// ends it at once.
    pub async fn serve(self) -> Result<(), Abort> {
        let size = self.ends.len();
        let (requests, mut incoming) = mpsc::unbounded_channel::<(usize, Option<String>)>();
        let mut writers = Vec::with_capacity(size);
        for (rank, end) in self.ends.into_iter().enumerate() {
            let Ok(stream) = stream(end) else {
                writers.push(None);
                let _ = requests.send((rank, None));
                continue;
            };
            let (read, write) = stream.into_split();
            writers.push(Some(write));
            let requests = requests.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(read).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if requests.send((rank, Some(line))).is_err() {
                        return;
                    }
                }
                let _ = requests.send((rank, None));
            });
        }
        drop(requests);
        let mut kvs: HashMap<String, String> = HashMap::new();
        kvs.insert(
            "PMI_process_mapping".to_owned(),
            format!("(vector,(0,1,{size}))"),
        );
        let mut barrier: Vec<usize> = Vec::new();
        let mut open = size;
        // A multi-line `mcmd=spawn` request being skipped, per rank.
        let mut spawning = vec![false; size];
        while open > 0 {
            let Some((rank, line)) = incoming.recv().await else {
                break;
            };
            let Some(line) = line else {
                open -= 1;
                continue;
            };
            if spawning[rank] {
                if line.trim() == "endcmd" {
                    spawning[rank] = false;
                    reply(&mut writers, rank, "cmd=spawn_result rc=-1\n").await;
                }
                continue;
            }
            if line.starts_with("mcmd=spawn") {
                spawning[rank] = true;
                continue;
            }
            let fields = parse(&line);
            let field = |k: &str| fields.get(k).copied().unwrap_or("");
            let answer = match field("cmd") {
                "init" => match field("pmi_version") {
                    "1" => "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n".to_owned(),
                    _ => "cmd=response_to_init rc=-1\n".to_owned(),
                },
                "get_maxes" => format!(
                    "cmd=maxes rc=0 kvsname_max={KVSNAME_MAX} keylen_max={KEYLEN_MAX} vallen_max={VALLEN_MAX}\n"
                ),
                "get_appnum" => "cmd=appnum rc=0 appnum=0\n".to_owned(),
                "get_universe_size" => format!("cmd=universe_size rc=0 size={size}\n"),
                "get_my_kvsname" => format!("cmd=my_kvsname rc=0 kvsname={}\n", self.kvsname),
                "put" => {
                    let (key, value) = (field("key"), field("value"));
                    if key.is_empty() || key.len() >= KEYLEN_MAX || value.len() >= VALLEN_MAX {
                        "cmd=put_result rc=-1 msg=key_or_value_too_long\n".to_owned()
                    } else {
                        kvs.insert(key.to_owned(), value.to_owned());
                        "cmd=put_result rc=0\n".to_owned()
                    }
                }
                "get" => match kvs.get(field("key")) {
                    Some(value) => format!("cmd=get_result rc=0 value={value}\n"),
                    None => "cmd=get_result rc=-1 msg=key_not_found\n".to_owned(),
                },
                "barrier_in" => {
                    if !barrier.contains(&rank) {
                        barrier.push(rank);
                    }
                    if barrier.len() == size {
                        for r in std::mem::take(&mut barrier) {
                            reply(&mut writers, r, "cmd=barrier_out rc=0\n").await;
                        }
                    }
                    continue;
                }
                "finalize" => "cmd=finalize_ack rc=0\n".to_owned(),
                "abort" => {
                    return Err(Abort {
                        rank,
                        code: field("exitcode").parse().ok(),
                        message: field("msg").to_owned(),
                    });
                }
                other => format!("cmd={other}_result rc=-1 msg=unsupported\n"),
            };
            reply(&mut writers, rank, &answer).await;
        }
        Ok(())
    }
}

/// A socket end as the reactor's.
fn stream(end: OwnedFd) -> std::io::Result<UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(end);
    stream.set_nonblocking(true)?;
    UnixStream::from_std(stream)
}

async fn reply(writers: &mut [Option<tokio::net::unix::OwnedWriteHalf>], rank: usize, text: &str) {
    if let Some(Some(writer)) = writers.get_mut(rank)
        && writer.write_all(text.as_bytes()).await.is_err()
    {
        // The rank is gone; its end closing tells the loop.
        writers[rank] = None;
    }
}

/// `cmd=put kvsname=k key=a value=b=c` → fields; a value may hold `=`.
fn parse(line: &str) -> HashMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|word| word.split_once('='))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    async fn ask(stream: &mut UnixStream, line: &str) -> String {
        stream.write_all(line.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        let mut byte = [0u8; 1];
        while stream.read(&mut byte).await.unwrap() == 1 {
            out.push(byte[0]);
            if byte[0] == b'\n' {
                break;
            }
        }
        String::from_utf8(out).unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn two_ranks_put_fence_and_get_each_others_values() {
        let (children, server) = wire(2, "task/x").unwrap();
        let served = tokio::spawn(server.serve());
        let mut ranks: Vec<UnixStream> =
            children.into_iter().map(|fd| stream(fd).unwrap()).collect();
        let init = ask(&mut ranks[0], "cmd=init pmi_version=1 pmi_subversion=1\n").await;
        assert_eq!(
            init,
            "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n"
        );
        let name = ask(&mut ranks[1], "cmd=get_my_kvsname\n").await;
        assert_eq!(name, "cmd=my_kvsname rc=0 kvsname=task_x\n");
        for (rank, stream) in ranks.iter_mut().enumerate() {
            let put = format!("cmd=put kvsname=task_x key=card{rank} value=addr={rank}\n");
            assert_eq!(ask(stream, &put).await, "cmd=put_result rc=0\n");
        }
        // The barrier answers only when both are in.
        ranks[0].write_all(b"cmd=barrier_in\n").await.unwrap();
        let second = ask(&mut ranks[1], "cmd=barrier_in\n").await;
        assert_eq!(second, "cmd=barrier_out rc=0\n");
        let mut first = vec![0u8; second.len()];
        ranks[0].read_exact(&mut first).await.unwrap();
        assert_eq!(String::from_utf8(first).unwrap(), second);
        let got = ask(&mut ranks[0], "cmd=get kvsname=task_x key=card1\n").await;
        assert_eq!(got, "cmd=get_result rc=0 value=addr=1\n");
        let mapping = ask(
            &mut ranks[1],
            "cmd=get kvsname=task_x key=PMI_process_mapping\n",
        )
        .await;
        assert_eq!(mapping, "cmd=get_result rc=0 value=(vector,(0,1,2))\n");
        let missing = ask(&mut ranks[1], "cmd=get kvsname=task_x key=nope\n").await;
        assert!(missing.starts_with("cmd=get_result rc=-1"));
        drop(ranks);
        assert_eq!(served.await.unwrap(), Ok(()));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_abort_ends_the_service_with_its_rank() {
        let (children, server) = wire(2, "t").unwrap();
        let served = tokio::spawn(server.serve());
        let mut rank1 = stream(children.into_iter().nth(1).unwrap()).unwrap();
        rank1.write_all(b"cmd=abort exitcode=3\n").await.unwrap();
        let ended = served.await.unwrap();
        assert_eq!(ended.map_err(|a| a.rank), Err(1));
    }
}
