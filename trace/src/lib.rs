//! Workload traces in the Standard Workload Format (SWF).
//!
//! An SWF file is one job per line, 18 whitespace-separated fields, `-1`
//! for unknown; comment lines start with `;` and the header among them
//! gives the machine (`; MaxProcs: 128`, `; MaxNodes: 128`). This crate
//! reads such files — plain, `.gz` or `.xz` — into [`Trace`]: the header,
//! the jobs, and every line it could not read, by line number, with the
//! reason. A bad line never stops the reading and never panics: it is
//! counted and reported, and the simulator decides what to do.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

/// One job: the 18 SWF fields, `-1` where unknown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Job {
    /// 1. Job number.
    pub id: i64,
    /// 2. Submit time, seconds from the start of the trace.
    pub submit: i64,
    /// 3. Wait time, seconds.
    pub wait: i64,
    /// 4. Run time, seconds.
    pub run: i64,
    /// 5. Allocated processors.
    pub procs: i64,
    /// 6. Average CPU time used, seconds.
    pub cpu: f64,
    /// 7. Used memory, KB per processor.
    pub mem: f64,
    /// 8. Requested processors.
    pub req_procs: i64,
    /// 9. Requested time, seconds.
    pub req_time: i64,
    /// 10. Requested memory, KB per processor.
    pub req_mem: i64,
    /// 11. Status (1 completed, 0 failed, 5 cancelled, …).
    pub status: i64,
    /// 12. User id.
    pub user: i64,
    /// 13. Group id.
    pub group: i64,
    /// 14. Executable (application) number.
    pub exe: i64,
    /// 15. Queue number.
    pub queue: i64,
    /// 16. Partition number.
    pub partition: i64,
    /// 17. Preceding job number.
    pub preceding: i64,
    /// 18. Think time from the preceding job, seconds.
    pub think: i64,
}

/// A line that is not a job, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// 1-based.
    pub line: usize,
    pub reason: String,
}

/// A whole trace.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// `; Key: value` header lines, in order.
    pub header: Vec<(String, String)>,
    pub jobs: Vec<Job>,
    pub malformed: Vec<Malformed>,
}

impl Trace {
    /// The trace as SWF text: its header as `; Key: value` lines, then one
    /// line per job (what [`read`] reads back).
    pub fn to_swf(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for (key, value) in &self.header {
            let _ = writeln!(out, "; {key}: {value}");
        }
        for j in &self.jobs {
            let _ = writeln!(
                out,
                "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}",
                j.id,
                j.submit,
                j.wait,
                j.run,
                j.procs,
                j.cpu,
                j.mem,
                j.req_procs,
                j.req_time,
                j.req_mem,
                j.status,
                j.user,
                j.group,
                j.exe,
                j.queue,
                j.partition,
                j.preceding,
                j.think
            );
        }
        out
    }

    fn header_number(&self, key: &str) -> Option<u64> {
        self.header
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .and_then(|(_, v)| v.split_whitespace().next()?.parse().ok())
    }

    /// `; MaxProcs:` — processors of the machine, when given.
    pub fn max_procs(&self) -> Option<u64> {
        self.header_number("MaxProcs")
    }

    /// `; MaxNodes:` — nodes of the machine, when given.
    pub fn max_nodes(&self) -> Option<u64> {
        self.header_number("MaxNodes")
    }
}

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

/// Reads a trace file; `.gz` and `.xz` are decompressed on the way.
pub fn read(path: &Path) -> io::Result<Trace> {
    let file = std::fs::File::open(path)?;
    let reader: Box<dyn Read> = match path.extension().and_then(|e| e.to_str()) {
        Some("xz") => Box::new(xz2::read::XzDecoder::new(file)),
        Some("gz") => Box::new(flate2::read::MultiGzDecoder::new(file)),
        _ => Box::new(file),
    };
    parse(BufReader::with_capacity(1 << 16, reader))
}

/// Parses SWF text. I/O errors (and invalid compressed data) are errors;
/// bad lines are not: they land in [`Trace::malformed`].
pub fn parse(mut input: impl BufRead) -> io::Result<Trace> {
    let mut trace = Trace::default();
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        number += 1;
        let Ok(text) = std::str::from_utf8(&line) else {
            trace.malformed.push(Malformed {
                line: number,
                reason: "not UTF-8 text".to_owned(),
            });
            continue;
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if let Some(comment) = text.strip_prefix(';') {
            if let Some((key, value)) = comment.split_once(':') {
                let key = key.trim();
                if !key.is_empty() && !key.contains(char::is_whitespace) {
                    trace.header.push((key.to_owned(), value.trim().to_owned()));
                }
            }
            continue;
        }
        match parse_job(text) {
            Ok(job) => trace.jobs.push(job),
            Err(reason) => trace.malformed.push(Malformed {
                line: number,
                reason,
            }),
        }
    }
    Ok(trace)
}

fn parse_job(text: &str) -> Result<Job, String> {
    let mut fields = [0f64; 18];
    let mut n = 0;
    for (i, word) in text.split_whitespace().enumerate() {
        if i >= 18 {
            n = i + 1;
            continue;
        }
        fields[i] = word
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("field {} `{word}` is not a number", i + 1))?;
        n = i + 1;
    }
    if n != 18 {
        return Err(format!("{n} fields where SWF has 18"));
    }
    // Integer fields hold integers; a fraction there is a broken line.
    let int = |i: usize| -> Result<i64, String> {
        let v = fields[i];
        if v.fract() != 0.0 || v.abs() > 9.0e15 {
            return Err(format!("field {} `{v}` is not a whole number", i + 1));
        }
        Ok(v as i64)
    };
    Ok(Job {
        id: int(0)?,
        submit: int(1)?,
        wait: int(2)?,
        run: int(3)?,
        procs: int(4)?,
        cpu: fields[5],
        mem: fields[6],
        req_procs: int(7)?,
        req_time: int(8)?,
        req_mem: int(9)?,
        status: int(10)?,
        user: int(11)?,
        group: int(12)?,
        exe: int(13)?,
        queue: int(14)?,
        partition: int(15)?,
        preceding: int(16)?,
        think: int(17)?,
    })
}
