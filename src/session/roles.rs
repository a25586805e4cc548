//! `CREATE ROLE / USER`, `ALTER ROLE / USER` and `DROP ROLE / USER`, as PostgreSQL defines
//! them (see its reference pages "CREATE ROLE", "ALTER ROLE", "DROP ROLE"), for the
//! attributes Weir has: `LOGIN`, `SUPERUSER` and `PASSWORD`.
//!
//! Who may run them: a superuser; any role may change its own password. A session whose
//! user is not a role (a trusted loopback connection naming any user, the quick start) acts
//! as a superuser.

use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    AlterRoleOperation, CreateRole, Expr, ObjectType, Password, RoleOption, Statement, Value,
};

use super::{Output, Session};
use crate::catalog::roles::{PasswordVerifier, Role, RoleChanges};
use crate::error::{Error, Result};
use crate::sql::parse::parse_one;

/// Which role statement a text is, from its first two words.
enum Kind {
    Create { user: bool },
    Alter,
    Drop,
}

impl Session {
    /// Runs `sql` when it is a role statement (`words` are its lower-cased words).
    ///
    /// # Errors
    /// `42501` without the privilege; `42710` / `42704` for a taken / missing role; `0A000`
    /// for attributes Weir does not have (`CREATEDB`, `VALID UNTIL`, `IN ROLE`, ...), naming
    /// them; `55006` for dropping the session's own role.
    pub(super) async fn role_statement(
        &mut self,
        sql: &str,
        words: &[String],
    ) -> Result<Option<Output>> {
        let kind = match (
            words.first().map(String::as_str),
            words.get(1).map(String::as_str),
        ) {
            (Some("create"), Some("role")) => Kind::Create { user: false },
            (Some("create"), Some("user")) => Kind::Create { user: true },
            (Some("alter"), Some("role" | "user")) => Kind::Alter,
            (Some("drop"), Some("role" | "user")) => Kind::Drop,
            _ => return Ok(None),
        };
        // `... USER ...` is `... ROLE ...` (with LOGIN by default for CREATE); sqlparser
        // reads PostgreSQL's role options only after ROLE.
        let text = as_role_statement(sql);
        let stmt = parse_one(&text)?;
        let engine = Arc::clone(&self.engine);
        let out = match (kind, stmt) {
            (Kind::Create { user }, Statement::CreateRole(create)) => {
                self.require_superuser("create role")?;
                let tag = if user { "CREATE USER" } else { "CREATE ROLE" };
                for role in new_roles(&create, user)? {
                    engine.create_role(role, create.if_not_exists)?;
                }
                Output::Command(tag.into())
            }
            (Kind::Alter, Statement::AlterRole { name, operation }) => {
                let name = name.value.clone();
                match operation {
                    AlterRoleOperation::WithOptions { options } => {
                        let changes = role_changes(&options)?;
                        let own_password_only = name == self.user
                            && changes.superuser.is_none()
                            && changes.login.is_none();
                        if !own_password_only {
                            self.require_superuser("alter role")?;
                        }
                        engine.alter_role(&name, changes)?;
                    }
                    AlterRoleOperation::RenameRole { role_name } => {
                        self.require_superuser("rename role")?;
                        if name == self.user {
                            return Err(Error::catalog("0A000", "session user cannot be renamed"));
                        }
                        engine.rename_role(&name, &role_name.value)?;
                    }
                    other => {
                        return Err(Error::not_supported(format!(
                            "ALTER ROLE {} is not supported",
                            first_word(&other.to_string())
                        )));
                    }
                }
                Output::Command("ALTER ROLE".into())
            }
            (
                Kind::Drop,
                Statement::Drop {
                    object_type: ObjectType::Role,
                    if_exists,
                    names,
                    ..
                },
            ) => {
                self.require_superuser("drop role")?;
                for n in &names {
                    let name = role_name(n)?;
                    if name == self.user {
                        return Err(Error::catalog("55006", "current user cannot be dropped"));
                    }
                    engine.drop_role(&name, if_exists)?;
                }
                Output::Command("DROP ROLE".into())
            }
            _ => {
                return Err(Error::Parse(format!(
                    "syntax error in role statement: {sql}"
                )));
            }
        };
        Ok(Some(out))
    }

    /// `42501 permission denied to <what>` unless the session's user is a superuser.
    fn require_superuser(&self, what: &str) -> Result<()> {
        if self.is_superuser() {
            Ok(())
        } else {
            Err(Error::plan("42501", format!("permission denied to {what}")))
        }
    }

    /// Whether the session's user is a superuser: a role with `SUPERUSER`, or a name that is
    /// no role (only trusted connections get in without being a role).
    pub fn is_superuser(&self) -> bool {
        self.engine.role(&self.user).is_none_or(|r| r.superuser)
    }
}

