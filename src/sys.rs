//! Leaf: the few system calls the standard library lacks, behind safe functions.
//!
//! This is one of the crate's two `unsafe` rooms (the other is the floor loops, which fork). Every
//! function here is a thin wrapper that checks the return code; nothing here allocates.

use std::io;
use std::os::fd::RawFd;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// CLOCK_MONOTONIC in nanoseconds: one clock shared by every process on this host, so a
/// timestamp written by one process can be compared with one read by another.
#[inline(always)]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The CPU's time-stamp counter, read after every instruction before it has completed (as
/// the kernel's own read for CLOCK_MONOTONIC is): a reading taken when a message is in hand
/// is never taken early, while the load that brought it was still on its way.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn tsc() -> u64 {
    // SAFETY: LFENCE and RDTSC exist on every x86_64 CPU and touch no memory.
    unsafe {
        core::arch::x86_64::_mm_lfence();
        core::arch::x86_64::_rdtsc()
    }
}

/// The interval clock: for times subtracted within one process (a round trip, a call's
/// duration), the TSC read without a fence through quanta, calibrated against CLOCK_MONOTONIC.
/// A reading costs less than a vDSO clock read (each run records both) and, unfenced, does
/// not stall the loop it times, which matters on the round trip itself. Its readings are CLOCK_MONOTONIC
/// nanoseconds to within microseconds (good for window and interval ends), never the time a
/// message carries to another process: one-way latency uses [`monotonic_ns`].
pub struct IntervalClock {
    clock: quanta::Clock,
    raw0: u64,
    mono0: u64,
}

impl IntervalClock {
    /// The first in a process calibrates the TSC (0.5 ms to 200 ms): make it before measuring.
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let raw0 = clock.raw();
        IntervalClock {
            clock,
            raw0,
            mono0: monotonic_ns(),
        }
    }

    /// Now, in nanoseconds of CLOCK_MONOTONIC as calibrated.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        self.mono0 + self.clock.delta_as_nanos(self.raw0, self.clock.raw())
    }
}

impl Default for IntervalClock {
    fn default() -> Self {
        Self::new()
    }
}

/// The resolution the kernel claims for CLOCK_MONOTONIC.
pub fn monotonic_resolution_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time and scheduling counters of the calling thread (or the whole process).
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub user_ns: u64,
    pub sys_ns: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    pub max_rss_kib: u64,
}

fn usage(who: libc::c_int) -> Usage {
    // SAFETY: rusage is plain old data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    Usage {
        user_ns: tv(ru.ru_utime),
        sys_ns: tv(ru.ru_stime),
        voluntary_switches: ru.ru_nvcsw as u64,
        involuntary_switches: ru.ru_nivcsw as u64,
        max_rss_kib: ru.ru_maxrss as u64,
    }
}

/// The calling thread's usage; `max_rss_kib` is the process's (Linux keeps no per-thread peak).
pub fn thread_usage() -> Usage {
    let mut u = usage(libc::RUSAGE_THREAD);
    u.max_rss_kib = usage(libc::RUSAGE_SELF).max_rss_kib;
    u
}

