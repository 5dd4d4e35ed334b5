//! What the host gives this process: its memory (cgroup-aware) and the
//! process's resident set.

/// Host memory this process may use: the machine's (/proc/meminfo), or its
/// cgroup's limit where that is lower (a container, a systemd
/// `MemoryMax=`), so the budget is never larger than what the OOM killer
/// allows. 0 if unknown.
pub fn total_memory() -> u64 {
    let machine = read_kib("/proc/meminfo", "MemTotal:") * 1024;
    match cgroup_limit() {
        Some(limit) if machine == 0 || limit < machine => limit,
        _ => machine,
    }
}

/// The tightest memory limit of this process's cgroup and its ancestors
/// (cgroup v2 `memory.max`; v1 `memory.limit_in_bytes`), if any is set.
fn cgroup_limit() -> Option<u64> {
    let read = |f: &str| std::fs::read_to_string(f).ok()?.trim().parse::<u64>().ok();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut limits = vec![];
    if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) {
        let mut dir = std::path::PathBuf::from(format!("/sys/fs/cgroup{}", path.trim()));
        loop {
            limits.extend(read(&format!("{}/memory.max", dir.display())));
            if !dir.pop() || !dir.starts_with("/sys/fs/cgroup") {
                break;
            }
        }
    }
    // v1 reports "no limit" as a huge number, which the minimum ignores.
    limits.extend(read("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
    limits.into_iter().min()
}

/// This process's resident set and its peak, in bytes.
pub fn rss() -> (u64, u64) {
    (
        read_kib("/proc/self/status", "VmRSS:") * 1024,
        read_kib("/proc/self/status", "VmHWM:") * 1024,
    )
}

fn read_kib(file: &str, key: &str) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}
