//! Starting one process: a bare `clone(CLONE_VM | CLONE_VFORK)` and
//! `execve`, the way dash starts a simple command.
//!
//! Why not `std::process::Command`: on these machines its spawn-and-wait
//! costs ~750 µs per process against ~630 µs for this path (BENCHMARKS.md,
//! dependency chain), mostly because glibc's posix_spawn child queries and
//! resets all 64 signal dispositions. Here the child shares slurp's memory
//! until it execs (the parent is suspended meanwhile), so it may only make
//! system calls on data the parent prepared: no allocation, no locks.
//!
//! What the child does before `execve`: bind itself to its CPUs, join its
//! memory limit's cgroup (when it has one), join or lead its process group,
//! ask for SIGKILL when slurp dies (`PR_SET_PDEATHSIG`), move its three
//! standard streams into place (and its PMI socket to descriptor 3),
//! change directory, set
//! SIGPIPE back to default (Rust ignores it, and an ignored signal stays
//! ignored across exec), and unblock every signal (the parent blocks them
//! all around the clone, so no handler of slurp's can run on the shared
//! memory). Handled signals go back to default by exec itself. If a step
//! fails, the errno and the step reach the parent through shared memory.

use std::cell::{Cell, RefCell};
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Everything the child needs, prepared by the parent.
pub struct Spec<'a> {
    pub path: CString,
    pub argv: Vec<CString>,
    pub envp: Vec<&'a CStr>,
    pub cwd: CString,
    /// 0: lead a new group; otherwise join this one.
    pub pgid: i32,
    /// Descriptors for the child's stdin, stdout and stderr; the caller
    /// owns them and keeps them open across the call.
    pub fds: [c_int; 3],
    /// The `cgroup.procs` of the cgroup the child joins (its memory
    /// limit) before anything else, or -1.
    pub cgroup: c_int,
    /// The child's end of its PMI socket, to become descriptor 3, or -1.
    pub pmi: c_int,
    /// The CPUs the child runs on (it binds itself first thing); empty:
    /// slurp's (the spawning thread's, or the ones it had before
    /// [`pin_thread`]).
    pub cpus: Vec<usize>,
}

/// What the child reports when it could not exec.
#[repr(C)]
struct Failure {
    errno: c_int,
    /// 1 chdir, 2 execve, 3 dup2, 4 setpgid, 5 joining the cgroup.
    stage: c_int,
}

#[repr(C)]
struct ChildArgs {
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    cwd: *const c_char,
    pgid: c_int,
    fds: [c_int; 3],
    cgroup: c_int,
    pmi: c_int,
    /// Null: the parent's mask.
    cpus: *const libc::cpu_set_t,
    failure: *mut Failure,
}

/// The child's whole life before `execve`. Only async-signal-safe system
/// calls on memory the parent prepared and keeps alive (it is suspended
/// until this function execs or exits).
extern "C" fn child(arg: *mut c_void) -> c_int {
    // SAFETY: `arg` points to the parent's `ChildArgs`, alive and unmoved
    // while the parent is suspended by CLONE_VFORK.
    unsafe {
        let a = &*(arg as *const ChildArgs);
        let fail = |stage: c_int| {
            (*a.failure).errno = *libc::__errno_location();
            (*a.failure).stage = stage;
            libc::_exit(127)
        };
        // Onto its CPUs first (the rest of its set-up runs there; the
        // parent's thread never moves). A mask that cannot be set leaves
        // the parent's, as before exec.
        if !a.cpus.is_null() {
            libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), a.cpus);
        }
        // Into the memory limit first: nothing runs outside it.
        if a.cgroup >= 0 && libc::write(a.cgroup, b"0".as_ptr() as *const c_void, 1) != 1 {
            fail(5);
        }
        if libc::setpgid(0, a.pgid) != 0 {
            fail(4);
        }
        // Die with slurp, even if slurp is killed with SIGKILL.
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
        for (target, &fd) in a.fds.iter().enumerate() {
            let target = target as c_int;
            if fd == target {
                // dup2 onto itself keeps close-on-exec: clear it instead.
                if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                    fail(3);
                }
            } else if libc::dup2(fd, target) < 0 {
                fail(3);
            }
        }
        // After the standard streams, which may have come from 3.
        if a.pmi >= 0 && libc::dup2(a.pmi, 3) < 0 {
            fail(3);
        }
        if a.pmi == 3 && libc::fcntl(3, libc::F_SETFD, 0) != 0 {
            fail(3);
        }
        if libc::chdir(a.cwd) != 0 {
            fail(1);
        }
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(a.path, a.argv, a.envp);
        fail(2);
        127
    }
}