/// The name of the user this process runs as, if the system knows it.
pub fn user_name() -> Option<String> {
    // SAFETY: geteuid has no memory effects; getpwuid's static result is copied out at once.
    unsafe {
        let pw = libc::getpwuid(libc::geteuid());
        if pw.is_null() || (*pw).pw_name.is_null() {
            return None;
        }
        Some(
            std::ffi::CStr::from_ptr((*pw).pw_name)
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// Freed memory this process's allocator keeps rather than gives back, and the largest block it
/// serves from its heap: 1 GiB and 32 MiB (glibc's limit for the latter).
const KEEP_FREED: libc::c_int = 1 << 30;
const HEAP_BLOCKS_UP_TO: libc::c_int = 32 << 20;

/// Makes glibc's malloc keep freed memory for reuse, as a long-running program's heap has it,
/// unless the user set malloc's tunables in `GLIBC_TUNABLES`; says what the process runs with.
/// By default glibc gives the heap's top back to the kernel once 128 KiB of it is free and maps
/// each block of 128 KiB or more afresh, so a client that takes a buffer per large message in a
/// process with a small heap (msgperf's roles) faults in and zeroes new pages for every message:
/// a 64 KiB Redis subscriber spent 30-38 us of system time a message on it, against 4 us kept.
pub fn keep_freed_memory() -> &'static str {
    MALLOC.get_or_init(|| {
        if users_malloc_tunables() {
            return "glibc malloc as GLIBC_TUNABLES sets it";
        }
        // SAFETY: mallopt only sets the allocator's parameters, under the allocator's lock.
        #[cfg(target_env = "gnu")]
        unsafe {
            if libc::mallopt(libc::M_TRIM_THRESHOLD, KEEP_FREED) == 1
                && libc::mallopt(libc::M_MMAP_THRESHOLD, HEAP_BLOCKS_UP_TO) == 1
            {
                return "glibc malloc keeping freed memory (trim threshold 1 GiB, mmap threshold 32 MiB)";
            }
        }
        ALLOCATOR_DEFAULTS
    })
}

/// Whether the user set malloc's own tunables, which msgperf then leaves as they are.
fn users_malloc_tunables() -> bool {
    std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc."))
}

/// What `keep_freed_memory` made of this process's allocator, if it was called.
pub fn malloc_setting() -> &'static str {
    MALLOC.get().copied().unwrap_or(ALLOCATOR_DEFAULTS)
}

static MALLOC: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();
const ALLOCATOR_DEFAULTS: &str = "the allocator's defaults";

/// CPU time (user + system) of this process, every thread.
pub fn process_cpu_ns() -> u64 {
    let s = usage(libc::RUSAGE_SELF);
    s.user_ns + s.sys_ns
}

/// CPU time (user + system) of this process and of its children that were waited for.
pub fn process_and_children_cpu_ns() -> u64 {
    let s = usage(libc::RUSAGE_SELF);
    let c = usage(libc::RUSAGE_CHILDREN);
    s.user_ns + s.sys_ns + c.user_ns + c.sys_ns
}

/// The CPUs this thread may run on now.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let ok =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if ok != 0 {
        return (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
    }
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET bounds-checks against CPU_SETSIZE below.
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cpu number too large",
        ));
    }
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    unsafe { libc::CPU_SET(cpu, &mut set) };
    check(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })?;
    Ok(())
}

/// Restricts the calling thread to a set of CPUs.
pub fn set_allowed_cpus(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; every index is checked against CPU_SETSIZE.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    check(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })?;
    Ok(())
}

/// Runs `f` with the calling thread pinned to `cpu` (if any), then restores its CPU mask.
pub fn with_cpu<T>(cpu: Option<usize>, f: impl FnOnce() -> T) -> T {
    let Some(c) = cpu else { return f() };
    let before = allowed_cpus();
    let _ = pin_current_thread(c);
    let out = f();
    let _ = set_allowed_cpus(&before);
    out
}

/// Clock ticks per second of /proc/stat.
pub fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as u64
    } else {
        100
    }
}

/// The CPU the calling thread is running on right now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: no arguments.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as usize)
}

/// Creates a FIFO (named pipe) with mode 0600.
pub fn mkfifo(path: &std::path::Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))?;
    // SAFETY: c is a valid NUL-terminated string.
    check(unsafe { libc::mkfifo(c.as_ptr(), 0o600) })?;
    Ok(())
}

/// Sets or clears O_NONBLOCK on a descriptor.
pub fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller owns.
    let flags = check(unsafe { libc::fcntl(fd, libc::F_GETFL) })?;
    let flags = if on {
        flags | libc::O_NONBLOCK
    } else {
        flags & !libc::O_NONBLOCK
    };
    check(unsafe { libc::fcntl(fd, libc::F_SETFL, flags) })?;
    Ok(())
}

