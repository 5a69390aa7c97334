//! `PM_PRINCIPALS_FILE`: principals with their own names, roles, organizations and actors,
//! each known by the SHA-256 of its token — the file can be read by whoever deploys the
//! service without handing them a credential.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::principal::{parse_actors, parse_roles, Principal, Scope, Source};
use super::Digest;

/// The file's shape.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    principals: Vec<Entry>,
}

/// One principal of the file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    token_sha256: String,
    roles: Vec<String>,
    organizations: Vec<String>,
    #[serde(default)]
    actors: Option<Vec<String>>,
}

/// Reads and checks the file: every principal by its token's digest.
///
/// # Errors
/// A message naming the file and the bad entry (by position and name; never a digest).
pub fn load(path: &Path) -> Result<HashMap<Digest, Arc<Principal>>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot be read: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// [`load`] of the file's text.
///
/// # Errors
/// A message naming the bad entry.
pub fn parse(text: &str) -> Result<HashMap<Digest, Arc<Principal>>, String> {
    let file: File =
        serde_json::from_str(text).map_err(|e| format!("not a principals file: {e}"))?;
    let mut by_digest = HashMap::with_capacity(file.principals.len());
    let mut by_name: HashMap<String, Arc<Principal>> = HashMap::new();
    for (index, entry) in file.principals.into_iter().enumerate() {
        let at = |e: String| {
            format!(
                "principal #{} ({:?}): {e}",
                index + 1,
                crate::error::clip(&entry.name)
            )
        };
        let digest = digest_of_hex(&entry.token_sha256).map_err(at)?;
        let principal = Principal::new(
            &entry.name,
            parse_roles(&entry.roles).map_err(at)?,
            Scope::parse(&entry.organizations).map_err(at)?,
            entry
                .actors
                .as_deref()
                .map(parse_actors)
                .transpose()
                .map_err(at)?,
            Source::Token,
        )
        .map_err(at)?;
        // Two tokens of one name (a rotation) must say the same, or the log's name would
        // stand for two different sets of rights.
        let principal = match by_name.get(&entry.name) {
            Some(same) if **same == principal => same.clone(),
            Some(_) => {
                return Err(at(
                    "another entry of this name says other roles, organizations or actors".into(),
                ))
            }
            None => {
                let principal = Arc::new(principal);
                by_name.insert(entry.name.clone(), principal.clone());
                principal
            }
        };
        if by_digest.insert(digest, principal).is_some() {
            return Err(at("its token_sha256 is another entry's too".into()));
        }
    }
    Ok(by_digest)
}

fn digest_of_hex(hex: &str) -> Result<Digest, String> {
    let bad =
        || "token_sha256 must be 64 hexadecimal digits (the SHA-256 of the token)".to_string();
    if hex.len() != 64 {
        return Err(bad());
    }
    let mut digest = [0u8; 32];
    for (i, byte) in digest.iter_mut().enumerate() {
        let pair = hex.get(2 * i..2 * i + 2).ok_or_else(bad)?;
        *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
    }
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{digest, Role};

    fn hex(token: &str) -> String {
        digest(token).iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn given_a_file_when_parsed_then_each_token_digest_finds_its_principal() {
        let text = format!(
            r#"{{"principals": [
                {{"name": "bridge@acme", "token_sha256": "{}", "roles": ["ingress"], "organizations": ["acme"]}},
                {{"name": "ops", "token_sha256": "{}", "roles": ["admin", "analyst"], "organizations": ["*"],
                  "actors": ["0190c0de-0000-7000-8000-000000000001"]}}
            ]}}"#,
            hex("token-of-the-bridge"),
            hex("token-of-ops").to_uppercase()
        );
        let found = parse(&text).expect("valid");
        let bridge = &found[&digest("token-of-the-bridge")];
        assert_eq!(bridge.name(), "bridge@acme");
        assert!(bridge.has(Role::Ingress) && !bridge.has(Role::Admin));
        assert_eq!(bridge.organizations().names(), vec!["acme".to_string()]);
        let ops = &found[&digest("token-of-ops")];
        assert_eq!(ops.actors().map(|a| a.len()), Some(1));
    }

    #[test]
    fn given_bad_entries_when_parsed_then_the_error_names_the_entry() {
        let good = hex("aaaaaaaa");
        let cases = [
            (format!(r#"{{"principals": [{{"name": "a b", "token_sha256": "{good}", "roles": ["llm"], "organizations": ["*"]}}]}}"#), "principal #1"),
            (format!(r#"{{"principals": [{{"name": "x", "token_sha256": "{good}", "roles": ["boss"], "organizations": ["*"]}}]}}"#), "unknown role"),
            (format!(r#"{{"principals": [{{"name": "x", "token_sha256": "{good}", "roles": [], "organizations": ["*"]}}]}}"#), "no roles"),
            (r#"{"principals": [{"name": "x", "token_sha256": "abc", "roles": ["llm"], "organizations": ["*"]}]}"#.to_string(), "64 hexadecimal"),
            (format!(r#"{{"principals": [{{"name": "x", "token_sha256": "{good}", "roles": ["llm"], "organizations": ["*"], "actors": ["nope"]}}]}}"#), "not a UUID"),
            (format!(r#"{{"principals": [{{"name": "x", "token_sha256": "{good}", "roles": ["llm"], "organizations": ["*"], "extra": 1}}]}}"#), "unknown field"),
            (format!(r#"{{"principals": [{{"name": "x", "token_sha256": "{good}", "roles": ["llm"], "organizations": ["*"]}},
                                         {{"name": "y", "token_sha256": "{good}", "roles": ["llm"], "organizations": ["*"]}}]}}"#), "principal #2"),
            (format!(r#"{{"principals": [{{"name": "x", "token_sha256": "{good}", "roles": ["llm"], "organizations": ["*"]}},
                                         {{"name": "x", "token_sha256": "{}", "roles": ["admin"], "organizations": ["*"]}}]}}"#, hex("bbbbbbbb")), "other roles"),
            (format!(r#"{{"principals": [{{"name": "system", "token_sha256": "{good}", "roles": ["llm"], "organizations": ["*"]}}]}}"#), "service's own"),
        ];
        for (text, expected) in cases {
            let error = parse(&text).expect_err(&text);
            assert!(
                error.contains(expected),
                "{error:?} should say {expected:?}"
            );
        }
    }

    #[test]
    fn given_two_tokens_of_one_principal_when_parsed_then_both_sign_in_as_it() {
        let text = format!(
            r#"{{"principals": [
                {{"name": "llm-a", "token_sha256": "{}", "roles": ["llm"], "organizations": ["acme"]}},
                {{"name": "llm-a", "token_sha256": "{}", "roles": ["llm"], "organizations": ["acme"]}}
            ]}}"#,
            hex("old-token-1"),
            hex("new-token-2")
        );
        let found = parse(&text).expect("a rotation is valid");
        assert_eq!(found.len(), 2);
        assert!(Arc::ptr_eq(
            &found[&digest("old-token-1")],
            &found[&digest("new-token-2")]
        ));
    }
}