/// The vfork child's stack, mapped rather than allocated: the kernel
/// backs only the pages the child touches (one or two before its
/// `execve`), where a zeroed 128 KiB buffer was written through at the
/// first spawn, 32 page faults, a tenth of a one-task run's start-up.
/// One per thread, reused: the parent is suspended while the child runs on
/// it, so one spawn at a time per thread uses it.
struct ChildStack {
    base: *mut c_void,
}

impl ChildStack {
    const LEN: usize = 128 * 1024;

    fn map() -> Result<Self, String> {
        // SAFETY: a fresh anonymous private mapping, owned by the value and
        // unmapped once, when it drops.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(format!(
                "cannot start a process: no memory for its start-up stack: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Self { base })
    }

    /// The stack's top, where the child starts (page-aligned, so 16-byte
    /// aligned as the ABI wants).
    fn top(&self) -> *mut c_void {
        // SAFETY: one past the end of the mapping, still inside its bounds
        // for pointer arithmetic.
        unsafe { self.base.cast::<u8>().add(Self::LEN).cast() }
    }
}

impl Drop for ChildStack {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no child runs on it any more (a
        // spawn holds the thread until its child has exec'd or exited).
        unsafe { libc::munmap(self.base, Self::LEN) };
    }
}

thread_local! {
    static STACK: RefCell<Option<ChildStack>> = const { RefCell::new(None) };
    /// Where a child that is not bound runs when this thread is pinned
    /// ([`pin_thread`]): the CPUs the thread had before, not the one it
    /// was pinned to (a child inherits its parent thread's mask).
    static UNBOUND: Cell<Option<libc::cpu_set_t>> = const { Cell::new(None) };
}

/// Pins the calling thread to `cpu`; the children it starts unbound keep
/// the CPUs it had. A CPU the kernel refuses leaves the thread as it was,
/// which is only slower.
pub fn pin_thread(cpu: usize) {
    if cpu >= libc::CPU_SETSIZE as usize {
        return;
    }
    // SAFETY: cpu_set_t is plain bits (all zeroes: the empty set); the
    // calls read and write only the sets passed, of the size given, and
    // CPU_SET sets a bit inside the set (`cpu` is below CPU_SETSIZE).
    unsafe {
        let mut had: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut had) != 0 {
            return;
        }
        let mut one: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut one);
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &one) == 0 {
            UNBOUND.set(Some(had));
        }
    }
}

/// A started process: its pid, and a pidfd for it where the kernel gave
/// one at the clone.
pub struct Spawned {
    pub pid: i32,
    pub pidfd: Option<OwnedFd>,
}

/// Whether `clone` can return a pidfd (CLONE_PIDFD, Linux 5.2): one system
/// call a task fewer than `pidfd_open`.
static PIDFD_AT_CLONE: AtomicBool = AtomicBool::new(true);

/// The set of `cpus` (ids past the set's size are skipped).
fn bound_to(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: a cpu_set_t is plain bits; all zeroes is the empty set, and
    // CPU_SET only sets a bit inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &cpu in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(cpu, &mut set);
        }
        set
    }
}