/// Waits until `fd` is readable or `timeout_ms` passes; returns whether it is readable.
pub fn wait_readable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    wait_ready(fd, libc::POLLIN, timeout_ms)
}

/// Waits until `fd` is ready for `events` (POLLIN, POLLOUT), or `timeout_ms` passes, or a signal
/// comes; returns whether it is ready (or closed: the next call says so).
pub fn wait_ready(fd: RawFd, events: libc::c_short, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    match check(unsafe { libc::poll(&mut p, 1, timeout_ms) }) {
        Ok(n) => Ok(n > 0),
        // A signal (Ctrl-C) interrupted the wait: not readable yet; the caller's loop decides.
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
        Err(e) => Err(e),
    }
}

/// Whether a process exists and still runs its own code: not a zombie, and not tearing itself
/// down (see [`ending`]).
pub fn process_alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok() && ending(pid).is_none()
}

/// How a process is ending, if it is: `Some(Some(signal))` killed by a signal, `Some(None)`
/// exiting on its own; None while it lives (or once it is gone). A killed process can take
/// seconds to finish dying (its memory's teardown waits for kernel threads that walk the same
/// files' mappings, such as DAMON's kdamond), and it closes its descriptors only after that:
/// this says at once what its closing connections would say late.
pub fn ending(pid: u32) -> Option<Option<i32>> {
    /// `PF_EXITING` in the flags field of /proc/PID/stat.
    const PF_EXITING: u64 = 0x4;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name (in parentheses, which may hold spaces), from the
    // state (field 3) on: flags is field 9, exit_code field 52.
    let (_, rest) = stat.rsplit_once(") ")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let done = matches!(f.first(), Some(&"Z" | &"X"));
    let flags: u64 = f.get(6)?.parse().ok()?;
    if !done && flags & PF_EXITING == 0 {
        return None;
    }
    let code: i32 = f.get(49).and_then(|c| c.parse().ok()).unwrap_or(0);
    let signal = code & 0x7f;
    Some((signal != 0).then_some(signal))
}

/// How much a process has run: nanoseconds on a CPU and times it was scheduled in, summed over
/// its threads (/proc/PID/task/*/schedstat). Both stand still only while every thread is
/// blocked or stopped. None if the kernel does not keep them, or the process is gone.
pub fn run_count(pid: u32) -> Option<(u64, u64)> {
    let mut total = (0, 0);
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        let mut fields = stat.split_whitespace().map(|f| f.parse::<u64>().ok());
        let (on_cpu, _waited, slices) = (fields.next()??, fields.next()??, fields.next()??);
        total = (total.0 + on_cpu, total.1 + slices);
    }
    Some(total)
}

/// Sends `sig` to a process.
pub fn kill(pid: u32, sig: libc::c_int) {
    // SAFETY: kill has no memory effects; a stale pid only yields ESRCH.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Waits for `child` to end within `bound`, collecting its output (stdout and stderr, where
/// piped); past the bound it is killed, with its process group if it leads one: None.
pub fn output_within(
    child: std::process::Child,
    bound: std::time::Duration,
) -> io::Result<Option<std::process::Output>> {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(bound) {
        Ok(out) => out.map(Some),
        Err(_) => {
            kill_group(pid, libc::SIGKILL);
            kill(pid, libc::SIGKILL);
            Ok(None)
        }
    }
}

/// Sends `sig` to a process group (one a child of `role_command` leads).
pub fn kill_group(pgid: u32, sig: libc::c_int) {
    // SAFETY: as `kill`; a negative pid names the group.
    unsafe { libc::kill(-(pgid as libc::pid_t), sig) };
}

/// Configures a command so that its child is killed when this process dies (the thread that
/// spawns it must live as long as the child: the signal follows the spawning thread), does not
/// take the terminal's Ctrl-C (the runner stops it cleanly instead), and finds `fds` at
/// descriptors 3, 4, ... (a role's control socket, a floor's ends).
pub fn role_command(cmd: &mut std::process::Command, fds: &[RawFd]) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let fds = fds.to_vec();
    // SAFETY: between fork and exec only async-signal-safe calls are made (prctl, fcntl,
    // dup2), on descriptors the parent holds open, and nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // Out of the way first, above the range 3.. they move to, so that moving one to
            // 3 + i cannot close another (and as low as that: a descriptor limit of 100 or
            // less must not refuse it).
            let above = 3 + fds.len().min(16) as RawFd;
            let mut high = [0 as RawFd; 16];
            for (i, &fd) in fds.iter().enumerate().take(16) {
                high[i] = check(libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, above))?;
            }
            for (i, &fd) in high.iter().enumerate().take(fds.len().min(16)) {
                // dup2 clears close-on-exec on the copy: the role inherits it.
                check(libc::dup2(fd, 3 + i as RawFd))?;
            }
            Ok(())
        });
    }
}

