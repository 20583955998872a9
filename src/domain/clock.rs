//! The service's times: RFC 3339 UTC with millisecond precision and fixed width, so that they
//! sort as text.

/// Now, as RFC 3339 UTC with millisecond precision and fixed width, so it sorts as text.
pub fn now() -> String {
    format_time(time::OffsetDateTime::now_utc())
}

/// `t` in the service's form, `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC).
pub fn format_time(t: time::OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}
