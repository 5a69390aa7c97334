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
