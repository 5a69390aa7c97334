//! `PM_AUTH_TOKENS=role:token,…`: one principal per role, named after it, for every
//! organization — the single-tenant configuration, kept working as it was.

use std::collections::HashMap;
use std::fmt;

use super::{digest, Digest, Role};

/// The configured role tokens, found by their SHA-256 as every token is (never compared as
/// text); kept in the clear beside it because the console's cookies are keyed by them.
#[derive(Clone, Default)]
pub struct Tokens(HashMap<Digest, (String, Role)>);

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Tokens({} configured)", self.0.len())
    }
}

impl Tokens {
    /// Parses `role:token,role:token,…` (empty = none).
    ///
    /// # Errors
    /// A message naming the bad entry (never the token).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut tokens = HashMap::new();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (role, token) = entry
                .split_once(':')
                .ok_or_else(|| "entries must look like role:token".to_string())?;
            let role: Role = role.trim().parse()?;
            let token = token.trim();
            if token.len() < 8 {
                return Err(format!("the {role} token is shorter than 8 characters"));
            }
            if tokens
                .insert(digest(token), (token.to_string(), role))
                .is_some()
            {
                return Err(format!(
                    "a token is configured twice (second time for {role})"
                ));
            }
        }
        Ok(Self(tokens))
    }

    /// Whether no token is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The role of `token`, if it is configured.
    pub fn role_of(&self, token: &str) -> Option<Role> {
        self.0.get(&digest(token)).map(|(_, role)| *role)
    }

    /// Every configured token's digest with its role.
    pub fn digests(&self) -> impl Iterator<Item = (&Digest, Role)> {
        self.0.iter().map(|(digest, (_, role))| (digest, *role))
    }

    /// Every configured token with its role.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Role)> {
        self.0.values().map(|(token, role)| (token.as_str(), *role))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_role_tokens_when_parsed_then_roles_known_and_bad_entries_refused() {
        let t = Tokens::parse("ingress:aaaaaaaa, llm:bbbbbbbb").expect("valid");
        assert_eq!(t.role_of("aaaaaaaa"), Some(Role::Ingress));
        assert_eq!(t.role_of("bbbbbbbb"), Some(Role::Llm));
        assert!(Tokens::parse("").expect("empty").is_empty());
        assert!(Tokens::parse("boss:aaaaaaaa").is_err());
        assert!(Tokens::parse("ingress").is_err());
        assert!(Tokens::parse("ingress:short").is_err());
        assert!(Tokens::parse("ingress:aaaaaaaa,llm:aaaaaaaa").is_err());
    }
}