/// Configures a service's command (a broker the case starts): it dies with the thread that
/// spawns it, does not take the terminal's Ctrl-C, and runs on `cpu` if given (its threads
/// inherit that).
pub fn service_command(cmd: &mut std::process::Command, cpu: Option<usize>) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    // SAFETY: between fork and exec only async-signal-safe calls are made (prctl,
    // sched_setaffinity) on a set built on the stack, and nothing is allocated.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            if let Some(cpu) = cpu {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// CPU time, context switches, peak memory and current CPU of another process, summed over its
/// threads (/proc/PID/stat and status): what the runner measures of a broker.
pub fn process_usage(pid: u32) -> Option<(Usage, Option<usize>)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the name: state is field 3, utime 14, stime 15, processor 39.
    let rest: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    let tick_ns = 1_000_000_000 / clock_ticks_per_s();
    let mut u = Usage {
        user_ns: field(14)? * tick_ns,
        sys_ns: field(15)? * tick_ns,
        ..Usage::default()
    };
    let status = |path: std::path::PathBuf, key: &str| -> u64 {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix(key))
                    .and_then(|v| v.split_whitespace().next()?.parse().ok())
            })
            .unwrap_or(0)
    };
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        u.voluntary_switches += status(task.path().join("status"), "voluntary_ctxt_switches:");
        u.involuntary_switches += status(task.path().join("status"), "nonvoluntary_ctxt_switches:");
    }
    u.max_rss_kib = status(format!("/proc/{pid}/status").into(), "VmHWM:");
    Some((u, field(39).map(|c| c as usize)))
}

/// read(2) as a bare system call, for the transports and the floor loops alike. glibc's
/// `read` is a cancellation point: in a process with more than one thread (msgperf's are) it
/// wraps every call in two atomic operations for a thread cancellation msgperf never uses,
/// which a plain single-threaded C loop does not pay.
#[inline(always)]
pub fn read(fd: RawFd, buf: &mut [u8]) -> isize {
    // SAFETY: buf is valid for writes of buf.len() bytes.
    unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr(), buf.len()) as isize }
}

/// write(2) as a bare system call (see `read`).
#[inline(always)]
pub fn write(fd: RawFd, buf: &[u8]) -> isize {
    // SAFETY: buf is valid for reads of buf.len() bytes.
    unsafe { libc::syscall(libc::SYS_write, fd, buf.as_ptr(), buf.len()) as isize }
}

