//! What a principal's name may be (TRUST.md "Principals"): 1–100 characters of letters,
//! digits and `._:@-`. Stated here once: the api checks the names it configures with it,
//! and a tool policy's `approvers` name principals by it.

/// The longest principal name, in characters.
pub const MAX_NAME: usize = 100;

/// Why a name is not a principal's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameError {
    /// Empty, or longer than [`MAX_NAME`] characters (how many it has).
    Length(usize),
    /// A character other than a letter, a digit or one of `._:@-`.
    Char(char),
}

/// Whether `name` is a principal's name.
///
/// # Errors
/// The first rule it breaks.
pub fn check_name(name: &str) -> Result<(), NameError> {
    let length = name.chars().count();
    if length == 0 || length > MAX_NAME {
        return Err(NameError::Length(length));
    }
    match name
        .chars()
        .find(|c| !(c.is_alphanumeric() || "._:@-".contains(*c)))
    {
        Some(bad) => Err(NameError::Char(bad)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_names_when_checked_then_letters_digits_and_the_punctuation_of_the_rule_pass() {
        assert_eq!(check_name("alice@example.com"), Ok(()));
        assert_eq!(check_name("svc:ingress-1.eu_west"), Ok(()));
        assert_eq!(check_name(""), Err(NameError::Length(0)));
        assert_eq!(check_name(&"a".repeat(101)), Err(NameError::Length(101)));
        assert_eq!(check_name("two words"), Err(NameError::Char(' ')));
    }
}