/// Replaces the `USER` of `CREATE / ALTER / DROP USER` with `ROLE`.
fn as_role_statement(sql: &str) -> String {
    let trimmed = sql.trim_start();
    let Some(space) = trimmed.find(char::is_whitespace) else {
        return sql.to_string();
    };
    let (verb, rest) = trimmed.split_at(space);
    let rest = rest.trim_start();
    match rest.get(..4) {
        Some(w)
            if w.eq_ignore_ascii_case("user")
                && !rest[4..].starts_with(|c: char| c.is_alphanumeric() || c == '_') =>
        {
            format!("{verb} ROLE{}", &rest[4..])
        }
        _ => sql.to_string(),
    }
}

fn first_word(s: &str) -> String {
    s.split_whitespace().next().unwrap_or_default().to_string()
}

fn role_name(n: &datafusion::sql::sqlparser::ast::ObjectName) -> Result<String> {
    match n.0.as_slice() {
        [part] => part
            .as_ident()
            .map(|i| i.value.clone())
            .ok_or_else(|| Error::Parse(format!("invalid role name: {n}"))),
        _ => Err(Error::Parse(format!("invalid role name: {n}"))),
    }
}

/// The roles a `CREATE ROLE` makes (`CREATE USER` logs in by default).
fn new_roles(create: &CreateRole, user: bool) -> Result<Vec<Role>> {
    let unsupported = [
        (create.inherit.is_some(), "INHERIT"),
        (create.bypassrls.is_some(), "BYPASSRLS"),
        (create.create_db.is_some(), "CREATEDB"),
        (create.create_role.is_some(), "CREATEROLE"),
        (create.replication.is_some(), "REPLICATION"),
        (create.connection_limit.is_some(), "CONNECTION LIMIT"),
        (create.valid_until.is_some(), "VALID UNTIL"),
        (!create.in_role.is_empty(), "IN ROLE"),
        (!create.in_group.is_empty(), "IN GROUP"),
        (!create.role.is_empty(), "ROLE"),
        (!create.user.is_empty(), "USER"),
        (!create.admin.is_empty(), "ADMIN"),
        (create.authorization_owner.is_some(), "AUTHORIZATION"),
    ];
    if let Some((_, option)) = unsupported.iter().find(|(given, _)| *given) {
        return Err(option_not_supported(option));
    }
    let password = match &create.password {
        None => None,
        Some(p) => password_verifier(p)?,
    };
    create
        .names
        .iter()
        .map(|n| {
            Ok(Role {
                name: role_name(n)?,
                superuser: create.superuser.unwrap_or(false),
                login: create.login.unwrap_or(user),
                password: password.clone(),
            })
        })
        .collect()
}

/// The changes an `ALTER ROLE ... WITH options` makes.
fn role_changes(options: &[RoleOption]) -> Result<RoleChanges> {
    let mut changes = RoleChanges::default();
    for option in options {
        match option {
            RoleOption::SuperUser(s) => changes.superuser = Some(*s),
            RoleOption::Login(l) => changes.login = Some(*l),
            RoleOption::Password(p) => changes.password = Some(password_verifier(p)?),
            other => return Err(option_not_supported(&first_word(&other.to_string()))),
        }
    }
    Ok(changes)
}

/// `PASSWORD 'text'` hashed; `PASSWORD NULL` and (as in PostgreSQL) an empty password clear it.
fn password_verifier(p: &Password) -> Result<Option<PasswordVerifier>> {
    match p {
        Password::NullPassword => Ok(None),
        Password::Password(Expr::Value(v)) => match &v.value {
            Value::SingleQuotedString(s) | Value::EscapedStringLiteral(s) if s.is_empty() => {
                Ok(None)
            }
            Value::SingleQuotedString(s) | Value::EscapedStringLiteral(s) => {
                PasswordVerifier::new(s).map(Some)
            }
            Value::Null => Ok(None),
            other => Err(Error::plan(
                "42601",
                format!("a password is a string constant, not {other}"),
            )),
        },
        Password::Password(other) => Err(Error::plan(
            "42601",
            format!("a password is a string constant, not {other}"),
        )),
    }
}

fn option_not_supported(option: &str) -> Error {
    Error::not_supported(format!(
        "role option {option} is not supported (Weir's roles have LOGIN, SUPERUSER and PASSWORD)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_statements_read_as_role_statements() {
        assert_eq!(
            as_role_statement("CREATE USER a PASSWORD 'x'"),
            "CREATE ROLE a PASSWORD 'x'"
        );
        assert_eq!(
            as_role_statement("drop user if exists a"),
            "drop ROLE if exists a"
        );
        assert_eq!(as_role_statement("alter  User a"), "alter ROLE a");
        assert_eq!(as_role_statement("create users"), "create users");
    }
}