/// A bare system call's return as an I/O result.
#[inline(always)]
pub fn io_len(n: isize) -> io::Result<usize> {
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Stops a process msgperf started (a broker, a media driver): SIGTERM for a clean stop (it
/// flushes and removes its files), SIGCONT so that a stopped one takes it, and a reap that
/// kills it if it is not gone within `grace`.
pub fn stop_child(pid: u32, grace: std::time::Duration) -> Option<i32> {
    kill(pid, libc::SIGTERM);
    kill(pid, libc::SIGCONT);
    reap(pid, grace)
}

/// Waits for a child without blocking longer than `timeout`; kills it past that and waits as
/// long again for the kill to finish (a dying process may take seconds to free its memory and
/// close its descriptors; past that bound the kernel reaps it when this process ends). Returns
/// its exit code, -signal if a signal ended it, None if it had to be killed.
pub fn reap(pid: u32, timeout: std::time::Duration) -> Option<i32> {
    if let Some(code) = wait_child(pid, timeout) {
        return Some(code);
    }
    kill(pid, libc::SIGKILL);
    wait_child(pid, timeout);
    None
}

/// Polls for a child's exit for at most `timeout`: its exit code, or -signal.
fn wait_child(pid: u32, timeout: std::time::Duration) -> Option<i32> {
    let end = std::time::Instant::now() + timeout;
    loop {
        let mut status = 0;
        // SAFETY: WNOHANG never blocks; status is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
        if r == pid as libc::pid_t {
            return Some(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                -libc::WTERMSIG(status)
            });
        }
        if r < 0 || std::time::Instant::now() >= end {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// The descriptors this process inherited from `first` on, up to the first that is not open
/// (a role process's control socket and a floor side's ends).
pub fn inherited_fds(first: RawFd) -> Vec<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let mut out = Vec::new();
    for fd in first..first + 16 {
        // SAFETY: F_GETFD only asks whether the descriptor is open.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            break;
        }
        // Not inherited by what this process starts in turn.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        // SAFETY: the descriptor is open, was given to this process at its start, and is
        // owned by nothing else here.
        out.push(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) });
    }
    out
}

/// The width of the terminal on standard output, if it is one.
pub fn terminal_width() -> Option<usize> {
    // SAFETY: winsize is plain data; TIOCGWINSZ fills it or fails.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) };
    (r == 0 && ws.ws_col > 0).then_some(ws.ws_col as usize)
}

/// A process's state letter from /proc/PID/stat (`R`, `S`, `T` stopped, `Z`...), if it exists.
pub fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name is in parentheses and may hold spaces: the state follows the last `)`.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// A fresh anonymous memory file of `len` bytes (shared by every process that holds it).
pub fn memfd(len: usize) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a valid NUL-terminated name; the returned descriptor is owned here.
    let fd = unsafe { libc::memfd_create(c"msgperf".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    std::fs::File::from(fd.try_clone()?).set_len(len as u64)?;
    Ok(fd)
}

/// This process's resident memory in bytes (/proc/self/statm).
pub fn resident_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(1) as u64)
}

/// The descriptor limit (soft, hard).
pub fn fd_limit() -> io::Result<(u64, u64)> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: r is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((r.rlim_cur, r.rlim_max))
}

/// This process's pids cgroup (v1 or v2) if it has a limit: its path, `pids.max` and
/// `pids.current`.
pub fn pids_cgroup() -> Option<(String, u64, u64)> {
    let groups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    groups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let roots: &[&str] = match controllers {
            "" => &["/sys/fs/cgroup", "/sys/fs/cgroup/unified"],
            c if c.split(',').any(|c| c == "pids") => &["/sys/fs/cgroup/pids"],
            _ => return None,
        };
        roots.iter().find_map(|root| {
            let dir = format!("{root}{path}");
            let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
            let max: u64 = read("pids.max")?.trim().parse().ok()?;
            let current: u64 = read("pids.current")?.trim().parse().ok()?;
            Some((path.to_string(), max, current))
        })
    })
}

/// The limits on how many tasks this process may start, for an error to name: its pids
/// cgroup's, RLIMIT_NPROC (which root is exempt from), the kernel's.
pub fn task_limits() -> String {
    let mut said = Vec::new();
    if let Some((path, max, current)) = pids_cgroup() {
        said.push(format!(
            "pids.max {max} of the pids cgroup {path}, {current} in use"
        ));
    }
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: r is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut r) } == 0 {
        if r.rlim_cur == libc::RLIM_INFINITY {
            said.push("ulimit -u unlimited".into());
        } else {
            said.push(format!("ulimit -u {}", r.rlim_cur));
        }
    }
    if let Ok(t) = std::fs::read_to_string("/proc/sys/kernel/threads-max") {
        said.push(format!("kernel.threads-max {}", t.trim()));
    }
    said.join("; ")
}

