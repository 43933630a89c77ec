//! The process's own metrics, under Prometheus's standard names (the set the Go
//! client exports): CPU time, resident and virtual memory and the latter's limit,
//! open file descriptors and their limit, threads, start time. Read from
//! `/proc/self` at each scrape; where there is no `/proc` (not Linux), they are
//! left out.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

/// The `process_*` metrics.
#[derive(Debug)]
pub struct ProcessCollector;

/// This machine's name, as the kernel has it (`localhost` when it cannot be read).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string())
}

/// What `/proc/self` tells.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    /// The address-space limit (`RLIMIT_AS`); `u64::MAX` when unlimited.
    pub virtual_max_bytes: u64,
    pub open_fds: u64,
    /// The soft limit on open files (`RLIMIT_NOFILE`); `u64::MAX` when unlimited.
    pub max_fds: u64,
    pub threads: u64,
    /// Unix time, in seconds.
    pub start_time: f64,
}

impl ProcessStats {
    /// Reads `/proc/self/stat`, `/proc/self/fd`, `/proc/self/limits` and the boot
    /// time in `/proc/stat`.
    pub fn read() -> Option<ProcessStats> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The fields after the command (which may hold spaces) in parentheses.
        let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        // SAFETY: sysconf only reads a configuration value.
        let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|line| line.strip_prefix("btime ")?.trim().parse::<u64>().ok())?;
        let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
        Some(ProcessStats {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            resident_bytes: field(24)? * page,
            virtual_bytes: field(23)?,
            virtual_max_bytes: soft_limit(&limits, "Max address space")?,
            open_fds: std::fs::read_dir("/proc/self/fd").ok()?.count() as u64,
            max_fds: soft_limit(&limits, "Max open files")?,
            threads: field(20)?,
            start_time: boot as f64 + field(22)? as f64 / ticks,
        })
    }
}

/// The soft limit on the line of `/proc/self/limits` that starts with `name`
/// (`Max open files  1024  524288  files`); "unlimited" is `u64::MAX`.
fn soft_limit(limits: &str, name: &str) -> Option<u64> {
    let line = limits.lines().find_map(|line| line.strip_prefix(name))?;
    match line.split_whitespace().next()? {
        "unlimited" => Some(u64::MAX),
        soft => soft.parse().ok(),
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(stats) = ProcessStats::read() else {
            return Ok(());
        };
        let family = encoder.encode_descriptor(
            "process_cpu_seconds",
            "User and system CPU time spent, in seconds",
            None,
            MetricType::Counter,
        )?;
        ConstCounter::new(stats.cpu_seconds).encode(family)?;
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory, in bytes",
                stats.resident_bytes as f64,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size, in bytes",
                stats.virtual_bytes as f64,
            ),
            (
                "process_virtual_memory_max_bytes",
                "The limit on virtual memory (RLIMIT_AS), in bytes",
                stats.virtual_max_bytes as f64,
            ),
            (
                "process_open_fds",
                "Open file descriptors",
                stats.open_fds as f64,
            ),
            (
                "process_max_fds",
                "The limit on open file descriptors (the soft RLIMIT_NOFILE)",
                stats.max_fds as f64,
            ),
            ("process_threads", "OS threads", stats.threads as f64),
            (
                "process_start_time_seconds",
                "When the process started, in seconds since the epoch",
                stats.start_time,
            ),
        ];
        for (name, help, value) in gauges {
            let family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            ConstGauge::new(value).encode(family)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_soft_limits() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
            Max address space         unlimited            unlimited            bytes\n\
            Max open files            1024                 524288               files\n";
        assert_eq!(soft_limit(limits, "Max open files"), Some(1024));
        assert_eq!(soft_limit(limits, "Max address space"), Some(u64::MAX));
        assert_eq!(soft_limit(limits, "Max processes"), None);
    }

    #[test]
    fn reads_this_process() {
        let stats = ProcessStats::read().expect("/proc/self on Linux");
        assert!(stats.resident_bytes > 0);
        assert!(stats.open_fds >= 3, "stdin, stdout, stderr at least");
        assert!(stats.max_fds >= stats.open_fds, "{stats:?}");
        assert!(stats.virtual_bytes >= stats.resident_bytes, "{stats:?}");
        assert!(stats.virtual_max_bytes >= stats.virtual_bytes, "{stats:?}");
        assert!(stats.threads >= 1, "{stats:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(stats.start_time <= now + 1.0 && stats.start_time > now - 3600.0);
    }
}
