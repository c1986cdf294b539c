//! What the command line asks of the process before it serves, as memcached does it: resource
//! limits (`-c`, `-r`), the privilege drop (`-u`, when started as root), becoming a daemon
//! (`-d`), locking memory (`-k`) and the pid file (`-P`); and the process's CPU time, which
//! `stats` reports.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Raises the soft descriptor limit toward what `connections` need (as far as the hard limit
/// allows), as memcached does.
pub fn raise_fd_limit(connections: usize) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a live out-parameter.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return;
    }
    let want = (connections as libc::rlim_t + 64).min(limit.rlim_max);
    if want > limit.rlim_cur {
        limit.rlim_cur = want;
        // SAFETY: a live in-parameter; failing leaves the limit as it was.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) };
    }
}

/// `-r`: core files as large as the hard limit allows.
pub fn enable_coredumps() -> Result<(), String> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a live out-parameter.
    if unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut limit) } != 0 {
        return Err(format!("getrlimit: {}", io::Error::last_os_error()));
    }
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: a live in-parameter.
    if unsafe { libc::setrlimit(libc::RLIMIT_CORE, &limit) } != 0 {
        return Err(format!(
            "failed to ensure corefile creation: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// `-u USER`: when the process runs as root, it becomes `user` (its group, no supplementary
/// groups), as memcached does; otherwise `-u` changes nothing. Started as root without `-u`, it
/// stays root (memcached refuses to: see the host's README).
pub fn drop_privileges(user: Option<&str>) -> Result<(), String> {
    // SAFETY: no preconditions.
    let root = unsafe { libc::getuid() == 0 || libc::geteuid() == 0 };
    let Some(user) = user.filter(|_| root) else {
        return Ok(());
    };
    let name = CString::new(user).map_err(|_| format!("bad user name {user:?}"))?;
    // SAFETY: a NUL-terminated name; the answer points at libc's static storage, read at once
    // (no other thread exists yet to call getpwnam).
    let pw = unsafe { libc::getpwnam(name.as_ptr()).as_ref() }
        .ok_or_else(|| format!("can't find the user {user} to switch to"))?;
    let (uid, gid) = (pw.pw_uid, pw.pw_gid);
    // SAFETY: plain system calls on this process. setgroups may fail with EPERM where the
    // process already has no supplementary groups to drop; setgid and setuid may not fail.
    unsafe {
        libc::setgroups(0, std::ptr::null());
        if libc::setgid(gid) != 0 || libc::setuid(uid) != 0 {
            return Err(format!(
                "failed to assume identity of user {user}: {}",
                io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// `-k`: locks the process's memory, now and to come. As memcached, a failure is a warning.
pub fn lock_memory() -> Result<(), String> {
    // SAFETY: a plain system call.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        return Err(format!(
            "-k invalid, mlockall() failed: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// A daemon's promise to the process that started it: once the server listens, [`Daemon::ready`]
/// lets the parent exit 0; if the daemon exits before, the parent exits with its status. So `-d`
/// returns only once the server serves, and a failure to start is seen by whoever ran it (and
/// on its stderr, which the daemon keeps until it is ready).
#[derive(Debug)]
pub struct Daemon {
    ready: OwnedFd,
    /// Keep stdout and stderr after ready (`-v`, as memcached keeps them when verbose).
    keep_output: bool,
}

/// `-d`: forks; the parent waits for the child's [`Daemon::ready`] (or its exit) and never
/// returns; the child, in a new session, returns its promise. Call it before any thread exists.
pub fn daemonize(keep_output: bool) -> Result<Daemon, String> {
    let mut fds = [0; 2];
    // SAFETY: a live two-int out-parameter.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just opened and are owned here alone.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the process has one thread (the caller's contract), so the child may run on.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid > 0 {
        drop(write);
        wait_for_daemon(read, pid);
    }
    drop(read);
    // SAFETY: a plain system call in the child.
    if unsafe { libc::setsid() } < 0 {
        return Err(format!("setsid: {}", io::Error::last_os_error()));
    }
    // memcached's daemon works from the root directory (paths given are used as given).
    let _ = std::env::set_current_dir("/");
    Ok(Daemon {
        ready: write,
        keep_output,
    })
}

/// The parent's side of [`daemonize`]: exits 0 once the daemon says it is ready, or with the
/// daemon's own status if it ends first.
fn wait_for_daemon(read: OwnedFd, pid: libc::pid_t) -> ! {
    let mut byte = 0u8;
    let mut file = std::fs::File::from(read);
    if io::Read::read(&mut file, std::slice::from_mut(&mut byte)).unwrap_or(0) == 1 {
        std::process::exit(0);
    }
    let mut status = 0;
    // SAFETY: our child's pid and a live out-parameter.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        1
    };
    std::process::exit(code)
}

impl Daemon {
    /// The server listens: the parent exits, and stdin (and stdout and stderr, unless `-v`)
    /// become /dev/null.
    pub fn ready(self) {
        let _ = io::Write::write_all(&mut std::fs::File::from(self.ready), &[1]);
        let Ok(null) = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
        else {
            return;
        };
        let fd = std::os::fd::AsRawFd::as_raw_fd(&null);
        let streams: &[libc::c_int] = if self.keep_output { &[0] } else { &[0, 1, 2] };
        for &to in streams {
            // SAFETY: dup2 onto the standard descriptors, which stay open for the process.
            unsafe { libc::dup2(fd, to) };
        }
    }
}

/// `-P`: the process's pid, written as memcached writes it (a temporary file renamed into
/// place); removed again by dropping it.
#[derive(Debug)]
pub struct PidFile(PathBuf);

impl PidFile {
    pub fn write(path: &Path) -> Result<PidFile, String> {
        let mut temp = path.as_os_str().to_owned();
        temp.push(".tmp");
        let text = format!("{}\n", std::process::id());
        std::fs::write(&temp, text)
            .and_then(|()| std::fs::rename(&temp, path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&temp);
                format!(
                    "Could not open the pid file {} for writing: {e}",
                    path.display()
                )
            })?;
        Ok(PidFile(path.to_owned()))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The process's CPU time, user and system, as memcached prints it (`seconds.micros`).
pub fn rusage() -> (String, String) {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a live out-parameter.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let show = |t: libc::timeval| format!("{}.{:06}", t.tv_sec, t.tv_usec);
    (show(usage.ru_utime), show(usage.ru_stime))
}