/// Tasks (processes and threads) this machine can still start: the least of the kernel's
/// `threads-max` and `pid_max`, for a user other than root RLIMIT_NPROC, less the tasks that
/// run now (/proc/loadavg), and what this process's pids cgroup has left. None where it cannot
/// be read.
pub fn tasks_free() -> Option<u64> {
    let read = |p: &str| -> Option<u64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    let mut most = read("/proc/sys/kernel/threads-max")?.min(read("/proc/sys/kernel/pid_max")?);
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: r is a valid out-pointer.
        if unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut r) } == 0 {
            most = most.min(r.rlim_cur);
        }
    }
    let loadavg = std::fs::read_to_string("/proc/loadavg").ok()?;
    let running: u64 = loadavg
        .split_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()?;
    let free = most.saturating_sub(running);
    Some(match pids_cgroup() {
        Some((_, max, current)) => free.min(max.saturating_sub(current)),
        None => free,
    })
}

/// Memory the kernel can give without swapping (MemAvailable), in bytes.
pub fn memory_available() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Sets the soft descriptor limit (at most the hard one).
pub fn set_fd_limit(soft: u64) -> io::Result<()> {
    let (_, hard) = fd_limit()?;
    let r = libc::rlimit {
        rlim_cur: soft.min(hard),
        rlim_max: hard,
    };
    // SAFETY: r is a valid rlimit.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The soft descriptor limit raised to at least `want` (up to the hard limit) while it lives,
/// and put back as it was when dropped.
pub struct FdLimit {
    pub before: u64,
    pub now: u64,
}

impl FdLimit {
    pub fn raise_to(want: u64) -> Self {
        let (before, hard) = fd_limit().unwrap_or((0, 0));
        if want > before && set_fd_limit(want.min(hard)).is_ok() {
            return FdLimit {
                before,
                now: want.min(hard),
            };
        }
        FdLimit {
            before,
            now: before,
        }
    }
}

impl Drop for FdLimit {
    fn drop(&mut self) {
        if self.now != self.before {
            let _ = set_fd_limit(self.before);
        }
    }
}

/// Sleeps until `deadline_ns` on the monotonic clock ([`monotonic_ns`]), as one absolute-time
/// wait (a kernel timer of its own).
pub fn sleep_until_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: ts is a valid timespec; an interrupted sleep is repeated.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

/// Connects a unix socket of `kind` (`libc::SOCK_STREAM`, `libc::SOCK_SEQPACKET`) to `path`,
/// giving up after `timeout` (TimedOut): a listener whose backlog is full makes a blocking
/// connect wait with no bound.
pub fn unix_connect_timeout(
    path: &std::path::Path,
    kind: i32,
    timeout: std::time::Duration,
) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: sockaddr_un is plain data, zeroed is its empty value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "socket path too long",
        ));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: a plain socket call; the descriptor is owned by the stream made from it.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_UNIX,
            kind | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    })?;
    // SAFETY: fd is a fresh socket that nothing else owns.
    let socket = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let end = std::time::Instant::now() + timeout;
    loop {
        // SAFETY: addr is a valid sockaddr_un of the length given.
        let r = unsafe {
            libc::connect(
                fd,
                &addr as *const libc::sockaddr_un as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            )
        };
        if r == 0 {
            set_nonblocking(fd, false)?;
            return Ok(socket);
        }
        let e = io::Error::last_os_error();
        // A full backlog: a unix socket does not complete the connect later, so try again.
        if e.raw_os_error() != Some(libc::EAGAIN) {
            return Err(e);
        }
        if std::time::Instant::now() >= end {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the listener's backlog stayed full",
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Listens on socket `fd` with `backlog`; on a listening socket, sets its backlog.
pub fn listen(fd: i32, backlog: u32) -> io::Result<()> {
    // SAFETY: a plain call on a descriptor the caller owns.
    check(unsafe { libc::listen(fd, backlog.min(i32::MAX as u32) as i32) }).map(|_| ())
}

/// The most a listen backlog may be (net.core.somaxconn).
pub fn somaxconn() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The ephemeral port range (net.ipv4.ip_local_port_range).
pub fn ephemeral_ports() -> Option<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join("-"))
}

