//! The service's resident memory and CPU, read from `/proc` (Linux): the process is the
//! one listening on the service's port, or the one `--pid` names.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, 100 on Linux).
const TICKS_PER_S: f64 = 100.0;

/// What the service used while the load ran.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Usage {
    /// The process.
    pub pid: u32,
    /// Largest resident set seen (sampled every 250 ms), MiB.
    pub peak_rss_mib: f64,
    /// Resident set at the end, MiB.
    pub end_rss_mib: f64,
    /// CPU time over wall time, in % of one core.
    pub cpu_percent: f64,
}

/// The pid of the process listening on TCP `port`, if this user can see it.
pub fn listening_on(port: u16) -> Option<u32> {
    let inodes: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|line| {
                    let cols: Vec<&str> = line.split_whitespace().collect();
                    let local_port = cols.get(1)?.rsplit(':').next()?;
                    let listening = cols.get(3)? == &"0A";
                    (listening && u16::from_str_radix(local_port, 16).ok()? == port)
                        .then(|| cols.get(9).map(|i| format!("socket:[{i}]")))
                        .flatten()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    if inodes.is_empty() {
        return None;
    }
    let procs = std::fs::read_dir("/proc").ok()?;
    for entry in procs.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path()) {
                if inodes.iter().any(|i| link.to_string_lossy() == *i) {
                    return Some(pid);
                }
            }
        }
    }
    None
}

fn rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces: the fields start after its closing parenthesis.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_S)
}

/// Samples `pid` until `stop`; `None` when its `/proc` entry cannot be read.
pub async fn watch(pid: u32, stop: Arc<AtomicBool>) -> Option<Usage> {
    let started = Instant::now();
    let cpu_start = cpu_seconds(pid)?;
    let mut peak = rss_mib(pid)?;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        peak = peak.max(rss_mib(pid)?);
    }
    let end = rss_mib(pid)?;
    let cpu = cpu_seconds(pid)? - cpu_start;
    Some(Usage {
        pid,
        peak_rss_mib: crate::stats::round(peak.max(end)),
        end_rss_mib: crate::stats::round(end),
        cpu_percent: crate::stats::round(100.0 * cpu / started.elapsed().as_secs_f64()),
    })
}
