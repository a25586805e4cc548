//! Authentication and TLS of connections.
//!
//! As in PostgreSQL's `pg_hba.conf`, the method depends on where a connection comes from:
//! connections from a loopback address use [`ServerConfig::local_auth`] (default `trust`, the
//! quick start's), all others [`ServerConfig::host_auth`] (default `scram-sha-256`).
//! `scram-sha-256` is SASL SCRAM-SHA-256 (RFC 5802, RFC 7677; PostgreSQL's "Password
//! Authentication"), checked by pgwire against the role's stored verifier
//! ([`crate::catalog::roles::PasswordVerifier`]). A wrong password, an unknown role and a
//! role without a password all fail alike, with `28P01 password authentication failed for
//! user "name"`, PostgreSQL's message.
//!
//! TLS (`--tls-cert`, `--tls-key`, PEM files) is rustls through pgwire: a client's
//! `SSLRequest` is accepted, as is a direct TLS handshake with ALPN `postgresql`
//! (PostgreSQL 17's `sslnegotiation=direct`).

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use async_trait::async_trait;
use pgwire::api::auth::{AuthSource, LoginInfo, Password};
use pgwire::error::{PgWireError, PgWireResult};

use crate::catalog::roles::SCRAM_ITERATIONS;
use crate::engine::Engine;
use crate::error::{Error, Result};

/// How a connection proves who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMethod {
    /// Any user name is accepted without a password (`trust`).
    Trust,
    /// SASL SCRAM-SHA-256 with the role's password (`scram-sha-256`).
    ScramSha256,
}

impl FromStr for AuthMethod {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "trust" => Ok(AuthMethod::Trust),
            "scram-sha-256" | "password" => Ok(AuthMethod::ScramSha256),
            _ => Err(format!(
                "invalid authentication method \"{s}\"; allowed: trust, scram-sha-256"
            )),
        }
    }
}

/// The server's connection settings.
#[derive(Clone)]
pub struct ServerConfig {
    /// Authentication of connections from a loopback address (127.0.0.0/8, ::1).
    pub local_auth: AuthMethod,
    /// Authentication of every other connection.
    pub host_auth: AuthMethod,
    /// Accepts TLS when set (see [`tls_acceptor`]).
    pub tls: Option<pgwire::tokio::TlsAcceptor>,
}

impl Default for ServerConfig {
    /// Trust on loopback, SCRAM-SHA-256 elsewhere, no TLS.
    fn default() -> Self {
        ServerConfig {
            local_auth: AuthMethod::Trust,
            host_auth: AuthMethod::ScramSha256,
            tls: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("local_auth", &self.local_auth)
            .field("host_auth", &self.host_auth)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl ServerConfig {
    /// The method for a connection from `peer`.
    pub fn method_for(&self, peer: &std::net::SocketAddr) -> AuthMethod {
        if peer.ip().is_loopback() {
            self.local_auth
        } else {
            self.host_auth
        }
    }
}

/// A TLS acceptor for the certificate chain in `cert` and the private key in `key` (PEM
/// files: the chain's certificates, leaf first; a PKCS#8, PKCS#1 or SEC1 key). Announces
/// ALPN `postgresql`, which direct TLS negotiation requires.
///
/// # Errors
/// [`Error::Io`] when a file cannot be read, has no certificate or key, or the key does not
/// match the certificate.
pub fn tls_acceptor(cert: &Path, key: &Path) -> Result<pgwire::tokio::TlsAcceptor> {
    use pgwire::tokio::tokio_rustls::rustls;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let bad = |what: &str, path: &Path, e: &dyn std::fmt::Display| {
        Error::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("{what} {}: {e}", path.display()),
        ))
    };
    let certs = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad("cannot read the TLS certificate", cert, &e))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad("cannot read the TLS certificate", cert, &e))?;
    if certs.is_empty() {
        return Err(bad("no certificate in", cert, &"PEM file"));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| bad("cannot read the TLS private key", key, &e))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| bad("the TLS key does not fit the certificate", cert, &e))?;
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(pgwire::tokio::TlsAcceptor::from(Arc::new(config)))
}

