//! Reading one setting's value: parsed with its type's `FromStr` or as a switch, an error
//! naming the setting when it is malformed.

use std::str::FromStr;

use super::SettingError;

/// The error naming setting `name` and what is wrong with its value.
pub(super) fn bad(name: &'static str, why: impl Into<String>) -> SettingError {
    SettingError {
        name,
        why: why.into(),
    }
}

/// Parse an optional setting with its type's `FromStr`, naming the setting on error.
pub(super) fn parsed<T: FromStr<Err = String>>(
    name: &'static str,
    value: Option<String>,
) -> Result<Option<T>, SettingError> {
    value
        .map(|v| v.parse::<T>().map_err(|why| bad(name, why)))
        .transpose()
}

/// A switch, the same for every one: `true`/`false`, `1`/`0`, `on`/`off`, `yes`/`no` in any case.
/// `None` when unset, so each switch picks its own default.
pub(super) fn flag(
    name: &'static str,
    value: Option<String>,
) -> Result<Option<bool>, SettingError> {
    let Some(v) = value else { return Ok(None) };
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "on" | "yes" => Ok(Some(true)),
        "false" | "0" | "off" | "no" => Ok(Some(false)),
        _ => Err(bad(name, format!("`{v}` is neither `on` nor `off`"))),
    }
}

/// A whole number from `min` to `max` (unset: `default`), naming the setting otherwise.
pub(super) fn within(
    name: &'static str,
    value: Option<String>,
    (min, max): (u64, u64),
    default: u64,
) -> Result<u64, SettingError> {
    let Some(v) = value else { return Ok(default) };
    v.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            bad(
                name,
                format!("`{v}` is not a whole number from {min} to {max}"),
            )
        })
}
