//! The process's own metrics, under Prometheus's standard names: CPU time, resident
//! memory, open file descriptors, start time. Read from `/proc/self` at each scrape;
//! where there is no `/proc` (not Linux), they are left out.

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
    pub open_fds: u64,
    /// Unix time, in seconds.
    pub start_time: f64,
}

impl ProcessStats {
    /// Reads `/proc/self/stat`, `/proc/self/fd` and the boot time in `/proc/stat`.
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
        Some(ProcessStats {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            resident_bytes: field(24)? * page,
            open_fds: std::fs::read_dir("/proc/self/fd").ok()?.count() as u64,
            start_time: boot as f64 + field(22)? as f64 / ticks,
        })
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
                "process_open_fds",
                "Open file descriptors",
                stats.open_fds as f64,
            ),
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
    fn reads_this_process() {
        let stats = ProcessStats::read().expect("/proc/self on Linux");
        assert!(stats.resident_bytes > 0);
        assert!(stats.open_fds >= 3, "stdin, stdout, stderr at least");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(stats.start_time <= now + 1.0 && stats.start_time > now - 3600.0);
    }
}