/// Roles' stored verifiers, for pgwire's SCRAM exchange.
#[derive(Debug)]
pub(super) struct RoleVerifiers {
    pub(super) engine: Arc<Engine>,
}

// The trait's signature elides `LoginInfo`'s lifetime; async_trait needs it written alike.
#[allow(elided_lifetimes_in_paths)]
#[async_trait]
impl AuthSource for RoleVerifiers {
    /// The role's salted password and salt. An unknown role, one without a password or one
    /// that may not log in fails the exchange here (the caller reports them all as a wrong
    /// password, as PostgreSQL does).
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let user = login.user().unwrap_or_default();
        let fail = || PgWireError::InvalidPassword(user.to_string());
        let role = self.engine.role(user).ok_or_else(fail)?;
        let verifier = role.password.filter(|_| role.login).ok_or_else(fail)?;
        if verifier.iterations != SCRAM_ITERATIONS {
            return Err(fail());
        }
        Ok(Password::new(Some(verifier.salt), verifier.salted_password))
    }
}

/// Whether `body` is a well-formed SASLInitialResponse (protocol "Message Formats": the
/// mechanism's name as a NUL-terminated string, then an Int32 length, -1 for no data, and
/// that many bytes). pgwire decodes it without checking the length, so a malformed one is
/// refused before it gets there.
pub(super) fn is_sasl_initial_response(body: &[u8]) -> bool {
    let Some(nul) = body.iter().position(|b| *b == 0) else {
        return false;
    };
    let rest = &body[nul + 1..];
    let Some(len) = rest.get(..4) else {
        return false;
    };
    let len = i32::from_be_bytes([len[0], len[1], len[2], len[3]]);
    len == -1 || usize::try_from(len).is_ok_and(|n| n == rest.len() - 4)
}

/// A FATAL error of the startup phase (the connection is closed after it).
pub(super) fn fatal(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(pgwire::error::ErrorInfo::new(
        "FATAL".to_owned(),
        code.to_owned(),
        message,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_parse_and_bad_ones_name_the_allowed_values() {
        assert_eq!("trust".parse::<AuthMethod>(), Ok(AuthMethod::Trust));
        assert_eq!(
            "SCRAM-SHA-256".parse::<AuthMethod>(),
            Ok(AuthMethod::ScramSha256)
        );
        let e = "md5".parse::<AuthMethod>().unwrap_err();
        assert!(e.contains("trust, scram-sha-256"), "{e}");
    }

    #[test]
    fn malformed_sasl_initial_responses_are_recognised() {
        let mut good = b"SCRAM-SHA-256\0".to_vec();
        good.extend_from_slice(&5i32.to_be_bytes());
        good.extend_from_slice(b"n,,n=");
        assert!(is_sasl_initial_response(&good));
        let mut none = b"SCRAM-SHA-256\0".to_vec();
        none.extend_from_slice(&(-1i32).to_be_bytes());
        assert!(is_sasl_initial_response(&none));
        assert!(!is_sasl_initial_response(b"SCRAM-SHA-256"));
        assert!(!is_sasl_initial_response(b"SCRAM-SHA-256\0\0\0"));
        let mut long = b"SCRAM-SHA-256\0".to_vec();
        long.extend_from_slice(&1_000_000i32.to_be_bytes());
        long.extend_from_slice(b"xxxxx");
        assert!(!is_sasl_initial_response(&long));
        let mut negative = b"SCRAM-SHA-256\0".to_vec();
        negative.extend_from_slice(&(-7i32).to_be_bytes());
        assert!(!is_sasl_initial_response(&negative));
    }

    #[test]
    fn loopback_connections_use_the_local_method() {
        let config = ServerConfig::default();
        assert_eq!(
            config.method_for(&"127.0.0.1:5".parse().unwrap()),
            AuthMethod::Trust
        );
        assert_eq!(
            config.method_for(&"[::1]:5".parse().unwrap()),
            AuthMethod::Trust
        );
        assert_eq!(
            config.method_for(&"10.1.2.3:5".parse().unwrap()),
            AuthMethod::ScramSha256
        );
    }
}
