//! The environment a run records: host, kernel, CPU, clock, allocator, and what a VM's host
//! does with memory its guest frees.

use crate::measure::clock;
use crate::result::{Environment, TimeSync};

fn read_trim(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

pub fn probe() -> Environment {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default();
    Environment {
        hostname: read_trim("/proc/sys/kernel/hostname"),
        kernel: read_trim("/proc/sys/kernel/osrelease"),
        cpu_model,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        allowed_cpus: crate::sys::allowed_cpus(),
        started_utc: utc_now(),
        clock: clock::calibrate(),
        malloc: crate::sys::malloc_setting().into(),
        host_memory: host_memory(),
        time_sync: chrony().or_else(ptp),
    }
}

/// What chrony says of this clock, if it runs here and answers within a second
/// (`chronyc -c tracking`: comma-separated, seconds).
fn chrony() -> Option<TimeSync> {
    daemon_says("chronyc", &["-c", "tracking"], parse_chrony)
}

/// What linuxptp's ptp4l says of this host's clock, if one runs here and answers its
/// management client within a second (`pmc -u -b 0 'GET CURRENT_DATA_SET'`).
fn ptp() -> Option<TimeSync> {
    daemon_says("pmc", &["-u", "-b", "0", "GET CURRENT_DATA_SET"], parse_pmc)
}

/// A time daemon's client's answer within a second, parsed; None where none answers.
fn daemon_says(
    program: &str,
    args: &[&str],
    parse: fn(&str) -> Option<TimeSync>,
) -> Option<TimeSync> {
    use std::process::{Command, Stdio};
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    match crate::sys::output_within(child, std::time::Duration::from_secs(1)) {
        Ok(Some(out)) if out.status.success() => parse(&String::from_utf8_lossy(&out.stdout)),
        _ => None,
    }
}

/// pmc's CURRENT_DATA_SET: steps from the grandmaster, the offset from the master and the
/// mean path delay (ns). The bound is the offset plus the path delay: a path slower one way
/// than the other can hide up to that much.
fn parse_pmc(text: &str) -> Option<TimeSync> {
    let field = |name: &str| {
        text.lines()
            .filter_map(|l| l.split_once(name))
            .find_map(|(_, v)| v.trim().parse::<f64>().ok())
    };
    let (steps, offset, delay) = (
        field("stepsRemoved")?,
        field("offsetFromMaster")?,
        field("meanPathDelay")?,
    );
    Some(TimeSync {
        source: format!("ptp (linuxptp), {steps} steps from its grandmaster"),
        bound_ns: (offset.abs() + delay).round() as u64,
        offset_ns: offset.round() as i64,
    })
}

/// `chronyc -c tracking`'s line: reference id, name, stratum, reference time, system time
/// offset, last offset, RMS offset, frequency, residual frequency, skew, root delay, root
/// dispersion, update interval, leap status.
fn parse_chrony(line: &str) -> Option<TimeSync> {
    let f: Vec<&str> = line.trim().split(',').collect();
    let secs = |i: usize| f.get(i)?.trim().parse::<f64>().ok();
    let (offset, delay, dispersion) = (secs(4)?, secs(10)?, secs(11)?);
    Some(TimeSync {
        source: format!("chrony, stratum {}, {}", f.get(2)?.trim(), f.get(1)?.trim()),
        bound_ns: ((dispersion + delay / 2.0) * 1e9).round() as u64,
        offset_ns: (offset * 1e9).round() as i64,
    })
}

/// What this VM's host does with the memory its guest frees, where it takes it back: a first
/// write into such a page then waits for the host (410 MB/s against 3 GB/s on the VM msgperf
/// was built on), which whatever writes more new memory in a run pays (README, Kafka).
fn host_memory() -> String {
    let reporting = std::fs::read_dir("/sys/bus/virtio/drivers/virtio_balloon")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|d| std::fs::read_to_string(d.path().join("features")).ok())
        .any(|f| free_page_reporting(&f));
    if reporting {
        "the host takes back the pages this VM frees (virtio-balloon free page reporting): a first write into one waits for the host".into()
    } else {
        String::new()
    }
}

/// Whether a virtio-balloon device's feature bits, as sysfs lists them (a character per bit,
/// bit 0 first), offer free page reporting (VIRTIO_BALLOON_F_REPORTING, bit 5).
fn free_page_reporting(features: &str) -> bool {
    features.trim().as_bytes().get(5) == Some(&b'1')
}

/// Now as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::{free_page_reporting, parse_chrony, parse_pmc};

    #[test]
    fn chrony_s_tracking_gives_its_bound_and_offset() {
        // As chronyc -c tracking prints it.
        let t = parse_chrony(
            "C0000201,192.0.2.1,3,1764201600.123456789,-0.000012345,-0.000010000,0.000020000,-12.345,-0.001,0.050,0.004000000,0.000500000,64.5,Normal\n",
        )
        .unwrap();
        assert_eq!(t.source, "chrony, stratum 3, 192.0.2.1");
        assert_eq!(t.bound_ns, 2_500_000);
        assert_eq!(t.offset_ns, -12_345);
        assert!(parse_chrony("506 Cannot talk to daemon").is_none());
        assert!(parse_chrony("").is_none());
    }

    #[test]
    fn ptp4l_s_current_data_set_gives_its_bound_and_offset() {
        // As pmc printed it here, beside a ptp4l slave on a veth link (software timestamps).
        let t = parse_pmc(
            "sending: GET CURRENT_DATA_SET\n\tbae7c2.fffe.59aefe-0 seq 0 RESPONSE MANAGEMENT CURRENT_DATA_SET \n\t\tstepsRemoved     1\n\t\toffsetFromMaster -215.0\n\t\tmeanPathDelay    2158.0\n",
        )
        .unwrap();
        assert_eq!(t.source, "ptp (linuxptp), 1 steps from its grandmaster");
        assert_eq!(t.bound_ns, 2_373);
        assert_eq!(t.offset_ns, -215);
        // No ptp4l answered: pmc says only what it sent.
        assert!(parse_pmc("sending: GET CURRENT_DATA_SET\n").is_none());
    }

    #[test]
    fn free_page_reporting_is_bit_5_of_the_balloon_features() {
        // As this VM's balloon lists them: bits 1, 2, 5, 7 and 32.
        assert!(free_page_reporting(
            "0110010100000000000000000000000010000000000000000000000000000000\n"
        ));
        assert!(!free_page_reporting("0110000100000000\n"));
        assert!(!free_page_reporting("01100"));
        assert!(!free_page_reporting(""));
    }
}
