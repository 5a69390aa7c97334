//! Times on the wire: RFC 3339 UTC with microsecond precision (API.md asks for at least
//! milliseconds). PostgreSQL keeps microseconds, so values round-trip exactly.

use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};
use serde::{Deserialize, Deserializer, Serializer};

/// Truncates a time to the microsecond precision every stored time has.
pub fn truncate(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(6)
}

/// Formats a time as `2026-11-22T05:35:27.123456Z`.
pub fn format(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// Serializes a time with [`format`].
pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format(t))
}

/// Deserializes any RFC 3339 time into UTC.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
    let raw = String::deserialize(d)?;
    DateTime::parse_from_rfc3339(&raw)
        .map(|t| t.with_timezone(&Utc))
        .map_err(serde::de::Error::custom)
}

/// An optional time: [`format`]ted, or `null` when absent.
pub mod opt {
    use chrono::{DateTime, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    /// Serializes `Some` with [`super::format`], `None` as `null`.
    pub fn serialize<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => super::serialize(t, s),
            None => s.serialize_none(),
        }
    }

    /// Deserializes `null` or any RFC 3339 time into UTC.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|raw| {
                DateTime::parse_from_rfc3339(&raw)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(serde::de::Error::custom)
            })
            .transpose()
    }
}

/// The earliest time the stores keep: 0001-01-01T00:00:00Z (PostgreSQL has no year 0, and
/// a negative year cannot be written as RFC 3339).
pub fn earliest() -> DateTime<Utc> {
    DateTime::<Utc>::MIN_UTC.with_year_start(1)
}

/// The latest time the stores keep: 9999-12-31T23:59:59.999999Z (RFC 3339 has four-digit
/// years).
pub fn latest() -> DateTime<Utc> {
    DateTime::<Utc>::MIN_UTC.with_year_start(10_000) - chrono::TimeDelta::microseconds(1)
}

trait YearStart {
    fn with_year_start(self, year: i32) -> DateTime<Utc>;
}

impl YearStart for DateTime<Utc> {
    fn with_year_start(self, year: i32) -> DateTime<Utc> {
        use chrono::TimeZone;
        Utc.with_ymd_and_hms(year, 1, 1, 0, 0, 0)
            .single()
            .unwrap_or(self)
    }
}

/// A time outside [`earliest`]..=[`latest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999999Z (UTC), got {0}")]
pub struct OutOfRange(pub DateTime<Utc>);

/// `t` if the stores can keep it.
///
/// # Errors
/// [`OutOfRange`] for a UTC year before 1 or after 9999.
pub fn in_range(t: DateTime<Utc>) -> Result<DateTime<Utc>, OutOfRange> {
    if t < earliest() || t > latest() {
        Err(OutOfRange(t))
    } else {
        Ok(t)
    }
}

/// Deserializes an optional RFC 3339 time (any offset) into UTC, refusing one the stores
/// cannot keep ([`in_range`]).
pub fn deserialize_bounded_option<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<DateTime<Utc>>, D::Error> {
    let Some(raw) = Option::<String>::deserialize(d)? else {
        return Ok(None);
    };
    let t = DateTime::parse_from_rfc3339(&raw)
        .map(|t| t.with_timezone(&Utc))
        .map_err(serde::de::Error::custom)?;
    in_range(t).map(Some).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_times_at_and_beyond_the_stores_range_then_only_the_range_is_kept() {
        assert_eq!(format(&earliest()), "0001-01-01T00:00:00.000000Z");
        assert_eq!(format(&latest()), "9999-12-31T23:59:59.999999Z");
        assert!(in_range(earliest()).is_ok() && in_range(latest()).is_ok());
        let parse = |raw: &str| {
            deserialize_bounded_option(&mut serde_json::Deserializer::from_str(&format!(
                "\"{raw}\""
            )))
        };
        assert!(parse("0001-01-01T00:00:00Z").is_ok());
        assert!(parse("9999-12-31T23:59:59.999Z").is_ok());
        assert!(parse("0001-01-01T00:00:00+01:00").is_err(), "year 0 in UTC");
        assert!(
            parse("9999-12-31T23:30:00-01:00").is_err(),
            "year 10000 in UTC"
        );
    }
}
