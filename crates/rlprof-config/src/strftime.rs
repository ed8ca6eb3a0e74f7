//! Hydra's `now` resolver: `${now:%Y-%m-%d_%H-%M-%S}` is the current time formatted with
//! Python's `strftime` codes. The time is UTC (verl's jobs run in containers without a local
//! zone). Supported: `%Y %y %m %d %H %M %S %f %j %a %A %b %B %p %I %e %%`; any other code is
//! kept as written, as Python does on Linux for unknown codes.

use std::time::{SystemTime, UNIX_EPOCH};

const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The civil date of a day count since 1970-01-01: (year, month 1-12, day 1-31).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// The current UTC time formatted with `fmt`.
pub(super) fn now(fmt: &str) -> String {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format(fmt, t.as_secs() as i64, t.subsec_micros())
}

/// `fmt` at `secs` seconds (and `micros`) after the epoch, UTC.
pub(super) fn format(fmt: &str, secs: i64, micros: u32) -> String {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    let (hh, mm, ss) = (sod / 3600, sod % 3600 / 60, sod % 60);
    let weekday = (days + 3).rem_euclid(7) as usize;
    let cum = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = cum[m as usize - 1] + d + u32::from(m > 2 && leap(y));
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Y') => out.push_str(&format!("{y}")),
            Some('y') => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Some('m') => out.push_str(&format!("{m:02}")),
            Some('d') => out.push_str(&format!("{d:02}")),
            Some('e') => out.push_str(&format!("{d:>2}")),
            Some('H') => out.push_str(&format!("{hh:02}")),
            Some('I') => out.push_str(&format!("{:02}", (hh + 11) % 12 + 1)),
            Some('p') => out.push_str(if hh < 12 { "AM" } else { "PM" }),
            Some('M') => out.push_str(&format!("{mm:02}")),
            Some('S') => out.push_str(&format!("{ss:02}")),
            Some('f') => out.push_str(&format!("{micros:06}")),
            Some('j') => out.push_str(&format!("{yday:03}")),
            Some('a') => out.push_str(&DAYS[weekday][..3]),
            Some('A') => out.push_str(DAYS[weekday]),
            Some('b') => out.push_str(&MONTHS[m as usize - 1][..3]),
            Some('B') => out.push_str(MONTHS[m as usize - 1]),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::format;

    #[test]
    fn formats_python_codes() {
        // 2024-02-29 13:05:09 UTC was a Thursday, day 60 of a leap year.
        let t = 1_709_211_909;
        assert_eq!(
            format("%Y-%m-%d_%H-%M-%S %a %B %j %y %I%p %%", t, 42),
            "2024-02-29_13-05-09 Thu February 060 24 01PM %"
        );
        assert_eq!(format("%Y-%m-%d", 0, 0), "1970-01-01");
        assert_eq!(format("%f", 0, 42), "000042");
    }
}
