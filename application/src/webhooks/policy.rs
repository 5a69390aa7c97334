//! Where deliveries may go: the guard against server-side request forgery (a webhook is
//! a way to make the service send requests, so it must not reach what only the service
//! can reach — its database, the cloud's metadata address, an admin port on localhost).
//!
//! - Without `PM_WEBHOOK_ALLOWED_HOSTS` only public addresses are allowed: loopback,
//!   private (RFC 1918, unique-local), link-local (the metadata address 169.254.169.254),
//!   shared (CGNAT), documentation, benchmarking, multicast, broadcast and unspecified
//!   addresses are refused.
//! - With it, it is the allow-list: a URL is allowed when its host is one of the names
//!   listed or every address it has is in one of the networks listed (an address is a
//!   `/32` or `/128`). `0.0.0.0/0,::/0` allows everything.
//!
//! The check runs at registration (`422 webhook_url_not_allowed`) and again on every
//! connection: the delivering client resolves names through [`HostPolicy::allows_ip`], so
//! a name that later resolves to a private address (DNS rebinding) is refused too, and
//! redirects are not followed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use url::Url;

/// Why a URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Not an absolute `http`/`https` URL with a host, or it carries credentials or a
    /// fragment.
    #[error("{0}")]
    Invalid(String),
    /// The host or one of its addresses is not allowed.
    #[error("{0}")]
    NotAllowed(String),
    /// The host name does not resolve (at registration).
    #[error("{0}")]
    Unresolvable(String),
}

/// A malformed `PM_WEBHOOK_ALLOWED_HOSTS` entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("PM_WEBHOOK_ALLOWED_HOSTS: {0:?} is neither a host name nor an address or network")]
pub struct PolicyError(pub String);

/// The allow-list (empty: public addresses only).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPolicy {
    names: Vec<String>,
    networks: Vec<IpNet>,
}

impl HostPolicy {
    /// Parses `PM_WEBHOOK_ALLOWED_HOSTS` (comma-separated host names, addresses and
    /// CIDR networks); empty or blank means public addresses only.
    ///
    /// # Errors
    /// [`PolicyError`] naming the first entry that is none of these.
    pub fn parse(raw: &str) -> Result<Self, PolicyError> {
        let mut policy = Self::default();
        for entry in raw.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if let Ok(net) = entry.parse::<IpNet>() {
                policy.networks.push(net);
            } else if let Ok(ip) = entry.parse::<IpAddr>() {
                policy.networks.push(IpNet::from(ip));
            } else if is_host_name(entry) {
                policy.names.push(entry.to_ascii_lowercase());
            } else {
                return Err(PolicyError(entry.to_string()));
            }
        }
        Ok(policy)
    }

    /// Whether an allow-list is set.
    pub fn is_restricted(&self) -> bool {
        !self.names.is_empty() || !self.networks.is_empty()
    }

    /// Whether `host` (a name, lowercase) is listed by name: then any address it resolves
    /// to is allowed (the operator named it).
    pub fn allows_name(&self, host: &str) -> bool {
        self.names.iter().any(|n| n.eq_ignore_ascii_case(host))
    }

    /// Whether a delivery may connect to `ip`.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        if self.is_restricted() {
            self.networks.iter().any(|net| net.contains(&ip))
        } else {
            is_public(ip)
        }
    }

    /// Checks a URL's form and, for an address or a listed name, its host. A name that
    /// is not listed still has to resolve to allowed addresses ([`Self::allows_ip`]),
    /// which the caller checks with its resolver.
    ///
    /// # Errors
    /// [`UrlError`].
    pub fn check_url(&self, raw: &str) -> Result<Target, UrlError> {
        let url = Url::parse(raw).map_err(|e| UrlError::Invalid(format!("url: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(UrlError::Invalid("url: only http and https URLs".into()));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(UrlError::Invalid(
                "url: credentials do not belong in the URL (the signature authenticates)".into(),
            ));
        }
        if url.fragment().is_some() {
            return Err(UrlError::Invalid("url: no fragment".into()));
        }
        if raw.len() > 2048 {
            return Err(UrlError::Invalid("url: at most 2048 characters".into()));
        }
        let port = url.port_or_known_default().unwrap_or(80);
        let target = match url.host() {
            Some(url::Host::Ipv4(ip)) => Target::Address(IpAddr::V4(ip), port),
            Some(url::Host::Ipv6(ip)) => Target::Address(IpAddr::V6(ip), port),
            Some(url::Host::Domain(name)) => {
                let name = name.trim_end_matches('.').to_ascii_lowercase();
                if self.allows_name(&name) {
                    Target::Listed(name, port)
                } else {
                    Target::Name(name, port)
                }
            }
            None => return Err(UrlError::Invalid("url: no host".into())),
        };
        if let Target::Address(ip, _) = target {
            if !self.allows_ip(ip) {
                return Err(UrlError::NotAllowed(format!(
                    "url: {ip} is not an allowed address ({})",
                    self.describe()
                )));
            }
        }
        Ok(target)
    }

    /// For error messages: what is allowed.
    pub fn describe(&self) -> &'static str {
        if self.is_restricted() {
            "only the hosts and networks in PM_WEBHOOK_ALLOWED_HOSTS"
        } else {
            "public addresses only; set PM_WEBHOOK_ALLOWED_HOSTS to allow others"
        }
    }
}