/// Starts the process, or says why it could not start.
pub fn spawn(spec: &Spec<'_>) -> Result<Spawned, String> {
    let argv: Vec<*const c_char> = spec
        .argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const c_char> = spec
        .envp
        .iter()
        .map(|e| e.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let cpus = if spec.cpus.is_empty() {
        UNBOUND.get()
    } else {
        Some(bound_to(&spec.cpus))
    };
    let mut failure = Failure { errno: 0, stage: 0 };
    let args = ChildArgs {
        path: spec.path.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
        cwd: spec.cwd.as_ptr(),
        pgid: spec.pgid,
        fds: spec.fds,
        cgroup: spec.cgroup,
        pmi: spec.pmi,
        cpus: cpus
            .as_ref()
            .map_or(std::ptr::null(), |set| set as *const libc::cpu_set_t),
        failure: &mut failure,
    };
    let mut pidfd: c_int = -1;
    let pid = STACK.with(|stack| {
        let mut stack = stack.borrow_mut();
        let top = match stack.as_ref() {
            Some(mapped) => mapped.top(),
            None => stack.insert(ChildStack::map()?).top(),
        };
        // SAFETY: every signal is blocked around the clone, so no handler of
        // this process runs in the child while it shares our memory; the
        // child runs `child` on its own stack (`top`, page-aligned) and the parent
        // is suspended until it execs or exits (CLONE_VFORK). The kernel
        // writes the pidfd (CLONE_PIDFD) to `pidfd`, alive here.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            let clone = |flags: c_int, pidfd: *mut c_int| {
                libc::clone(
                    child,
                    top,
                    libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD | flags,
                    &args as *const ChildArgs as *mut c_void,
                    pidfd,
                )
            };
            let mut pid = -1;
            if PIDFD_AT_CLONE.load(Ordering::Relaxed) {
                pid = clone(libc::CLONE_PIDFD, &mut pidfd);
                if pid < 0 && *libc::__errno_location() == libc::EINVAL {
                    // Refused here: from now on pidfds come from
                    // pidfd_open, or not at all. (A kernel before 5.2
                    // ignores the flag and leaves `pidfd` at -1: `wait`
                    // opens one then.)
                    PIDFD_AT_CLONE.store(false, Ordering::Relaxed);
                }
            }
            if !PIDFD_AT_CLONE.load(Ordering::Relaxed) {
                pid = clone(0, std::ptr::null_mut());
            }
            let clone_errno = *libc::__errno_location();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            Ok::<_, String>((pid, clone_errno))
        }
    })?;
    // SAFETY: the kernel just gave us this fd, if it did; nothing else owns it.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    let (pid, clone_errno) = pid;
    if pid < 0 {
        return Err(format!(
            "cannot start a process: {}",
            std::io::Error::from_raw_os_error(clone_errno)
        ));
    }
    if failure.stage != 0 {
        // The child exited without exec'ing: reap it, say why.
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        let error = std::io::Error::from_raw_os_error(failure.errno);
        return Err(match (failure.stage, error.kind()) {
            (1, _) => format!(
                "cannot enter working directory `{}`: {error}",
                spec.cwd.to_string_lossy()
            ),
            (2, std::io::ErrorKind::NotFound) => "no such program".to_owned(),
            (2, std::io::ErrorKind::PermissionDenied) => "permission denied".to_owned(),
            (2, _) => error.to_string(),
            (5, _) => format!("cannot join the cgroup of its memory limit: {error}"),
            _ => format!("cannot set up the process: {error}"),
        });
    }
    Ok(Spawned { pid, pidfd })
}

/// A pidfd for `pid`, where the kernel has them (Linux 5.3).
pub fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: a plain system call; a valid fd is owned at once.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: the kernel just gave us this fd; nothing else owns it.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as c_int) })
}

/// Waits for `pid` to end without blocking the loop: through its pidfd
/// (the one `spawn` got, or one opened now) watched by the reactor, or, on
/// kernels without pidfds, by polling.
pub async fn wait(pid: i32, pidfd: Option<OwnedFd>) -> std::io::Result<nix::sys::wait::WaitStatus> {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    let target = nix::unistd::Pid::from_raw(pid);
    let pidfd = pidfd.or_else(|| pidfd_open(pid));
    let watched = match pidfd {
        // SAFETY: the AsyncFd owns the fd, so it stays open for as long as
        // it is registered (the I/O-safety condition of `register`).
        Some(owned) => Some(
            unsafe { tokio::io::unix::AsyncFd::register(owned) }.map_err(|e| e.into_parts().1)?,
        ),
        None => None,
    };
    // A pidfd is readable once the process has ended (a zombie's at once):
    // wait for that before the first `waitpid`, not after one that finds
    // it still running.
    let mut ready = watched.as_ref().map(|fd| fd.readable());
    loop {
        if let Some(ready) = ready.take() {
            ready.await?.clear_ready();
        }
        match waitpid(target, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {}
            Ok(status) => return Ok(status),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
        match &watched {
            Some(fd) => fd.readable().await?.clear_ready(),
            None => tokio::time::sleep(std::time::Duration::from_millis(5)).await,
        }
    }
}
