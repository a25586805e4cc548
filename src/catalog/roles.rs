//! Roles (users): their attributes and password verifiers.
//!
//! A role is PostgreSQL's: `CREATE ROLE name [WITH] [LOGIN | NOLOGIN] [SUPERUSER |
//! NOSUPERUSER] [PASSWORD 'text' | PASSWORD NULL]` (`CREATE USER` is the same with `LOGIN` by
//! default). The password is never stored: only its SCRAM-SHA-256 *salted password*
//! (`Hi(password, salt, 4096)`, RFC 5802 §3, PBKDF2-HMAC-SHA-256) with its random salt, which is
//! what the server side of SCRAM needs to check a client's proof.
//!
//! Persisted as JSON under the store's `m/roles` key on every role statement.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// PBKDF2 iterations of a stored verifier: PostgreSQL's default `scram_iterations` (4096),
/// which is also what the server announces to clients in SCRAM's server-first message.
pub const SCRAM_ITERATIONS: u32 = 4096;

/// Bytes of random salt per verifier (PostgreSQL uses 16).
const SALT_BYTES: usize = 16;

/// A stored password: SCRAM-SHA-256's salted password and its salt (raw bytes).
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PasswordVerifier {
    /// PBKDF2 iterations (always [`SCRAM_ITERATIONS`] today).
    pub iterations: u32,
    /// The random salt (16 bytes).
    pub salt: Vec<u8>,
    /// `Hi(SASLprep(password), salt, iterations)`: 32 bytes.
    pub salted_password: Vec<u8>,
}

impl std::fmt::Debug for PasswordVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a verifier: with it a client could be impersonated.
        write!(
            f,
            "PasswordVerifier(SCRAM-SHA-256, {} iterations)",
            self.iterations
        )
    }
}

impl PasswordVerifier {
    /// Hashes `password` with a fresh random salt.
    ///
    /// # Errors
    /// `0A000` for a password that is already a SCRAM verifier (`SCRAM-SHA-256$...`, which
    /// PostgreSQL accepts as is): the server side of SCRAM here needs the salted password,
    /// which a verifier does not contain. [`Error::Internal`] when the system's random source
    /// fails.
    pub fn new(password: &str) -> Result<Self> {
        if password.starts_with("SCRAM-SHA-256$")
            || (password.starts_with("md5") && password.len() == 35)
        {
            return Err(Error::not_supported(
                "pre-hashed passwords (SCRAM-SHA-256$... or md5...) are not supported; give the password itself",
            ));
        }
        let mut salt = vec![0u8; SALT_BYTES];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut salt)
            .map_err(|_| Error::Internal("the system's random source failed".into()))?;
        let salted_password = pgwire::api::auth::sasl::scram::gen_salted_password(
            password,
            &salt,
            SCRAM_ITERATIONS as usize,
        );
        Ok(PasswordVerifier {
            iterations: SCRAM_ITERATIONS,
            salt,
            salted_password,
        })
    }
}

/// One role.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Role {
    /// The role's name (case as written when quoted, else folded to lower case).
    pub name: String,
    /// `SUPERUSER`: may create, alter and drop roles.
    pub superuser: bool,
    /// `LOGIN`: may connect.
    pub login: bool,
    /// The password verifier; `None` for `PASSWORD NULL` (password logins fail).
    pub password: Option<PasswordVerifier>,
}

/// A change of a role's attributes (`ALTER ROLE`), or the attributes given at `CREATE ROLE`.
#[derive(Debug, Clone, Default)]
pub struct RoleChanges {
    /// `SUPERUSER` / `NOSUPERUSER`.
    pub superuser: Option<bool>,
    /// `LOGIN` / `NOLOGIN`.
    pub login: Option<bool>,
    /// `PASSWORD 'text'` (`Some(Some(_))`) or `PASSWORD NULL` (`Some(None)`).
    pub password: Option<Option<PasswordVerifier>>,
}

impl RoleChanges {
    /// Applies the changes to `role`.
    pub fn apply(self, role: &mut Role) {
        if let Some(s) = self.superuser {
            role.superuser = s;
        }
        if let Some(l) = self.login {
            role.login = l;
        }
        if let Some(p) = self.password {
            role.password = p;
        }
    }
}

/// Every role, by name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Roles {
    roles: BTreeMap<String, Role>,
}