/// Where a checked URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An allowed address literal.
    Address(IpAddr, u16),
    /// A name listed in the allow-list.
    Listed(String, u16),
    /// Any other name: its addresses decide.
    Name(String, u16),
}

fn is_host_name(entry: &str) -> bool {
    entry.len() <= 253
        && entry.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

/// Whether `ip` is a public unicast address (globally routable).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b)) // benchmarking
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local
        || (first & 0xffc0) == 0xfe80 // link-local
        || first == 0x2001 && ip.segments()[1] == 0x0db8 // documentation
        || first == 0x0064 && ip.segments()[1] == 0xff9b) // NAT64 (reaches IPv4 inside)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(raw: &str) -> IpAddr {
        raw.parse().expect("an address")
    }

    #[test]
    fn given_no_allow_list_when_addresses_are_checked_then_only_public_ones_pass() {
        let policy = HostPolicy::default();
        for public in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(policy.allows_ip(ip(public)), "{public}");
        }
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "64:ff9b::7f00:1",
        ] {
            assert!(!policy.allows_ip(ip(private)), "{private}");
        }
    }

    #[test]
    fn given_an_allow_list_when_checked_then_only_its_names_and_networks_pass() {
        let policy = HostPolicy::parse(" receiver.internal , 127.0.0.0/8,::1").expect("valid");
        assert!(policy.allows_ip(ip("127.0.0.1")));
        assert!(policy.allows_ip(ip("::1")));
        assert!(
            !policy.allows_ip(ip("8.8.8.8")),
            "the list replaces the default"
        );
        assert_eq!(
            policy.check_url("http://Receiver.Internal:9000/hook"),
            Ok(Target::Listed("receiver.internal".into(), 9000))
        );
        assert_eq!(
            policy.check_url("https://example.com/hook"),
            Ok(Target::Name("example.com".into(), 443))
        );
        assert_eq!(
            policy.check_url("http://127.0.0.1:8080/"),
            Ok(Target::Address(ip("127.0.0.1"), 8080))
        );
        assert!(matches!(
            policy.check_url("http://10.0.0.1/"),
            Err(UrlError::NotAllowed(_))
        ));
        assert_eq!(
            HostPolicy::parse("ok.example, not a host"),
            Err(PolicyError("not a host".into()))
        );
    }

    #[test]
    fn given_the_default_policy_when_urls_are_checked_then_form_and_address_are_enforced() {
        let policy = HostPolicy::default();
        assert!(matches!(
            policy.check_url("http://127.0.0.1:9/"),
            Err(UrlError::NotAllowed(_))
        ));
        assert!(matches!(
            policy.check_url("http://[::1]/"),
            Err(UrlError::NotAllowed(_))
        ));
        for invalid in [
            "not a url",
            "ftp://example.com/",
            "http://user:pw@example.com/",
            "https://example.com/#x",
            "file:///etc/passwd",
        ] {
            assert!(
                matches!(policy.check_url(invalid), Err(UrlError::Invalid(_))),
                "{invalid}"
            );
        }
        assert_eq!(
            policy.check_url("https://hooks.example.com/pm"),
            Ok(Target::Name("hooks.example.com".into(), 443))
        );
    }
}