/// vm.max_map_count: how many memory maps a process may have.
pub fn max_map_count() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// How many memory maps this process has.
pub fn map_count() -> Option<u64> {
    std::fs::read_to_string("/proc/self/maps")
        .ok()
        .map(|s| s.lines().count() as u64)
}

/// This host's IPv4 addresses on interfaces that are up, loopback excepted (where a role on
/// another host can be reached).
pub fn ipv4_addresses() -> Vec<std::net::Ipv4Addr> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a chain it allocates; every node is read only while
    // the chain lives, and freeifaddrs releases it once.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return out;
        }
        let mut at = list;
        while !at.is_null() {
            let ifa = &*at;
            let up = ifa.ifa_flags & libc::IFF_UP as libc::c_uint != 0;
            let lo = ifa.ifa_flags & libc::IFF_LOOPBACK as libc::c_uint != 0;
            if up
                && !lo
                && !ifa.ifa_addr.is_null()
                && (*ifa.ifa_addr).sa_family as i32 == libc::AF_INET
            {
                let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                out.push(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
            }
            at = ifa.ifa_next;
        }
        libc::freeifaddrs(list);
    }
    out
}

/// The msgperf binary, to start processes of msgperf's own with (roles, a transport's
/// service): MSGPERF_EXE names it when the caller is not msgperf itself (the test suite).
pub fn own_executable() -> io::Result<std::path::PathBuf> {
    match std::env::var_os("MSGPERF_EXE") {
        Some(p) => Ok(std::path::PathBuf::from(p)),
        None => std::env::current_exe(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_env = "gnu")]
    fn kept_freed_memory_serves_large_blocks_from_the_heap() {
        if users_malloc_tunables() {
            assert!(
                keep_freed_memory().contains("GLIBC_TUNABLES"),
                "the user's own"
            );
            return;
        }
        assert!(keep_freed_memory().contains("keeping freed memory"));
        assert_eq!(malloc_setting(), keep_freed_memory(), "recorded as set");
        // glibc's defaults map a 4 MiB block on its own; kept, it comes from a heap. Other
        // tests' threads may map blocks meanwhile, so one clean try of five suffices.
        let from_heap = (0..5).any(|_| {
            // SAFETY: mallinfo2 only reads the allocator's counters.
            let mapped = || unsafe { libc::mallinfo2() }.hblkhd;
            let before = mapped();
            let block = std::hint::black_box(vec![1u8; 4 << 20]);
            let after = mapped();
            drop(block);
            after < before + (4 << 20)
        });
        assert!(from_heap, "a 4 MiB block was mapped on its own");
    }

    #[test]
    fn a_killed_child_is_seen_ending_by_its_signal() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        assert_eq!(ending(pid), None, "a sleeping child lives");
        assert!(process_alive(pid));
        kill(pid, libc::SIGKILL);
        let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while ending(pid).is_none() && std::time::Instant::now() < end {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(ending(pid), Some(Some(libc::SIGKILL)));
        assert!(!process_alive(pid));
        child.wait().unwrap();
    }

    #[test]
    fn a_raised_descriptor_limit_is_put_back() {
        let (soft, hard) = fd_limit().unwrap();
        set_fd_limit(soft.min(hard).min(512)).unwrap();
        let lowered = fd_limit().unwrap();
        {
            let raised = FdLimit::raise_to(hard);
            assert_eq!(fd_limit().unwrap().0, hard.min(raised.now));
            assert_eq!(raised.before, lowered.0);
        }
        assert_eq!(fd_limit().unwrap(), lowered, "restored when dropped");
        set_fd_limit(soft).unwrap();
    }
}