impl Roles {
    /// Decodes persisted roles.
    ///
    /// # Errors
    /// [`Error::State`] when the JSON is corrupt.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| Error::State(format!("corrupt roles: {e}")))
    }

    /// Encodes the roles for persistence.
    ///
    /// # Errors
    /// [`Error::Internal`] if serialization fails.
    pub fn to_json(&self) -> Result<Vec<u8>> {
        serde_json::to_vec(self).map_err(|e| Error::Internal(format!("roles encoding: {e}")))
    }

    /// The role named `name`.
    pub fn get(&self, name: &str) -> Option<&Role> {
        self.roles.get(name)
    }

    /// Every role, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Role> {
        self.roles.values()
    }

    /// Adds a role.
    ///
    /// # Errors
    /// `42710` when a role of that name exists.
    pub fn create(&mut self, role: Role) -> Result<()> {
        if self.roles.contains_key(&role.name) {
            return Err(role_exists(&role.name));
        }
        self.roles.insert(role.name.clone(), role);
        Ok(())
    }

    /// Changes a role's attributes.
    ///
    /// # Errors
    /// `42704` when there is no such role.
    pub fn alter(&mut self, name: &str, changes: RoleChanges) -> Result<()> {
        let role = self.roles.get_mut(name).ok_or_else(|| no_such_role(name))?;
        changes.apply(role);
        Ok(())
    }

    /// Renames a role (its password stays: a SCRAM verifier does not depend on the name).
    ///
    /// # Errors
    /// `42704` when there is no role `from`; `42710` when `to` is taken.
    pub fn rename(&mut self, from: &str, to: &str) -> Result<()> {
        if self.roles.contains_key(to) {
            return Err(role_exists(to));
        }
        let mut role = self.roles.remove(from).ok_or_else(|| no_such_role(from))?;
        role.name = to.to_string();
        self.roles.insert(to.to_string(), role);
        Ok(())
    }

    /// Removes a role; `false` when there was none.
    pub fn remove(&mut self, name: &str) -> bool {
        self.roles.remove(name).is_some()
    }
}

/// `42704 role "x" does not exist`.
pub fn no_such_role(name: &str) -> Error {
    Error::catalog("42704", format!("role \"{name}\" does not exist"))
}

fn role_exists(name: &str) -> Error {
    Error::catalog("42710", format!("role \"{name}\" already exists"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifiers_are_salted_and_check_against_the_rfc_computation() {
        let a = PasswordVerifier::new("secret").unwrap();
        let b = PasswordVerifier::new("secret").unwrap();
        assert_eq!(a.salt.len(), 16);
        assert_eq!(a.salted_password.len(), 32);
        assert_ne!(a.salt, b.salt, "each verifier has its own salt");
        assert_ne!(a.salted_password, b.salted_password);
        // Hi() of RFC 5802 is PBKDF2 with HMAC-SHA-256 and a 32-byte output; computed here
        // with ring's PBKDF2, independently of the library that hashed the password.
        let mut expected = [0u8; 32];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            std::num::NonZeroU32::new(4096).unwrap(),
            &a.salt,
            b"secret",
            &mut expected,
        );
        assert_eq!(a.salted_password, expected);
        assert!(!format!("{a:?}").contains("secret"));
    }

    #[test]
    fn pre_hashed_passwords_are_refused() {
        let e = PasswordVerifier::new("SCRAM-SHA-256$4096:abc$def:ghi").unwrap_err();
        assert_eq!(e.sqlstate(), "0A000");
    }

    #[test]
    fn create_alter_rename_remove() {
        let mut roles = Roles::default();
        let role = Role {
            name: "alice".into(),
            superuser: false,
            login: true,
            password: None,
        };
        roles.create(role.clone()).unwrap();
        assert_eq!(roles.create(role).unwrap_err().sqlstate(), "42710");
        roles
            .alter(
                "alice",
                RoleChanges {
                    superuser: Some(true),
                    ..RoleChanges::default()
                },
            )
            .unwrap();
        assert!(roles.get("alice").unwrap().superuser);
        assert_eq!(
            roles
                .alter("bob", RoleChanges::default())
                .unwrap_err()
                .sqlstate(),
            "42704"
        );
        roles.rename("alice", "carol").unwrap();
        assert!(roles.get("alice").is_none());
        let back = Roles::from_json(&roles.to_json().unwrap()).unwrap();
        assert_eq!(back.get("carol").unwrap().name, "carol");
        assert!(roles.remove("carol"));
        assert!(!roles.remove("carol"));
    }
}
